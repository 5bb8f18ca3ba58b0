// Vendor profiles: value semantics, JSON loading, registry, reading headers
// through a profile (abide/profiles.h).
#include "abide/profiles.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <span>
#include <string>
#include <utility>

#include "abide/http_date.h"
#include "always_inline.h"
#include "ascii.h"
#include "field_kind.h"
#include "json_reader.h"
#include "profile_values.h"
#include "profiles_internal.h"

namespace abide::detail {
// Generated from profiles/*.json by cmake/EmbedProfiles.cmake: (file name, text).
std::span<const std::pair<std::string_view, std::string_view>> builtin_profile_files() noexcept;
}  // namespace abide::detail

namespace abide {
namespace {

__extension__ using u128 = unsigned __int128;

constexpr char lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + ('a' - 'A')) : c;
}
constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }
constexpr bool is_ows(char c) noexcept { return c == ' ' || c == '\t'; }

ABIDE_ALWAYS_INLINE inline std::string_view trim(std::string_view v) noexcept {
  while (!v.empty() && is_ows(v.front())) v.remove_prefix(1);
  while (!v.empty() && is_ows(v.back())) v.remove_suffix(1);
  return v;
}

bool istarts_with(std::string_view s, std::string_view prefix) noexcept {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

constexpr bool is_tchar(char c) noexcept {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

// a - b for wall times, saturating.
Duration wall_diff(WallTime a, WallTime b) noexcept {
  const auto x = a.time_since_epoch().count();
  const auto y = b.time_since_epoch().count();
  if (y < 0 && x > Duration::max().count() + y) return Duration::max();
  if (y > 0 && x < Duration::min().count() + y) return Duration::min();
  return Duration{x - y};
}

// Digits only, into a non-negative int64; nullopt when empty, not digits, or too large.
ABIDE_ALWAYS_INLINE inline std::optional<std::int64_t> parse_digits(std::string_view s) noexcept {
  if (s.empty() || s.size() > 18) return std::nullopt;
  std::int64_t v = 0;
  for (char c : s) {
    if (!is_digit(c)) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

struct TimeFormatName {
  TimeFormat format;
  std::string_view name;
};
constexpr TimeFormatName kTimeFormats[] = {
    {TimeFormat::kUnixSeconds, "unix_seconds"},
    {TimeFormat::kUnixSecondsFraction, "unix_seconds_fraction"},
    {TimeFormat::kDeltaSeconds, "delta_seconds"},
    {TimeFormat::kFloatSeconds, "float_seconds"},
    {TimeFormat::kMilliseconds, "milliseconds"},
    {TimeFormat::kGoDuration, "go_duration"},
    {TimeFormat::kRfc3339, "rfc3339"},
    {TimeFormat::kHttpDate, "http_date"},
    {TimeFormat::kUnixMilliseconds, "unix_milliseconds"},
};
struct CountFormatName {
  CountFormat format;
  std::string_view name;
};
constexpr CountFormatName kCountFormats[] = {
    {CountFormat::kInteger, "integer"},
    {CountFormat::kNumber, "number"},
    {CountFormat::kUsedLimit, "used_limit"},
    {CountFormat::kPolicyList, "policy_list"},
};

bool is_absolute(TimeFormat f) noexcept {
  return f == TimeFormat::kUnixSeconds || f == TimeFormat::kUnixSecondsFraction || f == TimeFormat::kRfc3339 ||
         f == TimeFormat::kHttpDate || f == TimeFormat::kUnixMilliseconds;
}

// Unix milliseconds as a wall time, saturating at WallTime's range (18 digits
// of milliseconds are far beyond it).
WallTime unix_milliseconds_saturating(std::int64_t ms) noexcept {
  constexpr std::int64_t kPerMs = 1'000'000;  // Duration is nanoseconds
  if (ms > Duration::max().count() / kPerMs) return WallTime{Duration::max()};
  return WallTime{Duration{ms * kPerMs}};
}

// Atlassian's minute precision "2026-03-26T16:00Z": RFC 3339 without seconds.
std::optional<WallTime> parse_rfc3339_lenient(std::string_view text) noexcept {
  if (auto t = parse_rfc3339(text)) return *t;
  // yyyy-MM-ddTHH:mm followed by the zone: insert ":00".
  if (text.size() < 17 || text.size() > 32) return std::nullopt;
  if (text[13] != ':' || !is_digit(text[14]) || !is_digit(text[15])) return std::nullopt;
  const char z = text[16];
  if (z != 'Z' && z != 'z' && z != '+' && z != '-') return std::nullopt;
  char buf[40];
  const std::string_view head = text.substr(0, 16);
  const std::string_view tail = text.substr(16);
  std::size_t n = 0;
  for (char c : head) buf[n++] = c;
  buf[n++] = ':';
  buf[n++] = '0';
  buf[n++] = '0';
  for (char c : tail) buf[n++] = c;
  if (auto t = parse_rfc3339(std::string_view(buf, n))) return *t;
  return std::nullopt;
}

}  // namespace

// ---- formats ------------------------------------------------------------------

std::string_view to_string(TimeFormat f) noexcept {
  for (const auto& t : kTimeFormats) {
    if (t.format == f) return t.name;
  }
  return "?";
}

std::string_view to_string(CountFormat f) noexcept {
  for (const auto& c : kCountFormats) {
    if (c.format == f) return c.name;
  }
  return "?";
}

std::optional<TimeFormat> time_format_from_string(std::string_view s) noexcept {
  for (const auto& t : kTimeFormats) {
    if (t.name == s) return t.format;
  }
  return std::nullopt;
}

std::optional<CountFormat> count_format_from_string(std::string_view s) noexcept {
  for (const auto& c : kCountFormats) {
    if (c.name == s) return c.format;
  }
  return std::nullopt;
}

// ---- value parsers ----------------------------------------------------------------

namespace {

// whole.frac units (either part may be empty, meaning 0), exact to the
// nanosecond; further digits round up. Digits only; saturates at kMaxDuration.
std::optional<Duration> decimal_parts(std::string_view whole, std::string_view frac, Duration unit) noexcept {
  const auto unit_ns = static_cast<std::uint64_t>(unit.count());
  const auto max = static_cast<u128>(Duration::max().count());
  u128 total = 0;
  bool saturated = false;
  for (char c : whole) {
    if (!is_digit(c)) return std::nullopt;
    if (!saturated) {
      total = total * 10 + static_cast<u128>(c - '0');
      if (total > max) saturated = true;
    }
  }
  if (!saturated) {
    total *= unit_ns;
    if (total > max) saturated = true;
  }
  // The fraction: up to 18 digits exactly, any further non-zero digit rounds up.
  u128 num = 0;
  u128 den = 1;
  bool beyond = false;
  std::size_t digits = 0;
  for (char c : frac) {
    if (!is_digit(c)) return std::nullopt;
    if (digits < 18) {
      num = num * 10 + static_cast<u128>(c - '0');
      den *= 10;
    } else if (c != '0') {
      beyond = true;
    }
    ++digits;
  }
  if (saturated) return kMaxDuration;
  if (num != 0 || beyond) {
    const u128 scaled = num * unit_ns;
    u128 part = scaled / den;
    if (scaled % den != 0 || beyond) ++part;  // never shorter than the value
    total += part;
    if (total > max) return kMaxDuration;
  }
  return Duration{static_cast<std::int64_t>(total)};
}

}  // namespace

std::optional<Duration> parse_decimal_duration(std::string_view text, Duration unit) noexcept {
  if (text.empty() || unit <= Duration::zero()) return std::nullopt;
  const std::size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view frac = dot == std::string_view::npos ? std::string_view{} : text.substr(dot + 1);
  if (whole.empty()) return std::nullopt;                                  // ".5"
  if (dot != std::string_view::npos && frac.empty()) return std::nullopt;  // "2."
  return decimal_parts(whole, frac, unit);
}

std::optional<Duration> parse_go_duration(std::string_view text) noexcept {
  if (text.empty()) return std::nullopt;
  if (text == "0") return Duration::zero();
  Duration total{};
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t start = i;
    while (i < text.size() && (is_digit(text[i]) || text[i] == '.')) ++i;
    if (i == start) return std::nullopt;
    std::string_view number = text.substr(start, i - start);
    // Go accepts "5." and ".5" (normalized below), but not "." or "1.2.3".
    if (number == "." || std::count(number.begin(), number.end(), '.') > 1) return std::nullopt;
    Duration unit{};
    const std::string_view rest = text.substr(i);
    std::size_t unit_len = 0;
    if (rest.starts_with("ns")) {
      unit = std::chrono::nanoseconds{1};
      unit_len = 2;
    } else if (rest.starts_with("us")) {
      unit = std::chrono::microseconds{1};
      unit_len = 2;
    } else if (rest.starts_with("\xC2\xB5s") || rest.starts_with("\xCE\xBCs")) {  // µs, μs
      unit = std::chrono::microseconds{1};
      unit_len = 3;
    } else if (rest.starts_with("ms")) {
      unit = std::chrono::milliseconds{1};
      unit_len = 2;
    } else if (rest.starts_with("s")) {
      unit = std::chrono::seconds{1};
      unit_len = 1;
    } else if (rest.starts_with("m")) {
      unit = std::chrono::minutes{1};
      unit_len = 1;
    } else if (rest.starts_with("h")) {
      unit = std::chrono::hours{1};
      unit_len = 1;
    } else {
      return std::nullopt;
    }
    i += unit_len;
    // Go accepts "5." and ".5" (an empty side is zero).
    const std::size_t dot = number.find('.');
    const std::string_view whole = number.substr(0, dot);
    const std::string_view frac = dot == std::string_view::npos ? std::string_view{} : number.substr(dot + 1);
    const auto part = decimal_parts(whole, frac, unit);
    if (!part) return std::nullopt;
    total = saturating_add(total, *part);
  }
  return total;
}

// The step of a decimal number of `unit`s: the unit over ten per fraction digit.
Duration decimal_step(std::string_view text, Duration unit) noexcept {
  const std::size_t dot = text.find('.');
  if (dot == std::string_view::npos) return unit;
  Duration step = unit;
  for (std::size_t i = dot + 1; i < text.size() && step > Duration{1}; ++i) step /= 10;
  return step;
}

// The step of a Go duration: the unit of its last component ("6m0s": 1 s,
// "20ms": 1 ms, "1.5s": 100 ms).
Duration go_duration_step(std::string_view text) noexcept {
  std::size_t unit_start = text.size();
  while (unit_start > 0 && !is_digit(text[unit_start - 1]) && text[unit_start - 1] != '.') --unit_start;
  const std::string_view unit = text.substr(unit_start);
  Duration u = std::chrono::seconds{1};
  if (unit == "h") u = std::chrono::hours{1};
  else if (unit == "m") u = std::chrono::minutes{1};
  else if (unit == "ms") u = std::chrono::milliseconds{1};
  else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") u = std::chrono::microseconds{1};
  else if (unit == "ns") u = Duration{1};
  std::size_t number_start = unit_start;
  while (number_start > 0 && (is_digit(text[number_start - 1]) || text[number_start - 1] == '.')) --number_start;
  return decimal_step(text.substr(number_start, unit_start - number_start), u);
}

// The step of an RFC 3339 time: its fraction of a second, or a minute when
// it has no seconds (Atlassian's yyyy-MM-ddTHH:mmZ).
Duration rfc3339_step(std::string_view text) noexcept {
  const std::size_t t = text.find_first_of("Tt ");
  if (t == std::string_view::npos) return std::chrono::seconds{1};
  std::size_t i = t + 1;
  int colons = 0;
  while (i < text.size() && (is_digit(text[i]) || text[i] == ':')) colons += text[i++] == ':' ? 1 : 0;
  if (colons < 2) return std::chrono::minutes{1};
  if (i < text.size() && text[i] == '.') {
    std::size_t j = i + 1;
    while (j < text.size() && is_digit(text[j])) ++j;
    return decimal_step(text.substr(i, j - i), std::chrono::seconds{1});
  }
  return std::chrono::seconds{1};
}

std::optional<TimeValue> parse_time_value(std::string_view text, TimeFormat format, WallTime received,
                                          std::optional<WallTime> server_date) noexcept {
  text = trim(text);
  std::optional<WallTime> at;
  Duration step = std::chrono::seconds{1};
  switch (format) {
    case TimeFormat::kUnixSeconds: {
      const auto s = parse_digits(text);
      if (!s) return std::nullopt;
      at = WallTime{seconds_saturating(*s)};
      break;
    }
    case TimeFormat::kUnixSecondsFraction: {
      const auto d = parse_decimal_duration(text, std::chrono::seconds{1});
      if (!d) return std::nullopt;
      at = WallTime{*d};
      step = decimal_step(text, std::chrono::seconds{1});
      break;
    }
    case TimeFormat::kDeltaSeconds: {
      const auto s = parse_digits(text);
      if (!s) return std::nullopt;
      return TimeValue{seconds_saturating(*s), std::nullopt, step};
    }
    case TimeFormat::kFloatSeconds: {
      const auto d = parse_decimal_duration(text, std::chrono::seconds{1});
      if (!d) return std::nullopt;
      return TimeValue{*d, std::nullopt, decimal_step(text, std::chrono::seconds{1})};
    }
    case TimeFormat::kMilliseconds: {
      const auto d = parse_decimal_duration(text, std::chrono::milliseconds{1});
      if (!d) return std::nullopt;
      return TimeValue{*d, std::nullopt, decimal_step(text, std::chrono::milliseconds{1})};
    }
    case TimeFormat::kGoDuration: {
      const auto d = parse_go_duration(text);
      if (!d) return std::nullopt;
      return TimeValue{*d, std::nullopt, go_duration_step(text)};
    }
    case TimeFormat::kRfc3339:
      at = parse_rfc3339_lenient(text);
      if (!at) return std::nullopt;
      step = rfc3339_step(text);
      break;
    case TimeFormat::kHttpDate: {
      auto d = parse_http_date(text, received, ParseMode::kRobust);
      if (!d) return std::nullopt;
      at = d->time;
      break;
    }
    case TimeFormat::kUnixMilliseconds: {
      const auto ms = parse_digits(text);
      if (!ms) return std::nullopt;
      at = unix_milliseconds_saturating(*ms);
      step = std::chrono::milliseconds{1};
      break;
    }
  }
  Duration wait = wall_diff(*at, received);
  if (server_date) wait = std::max(wait, wall_diff(*at, *server_date));
  return TimeValue{std::max(wait, Duration::zero()), at, step};
}

std::optional<std::int64_t> parse_count(std::string_view text, CountFormat format, bool round_up) noexcept {
  text = trim(text);
  switch (format) {
    case CountFormat::kInteger:
      return parse_digits(text);
    case CountFormat::kNumber: {
      const std::size_t dot = text.find('.');
      if (dot == std::string_view::npos) return parse_digits(text);
      const auto whole = parse_digits(text.substr(0, dot));
      const std::string_view frac = text.substr(dot + 1);
      if (!whole || frac.empty()) return std::nullopt;
      bool nonzero = false;
      for (char c : frac) {
        if (!is_digit(c)) return std::nullopt;
        if (c != '0') nonzero = true;
      }
      return *whole + ((round_up && nonzero) ? 1 : 0);
    }
    case CountFormat::kUsedLimit:
    case CountFormat::kPolicyList:
      return std::nullopt;  // not a single count
  }
  return std::nullopt;
}

std::optional<UsedLimit> parse_used_limit(std::string_view text) noexcept {
  text = trim(text);
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(slash + 1);
  std::string_view detail;
  const std::size_t paren = rest.find('(');
  if (paren != std::string_view::npos) {
    if (rest.back() != ')') return std::nullopt;
    detail = rest.substr(paren + 1, rest.size() - paren - 2);
    rest = trim(rest.substr(0, paren));
  }
  const auto used = parse_digits(trim(text.substr(0, slash)));
  const auto limit = parse_digits(trim(rest));
  if (!used || !limit) return std::nullopt;
  return UsedLimit{*used, *limit, detail};
}

std::optional<std::string_view> find_member(std::string_view value, std::string_view key) noexcept {
  while (!value.empty()) {
    const std::size_t semi = value.find(';');
    const std::string_view member = trim(value.substr(0, semi));
    const std::size_t eq = member.find('=');
    if (eq != std::string_view::npos && iequals(trim(member.substr(0, eq)), key)) {
      return trim(member.substr(eq + 1));
    }
    if (semi == std::string_view::npos) break;
    value.remove_prefix(semi + 1);
  }
  return std::nullopt;
}

// ---- Profile ----------------------------------------------------------------------

bool Profile::knows(std::string_view header) const noexcept {
  for (const auto& h : known_headers) {
    if (iequals(h, header)) return true;
  }
  for (const auto& q : quotas) {
    if (!q.header_prefix.empty() && istarts_with(header, q.header_prefix)) return true;
  }
  return false;
}

namespace {

// The host without port, trailing dot or brackets.
std::string_view bare_host(std::string_view host) noexcept {
  host = trim(host);
  if (!host.empty() && host.front() == '[') {
    const std::size_t close = host.find(']');
    return close == std::string_view::npos ? host.substr(1) : host.substr(1, close - 1);
  }
  const std::size_t colon = host.rfind(':');
  if (colon != std::string_view::npos && host.find(':') == colon) host = host.substr(0, colon);
  while (!host.empty() && host.back() == '.') host.remove_suffix(1);
  return host;
}

// 0: no match; otherwise a score (exact beats any suffix, longer suffix beats
// shorter). `host` is already bare (see bare_host).
std::size_t host_score(const Profile& p, std::string_view host) noexcept {
  if (host.empty()) return 0;
  std::size_t best = 0;
  for (const auto& entry : p.hosts) {
    if (entry.front() == '.') {
      // ".github.com": github.com itself, or anything ending in .github.com.
      if (host.size() + 1 == entry.size()) {
        if (iequals(host, std::string_view(entry).substr(1))) best = std::max(best, entry.size());
      } else if (host.size() > entry.size() && iequals(host.substr(host.size() - entry.size()), entry)) {
        best = std::max(best, entry.size());
      }
    } else if (iequals(host, entry)) {
      return std::size_t{1} << 20;
    }
  }
  return best;
}

}  // namespace

bool Profile::matches_host(std::string_view host) const noexcept { return host_score(*this, bare_host(host)) > 0; }

std::string ProfileError::what() const {
  std::string s = file.empty() ? "<profile>" : file;
  if (!field.empty()) s.append(": ").append(field);
  s.append(": ").append(message);
  if (line > 0) s.append(" (line ").append(std::to_string(line)).append(")");
  return s;
}

// ---- loading ----------------------------------------------------------------------

namespace {

using detail::JsonValue;

// Thrown nowhere: every check returns a ProfileError through this context.
class Loader {
 public:
  explicit Loader(std::string_view file) : file_(file) {}

  std::optional<ProfileError> error;

  bool fail(const std::string& path, const JsonValue& v, std::string message) {
    if (!error) error = ProfileError{std::string(file_), path, std::move(message), v.line};
    return false;
  }

  bool expect(const std::string& path, const JsonValue& v, JsonValue::Kind kind) {
    if (v.kind == kind) return true;
    return fail(path, v, "expected " + std::string(detail::to_string(kind)) + ", found " +
                             std::string(detail::to_string(v.kind)));
  }

  bool only_members(const std::string& path, const JsonValue& obj, std::initializer_list<std::string_view> allowed) {
    for (const auto& m : obj.members) {
      if (std::find(allowed.begin(), allowed.end(), m.key) == allowed.end()) {
        return fail(join(path, m.key), m.value, "unknown field");
      }
    }
    return true;
  }

  static std::string join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }
  static std::string index(const std::string& path, std::size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  bool string(const std::string& path, const JsonValue& v, std::string& out, bool non_empty = true) {
    if (!expect(path, v, JsonValue::Kind::kString)) return false;
    if (non_empty && v.string.empty()) return fail(path, v, "must not be empty");
    if (v.string.size() > 1024) return fail(path, v, "longer than 1024 bytes");
    out = v.string;
    return true;
  }

  bool boolean(const std::string& path, const JsonValue& v, bool& out) {
    if (!expect(path, v, JsonValue::Kind::kBool)) return false;
    out = v.boolean;
    return true;
  }

  bool header_name(const std::string& path, const JsonValue& v, std::string& out) {
    if (!string(path, v, out)) return false;
    if (!std::all_of(out.begin(), out.end(), is_tchar)) return fail(path, v, "not a valid header name");
    out = to_lower(out);
    return true;
  }

  bool string_list(const std::string& path, const JsonValue& v, std::vector<std::string>& out, bool headers) {
    if (!expect(path, v, JsonValue::Kind::kArray)) return false;
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      std::string s;
      if (headers ? !header_name(index(path, i), v.items[i], s) : !string(index(path, i), v.items[i], s)) return false;
      out.push_back(std::move(s));
    }
    return true;
  }

  bool status_list(const std::string& path, const JsonValue& v, std::vector<int>& out) {
    if (!expect(path, v, JsonValue::Kind::kArray)) return false;
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      const auto& item = v.items[i];
      if (item.kind != JsonValue::Kind::kNumber || !item.integer || *item.integer < 100 || *item.integer > 999) {
        return fail(index(path, i), item, "expected an HTTP status (an integer from 100 to 999)");
      }
      out.push_back(static_cast<int>(*item.integer));
    }
    return true;
  }

  enum class Role { kCount, kRemaining, kUsedLimit, kTime, kWindow, kText };

  // A field spec: "header-name" or {"header": ..., "key": ..., "format": ...}.
  bool field(const std::string& path, const JsonValue& v, Role role, FieldSpec& out) {
    if (role == Role::kUsedLimit) out.count = CountFormat::kUsedLimit;
    if (v.kind == JsonValue::Kind::kString) return header_name(path, v, out.header);
    if (v.kind != JsonValue::Kind::kObject) {
      return fail(path, v, "expected a header name or an object with \"header\"");
    }
    if (!only_members(path, v, {"header", "key", "format", "first_member"})) return false;
    const JsonValue* header = v.find("header");
    if (header == nullptr) return fail(join(path, "header"), v, "missing");
    if (!header_name(join(path, "header"), *header, out.header)) return false;
    if (const JsonValue* key = v.find("key")) {
      if (!string(join(path, "key"), *key, out.key)) return false;
    }
    if (const JsonValue* fm = v.find("first_member")) {
      if (!boolean(join(path, "first_member"), *fm, out.first_member)) return false;
      if (out.first_member && !out.key.empty()) {
        return fail(join(path, "first_member"), *fm, "give key or first_member, not both");
      }
    }
    if (const JsonValue* format = v.find("format")) {
      const std::string fpath = join(path, "format");
      if (!expect(fpath, *format, JsonValue::Kind::kString)) return false;
      switch (role) {
        case Role::kTime:
        case Role::kWindow: {
          auto f = time_format_from_string(format->string);
          if (!f) return fail(fpath, *format, "unknown time format \"" + format->string + "\"");
          if (role == Role::kWindow && is_absolute(*f)) {
            return fail(fpath, *format, "a window is a length; \"" + format->string + "\" is a point in time");
          }
          out.time = *f;
          break;
        }
        case Role::kCount:
        case Role::kRemaining:
        case Role::kUsedLimit: {
          auto f = count_format_from_string(format->string);
          if (!f) return fail(fpath, *format, "unknown count format \"" + format->string + "\"");
          const bool ok = role == Role::kUsedLimit ? *f == CountFormat::kUsedLimit
                          : role == Role::kRemaining
                              ? (*f == CountFormat::kInteger || *f == CountFormat::kNumber ||
                                 *f == CountFormat::kPolicyList)
                              : (*f == CountFormat::kInteger || *f == CountFormat::kNumber);
          if (!ok) return fail(fpath, *format, "format \"" + format->string + "\" is not allowed here");
          out.count = *f;
          break;
        }
        case Role::kText:
          return fail(fpath, *format, "this field takes no format");
      }
    }
    return true;
  }

  bool quota(const std::string& path, const JsonValue& v, QuotaSpec& q) {
    if (!expect(path, v, JsonValue::Kind::kObject)) return false;
    if (!only_members(path, v,
                      {"policy", "policy_from", "limit", "remaining", "used", "used_limit", "reset", "window_s",
                       "window", "partition_key", "cost", "unit", "header_prefix", "reset_meaning",
                       "window_bounds_wait"})) {
      return false;
    }
    auto opt_field = [&](std::string_view key, Role role, std::optional<FieldSpec>& out) {
      const JsonValue* f = v.find(key);
      if (f == nullptr) return true;
      FieldSpec spec;
      if (!field(join(path, key), *f, role, spec)) return false;
      out = std::move(spec);
      return true;
    };
    if (const JsonValue* p = v.find("policy")) {
      if (!string(join(path, "policy"), *p, q.policy, false)) return false;
    }
    if (!opt_field("policy_from", Role::kText, q.policy_from) || !opt_field("limit", Role::kCount, q.limit) ||
        !opt_field("remaining", Role::kRemaining, q.remaining) || !opt_field("used", Role::kCount, q.used) ||
        !opt_field("used_limit", Role::kUsedLimit, q.used_limit) ||
        !opt_field("window", Role::kWindow, q.window_from) ||
        !opt_field("partition_key", Role::kText, q.partition_key) || !opt_field("cost", Role::kCount, q.cost)) {
      return false;
    }
    if (const JsonValue* r = v.find("reset")) {
      const std::string rpath = join(path, "reset");
      if (r->kind == JsonValue::Kind::kArray) {
        if (r->items.empty()) return fail(rpath, *r, "must not be empty");
        for (std::size_t i = 0; i < r->items.size(); ++i) {
          FieldSpec spec;
          if (!field(index(rpath, i), r->items[i], Role::kTime, spec)) return false;
          q.reset.push_back(std::move(spec));
        }
      } else {
        FieldSpec spec;
        if (!field(rpath, *r, Role::kTime, spec)) return false;
        q.reset.push_back(std::move(spec));
      }
    }
    if (const JsonValue* w = v.find("window_s")) {
      const std::string wpath = join(path, "window_s");
      if (w->kind != JsonValue::Kind::kNumber || !(w->number > 0) || w->number > 1e9) {
        return fail(wpath, *w, "expected a number of seconds greater than 0");
      }
      q.window = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(w->number));
    }
    if (q.window && q.window_from) return fail(join(path, "window"), v, "give window or window_s, not both");
    if (const JsonValue* u = v.find("unit")) {
      if (!string(join(path, "unit"), *u, q.unit)) return false;
    }
    if (const JsonValue* hp = v.find("header_prefix")) {
      if (!header_name(join(path, "header_prefix"), *hp, q.header_prefix)) return false;
    }
    if (const JsonValue* m = v.find("reset_meaning")) {
      const std::string mpath = join(path, "reset_meaning");
      if (!expect(mpath, *m, JsonValue::Kind::kString)) return false;
      if (m->string == "full_refill") {
        q.reset_is_full_refill = true;
      } else if (m->string != "next_request") {
        return fail(mpath, *m, "expected \"next_request\" or \"full_refill\"");
      }
      if (q.reset.empty()) return fail(mpath, *m, "the quota reads no reset");
    }
    if (const JsonValue* b = v.find("window_bounds_wait")) {
      const std::string bpath = join(path, "window_bounds_wait");
      if (!boolean(bpath, *b, q.window_bounds_wait)) return false;
      if (q.window_bounds_wait && !q.window && !q.window_from) return fail(bpath, *b, "the quota has no window");
    }
    if (!q.limit && !q.remaining && !q.used && !q.used_limit && q.reset.empty() && q.header_prefix.empty()) {
      return fail(path, v, "a quota must read at least one of limit, remaining, used, used_limit, reset, header_prefix");
    }
    return true;
  }

  bool profile(const JsonValue& root, Profile& p) {
    if (!expect("", root, JsonValue::Kind::kObject)) return false;
    if (!only_members("", root,
                      {"name", "description", "docs", "hosts", "limited_statuses", "limited_statuses_with_signal",
                       "retry_delays", "retry_verdicts", "ietf_prefixes", "informational", "quotas"})) {
      return false;
    }
    const JsonValue* name = root.find("name");
    if (name == nullptr) return fail("name", root, "missing");
    if (!string("name", *name, p.name)) return false;
    if (!std::all_of(p.name.begin(), p.name.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '_'; })) {
      return fail("name", *name, "use lower-case letters, digits, '-' and '_'");
    }
    if (p.name == "none") return fail("name", *name, "\"none\" is reserved (it disables profiles)");
    if (const JsonValue* d = root.find("description")) {
      if (!string("description", *d, p.description, false)) return false;
    }
    if (const JsonValue* d = root.find("docs")) {
      std::string ignored;
      if (!string("docs", *d, ignored, false)) return false;
    }
    if (const JsonValue* h = root.find("hosts")) {
      if (!string_list("hosts", *h, p.hosts, false)) return false;
      for (std::size_t i = 0; i < p.hosts.size(); ++i) {
        auto& host = p.hosts[i];
        host = to_lower(host);
        const bool ok = host != "." && std::all_of(host.begin(), host.end(), [](char c) {
                          return (c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '.' || c == ':';
                        });
        if (!ok) return fail(index("hosts", i), h->items[i], "not a host name (or .domain suffix)");
      }
    }
    if (const JsonValue* s = root.find("limited_statuses")) {
      if (!status_list("limited_statuses", *s, p.limited_statuses)) return false;
    } else {
      p.limited_statuses = {429};
    }
    if (const JsonValue* s = root.find("limited_statuses_with_signal")) {
      if (!status_list("limited_statuses_with_signal", *s, p.limited_statuses_with_signal)) return false;
    }
    if (const JsonValue* r = root.find("retry_delays")) {
      if (!expect("retry_delays", *r, JsonValue::Kind::kArray)) return false;
      for (std::size_t i = 0; i < r->items.size(); ++i) {
        FieldSpec spec;
        if (!field(index("retry_delays", i), r->items[i], Role::kTime, spec)) return false;
        p.retry_delays.push_back(std::move(spec));
      }
    }
    if (const JsonValue* x = root.find("retry_verdicts")) {
      if (!string_list("retry_verdicts", *x, p.retry_verdicts, true)) return false;
    }
    if (const JsonValue* x = root.find("ietf_prefixes")) {
      if (!string_list("ietf_prefixes", *x, p.ietf_prefixes, true)) return false;
    }
    if (const JsonValue* x = root.find("informational")) {
      if (!string_list("informational", *x, p.informational, true)) return false;
    }
    if (const JsonValue* q = root.find("quotas")) {
      if (!expect("quotas", *q, JsonValue::Kind::kArray)) return false;
      for (std::size_t i = 0; i < q->items.size(); ++i) {
        QuotaSpec spec;
        if (!quota(index("quotas", i), q->items[i], spec)) return false;
        p.quotas.push_back(std::move(spec));
      }
    }
    if (p.quotas.empty() && p.retry_delays.empty() && p.retry_verdicts.empty() && p.limited_statuses.empty() &&
        p.limited_statuses_with_signal.empty()) {
      return fail("quotas", root, "the profile reads nothing");
    }
    return true;
  }

 private:
  std::string_view file_;
};

