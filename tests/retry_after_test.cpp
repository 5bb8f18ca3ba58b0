// Retry-After: delay-seconds and HTTP-date, strict and robust, saturation,
// whitespace, remaining intervals (with and without a server Date), and
// several field lines.
#include "abide/retry_after.h"

#include "abide/result.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace abide {
namespace {

using namespace std::chrono_literals;
using Code = RetryAfterErrorCode;
using Kind = RetryAfter::Kind;

// 2026-11-29T22:30:00Z (a Sunday): the receive time.
constexpr WallTime kReceived{std::chrono::seconds{1795991400}};
constexpr Duration kLargest = kMaxDuration;

RetryAfter ok(std::string_view v, ParseMode mode = ParseMode::kStrict) {
  auto r = parse_retry_after(v, kReceived, mode);
  EXPECT_TRUE(r) << '"' << v << "\": " << (r ? "" : r.error().message());
  return r ? *r : RetryAfter{};
}

RetryAfterError bad(std::string_view v, ParseMode mode = ParseMode::kStrict) {
  auto r = parse_retry_after(v, kReceived, mode);
  EXPECT_FALSE(r) << '"' << v << "\" was accepted";
  return r ? RetryAfterError{} : r.error();
}

// ---- delay-seconds ---------------------------------------------------------

TEST(RetryAfterDelay, Numeric) {
  const RetryAfter r = ok("120");
  EXPECT_EQ(r.kind, Kind::kDelay);
  EXPECT_EQ(r.delay, 120s);
  EXPECT_FALSE(r.saturated);
  EXPECT_FALSE(r.rounded_up);
  EXPECT_FALSE(r.has_deviations());
  EXPECT_EQ(ok("0").delay, 0s);
  EXPECT_EQ(ok("007").delay, 7s);
  EXPECT_EQ(ok("0000000000000000000000000000000000000042").delay, 42s);
  EXPECT_EQ(ok("86400").delay, 24h);
}

TEST(RetryAfterDelay, TooLargeSaturatesInsteadOfWrapping) {
  // Duration (int64 ns) holds 9223372036 whole seconds but not more than
  // 9223372035 plus a whole second, so 9223372036 is the first saturated value.
  const RetryAfter below = ok("9223372035");
  EXPECT_FALSE(below.saturated);
  EXPECT_EQ(below.delay, 9223372035s);
  for (const char* v : {"9223372036", "9223372037", "18446744073709551616", "99999999999999999999999999999999",
                        "18446744073709551615000"}) {
    const RetryAfter r = ok(v);
    EXPECT_EQ(r.kind, Kind::kDelay) << v;
    EXPECT_TRUE(r.saturated) << v;
    EXPECT_EQ(r.delay, kLargest) << v;
    EXPECT_EQ(remaining(r, kReceived), kLargest) << v;
  }
  // Any length is fine: no wrap, no allocation, no error.
  EXPECT_EQ(ok(std::string(10000, '9')).delay, kLargest);
}

TEST(RetryAfterDelay, WhitespaceIsTrimmedByTheFieldParser) {
  EXPECT_EQ(ok(" 120").delay, 120s);
  EXPECT_EQ(ok("120 ").delay, 120s);
  EXPECT_EQ(ok(" \t 120 \t ").delay, 120s);
  EXPECT_EQ(ok("\tSun, 06 Nov 1994 08:49:37 GMT  ").date.seconds.time_since_epoch().count(), 784111777);
  // Only SP and HTAB are OWS.
  EXPECT_EQ(bad("120\r\n").code, Code::kTrailingGarbage);
  EXPECT_EQ(bad("\n120").code, Code::kBadDate);
  // Whitespace inside a delay is not.
  const RetryAfterError e = bad("1 20");
  EXPECT_EQ(e.code, Code::kTrailingGarbage);
  EXPECT_EQ(e.offset, 1u);
}

TEST(RetryAfterDelay, MalformedIsAnErrorNeverZero) {
  struct Case {
    std::string_view value;
    Code code;
    std::uint32_t offset;
  };
  const Case cases[] = {
      {"", Code::kEmpty, 0},
      {"   ", Code::kEmpty, 0},
      {"\t", Code::kEmpty, 0},
      {"-5", Code::kNegative, 0},
      {"  -5", Code::kNegative, 2},
      {"-0", Code::kNegative, 0},
      {"+5", Code::kSigned, 0},
      {"2.5", Code::kFractional, 1},
      {"2.0", Code::kFractional, 1},
      {"0x1A", Code::kTrailingGarbage, 1},
      {"12s", Code::kTrailingGarbage, 2},
      {"1e3", Code::kTrailingGarbage, 1},
      {"30, 60", Code::kTrailingGarbage, 2},
      {"30, Fri, 31 Dec 1999 23:59:59 GMT", Code::kTrailingGarbage, 2},
      {"120;q=1", Code::kTrailingGarbage, 3},
      {"abc", Code::kBadDate, 0},
      {".5", Code::kBadDate, 0},
      {"NaN", Code::kBadDate, 0},
      {"\xd9\xa1\xd9\xa2", Code::kBadDate, 0},  // Arabic-Indic digits are not DIGIT
  };
  for (const auto& c : cases) {
    const RetryAfterError e = bad(c.value);
    EXPECT_EQ(e.code, c.code) << '"' << c.value << "\": " << e.message();
    EXPECT_EQ(e.offset, c.offset) << '"' << c.value << "\": " << e.message();
  }
}

TEST(RetryAfterDelay, RobustRoundsAFractionUpAndSaysSo) {
  struct Case {
    std::string_view value;
    Duration delay;
  };
  const Case cases[] = {{"2.5", 3s},       {"2.0", 2s}, {"2.000", 2s},  {"0.001", 1s},
                        {"299.997", 300s}, {"0.0", 0s}, {" 2.542 ", 3s}};
  for (const auto& c : cases) {
    const RetryAfter r = ok(c.value, ParseMode::kRobust);
    EXPECT_EQ(r.kind, Kind::kDelay) << c.value;
    EXPECT_EQ(r.delay, c.delay) << c.value;
    EXPECT_TRUE(r.rounded_up) << c.value;
    EXPECT_TRUE(r.has_deviations()) << c.value;
  }
  EXPECT_FALSE(ok("120", ParseMode::kRobust).rounded_up);
  // Rounding up at the top saturates.
  EXPECT_TRUE(ok("9223372035.5", ParseMode::kRobust).saturated);
  EXPECT_FALSE(ok("9223372035.0", ParseMode::kRobust).saturated);
  EXPECT_TRUE(ok("99999999999999999999.5", ParseMode::kRobust).saturated);
}

TEST(RetryAfterDelay, RobustStillRejectsTheRest) {
  struct Case {
    std::string_view value;
    Code code;
    std::uint32_t offset;
  };
  const Case cases[] = {
      {"", Code::kEmpty, 0},
      {"-5", Code::kNegative, 0},
      {"-1.5", Code::kNegative, 0},
      {"+5", Code::kSigned, 0},
      {"0x1A", Code::kTrailingGarbage, 1},
      {"2.", Code::kFractional, 1},
      {"2.5s", Code::kTrailingGarbage, 3},
      {"2.5.1", Code::kTrailingGarbage, 3},
      {"2,5", Code::kTrailingGarbage, 1},
      {"1e3", Code::kTrailingGarbage, 1},
      {"junk", Code::kBadDate, 0},
  };
  for (const auto& c : cases) {
    const RetryAfterError e = bad(c.value, ParseMode::kRobust);
    EXPECT_EQ(e.code, c.code) << '"' << c.value << "\": " << e.message();
    EXPECT_EQ(e.offset, c.offset) << '"' << c.value << "\": " << e.message();
  }
}

// ---- HTTP-date -----------------------------------------------------------------

TEST(RetryAfterDate, AllThreeForms) {
  for (const char* v :
       {"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"}) {
    const RetryAfter r = ok(v);
    EXPECT_EQ(r.kind, Kind::kDate) << v;
    EXPECT_EQ(r.date.seconds.time_since_epoch().count(), 784111777) << v;
  }
  EXPECT_EQ(ok("Sunday, 06-Nov-94 08:49:37 GMT").date.form, HttpDateForm::kRfc850);
}

TEST(RetryAfterDate, FutureDateGivesTheRemainingInterval) {
  const RetryAfter r = ok("Sun, 29 Nov 2026 22:32:00 GMT");
  EXPECT_EQ(remaining(r, kReceived), 120s);
  EXPECT_EQ(remaining(r, kReceived + 30s), 90s);
  EXPECT_EQ(remaining(r, kReceived + 500ms), 119500ms);
}

TEST(RetryAfterDate, PastDateClampsToZero) {
  EXPECT_EQ(remaining(ok("Sun, 06 Nov 1994 08:49:37 GMT"), kReceived), 0s);
  EXPECT_EQ(remaining(ok("Sun, 29 Nov 2026 22:30:00 GMT"), kReceived), 0s);
  EXPECT_EQ(remaining(ok("Sun, 29 Nov 2026 22:30:00 GMT"), kReceived + 1ns), 0s);
  // A date before WallTime's range is still just "in the past".
  EXPECT_EQ(remaining(ok("Sat, 01 Jan 0000 00:00:00 GMT"), kReceived), 0s);
}

TEST(RetryAfterDate, FarFutureSaturates) {
  const RetryAfter r = ok("Fri, 31 Dec 9999 23:59:59 GMT");
  EXPECT_EQ(r.date.time, WallTime::max());
  EXPECT_GT(remaining(r, kReceived), 200 * 365 * 24h);
  EXPECT_EQ(remaining(r, WallTime::min()), kLargest);
}

TEST(RetryAfterDate, LeapSecond) {
  const RetryAfter r = ok("Sat, 31 Dec 2016 23:59:60 GMT");
  EXPECT_EQ(r.date.seconds.time_since_epoch().count(), 1483228800);
}

TEST(RetryAfterDate, TwoDigitYearUsesTheGivenNow) {
  // Exactly 50 years after kReceived: 2076; one second more: 1976 (past, zero).
  EXPECT_EQ(ok("Sunday, 29-Nov-76 22:30:00 GMT").date.seconds.time_since_epoch().count(), 3373914600);
  const RetryAfter old = ok("Monday, 29-Nov-76 22:30:01 GMT");
  EXPECT_EQ(old.date.seconds.time_since_epoch().count(), 218154601);
  EXPECT_EQ(remaining(old, kReceived), 0s);
}

TEST(RetryAfterDate, ErrorsPointIntoTheUntrimmedValue) {
  const RetryAfterError e = bad("  Sun, 06 Nov 1994 08:49:37 UTC");
  EXPECT_EQ(e.code, Code::kBadDate);
  EXPECT_EQ(e.offset, 28u);
  EXPECT_EQ(e.date_error.code, DateErrorCode::kBadZone);
  EXPECT_EQ(e.date_error.offset, 28u);
  EXPECT_EQ(e.message(), "not a delay or an HTTP-date: expected GMT at byte 28");
  EXPECT_EQ(bad("Wed, 30 Feb 2026 00:00:00 GMT").date_error.code, DateErrorCode::kDayOutOfRange);
}

TEST(RetryAfterDate, RobustReportsDateDeviations) {
  const RetryAfter r = ok("Sun, 06 Nov 1994 08:49:37 UTC", ParseMode::kRobust);
  EXPECT_EQ(r.kind, Kind::kDate);
  EXPECT_TRUE(r.date.deviations.has(DateDeviation::kZoneUtc));
  EXPECT_TRUE(r.has_deviations());
  EXPECT_FALSE(ok("Sun, 06 Nov 1994 08:49:37 GMT", ParseMode::kRobust).has_deviations());
}

TEST(RetryAfterDate, MismatchedDayNameStillWaitsForTheDateInBothModes) {
  // 29 Nov 2026 is a Sunday; the server's hour is still an hour away.
  for (const char* v :
       {"Mon, 29 Nov 2026 23:30:00 GMT", "Monday, 29-Nov-26 23:30:00 GMT", "Mon Nov 29 23:30:00 2026"}) {
    for (const ParseMode mode : {ParseMode::kStrict, ParseMode::kRobust}) {
      const RetryAfter r = ok(v, mode);
      EXPECT_EQ(r.kind, Kind::kDate) << v;
      EXPECT_EQ(remaining(r, kReceived), 1h) << v;
      EXPECT_TRUE(r.date.deviations.has(DateDeviation::kWeekdayMismatch)) << v;
      EXPECT_TRUE(r.has_deviations()) << v;
    }
  }
  // Beside a shorter valid line it is the longer wait that wins, not a backoff.
  const std::array<std::string_view, 2> l = {"60", "Mon, 29 Nov 2026 23:30:00 GMT"};
  auto r = parse_retry_after_lines(l, kReceived);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->line, 1u);
  EXPECT_EQ(remaining(r->value, kReceived), 1h);
}

