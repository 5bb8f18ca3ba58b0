#include "abide/headers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "field_kind.h"

namespace abide {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Iequals, IgnoresAsciiCaseOnly) {
  EXPECT_TRUE(iequals("Retry-After", "retry-after"));
  EXPECT_TRUE(iequals("X-RATELIMIT-RESET", "x-ratelimit-reset"));
  EXPECT_FALSE(iequals("retry-after", "retry-afte"));
  EXPECT_FALSE(iequals("a", "b"));
  EXPECT_TRUE(iequals("", ""));
  EXPECT_FALSE(iequals("\xC3\x80", "\xC3\xA0"));  // no Unicode folding
}

TEST(HeaderList, LookupIsCaseInsensitiveAndKeepsLines) {
  HeaderList h;
  h.add("Retry-After", "  120 \t");
  h.add("RateLimit", "\"a\";r=1");
  h.add("ratelimit", "\"b\";r=2");
  h.add("Retry-After", "Fri, 31 Dec 1999 23:59:59 GMT");
  EXPECT_EQ(h.first("retry-after"), "120");
  EXPECT_EQ(h.count("RETRY-AFTER"), 2u);
  EXPECT_THAT(h.all("retry-after"), ElementsAre("120", "Fri, 31 Dec 1999 23:59:59 GMT"));
  EXPECT_EQ(h.combined("RateLimit"), "\"a\";r=1, \"b\";r=2");
  EXPECT_FALSE(h.first("date").has_value());
  EXPECT_FALSE(h.combined("date").has_value());
  EXPECT_EQ(h.count("date"), 0u);
  EXPECT_EQ(h.size(), 4u);
}

TEST(HeaderList, ControlCharactersInValuesBecomeSpaces) {
  HeaderList h;
  h.add("X", std::string("a\rb\nc\0d", 7));
  EXPECT_EQ(h.first("x"), "a b c d");
}

TEST(ClassifyField, RateLimitPartitionHasItsOwnKind) {
  EXPECT_EQ(classify_field("RateLimit-Partition"), FieldKind::kRateLimitPartition);
  EXPECT_EQ(classify_field("ratelimit-partition"), FieldKind::kRateLimitPartition);
  // Not a vendor header, and the other draft fields keep their kinds.
  EXPECT_EQ(classify_field("RateLimit-Remaining"), FieldKind::kRateLimitRemaining);
  EXPECT_EQ(classify_field("x-ratelimit-partition"), FieldKind::kVendorQuota);
  EXPECT_EQ(classify_field("ratelimit-partitions"), FieldKind::kVendorQuota);
  const HeaderList h{{"RateLimit-Partition", "\"p\";user"}};
  EXPECT_TRUE(detail::HeaderKinds::has(h, FieldKind::kRateLimitPartition));
  EXPECT_FALSE(detail::HeaderKinds::has(h, FieldKind::kVendorQuota));
}

TEST(ParseResponseHead, ReadsStatusReasonAndFieldsCrlf) {
  auto head = parse_response_head(
      "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 30\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\nbody");
  ASSERT_TRUE(head) << head.error().message;
  EXPECT_EQ(head->status, 429);
  EXPECT_EQ(head->reason, "Too Many Requests");
  EXPECT_EQ(head->headers.size(), 2u);
  EXPECT_EQ(head->headers.first("retry-after"), "30");
  EXPECT_TRUE(head->warnings.empty());
}

TEST(ParseResponseHead, ReadsLfOnlyAndHttp2WithoutReason) {
  auto head = parse_response_head("HTTP/2 200 \nx-ratelimit-remaining:   4999  \n");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->reason, "");
  EXPECT_EQ(head->headers.first("X-RateLimit-Remaining"), "4999");
  auto bare = parse_response_head("HTTP/2 204");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->status, 204);
  EXPECT_TRUE(bare->headers.empty());
}

TEST(ParseResponseHead, UpperCaseReasonAsDiscordSendsIt) {
  auto head = parse_response_head("HTTP/1.1 429 TOO MANY REQUESTS\r\n\r\n");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->reason, "TOO MANY REQUESTS");
}

TEST(ParseResponseHead, MissingOrMalformedStatusLineIsAnError) {
  for (const char* text : {"", "\r\n\r\n", "Retry-After: 5\r\n", "HTTP/1.1 42 Nope\r\n", "HTTP/1.1 4290\r\n",
                           "HTTP/ 200 OK\r\n", "HTTP/1.1 099 x\r\n", "HTTP/1.1200 OK\r\n"}) {
    auto head = parse_response_head(text);
    EXPECT_FALSE(head) << text;
  }
  auto head = parse_response_head("\r\nRetry-After: 5\r\n");
  ASSERT_FALSE(head);
  EXPECT_EQ(head.error().line, 2u);
  EXPECT_THAT(head.error().message, HasSubstr("status line"));
}

