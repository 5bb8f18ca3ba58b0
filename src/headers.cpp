// Response header fields and the response head reader (abide/headers.h).
#include "abide/headers.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

#include "ascii.h"
#include "decimal.h"
#include "field_kind.h"

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

namespace {

// name[i, i + word.size()) equals the lower-case word ignoring case (word:
// letters and '-'; for those, c | 0x20 folds case and matches nothing else a
// field name may hold).
bool folded_at(std::string_view name, std::size_t i, std::string_view word) noexcept {
  if (i + word.size() > name.size()) return false;
  for (std::size_t k = 0; k < word.size(); ++k) {
    if ((name[i + k] | 0x20) != word[k]) return false;
  }
  return true;
}

// Is there "ratelimit" or "rate-limit" in the name? Looks for 'l' eight bytes
// at a time and checks the words around each one.
bool has_ratelimit(std::string_view name) noexcept {
  auto around = [&](std::size_t i) {
    return folded_at(name, i, "limit") &&
           ((i >= 4 && folded_at(name, i - 4, "rate")) || (i >= 5 && folded_at(name, i - 5, "rate-")));
  };
  const std::size_t n = name.size();
  if constexpr (std::endian::native != std::endian::little) {
    for (std::size_t i = 0; i < n; ++i) {
      if ((name[i] | 0x20) == 'l' && around(i)) return true;
    }
    return false;
  }
  if (n < 9) return false;
  constexpr std::uint64_t kOnes = 0x0101010101010101u;
  constexpr std::uint64_t kHigh = 0x8080808080808080u;
  constexpr std::uint64_t kFold = 0x2020202020202020u;
  constexpr std::uint64_t kL = 0x6C6C6C6C6C6C6C6Cu;  // 'l'
  for (std::size_t base = 0;; base += 8) {
    if (base + 8 > n) base = n - 8;  // the last word overlaps the one before
    std::uint64_t v;
    std::memcpy(&v, name.data() + base, 8);
    const std::uint64_t x = (v | kFold) ^ kL;
    std::uint64_t hit = (x - kOnes) & ~x & kHigh;  // may over-report after a real hit: each is checked
    while (hit != 0) {
      const std::size_t i = base + static_cast<std::size_t>(std::countr_zero(hit)) / 8;
      hit &= hit - 1;
      if (around(i)) return true;
    }
    if (base + 8 == n) return false;
  }
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

FieldKind classify_field(std::string_view name) noexcept {
  switch (name.size()) {
    case 4: return ascii::iequals(name, "date") ? FieldKind::kDate : FieldKind::kOther;
    case 9:
      if (ascii::iequals(name, "ratelimit")) return FieldKind::kRateLimit;
      break;
    case 11:
      if (ascii::iequals(name, "retry-after")) return FieldKind::kRetryAfter;
      break;
    case 14:
      if (ascii::iequals(name, "retry-after-ms")) return FieldKind::kVendorQuota;
      break;
    case 15:
      if (ascii::iequals(name, "ratelimit-limit")) return FieldKind::kRateLimitLimit;
      if (ascii::iequals(name, "ratelimit-reset")) return FieldKind::kRateLimitReset;
      break;
    case 16:
      if (ascii::iequals(name, "ratelimit-policy")) return FieldKind::kRateLimitPolicy;
      break;
    case 17:
      if (ascii::iequals(name, "sforce-limit-info")) return FieldKind::kVendorQuota;
      break;
    case 19:
      if (ascii::iequals(name, "ratelimit-remaining")) return FieldKind::kRateLimitRemaining;
      if (ascii::iequals(name, "ratelimit-partition")) return FieldKind::kRateLimitPartition;
      if (ascii::iequals(name, "x-ms-retry-after-ms")) return FieldKind::kVendorQuota;
      break;
    case 29:
      if (ascii::iequals(name, "x-shopify-shop-api-call-limit")) return FieldKind::kVendorQuota;
      break;
    default: break;
  }
  return has_ratelimit(name) ? FieldKind::kVendorQuota : FieldKind::kOther;
}

void HeaderList::tag(std::string_view name) {
  const FieldKind k = classify_field(name);
  kinds_.push_back(static_cast<std::uint8_t>(k));
  kind_mask_ |= 1u << static_cast<unsigned>(k);
}

HeaderList::HeaderList(std::initializer_list<Header> init) : lines_(init) {
  kinds_.reserve(lines_.size());
  for (const auto& h : lines_) tag(h.name);
}

HeaderList::HeaderList(std::vector<Header> lines) : lines_(std::move(lines)) {
  kinds_.reserve(lines_.size());
  for (const auto& h : lines_) tag(h.name);
}

void HeaderList::reserve(std::size_t n) {
  lines_.reserve(n);
  kinds_.reserve(n);
}

void HeaderList::add(std::string_view name, std::string_view value) {
  lines_.push_back(Header{std::string(name), clean_value(trim_ows(value))});
  tag(name);
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

Result<ResponseHead, HeadError> parse_response_head(std::string_view text, const HeadLimits& limits) {
  std::vector<std::string> global_warnings;
  if (text.size() > limits.max_bytes) {
    global_warnings.push_back("response head longer than " + std::to_string(limits.max_bytes) +
                              " bytes; the rest was not read");
    text = text.substr(0, limits.max_bytes);
    // The line cut in the middle is incomplete: drop it rather than read half a value.
    const std::size_t last_lf = text.rfind('\n');
    text = last_lf == std::string_view::npos ? std::string_view{} : text.substr(0, last_lf + 1);
  }

  std::size_t pos = 0;
  std::size_t line_no = 0;
  // Leading empty lines are tolerated (RFC 9112 2.2 allows them before a start line).
  std::string_view line;
  for (;;) {
    if (pos >= text.size()) return fail(HeadError{"no status line", line_no + 1});
    line = next_line(text, pos);
    ++line_no;
    if (!trim_ows(line).empty()) break;
  }

  ResponseHead head;
  for (;;) {
    // `line` holds a status line candidate.
    head = ResponseHead{};
    if (!parse_status_line(line, head.status, head.reason)) {
      return fail(HeadError{"malformed status line (expected \"HTTP/<version> <3-digit status>\")", line_no});
    }
    WarningSink warn(head.warnings);
    std::vector<Header> fields;
    std::size_t dropped = 0;
    bool ended = false;  // saw the empty line that ends the head
    while (pos < text.size()) {
      line = next_line(text, pos);
      ++line_no;
      if (line.empty()) {
        ended = true;
        break;
      }
      if (is_ows(line.front())) {
        // obs-fold (RFC 9112 5.2): a continuation of the previous line.
        if (fields.empty() || dropped > 0) {
          warn.line(line_no, "continuation line without a field line before it, skipped");
          continue;
        }
        Header& last = fields.back();
        const std::string_view more = trim_ows(line);
        if (last.value.size() + 1 + more.size() > limits.max_value_bytes) {
          warn.line(line_no, "folded value longer than the limit, continuation dropped");
          continue;
        }
        if (!more.empty()) {
          if (!last.value.empty()) last.value.push_back(' ');
          last.value.append(clean_value(more));
        }
        warn.line(line_no, "obsolete line folding in \"" + last.name + "\" replaced by a space");
        continue;
      }
      const std::size_t colon = line.find(':');
      if (colon == std::string_view::npos) {
        warn.line(line_no, "header line without a colon, skipped");
        continue;
      }
      const std::string_view name = line.substr(0, colon);
      if (name.empty() || !std::all_of(name.begin(), name.end(), is_tchar)) {
        warn.line(line_no, "malformed field name, line skipped");
        continue;
      }
      const std::string_view value = trim_ows(line.substr(colon + 1));
      if (value.size() > limits.max_value_bytes) {
        warn.line(line_no, "value of \"" + std::string(name) + "\" longer than " +
                               std::to_string(limits.max_value_bytes) + " bytes, line skipped");
        continue;
      }
      if (fields.size() >= limits.max_lines) {
        ++dropped;
        continue;
      }
      fields.push_back(Header{std::string(name), clean_value(value)});
    }
    head.headers = HeaderList(std::move(fields));
    warn.finish();
    if (dropped > 0) {
      head.warnings.push_back(std::to_string(dropped) + " header lines beyond the limit of " +
                              std::to_string(limits.max_lines) + " were dropped");
    }
    if (!ended) break;
    // Another head follows (redirects, 100 Continue) when the next non-empty
    // line is a status line; anything else is a body and ends the reading.
    std::size_t probe = pos;
    std::size_t probe_no = line_no;
    std::string_view next;
    bool found = false;
    while (probe < text.size()) {
      next = next_line(text, probe);
      ++probe_no;
      if (!trim_ows(next).empty()) {
        found = true;
        break;
      }
    }
    int status = 0;
    std::string reason;
    if (!found || !parse_status_line(next, status, reason)) break;
    pos = probe;
    line_no = probe_no;
    line = next;
  }
  if (!global_warnings.empty()) {
    head.warnings.insert(head.warnings.end(), global_warnings.begin(), global_warnings.end());
  }
  return head;
}

}  // namespace abide
