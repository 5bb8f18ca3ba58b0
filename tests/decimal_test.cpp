// The decimal number reader: values, where a run of digits ends, digit
// limits, saturation and overflow at each type's edge, "no digits" never read
// as 0, and the same answers with limits given at run time.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include "decimal.h"

namespace {

using abide::detail::kAnyDigits;
using abide::detail::parse_decimal;
using abide::detail::read_decimal;
using namespace std::string_view_literals;

constexpr auto kU64Max = std::numeric_limits<std::uint64_t>::max();
constexpr auto kI64Max = std::numeric_limits<std::int64_t>::max();

TEST(Decimal, ReadsTheRunOfDigitsAndSaysWhereItEnds) {
  const auto r = read_decimal<std::uint64_t, kU64Max>("1234 rest");
  EXPECT_EQ(r.value, 1234U);
  EXPECT_EQ(r.digits, 4U);
  EXPECT_FALSE(r.over);

  const auto zeros = read_decimal<std::uint64_t, kU64Max>("000042");
  EXPECT_EQ(zeros.value, 42U);
  EXPECT_EQ(zeros.digits, 6U);

  const auto zero = read_decimal<std::uint64_t, kU64Max>("0");
  EXPECT_EQ(zero.value, 0U);
  EXPECT_EQ(zero.digits, 1U);
}

TEST(Decimal, NoDigitsIsNoNumber) {
  for (const std::string_view s : {""sv, "x1"sv, " 1"sv, "-1"sv, "+1"sv, ".5"sv, "\xd9\xa1"sv, "/"sv, ":"sv}) {
    const auto r = read_decimal<std::uint64_t, kU64Max>(s);
    EXPECT_EQ(r.digits, 0U) << s;
    EXPECT_EQ(r.value, 0U) << s;
    EXPECT_FALSE(r.over) << s;
    EXPECT_EQ((parse_decimal<std::uint64_t, kU64Max>(s)), std::nullopt) << s;
  }
}

TEST(Decimal, ReadsAtMostMaxDigits) {
  const auto two = read_decimal<unsigned, 99, 2>("20261129");
  EXPECT_EQ(two.value, 20U);
  EXPECT_EQ(two.digits, 2U);
  const auto four = read_decimal<unsigned, 9999, 4>("20261129");
  EXPECT_EQ(four.value, 2026U);
  EXPECT_EQ(four.digits, 4U);
  const auto short_run = read_decimal<unsigned, 99, 2>("7:");
  EXPECT_EQ(short_run.value, 7U);
  EXPECT_EQ(short_run.digits, 1U);
  EXPECT_EQ((read_decimal<unsigned, 999, 0>("123").digits), 0U);
  // A limit the digits can exceed still saturates.
  const auto capped = read_decimal<unsigned, 50, 2>("99");
  EXPECT_EQ(capped.value, 50U);
  EXPECT_TRUE(capped.over);
}

TEST(Decimal, SaturatesAtMaxAndReadsOn) {
  // A saturating caller gets min(number, max) and the whole run.
  const auto r = read_decimal<std::uint64_t, 1000>("99999999999999999999999999999;x");
  EXPECT_EQ(r.value, 1000U);
  EXPECT_TRUE(r.over);
  EXPECT_EQ(r.digits, 29U);

  const auto at = read_decimal<std::uint64_t, 1000>("1000");
  EXPECT_EQ(at.value, 1000U);
  EXPECT_FALSE(at.over);
  const auto above = read_decimal<std::uint64_t, 1000>("1001");
  EXPECT_EQ(above.value, 1000U);
  EXPECT_TRUE(above.over);
  // Leading zeros never count towards overflow.
  const auto padded = read_decimal<std::uint64_t, 1000>("000000000000000000000000000001000");
  EXPECT_EQ(padded.value, 1000U);
  EXPECT_FALSE(padded.over);
}

TEST(Decimal, TheTypesEdgesAreExact) {
  const auto top = read_decimal<std::uint64_t, kU64Max>("18446744073709551615");
  EXPECT_EQ(top.value, kU64Max);
  EXPECT_FALSE(top.over);
  const auto past = read_decimal<std::uint64_t, kU64Max>("18446744073709551616");
  EXPECT_EQ(past.value, kU64Max);
  EXPECT_TRUE(past.over);
  const auto far = read_decimal<std::uint64_t, kU64Max>("184467440737095516150");
  EXPECT_TRUE(far.over);
  EXPECT_EQ(far.digits, 21U);

  EXPECT_EQ((parse_decimal<std::int64_t, kI64Max>("9223372036854775807")), kI64Max);
  EXPECT_EQ((parse_decimal<std::int64_t, kI64Max>("9223372036854775808")), std::nullopt);
  EXPECT_EQ((parse_decimal<std::uint8_t, 255>("255")), 255);
  EXPECT_EQ((parse_decimal<std::uint8_t, 255>("256")), std::nullopt);
  EXPECT_EQ((parse_decimal<unsigned, 65535>("65535")), 65535U);
  EXPECT_EQ((parse_decimal<unsigned, 65535>("65536")), std::nullopt);
}

TEST(Decimal, MaxZeroSaysWhetherAnyDigitIsNonZero) {
  EXPECT_FALSE((read_decimal<unsigned, 0>("0000").over));
  const auto r = read_decimal<unsigned, 0>("00010");
  EXPECT_TRUE(r.over);
  EXPECT_EQ(r.value, 0U);
  EXPECT_EQ(r.digits, 5U);
}

TEST(Decimal, ParseTakesOnlyAWholeNumber) {
  EXPECT_EQ((parse_decimal<std::uint64_t, kU64Max>("42")), 42U);
  EXPECT_EQ((parse_decimal<std::uint64_t, kU64Max>("042")), 42U);
  EXPECT_EQ((parse_decimal<std::uint64_t, kU64Max>("0")), 0U);
  for (const std::string_view s : {"42 "sv, " 42"sv, "4 2"sv, "42x"sv, "4.2"sv, "1e3"sv, "0x10"sv}) {
    EXPECT_EQ((parse_decimal<std::uint64_t, kU64Max>(s)), std::nullopt) << s;
  }
}

TEST(Decimal, BytesAboveAsciiAreNotDigits) {
  // Only 0x30-0x39 are digits, whatever a signed char makes of the others.
  const char text[] = {'1', static_cast<char>(0xB0), '2'};
  const auto r = read_decimal<unsigned, 999>(std::string_view(text, 3));
  EXPECT_EQ(r.digits, 1U);
  EXPECT_EQ(r.value, 1U);
}

TEST(Decimal, LimitsAtRunTimeGiveTheSameAnswers) {
  for (const std::string_view s : {"0"sv, "1000"sv, "1001"sv, "99999999999999999999999"sv, "12x"sv, ""sv}) {
    const auto fixed = read_decimal<std::uint64_t, 1000, 3>(s);
    const auto runtime = read_decimal<std::uint64_t>(s, 1000, 3);
    EXPECT_EQ(fixed.value, runtime.value) << s;
    EXPECT_EQ(fixed.digits, runtime.digits) << s;
    EXPECT_EQ(fixed.over, runtime.over) << s;
  }
  const auto any = read_decimal<std::uint64_t>("18446744073709551616", kU64Max, kAnyDigits);
  EXPECT_TRUE(any.over);
  EXPECT_EQ(any.digits, 20U);
}

TEST(Decimal, WorksAtCompileTime) {
  static_assert(read_decimal<int, 1000>("12ab").value == 12);
  static_assert(read_decimal<int, 1000>("12ab").digits == 2);
  static_assert(!parse_decimal<int, 1000>("").has_value());
  static_assert(read_decimal<std::uint64_t>("5", kU64Max).value == 5);
}

}  // namespace