void compute_known(Profile& p) {
  auto add = [&](const std::optional<FieldSpec>& f) {
    if (f) p.known_headers.push_back(f->header);
  };
  for (const auto& q : p.quotas) {
    add(q.policy_from);
    add(q.limit);
    add(q.remaining);
    add(q.used);
    add(q.used_limit);
    add(q.window_from);
    add(q.partition_key);
    add(q.cost);
    for (const auto& r : q.reset) p.known_headers.push_back(r.header);
  }
  for (const auto& r : p.retry_delays) p.known_headers.push_back(r.header);
  for (const auto& h : p.retry_verdicts) p.known_headers.push_back(h);
  for (const auto& h : p.informational) p.known_headers.push_back(h);
  for (const auto& prefix : p.ietf_prefixes) {
    for (std::string_view base : {"ratelimit", "ratelimit-policy", "ratelimit-limit", "ratelimit-remaining",
                                  "ratelimit-reset"}) {
      p.known_headers.push_back(prefix + std::string(base));
    }
  }
  std::sort(p.known_headers.begin(), p.known_headers.end());
  p.known_headers.erase(std::unique(p.known_headers.begin(), p.known_headers.end()), p.known_headers.end());
  p.overrides_ietf_fields = std::any_of(p.known_headers.begin(), p.known_headers.end(), [](const std::string& h) {
    return h == "ratelimit-limit" || h == "ratelimit-remaining" || h == "ratelimit-reset";
  });
}

}  // namespace