TEST(RetryAfterError, Messages) {
  EXPECT_EQ(bad("-5").message(), "negative delay at byte 0");
  EXPECT_EQ(bad("2.5").message(), "fractional delay at byte 1");
  EXPECT_EQ(bad("").message(), "empty value at byte 0");
  EXPECT_EQ(bad("12s").message(), "unexpected text after the delay at byte 2");
}

// ---- remaining with the server's Date ------------------------------------------------

TEST(RetryAfterRemaining, ServerDateCanOnlyLengthenTheWait) {
  const RetryAfter hint = ok("Sun, 29 Nov 2026 22:30:10 GMT");  // received + 10 s
  // Server clock 60 s behind ours: hint - Date = 70 s.
  EXPECT_EQ(remaining(hint, kReceived, kReceived - 60s), 70s);
  // Server clock 60 s ahead: hint - Date is negative; the local 10 s stands.
  EXPECT_EQ(remaining(hint, kReceived, kReceived + 60s), 10s);
  // No Date: local only.
  EXPECT_EQ(remaining(hint, kReceived, std::nullopt), 10s);
  // Both in the past: zero.
  EXPECT_EQ(remaining(hint, kReceived + 1h, kReceived + 1h), 0s);
  // A delay counts from receipt whatever the Date says.
  EXPECT_EQ(remaining(ok("30"), kReceived, kReceived - 1h), 30s);
  // Extreme Date values saturate instead of overflowing.
  EXPECT_EQ(remaining(hint, kReceived, WallTime::min()), kLargest);
}

