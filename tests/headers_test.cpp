#include "abide/headers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "field_index.h"

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
  const detail::FieldIndex index(h);
  EXPECT_TRUE(index.has(FieldKind::kRateLimitPartition));
  EXPECT_FALSE(index.has(FieldKind::kVendorQuota));
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
          "quota_basis", "format_seconds", "field_index.h", "FieldIndex", "HeaderKinds", "VendorReading",
          "read_vendor", "read_heuristic", "looks_like_vendor_quota_header", "#include \"ascii.h\""}) {
      EXPECT_EQ(text.find(helper), std::string::npos) << entry.path().filename() << " has " << helper;
    }
  }
  EXPECT_GT(seen, 10u);
}

TEST(InstalledHeaders, TheQuotaModelAndServerClockIncludeNothingAboveThem) {
  const std::filesystem::path dir = std::filesystem::path(ABIDE_SOURCE_DIR) / "include" / "abide";
  EXPECT_THAT(abide_includes(read_text(dir / "quota.h")), ElementsAre("clock.h"));
  EXPECT_THAT(abide_includes(read_text(dir / "server_clock.h")), ElementsAre("clock.h"));
  // The reader that fills the model includes it, not signals.h (which is above it);
  // the profiles, data about vendors' fields, include neither.
  EXPECT_THAT(abide_includes(read_text(dir / "ratelimit.h")), ::testing::Contains("quota.h"));
  for (const char* reader : {"ratelimit.h", "profiles.h"}) {
    EXPECT_THAT(abide_includes(read_text(dir / reader)), ::testing::Not(::testing::Contains("signals.h"))) << reader;
  }
  EXPECT_THAT(abide_includes(read_text(dir / "signals.h")), ::testing::IsSupersetOf({"quota.h", "server_clock.h"}));
}

// Every `#include "..."` of a file (the quoted name).
std::vector<std::string> quoted_includes(const std::string& text) {
  std::vector<std::string> out;
  const std::string key = "#include \"";
  for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
    const std::size_t end = text.find('"', at + key.size());
    out.push_back(text.substr(at + key.size(), end - at - key.size()));
  }
  return out;
}

TEST(InstalledHeaders, FieldLinesArePlainHttpAndKnowNothingOfTheReaders) {
  // HeaderList is the model's generic container: the kinds of the fields abide
  // reads belong to the readers' one index (src/field_index.h), built per response.
  const std::filesystem::path root(ABIDE_SOURCE_DIR);
  const std::string header = read_text(root / "include" / "abide" / "headers.h");
  EXPECT_THAT(quoted_includes(header), ElementsAre("abide/result.h"));
  for (const char* word : {"detail", "friend", "kind", "Kind"}) {
    EXPECT_EQ(header.find(word), std::string::npos) << "headers.h has " << word;
  }
  const std::string source = read_text(root / "src" / "headers.cpp");
  ASSERT_FALSE(source.empty());
  for (const auto& inc : quoted_includes(source)) {
    EXPECT_THAT(inc, ::testing::AnyOf("abide/headers.h", "abide/result.h", "ascii.h", "decimal.h"))
        << "src/headers.cpp includes " << inc << ", above the field lines' layer";
  }
  for (const char* word : {"classify_field", "FieldKind", "ratelimit", "retry-after"}) {
    EXPECT_EQ(source.find(word), std::string::npos) << "src/headers.cpp has " << word;
  }
}

