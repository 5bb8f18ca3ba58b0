// observe(): docs/RULES.md rules 1 (Retry-After authoritative), 2 (malformed is
// not zero), 3 (dates and skew) and 8 (order of trust).
#include "abide/signals.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <type_traits>
#include <vector>

#include "abide/clock.h"
#include "abide/headers.h"
#include "abide/http_date.h"
#include "abide/pacer.h"
#include "abide/planner.h"
#include "abide/quota.h"
#include "abide/server_clock.h"
#include "abide/testing/manual_clock.h"

namespace abide {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

class ObserveTest : public ::testing::Test {
 protected:
  ManualClock clock;  // 2026-01-01T00:00:00Z

  Signals see(int status, std::initializer_list<Header> h, ObserveOptions o = {}) {
    return observe(status, HeaderList(h), clock.wall_now(), clock.mono_now(), o);
  }
  static bool warned(const Signals& s, std::string_view text) {
    for (const auto& w : s.warnings) {
      if (w.find(text) != std::string::npos) return true;
    }
    return false;
  }
};

TEST_F(ObserveTest, KeepsStatusAndReceiveTimes) {
  clock.advance(5s);
  const auto s = see(200, {});
  EXPECT_EQ(s.status, 200);
  EXPECT_EQ(s.received_wall, clock.wall_now());
  EXPECT_EQ(s.received_mono, clock.mono_now());
  EXPECT_FALSE(s.retry_after);
  EXPECT_FALSE(s.retry_after_rejected);
  EXPECT_TRUE(s.quota.empty());
  EXPECT_FALSE(s.server_date);
  EXPECT_FALSE(s.clock_skew);
  EXPECT_FALSE(s.limited);
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_FALSE(permitted_wait(s).quota);
  EXPECT_EQ(s.most_restrictive(), nullptr);
}

TEST_F(ObserveTest, ADateAtTheEndOfTheCalendarGivesASaturatedSkew) {
  // Valid syntax; the skew against 2026 does not fit a nanosecond count.
  const auto s = see(200, {{"date", "Mon, 01 Jan 0001 00:00:00 GMT"}});
  if (s.server_date) {
    ASSERT_TRUE(s.clock_skew);
    EXPECT_LT(*s.clock_skew, Duration::zero());
  }
}

TEST_F(ObserveTest, AMalformedPartitionAloneIsWarnedAbout) {
  // RateLimit-Partition is a draft field: read (and warned about) even when it is the only one.
  const auto s = see(200, {{"ratelimit-partition", "\"a\";;"}});
  EXPECT_TRUE(s.uninterpreted.empty());
  EXPECT_TRUE(warned(s, "ratelimit-partition ignored")) << (s.warnings.empty() ? "" : s.warnings.front());
}

TEST_F(ObserveTest, RetryAfterDelay) {
  const auto s = see(429, {{"retry-after", "120"}});
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->kind, RetryHint::Kind::kDelay);
  EXPECT_EQ(s.retry_after->wait, 120s);
  EXPECT_EQ(s.retry_after->source, "retry-after");
  EXPECT_FALSE(s.retry_after->date);
  EXPECT_TRUE(s.limited);
}

TEST_F(ObserveTest, RetryAfterOnAnyStatus) {
  for (int status : {503, 301, 413, 200}) {
    const auto s = see(status, {{"Retry-After", "7"}});
    ASSERT_TRUE(s.retry_after) << status;
    EXPECT_EQ(s.retry_after->wait, 7s);
    EXPECT_FALSE(s.limited) << status;  // without a profile only 429 means "limited"
  }
}

TEST_F(ObserveTest, RetryAfterDateCountsFromReceipt) {
  const auto s = see(503, {{"Retry-After", "Thu, 01 Jan 2026 00:02:00 GMT"}});
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->kind, RetryHint::Kind::kDate);
  EXPECT_EQ(s.retry_after->wait, 120s);
  EXPECT_EQ(s.retry_after->date, clock.wall_now() + 120s);
}

TEST_F(ObserveTest, RetryAfterDateInThePastIsZero) {
  const auto s = see(503, {{"Retry-After", "Fri, 31 Dec 1999 23:59:59 GMT"}});
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, 0s);
}

TEST_F(ObserveTest, DateGivesSkewAndSkewCannotMakeARetryEarly) {
  // The server's clock is 30 s behind ours: its "2 minutes from now" is 150 s away for us.
  const auto s = see(503,
                     {{"Date", "Wed, 31 Dec 2025 23:59:30 GMT"}, {"Retry-After", "Thu, 01 Jan 2026 00:02:00 GMT"}});
  ASSERT_TRUE(s.server_date);
  ASSERT_TRUE(s.clock_skew);
  EXPECT_EQ(*s.clock_skew, -30s);
  EXPECT_EQ(s.retry_after->wait, 150s);
  // Server clock ahead by 30 s: the local reading (120 s) is the larger one.
  const auto ahead = see(503,
                         {{"Date", "Thu, 01 Jan 2026 00:00:30 GMT"}, {"Retry-After", "Thu, 01 Jan 2026 00:02:00 GMT"}});
  EXPECT_EQ(*ahead.clock_skew, 30s);
  EXPECT_EQ(ahead.retry_after->wait, 120s);
  // A delay ignores Date.
  const auto delay = see(503, {{"Date", "Wed, 31 Dec 2025 23:59:30 GMT"}, {"Retry-After", "10"}});
  EXPECT_EQ(delay.retry_after->wait, 10s);
}