// ---- several field lines ----------------------------------------------------------

Result<RetryAfterLines, RetryAfterError> lines(std::initializer_list<std::string_view> l,
                                               ParseMode mode = ParseMode::kStrict) {
  return parse_retry_after_lines(std::span<const std::string_view>(l.begin(), l.size()), kReceived, mode);
}

TEST(RetryAfterLines, OneLine) {
  auto r = lines({"120"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->value.delay, 120s);
  EXPECT_EQ(r->line, 0u);
  EXPECT_TRUE(r->warnings.empty());
}

TEST(RetryAfterLines, IdenticalValuesAreFine) {
  auto r = lines({"120", "120", " 120"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->value.delay, 120s);
  EXPECT_TRUE(r->warnings.empty());
  auto d = lines({"Sun, 29 Nov 2026 22:32:00 GMT", "Sunday, 29-Nov-26 22:32:00 GMT"});
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->warnings.empty());
}

TEST(RetryAfterLines, ConflictResolvesToTheLongestWait) {
  auto r = lines({"60", "120", "30"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->value.delay, 120s);
  EXPECT_EQ(r->line, 1u);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("conflicting"), std::string::npos) << r->warnings[0];
  EXPECT_NE(r->warnings[0].find("\"120\""), std::string::npos) << r->warnings[0];
}

TEST(RetryAfterLines, DatesAreComparedAfterResolvingAgainstReceipt) {
  // The date is 300 s after receipt, longer than the 120 s delay.
  auto r = lines({"120", "Sun, 29 Nov 2026 22:35:00 GMT"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->value.kind, Kind::kDate);
  EXPECT_EQ(r->line, 1u);
  EXPECT_EQ(remaining(r->value, kReceived), 300s);
  EXPECT_EQ(r->warnings.size(), 1u);
  // A past date waits less than any delay.
  auto p = lines({"Sun, 06 Nov 1994 08:49:37 GMT", "5"});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->value.kind, Kind::kDelay);
  EXPECT_EQ(p->value.delay, 5s);
  // Equal waits in different forms: the first is kept, with a warning.
  auto e = lines({"120", "Sun, 29 Nov 2026 22:32:00 GMT"});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->line, 0u);
  EXPECT_EQ(e->warnings.size(), 1u);
}

