// The proxy's reader of HTTP/1 requests (RFC 9112). Every byte comes from a
// caller and may be hostile: each function reads its input once, front to
// back, allocates only what it returns, and names in its errors at most a
// field name (a token, hence printable) cut to a few dozen bytes.
#include "proxy/http1_request.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "ascii.h"
#include "decimal.h"

namespace abide::proxy {
namespace http1_request_detail {  // private to this file (the tool is compiled in batches)

// Empty lines a caller may send before its request line (RFC 9112 2.2 asks
// for at least one to be ignored); beyond this many bytes the head is junk.
constexpr std::size_t kMaxLeadingEmpty = 1024;
constexpr std::size_t kMaxMethod = 32;  // bytes of a method
// Field lines in one head; more is 431, like a head over the byte limit.
constexpr std::size_t kMaxFields = 256;
// Content-Length above this is refused (signed 64-bit offsets downstream).
constexpr std::uint64_t kMaxContentLength = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

Unexpected<HttpError> error(int status, std::string reason) { return fail(HttpError{status, std::move(reason)}); }

// A field name fit for a reason: a token already, but perhaps long.
std::string shown(std::string_view token) { return printable(token, 40); }

// How many bytes of empty lines (CRLF or a bare LF) start `d`; the count
// stops at the first line boundary at or past `limit`, so the answer depends
// only on a bounded prefix, however `d` grows.
std::size_t leading_empty_lines(std::string_view d, std::size_t limit) noexcept {
  std::size_t i = 0;
  while (i < d.size() && i < limit) {
    if (d[i] == '\n') {
      ++i;
    } else if (d[i] == '\r' && i + 1 < d.size() && d[i + 1] == '\n') {
      i += 2;
    } else {
      break;
    }
  }
  return i;
}

// Visible ASCII: what a request target may hold (no CTL, SP, DEL or
// non-ASCII byte; RFC 9112 3.2 has no place for them).
constexpr bool is_vchar(char c) noexcept {
  const auto u = static_cast<unsigned char>(c);
  return u > 0x20 && u < 0x7f;
}

using http1::is_field_byte;

// A byte of uri-host [ ":" port ] (RFC 3986: reg-name, IP literal, IPv4,
// with percent-encoding), which is what Host may hold (RFC 9110 7.2).
constexpr bool is_host_byte(char c) noexcept {
  return ascii::is_alpha(c) || ascii::is_digit(c) ||
         std::string_view("-._~!$&'()*+,;=:[]%").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) noexcept {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return ascii::is_tchar(c); });
}

// Calls f on each non-empty element of a comma-separated list, OWS trimmed
// (RFC 9110 5.6.1: empty elements are ignored). Quoted strings are not
// special: no field read with it carries commas inside quotes.
template <class F>
void for_each_element(std::string_view list, F&& f) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view element = ascii::trim_ows(list.substr(0, comma));
    if (!element.empty()) f(element);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

// Each line of a head in turn, without its end (LF, or CRLF: a CR before
// the LF is part of the line end, any other CR stays in the line).
class Lines {
 public:
  explicit Lines(std::string_view d, std::size_t pos) noexcept : d_(d), pos_(pos) {}
  // False when no complete line is left.
  bool next(std::string_view& line) noexcept {
    if (pos_ >= d_.size()) return false;
    const void* lf = std::memchr(d_.data() + pos_, '\n', d_.size() - pos_);
    if (lf == nullptr) return false;
    const auto end = static_cast<std::size_t>(static_cast<const char*>(lf) - d_.data());
    line = d_.substr(pos_, end - pos_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos_ = end + 1;
    return true;
  }

 private:
  std::string_view d_;
  std::size_t pos_;
};

// The origin-form path and query of a target (RFC 9112 3.2.1, 3.2.2), or an
// error.
Result<std::string, HttpError> read_target(std::string_view method, std::string_view target) {
  if (target.empty()) return error(400, "the request target is empty");
  for (char c : target) {
    if (!is_vchar(c)) return error(400, "the request target holds a space, control or non-ASCII byte");
    if (c == '#') return error(400, "the request target holds a fragment");
  }
  if (target.front() == '/') return std::string(target);
  if (target == "*") {
    if (method != "OPTIONS") return error(400, "the request target * is only for OPTIONS");
    return std::string(target);
  }
  std::size_t scheme = 0;
  if (ascii::istarts_with(target, "http://")) {
    scheme = 7;
  } else if (ascii::istarts_with(target, "https://")) {
    scheme = 8;
  } else {
    return error(400, "the request target is neither a path nor an http(s) URL");
  }
  const std::string_view rest = target.substr(scheme);
  const std::size_t path = rest.find_first_of("/?");
  if (path == 0 || rest.empty()) return error(400, "the request target's URL has no host");
  if (path == std::string_view::npos) return std::string("/");
  const std::string_view tail = rest.substr(path);
  if (tail.front() == '?') return "/" + std::string(tail);
  return std::string(tail);
}

// "HTTP/1.1" and "HTTP/1.0" to their minor version; another HTTP/x.y is 505.
Result<int, HttpError> read_version(std::string_view v) {
  const bool shaped = v.size() == 8 && v.substr(0, 5) == "HTTP/" && ascii::is_digit(v[5]) && v[6] == '.' &&
                      ascii::is_digit(v[7]);
  if (!shaped) return error(400, "the request line does not end in an HTTP version");
  if (v[5] == '1' && (v[7] == '0' || v[7] == '1')) return v[7] - '0';
  return error(505, "HTTP/" + std::string(v.substr(5)) + " is not supported");
}

// The reason for a field line that does not start with a name and a colon.
std::string bad_name_reason(std::string_view line, std::size_t name_end) {
  if (name_end == line.size() || line.find(':', name_end) == std::string_view::npos) {
    return "a field line has no colon";
  }
  if (name_end == 0 && line[0] == ':') return "a field line has an empty name";
  std::size_t i = name_end;
  while (i < line.size() && ascii::is_ows(line[i])) ++i;
  if (i > name_end && i < line.size() && line[i] == ':') {
    return "a field name " + shown(line.substr(0, name_end)) + " is followed by whitespace before its colon";
  }
  return "a field name is not a token";
}

}  // namespace http1_request_detail