TEST_F(ObserveTest, MalformedDateIsIgnoredWithAWarning) {
  const auto s = see(200, {{"Date", "yesterday"}});
  EXPECT_FALSE(s.server_date);
  EXPECT_FALSE(s.clock_skew);
  EXPECT_TRUE(warned(s, "Date \"yesterday\" ignored"));
}

TEST_F(ObserveTest, MalformedRetryAfterIsRejectedNeverRetryNow) {
  for (const char* bad : {"soon", "-43", "", "12s", "30, 60", "0x1A"}) {
    const auto s = see(429, {{"Retry-After", bad}});
    EXPECT_FALSE(s.retry_after) << bad;
    EXPECT_TRUE(s.retry_after_rejected) << bad;
    EXPECT_TRUE(warned(s, "rejected")) << bad;
    EXPECT_TRUE(s.limited);
  }
}

TEST_F(ObserveTest, RobustModeRoundsAFractionUpStrictRejectsIt) {
  const auto robust = see(429, {{"Retry-After", "2.542"}});
  ASSERT_TRUE(robust.retry_after);
  EXPECT_EQ(robust.retry_after->wait, 3s);
  EXPECT_TRUE(warned(robust, "rounded up"));
  ObserveOptions strict;
  strict.robust = false;
  const auto s = see(429, {{"Retry-After", "2.542"}}, strict);
  EXPECT_FALSE(s.retry_after);
  EXPECT_TRUE(s.retry_after_rejected);
}

TEST_F(ObserveTest, RobustDateDeviationIsReported) {
  const auto s = see(503, {{"Retry-After", "Thu, 01 Jan 2026 00:01:00 UTC"}});
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, 60s);
  EXPECT_TRUE(warned(s, "deviations"));
}

TEST_F(ObserveTest, SeveralRetryAfterLinesTheLongestWins) {
  const auto s = see(503,
                     {{"Retry-After", "30"}, {"Retry-After", "Thu, 01 Jan 2026 00:02:00 GMT"}, {"Retry-After", "5"}});
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, 120s);
  EXPECT_FALSE(s.warnings.empty());
  std::initializer_list<Header> many = {{"Retry-After", "1"}, {"Retry-After", "2"}, {"Retry-After", "3"},
                                        {"Retry-After", "4"}, {"Retry-After", "5"}, {"Retry-After", "6"},
                                        {"Retry-After", "7"}, {"Retry-After", "8"}, {"Retry-After", "90"},
                                        {"Retry-After", "10"}};
  const auto m = see(503, many);
  EXPECT_EQ(m.retry_after->wait, 90s);
}

TEST_F(ObserveTest, HugeRetryAfterSaturatesAndSaysSo) {
  const auto s = see(503, {{"Retry-After", "99999999999999999999999"}});
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, kMaxDuration);
  EXPECT_TRUE(warned(s, "too large"));
}

TEST_F(ObserveTest, QuotaWithRoomNeverOverridesRetryAfter) {
  const auto s = see(429, {{"Retry-After", "30"},
                           {"RateLimit-Policy", "\"default\";q=100;w=60"},
                           {"RateLimit", "\"default\";r=50;t=5"}});
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, 30s);
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].remaining, 50);
  EXPECT_FALSE(permitted_wait(s).quota);
}

TEST_F(ObserveTest, MalformedRateLimitDoesNotStopTheRest) {
  const auto s = see(429, {{"Retry-After", "30"},
                           {"Date", "Thu, 01 Jan 2026 00:00:00 GMT"},
                           {"RateLimit", "\"default\";r=50;t=1.5"},
                           {"RateLimit-Policy", "\"default\";q=100;w=60"}});
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, 30s);
  EXPECT_EQ(s.clock_skew, 0s);
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].limit, 100);
  EXPECT_TRUE(warned(s, "RateLimit ignored"));
}

TEST_F(ObserveTest, QuotaWaitIsTheLongestExhaustedReset) {
  const auto s = see(429, {{"RateLimit-Policy", "\"a\";q=10;w=1, \"b\";q=100;w=60, \"c\";q=5;w=10"},
                           {"RateLimit", "\"a\";r=0;t=1, \"b\";r=0;t=45, \"c\";r=2;t=9"}});
  ASSERT_EQ(s.quota.size(), 3u);
  EXPECT_EQ(permitted_wait(s).quota, 45s);
  ASSERT_NE(s.most_restrictive(), nullptr);
  EXPECT_EQ(s.most_restrictive()->policy, "b");
}