TEST(FieldIndex, EachLineIsClassifiedOnceWhenTheIndexIsBuilt) {
  HeaderList h;
  h.add("Date", "Thu, 01 Jan 2026 00:00:00 GMT");
  h.add("X-RateLimit-Remaining", "0");
  h.add("Content-Type", "text/plain");
  h.add("ratelimit-POLICY", "\"p\";q=10");
  const detail::FieldIndex index(h);
  EXPECT_EQ(&index.headers(), &h);
  EXPECT_EQ(index.kind(0), FieldKind::kDate);
  EXPECT_EQ(index.kind(1), FieldKind::kVendorQuota);
  EXPECT_EQ(index.kind(2), FieldKind::kOther);
  EXPECT_EQ(index.kind(3), FieldKind::kRateLimitPolicy);
  EXPECT_TRUE(index.has(FieldKind::kDate));
  EXPECT_TRUE(index.has(FieldKind::kOther));
  EXPECT_FALSE(index.has(FieldKind::kRetryAfter));
  EXPECT_FALSE(index.has(FieldKind::kRateLimit));
  EXPECT_EQ(index.first(FieldKind::kVendorQuota), &h.lines()[1]);
  EXPECT_EQ(index.first(FieldKind::kRetryAfter), nullptr);
  const HeaderList copy({{"retry-after", "5"}});  // the vector constructor's lines too
  EXPECT_TRUE(detail::FieldIndex(copy).has(FieldKind::kRetryAfter));
  EXPECT_FALSE(detail::FieldIndex(HeaderList{}).has(FieldKind::kOther));
}

TEST(FieldIndex, FindsLinesByNameInAnyCaseAndInOrder) {
  const HeaderList h{{"X-A", "1"}, {"x-b", "2"}, {"x-a", "3"}, {"X-AB", "4"}, {"x-A", "5"}};
  const detail::FieldIndex index(h);
  std::vector<std::size_t> seen;
  index.for_each("X-a", [&](std::size_t i, const Header& line) {
    EXPECT_EQ(&line, &h.lines()[i]);
    seen.push_back(i);
    return true;
  });
  EXPECT_THAT(seen, ElementsAre(0u, 2u, 4u));
  seen.clear();
  index.for_each("x-a", [&](std::size_t i, const Header&) {
    seen.push_back(i);
    return false;  // stops at the first
  });
  EXPECT_THAT(seen, ElementsAre(0u));
  ASSERT_NE(index.first("X-B"), nullptr);
  EXPECT_EQ(index.first("X-B")->value, "2");
  EXPECT_EQ(index.first("x-c"), nullptr);
  EXPECT_EQ(index.first(""), nullptr);
}

TEST(FieldIndex, LinesBeyondTheBucketsAreFoundAndClassifiedToo) {
  // Past kIndexed lines the lookup scans, and the kinds are kept aside:
  // every line is still found and has its kind.
  HeaderList h;
  constexpr std::size_t kFiller = detail::FieldIndex::kIndexed + 40;
  for (std::size_t i = 0; i < kFiller; ++i) h.add("x-filler-" + std::to_string(i % 7), std::to_string(i));
  h.add("RETRY-AFTER", "7");
  h.add("Some-Name-Longer-Than-Sixty-Three-Bytes-Which-Shares-The-Last-Bucket", "a");
  h.add("x-filler-3", "last");
  const detail::FieldIndex index(h);
  EXPECT_EQ(index.kind(kFiller), FieldKind::kRetryAfter);
  EXPECT_EQ(index.kind(kFiller + 1), FieldKind::kOther);
  EXPECT_TRUE(index.has(FieldKind::kRetryAfter));
  ASSERT_NE(index.first("retry-after"), nullptr);
  EXPECT_EQ(index.first("retry-after")->value, "7");
  EXPECT_EQ(index.first(FieldKind::kRetryAfter), &h.lines()[kFiller]);
  ASSERT_NE(index.first("some-name-longer-than-sixty-three-bytes-which-shares-the-last-bucket"), nullptr);
  std::size_t n = 0;
  std::size_t last = 0;
  index.for_each("X-FILLER-3", [&](std::size_t i, const Header&) {
    EXPECT_TRUE(n == 0 || i > last);  // in order, across the indexed lines and the rest
    last = i;
    ++n;
    return true;
  });
  EXPECT_EQ(n, h.count("x-filler-3"));
  EXPECT_EQ(last, kFiller + 2);
}

}  // namespace
}  // namespace abide