Result<Profile, ProfileError> parse_profile(std::string_view text, std::string_view file) {
  auto json = detail::parse_json(text);
  if (!json) {
    const auto& e = json.error();
    return fail(ProfileError{std::string(file), "", "invalid JSON: " + e.message + " at column " +
                                                        std::to_string(e.column), e.line});
  }
  Loader loader(file);
  Profile p;
  p.file = std::string(file);
  if (!loader.profile(*json, p)) return fail(std::move(*loader.error));
  compute_known(p);
  return p;
}

// ---- registry -----------------------------------------------------------------------

const ProfileRegistry& ProfileRegistry::builtin() {
  static const ProfileRegistry registry = [] {
    ProfileRegistry r;
    for (const auto& [name, text] : detail::builtin_profile_files()) {
      (void)r.load_text(text, name);  // a broken built-in profile fails the profiles test
    }
    return r;
  }();
  return registry;
}

ProfileRegistry ProfileRegistry::with_builtins() { return builtin(); }

namespace {
std::atomic<std::uint64_t> g_generation{0};
}  // namespace

std::uint64_t ProfileRegistry::next_generation() noexcept { return g_generation.fetch_add(1) + 1; }

ProfileRegistry::ProfileRegistry() noexcept : generation_(next_generation()) {}
ProfileRegistry::ProfileRegistry(const ProfileRegistry& other)
    : profiles_(other.profiles_), generation_(next_generation()) {}
