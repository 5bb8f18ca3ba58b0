// What the own clients (HTTP/1.1: plain_transfer.h, HTTP/2: h2_attempt.h)
// take from libcurl's way of sending a request, so that a request reads the
// same to the server whichever client carried it (private to abide::curl).
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <optional>
#include <string_view>
#include <vector>

#include "abide/engine.h"
#include "transport.h"

namespace abide::curl_detail {

// Fields the own clients write themselves, or that would ask the connection
// for what they do not do: a request with one goes to libcurl.
[[nodiscard]] bool steers_connection(std::string_view name) noexcept;

// A path as libcurl sends it: no dot segments (which it removes), their
// percent-encoded forms, or bytes beyond ASCII.
[[nodiscard]] bool path_as_libcurl_sends(std::string_view target) noexcept;

// Whether libcurl would send a body (and Content-Length) with `r`.
[[nodiscard]] bool sends_body(const engine::Request& r) noexcept;

// The socket address of an IP literal `host` (IPv6 without brackets) and
// `port`; false when `host` is not one.
[[nodiscard]] bool ip_address(const std::string& host, std::uint16_t port, bool v6, sockaddr_storage& addr,
                              socklen_t& len) noexcept;

struct SentField {
  std::string_view name;
  std::string_view value;
};
// The fields libcurl sends with `request` under `limits`, Host aside and in
// its order: User-Agent and Accept unless the request has its own, the
// request's fields, Idempotency-Key, and with a body Content-Length (its
// digits written to `length`) and a default Content-Type. Views into
// `request`, `limits` and `length`. A reason instead when a field cannot be
// sent (a name that is no token; CR, LF or NUL in a value).
[[nodiscard]] std::optional<std::string> request_fields(const engine::Request& request, const TransferLimits& limits,
                                                        std::string& length, std::vector<SentField>& out);

// `now` + `d`, or max() for none (zero, negative or beyond a year).
[[nodiscard]] std::chrono::steady_clock::time_point after(std::chrono::steady_clock::time_point now,
                                                          std::chrono::nanoseconds d) noexcept;

// strerror_r's text for `e`.
[[nodiscard]] std::string errno_text(int e);

}  // namespace abide::curl_detail