std::optional<std::size_t> find_head_end(std::string_view data, std::size_t from) noexcept {
  using namespace http1_request_detail;
  const std::size_t lead = leading_empty_lines(data, kMaxLeadingEmpty);
  // So many empty lines are no request: they end a "head" that
  // parse_request_head rejects, so that the caller is answered promptly.
  if (lead >= kMaxLeadingEmpty) return lead;
  // A line end followed by an empty line is LF [CR] LF: at most three bytes,
  // so an end that the last search could not see starts at from - 2 or later.
  from = std::min(from, data.size());
  std::size_t i = std::max(lead, from >= 2 ? from - 2 : 0);
  while (i < data.size()) {
    const void* lf = std::memchr(data.data() + i, '\n', data.size() - i);
    if (lf == nullptr) return std::nullopt;
    const auto at = static_cast<std::size_t>(static_cast<const char*>(lf) - data.data());
    if (at + 1 >= data.size()) return std::nullopt;
    if (data[at + 1] == '\n') return at + 2;
    if (data[at + 1] == '\r') {
      if (at + 2 >= data.size()) return std::nullopt;
      if (data[at + 2] == '\n') return at + 3;
    }
    i = at + 1;
  }
  return std::nullopt;
}

Result<RequestHead, HttpError> parse_request_head(std::string_view head) {
  using namespace http1_request_detail;
  const std::size_t lead = leading_empty_lines(head, kMaxLeadingEmpty);
  if (lead >= kMaxLeadingEmpty) return error(400, "too many empty lines come before the request line");
  Lines lines(head, lead);

  std::string_view line;
  if (!lines.next(line)) return error(400, "the head does not end with an empty line");
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return error(400, "the request line is not a method, a target and a version");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (!is_token(method)) return error(400, "the method is not a token");
  // No method an upstream implements is this long (the longest registered
  // is 17 bytes); libcurl would refuse it later, as a 502.
  if (method.size() > kMaxMethod) return error(501, "the method is longer than 32 bytes");
  auto version = read_version(line.substr(sp2 + 1));
  if (!version) return fail(std::move(version).error());
  // A reverse proxy has no tunnel to offer: the method, not the syntax, is
  // what it cannot do.
  if (method == "CONNECT") return error(501, "CONNECT is not supported");
  auto path = read_target(method, target);
  if (!path) return fail(std::move(path).error());

  RequestHead out;
  out.method = std::string(method);
  out.target = std::move(path).value();
  out.version_minor = *version;

  std::vector<Header> fields;
  std::size_t hosts = 0;
  bool ended = false;
  while (lines.next(line)) {
    if (line.empty()) {
      ended = true;
      break;
    }
    if (ascii::is_ows(line.front())) return error(400, "a field line starts with whitespace (obsolete line folding)");
    std::size_t name_end = 0;
    while (name_end < line.size() && ascii::is_tchar(line[name_end])) ++name_end;
    if (name_end == 0 || name_end == line.size() || line[name_end] != ':') {
      return error(400, bad_name_reason(line, name_end));
    }
    const std::string_view name = line.substr(0, name_end);
    const std::string_view value = ascii::trim_ows(line.substr(name_end + 1));
    if (!std::all_of(value.begin(), value.end(), is_field_byte)) {
      return error(400, "the value of " + shown(name) + " holds a control byte");
    }
    if (ascii::iequals(name, "Host")) {
      if (++hosts > 1) return error(400, "Host appears more than once");
      if (!std::all_of(value.begin(), value.end(), is_host_byte)) return error(400, "Host is not a host and port");
    }
    if (fields.size() == kMaxFields) return error(431, "the head has more than 256 fields");
    if (fields.empty()) {
      // One pass to size the list: no regrowth, and never beyond the limit.
      const auto rest = static_cast<std::size_t>(std::count(head.begin(), head.end(), '\n'));
      fields.reserve(std::min(rest, kMaxFields));
    }
    fields.push_back(Header{std::string(name), std::string(value)});
  }
  if (!ended) return error(400, "the head does not end with an empty line");
  if (out.version_minor == 1 && hosts == 0) return error(400, "Host is missing");
  out.headers = HeaderList(std::move(fields));
  return out;
}

