// libFuzzer target for the HTTP-date and RFC 3339 parsers. Besides "never
// crash", it checks invariants: a strict accept is a robust accept of the same
// instant with the same deviations (at most a wrong day name); every accepted date formats as IMF-fixdate and reads back (strictly)
// as the same instant; an accepted RFC 3339 time round-trips through
// format_rfc3339; error offsets stay inside the input.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "abide/http_date.h"

namespace {

using abide::ParseMode;
using abide::WallTime;

void check(bool ok) {
  if (!ok) std::abort();
}

void check_date(std::string_view text, WallTime now) {
  const auto strict = abide::parse_http_date(text, now, ParseMode::kStrict);
  const auto robust = abide::parse_http_date(text, now, ParseMode::kRobust);
  if (strict) {
    // Strict mode reads past one deviation only, a wrong day name, and robust
    // mode reads the same text the same way.
    abide::DateDeviations only_weekday;
    only_weekday.add(abide::DateDeviation::kWeekdayMismatch);
    check(strict->deviations.empty() || strict->deviations == only_weekday);
    check(robust.has_value());
    check(robust->seconds == strict->seconds && robust->form == strict->form);
    check(robust->deviations == strict->deviations);
  } else {
    check(strict.error().offset <= text.size());
    check(!strict.error().message().empty());
  }
  if (robust) {
    check(robust->time == WallTime::max() || robust->time == WallTime::min() ||
          std::chrono::floor<std::chrono::seconds>(robust->time).time_since_epoch() ==
              robust->seconds.time_since_epoch());
    // IMF-fixdate has four-digit years, so the one instant a parse can give
    // beyond them (a leap second at the end of 9999, i.e. 10000-01-01T00:00:00)
    // formats clamped; found by this target, see HttpDateRange in the tests.
    constexpr std::int64_t kLastFormattable = 253402300799;  // 9999-12-31T23:59:59Z
    const std::string formatted = abide::format_imf_fixdate(robust->seconds);
    const auto back = abide::parse_http_date(formatted, now, ParseMode::kStrict);
    check(back.has_value() && back->form == abide::HttpDateForm::kImfFixdate);
    if (robust->seconds.time_since_epoch().count() <= kLastFormattable) {
      check(back->seconds == robust->seconds);
    } else {
      check(back->seconds.time_since_epoch().count() == kLastFormattable);
    }
  } else {
    check(robust.error().offset <= text.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Two "now"s: 2026-11-29T22:30:00Z and 2060-06-01T00:00:00Z (the 50-year rule
  // then picks a different century for some two-digit years).
  check_date(text, WallTime{std::chrono::seconds{1795991400}});
  check_date(text, WallTime{std::chrono::seconds{2853273600}});

  const auto t = abide::parse_rfc3339(text);
  if (t) {
    const std::string formatted = abide::format_rfc3339(*t);
    const auto back = abide::parse_rfc3339(formatted);
    check(back.has_value() && *back == *t);
  } else {
    check(t.error().offset <= text.size());
  }
  return 0;
}
