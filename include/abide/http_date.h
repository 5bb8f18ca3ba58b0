// abide/http_date.h: HTTP-date (RFC 9110 section 5.6.7) and RFC 3339 timestamps.
//
// parse_http_date reads the three HTTP-date forms (IMF-fixdate, rfc850-date,
// asctime-date). Strict mode accepts exactly the grammar. Robust mode also
// accepts deviations whose meaning is unambiguous and says which ones it
// accepted. Both reject impossible values (February 30, hour 24, minute 60,
// second 61) and anything else, with an error that names what was wrong and
// the byte where it was found.
//
// A day name that is not the weekday of its date is accepted in both modes and
// reported (DateDeviation::kWeekdayMismatch): the numbers name one instant, and
// rejecting it would turn a server's hint into "malformed" and a retry far too
// early. The day name never picks a century; rfc850-date's 50-year rule does.
//
// The parsers never allocate and never trim: surrounding whitespace belongs to
// the field parser (RFC 9110 section 5.5); see retry_after.h, which trims it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "abide/clock.h"
#include "abide/result.h"

namespace abide {

// How strictly a header value is read.
enum class ParseMode : std::uint8_t {
  kStrict,  // exactly the grammar
  kRobust,  // also unambiguous deviations, each one reported
};

// Which HTTP-date form a value used.
enum class HttpDateForm : std::uint8_t {
  kImfFixdate,  // Sun, 06 Nov 1994 08:49:37 GMT
  kRfc850,      // Sunday, 06-Nov-94 08:49:37 GMT
  kAsctime,     // Sun Nov  6 08:49:37 1994
};

// A deviation from the grammar that was accepted: by robust mode only, except
// kWeekdayMismatch, which both modes accept and report.
enum class DateDeviation : std::uint8_t {
  kCase,             // a name or the zone not in the grammar's case ("sun", "NOV", "gmt")
  kZoneUtc,          // "UTC" instead of "GMT"
  kZoneNumeric,      // "+0000" instead of "GMT"
  kOneDigitDay,      // "6 Nov 1994" or "Nov 6" without the grammar's padding
  kMissingDayName,   // no day name at all
  kExtraSpace,       // a run of SP/HTAB (or an HTAB) where one SP belongs
  kDayNameLength,    // "Sunday" where "Sun" belongs, or the reverse
  kFourDigitYear,    // rfc850-date with a four-digit year (no 50-year rule needed)
  kWeekdayMismatch,  // a day name that is not the date's weekday (both modes)
};

// A small set of DateDeviation values. In strict mode it holds at most
// kWeekdayMismatch.
class DateDeviations {
 public:
  constexpr bool empty() const noexcept { return bits_ == 0; }
  constexpr bool has(DateDeviation d) const noexcept { return (bits_ & bit(d)) != 0; }
  constexpr void add(DateDeviation d) noexcept { bits_ = static_cast<std::uint16_t>(bits_ | bit(d)); }
  constexpr std::uint16_t bits() const noexcept { return bits_; }
  friend constexpr bool operator==(DateDeviations, DateDeviations) = default;

