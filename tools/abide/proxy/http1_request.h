// What `abide proxy` reads from its callers: HTTP/1.0 and HTTP/1.1 request
// heads and bodies (RFC 9112), from bytes that are normal bad input.
//
// Nothing here reads a socket or allocates without bound: the server buffers
// at most its head limit before find_head_end() says where the head ends, then
// parse_request_head() reads it once; a body is framed by body_framing() and
// a chunked one decoded by ChunkedDecoder as its bytes arrive. Every error
// carries the status to answer with and a reason in printable ASCII (never a
// caller's raw bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "abide/headers.h"
#include "abide/result.h"
#include "http1/chunked.h"

namespace abide::proxy {

// One request head as a caller sent it.
struct RequestHead {
  std::string method;     // a token, as sent (case kept)
  std::string target;     // origin-form "/path?query"; an absolute-form target's path and query
  int version_minor = 1;  // HTTP/1.0 or HTTP/1.1
  HeaderList headers;     // in order; names as sent, values without surrounding whitespace
};

// Why a head or body cannot be used, and the status that says so (the
// library's HTTP/1 framing): 400 (bad syntax), 431 (head too large), 413
// (body too large), 501 (a transfer coding other than chunked), 505 (an HTTP
// version other than 1.0 and 1.1).
using http1::HttpError;
// A chunked body's decoder (http1/chunked.h), for request bodies.
using http1::ChunkedDecoder;

// Where the head that starts `data` ends: the offset just past its empty
// line (CRLF CRLF, or a bare LF LF), or nullopt when it has not ended yet.
// Empty lines before the request line are skipped (RFC 9112 2.2); 1 KiB of
// them ends a "head" at once, which parse_request_head rejects. `from` is how
// much of `data` an earlier call already searched (data then held only those
// bytes), so that feeding a head in small pieces stays linear.
[[nodiscard]] std::optional<std::size_t> find_head_end(std::string_view data, std::size_t from = 0) noexcept;

// Parses a complete head (as find_head_end delimits it; bytes after its
// empty line are not read). Rejects with 400: a bad request line (exactly one
// SP between method, target and version; a line ends in LF or CRLF, a CR
// elsewhere is bad), a method that is not a token, a target that is neither
// origin-form, absolute-form http(s), nor "*" for OPTIONS (any CTL, SP, DEL,
// '#' or non-ASCII byte in it is bad), a field name that is not a token or is
// followed by whitespace before the colon, obsolete line folding, a value
// with a control byte other than HTAB (NUL, CR and LF included), a Host that
// is not a host and port, and HTTP/1.1 without exactly one Host field.
// Other statuses: a version other than HTTP/1.0 and 1.1 is 505, CONNECT is
// 501, more than 256 field lines are 431.
[[nodiscard]] Result<RequestHead, HttpError> parse_request_head(std::string_view head);

// How the body of a request is delimited.
struct BodyFraming {
  enum class Kind : std::uint8_t { kNone, kLength, kChunked };
  Kind kind = Kind::kNone;
  std::uint64_t length = 0;  // kLength
};

// The framing the head states (RFC 9112 6.3): Transfer-Encoding whose last
// coding is chunked (any other coding: 501), else Content-Length (one valid
// value, or a list of equal ones; above 2^63-1: 413), else none. Both fields
// at once, a bad or conflicting Content-Length, Transfer-Encoding in
// HTTP/1.0, chunked twice, with parameters or not last are 400.
[[nodiscard]] Result<BodyFraming, HttpError> body_framing(const RequestHead& head);

// Whether the connection stays open after this exchange: HTTP/1.1 unless
// Connection says close; HTTP/1.0 only with Connection: keep-alive.
[[nodiscard]] bool keeps_alive(const RequestHead& head) noexcept;

// Whether the caller waits for "100 Continue" before its body
// (Expect: 100-continue, HTTP/1.1 only).
[[nodiscard]] bool expects_continue(const RequestHead& head) noexcept;

}  // namespace abide::proxy