ProfileRegistry::ProfileRegistry(ProfileRegistry&& other) noexcept
    : profiles_(std::move(other.profiles_)), generation_(next_generation()) {
  other.generation_ = next_generation();
}
ProfileRegistry& ProfileRegistry::operator=(const ProfileRegistry& other) {
  if (this != &other) {
    profiles_ = other.profiles_;
    generation_ = next_generation();
  }
  return *this;
}
ProfileRegistry& ProfileRegistry::operator=(ProfileRegistry&& other) noexcept {
  if (this != &other) {
    profiles_ = std::move(other.profiles_);
    generation_ = next_generation();
    other.generation_ = next_generation();
  }
  return *this;
}

const Profile* detail::cached_for_host(const ProfileRegistry& registry, std::string_view host) {
  struct Entry {
    const ProfileRegistry* registry = nullptr;
    std::uint64_t generation = 0;
    std::string host;
    const Profile* profile = nullptr;
  };
  thread_local Entry last;
  if (last.registry == &registry && last.generation == registry.generation() && last.host == host) {
    return last.profile;
  }
  const Profile* p = registry.for_host(host);
  if (host.size() <= 253 + 8) {  // a host name, not something to keep around
    last.registry = &registry;
    last.generation = registry.generation();
    last.host.assign(host);
    last.profile = p;
  }
  return p;
}