TEST_F(ObserveTest, IetfFieldsComeBeforeVendorFieldsInTrustOrder) {
  ObserveOptions o;
  o.host = "api.github.com";
  const auto s = see(
      200, {{"x-ratelimit-remaining", "10"}, {"x-ratelimit-resource", "core"}, {"RateLimit", "\"default\";r=50;t=30"}},
      o);
  ASSERT_EQ(s.quota.size(), 2u);
  EXPECT_EQ(s.quota[0].source, QuotaSource::kDraft08);
  EXPECT_EQ(s.quota[1].source, QuotaSource::kVendor);
  EXPECT_EQ(s.quota[1].profile, "github");
  EXPECT_EQ(s.profile, "github");
}

TEST_F(ObserveTest, VendorRetryDelayStandsInForARejectedRetryAfter) {
  ObserveOptions o;
  o.host = "api.openai.com";
  const auto s = see(429, {{"retry-after", "later"}, {"retry-after-ms", "2500"}}, o);
  EXPECT_TRUE(s.retry_after_rejected);
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, 2500ms);
  EXPECT_EQ(s.retry_after->source, "retry-after-ms");
  EXPECT_TRUE(warned(s, "since Retry-After was rejected"));
}

TEST_F(ObserveTest, MalformedVendorRetryDelayIsIgnored) {
  ObserveOptions o;
  o.host = "api.openai.com";
  const auto s = see(429, {{"retry-after-ms", "-5"}}, o);
  EXPECT_FALSE(s.retry_after);
  EXPECT_TRUE(warned(s, "retry-after-ms \"-5\" ignored"));
}

TEST_F(ObserveTest, VendorDateResetsUseServerDate) {
  ObserveOptions o;
  o.host = "api.github.com";
  // Server 20 s behind: its reset instant is 20 s further away than our clock says.
  const auto s = see(403,
                     {{"Date", "Wed, 31 Dec 2025 23:59:40 GMT"},
                      {"x-ratelimit-remaining", "0"},
                      {"x-ratelimit-reset", "1767225660"}},
                     o);
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].reset, 80s);
  EXPECT_TRUE(s.limited);
}

TEST_F(ObserveTest, HeaderNamesMatchInAnyCase) {
  const auto s = see(429,
                     {{"RETRY-AFTER", "3"}, {"rAtElImIt", "\"x\";r=0;t=3"}, {"DATE", "Thu, 01 Jan 2026 00:00:00 GMT"}});
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.quota.size(), 1u);
  EXPECT_TRUE(s.server_date);
}

// The lines in every arrangement a server might send: as given, reversed, and
// each of those behind or between enough other lines that the fields sit past
// every fast path of the lookups.
std::vector<HeaderList> arrangements(std::vector<Header> lines) {
  std::vector<HeaderList> out;
  for (int reversed = 0; reversed < 2; ++reversed) {
    if (reversed == 1) std::reverse(lines.begin(), lines.end());
    out.emplace_back(lines);
    std::vector<Header> behind;
    for (int i = 0; i < 300; ++i) behind.push_back({"X-Filler-" + std::to_string(i % 5), "f"});
    behind.insert(behind.end(), lines.begin(), lines.end());
    out.emplace_back(std::move(behind));
    std::vector<Header> between;
    for (const auto& h : lines) {
      for (int i = 0; i < 70; ++i) between.push_back({"Content-Type", "text/plain"});
      between.push_back(h);
    }
    out.emplace_back(std::move(between));
  }
  return out;
}