TEST(RetryAfterLines, InvalidLinesAreIgnoredWhenAValidOneExists) {
  auto r = lines({"soon", "30", "-1"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->value.delay, 30s);
  EXPECT_EQ(r->line, 1u);
  ASSERT_EQ(r->warnings.size(), 2u);
  EXPECT_NE(r->warnings[0].find("\"soon\""), std::string::npos) << r->warnings[0];
  EXPECT_NE(r->warnings[1].find("negative delay"), std::string::npos) << r->warnings[1];
}

TEST(RetryAfterLines, NoValidLineIsTheFirstError) {
  auto r = lines({"-1", "soon"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kNegative);
  auto none = lines({});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, Code::kEmpty);
}

TEST(RetryAfterLines, ModeAppliesToEveryLine) {
  EXPECT_FALSE(lines({"2.5"}));
  auto r = lines({"2.5", "2"}, ParseMode::kRobust);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->value.delay, 3s);
  EXPECT_TRUE(r->value.rounded_up);
}

TEST(RetryAfterLines, WarningsQuoteHostileValuesSafely) {
  const std::string longv(500, 'x');
  const std::array<std::string_view, 3> l = {"1", std::string_view("\x1b[31m\n", 6), longv};
  auto r = parse_retry_after_lines(l, kReceived);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->warnings.size(), 2u);
  EXPECT_NE(r->warnings[0].find("\\x1b[31m\\x0a"), std::string::npos) << r->warnings[0];
  EXPECT_LT(r->warnings[1].size(), 200u);
}