Result<std::string, ProfileError> ProfileRegistry::load_text(std::string_view text, std::string_view file) {
  auto parsed = parse_profile(text, file);
  if (!parsed) return fail(std::move(parsed.error()));
  generation_ = next_generation();
  auto profile = std::make_shared<const Profile>(std::move(*parsed));
  std::string name = profile->name;
  for (auto& existing : profiles_) {
    if (existing->name == name) {
      existing = std::move(profile);
      return name;
    }
  }
  profiles_.push_back(std::move(profile));
  return name;
}

Result<std::string, ProfileError> ProfileRegistry::load_file(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(ProfileError{file, "", "cannot be read", 0});
  constexpr std::size_t kMax = 1 << 20;
  std::string text;
  char buf[8192];
  while (in) {
    in.read(buf, sizeof buf);
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMax) return fail(ProfileError{file, "", "larger than 1 MiB", 0});
  }
  return load_text(text, file);
}

const Profile* ProfileRegistry::find(std::string_view name) const noexcept {
  for (const auto& p : profiles_) {
    if (iequals(p->name, name)) return p.get();
  }
  return nullptr;
}

const Profile* ProfileRegistry::for_host(std::string_view host) const noexcept {
  host = bare_host(host);
  const Profile* best = nullptr;
  std::size_t best_score = 0;
  for (const auto& p : profiles_) {
    const std::size_t s = host_score(*p, host);
    if (s > best_score) {
      best = p.get();
      best_score = s;
    }
  }
  return best;
}