TEST_F(ObserveTest, EveryFieldItReadsIsFoundInAnyCaseAndOrder) {
  const auto at = [&](const HeaderList& h, ObserveOptions o = {}, int status = 429) {
    return observe(status, h, clock.wall_now(), clock.mono_now(), o);
  };
  // Date, Retry-After and the unprefixed IETF fields.
  for (const auto& h : arrangements({{"ratelimit-LIMIT", "100"},
                                     {"RATELIMIT-remaining", "0"},
                                     {"RateLimit-RESET", "30"},
                                     {"rEtRy-AfTeR", "5"},
                                     {"date", "Wed, 31 Dec 2025 23:59:59 GMT"},
                                     {"RATELIMIT-PARTITION", "@"}})) {
    const auto s = at(h);
    ASSERT_TRUE(s.retry_after) << h.size();
    EXPECT_EQ(s.retry_after->wait, 5s);
    EXPECT_EQ(s.clock_skew, -1s);
    ASSERT_EQ(s.quota.size(), 1u) << h.size();
    EXPECT_EQ(s.quota[0].limit, 100);
    EXPECT_EQ(s.quota[0].remaining, 0);
    EXPECT_EQ(s.quota[0].reset, 30s);
    EXPECT_TRUE(warned(s, "RATELIMIT-PARTITION")) << h.size();  // read, and found malformed
    EXPECT_TRUE(s.uninterpreted.empty());
  }
  // RateLimit-Policy and RateLimit, the policy after the field naming it.
  for (const auto& h :
       arrangements({{"RATELIMIT", "\"day\";r=0;t=40"}, {"ratelimit-policy", "\"day\";q=1000;w=86400"}})) {
    const auto s = at(h);
    ASSERT_EQ(s.quota.size(), 1u) << h.size();
    EXPECT_EQ(s.quota[0].policy, "day");
    EXPECT_EQ(s.quota[0].limit, 1000);
    EXPECT_EQ(s.quota[0].reset, 40s);
  }
  // A profile's own headers, found by name.
  ObserveOptions github;
  github.host = "api.github.com";
  for (const auto& h : arrangements({{"X-RATELIMIT-LIMIT", "60"},
                                     {"x-RateLimit-Remaining", "0"},
                                     {"X-Ratelimit-Reset", "1767225630"},
                                     {"x-ratelimit-USED", "60"},
                                     {"X-RateLimit-Resource", "core"}})) {
    const auto s = at(h, github, 403);
    ASSERT_EQ(s.quota.size(), 1u) << h.size();
    EXPECT_EQ(s.quota[0].policy, "core");
    EXPECT_EQ(s.quota[0].remaining, 0);
    EXPECT_EQ(s.quota[0].reset, 30s);
    EXPECT_TRUE(s.limited);
    EXPECT_TRUE(s.uninterpreted.empty()) << h.size();
  }
  // The IETF fields under a profile's prefix (Envoy's "x-").
  ObserveOptions envoy;
  envoy.profile = "envoy";
  for (const auto& h :
       arrangements({{"X-RATELIMIT-LIMIT", "10"}, {"x-ratelimit-REMAINING", "0"}, {"X-RateLimit-Reset", "20"}})) {
    const auto s = at(h, envoy);
    ASSERT_EQ(s.quota.size(), 1u) << h.size();
    EXPECT_EQ(s.quota[0].remaining, 0);
    EXPECT_EQ(s.quota[0].reset, 20s);
    EXPECT_TRUE(s.uninterpreted.empty()) << h.size();
  }
  // The opt-in heuristic, and without it the same lines reported.
  ObserveOptions guess;
  guess.host = "api.unknown.example";
  guess.heuristic = true;
  for (const auto& h :
       arrangements({{"X-RATE-LIMIT-REMAINING", "0"}, {"x-rate-limit-RESET", "12"}, {"RETRY-AFTER-MS", "1500"}})) {
    const auto s = at(h, guess);
    ASSERT_EQ(s.quota.size(), 1u) << h.size();
    EXPECT_EQ(s.quota[0].source, QuotaSource::kHeuristic);
    EXPECT_EQ(s.quota[0].reset, 12s);
    ASSERT_TRUE(s.retry_after) << h.size();
    EXPECT_EQ(s.retry_after->wait, 1500ms);
    EXPECT_TRUE(s.uninterpreted.empty()) << h.size();
    guess.heuristic = false;
    const auto reported = at(h, guess);
    EXPECT_TRUE(reported.quota.empty());
    EXPECT_EQ(reported.uninterpreted.size(), 3u) << h.size();
    guess.heuristic = true;
  }
}

TEST_F(ObserveTest, ParsedHeadEndToEnd) {
  auto head = parse_response_head("HTTP/1.1 429 Too Many Requests\r\n"
                                  "Date: Thu, 01 Jan 2026 00:00:01 GMT\r\n"
                                  "Retry-After: 30\r\n"
                                  "RateLimit-Policy: \"burst\";q=100;w=60,\"daily\";q=1000;w=86400\r\n"
                                  "RateLimit: \"burst\";r=0;t=30\r\n"
                                  "RateLimit: \"daily\";r=900;t=3600\r\n\r\n");
  ASSERT_TRUE(head);
  const auto s = observe(head->status, head->headers, clock.wall_now(), clock.mono_now());
  EXPECT_TRUE(s.limited);
  EXPECT_EQ(s.retry_after->wait, 30s);
  EXPECT_EQ(s.clock_skew, 1s);
  ASSERT_EQ(s.quota.size(), 2u);
  EXPECT_EQ(permitted_wait(s).quota, 30s);
  EXPECT_TRUE(s.warnings.empty());
}