TEST(ParseResponseHead, ToleratesLeadingEmptyLines) {
  auto head = parse_response_head("\r\n\r\nHTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\n\r\n");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 503);
}

TEST(ParseResponseHead, SkipsMalformedLinesWithWarningsAndReadsTheRest) {
  auto head = parse_response_head("HTTP/1.1 429 Too Many Requests\r\n"
                                  "this line has no colon\r\n"
                                  "Bad Name: x\r\n"
                                  ": empty name\r\n"
                                  "Retry-After: 7\r\n\r\n");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->headers.size(), 1u);
  EXPECT_EQ(head->headers.first("retry-after"), "7");
  ASSERT_EQ(head->warnings.size(), 3u);
  EXPECT_THAT(head->warnings[0], HasSubstr("line 2"));
  EXPECT_THAT(head->warnings[0], HasSubstr("colon"));
  EXPECT_THAT(head->warnings[1], HasSubstr("field name"));
}

TEST(ParseResponseHead, ObsoleteLineFoldingBecomesASpace) {
  auto head = parse_response_head("HTTP/1.1 200 OK\r\nRateLimit-Policy: \"a\";q=10,\r\n \t\"b\";q=20\r\n\r\n");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->headers.first("ratelimit-policy"), "\"a\";q=10, \"b\";q=20");
  ASSERT_EQ(head->warnings.size(), 1u);
  EXPECT_THAT(head->warnings[0], HasSubstr("folding"));
}

TEST(ParseResponseHead, LastOfSeveralHeadsWins) {
  auto head = parse_response_head("HTTP/1.1 100 Continue\r\n\r\n"
                                  "HTTP/1.1 301 Moved Permanently\r\nLocation: /x\r\nRetry-After: 1\r\n\r\n"
                                  "HTTP/2 429 \r\nretry-after: 60\r\n\r\n");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 429);
  EXPECT_EQ(head->headers.size(), 1u);
  EXPECT_EQ(head->headers.first("retry-after"), "60");
}

TEST(ParseResponseHead, BodyAfterTheHeadIsNotRead) {
  auto head = parse_response_head("HTTP/1.1 200 OK\r\nA: 1\r\n\r\nRetry-After: 99\r\nB: 2\r\n");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->headers.size(), 1u);
  EXPECT_FALSE(head->headers.first("retry-after"));
}

TEST(ParseResponseHead, HostileHeadIsBoundedByLineLimit) {
  std::string text = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 10'050; ++i) text += "X-Junk-" + std::to_string(i) + ": v\r\n";
  auto head = parse_response_head(text);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->headers.size(), 10'000u);
  ASSERT_FALSE(head->warnings.empty());
  EXPECT_THAT(head->warnings.back(), HasSubstr("50 header lines beyond the limit of 10000"));
}

TEST(ParseResponseHead, HostileHeadIsBoundedByByteLimit) {
  std::string text = "HTTP/1.1 200 OK\r\nRetry-After: 5\r\nX-Big: ";
  text.append(2u << 20, 'a');
  text += "\r\n";
  auto head = parse_response_head(text);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->headers.first("retry-after"), "5");
  EXPECT_FALSE(head->headers.first("x-big"));  // cut by the byte limit, then longer than a value may be
  bool truncated = false;
  for (const auto& w : head->warnings)
    truncated = truncated || w.find("longer than 1048576 bytes") != std::string::npos;
  EXPECT_TRUE(truncated);
}

TEST(ParseResponseHead, LongValueIsSkippedWithAWarning) {
  HeadLimits limits;
  limits.max_value_bytes = 16;
  auto head = parse_response_head("HTTP/1.1 200 OK\r\nA: 0123456789abcdefXYZ\r\nB: short\r\n\r\n", limits);
  ASSERT_TRUE(head);
  EXPECT_FALSE(head->headers.first("a"));
  EXPECT_EQ(head->headers.first("b"), "short");
  ASSERT_EQ(head->warnings.size(), 1u);
  EXPECT_THAT(head->warnings[0], HasSubstr("longer than 16 bytes"));
}

TEST(ParseResponseHead, PerLineWarningsAreCapped) {
  std::string text = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 1000; ++i) text += "garbage line\r\n";
  auto head = parse_response_head(text);
  ASSERT_TRUE(head);
  ASSERT_EQ(head->warnings.size(), 33u);
  EXPECT_THAT(head->warnings.back(), HasSubstr("968 more"));
}