// ---- Result (abide/result.h), on which every parser above reports ----

struct ResultCode {
  int n = 0;
};

// An error that does not convert to the value type is fine; one that does, or
// the same type, is refused at compile time (Result's static_assert uses this).
static_assert(DistinctResultTypes<HttpDate, DateError>);
static_assert(DistinctResultTypes<std::vector<std::string>, std::string>);
static_assert(DistinctResultTypes<std::string, ErrorMessage>);
static_assert(DistinctResultTypes<int, ResultCode>);
static_assert(!DistinctResultTypes<std::string, std::string>);
static_assert(!DistinctResultTypes<const std::string, std::string>);
static_assert(!DistinctResultTypes<std::string, const char*>);  // "text" would be a success
static_assert(!DistinctResultTypes<int, double>);
static_assert(!DistinctResultTypes<bool, int>);

// fail(x) builds any Result whose E takes x implicitly; nothing else does.
static_assert(std::is_convertible_v<Unexpected<const char*>, Result<int, std::string>>);
static_assert(std::is_convertible_v<Unexpected<std::string>, Result<std::string, ErrorMessage>>);
static_assert(std::is_convertible_v<Unexpected<const char*>, Result<std::string, ErrorMessage>>);
static_assert(!std::is_convertible_v<Unexpected<int>, Result<int, std::string>>);
static_assert(!std::is_convertible_v<Unexpected<std::string_view>, Result<int, std::string>>);
// A plain value is always the success, never the error.
static_assert(std::is_convertible_v<std::string, Result<std::string, ErrorMessage>>);
static_assert(!std::is_convertible_v<ResultCode, Result<int, ResultCode>>);

