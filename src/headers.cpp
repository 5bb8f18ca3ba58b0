// Response header fields and the response head reader (abide/headers.h).
#include "abide/headers.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "ascii.h"
#include "decimal.h"

namespace abide {

bool iequals(std::string_view a, std::string_view b) noexcept { return ascii::iequals(a, b); }

namespace {

using ascii::is_ows;
using ascii::is_tchar;
using ascii::trim_ows;

// RFC 9110 5.5: CR, LF and NUL inside a value are replaced with SP.
std::string clean_value(std::string_view v) {
  std::string out(v);
  for (char& c : out) {
    if (c == '\r' || c == '\n' || c == '\0') c = ' ';
  }
  return out;
}

// At most this many per-line warnings; the rest are counted in one summary.
constexpr std::size_t kMaxLineWarnings = 32;

class WarningSink {
 public:
  explicit WarningSink(std::vector<std::string>& out) : out_(out) {}
  void line(std::size_t n, std::string_view what) {
    if (emitted_ < kMaxLineWarnings) {
      out_.push_back("line " + std::to_string(n) + ": " + std::string(what));
      ++emitted_;
    } else {
      ++suppressed_;
    }
  }
  void finish() {
    if (suppressed_ > 0) {
      out_.push_back(std::to_string(suppressed_) + " more header line problems not listed");
    }
  }

 private:
  std::vector<std::string>& out_;
  std::size_t emitted_ = 0;
  std::size_t suppressed_ = 0;
};

// Reads one line from text at pos (LF or CRLF terminated, or the end).
// Returns the line without its terminator and moves pos past it.
std::string_view next_line(std::string_view text, std::size_t& pos) noexcept {
  const std::size_t start = pos;
  const std::size_t lf = text.find('\n', start);
  std::size_t end = lf == std::string_view::npos ? text.size() : lf;
  pos = lf == std::string_view::npos ? text.size() : lf + 1;
  if (end > start && text[end - 1] == '\r') --end;
  return text.substr(start, end - start);
}

using ascii::is_digit;

// "HTTP/1.1 429 Too Many Requests", "HTTP/2 200", "HTTP/2 200 " (curl).
bool parse_status_line(std::string_view line, int& status, std::string& reason) {
  constexpr std::string_view kPrefix = "HTTP/";
  if (line.size() < kPrefix.size() || !ascii::iequals(line.substr(0, kPrefix.size()), kPrefix)) return false;
  std::size_t i = kPrefix.size();
  const std::size_t version_start = i;
  while (i < line.size() && (is_digit(line[i]) || line[i] == '.')) ++i;
  if (i == version_start || !is_digit(line[version_start])) return false;
  if (i >= line.size() || line[i] != ' ') return false;
  ++i;
  const auto code = detail::read_decimal<int, 999, 3>(line.substr(i));
  if (code.digits != 3 || line[i] == '0') return false;
  status = code.value;
  i += 3;
  if (i < line.size() && line[i] != ' ') return false;
  reason = clean_value(trim_ows(i < line.size() ? line.substr(i + 1) : std::string_view{}));
  return true;
}

}  // namespace

std::string printable(std::string_view bytes, std::size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::string_view shown = bytes.substr(0, max_bytes);
  std::string out;
  out.reserve(shown.size() + 3);
  for (const char ch : shown) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  if (bytes.size() > max_bytes) out += "...";
  return out;
}

HeaderList::HeaderList(std::initializer_list<Header> init) : lines_(init) {}

HeaderList::HeaderList(std::vector<Header> lines) : lines_(std::move(lines)) {}

void HeaderList::reserve(std::size_t n) { lines_.reserve(n); }

void HeaderList::add(std::string_view name, std::string_view value) {
  lines_.push_back(Header{std::string(name), clean_value(trim_ows(value))});
}

std::optional<std::string_view> HeaderList::first(std::string_view name) const noexcept {
  for (const auto& h : lines_) {
    if (ascii::iequals(h.name, name)) return std::string_view(h.value);
  }
  return std::nullopt;
}

std::vector<std::string_view> HeaderList::all(std::string_view name) const {
  std::vector<std::string_view> out;
  for (const auto& h : lines_) {
    if (ascii::iequals(h.name, name)) out.emplace_back(h.value);
  }
  return out;
}

std::optional<std::string> HeaderList::combined(std::string_view name) const {
  std::optional<std::string> out;
  for (const auto& h : lines_) {
    if (!ascii::iequals(h.name, name)) continue;
    if (!out) {
      out.emplace(h.value);
    } else {
      out->append(", ");
      out->append(h.value);
    }
  }
  return out;
}

std::size_t HeaderList::count(std::string_view name) const noexcept {
  return static_cast<std::size_t>(
      std::count_if(lines_.begin(), lines_.end(), [&](const Header& h) { return ascii::iequals(h.name, name); }));
}

namespace {

// The lines of a text, one at a time, numbered from 1.
struct LineReader {
  std::string_view text;
  std::size_t pos = 0;
  std::size_t line_no = 0;  // the number of the line read last