TEST(ParseResponseHead, NulInValueBecomesSpace) {
  const std::string text("HTTP/1.1 200 OK\r\nX-A: a\0b\r\n\r\n", 29);
  auto head = parse_response_head(text);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->headers.first("x-a"), "a b");
}

TEST(Printable, EscapesEveryByteATerminalWouldActOn) {
  // ESC [ 2 J clears a screen; BEL rings; a title escape ends in ST.
  EXPECT_EQ(printable("\x1b[2Jok\x07"), "\\x1b[2Jok\\x07");
  EXPECT_EQ(printable("a\\b"), "a\\\\b");  // a backslash cannot fake an escape
  EXPECT_EQ(printable(std::string_view("\0\x7f\xc2\x9b", 4)), "\\x00\\x7f\\xc2\\x9b");
  EXPECT_EQ(printable("plain text, 1;w=2 \"q\""), "plain text, 1;w=2 \"q\"");
}

TEST(Printable, BoundsWhatItShows) {
  const std::string big(10'000, 'x');
  EXPECT_EQ(printable(big, 8), "xxxxxxxx...");
  EXPECT_EQ(printable("12345678", 8), "12345678");
  EXPECT_EQ(printable(big).size(), 64u + 3u);
}

// ---- the installed headers (issue 14: a small public surface, a one-way model) ----

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> abide_includes(const std::string& text) {
  std::vector<std::string> out;
  const std::string key = "#include \"abide/";
  for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
    const std::size_t end = text.find('"', at + key.size());
    out.push_back(text.substr(at + key.size(), end - at - key.size()));
  }
  return out;
}

TEST(InstalledHeaders, CarryNoImplementationHelpers) {
  const std::filesystem::path dir = std::filesystem::path(ABIDE_SOURCE_DIR) / "include" / "abide";
  std::size_t seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string text = read_text(entry.path());
    ++seen;
    for (const char* helper :
         {"FieldKind", "classify_field", "ABIDE_ALWAYS_INLINE", "parse_go_duration", "parse_decimal_duration",
          "parse_time_value", "parse_count", "parse_used_limit", "find_member", "struct TimeValue", "struct UsedLimit",
          "quota_basis", "format_seconds", "line_index.h", "#include \"ascii.h\""}) {
      EXPECT_EQ(text.find(helper), std::string::npos) << entry.path().filename() << " has " << helper;
    }
  }
  EXPECT_GT(seen, 10u);
}

TEST(InstalledHeaders, TheQuotaModelAndServerClockIncludeNothingAboveThem) {
  const std::filesystem::path dir = std::filesystem::path(ABIDE_SOURCE_DIR) / "include" / "abide";
  EXPECT_THAT(abide_includes(read_text(dir / "quota.h")), ElementsAre("clock.h"));
  EXPECT_THAT(abide_includes(read_text(dir / "server_clock.h")), ElementsAre("clock.h"));
  // The readers that fill the model include it, not signals.h (which is above them).
  for (const char* reader : {"ratelimit.h", "profiles.h"}) {
    const auto inc = abide_includes(read_text(dir / reader));
    EXPECT_THAT(inc, ::testing::Contains("quota.h")) << reader;
    EXPECT_THAT(inc, ::testing::Not(::testing::Contains("signals.h"))) << reader;
  }
  EXPECT_THAT(abide_includes(read_text(dir / "signals.h")), ::testing::IsSupersetOf({"quota.h", "server_clock.h"}));
}

TEST(HeaderKinds, EachLineIsTaggedOnceAsItIsAdded) {
  HeaderList h;
  h.add("Date", "Thu, 01 Jan 2026 00:00:00 GMT");
  h.add("X-RateLimit-Remaining", "0");
  h.add("Content-Type", "text/plain");
  EXPECT_EQ(detail::HeaderKinds::at(h, 0), FieldKind::kDate);
  EXPECT_EQ(detail::HeaderKinds::at(h, 1), FieldKind::kVendorQuota);
  EXPECT_EQ(detail::HeaderKinds::at(h, 2), FieldKind::kOther);
  EXPECT_TRUE(detail::HeaderKinds::has(h, FieldKind::kDate));
  EXPECT_FALSE(detail::HeaderKinds::has(h, FieldKind::kRetryAfter));
  const HeaderList copy({{"retry-after", "5"}});  // the vector constructor tags too
  EXPECT_TRUE(detail::HeaderKinds::has(copy, FieldKind::kRetryAfter));
}

}  // namespace
}  // namespace abide