 private:
  static constexpr std::uint16_t bit(DateDeviation d) noexcept {
    return static_cast<std::uint16_t>(1u << static_cast<unsigned>(d));
  }
  std::uint16_t bits_ = 0;
};

// Every DateDeviation, in declaration order (to iterate over a set).
inline constexpr DateDeviation kAllDateDeviations[] = {DateDeviation::kCase,           DateDeviation::kZoneUtc,
                                                       DateDeviation::kZoneNumeric,    DateDeviation::kOneDigitDay,
                                                       DateDeviation::kMissingDayName, DateDeviation::kExtraSpace,
                                                       DateDeviation::kDayNameLength,  DateDeviation::kFourDigitYear,
                                                       DateDeviation::kWeekdayMismatch};

// A short English description, e.g. "UTC instead of GMT".
std::string_view to_string(DateDeviation d) noexcept;
// The descriptions of every deviation in the set, joined by "; " ("" when empty).
std::string to_string(DateDeviations d);
// "IMF-fixdate", "rfc850-date" or "asctime-date".
std::string_view to_string(HttpDateForm f) noexcept;

// What was wrong with a date (HTTP-date or RFC 3339).
enum class DateErrorCode : std::uint8_t {
  kEmpty,             // nothing to parse
  kTruncated,         // the value ends before the date is complete
  kUnexpectedChar,    // not the separator the grammar requires (DateError::expected)
  kBadDayName,        // not a day name
  kBadDay,            // not a two-digit day
  kBadMonth,          // not a month name (or two-digit month in RFC 3339)
  kBadYear,           // not a four-digit (rfc850-date: two-digit) year
  kBadHour,           // not a two-digit hour
  kBadMinute,         // not a two-digit minute
  kBadSecond,         // not a two-digit second
  kBadFraction,       // RFC 3339: no digit after '.'
  kBadZone,           // not GMT (robust: also UTC, +0000); RFC 3339: not Z or +hh:mm
  kTrailingGarbage,   // something follows a complete date
  kMonthOutOfRange,   // RFC 3339 month 00 or above 12
  kDayOutOfRange,     // day 00, or a day the month does not have (February 30)
  kHourOutOfRange,    // hour above 23
  kMinuteOutOfRange,  // minute above 59
  kSecondOutOfRange,  // second above 60 (60 is a leap second)
  kOffsetOutOfRange,  // RFC 3339 offset hour above 23 or minute above 59
  kWeekdayMismatch,   // no longer returned (a mismatched day name is a DateDeviation);
                      // kept so that code naming it still compiles
};

// A rejected date: what, and at which byte (0-based, into the string the parser
// was given).
struct DateError {
  DateErrorCode code = DateErrorCode::kEmpty;
  std::uint32_t offset = 0;
  char expected = '\0';  // for kUnexpectedChar: the character the grammar wants

  // e.g. "expected ',' at byte 3" or "February has no day 30 at byte 5".
  std::string message() const;
  friend bool operator==(const DateError&, const DateError&) = default;
};

// A short description of the code alone, e.g. "day out of range".
std::string_view to_string(DateErrorCode c) noexcept;

// A parsed HTTP-date.
struct HttpDate {
  // The instant, exact (any four-digit year fits).
  std::chrono::sys_seconds seconds{};
  // The same instant as a WallTime, saturated to WallTime's range (about years
  // 1678 to 2261): later dates become WallTime::max(), earlier ones min().
  WallTime time{};
  HttpDateForm form = HttpDateForm::kImfFixdate;
  DateDeviations deviations;  // what was accepted beyond the grammar (see DateDeviation)
};

// Parses an HTTP-date. `now` resolves rfc850-date's two-digit year (RFC 9110:
// a date more than 50 years after `now` means the most recent past year with
// the same two last digits). Second 60 (a leap second) is accepted and read as
// second 0 of the next minute (the later reading, so a wait is never shortened).
// No whitespace is trimmed.
Result<HttpDate, DateError> parse_http_date(std::string_view text, WallTime now,
                                            ParseMode mode = ParseMode::kStrict) noexcept;

// Length of an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT").
inline constexpr std::size_t kImfFixdateLength = 29;

// Writes t as IMF-fixdate (sub-second part dropped, rounding toward the past)
// into out, without allocating.
void format_imf_fixdate(WallTime t, std::span<char, kImfFixdateLength> out) noexcept;
// t as IMF-fixdate.
std::string format_imf_fixdate(WallTime t);
// t as IMF-fixdate; instants outside years 0000..9999 (which IMF-fixdate cannot
// write) are clamped to its first or last second.
std::string format_imf_fixdate(std::chrono::sys_seconds t);

// Parses an RFC 3339 date-time: "2026-11-29T22:30:00Z", with optional fraction
// (".5", up to nanoseconds; further digits are read and dropped) and "Z" or a
// numeric offset ("+01:00", "-00:00"). 't', 'z' and a space for 'T' are also
// accepted (RFC 3339 section 5.6 note). Leap second 60 as in parse_http_date.
// The result saturates to WallTime's range like HttpDate::time. No trimming.
Result<WallTime, DateError> parse_rfc3339(std::string_view text) noexcept;

// t as RFC 3339 in UTC with "Z": "2026-11-29T22:30:00Z", or with the fraction
// when t is not a whole second ("2026-11-29T22:30:00.25Z", trailing zeros
// dropped), so that it reads back as exactly t.
std::string format_rfc3339(WallTime t);

}  // namespace abide