  bool done() const noexcept { return pos >= text.size(); }
  std::string_view next() noexcept {
    ++line_no;
    return next_line(text, pos);
  }
};

// The text up to limits.max_bytes; a head cut there loses the line cut in the
// middle (incomplete: dropped rather than half a value read), with a warning.
std::string_view within_limit(std::string_view text, std::size_t max_bytes, std::vector<std::string>& warnings) {
  if (text.size() <= max_bytes) return text;
  warnings.push_back("response head longer than " + std::to_string(max_bytes) + " bytes; the rest was not read");
  text = text.substr(0, max_bytes);
  const std::size_t last_lf = text.rfind('\n');
  return last_lf == std::string_view::npos ? std::string_view{} : text.substr(0, last_lf + 1);
}

// The next line that is not empty (or OWS only), or nullopt at the end.
std::optional<std::string_view> next_non_empty(LineReader& r) noexcept {
  while (!r.done()) {
    const std::string_view line = r.next();
    if (!trim_ows(line).empty()) return line;
  }
  return std::nullopt;
}

bool is_status_line(std::string_view line) {
  int status = 0;
  std::string reason;
  return parse_status_line(line, status, reason);
}

// One head's field lines, as they come: kept, folded into the line before,
// or skipped with a warning.
class FieldLines {
 public:
  FieldLines(const HeadLimits& limits, std::vector<std::string>& warnings) : limits_(limits), warn_(warnings) {}

  // One non-empty line after the status line.
  void add(std::size_t line_no, std::string_view line) {
    if (is_ows(line.front())) {
      fold(line_no, line);
      return;
    }
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      warn_.line(line_no, "header line without a colon, skipped");
      return;
    }
    const std::string_view name = line.substr(0, colon);
    if (name.empty() || !std::all_of(name.begin(), name.end(), is_tchar)) {
      warn_.line(line_no, "malformed field name, line skipped");
      return;
    }
    const std::string_view value = trim_ows(line.substr(colon + 1));
    if (value.size() > limits_.max_value_bytes) {
      warn_.line(line_no, "value of \"" + std::string(name) + "\" longer than " +
                              std::to_string(limits_.max_value_bytes) + " bytes, line skipped");
      return;
    }
    if (fields_.size() >= limits_.max_lines) {
      ++dropped_;
      return;
    }
    fields_.push_back(Header{std::string(name), clean_value(value)});
  }

  // The lines kept, into head; the warnings not listed and the lines dropped
  // are counted there.
  void finish(ResponseHead& head) {
    head.headers = HeaderList(std::move(fields_));
    warn_.finish();
    if (dropped_ > 0) {
      head.warnings.push_back(std::to_string(dropped_) + " header lines beyond the limit of " +
                              std::to_string(limits_.max_lines) + " were dropped");
    }
  }

 private:
  // obs-fold (RFC 9112 5.2): a continuation of the previous line.
  void fold(std::size_t line_no, std::string_view line) {
    if (fields_.empty() || dropped_ > 0) {
      warn_.line(line_no, "continuation line without a field line before it, skipped");
      return;
    }
    Header& last = fields_.back();
    const std::string_view more = trim_ows(line);
    if (last.value.size() + 1 + more.size() > limits_.max_value_bytes) {
      warn_.line(line_no, "folded value longer than the limit, continuation dropped");
      return;
    }
    if (!more.empty()) {
      if (!last.value.empty()) last.value.push_back(' ');
      last.value.append(clean_value(more));
    }
    warn_.line(line_no, "obsolete line folding in \"" + last.name + "\" replaced by a space");
  }

  const HeadLimits& limits_;
  WarningSink warn_;
  std::vector<Header> fields_;
  std::size_t dropped_ = 0;
};

// The field lines after a status line, into head. True when the empty line
// that ends the head was read, false when the text ended first.
bool read_fields(LineReader& r, const HeadLimits& limits, ResponseHead& head) {
  FieldLines fields(limits, head.warnings);
  bool ended = false;
  while (!r.done()) {
    const std::string_view line = r.next();
    if (line.empty()) {
      ended = true;
      break;
    }
    fields.add(r.line_no, line);
  }
  fields.finish(head);
  return ended;
}

}  // namespace

Result<ResponseHead, HeadError> parse_response_head(std::string_view text, const HeadLimits& limits) {
  std::vector<std::string> global_warnings;
  LineReader r{within_limit(text, limits.max_bytes, global_warnings)};
  // Leading empty lines are tolerated (RFC 9112 2.2 allows them before a start line).
  std::optional<std::string_view> line = next_non_empty(r);
  if (!line) return fail(HeadError{"no status line", r.line_no + 1});

  ResponseHead head;
  for (;;) {
    // `line` holds a status line candidate.
    head = ResponseHead{};
    if (!parse_status_line(*line, head.status, head.reason)) {
      return fail(HeadError{"malformed status line (expected \"HTTP/<version> <3-digit status>\")", r.line_no});
    }
    if (!read_fields(r, limits, head)) break;
    // Another head follows (redirects, 100 Continue) when the next non-empty
    // line is a status line; anything else is a body and ends the reading.
    LineReader probe = r;
    line = next_non_empty(probe);
    if (!line || !is_status_line(*line)) break;
    r = probe;
  }
  if (!global_warnings.empty()) {
    head.warnings.insert(head.warnings.end(), global_warnings.begin(), global_warnings.end());
  }
  return head;
}

}  // namespace abide
