// HTTP-date and RFC 3339: every form, strict and robust, the 50-year rule,
// leap seconds, impossible values, error codes and byte offsets, formatting.
#include "abide/http_date.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

namespace abide {
namespace {

using namespace std::chrono_literals;
using Code = DateErrorCode;
using Dev = DateDeviation;

// 2026-11-29T22:30:00Z: the injected "now" unless a test says otherwise.
constexpr WallTime kNow{std::chrono::seconds{1795991400}};
// Sun, 06 Nov 1994 08:49:37 GMT.
constexpr std::int64_t kRfcExample = 784111777;

WallTime at(std::int64_t unix_seconds) { return WallTime{std::chrono::seconds{unix_seconds}}; }

std::int64_t unix_of(const HttpDate& d) { return d.seconds.time_since_epoch().count(); }

HttpDate strict_ok(std::string_view text, WallTime now = kNow) {
  auto r = parse_http_date(text, now, ParseMode::kStrict);
  EXPECT_TRUE(r) << text << ": " << (r ? "" : r.error().message());
  return r ? *r : HttpDate{};
}

HttpDate robust_ok(std::string_view text, WallTime now = kNow) {
  auto r = parse_http_date(text, now, ParseMode::kRobust);
  EXPECT_TRUE(r) << text << ": " << (r ? "" : r.error().message());
  return r ? *r : HttpDate{};
}

DateError rejected(std::string_view text, ParseMode mode, WallTime now = kNow) {
  auto r = parse_http_date(text, now, mode);
  EXPECT_FALSE(r) << text << " was accepted";
  return r ? DateError{} : r.error();
}

// ---- the three forms, strict -------------------------------------------------

TEST(HttpDateStrict, ImfFixdate) {
  const HttpDate d = strict_ok("Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(unix_of(d), kRfcExample);
  EXPECT_EQ(d.time, at(kRfcExample));
  EXPECT_EQ(d.form, HttpDateForm::kImfFixdate);
  EXPECT_TRUE(d.deviations.empty());
  EXPECT_EQ(unix_of(strict_ok("Fri, 31 Dec 1999 23:59:59 GMT")), 946684799);
}

TEST(HttpDateStrict, Rfc850) {
  const HttpDate d = strict_ok("Sunday, 06-Nov-94 08:49:37 GMT");
  EXPECT_EQ(unix_of(d), kRfcExample);
  EXPECT_EQ(d.form, HttpDateForm::kRfc850);
  EXPECT_TRUE(d.deviations.empty());
}

TEST(HttpDateStrict, Asctime) {
  const HttpDate d = strict_ok("Sun Nov  6 08:49:37 1994");
  EXPECT_EQ(unix_of(d), kRfcExample);
  EXPECT_EQ(d.form, HttpDateForm::kAsctime);
  EXPECT_TRUE(d.deviations.empty());
  EXPECT_EQ(unix_of(strict_ok("Thu Nov 10 08:49:37 1994")), 784457377);
  // date3 allows 2DIGIT, so a zero-padded day is in the grammar too.
  EXPECT_EQ(unix_of(strict_ok("Sun Nov 06 08:49:37 1994")), kRfcExample);
}

TEST(HttpDateStrict, EveryDayAndMonthName) {
  // 2026-01-01 was a Thursday; walk a year of noon dates through all three forms.
  for (std::int64_t day = 0; day < 366; ++day) {
    const WallTime t = at(1767225600 + day * 86400 + 12 * 3600);
    const std::string imf = format_imf_fixdate(t);
    EXPECT_EQ(strict_ok(imf).time, t) << imf;
  }
}

TEST(HttpDateStrict, LeapSecondIsTheNextMinute) {
  // 2016-12-31T23:59:60Z, read as 2017-01-01T00:00:00Z (the later instant).
  EXPECT_EQ(unix_of(strict_ok("Sat, 31 Dec 2016 23:59:60 GMT")), 1483228800);
  EXPECT_EQ(unix_of(strict_ok("Saturday, 31-Dec-16 23:59:60 GMT")), 1483228800);
  EXPECT_EQ(unix_of(strict_ok("Sat Dec 31 23:59:60 2016")), 1483228800);
}

TEST(HttpDateStrict, LeapYears) {
  EXPECT_EQ(unix_of(strict_ok("Tue, 29 Feb 2000 12:00:00 GMT")), 951825600);
  EXPECT_EQ(rejected("Thu, 29 Feb 1900 12:00:00 GMT", ParseMode::kStrict).code, Code::kDayOutOfRange);
  EXPECT_EQ(rejected("Sun, 29 Feb 2026 12:00:00 GMT", ParseMode::kStrict).code, Code::kDayOutOfRange);
}

TEST(HttpDateStrict, ImpossibleValues) {
  struct Case {
    const char* text;
    Code code;
    std::uint32_t offset;
  };
  const Case cases[] = {
      {"Wed, 30 Feb 1994 08:49:37 GMT", Code::kDayOutOfRange, 5},
      {"Sun, 31 Apr 1994 08:49:37 GMT", Code::kDayOutOfRange, 5},
      {"Sun, 00 Nov 1994 08:49:37 GMT", Code::kDayOutOfRange, 5},
      {"Sun, 32 Nov 1994 08:49:37 GMT", Code::kDayOutOfRange, 5},
      {"Sun, 06 Nov 1994 24:00:00 GMT", Code::kHourOutOfRange, 17},
      {"Sun, 06 Nov 1994 08:60:37 GMT", Code::kMinuteOutOfRange, 20},
      {"Sun, 06 Nov 1994 08:49:61 GMT", Code::kSecondOutOfRange, 23},
      {"Sun Nov  6 24:49:37 1994", Code::kHourOutOfRange, 11},
      {"Sun Feb 30 08:49:37 1994", Code::kDayOutOfRange, 8},
  };
  for (const auto& c : cases) {
    for (const ParseMode mode : {ParseMode::kStrict, ParseMode::kRobust}) {
      const DateError e = rejected(c.text, mode);
      EXPECT_EQ(e.code, c.code) << c.text << ": " << e.message();
      EXPECT_EQ(e.offset, c.offset) << c.text << ": " << e.message();
    }
  }
}

// ---- a day name that does not match its date ---------------------------------

// 2026-11-29T13:00:00Z, a Sunday.
constexpr std::int64_t kSunday1300 = 1795957200;

TEST(HttpDateWeekday, MismatchIsTheInstantItsNumbersNameInBothModes) {
  struct Case {
    const char* text;
    HttpDateForm form;
  };
  const Case cases[] = {
      {"Mon, 29 Nov 2026 13:00:00 GMT", HttpDateForm::kImfFixdate},
      {"Monday, 29-Nov-26 13:00:00 GMT", HttpDateForm::kRfc850},
      {"Mon Nov 29 13:00:00 2026", HttpDateForm::kAsctime},
      {"Sat, 29 Nov 2026 13:00:00 GMT", HttpDateForm::kImfFixdate},
      {"Wednesday, 29-Nov-26 13:00:00 GMT", HttpDateForm::kRfc850},
      {"Fri Nov 29 13:00:00 2026", HttpDateForm::kAsctime},
  };
  for (const auto& c : cases) {
    for (const ParseMode mode : {ParseMode::kStrict, ParseMode::kRobust}) {
      const auto r = parse_http_date(c.text, kNow, mode);
      ASSERT_TRUE(r) << c.text << ": " << r.error().message();
      EXPECT_EQ(unix_of(*r), kSunday1300) << c.text;
      EXPECT_EQ(r->form, c.form) << c.text;
      DateDeviations want;
      want.add(Dev::kWeekdayMismatch);
      EXPECT_EQ(r->deviations, want) << c.text << ": got " << to_string(r->deviations);
    }
  }
}

TEST(HttpDateWeekday, EveryWrongNameGivesTheSameInstantAsTheRightOne) {
  // A mismatched name can neither shorten nor lengthen the wait.
  const std::int64_t right = unix_of(strict_ok("Sun, 29 Nov 2026 13:00:00 GMT"));
  for (const char* name : {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}) {
    const std::string text = std::string(name) + ", 29 Nov 2026 13:00:00 GMT";
    const HttpDate d = strict_ok(text);
    EXPECT_EQ(unix_of(d), right) << text;
    EXPECT_TRUE(d.deviations.has(Dev::kWeekdayMismatch)) << text;
  }
  EXPECT_FALSE(strict_ok("Sun, 29 Nov 2026 13:00:00 GMT").deviations.has(Dev::kWeekdayMismatch));
}

TEST(HttpDateWeekday, StrictStillRejectsEveryOtherDeviation) {
  // The mismatch is the one deviation strict mode reads past.
  EXPECT_EQ(rejected("Mon, 29 Nov 2026 13:00:00 UTC", ParseMode::kStrict).code, Code::kBadZone);
  EXPECT_EQ(rejected("mon, 29 Nov 2026 13:00:00 GMT", ParseMode::kStrict).code, Code::kBadDayName);
  EXPECT_EQ(rejected("Mon Nov 29 13:00:00 26", ParseMode::kStrict).code, Code::kTruncated);
  EXPECT_EQ(rejected("Mon, 30 Feb 2026 13:00:00 GMT", ParseMode::kStrict).code, Code::kDayOutOfRange);
  // A name that is no day name at all is still malformed, in both modes.
  for (const ParseMode mode : {ParseMode::kStrict, ParseMode::kRobust}) {
    EXPECT_EQ(rejected("Mun, 29 Nov 2026 13:00:00 GMT", mode).code, Code::kBadDayName);
    EXPECT_EQ(rejected("Mondey, 29-Nov-26 13:00:00 GMT", mode).code, Code::kBadDayName);
  }
}

TEST(HttpDateWeekday, RobustReportsTheMismatchBesideOtherDeviations) {
  // Off the fast path (general parser), several deviations at once.
  const HttpDate d = robust_ok("mon,  29 Nov 2026 13:00:00 UTC");
  EXPECT_EQ(unix_of(d), kSunday1300);
  DateDeviations want;
  for (const Dev x : {Dev::kCase, Dev::kExtraSpace, Dev::kZoneUtc, Dev::kWeekdayMismatch}) want.add(x);
  EXPECT_EQ(d.deviations, want) << to_string(d.deviations);
  EXPECT_EQ(unix_of(robust_ok("Mon, 29-Nov-2026 13:00:00 GMT")), kSunday1300);
  EXPECT_EQ(unix_of(robust_ok("Monday Nov 29 13:00:00 2026")), kSunday1300);
  EXPECT_NE(to_string(d.deviations).find("day name does not match"), std::string::npos);
}

TEST(HttpDateStrict, MalformedWithOffsets) {
  struct Case {
    const char* text;
    Code code;
    std::uint32_t offset;
    char expected;
  };
  const Case cases[] = {
      {"", Code::kEmpty, 0, 0},
      {"garbage", Code::kBadDayName, 0, 0},
      {" Sun, 06 Nov 1994 08:49:37 GMT", Code::kBadDayName, 0, 0},
      {"sun, 06 Nov 1994 08:49:37 GMT", Code::kBadDayName, 0, 0},
      {"Sun, 06 nov 1994 08:49:37 GMT", Code::kBadMonth, 8, 0},
      {"Sun, 06 Nox 1994 08:49:37 GMT", Code::kBadMonth, 8, 0},
      {"Sun, 06 Nov 1994 08:49:37 gmt", Code::kBadZone, 26, 0},
      {"Sun, 06 Nov 1994 08:49:37 UTC", Code::kBadZone, 26, 0},
      {"Sun, 06 Nov 1994 08:49:37 +0000", Code::kBadZone, 26, 0},
      {"Sun, 6 Nov 1994 08:49:37 GMT", Code::kBadDay, 5, 0},
      {"Sun,  06 Nov 1994 08:49:37 GMT", Code::kBadDay, 5, 0},
      {"Sun,06 Nov 1994 08:49:37 GMT", Code::kUnexpectedChar, 4, ' '},
      {"Sun 06 Nov 1994 08:49:37 GMT", Code::kBadMonth, 4, 0},
      {"Sun. 06 Nov 1994 08:49:37 GMT", Code::kUnexpectedChar, 3, ','},
      {"Sun, 06 Nov 94 08:49:37 GMT", Code::kBadYear, 12, 0},
      {"Sun, 06 Nov 1994 8:49:37 GMT", Code::kBadHour, 17, 0},
      {"Sun, 06 Nov 1994 08.49.37 GMT", Code::kUnexpectedChar, 19, ':'},
      {"Sun, 06 Nov 1994 08:4x:37 GMT", Code::kBadMinute, 20, 0},
      {"Sun, 06 Nov 1994 08:49:3 GMT", Code::kBadSecond, 23, 0},
      {"Sun, 06 Nov 1994 08:49:37", Code::kTruncated, 25, 0},
      {"Sun, 06 Nov 1994 08:49:37 GMT ", Code::kTrailingGarbage, 29, 0},
      {"Sun, 06 Nov 1994 08:49:37 GMT\r\n", Code::kTrailingGarbage, 29, 0},
      {"Sun, 06 Nov 1994 08:49:37 GMTX", Code::kBadZone, 26, 0},
      {"Sun, 06 Nov", Code::kTruncated, 11, 0},
      {"Sun,", Code::kTruncated, 4, 0},
      {"Sunday", Code::kTruncated, 6, 0},
      {"Sunny, 06 Nov 1994 08:49:37 GMT", Code::kBadDayName, 0, 0},
      {"Sun, 06-Nov-94 08:49:37 GMT", Code::kUnexpectedChar, 7, ' '},
      {"Sunday, 06 Nov 1994 08:49:37 GMT", Code::kUnexpectedChar, 10, '-'},
      {"Sunday Nov  6 08:49:37 1994", Code::kUnexpectedChar, 6, ','},
      {"Sunday, 06-Nov-1994 08:49:37 GMT", Code::kUnexpectedChar, 17, ' '},
      {"Sun Nov 6 08:49:37 1994", Code::kBadDay, 8, 0},
      {"Sun Nov  6 08:49:37 94", Code::kTruncated, 22, 0},
      {"Sun Nov  6 08:49:37 1994 GMT", Code::kTrailingGarbage, 24, 0},
      {"06 Nov 1994 08:49:37 GMT", Code::kBadDayName, 0, 0},
  };
  for (const auto& c : cases) {
    const DateError e = rejected(c.text, ParseMode::kStrict);
    EXPECT_EQ(e.code, c.code) << c.text << ": " << e.message();
    EXPECT_EQ(e.offset, c.offset) << c.text << ": " << e.message();
    if (c.expected != 0) {
      EXPECT_EQ(e.expected, c.expected) << c.text;
    }
  }
}

TEST(HttpDateStrict, ControlBytesAreNotSpace) {
  const std::string_view nul("Sun, 06 Nov 1994\0 08:49:37 GMT", 30);
  for (const ParseMode mode : {ParseMode::kStrict, ParseMode::kRobust}) {
    const DateError e = rejected(nul, mode);
    EXPECT_EQ(e.code, Code::kUnexpectedChar);
    EXPECT_EQ(e.offset, 16u);
    EXPECT_EQ(rejected("Sun, 06 Nov 1994\r\n08:49:37 GMT", mode).offset, 16u);
  }
}

// ---- rfc850's two-digit year: the 50-year rule --------------------------------

TEST(HttpDateRfc850, FiftyYearBoundaryBothSides) {
  // now = 2026-11-29T22:30:00Z. Exactly 50 years ahead is not "more than 50
  // years in the future": 2076.
  EXPECT_EQ(unix_of(strict_ok("Sunday, 29-Nov-76 22:30:00 GMT")), 3373914600);
  // One second later is more than 50 years ahead: the most recent past year
  // with the same two digits, 1976 (a Monday).
  EXPECT_EQ(unix_of(strict_ok("Monday, 29-Nov-76 22:30:01 GMT")), 218154601);
  // ...and the day name never picks the century: "Sunday" fits 2076, but one
  // second past the boundary is 1976 all the same (with the mismatch reported),
  // and "Monday" (1976's weekday) does not pull 22:30:00 back to 1976.
  for (const ParseMode mode : {ParseMode::kStrict, ParseMode::kRobust}) {
    const auto late = parse_http_date("Sunday, 29-Nov-76 22:30:01 GMT", kNow, mode);
    ASSERT_TRUE(late);
    EXPECT_EQ(unix_of(*late), 218154601);
    EXPECT_TRUE(late->deviations.has(Dev::kWeekdayMismatch));
    const auto edge = parse_http_date("Monday, 29-Nov-76 22:30:00 GMT", kNow, mode);
    ASSERT_TRUE(edge);
    EXPECT_EQ(unix_of(*edge), 3373914600);
    EXPECT_TRUE(edge->deviations.has(Dev::kWeekdayMismatch));
  }
  // The day before the boundary stays in 2076, the day after goes to 1976.
  EXPECT_EQ(unix_of(strict_ok("Saturday, 28-Nov-76 00:00:00 GMT")), 3373747200);
  EXPECT_EQ(strict_ok("Tuesday, 30-Nov-76 00:00:00 GMT").seconds.time_since_epoch().count(),
            218154601 - 22 * 3600 - 30 * 60 - 1 + 86400);
  // Whole years on either side.
  EXPECT_EQ(unix_of(strict_ok("Saturday, 01-Jan-77 00:00:00 GMT")), 220924800);  // 2077 is too far
  EXPECT_EQ(unix_of(strict_ok("Friday, 01-Jan-99 00:00:00 GMT")), 915148800);
  EXPECT_EQ(unix_of(strict_ok("Saturday, 01-Jan-00 00:00:00 GMT")), 946684800);
  EXPECT_EQ(unix_of(strict_ok("Thursday, 01-Jan-26 00:00:00 GMT")), 1767225600);
}

TEST(HttpDateRfc850, RuleFollowsTheInjectedNow) {
  // In mid-2060, "05" is 2105 (45 years ahead), not 2005 (55 years back).
  const WallTime now2060 = at(2853273600);
  EXPECT_EQ(unix_of(strict_ok("Thursday, 01-Jan-05 00:00:00 GMT", now2060)), 4260211200);
  // The same text, read in 2026, is 2005 (a Saturday: the Thursday of 2105
  // does not move it a century).
  const HttpDate in2026 = strict_ok("Thursday, 01-Jan-05 00:00:00 GMT");
  EXPECT_EQ(unix_of(in2026), 1104537600);
  EXPECT_TRUE(in2026.deviations.has(Dev::kWeekdayMismatch));
  EXPECT_EQ(unix_of(strict_ok("Saturday, 01-Jan-05 00:00:00 GMT")), 1104537600);
}

TEST(HttpDateRfc850, RuleHoldsForManyNowsAndEveryTwoDigitYear) {
  // For each now and two-digit year, the chosen year Y ends in those digits,
  // the same date-time in Y - 50 is not after now, and in Y + 50 it is.
  // The bounds are read independently, as four-digit rfc850 years.
  const std::int64_t nows[] = {1795991400,   // 2026-11-29T22:30:00Z
                               1767225599,   // 2025-12-31T23:59:59Z
                               1767225600,   // 2026-01-01T00:00:00Z
                               0,            // 1970-01-01
                               -1,           // 1969-12-31T23:59:59Z
                               -2208988800,  // 1900-01-01
                               4102444799,   // 2099-12-31T23:59:59Z
                               4107542400,   // 2100-03-01
                               9000000000,   // 2255
                               951825600};   // 2000-02-29T12:00:00Z
  const std::pair<const char*, const char*> dates[] = {{"01-Jan-", " 00:00:00"},
                                                       {"31-Dec-", " 23:59:59"},
                                                       {"29-Nov-", " 22:30:00"},
                                                       {"15-Jun-", " 12:00:00"},
                                                       {"01-Mar-", " 00:00:00"}};
  for (const std::int64_t n : nows) {
    const WallTime now = at(n);
    for (const auto& date_and_time : dates) {
      // Plain references: clang before 16 cannot capture a structured binding in a lambda.
      const auto& date_part = date_and_time.first;
      const auto& time_part = date_and_time.second;
      for (int yy = 0; yy < 100; ++yy) {
        const std::string digits{static_cast<char>('0' + yy / 10), static_cast<char>('0' + yy % 10)};
        const std::string two = date_part + digits + time_part + " GMT";
        const HttpDate d = robust_ok(two, now);
        ASSERT_EQ(d.form, HttpDateForm::kRfc850) << two;
        // The chosen year, from the formatted result.
        const std::string imf = format_imf_fixdate(d.seconds);
        const int year = std::stoi(imf.substr(12, 4));
        EXPECT_EQ(year % 100, yy) << two << " at " << n;
        const auto shifted = [&](int y) {
          const std::string four = date_part + std::to_string(y) + time_part + " GMT";
          return robust_ok(four, now).seconds;
        };
        EXPECT_LE(shifted(year - 50).time_since_epoch().count(), n) << two << " at " << n << " -> " << year;
        EXPECT_GT(shifted(year + 50).time_since_epoch().count(), n) << two << " at " << n << " -> " << year;
      }
    }
  }
}

TEST(HttpDateRfc850, LeapDayResolvedBeforeTheCalendarCheck) {
  // 29-Feb-00 is valid because the year resolves to 2000.
  EXPECT_EQ(unix_of(strict_ok("Tuesday, 29-Feb-00 12:00:00 GMT")), 951825600);
}

// ---- robust mode -------------------------------------------------------------

TEST(HttpDateRobust, CanonicalInputHasNoDeviations) {
  for (const char* text : {"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
                           "Sun Nov  6 08:49:37 1994", "Thu Nov 10 08:49:37 1994"}) {
    EXPECT_TRUE(robust_ok(text).deviations.empty()) << text;
  }
}

TEST(HttpDateRobust, AcceptedDeviationsAreReported) {
  struct Case {
    const char* text;
    std::initializer_list<Dev> devs;
    HttpDateForm form;
  };
  const Case cases[] = {
      {"Sun, 06 Nov 1994 08:49:37 UTC", {Dev::kZoneUtc}, HttpDateForm::kImfFixdate},
      {"Sun, 06 Nov 1994 08:49:37 utc", {Dev::kZoneUtc, Dev::kCase}, HttpDateForm::kImfFixdate},
      {"Sun, 06 Nov 1994 08:49:37 +0000", {Dev::kZoneNumeric}, HttpDateForm::kImfFixdate},
      {"sun, 06 nov 1994 08:49:37 gmt", {Dev::kCase}, HttpDateForm::kImfFixdate},
      {"SUN, 06 NOV 1994 08:49:37 GMT", {Dev::kCase}, HttpDateForm::kImfFixdate},
      {"SUNDAY, 06-Nov-94 08:49:37 GMT", {Dev::kCase}, HttpDateForm::kRfc850},
      {"Sun, 6 Nov 1994 08:49:37 GMT", {Dev::kOneDigitDay}, HttpDateForm::kImfFixdate},
      {"06 Nov 1994 08:49:37 GMT", {Dev::kMissingDayName}, HttpDateForm::kImfFixdate},
      {"6 Nov 1994 08:49:37 GMT", {Dev::kMissingDayName, Dev::kOneDigitDay}, HttpDateForm::kImfFixdate},
      {"06-Nov-94 08:49:37 GMT", {Dev::kMissingDayName}, HttpDateForm::kRfc850},
      {"Nov  6 08:49:37 1994", {Dev::kMissingDayName}, HttpDateForm::kAsctime},
      {"Sun,  06  Nov 1994   08:49:37 GMT", {Dev::kExtraSpace}, HttpDateForm::kImfFixdate},
      {"Sun,\t06 Nov 1994 08:49:37 GMT", {Dev::kExtraSpace}, HttpDateForm::kImfFixdate},
      {"Sun\tNov  6 08:49:37 1994", {Dev::kExtraSpace}, HttpDateForm::kAsctime},
      {"Sun Nov   6 08:49:37 1994", {Dev::kExtraSpace}, HttpDateForm::kAsctime},
      {"Sun Nov  06 08:49:37 1994", {Dev::kExtraSpace}, HttpDateForm::kAsctime},
      {"Sun Nov 6 08:49:37 1994", {Dev::kOneDigitDay}, HttpDateForm::kAsctime},
      {"Sunday, 06 Nov 1994 08:49:37 GMT", {Dev::kDayNameLength}, HttpDateForm::kImfFixdate},
      {"Sun, 06-Nov-94 08:49:37 GMT", {Dev::kDayNameLength}, HttpDateForm::kRfc850},
      {"Sunday Nov  6 08:49:37 1994", {Dev::kDayNameLength}, HttpDateForm::kAsctime},
      {"Sunday, 06-Nov-1994 08:49:37 GMT", {Dev::kFourDigitYear}, HttpDateForm::kRfc850},
      {"sun,   6 NOV 1994 08:49:37 Utc",
       {Dev::kCase, Dev::kOneDigitDay, Dev::kExtraSpace, Dev::kZoneUtc},
       HttpDateForm::kImfFixdate},
  };
  for (const auto& c : cases) {
    const HttpDate d = robust_ok(c.text);
    EXPECT_EQ(unix_of(d), kRfcExample) << c.text;
    EXPECT_EQ(d.form, c.form) << c.text;
    DateDeviations want;
    for (const Dev x : c.devs) want.add(x);
    EXPECT_EQ(d.deviations, want) << c.text << ": got " << to_string(d.deviations);
    // Strict mode rejects every one of them.
    EXPECT_FALSE(parse_http_date(c.text, kNow, ParseMode::kStrict)) << c.text;
  }
}

TEST(HttpDateRobust, FourDigitYearIgnoresTheFiftyYearRule) {
  // 2080 is more than 50 years after kNow, but four digits leave no doubt.
  EXPECT_EQ(unix_of(robust_ok("Monday, 01-Jan-2080 00:00:00 GMT")), 3471292800);
  EXPECT_EQ(unix_of(strict_ok("Mon, 01 Jan 2080 00:00:00 GMT")), 3471292800);
}

TEST(HttpDateRobust, StillRejectsWhatIsAmbiguousOrBroken) {
  struct Case {
    const char* text;
    Code code;
    std::uint32_t offset;
  };
  const Case cases[] = {
      {"Sun, 06 Nov 1994 08:49:37 +0100", Code::kBadZone, 26},
      {"Sun, 06 Nov 1994 08:49:37 EST", Code::kBadZone, 26},
      {"Sun, 06 Nov 1994 08:49:37 Z", Code::kBadZone, 26},
      {"Sun, 06 Nov 1994 08:49:37", Code::kTruncated, 25},
      {"Sun, 06 Nov 1994 08:49:37 GMT junk", Code::kTrailingGarbage, 29},
      {" Sun, 06 Nov 1994 08:49:37 GMT", Code::kBadDayName, 0},
      {"Sun, 06 Nov 94 08:49:37 GMT", Code::kBadYear, 12},
      {"Sunday, 06-Nov-994 08:49:37 GMT", Code::kBadYear, 15},
      {"Sunday, 06-Nov-19940 08:49:37 GMT", Code::kBadYear, 15},
      {"Sun, 106 Nov 1994 08:49:37 GMT", Code::kBadDay, 5},
      {"Sun, 06 November 1994 08:49:37 GMT", Code::kBadMonth, 8},
      {"Sun, 06 Nov 1994 08:49 GMT", Code::kUnexpectedChar, 22},
      {"Sun,06 Nov 1994 08:49:37 GMT", Code::kUnexpectedChar, 4},
      {"Nov 1994", Code::kBadDay, 4},
      {"1994-11-06T08:49:37Z", Code::kBadDay, 0},
      {"Sun, 06 Nov 1994 08:49:37 GMT, Mon, 07 Nov 1994 08:49:37 GMT", Code::kTrailingGarbage, 29},
  };
  for (const auto& c : cases) {
    const DateError e = rejected(c.text, ParseMode::kRobust);
    EXPECT_EQ(e.code, c.code) << c.text << ": " << e.message();
    EXPECT_EQ(e.offset, c.offset) << c.text << ": " << e.message();
  }
}

// ---- range of instants ---------------------------------------------------------

TEST(HttpDateRange, YearsBeyondWallTimeSaturate) {
  const HttpDate late = strict_ok("Fri, 31 Dec 9999 23:59:59 GMT");
  EXPECT_EQ(unix_of(late), 253402300799);
  EXPECT_EQ(late.time, WallTime::max());
  const HttpDate early = strict_ok("Sat, 01 Jan 0000 00:00:00 GMT");
  EXPECT_EQ(unix_of(early), -62135596800 - 366 * 86400);
  EXPECT_EQ(early.time, WallTime::min());
  // A leap second at the very end of 9999 is 10000-01-01T00:00:00Z: read
  // exactly, but IMF-fixdate cannot write it, so formatting clamps to the last
  // four-digit second (found by fuzz/http_date_fuzz).
  const HttpDate leap = strict_ok("Fri, 31 Dec 9999 23:59:60 GMT");
  EXPECT_EQ(unix_of(leap), 253402300800);
  EXPECT_EQ(leap.time, WallTime::max());
  EXPECT_EQ(format_imf_fixdate(leap.seconds), "Fri, 31 Dec 9999 23:59:59 GMT");
  // The last whole second WallTime holds is still exact.
  const HttpDate edge = strict_ok("Fri, 11 Apr 2262 23:47:16 GMT");
  EXPECT_EQ(edge.time, at(9223372036));
}

// ---- the calendar, day by day -----------------------------------------------------

// Every day of years 0000..9999, counted one at a time by the Gregorian rule
// as written (no closed formula): parsing names that day's midnight with no
// deviation (so the weekday agrees), formatting gives the same text back, RFC
// 3339 agrees, and the day after each month's last is rejected as out of range.
TEST(HttpDateCalendar, EveryDayOfEveryFourDigitYear) {
  static constexpr std::array<const char*, 7> kDays = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr std::array<const char*, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const auto leap = [](int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; };
  const auto month_length = [&](int y, int m) {
    if (m == 2) return leap(y) ? 29 : 28;
    return (m == 4 || m == 6 || m == 9 || m == 11) ? 30 : 31;
  };
  std::int64_t day_number = -719528;  // 0000-01-01, a Saturday
  int weekday = 6;
  int failures = 0;
  char text[64];
  for (int y = 0; y <= 9999 && failures < 10; ++y) {
    for (int m = 1; m <= 12; ++m) {
      const int last = month_length(y, m);
      for (int d = 1; d <= last; ++d, ++day_number, weekday = (weekday + 1) % 7) {
        std::snprintf(text, sizeof text, "%s, %02d %s %04d 00:00:00 GMT", kDays[static_cast<std::size_t>(weekday)], d,
                      kMonths[static_cast<std::size_t>(m - 1)], y);
        const auto r = parse_http_date(text, kNow, ParseMode::kStrict);
        const std::chrono::sys_seconds midnight{std::chrono::seconds{day_number * 86400}};
        if (!r || r->seconds != midnight || !r->deviations.empty() || format_imf_fixdate(midnight) != text) {
          ADD_FAILURE() << text << " -> " << (r ? format_imf_fixdate(r->seconds) : r.error().message());
          ++failures;
        }
        // Within WallTime's range RFC 3339 reads the same instant.
        if (y >= 1678 && y <= 2261 && d == 1) {
          std::snprintf(text, sizeof text, "%04d-%02d-01T00:00:00Z", y, m);
          const auto t = parse_rfc3339(text);
          if (!t || *t != WallTime{midnight.time_since_epoch()}) {
            ADD_FAILURE() << text;
            ++failures;
          }
        }
      }
      // The day after the last one does not exist (29 Feb in a common year too).
      if (last < 31) {
        std::snprintf(text, sizeof text, "%02d %s %04d 00:00:00 GMT", last + 1,
                      kMonths[static_cast<std::size_t>(m - 1)], y);
        const auto r = parse_http_date(text, kNow, ParseMode::kRobust);
        if (r || r.error().code != Code::kDayOutOfRange) {
          ADD_FAILURE() << text << " was not rejected as out of range";
          ++failures;
        }
      }
    }
  }
  EXPECT_EQ(day_number, 2932897);  // 10000-01-01
  EXPECT_EQ(failures, 0);
}

// ---- formatting ------------------------------------------------------------------

TEST(HttpDateFormat, ImfFixdate) {
  EXPECT_EQ(format_imf_fixdate(at(kRfcExample)), "Sun, 06 Nov 1994 08:49:37 GMT");
  // Sub-second parts are dropped toward the past.
  EXPECT_EQ(format_imf_fixdate(at(kRfcExample) + 999ms), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(format_imf_fixdate(WallTime{} - 1ns), "Wed, 31 Dec 1969 23:59:59 GMT");
  EXPECT_EQ(format_imf_fixdate(WallTime::max()), "Fri, 11 Apr 2262 23:47:16 GMT");
  EXPECT_EQ(format_imf_fixdate(WallTime::min()), "Tue, 21 Sep 1677 00:12:43 GMT");
  EXPECT_EQ(format_imf_fixdate(std::chrono::sys_seconds{253402300799s}), "Fri, 31 Dec 9999 23:59:59 GMT");
  std::array<char, kImfFixdateLength> buf{};
  format_imf_fixdate(kNow, buf);
  EXPECT_EQ(std::string_view(buf.data(), buf.size()), "Sun, 29 Nov 2026 22:30:00 GMT");
}

TEST(HttpDateFormat, RoundTrips) {
  // Every 7919 minutes from 1677 to 2262: format, parse back, same instant.
  for (std::int64_t s = -9223372036 + 1; s < 9223372036; s += 7919 * 60) {
    const std::string text = format_imf_fixdate(at(s));
    const auto back = parse_http_date(text, kNow);
    ASSERT_TRUE(back) << text;
    EXPECT_EQ(unix_of(*back), s) << text;
  }
}

// ---- errors ------------------------------------------------------------------------

TEST(HttpDateError, MessagesSayWhatAndWhere) {
  EXPECT_EQ(rejected("Sun. 06 Nov 1994 08:49:37 GMT", ParseMode::kStrict).message(), "expected ',' at byte 3");
  EXPECT_EQ(rejected("Sun,06 Nov 1994 08:49:37 GMT", ParseMode::kStrict).message(), "expected a space at byte 4");
  EXPECT_EQ(rejected("Wed, 30 Feb 1994 08:49:37 GMT", ParseMode::kStrict).message(),
            "day does not exist in that month at byte 5");
  EXPECT_EQ(rejected("Sun, 06 Nov 1994 08:49:37 UTC", ParseMode::kStrict).message(), "expected GMT at byte 26");
  EXPECT_EQ(rejected("", ParseMode::kStrict).message(), "empty value at byte 0");
}

TEST(HttpDateError, DeviationDescriptions) {
  DateDeviations d;
  EXPECT_EQ(to_string(d), "");
  d.add(Dev::kZoneUtc);
  d.add(Dev::kCase);
  EXPECT_TRUE(d.has(Dev::kZoneUtc));
  EXPECT_FALSE(d.has(Dev::kExtraSpace));
  EXPECT_EQ(to_string(d), "name or zone not in the grammar's case; UTC instead of GMT");
  for (const Dev x : kAllDateDeviations) EXPECT_FALSE(to_string(x).empty());
  EXPECT_EQ(to_string(HttpDateForm::kRfc850), "rfc850-date");
}

// ---- RFC 3339 ------------------------------------------------------------------------

WallTime rfc3339_ok(std::string_view text) {
  auto r = parse_rfc3339(text);
  EXPECT_TRUE(r) << text << ": " << (r ? "" : r.error().message());
  return r ? *r : WallTime{};
}

TEST(Rfc3339, Parses) {
  EXPECT_EQ(rfc3339_ok("2026-11-29T22:30:00Z"), kNow);
  EXPECT_EQ(rfc3339_ok("2026-11-29t22:30:00z"), kNow);
  EXPECT_EQ(rfc3339_ok("2026-11-29 22:30:00Z"), kNow);
  EXPECT_EQ(rfc3339_ok("2026-11-29T23:30:00+01:00"), kNow);
  EXPECT_EQ(rfc3339_ok("2026-11-29T17:00:00-05:30"), kNow);
  EXPECT_EQ(rfc3339_ok("2026-11-29T22:30:00-00:00"), kNow);
  EXPECT_EQ(rfc3339_ok("2026-11-29T22:30:00.5Z"), kNow + 500ms);
  EXPECT_EQ(rfc3339_ok("2026-11-29T22:30:00.000000001Z"), kNow + 1ns);
  EXPECT_EQ(rfc3339_ok("2026-11-29T22:30:00.1234567899999Z"), kNow + 123456789ns);
  EXPECT_EQ(rfc3339_ok("2016-12-31T23:59:60Z"), at(1483228800));
  EXPECT_EQ(rfc3339_ok("1969-12-31T23:59:59.999999999Z"), WallTime{} - 1ns);
  EXPECT_EQ(rfc3339_ok("9999-12-31T23:59:59Z"), WallTime::max());
  EXPECT_EQ(rfc3339_ok("0001-01-01T00:00:00Z"), WallTime::min());
}

TEST(Rfc3339, RejectsWithOffsets) {
  struct Case {
    const char* text;
    Code code;
    std::uint32_t offset;
  };
  const Case cases[] = {
      {"", Code::kEmpty, 0},
      {"now", Code::kBadYear, 0},
      {"2026-13-01T00:00:00Z", Code::kMonthOutOfRange, 5},
      {"2026-00-01T00:00:00Z", Code::kMonthOutOfRange, 5},
      {"2026-02-29T00:00:00Z", Code::kDayOutOfRange, 8},
      {"2026-11-29T24:00:00Z", Code::kHourOutOfRange, 11},
      {"2026-11-29T22:60:00Z", Code::kMinuteOutOfRange, 14},
      {"2026-11-29T22:30:61Z", Code::kSecondOutOfRange, 17},
      {"2026-11-29T22:30:00", Code::kTruncated, 19},
      {"2026-11-29", Code::kTruncated, 10},
      {"2026-11-29X22:30:00Z", Code::kUnexpectedChar, 10},
      {"2026/11/29T22:30:00Z", Code::kUnexpectedChar, 4},
      {"2026-11-29T22:30:00+0100", Code::kUnexpectedChar, 22},
      {"2026-11-29T22:30:00+24:00", Code::kOffsetOutOfRange, 19},
      {"2026-11-29T22:30:00.Z", Code::kBadFraction, 20},
      {"2026-11-29T22:30:00 Z", Code::kBadZone, 19},
      {"2026-11-29T22:30:00Z ", Code::kTrailingGarbage, 20},
      {" 2026-11-29T22:30:00Z", Code::kBadYear, 0},
      {"26-11-29T22:30:00Z", Code::kBadYear, 0},
  };
  for (const auto& c : cases) {
    auto r = parse_rfc3339(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_EQ(r.error().code, c.code) << c.text << ": " << r.error().message();
    EXPECT_EQ(r.error().offset, c.offset) << c.text << ": " << r.error().message();
  }
}

TEST(Rfc3339, Formats) {
  EXPECT_EQ(format_rfc3339(kNow), "2026-11-29T22:30:00Z");
  EXPECT_EQ(format_rfc3339(kNow + 250ms), "2026-11-29T22:30:00.25Z");
  EXPECT_EQ(format_rfc3339(kNow + 1ns), "2026-11-29T22:30:00.000000001Z");
  EXPECT_EQ(format_rfc3339(WallTime{} - 1ns), "1969-12-31T23:59:59.999999999Z");
  EXPECT_EQ(format_rfc3339(WallTime::max()), "2262-04-11T23:47:16.854775807Z");
  EXPECT_EQ(format_rfc3339(WallTime::min()), "1677-09-21T00:12:43.145224192Z");
}

TEST(Rfc3339, RoundTrips) {
  for (std::int64_t ns = -9'000'000'000'000'000'000; ns < 9'000'000'000'000'000'000; ns += 77'777'777'777'777'777) {
    const WallTime t{Duration{ns}};
    EXPECT_EQ(rfc3339_ok(format_rfc3339(t)), t) << format_rfc3339(t);
  }
  EXPECT_EQ(rfc3339_ok(format_rfc3339(WallTime::max())), WallTime::max());
  EXPECT_EQ(rfc3339_ok(format_rfc3339(WallTime::min())), WallTime::min());
}

}  // namespace
}  // namespace abide