TEST_F(ObserveTest, ALearnedServerClockTightensTheDateWithinItsSecond) {
  // Server 30 s behind; its Date says 23:59:30, but it is really 23:59:30.8.
  ObserveOptions o;
  o.server_time_floor = WallTime{clock.wall_now() - 29200ms};
  const auto s = see(503, {{"Date", "Wed, 31 Dec 2025 23:59:30 GMT"}, {"Retry-After", "Thu, 01 Jan 2026 00:02:00 GMT"}},
                     o);
  EXPECT_EQ(s.retry_after->wait, 149200ms);  // not the 150 s that Date alone allows
  EXPECT_EQ(*s.clock_skew, -30s);            // the reported skew is still the Date's
  // A floor outside the second the Date names is not used: a floor past it
  // contradicts the Date, and one below it says less than the Date.
  o.server_time_floor = WallTime{clock.wall_now() - 28s};
  EXPECT_EQ(see(503, {{"Date", "Wed, 31 Dec 2025 23:59:30 GMT"}, {"Retry-After", "Thu, 01 Jan 2026 00:02:00 GMT"}}, o)
                .retry_after->wait,
            150s);
  o.server_time_floor = WallTime{clock.wall_now() - 31s};
  EXPECT_EQ(see(503, {{"Date", "Wed, 31 Dec 2025 23:59:30 GMT"}, {"Retry-After", "Thu, 01 Jan 2026 00:02:00 GMT"}}, o)
                .retry_after->wait,
            150s);
  // Without a Date, no floor is used.
  o.server_time_floor = WallTime{clock.wall_now() + 10s};
  EXPECT_EQ(see(503, {{"Retry-After", "Thu, 01 Jan 2026 00:02:00 GMT"}}, o).retry_after->wait, 120s);
}

TEST_F(ObserveTest, ALearnedServerClockTightensVendorResets) {
  ObserveOptions o;
  o.host = "api.github.com";
  o.server_time_floor = WallTime{clock.wall_now() - 19500ms};
  const auto s = see(403,
                     {{"Date", "Wed, 31 Dec 2025 23:59:40 GMT"},
                      {"x-ratelimit-remaining", "0"},
                      {"x-ratelimit-reset", "1767225660"}},
                     o);
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].reset, 79500ms);
}