// Usable in constant expressions.
static_assert(Result<int, ResultCode>(7).value_or(0) == 7);
static_assert(Result<int, ResultCode>(fail(ResultCode{3})).value_or(-1) == -1);
static_assert(Result<int, ResultCode>(fail(ResultCode{3})).error().n == 3);

Result<int, std::string> half(int v) {
  if (v % 2 != 0) return fail("odd");  // a literal, converted to E at the return
  return v / 2;
}

Result<std::string, ErrorMessage> greet(std::string_view name) {
  if (name.empty()) return fail("no name");
  return std::string("hello ") + std::string(name);
}

TEST(Result, BuiltFromFailWithoutCeremony) {
  const auto even = half(8);
  ASSERT_TRUE(even.has_value());
  EXPECT_EQ(*even, 4);
  const auto odd = half(3);
  ASSERT_FALSE(odd);
  EXPECT_EQ(odd.error(), "odd");
  const Result<int, std::string> from_string = fail(std::string("moved"));
  EXPECT_EQ(from_string.error(), "moved");
}

TEST(Result, TextValueWithErrorMessageKeepsErrorAndValueApart) {
  const auto ok = greet("ada");
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, "hello ada");
  EXPECT_EQ(ok->size(), 9u);
  const auto bad = greet("");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().text, "no name");
  EXPECT_EQ(bad.error(), ErrorMessage("no name"));
}

TEST(Result, ValueOrGivesTheValueOrTheFallback) {
  EXPECT_EQ(half(10).value_or(-1), 5);
  EXPECT_EQ(half(11).value_or(-1), -1);
  EXPECT_EQ(greet("").value_or("nobody"), "nobody");
  // The rvalue form moves the value out: a move-only T works.
  Result<std::unique_ptr<int>, ResultCode> owned(std::make_unique<int>(42));
  const std::unique_ptr<int> p = std::move(owned).value_or(nullptr);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 42);
  Result<std::unique_ptr<int>, ResultCode> none(fail(ResultCode{1}));
  EXPECT_EQ(std::move(none).value_or(nullptr), nullptr);
}

TEST(Result, ParsersReturnErrorsThatValueOrCanReplace) {
  // A rejected Retry-After never reads as a value: value_or is the only way
  // to get one from a failure.
  const auto r = parse_retry_after("soon", kReceived, ParseMode::kStrict);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Code::kBadDate);
  RetryAfter fallback;
  fallback.delay = std::chrono::seconds{99};
  EXPECT_EQ(r.value_or(fallback).delay, std::chrono::seconds{99});
}

// Reading the value of an error is never silent: it asserts where asserts
// are on, and throws (no undefined behaviour, no garbage value) where not.
TEST(Result, ValueOfAnErrorIsNeverSilent) {
  const auto odd = half(1);
#ifdef NDEBUG
  EXPECT_THROW((void)odd.value(), std::bad_variant_access);
  EXPECT_THROW((void)*odd, std::bad_variant_access);
  const auto even = half(2);
  EXPECT_THROW((void)even.error(), std::bad_variant_access);
#else
  EXPECT_DEATH((void)odd.value(), "value\\(\\) on an error");
  EXPECT_DEATH((void)*odd, "value\\(\\) on an error");
  const auto even = half(2);
  EXPECT_DEATH((void)even.error(), "error\\(\\) on a value");
#endif
}

}  // namespace
}  // namespace abide
