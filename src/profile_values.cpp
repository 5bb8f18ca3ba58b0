// Vendor profiles' value semantics (src/profile_values.h) and the JSON names
// of the formats (abide/profiles.h): durations, time values, counts.
#include "profile_values.h"

#include <algorithm>
#include <limits>

#include "abide/http_date.h"
#include "ascii.h"
#include "decimal.h"
#include "profiles_internal.h"

namespace abide {
namespace {

using detail::parse_digits;

__extension__ using u128 = unsigned __int128;

// a - b for wall times, saturating.
Duration wall_diff(WallTime a, WallTime b) noexcept {
  const auto x = a.time_since_epoch().count();
  const auto y = b.time_since_epoch().count();
  if (y < 0 && x > Duration::max().count() + y) return Duration::max();
  if (y > 0 && x < Duration::min().count() + y) return Duration::min();
  return Duration{x - y};
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
  if (text[13] != ':' || !ascii::is_digit(text[14]) || !ascii::is_digit(text[15])) return std::nullopt;
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

bool is_absolute(TimeFormat f) noexcept {
  return f == TimeFormat::kUnixSeconds || f == TimeFormat::kUnixSecondsFraction || f == TimeFormat::kRfc3339 ||
         f == TimeFormat::kHttpDate || f == TimeFormat::kUnixMilliseconds;
}

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
  const auto units = detail::read_decimal<std::uint64_t, static_cast<std::uint64_t>(Duration::max().count())>(whole);
  if (units.digits != whole.size()) return std::nullopt;
  u128 total = units.value;
  bool saturated = units.over;
  if (!saturated) {
    total *= unit_ns;
    if (total > max) saturated = true;
  }
  // The fraction: up to 18 digits exactly, any further non-zero digit rounds up.
  const auto head = detail::read_decimal<std::uint64_t, std::numeric_limits<std::uint64_t>::max(), 18>(frac);
  // With max 0, `over` says whether any digit of the rest is not zero.
  const auto tail = detail::read_decimal<std::uint64_t, 0>(frac.substr(head.digits));
  if (head.digits + tail.digits != frac.size()) return std::nullopt;
  const u128 num = head.value;
  u128 den = 1;
  for (std::size_t k = 0; k < head.digits; ++k) den *= 10;
  const bool beyond = tail.over;
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
    while (i < text.size() && (ascii::is_digit(text[i]) || text[i] == '.')) ++i;
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
  while (unit_start > 0 && !ascii::is_digit(text[unit_start - 1]) && text[unit_start - 1] != '.') --unit_start;
  const std::string_view unit = text.substr(unit_start);
  Duration u = std::chrono::seconds{1};
  if (unit == "h") u = std::chrono::hours{1};
  else if (unit == "m") u = std::chrono::minutes{1};
  else if (unit == "ms") u = std::chrono::milliseconds{1};
  else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") u = std::chrono::microseconds{1};
  else if (unit == "ns") u = Duration{1};
  std::size_t number_start = unit_start;
  while (number_start > 0 && (ascii::is_digit(text[number_start - 1]) || text[number_start - 1] == '.')) --number_start;
  return decimal_step(text.substr(number_start, unit_start - number_start), u);
}

// The step of an RFC 3339 time: its fraction of a second, or a minute when
// it has no seconds (Atlassian's yyyy-MM-ddTHH:mmZ).
Duration rfc3339_step(std::string_view text) noexcept {
  const std::size_t t = text.find_first_of("Tt ");
  if (t == std::string_view::npos) return std::chrono::seconds{1};
  std::size_t i = t + 1;
  int colons = 0;
  while (i < text.size() && (ascii::is_digit(text[i]) || text[i] == ':')) colons += text[i++] == ':' ? 1 : 0;
  if (colons < 2) return std::chrono::minutes{1};
  if (i < text.size() && text[i] == '.') {
    std::size_t j = i + 1;
    while (j < text.size() && ascii::is_digit(text[j])) ++j;
    return decimal_step(text.substr(i, j - i), std::chrono::seconds{1});
  }
  return std::chrono::seconds{1};
}

std::optional<TimeValue> parse_time_value(std::string_view text, TimeFormat format, WallTime received,
                                          std::optional<WallTime> server_date) noexcept {
  text = ascii::trim_ows(text);
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
  if (server_date) {
    // The longer reading is the one used (never early); the shorter one may
    // be the closer, so the value is known to the step widened by their
    // difference: a whole-second Date alone reads up to a second long.
    const Duration by_date = wall_diff(*at, *server_date);
    // Either reading may have saturated (a Date centuries back puts by_date
    // at the largest Duration): the gap saturates too.
    const Duration apart = by_date > wait ? saturating_sub(by_date, wait) : saturating_sub(wait, by_date);
    wait = std::max(wait, by_date);
    step = saturating_add(step, std::min(apart, Duration{std::chrono::seconds{1}}));
  }
  return TimeValue{std::max(wait, Duration::zero()), at, step};
}

std::optional<std::int64_t> parse_count(std::string_view text, CountFormat format, bool round_up) noexcept {
  text = ascii::trim_ows(text);
  switch (format) {
    case CountFormat::kInteger: return parse_digits(text);
    case CountFormat::kNumber: {
      const std::size_t dot = text.find('.');
      if (dot == std::string_view::npos) return parse_digits(text);
      const auto whole = parse_digits(text.substr(0, dot));
      const std::string_view frac = text.substr(dot + 1);
      if (!whole || frac.empty()) return std::nullopt;
      bool nonzero = false;
      for (char c : frac) {
        if (!ascii::is_digit(c)) return std::nullopt;
        if (c != '0') nonzero = true;
      }
      return *whole + ((round_up && nonzero) ? 1 : 0);
    }
    case CountFormat::kUsedLimit:
    case CountFormat::kPolicyList: return std::nullopt;  // not a single count
  }
  return std::nullopt;
}

std::optional<UsedLimit> parse_used_limit(std::string_view text) noexcept {
  text = ascii::trim_ows(text);
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(slash + 1);
  std::string_view detail;
  const std::size_t paren = rest.find('(');
  if (paren != std::string_view::npos) {
    if (rest.back() != ')') return std::nullopt;
    detail = rest.substr(paren + 1, rest.size() - paren - 2);
    rest = ascii::trim_ows(rest.substr(0, paren));
  }
  const auto used = parse_digits(ascii::trim_ows(text.substr(0, slash)));
  const auto limit = parse_digits(ascii::trim_ows(rest));
  if (!used || !limit) return std::nullopt;
  return UsedLimit{*used, *limit, detail};
}

std::optional<std::string_view> find_member(std::string_view value, std::string_view key) noexcept {
  while (!value.empty()) {
    const std::size_t semi = value.find(';');
    const std::string_view member = ascii::trim_ows(value.substr(0, semi));
    const std::size_t eq = member.find('=');
    if (eq != std::string_view::npos && ascii::iequals(ascii::trim_ows(member.substr(0, eq)), key)) {
      return ascii::trim_ows(member.substr(eq + 1));
    }
    if (semi == std::string_view::npos) break;
    value.remove_prefix(semi + 1);
  }
  return std::nullopt;
}

}  // namespace abide
