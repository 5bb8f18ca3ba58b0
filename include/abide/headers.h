// abide/headers.h: response header fields as received, and a reader for a
// response head in text form (status line plus header lines, as `curl -sI`
// prints it).
//
// Names match case-insensitively (RFC 9110 5.1). Field lines are kept one by
// one, in order, because some fields are singletons whose repeated lines must
// not be joined (Retry-After: an HTTP-date contains a comma); list-valued
// fields are joined with ", " (RFC 9110 5.3) by combined().
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "abide/result.h"

namespace abide {

// One field line. The value has no leading or trailing OWS.
struct Header {
  std::string name;
  std::string value;
};

// True when a and b are equal ignoring ASCII case (only A-Z and a-z fold):
// how field names compare.
[[nodiscard]] bool iequals(std::string_view a, std::string_view b) noexcept;

// Bytes a server sent, made safe to show anywhere (terminal, log, warning,
// JSON): printable ASCII stays, a backslash becomes "\\", and every other byte
// (controls such as ESC and BEL, DEL, anything non-ASCII) becomes "\xNN". At
// most max_bytes of input are shown; a longer input ends in "...".
std::string printable(std::string_view bytes, std::size_t max_bytes = 64);

// An ordered list of field lines.
class HeaderList {
 public:
  HeaderList() = default;
  HeaderList(std::initializer_list<Header> init);
  // Takes field lines as they are (values already trimmed and clean).
  explicit HeaderList(std::vector<Header> lines);

  // Reserves room for n field lines.
  void reserve(std::size_t n);

  // Appends a field line; OWS around the value is trimmed, and CR, LF and NUL
  // inside it become SP (RFC 9110 5.5).
  void add(std::string_view name, std::string_view value);

  // The first value of the field, if present.
  std::optional<std::string_view> first(std::string_view name) const noexcept;
  // All values of the field, in order (one per field line).
  std::vector<std::string_view> all(std::string_view name) const;
  // The field's lines joined with ", " (RFC 9110 5.3), if present.
  std::optional<std::string> combined(std::string_view name) const;
  // How many lines the field has.
  std::size_t count(std::string_view name) const noexcept;

  const std::vector<Header>& lines() const noexcept { return lines_; }
  std::size_t size() const noexcept { return lines_.size(); }
  bool empty() const noexcept { return lines_.empty(); }

 private:
  std::vector<Header> lines_;
};

// A response head read from text.
struct ResponseHead {
  int status = 0;      // 100..999
  std::string reason;  // the reason phrase, possibly empty
  HeaderList headers;
  std::vector<std::string> warnings;  // lines skipped, and why
};

// Why a response head was rejected.
struct HeadError {
  std::string message;
  std::size_t line = 0;  // 1-based line number
};

// Limits that keep a hostile head bounded.
struct HeadLimits {
  std::size_t max_bytes = 1 << 20;        // the whole head
  std::size_t max_lines = 10'000;         // header lines kept; the rest are dropped with a warning
  std::size_t max_value_bytes = 1 << 20;  // one field value; a longer line is skipped with a warning
};

// Reads "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 30\r\n..." (CRLF or LF).
// Stops at the first empty line. When the text holds several heads (redirects
// or `100 Continue` followed by the final response, as curl -sIL prints them),
// the last one is returned. Malformed header lines (no colon, bad name) are
// skipped with a warning; obsolete line folding is replaced by a space (with a
// warning); a missing or malformed status line is an error. A head longer than
// limits.max_bytes is read up to that point, with a warning; at most 32
// per-line warnings are listed, the rest are counted.
Result<ResponseHead, HeadError> parse_response_head(std::string_view text, const HeadLimits& limits = {});

}  // namespace abide