std::vector<const Profile*> ProfileRegistry::all() const {
  std::vector<const Profile*> out;
  out.reserve(profiles_.size());
  for (const auto& p : profiles_) out.push_back(p.get());
  return out;
}

// ---- reading headers through a profile ------------------------------------------------

namespace {

// The value of a field spec in headers (its first line; the member `key` if given).
struct Found {
  std::string_view value;
  std::string_view name;  // as the server spelled it
  bool present = false;
  bool repeated_differently = false;
};

Found lookup(const detail::LineIndex& headers, const FieldSpec& spec, detail::LineMask& read) {
  Found f;
  headers.for_each(spec.header, [&](std::size_t i, const Header& h) {
    read.set(i);
    if (!f.present) {
      f.present = true;
      f.value = h.value;
      f.name = h.name;
    } else if (h.value != f.value) {
      f.repeated_differently = true;
    }
    return true;
  });
  if (f.present && !spec.key.empty()) {
    auto member = find_member(f.value, spec.key);
    if (!member) {
      f.present = false;
    } else {
      f.value = *member;
    }
  } else if (f.present && spec.first_member) {
    f.value = trim(f.value.substr(0, f.value.find(';')));
  }
  return f;
}

// A server's value in a warning: escaped (no control bytes reach a terminal)
// and short whatever the server sent.
std::string shown(std::string_view v) { return "\"" + printable(v, 64) + "\""; }

// The furthest ahead a vendor's time may lie: no quota window abide knows is
// longer than a month, so a reset or delay beyond a year is garbage, not a
// wait of decades.
constexpr Duration kMaxAhead = std::chrono::hours{24 * 366};

class VendorReader {
 public:
  VendorReader(const Profile& p, const detail::LineIndex& index, WallTime received, std::optional<WallTime> date,
               VendorReading& out, detail::LineMask& read)
      : p_(p), index_(index), h_(index.headers()), received_(received), date_(date), out_(out), read_(read) {}

  void warn_bad(const Found& f, std::string_view what) {
    out_.warnings.push_back(p_.name + ": " + std::string(f.name) + " " + shown(f.value) + " ignored: " +
                            std::string(what));
  }

  Found get(const FieldSpec& spec) {
    Found f = lookup(index_, spec, read_);
    if (f.repeated_differently) {
      out_.warnings.push_back(p_.name + ": " + std::string(f.name) +
                              " has several different values; the first is used");
    }
    return f;
  }

