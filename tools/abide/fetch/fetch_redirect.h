// `abide fetch -L`: which answers are followed, where to, and the request
// that follows one. Each hop is a request of its own through the engine, so
// that a redirect's Retry-After is obeyed before the next request (RFC 9110
// 10.2.3) like any other hint.
#pragma once

#include <string>
#include <string_view>

#include "abide/client.h"
#include "abide/headers.h"
#include "abide/result.h"

namespace abide::cli {

// 301, 302, 303, 307 and 308: the redirects curl -L follows (with a Location).
[[nodiscard]] bool is_followed_redirect(int status) noexcept;

// The URL a Location names, resolved against the URL it answered (libcurl's
// URL parser, as curl does). Only http and https are followed. The error is
// one sentence, the Location shown printable.
[[nodiscard]] Result<std::string, ErrorMessage> resolve_location(const std::string& base, std::string_view location);

// The request after `previous` was answered `status` with a Location that
// resolved to `next_url`:
//   - 303 becomes GET (HEAD stays HEAD), and so do 301 and 302 for a POST, as
//     curl does; a request turned into a GET sends no body;
//   - Authorization, Cookie and Proxy-Authorization (-u's credentials too: they
//     are an Authorization) go only to the origin of `first_url` (scheme, host
//     and port, as curl 7.88), taken from `headers`, the run's own;
//   - deadline and idempotency key carry over; not_before is the redirect's
//     permitted time, when it gave one;
//   - the pacer key is the caller's to set (the origin may have changed).
[[nodiscard]] Request redirected_request(const Request& previous, int status, const std::string& next_url,
                                         const std::string& first_url, const HeaderList& headers,
                                         const std::optional<WallTime>& not_before);

}  // namespace abide::cli