Result<BodyFraming, HttpError> body_framing(const RequestHead& head) {
  using namespace http1_request_detail;
  bool has_te = false;
  bool has_cl = false;
  for (const auto& h : head.headers.lines()) {
    has_te = has_te || ascii::iequals(h.name, "Transfer-Encoding");
    has_cl = has_cl || ascii::iequals(h.name, "Content-Length");
  }
  if (has_te) {
    // RFC 9112 6.1 and 6.3: either of these lets two readers of the same
    // bytes disagree on where the body ends (request smuggling).
    if (head.version_minor == 0) return error(400, "Transfer-Encoding is not allowed in HTTP/1.0");
    if (has_cl) return error(400, "the request has both Transfer-Encoding and Content-Length");
    std::size_t codings = 0;
    std::size_t chunked = 0;
    bool last_chunked = false;
    bool bad = false;
    bool chunked_params = false;
    std::string_view unsupported;
    for (const auto& h : head.headers.lines()) {
      if (!ascii::iequals(h.name, "Transfer-Encoding")) continue;
      for_each_element(h.value, [&](std::string_view element) {
        const std::size_t semi = element.find(';');
        const std::string_view name = ascii::trim_ows(element.substr(0, semi));
        if (!is_token(name)) {
          bad = true;
          return;
        }
        ++codings;
        last_chunked = ascii::iequals(name, "chunked");
        if (last_chunked) {
          ++chunked;
          chunked_params = chunked_params || semi != std::string_view::npos;
        } else if (unsupported.empty()) {
          unsupported = name;
        }
      });
    }
    if (bad) return error(400, "Transfer-Encoding is not a list of transfer codings");
    if (codings == 0) return error(400, "Transfer-Encoding names no transfer coding");
    if (chunked > 1) return error(400, "Transfer-Encoding applies chunked more than once");
    if (chunked_params) return error(400, "Transfer-Encoding gives chunked parameters");
    if (chunked == 1 && !last_chunked) return error(400, "chunked is not the last transfer coding");
    if (!unsupported.empty()) return error(501, "transfer coding " + shown(unsupported) + " is not supported");
    return BodyFraming{BodyFraming::Kind::kChunked, 0};
  }
  if (!has_cl) return BodyFraming{};

  std::optional<std::uint64_t> length;
  std::optional<HttpError> problem;
  for (const auto& h : head.headers.lines()) {
    if (!ascii::iequals(h.name, "Content-Length")) continue;
    // An empty element is as malformed as a sign: a list is accepted only
    // when it is the same number repeated (RFC 9110 8.6).
    std::string_view list = h.value;
    while (!problem) {
      const std::size_t comma = list.find(',');
      const std::string_view element = ascii::trim_ows(list.substr(0, comma));
      // Too large is named first when the digits before any other byte already are.
      const auto number = abide::detail::read_decimal<std::uint64_t, kMaxContentLength>(element);
      if (number.over) {
        problem = HttpError{413, "Content-Length is too large"};
      } else if (number.digits == 0 || number.digits != element.size()) {
        problem = HttpError{400, "Content-Length is not a number"};
      }
      if (problem) break;
      const std::uint64_t v = number.value;
      if (length && *length != v) {
        problem = HttpError{400, "Content-Length values differ"};
        break;
      }
      length = v;
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
    if (problem) return fail(std::move(*problem));
  }
  return BodyFraming{BodyFraming::Kind::kLength, length.value_or(0)};
}

bool keeps_alive(const RequestHead& head) noexcept {
  using namespace http1_request_detail;
  bool close = false;
  bool keep = false;
  for (const auto& h : head.headers.lines()) {
    if (!ascii::iequals(h.name, "Connection")) continue;
    for_each_element(h.value, [&](std::string_view token) {
      close = close || ascii::iequals(token, "close");
      keep = keep || ascii::iequals(token, "keep-alive");
    });
  }
  if (close) return false;
  return head.version_minor >= 1 || keep;
}

bool expects_continue(const RequestHead& head) noexcept {
  using namespace http1_request_detail;
  // RFC 9110 10.1.1: an HTTP/1.0 caller's expectation is ignored.
  if (head.version_minor < 1) return false;
  bool expects = false;
  for (const auto& h : head.headers.lines()) {
    if (!ascii::iequals(h.name, "Expect")) continue;
    for_each_element(h.value, [&](std::string_view e) { expects = expects || ascii::iequals(e, "100-continue"); });
  }
  return expects;
}

namespace http1_request_detail {


}  // namespace http1_request_detail

}  // namespace abide::proxy
