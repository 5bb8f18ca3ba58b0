// http1/response_framing.h: how an HTTP/1 answer's body is delimited and
// whether its connection carries another exchange (RFC 9112 6.3, 9.3), read
// from its final head. Shared by the upstream client, which frames what it
// reads, and the proxy, which checks what it passes on.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "abide/headers.h"

namespace abide::http1 {

// A Content-Length value: one number, or a list of equal ones (RFC 9110 8.6);
// nullopt for anything else (absent too).
[[nodiscard]] std::optional<std::uint64_t> content_length(const HeaderList& headers);

struct ResponseFraming {
  enum class Kind : std::uint8_t {
    kNone,     // no body: an answer to HEAD, a 1xx, 204 or 304
    kLength,   // `length` bytes
    kChunked,  // the chunked coding (http1/chunked.h)
    kClose,    // until the server closes the connection
  };
  Kind kind = Kind::kNone;
  std::uint64_t length = 0;  // kLength
  // Another exchange may follow on the connection (never after kClose).
  bool keep_alive = false;
};

// The framing of an answer to `method` with `status`, `headers` and HTTP
// version `version` (10 or 11, as curl numbers them). Transfer-Encoding wins
// over Content-Length and closes the connection afterwards (a message that
// had both may have been smuggled); a coding other than a final chunked runs
// to the close. nullopt: a Content-Length that is not a number, or lists
// different ones (the answer cannot be framed; RFC 9112 6.3 says fail).
[[nodiscard]] std::optional<ResponseFraming> response_framing(std::string_view method, int status, int version,
                                                              const HeaderList& headers);

}  // namespace abide::http1