  std::optional<std::int64_t> count(const std::optional<FieldSpec>& spec, bool round_up) {
    if (!spec) return std::nullopt;
    const Found f = get(*spec);
    if (!f.present) return std::nullopt;
    auto v = parse_count(f.value, spec->count, round_up);
    if (!v) warn_bad(f, "not a non-negative count");
    return v;
  }

  std::optional<TimeValue> time(const FieldSpec& spec) {
    const Found f = get(spec);
    if (!f.present) return std::nullopt;
    auto v = parse_time_value(f.value, spec.time, received_, date_);
    if (!v) {
      warn_bad(f, "not " + std::string(to_string(spec.time)));
      return v;
    }
    // Unix milliseconds before 2001 are most likely seconds sent under a
    // milliseconds name: as milliseconds they name 1970 ("retry now"), as a
    // delay weeks. Neither is safe: the value is ignored.
    if (v->at && spec.time == TimeFormat::kUnixMilliseconds &&
        v->at->time_since_epoch() < std::chrono::seconds{1'000'000'000}) {
      warn_bad(f, "too small for unix_milliseconds");
      return std::nullopt;
    }
    // A "Unix time" before 2001 is no timestamp: some servers send seconds
    // from now under the same name (a GitLab merge request shows 1800). Read
    // it as seconds from now, which can only make the wait longer.
    if (v->at && (spec.time == TimeFormat::kUnixSeconds || spec.time == TimeFormat::kUnixSecondsFraction) &&
        v->at->time_since_epoch() < std::chrono::seconds{1'000'000'000}) {
      const TimeValue delay{v->at->time_since_epoch(), std::nullopt, v->resolution};
      if (delay.from_receipt > kMaxAhead) {
        warn_bad(f, "more than a year ahead");
        return std::nullopt;
      }
      out_.warnings.push_back(p_.name + ": " + std::string(f.name) + " " + shown(f.value) +
                              " is too small for Unix time; read as seconds from receipt");
      return delay;
    }
    if (v->from_receipt > kMaxAhead) {
      warn_bad(f, "more than a year ahead");
      return std::nullopt;
    }
    return v;
  }

  void quota(const QuotaSpec& spec) {
    if (!spec.header_prefix.empty()) {
      prefixed(spec);
      return;
    }
    if (spec.remaining && spec.remaining->count == CountFormat::kPolicyList) {
      policy_list(spec);
      return;
    }
    // Built in place (no moves); taken back out when the response has none of it.
    QuotaObservation& q = out_.quota.emplace_back();
    q.source = QuotaSource::kVendor;
    q.profile.assign(p_.name);
    if (spec.unit != q.unit) q.unit.assign(spec.unit);
    bool any = false;
    bool named = false;
    if (spec.policy_from) {
      const Found f = get(*spec.policy_from);
      if (f.present && !f.value.empty()) {
        q.policy.assign(f.value);
        named = true;
      }
    }
    if (!named) q.policy.assign(spec.policy);
    q.limit = count(spec.limit, false);
    q.remaining = count(spec.remaining, false);
    const auto used = count(spec.used, true);
    if (spec.used_limit) {
      const Found f = get(*spec.used_limit);
      if (f.present) {
        if (auto ul = parse_used_limit(f.value)) {
          q.limit = ul->limit;
          q.remaining = std::max<std::int64_t>(0, ul->limit - ul->used);
          if (!ul->detail.empty()) q.partition_key = std::string(ul->detail);
          any = true;
        } else {
          warn_bad(f, "not used/limit");
        }
      }
    }
    if (used) {
      any = true;
      if (!q.remaining && q.limit) q.remaining = std::max<std::int64_t>(0, *q.limit - *used);
      if (!q.limit && q.remaining && *q.remaining <= std::numeric_limits<std::int64_t>::max() - *used) {
        q.limit = *q.remaining + *used;
      }
    }
    for (const auto& r : spec.reset) {
      if (auto t = time(r)) {
        q.reset = t->from_receipt;
        q.reset_resolution = t->resolution;
        q.reset_is_full_refill = spec.reset_is_full_refill;
        break;
      }
    }
    Duration window_step = std::chrono::seconds{1};
    if (spec.window) q.window = spec.window;
    if (spec.window_from) {
      if (auto t = time(*spec.window_from); t && t->from_receipt > Duration::zero()) {
        q.window = t->from_receipt;
        window_step = t->resolution;
      }
    }
    // No reset stated: whatever the window's state, all of it has passed by the
    // end of one window, so the quota is back by then at the latest.
    if (!q.reset && spec.window_bounds_wait && q.window && (any || q.limit || q.remaining)) {
      q.reset = q.window;
      q.reset_resolution = window_step;
    }
    if (spec.cost) q.cost = count(spec.cost, true);
    if (spec.partition_key) {
      const Found f = get(*spec.partition_key);
      if (f.present && !f.value.empty()) q.partition_key = std::string(f.value);
    }
    any = any || q.limit || q.remaining || q.reset;
    if (!any) out_.quota.pop_back();
  }

  // Azure resource providers: "Microsoft.Compute/GetVMScaleSet3Min;197,Microsoft.Compute/GetVMScaleSet30Min;1297".
  void policy_list(const QuotaSpec& spec) {
    const Found f = get(*spec.remaining);
    if (!f.present) return;
    std::string_view rest = f.value;
    std::size_t emitted = 0;
    constexpr std::size_t kMaxMembers = 64;
    while (!rest.empty() && emitted < kMaxMembers) {
      const std::size_t comma = rest.find(',');
      const std::string_view member = trim(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      const std::size_t semi = member.rfind(';');
      const auto n = semi == std::string_view::npos ? std::nullopt : parse_digits(trim(member.substr(semi + 1)));
      if (!n || semi == 0) {
        warn_bad(Found{member, f.name, true, false}, "not name;count");
        continue;
      }
      QuotaObservation q;
      q.source = QuotaSource::kVendor;
      q.profile = p_.name;
      q.unit = spec.unit;
      q.policy = std::string(trim(member.substr(0, semi)));
      q.remaining = *n;
      out_.quota.push_back(std::move(q));
      ++emitted;
    }
  }

  // Remaining-only counters named by a header prefix (Azure Resource Manager).
  void prefixed(const QuotaSpec& spec) {
    std::size_t emitted = 0;
    constexpr std::size_t kMaxCounters = 64;
    const auto& lines = h_.lines();
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const auto& h = lines[i];
      if (!istarts_with(h.name, spec.header_prefix) || h.name.size() == spec.header_prefix.size()) continue;
      read_.set(i);
      // A header another quota of the profile reads explicitly is not a counter.
      if (std::binary_search(p_.known_headers.begin(), p_.known_headers.end(), to_lower(h.name))) continue;
      if (emitted >= kMaxCounters) break;
      const Found f{h.value, h.name, true, false};
      const auto n = parse_count(h.value, CountFormat::kInteger, false);
      if (!n) {
        warn_bad(f, "not a non-negative count");
        continue;
      }
      QuotaObservation q;
      q.source = QuotaSource::kVendor;
      q.profile = p_.name;
      q.unit = spec.unit;
      q.policy = to_lower(std::string_view(h.name).substr(spec.header_prefix.size()));
      q.remaining = *n;
      out_.quota.push_back(std::move(q));
      ++emitted;
    }
  }

  // The server's own verdict. A later `false` overrides an earlier `true`: a
  // verdict can end retries, never grant more of them.
  void verdicts() {
    for (const auto& name : p_.retry_verdicts) {
      Found f;
      index_.for_each(name, [&](std::size_t i, const Header& h) {
        read_.set(i);
        if (!f.present) {
          f.present = true;
          f.value = h.value;
          f.name = h.name;
        }
        return true;
      });
      if (!f.present) continue;
      const std::string_view v = trim(f.value);
      bool verdict = false;
      if (iequals(v, "true")) {
        verdict = true;
      } else if (!iequals(v, "false")) {
        warn_bad(f, "not true or false");
        continue;
      }
      if (!out_.should_retry || (*out_.should_retry && !verdict)) {
        out_.should_retry = verdict;
        out_.should_retry_source.assign(name);
      }
    }
  }

  void retry_delays() {
    for (const auto& spec : p_.retry_delays) {
      // Through time(): the same checks as a reset (absurd instants, a Unix
      // value too small to be one).
      const auto t = time(spec);
      if (!t) continue;
      if (!out_.retry_delay || t->from_receipt > out_.retry_delay->wait) {
        RetryHint hint;
        hint.kind = t->at ? RetryHint::Kind::kDate : RetryHint::Kind::kDelay;
        hint.wait = t->from_receipt;
        hint.date = t->at;
        hint.source = spec.header;
        out_.retry_delay = std::move(hint);
      }
    }
  }

 private:
  const Profile& p_;
  const detail::LineIndex& index_;
  const HeaderList& h_;
  WallTime received_;
  std::optional<WallTime> date_;
  VendorReading& out_;
  detail::LineMask& read_;
};

}  // namespace

void read_vendor(const Profile& profile, const HeaderList& headers, WallTime received,
                 std::optional<WallTime> server_date, VendorReading& out) {
  detail::LineMask read;
  detail::read_vendor(profile, detail::LineIndex(headers), received, server_date, out, read);
}

void detail::read_vendor(const Profile& profile, const LineIndex& headers, WallTime received,
                         std::optional<WallTime> server_date, VendorReading& out, LineMask& read) {
  VendorReader reader(profile, headers, received, server_date, out, read);
  for (const auto& q : profile.quotas) reader.quota(q);
  reader.retry_delays();
  if (!profile.retry_verdicts.empty()) reader.verdicts();
}

// ---- heuristic -------------------------------------------------------------------------

namespace {

constexpr std::string_view kHeuristicFamilies[] = {"x-ratelimit-", "x-rate-limit-"};
constexpr std::string_view kHeuristicDelays[] = {"retry-after-ms", "x-ms-retry-after-ms"};

// Guesses what a reset value means; nullopt when nothing fits.
std::optional<TimeValue> guess_time(std::string_view v, WallTime received, std::optional<WallTime> date) {
  v = trim(v);
  if (v.empty()) return std::nullopt;
  const bool numeric = std::all_of(v.begin(), v.end(), [](char c) { return is_digit(c) || c == '.'; });
  if (numeric) {
    const std::size_t dot = v.find('.');
    const auto whole = parse_digits(v.substr(0, dot));
    if (whole && *whole >= 1'000'000'000) {
      return parse_time_value(v, TimeFormat::kUnixSecondsFraction, received, date);
    }
    return parse_time_value(v, TimeFormat::kFloatSeconds, received, date);
  }
  if (auto d = parse_go_duration(v)) return TimeValue{*d, std::nullopt, go_duration_step(v)};
  if (auto t = parse_time_value(v, TimeFormat::kRfc3339, received, date)) return t;
  return parse_time_value(v, TimeFormat::kHttpDate, received, date);
}

}  // namespace

void read_heuristic(const HeaderList& headers, WallTime received, std::optional<WallTime> server_date,
                    VendorReading& out) {
  for (std::string_view family : kHeuristicFamilies) {
    QuotaObservation q;
    q.source = QuotaSource::kHeuristic;
    q.confidence = Confidence::kLow;
    std::optional<std::int64_t> used;
    bool any = false;
    for (const auto& h : headers.lines()) {
      if (!istarts_with(h.name, family)) continue;
      const std::string_view what = std::string_view(h.name).substr(family.size());
      auto bad = [&] {
        out.warnings.push_back("heuristic: " + h.name + " " + shown(h.value) + " not understood");
      };
      if (iequals(what, "limit")) {
        if (auto n = parse_count(h.value, CountFormat::kNumber, false)) q.limit = n; else bad();
      } else if (iequals(what, "remaining")) {
        if (auto n = parse_count(h.value, CountFormat::kNumber, false)) q.remaining = n; else bad();
      } else if (iequals(what, "used")) {
        if (auto n = parse_count(h.value, CountFormat::kNumber, true)) used = n; else bad();
      } else if (iequals(what, "reset")) {
        if (auto t = guess_time(h.value, received, server_date)) {
          q.reset = t->from_receipt;
          q.reset_resolution = t->resolution;
        } else {
          bad();
        }
      } else {
        continue;
      }
      any = true;
    }
    if (!any) continue;
    if (used && !q.remaining && q.limit) q.remaining = std::max<std::int64_t>(0, *q.limit - *used);
    if (q.limit || q.remaining || q.reset) out.quota.push_back(std::move(q));
  }
  for (std::string_view name : kHeuristicDelays) {
    const auto v = headers.first(name);
    if (!v) continue;
    const auto t = parse_time_value(*v, TimeFormat::kMilliseconds, received, server_date);
    if (!t) {
      out.warnings.push_back("heuristic: " + std::string(name) + " " + shown(*v) + " not understood");
      continue;
    }
    if (!out.retry_delay || t->from_receipt > out.retry_delay->wait) {
      out.retry_delay = RetryHint{RetryHint::Kind::kDelay, t->from_receipt, std::nullopt, std::string(name)};
    }
  }
}

bool looks_like_vendor_quota_header(std::string_view name) noexcept {
  return classify_field(name) == FieldKind::kVendorQuota;
}

}  // namespace abide