// A Date in WallTime's last second (2262-04-11T23:47:16Z, valid syntax) and a
// floor within it: the second's end saturates instead of overflowing.
TEST_F(ObserveTest, ALearnedFloorInWallTimesLastSecondSaturates) {
  const WallTime last{std::chrono::seconds{Duration::max().count() / 1'000'000'000}};
  ObserveOptions o;
  o.server_time_floor = WallTime{last + 500ms};
  const auto s = see(503, {{"Date", "Fri, 11 Apr 2262 23:47:16 GMT"}, {"Retry-After", "120"}}, o);
  ASSERT_TRUE(s.server_date);
  EXPECT_EQ(*s.server_date, last);
  EXPECT_EQ(s.server_time_floor, o.server_time_floor);
  EXPECT_EQ(s.retry_after->wait, 120s);
}

void expect_near(WallTime a, WallTime b) {
  EXPECT_LE(a - b, 1ms);
  EXPECT_GE(a - b, -1ms);
}

TEST(ServerClock, LearnsTheTightestLowerBoundFromManyDates) {
  ServerClock sc;
  EXPECT_FALSE(sc.floor_at(MonoTime{100s}));
  const auto at = [](std::int64_t unix_s, Duration mono) {
    Signals s;
    s.server_date = WallTime{std::chrono::seconds{unix_s}};
    s.received_mono = MonoTime{mono};
    return s;
  };
  // The server's clock reads 1000.0 at mono 100 s; its Dates are rounded down.
  sc.learn(at(1000, 100300ms));  // true 1000.3: Date 1000
  ASSERT_TRUE(sc.floor_at(MonoTime{100300ms}));
  expect_near(*sc.floor_at(MonoTime{100300ms}), WallTime{1000s});
  sc.learn(at(1000, 100900ms));  // says less than the bound already known
  expect_near(*sc.floor_at(MonoTime{100900ms}), WallTime{1000600ms});
  sc.learn(at(1001, 101050ms));  // true 1001.05: Date 1001 lifts the bound to 0.05 s of the truth
  const WallTime f = *sc.floor_at(MonoTime{102s});
  EXPECT_LE(f, WallTime{1002s});         // never ahead of the server
  EXPECT_GE(f, WallTime{1002s} - 51ms);  // and close to it
  Signals none;
  none.received_mono = MonoTime{103s};
  sc.learn(none);  // no Date: nothing learned
  EXPECT_EQ(*sc.floor_at(MonoTime{102s}), f);
}

TEST(ServerClock, LearnsFromADateAndAReceiveTimeAlone) {
  // The header needs nothing above it: a Date and a receive time are all it reads.
  ServerClock sc;
  sc.learn(std::nullopt, MonoTime{5s});  // no Date: nothing learned
  EXPECT_FALSE(sc.floor_at(MonoTime{5s}));
  sc.learn(WallTime{1000s}, MonoTime{100s}, MonoTime{99s});
  ASSERT_TRUE(sc.floor_at(MonoTime{100s}));
  expect_near(*sc.floor_at(MonoTime{100s}), WallTime{1000s});
  Signals s;  // the Signals form reads the same two members
  s.server_date = WallTime{1001s};
  s.received_mono = MonoTime{100500ms};
  ServerClock other;
  other.learn(s);
  other.learn(WallTime{1000s}, MonoTime{100s});
  sc.learn(s.server_date, s.received_mono);
  EXPECT_EQ(sc.floor_at(MonoTime{101s}), other.floor_at(MonoTime{101s}));
}

TEST(QuotaModel, QuotaObservationIsAnAggregate) {
  static_assert(std::is_aggregate_v<QuotaObservation>);
  static_assert(std::is_aggregate_v<RetryHint>);
  // Designated initialisers name what they set; everything else keeps its
  // default (GCC before 14 warns about the members left out, needlessly).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
  const QuotaObservation q{.policy = "burst", .limit = 10, .remaining = 0, .reset = 5s};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  EXPECT_EQ(q.policy, "burst");
  EXPECT_EQ(q.unit, "requests");
  EXPECT_EQ(q.confidence, Confidence::kHigh);
  EXPECT_FALSE(q.window);
  EXPECT_TRUE(q.exhausted());
}

TEST(QuotaModel, EverySourceKeepsTheLabelItHadAsAString) {
  EXPECT_EQ(to_string(QuotaSource::kDraft03), "draft-03");
  EXPECT_EQ(to_string(QuotaSource::kDraft06), "draft-06");
  EXPECT_EQ(to_string(QuotaSource::kDraft07), "draft-07");
  EXPECT_EQ(to_string(QuotaSource::kDraft08), "draft-08");
  EXPECT_EQ(to_string(QuotaSource::kDraft12Provisional), "draft-12 (provisional)");
  EXPECT_EQ(to_string(QuotaSource::kDraftPolli00), "draft-polli-00");
  EXPECT_EQ(to_string(QuotaSource::kHeuristic), "heuristic");
  EXPECT_EQ(to_string(QuotaSource::kUnknown), "");
  // A vendor quota shows its profile's name, as its source string did.
  QuotaObservation q;
  q.source = QuotaSource::kVendor;
  q.profile = "github";
  EXPECT_EQ(q.source_name(), "github");
  q.source = QuotaSource::kDraft08;
  EXPECT_EQ(q.source_name(), "draft-08");
}

// Dates at the ends of WallTime's range (year 1413 reads as its first
// instant) minus a monotonic instant saturate instead of overflowing.
TEST(ServerClock, DatesAtTheEndsOfTimeSaturate) {
  ServerClock sc;
  sc.learn(WallTime::min(), MonoTime{100s}, MonoTime{99s});
  ASSERT_TRUE(sc.floor_at(MonoTime{200s}));
  EXPECT_LT(*sc.floor_at(MonoTime{200s}), WallTime{});
  sc.learn(WallTime::max(), MonoTime{300s});  // a clock set forward: start afresh
  ASSERT_TRUE(sc.floor_at(MonoTime{400s}));
  EXPECT_EQ(*sc.floor_at(MonoTime{400s}), WallTime::max());
}

TEST(ServerClock, AllowsForDriftAndStartsAfreshWhenTheServerIsSetBack) {
  ServerClock sc;
  Signals s;
  s.server_date = WallTime{1000s};
  s.received_mono = MonoTime{0s};
  sc.learn(s);
  // 10,000 s later the bound is 1 s lower than the plain extrapolation (100 ppm).
  expect_near(*sc.floor_at(MonoTime{10000s}), WallTime{10999s});
  // The server's clock was set back by an hour.
  s.server_date = WallTime{1000s};
  s.received_mono = MonoTime{3600s};
  sc.learn(s);
  expect_near(*sc.floor_at(MonoTime{3600s}), WallTime{1000s});
}

// ---- one origin, several backends (issue 13 item 4) --------------------------------

// One answer of a simulated origin: a 503 whose Retry-After is a date 3 s after
// the answering server's own second, read as the curl client reads it (the
// origin's learned floor passed to observe(), then learned from).
struct SimAnswer {
  Signals signals;
  Duration permitted;            // permitted_wait(): from receipt
  Duration true_wait;            // from receipt until the answering server's clock reaches the date
  Duration date_alone;           // what the answer's own Date and our clock allow (rule 3 without a floor)
  bool after_detection = false;  // received once the origin had shown several clocks
};

// Answers every 290 ms (so their phase walks through the server's second),
// from servers whose clocks are `offsets[i % n]` ahead of ours. Each answer's
// Date is written 0, half of or all of `max_latency` (in turn) before it
// arrives, its request sent 20 ms before that.
std::vector<SimAnswer> simulate(ServerClock& sc, const std::vector<Duration>& offsets, int answers,
                                Duration max_latency = Duration::zero()) {
  using namespace std::chrono_literals;
  ManualClock clock;
  clock.advance(123ms);
  std::vector<SimAnswer> out;
  for (int i = 0; i < answers; ++i) {
    const Duration off = offsets[static_cast<std::size_t>(i) % offsets.size()];
    const Duration latency = max_latency * (i % 3) / 2;
    const WallTime server_now = clock.wall_now() + off;
    const WallTime date = std::chrono::floor<std::chrono::seconds>(server_now - latency);
    const WallTime retry_at = date + 3s;
    SimAnswer a;
    a.after_detection = sc.several_clocks();
    ObserveOptions o;
    o.server_time_floor = sc.trusted_floor_at(clock.mono_now());
    a.signals = observe(503,
                        HeaderList({{"Date", format_imf_fixdate(date)}, {"Retry-After", format_imf_fixdate(retry_at)}}),
                        clock.wall_now(), clock.mono_now(), o);
    sc.learn(a.signals, clock.mono_now() - latency - 20ms);
    a.permitted = permitted_wait(a.signals).wait.value();
    a.true_wait = retry_at - server_now;
    a.date_alone = std::max(retry_at - date, retry_at - clock.wall_now());
    out.push_back(std::move(a));
    clock.advance(290ms);
  }
  return out;
}

TEST(ServerClock, TwoBackendsOfOneOriginNeverMakeARetryEarly) {
  using namespace std::chrono_literals;
  // Behind one load balancer: server A's clock reads ours, server B's is 0.4 s
  // behind; they answer in turn. (A server ahead of us is covered by our own
  // clock: rule 3 counts from our receipt too.)
  ServerClock sc;
  const auto answers = simulate(sc, {0ms, -400ms}, 60);
  EXPECT_TRUE(sc.several_clocks());
  EXPECT_FALSE(sc.floor_at(MonoTime{std::chrono::hours{1001}}));
  int after = 0;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const SimAnswer& a = answers[i];
    // Never before the answering server's own time, and never earlier than its Date allows.
    EXPECT_GE(a.permitted, a.true_wait) << "answer " << i;
    EXPECT_LE(a.permitted, a.date_alone) << "answer " << i;
    if (a.after_detection) {
      ++after;
      EXPECT_EQ(a.permitted, a.date_alone) << "answer " << i;  // the floor is no longer used
    }
  }
  EXPECT_GT(after, 40);  // the two clocks showed within the first answers
}

TEST(ServerClock, PlannerAndPacerAgreeOnEachAnswersPermittedTime) {
  using namespace std::chrono_literals;
  for (const std::vector<Duration>& offsets : {std::vector<Duration>{0ms, -400ms}, std::vector<Duration>{-400ms}}) {
    ServerClock sc;
    const auto answers = simulate(sc, offsets, 40);
    PlannerConfig pc;
    pc.backoff = BackoffPolicy(1ms, 1ms, Jitter::kNone);
    const Planner planner(pc);
    SeededRandom rng(1);
    for (std::size_t i = 0; i < answers.size(); ++i) {
      const Signals& s = answers[i].signals;
      const Plan plan = planner.decide(PlanInput(s), rng);
      ASSERT_TRUE(plan.server_hint);
      EXPECT_EQ(*plan.server_hint, answers[i].permitted) << "answer " << i;
      EXPECT_EQ(plan.not_before_mono, s.received_mono + answers[i].permitted) << "answer " << i;
      // The pacer's cooldown for the same Signals, asked at receipt.
      ManualClock clock(s.received_wall, s.received_mono);
      Pacer pacer(PacerConfig{}, nullptr, clock.monotonic(), clock.wall());
      const Pacer::Key key = pacer.key("https://api.example");
      pacer.record(key, s);
      const AcquireResult r = pacer.acquire(key, clock.mono_now());
      EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
      EXPECT_EQ(r.not_before, *plan.not_before_mono) << "answer " << i;
    }
  }
}

TEST(ServerClock, ASingleBackendStillGetsTheTighterFloor) {
  using namespace std::chrono_literals;
  ServerClock sc;
  const auto answers = simulate(sc, {-400ms}, 60);
  EXPECT_FALSE(sc.several_clocks());
  for (std::size_t i = 0; i < answers.size(); ++i) {
    EXPECT_GE(answers[i].permitted, answers[i].true_wait) << "answer " << i;
  }
  // After a few seconds of answers the floor is within a few milliseconds of the
  // server's clock: the wait is the true one, not the up to a second more of its Date alone.
  for (std::size_t i = 20; i < answers.size(); ++i) {
    EXPECT_LE(answers[i].permitted - answers[i].true_wait, 20ms) << "answer " << i;
  }
  EXPECT_TRUE(std::any_of(answers.begin() + 20, answers.end(),
                          [](const SimAnswer& a) { return a.date_alone - a.permitted > 300ms; }));
}

TEST(ServerClock, ASlowAnswerIsNotMistakenForASecondClock) {
  using namespace std::chrono_literals;
  // One server 0.4 s behind us; its Dates are written up to 150 ms before the answers arrive.
  ServerClock sc;
  const auto answers = simulate(sc, {-400ms}, 60, 150ms);
  EXPECT_FALSE(sc.several_clocks());
  for (std::size_t i = 0; i < answers.size(); ++i) {
    EXPECT_GE(answers[i].permitted, answers[i].true_wait) << "answer " << i;
  }
  EXPECT_TRUE(std::any_of(answers.begin() + 20, answers.end(),
                          [](const SimAnswer& a) { return a.date_alone - a.permitted > 300ms; }));
}

Signals dated(std::int64_t unix_s, Duration mono) {
  Signals s;
  s.server_date = WallTime{std::chrono::seconds{unix_s}};
  s.received_mono = MonoTime{mono};
  return s;
}

TEST(ServerClock, ADateWhoseSecondEndsBeforeTheFloorStopsTheFloor) {
  using namespace std::chrono_literals;
  ServerClock sc;
  sc.learn(dated(1000, 100s));      // the clock read [1000, 1001) at mono 100 s
  sc.learn(dated(1001, 100900ms));  // [1001, 1002) at 100.9: the floor is 1000.1 + ... at 100 s
  ASSERT_TRUE(sc.floor_at(MonoTime{101s}));
  // Date 1000 at mono 101.5 s: its second ends at 1001, before the floor (1001.6): another clock.
  sc.learn(dated(1000, 101500ms));
  EXPECT_TRUE(sc.several_clocks());
  EXPECT_FALSE(sc.floor_at(MonoTime{102s}));
  sc.learn(dated(1002, 102s));  // nothing brings it back
  EXPECT_FALSE(sc.floor_at(MonoTime{102s}));
}

TEST(ServerClock, ADateWhoseSecondBeginsAtTheCeilingStopsTheFloorToo) {
  using namespace std::chrono_literals;
  ServerClock sc;
  sc.learn(dated(1000, 100900ms));  // below 1001 at 100.9 s
  // Date 1001 at 100.95 s: consistent (the tick came between).
  sc.learn(dated(1001, 100950ms));
  EXPECT_FALSE(sc.several_clocks());
  // Date 1002 at 101.5 s: the clock was below 1001.6 (ceiling from 100.9 s + 0.6 s): a faster clock.
  sc.learn(dated(1002, 101500ms));
  EXPECT_TRUE(sc.several_clocks());
  EXPECT_FALSE(sc.floor_at(MonoTime{102s}));
}

TEST(ServerClock, AClockSetTwiceIsTreatedAsSeveralClocks) {
  using namespace std::chrono_literals;
  ServerClock sc;
  sc.learn(dated(1000, 0s));
  sc.learn(dated(1000, 3600s));  // set back by an hour: starts afresh (a single clock)
  ASSERT_TRUE(sc.floor_at(MonoTime{3600s}));
  EXPECT_FALSE(sc.several_clocks());
  sc.learn(dated(9000, 3700s));  // and set again: several clocks behind the origin
  EXPECT_TRUE(sc.several_clocks());
  EXPECT_FALSE(sc.floor_at(MonoTime{3700s}));
}

TEST(PermittedWait, AFloorOutsideTheDatesSecondIsNeverUsed) {
  using namespace std::chrono_literals;
  const WallTime received{std::chrono::seconds{1767225600}};
  Signals s;
  s.received_wall = received;
  s.server_date = received - 30s;
  s.retry_after = RetryHint{RetryHint::Kind::kDate, 0s, received + 120s, "retry-after"};
  s.server_time_floor = received - 29200ms;  // within the Date's second: used
  EXPECT_EQ(permitted_wait(s).wait, 149200ms);
  s.server_time_floor = received - 29s;  // at the end of the Date's second: contradicts it, not used
  EXPECT_EQ(permitted_wait(s).wait, 150s);
  s.server_time_floor = received - 31s;  // below the Date: says less
  EXPECT_EQ(permitted_wait(s).wait, 150s);
  EXPECT_TRUE(permitted_wait(s).skew_lengthened);
}

TEST_F(ObserveTest, ServerBytesInWarningsAreEscaped) {
  const auto s = see(503, {{"Date", "\x1b]0;owned\x07 GMT"}, {"Retry-After", "soon\x1b[2J"}});
  ASSERT_FALSE(s.warnings.empty());
  for (const auto& w : s.warnings) {
    EXPECT_EQ(w.find('\x1b'), std::string::npos) << w;
    EXPECT_EQ(w.find('\x07'), std::string::npos) << w;
  }
  EXPECT_TRUE(warned(s, "\\x1b]0;owned\\x07"));
  EXPECT_TRUE(warned(s, "soon\\x1b[2J"));
}

}  // namespace
}  // namespace abide
