// abide mock-server: the limiter with a manual clock (exact values, exact
// premature boundaries), then the real server as a child process over HTTP.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "abide/ratelimit.h"
#include "abide/retry_after.h"
#include "abide/signals.h"
#include "abide/testing/manual_clock.h"
#include "mock_bucket.h"
#include "mock_server_core.h"
#include "mock_token_quota.h"
#include "mock_vendor.h"
#include "support/process.h"

namespace abide::mock {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// 2026-01-01T00:00:00.250Z: a quarter second into a whole second, so that the
// rounding of every stated wait shows.
const WallTime kT0 = WallTime{1767225600s} + 250ms;

std::optional<std::string> header(const Answer& a, std::string_view name) {
  for (const auto& [n, v] : a.headers)
    if (n == name) return v;
  return std::nullopt;
}

std::vector<std::string> header_names(const Answer& a) {
  std::vector<std::string> names;
  for (const auto& [n, v] : a.headers) names.push_back(n);
  return names;
}

LimiterOptions options(Style style, std::uint32_t limit, Duration window) {
  LimiterOptions o;
  o.style = style;
  o.limit = limit;
  o.window = window;
  return o;
}

Answer get(Limiter& l, std::string_view client = "c", std::string_view conn = "127.0.0.1:1000") {
  return l.handle({"GET", "/items/1", client, conn, ""});
}

// ---- the limiter, with a manual clock ----------------------------------------

TEST(MockLimiter, FixedWindowAcceptsTheLimitThenLimits) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kDraft11, 3, 2s), clock.wall());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(get(l).status, 200);
  const Answer limited = get(l);
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(limited.outcome, Outcome::kLimited);
  clock.advance(1999ms);
  EXPECT_EQ(get(l).status, 429);  // still window 0
  clock.advance(1ms);             // exactly the window's end: window 1
  const Answer next = get(l);
  EXPECT_EQ(next.status, 200);
  EXPECT_EQ(next.window, 1);
  const Counts t = l.totals();
  EXPECT_EQ(t.requests, 6u);
  EXPECT_EQ(t.accepted, 4u);
  EXPECT_EQ(t.limited, 2u);
  const json s = json::parse(l.stats().dump());
  ASSERT_EQ(s["windows"].size(), 2u);
  EXPECT_EQ(s["windows"][0]["accepted"], 3);
  EXPECT_EQ(s["windows"][0]["limited"], 2);
  EXPECT_EQ(s["windows"][1]["accepted"], 1);
  EXPECT_DOUBLE_EQ(s["windows"][1]["start_unix"].get<double>(), unix_seconds(kT0 + 2s));
}

TEST(MockLimiter, Draft11Fields) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kDraft11, 2, 2s), clock.wall());
  const Answer a = get(l);
  EXPECT_EQ(header(a, "Date"), "Thu, 01 Jan 2026 00:00:00 GMT");
  EXPECT_EQ(header(a, "RateLimit-Policy"), "\"default\";q=2;w=2");
  EXPECT_EQ(header(a, "RateLimit"), "\"default\";r=1;t=2");
  EXPECT_FALSE(header(a, "Retry-After"));
  clock.advance(500ms);  // 1.5 s left: stated as 2
  EXPECT_EQ(header(get(l), "RateLimit"), "\"default\";r=0;t=2");
  clock.advance(600ms);  // 0.9 s left: 1
  const Answer limited = get(l);
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(header(limited, "RateLimit"), "\"default\";r=0;t=1");
  EXPECT_EQ(header(limited, "Retry-After"), "1");
}

TEST(MockLimiter, Draft12Fields) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kDraft12, 2, 2s), clock.wall());
  const Answer a = get(l);
  EXPECT_EQ(header_names(a),
            (std::vector<std::string>{"Date", "RateLimit-Policy", "RateLimit", "RateLimit-Partition"}));
  EXPECT_EQ(header(a, "RateLimit-Policy"), "\"default\";q=2;w=2");
  EXPECT_EQ(header(a, "RateLimit"), "\"default\";a=1;w=2;c=1");
  EXPECT_EQ(header(a, "RateLimit-Partition"), "\"default\"");
  clock.advance(500ms);  // 1.5 s left: stated as 2
  EXPECT_EQ(header(get(l), "RateLimit"), "\"default\";a=0;w=2;c=1");
  clock.advance(600ms);  // 0.9 s left: 1
  const Answer limited = get(l);
  EXPECT_EQ(limited.status, 429);
  // A limited request uses no quota: its cost is 0. No Retry-After: a=0 and w are the signal.
  EXPECT_EQ(header(limited, "RateLimit"), "\"default\";a=0;w=1;c=0");
  EXPECT_FALSE(header(limited, "Retry-After"));
  // Told at 1.1 s with w=1: not before 2.1 s. A nanosecond earlier is premature.
  clock.set_wall(kT0 + 2100ms - 1ns);
  EXPECT_TRUE(get(l).premature);
  clock.set_wall(kT0 + 2100ms);
  EXPECT_FALSE(get(l).premature);
}

// What the draft12 style sends, abide reads: an exhausted draft-12
// observation whose reset is the stated w, no warning, nothing uninterpreted.
TEST(MockLimiter, Draft12IsReadByAbideAsTheWaitItStates) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kDraft12, 1, 3s), clock.wall());
  get(l);
  clock.advance(400ms);
  const Answer limited = get(l);
  abide::HeaderList h;
  for (const auto& [n, v] : limited.headers) h.add(n, v);
  const Signals s = observe(limited.status, h, clock.wall_now(), MonoTime{});
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_TRUE(s.uninterpreted.empty());
  EXPECT_FALSE(s.retry_after);
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].source, QuotaSource::kDraft12Provisional);
  EXPECT_EQ(s.quota[0].limit, 1);
  EXPECT_EQ(s.quota[0].window, 3s);
  EXPECT_EQ(s.quota[0].cost, 0);
  ASSERT_TRUE(permitted_wait(s).quota);
  EXPECT_EQ(*permitted_wait(s).quota, 3s);  // 2.6 s left, rounded up
}

TEST(MockLimiter, DraftLegacyFields) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kDraftLegacy, 2, 3s), clock.wall());
  const Answer a = get(l);
  EXPECT_EQ(header(a, "RateLimit-Limit"), "2");
  EXPECT_EQ(header(a, "RateLimit-Remaining"), "1");
  EXPECT_EQ(header(a, "RateLimit-Reset"), "3");
  EXPECT_EQ(header(a, "RateLimit-Policy"), "2;w=3");
  get(l);
  clock.advance(1200ms);
  const Answer limited = get(l);
  EXPECT_EQ(header(limited, "RateLimit-Remaining"), "0");
  EXPECT_EQ(header(limited, "RateLimit-Reset"), "2");
  EXPECT_EQ(header(limited, "Retry-After"), "2");
}

TEST(MockLimiter, GithubFieldsWithEpochReset) {
  ManualClock clock(kT0);
  LimiterOptions o = options(Style::kGithub, 2, 2s);
  o.limited_status = 403;
  Limiter l(o, clock.wall());
  const Answer a = get(l);
  EXPECT_EQ(header(a, "x-ratelimit-limit"), "2");
  EXPECT_EQ(header(a, "x-ratelimit-remaining"), "1");
  EXPECT_EQ(header(a, "x-ratelimit-used"), "1");
  // The window ends at ...602.25; an epoch is stated rounded up.
  EXPECT_EQ(header(a, "x-ratelimit-reset"), "1767225603");
  EXPECT_EQ(header(a, "x-ratelimit-resource"), "core");
  get(l);
  const Answer limited = get(l);
  EXPECT_EQ(limited.status, 403);
  EXPECT_EQ(header(limited, "x-ratelimit-remaining"), "0");
  EXPECT_EQ(header(limited, "x-ratelimit-used"), "2");
  EXPECT_FALSE(header(limited, "Retry-After"));
  EXPECT_NE(limited.body.find("documentation_url"), std::string::npos);
  // Told: not before 603. 602.999999999 is premature, 603 is not.
  clock.set_wall(WallTime{1767225603s} - 1ns);
  EXPECT_TRUE(get(l).premature);
  clock.set_wall(WallTime{1767225603s});
  EXPECT_FALSE(get(l).premature);
}

TEST(MockLimiter, OpenaiFieldsWithGoDurations) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kOpenai, 1, 2s), clock.wall());
  const Answer a = get(l);
  EXPECT_EQ(header(a, "x-ratelimit-limit-requests"), "1");
  EXPECT_EQ(header(a, "x-ratelimit-remaining-requests"), "0");
  EXPECT_EQ(header(a, "x-ratelimit-reset-requests"), "2s");
  clock.advance(250ms + 500us);
  const Answer limited = get(l);
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(header(limited, "x-ratelimit-reset-requests"), "1.75s");  // 1.7495 s, rounded up to ms
  EXPECT_FALSE(header(limited, "Retry-After"));
  clock.advance(1749ms);
  EXPECT_TRUE(get(l).premature);
  clock.advance(1ms);
  EXPECT_FALSE(get(l).premature);
}

// The openai style is a bucket of `limit` requests refilled over `window`, not
// a fixed window: requests come back one at a time, and never beyond the limit.
TEST(MockLimiter, OpenaiBucketRefillsContinuouslyUpToItsLimit) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kOpenai, 4, 2s), clock.wall());  // one request back every 500 ms
  const std::vector<std::string> remaining{"3", "2", "1", "0"};
  const std::vector<std::string> reset{"500ms", "1s", "1.5s", "2s"};  // to a full bucket
  for (std::size_t i = 0; i < 4; ++i) {
    const Answer a = get(l);
    EXPECT_EQ(a.status, 200) << i;
    EXPECT_EQ(header(a, "x-ratelimit-remaining-requests"), remaining[i]) << i;
    EXPECT_EQ(header(a, "x-ratelimit-reset-requests"), reset[i]) << i;
    EXPECT_FALSE(header(a, "retry-after-ms")) << i;
  }
  EXPECT_EQ(header(get(l), "retry-after-ms"), "500");
  clock.advance(500ms - 1ns);  // 1 ns short of one request back (another client: c waits as told)
  EXPECT_EQ(get(l, "probe").status, 429);
  clock.advance(1ns);
  const Answer one = get(l);
  EXPECT_EQ(one.status, 200);
  EXPECT_EQ(one.window, 0);  // still the first accounting window: refilled, not reset
  EXPECT_EQ(header(one, "x-ratelimit-remaining-requests"), "0");
  EXPECT_EQ(header(one, "x-ratelimit-reset-requests"), "2s");
  clock.advance(1500ms);  // three back
  const Answer after = get(l);
  EXPECT_EQ(after.status, 200);
  EXPECT_EQ(header(after, "x-ratelimit-remaining-requests"), "2");
  EXPECT_EQ(header(after, "x-ratelimit-reset-requests"), "1s");
  clock.advance(1h);  // full, and no fuller
  const Answer idle = get(l);
  EXPECT_EQ(header(idle, "x-ratelimit-remaining-requests"), "3");
  EXPECT_EQ(header(idle, "x-ratelimit-reset-requests"), "500ms");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(get(l).status, 200);
  EXPECT_EQ(get(l).status, 429);
  const Counts t = l.totals();
  EXPECT_EQ(t.accepted, 10u);
  EXPECT_EQ(t.limited, 3u);
  EXPECT_EQ(t.premature, 0u);  // every request waited for its retry-after-ms
}

// retry-after-ms is the time until one whole request is back, rounded up to a
// whole millisecond; the refill itself is exact (here 333.333... ms each).
TEST(MockLimiter, OpenaiRetryAfterMsRoundsUpTheTimeToOneRequest) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kOpenai, 3, 1s), clock.wall());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(get(l).status, 200);
  const Answer limited = get(l);
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(header_names(limited),
            (std::vector<std::string>{"Date", "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests",
                                      "x-ratelimit-reset-requests", "retry-after-ms"}));
  EXPECT_EQ(header(limited, "x-ratelimit-limit-requests"), "3");
  EXPECT_EQ(header(limited, "x-ratelimit-remaining-requests"), "0");
  EXPECT_EQ(header(limited, "x-ratelimit-reset-requests"), "1s");
  EXPECT_EQ(header(limited, "retry-after-ms"), "334");  // 333.33 ms, up
  EXPECT_FALSE(header(limited, "Retry-After"));
  EXPECT_NE(limited.body.find("rate_limited"), std::string::npos);
  // One request is back after 1/3 s exactly, to the nanosecond (rounded up).
  clock.set_wall(kT0 + 333'333'333ns);
  const Answer still = get(l, "other");
  EXPECT_EQ(still.status, 429);
  EXPECT_EQ(header(still, "retry-after-ms"), "1");  // 1 ns short: a whole ms stated
  EXPECT_EQ(header(still, "x-ratelimit-reset-requests"), "667ms");
  clock.set_wall(kT0 + 333'333'334ns);
  EXPECT_EQ(get(l, "other2").status, 200);
}

// What the openai style sends is read by abide's openai profile as the wait it
// states: retry-after-ms decides, not the full-refill reset.
TEST(MockLimiter, OpenaiIsReadByAbideAsItsRetryAfterMs) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kOpenai, 2, 10s), clock.wall());
  get(l);
  get(l);
  clock.advance(1250ms + 500us);
  const Answer limited = get(l);
  ASSERT_EQ(header(limited, "retry-after-ms"), "3750");  // 3.7495 s until one is back, up
  ASSERT_EQ(header(limited, "x-ratelimit-reset-requests"), "8.75s");
  abide::HeaderList h;
  for (const auto& [n, v] : limited.headers) h.add(n, v);
  ObserveOptions oo;
  oo.profile = "openai";
  const Signals s = observe(limited.status, h, clock.wall_now(), MonoTime{}, oo);
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_TRUE(s.uninterpreted.empty());
  const PermittedWait w = permitted_wait(s);
  ASSERT_TRUE(w.wait);
  EXPECT_EQ(*w.wait, 3750ms);
}

// The premature judgement for openai: the 429's retry-after-ms, counted from
// the decision time; the bucket may have a request back a little before it (the
// ms rounding), and a client that takes it is still premature.
TEST(MockLimiter, OpenaiPrematureIsEarlierThanRetryAfterMs) {
  ManualClock clock(kT0);
  LimiterOptions o = options(Style::kOpenai, 2, 1s);
  o.grace = 0ms;
  Limiter l(o, clock.wall());
  get(l);
  get(l);
  clock.advance(250ms + 500us);
  const Answer limited = get(l);
  ASSERT_EQ(header(limited, "retry-after-ms"), "250");  // 249.5 ms, up
  ASSERT_EQ(header(limited, "x-ratelimit-reset-requests"), "750ms");
  clock.advance(250ms - 1ns);
  const Answer early = get(l);
  EXPECT_TRUE(early.premature);
  EXPECT_EQ(early.status, 200);  // a request was back, but the client was told 250 ms
  clock.advance(1ns);
  const Answer on_time = get(l);
  EXPECT_FALSE(on_time.premature);
  EXPECT_EQ(on_time.status, 429);  // the early one took it
  EXPECT_EQ(l.totals().premature, 1u);
  // Not the full refill: a client that waited only for retry-after-ms is on time.
  clock.advance(std::chrono::milliseconds{std::stoi(*header(on_time, "retry-after-ms"))});
  EXPECT_FALSE(get(l).premature);
  EXPECT_EQ(l.totals().premature, 1u);
}

// POST /__reset fills the bucket again.
TEST(MockLimiter, OpenaiResetRefillsTheBucket) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kOpenai, 2, 60s), clock.wall());
  get(l);
  get(l);
  EXPECT_EQ(get(l).status, 429);
  l.reset();
  const Answer a = get(l);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(header(a, "x-ratelimit-remaining-requests"), "1");
  EXPECT_EQ(header(a, "x-ratelimit-reset-requests"), "30s");
}

TEST(MockLimiter, RetryAfterSecondsOnlyOnTheLimitedAnswer) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kRetryAfterSeconds, 1, 2s), clock.wall());
  const Answer a = get(l);
  EXPECT_EQ(header_names(a), std::vector<std::string>{"Date"});
  clock.advance(300ms);
  const Answer limited = get(l);
  EXPECT_EQ(header_names(limited), (std::vector<std::string>{"Date", "Retry-After"}));
  EXPECT_EQ(header(limited, "Retry-After"), "2");  // 1.7 s left
}

TEST(MockLimiter, RetryAfterDateStatesTheWindowEndRoundedUp) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kRetryAfterDate, 1, 2s), clock.wall());
  get(l);
  const Answer limited = get(l);
  EXPECT_EQ(header(limited, "Retry-After"), "Thu, 01 Jan 2026 00:00:03 GMT");
  clock.set_wall(WallTime{1767225603s} - 1ns);
  EXPECT_TRUE(get(l).premature);
  clock.set_wall(WallTime{1767225603s});
  EXPECT_FALSE(get(l).premature);
}

TEST(MockLimiter, MalformedRetryAfterIsRejectedEvenByAbideRobustMode) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kMalformed, 1, 2s), clock.wall());
  get(l);
  std::vector<std::string> seen;
  for (std::size_t i = 0; i < kMalformedRetryAfter.size(); ++i) {
    const Answer limited = get(l);
    ASSERT_TRUE(header(limited, "Retry-After"));
    EXPECT_TRUE(header(limited, "RateLimit"));  // the valid signal to fall back on
    const std::string v = *header(limited, "Retry-After");
    seen.push_back(v);
    EXPECT_FALSE(parse_retry_after(v, clock.wall_now(), ParseMode::kStrict)) << v;
    EXPECT_FALSE(parse_retry_after(v, clock.wall_now(), ParseMode::kRobust)) << v;
  }
  EXPECT_EQ(seen, std::vector<std::string>(kMalformedRetryAfter.begin(), kMalformedRetryAfter.end()));
}

TEST(MockLimiter, MalformedCountsARetryThatTookGarbageAsZero) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kMalformed, 1, 2s), clock.wall());
  get(l);
  get(l);  // limited; its RateLimit says t=2
  clock.advance(10ms);
  EXPECT_TRUE(get(l).premature);  // "retry now"
  clock.advance(2s);              // past t
  EXPECT_FALSE(get(l).premature);
}

TEST(MockLimiter, NoneStatesNothingSoNothingIsPremature) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kNone, 1, 2s), clock.wall());
  get(l);
  for (int i = 0; i < 3; ++i) {
    const Answer limited = get(l);
    EXPECT_EQ(limited.status, 429);
    EXPECT_EQ(header_names(limited), std::vector<std::string>{"Date"});
    EXPECT_FALSE(limited.premature);
  }
  EXPECT_EQ(l.totals().premature, 0u);
}

TEST(MockLimiter, PrematureOnlyWhenStrictlyEarlier) {
  ManualClock clock(kT0);
  LimiterOptions o = options(Style::kRetryAfterSeconds, 1, 2s);
  o.grace = 0ms;
  Limiter l(o, clock.wall());
  EXPECT_EQ(get(l).status, 200);
  clock.advance(500ms);
  const Answer limited = get(l);
  ASSERT_EQ(header(limited, "Retry-After"), "2");  // 1.5 s left, stated as 2: P = t0 + 2.5 s
  clock.set_wall(kT0 + 2500ms - 1ns);
  const Answer early = get(l);
  EXPECT_TRUE(early.premature);
  EXPECT_EQ(early.status, 200);  // the quota is back (window 1), but the client was told to wait
  clock.set_wall(kT0 + 2500ms);
  const Answer on_time = get(l);
  EXPECT_FALSE(on_time.premature);
  EXPECT_EQ(l.totals().premature, 1u);
  const json s = json::parse(l.stats().dump());
  EXPECT_EQ(s["clients"]["c"]["premature"], 1);
  EXPECT_EQ(s["windows"][1]["premature"], 1);
}

TEST(MockLimiter, InFlightRequestsOnOtherConnectionsAreNotPremature) {
  ManualClock clock(kT0);
  LimiterOptions o = options(Style::kRetryAfterSeconds, 1, 1s);
  o.grace = 50ms;
  Limiter l(o, clock.wall());
  get(l, "c", "A");
  get(l, "c", "A");  // limited at t0: P = t0 + 1 s
  clock.advance(10ms);
  EXPECT_FALSE(get(l, "c", "B").premature);  // was on its way
  EXPECT_TRUE(get(l, "c", "A").premature);   // sent after reading the answer
  clock.advance(39ms);                       // 49 ms after the first answer
  EXPECT_FALSE(get(l, "c", "C").premature);
  clock.advance(1ms);  // 50 ms after it: the client had it
  EXPECT_TRUE(get(l, "c", "D").premature);
  clock.advance(40ms);
  EXPECT_TRUE(get(l, "c", "E").premature);
  EXPECT_EQ(l.totals().premature, 3u);
}

TEST(MockLimiter, TheLatestAnswerTheClientHadDecides) {
  ManualClock clock(kT0);
  LimiterOptions o = options(Style::kRetryAfterSeconds, 1, 2s);
  o.grace = 50ms;
  Limiter l(o, clock.wall());
  get(l, "c", "A");
  clock.advance(50ms);
  get(l, "c", "A");  // t0+0.05: 1.95 s left, "2": P1 = t0 + 2.05
  clock.advance(1450ms);
  get(l, "c", "B");  // t0+1.5: 0.5 s left, "1": P2 = t0 + 2.5 (later P)
  clock.set_wall(kT0 + 2050ms);
  // Both answers are known by now; the later one (P2) decides.
  EXPECT_TRUE(get(l, "c", "C").premature);
  clock.set_wall(kT0 + 2500ms);
  EXPECT_FALSE(get(l, "c", "D").premature);
}

TEST(MockLimiter, AnAnswerStillInFlightDoesNotDecideYet) {
  ManualClock clock(kT0);
  LimiterOptions o = options(Style::kRetryAfterSeconds, 1, 2s);
  o.grace = 50ms;
  Limiter l(o, clock.wall());
  get(l, "c", "A");  // window 0
  clock.set_wall(kT0 + 1s);
  get(l, "c", "A");  // limited: "1", P1 = t0 + 2
  clock.set_wall(kT0 + 2s);
  EXPECT_FALSE(get(l, "c", "B").premature);  // at P1: on time, accepted (window 1)
  clock.set_wall(kT0 + 2020ms);
  get(l, "c", "C");  // limited: "2", P2 = t0 + 4.02
  clock.set_wall(kT0 + 2030ms);
  EXPECT_FALSE(get(l, "c", "D").premature);  // P2 still in flight: judged by P1
  clock.set_wall(kT0 + 2070ms);
  EXPECT_TRUE(get(l, "c", "E").premature);  // P2 had reached the client
  EXPECT_EQ(l.totals().premature, 1u);
}

TEST(MockLimiter, LatencyDelaysWhenTheAnswerCountsAsSent) {
  ManualClock clock(kT0);
  LimiterOptions o = options(Style::kRetryAfterSeconds, 1, 1s);
  o.grace = 0ms;
  o.latency = 100ms;
  Limiter l(o, clock.wall());
  get(l, "c", "A");
  get(l, "c", "A");  // limited; leaves at t0 + 100 ms
  clock.advance(99ms);
  EXPECT_FALSE(get(l, "c", "B").premature);
  clock.advance(1ms);
  EXPECT_TRUE(get(l, "c", "C").premature);
}

TEST(MockLimiter, ClientsAreCountedApart) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kRetryAfterSeconds, 1, 1s), clock.wall());
  EXPECT_EQ(get(l, "a", "a:1").status, 200);
  EXPECT_EQ(get(l, "a", "a:1").status, 429);
  EXPECT_EQ(get(l, "b", "b:1").status, 429);  // one shared quota; b was never told
  EXPECT_TRUE(get(l, "b", "b:1").premature);  // b retries at once where it was told
  EXPECT_TRUE(get(l, "a", "a:1").premature);
  const json s = json::parse(l.stats().dump());
  EXPECT_EQ(s["clients"]["a"]["requests"], 3);
  EXPECT_EQ(s["clients"]["a"]["accepted"], 1);
  EXPECT_EQ(s["clients"]["a"]["premature"], 1);
  EXPECT_EQ(s["clients"]["b"]["requests"], 2);
  EXPECT_EQ(s["clients"]["b"]["limited"], 2);
  EXPECT_EQ(s["clients"]["b"]["premature"], 1);
  EXPECT_EQ(s["totals"]["premature"], 2);
}

TEST(MockLimiter, FailRateIsReproducibleFromTheSeed) {
  const auto run = [](std::uint64_t seed, int n) {
    ManualClock clock(kT0);
    LimiterOptions o = options(Style::kDraft11, 1000, 1s);
    o.fail_rate = 0.3;
    o.seed = seed;
    Limiter l(o, clock.wall());
    std::vector<int> statuses;
    for (int i = 0; i < n; ++i) statuses.push_back(get(l).status);
    return statuses;
  };
  const auto a = run(42, 100);
  EXPECT_EQ(a, run(42, 100));
  EXPECT_NE(a, run(43, 100));
  const auto failures = std::count(a.begin(), a.end(), 503);
  EXPECT_GT(failures, 0);
  EXPECT_LT(failures, 100);
  EXPECT_EQ(std::count(a.begin(), a.end(), 200) + failures, 100);
}

TEST(MockLimiter, FailuresUseNoQuotaAndStateNoWait) {
  ManualClock clock(kT0);
  LimiterOptions o = options(Style::kDraft11, 3, 10s);
  o.fail_rate = 0.5;
  o.seed = 7;
  Limiter l(o, clock.wall());
  std::vector<int> first;
  for (int i = 0; i < 20; ++i) {
    const Answer a = get(l);
    first.push_back(a.status);
    if (a.status == 503) {
      EXPECT_FALSE(header(a, "Retry-After"));
      EXPECT_TRUE(header(a, "RateLimit"));
    }
  }
  const Counts t = l.totals();
  EXPECT_EQ(t.accepted, 3u);
  EXPECT_EQ(t.accepted + t.limited + t.failed, 20u);
  EXPECT_GT(t.failed, 0u);
  l.reset();  // the draws start again from the seed
  std::vector<int> again;
  for (int i = 0; i < 20; ++i) again.push_back(get(l).status);
  EXPECT_EQ(first, again);
}

TEST(MockLimiter, EpochAlignmentMakesWholeSecondResetsExact) {
  ManualClock clock(kT0);
  LimiterOptions o = options(Style::kGithub, 1, 2s);
  o.align = Align::kEpoch;
  Limiter l(o, clock.wall());
  const Answer a = get(l);
  EXPECT_EQ(header(a, "x-ratelimit-reset"), "1767225602");  // 1767225600 is a multiple of 2
  const json s = json::parse(l.stats().dump());
  EXPECT_DOUBLE_EQ(s["server"]["anchor_unix"].get<double>(), 1767225600.0);
  clock.set_wall(WallTime{1767225602s});
  EXPECT_EQ(get(l).status, 200);
}

TEST(MockLimiter, ResetClearsEverythingAndReanchors) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kDraft11, 1, 2s), clock.wall());
  get(l);
  get(l);
  clock.advance(700ms);
  l.reset();
  const json empty = json::parse(l.stats().dump());
  EXPECT_EQ(empty["totals"]["requests"], 0);
  EXPECT_TRUE(empty["clients"].empty());
  EXPECT_TRUE(empty["windows"].empty());
  EXPECT_TRUE(empty["server"]["anchor_unix"].is_null());
  const Answer a = get(l);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.window, 0);
  EXPECT_EQ(header(a, "RateLimit"), "\"default\";r=0;t=2");
}

TEST(MockLimiter, StatsJsonShape) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kRetryAfterSeconds, 1, 1s), clock.wall());
  get(l, "w1", "x:1");
  get(l, "w1", "x:1");
  clock.advance(1s);
  get(l, "w2", "x:2");
  const json s = json::parse(l.stats().dump());
  for (const char* k : {"server", "totals", "windows", "windows_dropped", "clients"}) EXPECT_TRUE(s.contains(k)) << k;
  for (const char* k : {"style", "limit", "window_s", "align", "limited_status", "latency_ms", "fail_rate", "seed",
                        "grace_ms", "now_unix", "anchor_unix", "current_window"})
    EXPECT_TRUE(s["server"].contains(k)) << k;
  EXPECT_EQ(s["server"]["style"], "retry-after-seconds");
  EXPECT_EQ(s["server"]["current_window"], 1);
  EXPECT_EQ(s["totals"], (json{{"requests", 3}, {"accepted", 2}, {"limited", 1}, {"failed", 0}, {"premature", 0}}));
  ASSERT_EQ(s["windows"].size(), 2u);
  EXPECT_EQ(s["windows"][0]["index"], 0);
  const json& w1 = s["clients"]["w1"];
  for (const char* k : {"requests", "accepted", "limited", "failed", "premature", "first_unix", "last_unix",
                        "not_before_unix", "windows"})
    EXPECT_TRUE(w1.contains(k)) << k;
  EXPECT_DOUBLE_EQ(w1["not_before_unix"].get<double>(), unix_seconds(kT0 + 1s));
  EXPECT_TRUE(s["clients"]["w2"]["not_before_unix"].is_null());
  ASSERT_EQ(s["clients"]["w2"]["windows"].size(), 1u);
  EXPECT_EQ(s["clients"]["w2"]["windows"][0]["index"], 1);
  EXPECT_EQ(s["clients"]["w2"]["windows"][0]["accepted"], 1);
}

TEST(MockLimiter, RecordWritesOneJsonLinePerRequest) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kDraft11, 1, 1s), clock.wall());
  std::ostringstream out;
  l.set_record(&out);
  get(l, "r", "r:1");
  get(l, "r", "r:1");
  l.reset();
  std::istringstream in(out.str());
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["client"], "r");
  EXPECT_EQ(lines[0]["status"], 200);
  EXPECT_EQ(lines[0]["outcome"], "accepted");
  EXPECT_EQ(lines[1]["status"], 429);
  EXPECT_EQ(lines[1]["premature"], false);
  EXPECT_EQ(lines[1]["window"], 0);
  EXPECT_DOUBLE_EQ(lines[1]["t"].get<double>(), unix_seconds(kT0));
  EXPECT_EQ(lines[2]["event"], "reset");
}

TEST(MockLimiter, AWallClockStepBackIsHeld) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kDraft11, 1, 1s), clock.wall());
  get(l);
  clock.advance(1500ms);
  EXPECT_EQ(get(l).window, 1);
  clock.jump_wall(-1h);
  const Answer a = get(l);
  EXPECT_EQ(a.window, 1);
  EXPECT_EQ(a.status, 429);
}

TEST(MockLimiter, BoundsMemory) {
  WindowHistory h(4);
  for (std::int64_t k = 0; k < 10; ++k) h.at(k).add(Outcome::kAccepted, false);
  EXPECT_EQ(h.counts().size(), 4u);
  EXPECT_EQ(h.first(), 6);
  EXPECT_EQ(h.dropped(), 6u);
  h.at(1'000'000'000).add(Outcome::kLimited, false);  // a long idle gap allocates nothing between
  EXPECT_EQ(h.counts().size(), 1u);
  EXPECT_EQ(h.first(), 1'000'000'000);

  ManualClock clock(kT0);
  Limiter l(options(Style::kDraft11, 1, 1s), clock.wall());
  for (std::size_t i = 0; i < Limiter::kMaxClients + 10; ++i) get(l, "client-" + std::to_string(i));
  get(l, std::string(1000, 'x'));
  const json s = json::parse(l.stats().dump());
  EXPECT_EQ(s["clients"].size(), Limiter::kMaxClients + 1);
  EXPECT_EQ(s["clients"]["(other)"]["requests"], 11);
}

TEST(MockLimiter, ClientIdsAreReportedAsValidJson) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kDraft11, 1, 1s), clock.wall());
  get(l, "\xff\xfe bad utf-8 \"quoted\"");
  const json s = json::parse(l.stats().dump(-1, ' ', false, json::error_handler_t::replace), nullptr, false);
  ASSERT_FALSE(s.is_discarded());
  EXPECT_EQ(s["clients"].size(), 1u);
}

TEST(MockLimiter, ThreadsShareOneExactQuota) {
  ManualClock clock(kT0);
  Limiter l(options(Style::kDraft11, 100, 1s), clock.wall());
  std::vector<std::thread> threads;
  std::atomic<int> accepted{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      const std::string id = "t" + std::to_string(t);
      for (int i = 0; i < 200; ++i)
        if (l.handle({"GET", "/", id, id, ""}).status == 200) accepted.fetch_add(1);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(accepted.load(), 100);
  EXPECT_EQ(l.totals().accepted, 100u);
  EXPECT_EQ(l.totals().requests, 1600u);
}

// ---- the token styles and gemini, with a manual clock ------------------------

LimiterOptions token_options(Style style, std::uint32_t limit, Duration window, std::uint64_t tokens,
                             std::uint64_t output_tokens = 8000) {
  LimiterOptions o = options(style, limit, window);
  o.token_limit = tokens;
  o.output_token_limit = output_tokens;
  return o;
}

Answer post(Limiter& l, std::string_view path, const std::string& body, std::string_view client = "c",
            std::string_view conn = "127.0.0.1:1000") {
  return l.handle({"POST", path, client, conn, body});
}

// A chat completion whose one message is `bytes` bytes of text, with `extra` merged in.
std::string chat(std::size_t bytes, json extra = json::object()) {
  json body{{"model", "gpt-test"},
            {"messages", json::array({{{"role", "user"}, {"content", std::string(bytes, 'a')}}})}};
  body.update(extra);
  return body.dump();
}

// An embedding of `bytes` bytes: its charge is the estimate alone (its max_tokens is 0).
std::string embedding(std::size_t bytes) { return json{{"model", "e"}, {"input", std::string(bytes, 'e')}}.dump(); }

// An Anthropic message: `system_bytes` of system prompt, `bytes` of user text.
std::string message(std::size_t system_bytes, std::size_t bytes, json extra = json::object()) {
  json body{{"model", "claude-test"},
            {"system", std::string(system_bytes, 's')},
            {"messages",
             json::array({{{"role", "user"},
                           {"content", json::array({{{"type", "text"}, {"text", std::string(bytes, 'm')}}})}}})}};
  body.update(extra);
  return body.dump();
}

std::uint64_t header_u64(const Answer& a, std::string_view name) {
  const auto v = header(a, name);
  return v ? std::stoull(*v) : ~std::uint64_t{0};
}

// The tokens taken at admission show as the bucket's remaining tokens on the
// answer: the charge is max(max_tokens, ceil(bytes / 4)), bytes of UTF-8 text.
TEST(MockTokens, OpenaiAdmissionChargeIsTheLargerOfMaxTokensAndTheEstimate) {
  const auto charged = [](const std::string& path, const std::string& body) {
    ManualClock clock(kT0);
    Limiter l(token_options(Style::kOpenaiTokens, 10, 60s, 100000), clock.wall());
    const Answer a = post(l, path, body);
    EXPECT_EQ(a.status, 200) << body;
    return 100000 - header_u64(a, "x-ratelimit-remaining-tokens");
  };
  EXPECT_EQ(charged("/v1/chat/completions", chat(400, {{"max_tokens", 50}})), 100u);  // estimate 100 > 50
  EXPECT_EQ(charged("/v1/chat/completions", chat(401, {{"max_tokens", 50}})), 101u);  // ceil(401 / 4)
  EXPECT_EQ(charged("/v1/chat/completions", chat(400, {{"max_tokens", 300}})), 300u);
  EXPECT_EQ(charged("/v1/chat/completions", chat(4, {{"max_completion_tokens", 70}})), 70u);
  EXPECT_EQ(charged("/v1/responses", json{{"input", "abcdefgh"}, {"max_output_tokens", 9}}.dump()), 9u);
  EXPECT_EQ(charged("/v1/chat/completions", chat(4, {{"max_tokens", 5}, {"max_completion_tokens", 70}})), 5u);
  EXPECT_EQ(charged("/v1/chat/completions", chat(4)), 4096u);  // OpenAI's default
  EXPECT_EQ(charged("/v1/embeddings", embedding(40)), 10u);    // embeddings: no output
  // UTF-8 bytes, not characters: "é" is two.
  const std::string accents = json{
      {"messages", json::array({{{"role", "user"}, {"content", "\u00e9\u00e9\u00e9\u00e9\u00e9"}}})},
      {"max_tokens", 1}}.dump();
  EXPECT_EQ(charged("/v1/chat/completions", accents), 3u);  // 10 bytes
  // Parts' text, a completions prompt and an embeddings array count too.
  const std::string parts = json{
      {"messages", json::array({{{"role", "user"},
                                 {"content", json::array({{{"type", "text"}, {"text", std::string(20, 'p')}},
                                                          {{"type", "image_url"}, {"image_url", "x"}}})}}})},
      {"max_tokens", 1}}.dump();
  EXPECT_EQ(charged("/v1/chat/completions", parts), 5u);
  EXPECT_EQ(charged("/v1/completions", json{{"prompt", std::string(12, 'p')}, {"max_tokens", 1}}.dump()), 3u);
  EXPECT_EQ(charged("/v1/embeddings", json{{"input", {"abcd", "efgh", "i"}}}.dump()), 3u);
}

// After the answer, the tokens bucket holds the charge less what the answer
// used (prompt + completion); a usage above the charge is taken too.
TEST(MockTokens, OpenaiReconciliationGivesBackWhatTheAnswerDidNotUse) {
  ManualClock clock(kT0);
  LimiterOptions o = token_options(Style::kOpenaiTokens, 10, 60s, 100000);
  o.seed = 5;
  Limiter l(o, clock.wall());
  const Answer a = post(l, "/v1/chat/completions", chat(40, {{"max_tokens", 400}}));  // P = 10, charge 400
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(header_u64(a, "x-ratelimit-remaining-tokens"), 100000u - 400);  // stated at admission
  const std::uint64_t c = TokenQuota::output_tokens(5, 0, 400);
  EXPECT_GE(c, 100u);
  EXPECT_LT(c, 390u);  // this seed leaves some of the reservation unused
  const json usage = json::parse(a.body)["usage"];
  EXPECT_EQ(usage, (json{{"prompt_tokens", 10}, {"completion_tokens", c}, {"total_tokens", 10 + c}}));
  // The next request (same instant: no refill) sees the first one charged P + C only.
  const Answer b = post(l, "/v1/embeddings", embedding(4));  // charge 1
  EXPECT_EQ(header_u64(b, "x-ratelimit-remaining-tokens"), 100000u - (10 + c) - 1);
  // A prompt larger than max_tokens: the charge is the prompt, the usage prompt + completion, the excess taken.
  const Answer big = post(l, "/v1/chat/completions", chat(4000, {{"max_tokens", 100}}));  // P = 1000
  const std::uint64_t c2 = TokenQuota::output_tokens(5, 2, 100);
  EXPECT_EQ(json::parse(big.body)["usage"]["completion_tokens"], c2);
  const Answer after = post(l, "/v1/embeddings", embedding(4));
  EXPECT_EQ(header_u64(after, "x-ratelimit-remaining-tokens"), 100000u - (10 + c) - 1 - (1000 + c2) - 1);
  // Determinism: the same seed and request number give the same draw; others differ somewhere.
  EXPECT_EQ(TokenQuota::output_tokens(5, 0, 400), c);
  bool differs = false;
  for (std::uint64_t n = 1; n < 20; ++n) differs = differs || TokenQuota::output_tokens(5, n, 400) != c;
  EXPECT_TRUE(differs);
  for (std::uint64_t n = 0; n < 200; ++n) {
    const std::uint64_t v = TokenQuota::output_tokens(9, n, 7);
    EXPECT_GE(v, 1u);
    EXPECT_LE(v, 7u);
  }
}

TEST(MockTokens, OpenaiLimitsOnTokensWhileRequestsHaveRoom) {
  ManualClock clock(kT0);
  Limiter l(token_options(Style::kOpenaiTokens, 100, 10s, 1000), clock.wall());  // one token back per 10 ms
  const Answer first = post(l, "/v1/embeddings", embedding(3200));               // 800 tokens
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(header(first, "x-ratelimit-remaining-tokens"), "200");
  const Answer limited = post(l, "/v1/embeddings", embedding(3200));
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(limited.outcome, Outcome::kLimited);
  EXPECT_EQ(header(limited, "x-ratelimit-remaining-requests"), "99");  // room for requests
  EXPECT_EQ(header(limited, "x-ratelimit-limit-tokens"), "1000");
  EXPECT_EQ(header(limited, "x-ratelimit-remaining-tokens"), "200");
  EXPECT_EQ(header(limited, "x-ratelimit-reset-tokens"), "8s");
  EXPECT_EQ(header(limited, "retry-after-ms"), "6000");  // 600 more tokens
  EXPECT_EQ(header(limited, "retry-after"), "6");
  const json e = json::parse(limited.body)["error"];
  EXPECT_EQ(e["type"], "tokens");
  EXPECT_EQ(e["code"], "rate_limit_exceeded");
  EXPECT_TRUE(e["param"].is_null());
  const std::string msg = e["message"];
  EXPECT_NE(msg.find("on tokens per min (TPM): Limit 1000, Used 800, Requested 800. Please try again in 6s."),
            std::string::npos)
      << msg;
  // A smaller request fits now: the limit is by tokens, not by requests.
  EXPECT_EQ(post(l, "/v1/embeddings", embedding(800), "other").status, 200);
  // A request larger than the bucket never fits: limited, with no wait stated.
  const Answer huge = post(l, "/v1/chat/completions", chat(4, {{"max_tokens", 1001}}), "other");
  EXPECT_EQ(huge.status, 429);
  EXPECT_FALSE(header(huge, "retry-after-ms"));
  EXPECT_FALSE(huge.permitted);
  EXPECT_NE(huge.body.find("Request too large"), std::string::npos);
}

// retry-after-ms is the time until this request's tokens are back, rounded up
// to the ms: one ns before the tokens are back the bucket still refuses, and
// a request at the stated time is accepted and on time.
TEST(MockTokens, OpenaiRetryAfterMsIsExactAndNeverEarly) {
  const auto limited_one = [](Limiter& l) {
    EXPECT_EQ(post(l, "/v1/embeddings", embedding(28)).status, 200);  // all 7 tokens
    return post(l, "/v1/embeddings", embedding(4));                   // 1 token: back after 1/7 s
  };
  ManualClock clock(kT0);
  LimiterOptions o = token_options(Style::kOpenaiTokens, 100, 1s, 7);
  o.grace = 0ms;
  Limiter l(o, clock.wall());
  const Answer limited = limited_one(l);
  ASSERT_EQ(limited.status, 429);
  EXPECT_EQ(header(limited, "retry-after-ms"), "143");  // 142.857... ms, up
  EXPECT_EQ(header(limited, "retry-after"), "1");
  ASSERT_TRUE(limited.permitted);
  EXPECT_EQ(*limited.permitted, kT0 + 143ms);
  clock.set_wall(kT0 + 142'857'142ns);  // 1 ns before the token is back
  const Answer probe = post(l, "/v1/embeddings", embedding(4), "probe");
  EXPECT_EQ(probe.status, 429);
  EXPECT_EQ(header(probe, "retry-after-ms"), "1");
  clock.set_wall(kT0 + 143ms);  // P
  const Answer on_time = post(l, "/v1/embeddings", embedding(4));
  EXPECT_EQ(on_time.status, 200);
  EXPECT_FALSE(on_time.premature);

  // The same, retried 1 ns before P: a token is back, but the client was told 143 ms.
  ManualClock clock2(kT0);
  Limiter l2(o, clock2.wall());
  ASSERT_EQ(limited_one(l2).status, 429);
  clock2.set_wall(kT0 + 143ms - 1ns);
  const Answer early = post(l2, "/v1/embeddings", embedding(4));
  EXPECT_TRUE(early.premature);
  EXPECT_EQ(l2.totals().premature, 1u);
}

// Anthropic: the input is charged at admission, max_tokens reserved from the
// output bucket, and the unused part of the reservation comes back.
TEST(MockTokens, AnthropicSplitsInputAndOutputAndGivesBackUnusedOutput) {
  ManualClock clock(kT0);
  LimiterOptions o = token_options(Style::kAnthropicTokens, 100, 60s, 1000, 1000);
  o.seed = 3;
  Limiter l(o, clock.wall());
  const Answer a = post(l, "/v1/messages", message(40, 400, {{"max_tokens", 400}}));  // input 10 + 100
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(header(a, "anthropic-ratelimit-input-tokens-remaining"), "890");
  EXPECT_EQ(header(a, "anthropic-ratelimit-output-tokens-remaining"), "600");  // reserved at admission
  EXPECT_EQ(header(a, "anthropic-ratelimit-tokens-remaining"), "600");         // the more restrictive
  EXPECT_EQ(header(a, "anthropic-ratelimit-tokens-limit"), "1000");
  EXPECT_EQ(header(a, "anthropic-ratelimit-requests-remaining"), "99");
  // Full again 6.6 s from 00:00:00.25 for the input (110 of 1000 per minute), 24 s for the output.
  EXPECT_EQ(header(a, "anthropic-ratelimit-input-tokens-reset"), "2026-01-01T00:00:07Z");
  EXPECT_EQ(header(a, "anthropic-ratelimit-output-tokens-reset"), "2026-01-01T00:00:25Z");
  EXPECT_FALSE(header(a, "retry-after"));
  const std::uint64_t out = TokenQuota::output_tokens(3, 0, 400);
  ASSERT_LT(out, 400u);
  const json body = json::parse(a.body);
  EXPECT_EQ(body["type"], "message");
  EXPECT_EQ(body["usage"], (json{{"input_tokens", 110},
                                 {"output_tokens", out},
                                 {"cache_read_input_tokens", 0},
                                 {"cache_creation_input_tokens", 0}}));
  // The next request sees only the output actually used taken.
  const Answer b = post(l, "/v1/messages", message(0, 4, {{"max_tokens", 1}}));
  EXPECT_EQ(header_u64(b, "anthropic-ratelimit-output-tokens-remaining"), 1000 - out - 1);
  EXPECT_EQ(header_u64(b, "anthropic-ratelimit-input-tokens-remaining"), 1000u - 110 - 1);
  // Output short while input and requests have room: limited, retry-after in whole seconds up.
  const std::uint64_t left = 1000 - out - 1 + (1 - TokenQuota::output_tokens(3, 1, 1));
  const Answer limited = post(l, "/v1/messages", message(0, 4, {{"max_tokens", left + 10}}));
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(header(limited, "retry-after"), "1");  // 10 output tokens: 0.6 s at 1000 per minute
  EXPECT_EQ(json::parse(limited.body),
            json::parse(
                anthropic_error("rate_limit_error", json::parse(limited.body)["error"]["message"].get<std::string>())));
  EXPECT_NE(limited.body.find("output tokens per minute"), std::string::npos) << limited.body;
}

std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
  return out;
}

TEST(MockTokens, StreamsCarryTheUsageInTheVendorsEvents) {
  ManualClock clock(kT0);
  Limiter l(token_options(Style::kOpenaiTokens, 100, 60s, 100000), clock.wall());
  const Answer s = post(l, "/v1/chat/completions",
                        chat(40,
                             {{"max_tokens", 64}, {"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(s.status, 200);
  EXPECT_EQ(s.content_type, "text/event-stream");
  const auto events = sse_data(s.body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json last = json::parse(events[events.size() - 2]);
  EXPECT_EQ(last["choices"], json::array());
  const std::uint64_t c = TokenQuota::output_tokens(1, 0, 64);
  EXPECT_EQ(last["usage"], (json{{"prompt_tokens", 10}, {"completion_tokens", c}, {"total_tokens", 10 + c}}));
  std::string text;
  for (std::size_t i = 0; i + 2 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    EXPECT_TRUE(chunk["usage"].is_null());
    text += chunk["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(text, kMockAnswerText);
  // Without include_usage: no usage chunk at all.
  const Answer plain = post(l, "/v1/chat/completions", chat(4, {{"max_tokens", 8}, {"stream", true}}));
  EXPECT_EQ(plain.body.find("usage"), std::string::npos);
  EXPECT_EQ(sse_data(plain.body).back(), "[DONE]");

  Limiter a(token_options(Style::kAnthropicTokens, 100, 60s, 100000, 100000), clock.wall());
  const Answer m = post(a, "/v1/messages", message(8, 32, {{"max_tokens", 100}, {"stream", true}}));
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.content_type, "text/event-stream");
  std::vector<std::string> names;
  std::istringstream in(m.body);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("event: ", 0) == 0) names.push_back(line.substr(7));
  EXPECT_EQ(names, (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                             "content_block_delta", "content_block_delta", "content_block_stop",
                                             "message_delta", "message_stop"}));
  const auto data = sse_data(m.body);
  ASSERT_EQ(data.size(), names.size());
  EXPECT_EQ(json::parse(data[0])["message"]["usage"]["input_tokens"], 10);
  EXPECT_EQ(json::parse(data[6])["usage"]["output_tokens"], TokenQuota::output_tokens(1, 0, 100));
}

// Gemini states its wait only in the body: RetryInfo's retryDelay, the whole
// seconds left in the window, rounded up; a retry before it is premature.
TEST(MockTokens, GeminiRetryDelayIsTheWaitAndAnEarlierRetryIsPremature) {
  ManualClock clock(kT0);
  LimiterOptions o = options(Style::kGemini, 1, 60s);
  o.grace = 0ms;
  Limiter l(o, clock.wall());
  const Answer ok = get(l);
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(header_names(ok), std::vector<std::string>{"Date"});
  EXPECT_TRUE(json::parse(ok.body).contains("candidates"));
  clock.advance(10500ms);  // 49.5 s left
  const Answer limited = get(l);
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(header_names(limited), std::vector<std::string>{"Date"});  // no rate-limit field, no Retry-After
  const json e = json::parse(limited.body)["error"];
  EXPECT_EQ(e["code"], 429);
  EXPECT_EQ(e["status"], "RESOURCE_EXHAUSTED");
  EXPECT_EQ(e["message"], "Resource has been exhausted (e.g. check quota).");
  EXPECT_EQ(e["details"][0]["@type"], "type.googleapis.com/google.rpc.RetryInfo");
  EXPECT_EQ(e["details"][0]["retryDelay"], "50s");
  ASSERT_TRUE(limited.permitted);
  EXPECT_EQ(*limited.permitted, kT0 + 60500ms);
  clock.set_wall(kT0 + 60500ms - 1ns);
  const Answer early = get(l);
  EXPECT_TRUE(early.premature);
  EXPECT_EQ(early.status, 200);  // window 1 had begun: the quota was back, the client was told 50 s
  clock.set_wall(kT0 + 60500ms);
  EXPECT_FALSE(get(l).premature);
  EXPECT_EQ(l.totals().premature, 1u);
}

// A body a token style cannot read is a 400 (413 over 1 MiB) in the vendor's
// error shape: no crash, no quota used, counted as invalid and not as a request.
TEST(MockTokens, UnreadableBodiesAre400AndUseNoQuota) {
  ManualClock clock(kT0);
  Limiter l(token_options(Style::kOpenaiTokens, 1, 60s, 1000), clock.wall());
  const std::vector<std::string> bad{"{bad",
                                     "",
                                     "[]",
                                     "null",
                                     "\"text\"",
                                     std::string(100, '[') + std::string(100, ']'),
                                     chat(4, {{"max_tokens", "ten"}}),
                                     chat(4, {{"max_tokens", -1}}),
                                     chat(4, {{"max_tokens", 1.5}}),
                                     chat(4, {{"stream", "yes"}}),
                                     chat(4, {{"stream_options", {{"include_usage", 1}}}}),
                                     "{\"messages\": [{\"content\": \"\xff\xfe\"}]}"};
  for (const auto& body : bad) {
    const Answer a = post(l, "/v1/chat/completions", body);
    EXPECT_EQ(a.status, 400) << body;
    EXPECT_EQ(a.outcome, Outcome::kInvalid) << body;
    const json e = json::parse(a.body, nullptr, false);
    ASSERT_FALSE(e.is_discarded()) << a.body;
    EXPECT_EQ(e["error"]["type"], "invalid_request_error") << body;
    EXPECT_FALSE(e["error"]["message"].get<std::string>().empty());
  }
  const Answer big = post(l, "/v1/chat/completions", std::string(kMaxBodyBytes + 1, ' '));
  EXPECT_EQ(big.status, 413);
  const Counts t = l.totals();
  EXPECT_EQ(t.requests, 0u);
  EXPECT_EQ(l.token_totals().invalid, bad.size() + 1);
  // The one request of the quota is still there.
  EXPECT_EQ(post(l, "/v1/chat/completions", chat(4, {{"max_tokens", 10}})).status, 200);

  Limiter a(token_options(Style::kAnthropicTokens, 10, 60s, 1000, 1000), clock.wall());
  for (const auto& body : {message(0, 4), message(0, 4, {{"max_tokens", 0}}), std::string("{")}) {
    const Answer r = post(a, "/v1/messages", body);
    EXPECT_EQ(r.status, 400) << body;
    const json e = json::parse(r.body);
    EXPECT_EQ(e["type"], "error");
    EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  }
  EXPECT_NE(post(a, "/v1/messages", message(0, 4)).body.find("max_tokens"), std::string::npos);
  EXPECT_EQ(post(a, "/v1/messages", std::string(kMaxBodyBytes + 1, ' ')).status, 413);
  EXPECT_EQ(a.totals().requests, 0u);
}

// /__stats counts, per window and in total, the tokens admitted and charged
// after reconciliation (input and output apart for anthropic).
TEST(MockTokens, StatsCountTokensPerWindowAndInTotal) {
  ManualClock clock(kT0);
  Limiter l(token_options(Style::kOpenaiTokens, 100, 10s, 100000), clock.wall());
  post(l, "/v1/chat/completions", chat(40, {{"max_tokens", 100}}));  // window 0: admitted 100, charged 10 + C0
  post(l, "/v1/embeddings", embedding(80));                          // window 0: 20, 20
  post(l, "/v1/chat/completions", "{");                              // invalid
  clock.advance(10s);
  post(l, "/v1/chat/completions", chat(400, {{"max_tokens", 8}}));  // window 1: admitted 100, charged 100 + C2
  post(l, "/v1/embeddings", embedding(4000000), "x");               // 413
  const std::uint64_t c0 = TokenQuota::output_tokens(1, 0, 100);
  const std::uint64_t c2 = TokenQuota::output_tokens(1, 2, 8);
  const json s = json::parse(l.stats().dump());
  EXPECT_EQ(s["server"]["token_limit"], 100000);
  EXPECT_FALSE(s["server"].contains("output_token_limit"));
  EXPECT_EQ(s["totals"]["requests"], 3);
  EXPECT_EQ(s["totals"]["invalid"], 2);
  EXPECT_EQ(s["totals"]["tokens"],
            (json{{"admitted", 220}, {"charged", 10 + c0 + 20 + 100 + c2}, {"prompt", 130}, {"completion", c0 + c2}}));
  ASSERT_EQ(s["windows"].size(), 2u);
  EXPECT_EQ(s["windows"][0]["invalid"], 1);
  EXPECT_EQ(s["windows"][0]["tokens"],
            (json{{"admitted", 120}, {"charged", 30 + c0}, {"prompt", 30}, {"completion", c0}}));
  EXPECT_EQ(s["windows"][1]["invalid"], 1);
  EXPECT_EQ(s["windows"][1]["tokens"],
            (json{{"admitted", 100}, {"charged", 100 + c2}, {"prompt", 100}, {"completion", c2}}));
  EXPECT_FALSE(s["clients"]["c"].contains("tokens"));  // per client: the request counts only

  Limiter a(token_options(Style::kAnthropicTokens, 100, 10s, 1000, 500), clock.wall());
  post(a, "/v1/messages", message(4, 36, {{"max_tokens", 50}}));
  const std::uint64_t o0 = TokenQuota::output_tokens(1, 0, 50);
  const json sa = json::parse(a.stats().dump());
  EXPECT_EQ(sa["server"]["output_token_limit"], 500);
  const json want{{"input_admitted", 10}, {"input_charged", 10}, {"output_admitted", 50}, {"output_charged", o0}};
  EXPECT_EQ(sa["totals"]["tokens"], want);
  EXPECT_EQ(sa["windows"][0]["tokens"], want);
  // A style without tokens has none of these keys.
  Limiter d(options(Style::kDraft11, 1, 1s), clock.wall());
  get(d);
  const json sd = json::parse(d.stats().dump());
  EXPECT_FALSE(sd["totals"].contains("tokens"));
  EXPECT_FALSE(sd["totals"].contains("invalid"));
  EXPECT_FALSE(sd["windows"][0].contains("tokens"));
}

TEST(MockTokens, BucketIsExactInIntegers) {
  Bucket b(3, 1s, kT0);  // one unit per 333.333... ms
  EXPECT_EQ(b.available(), 3u);
  EXPECT_TRUE(b.holds(3));
  EXPECT_FALSE(b.holds(4));
  EXPECT_EQ(b.until(4), Duration::max());
  b.take(3);
  EXPECT_EQ(b.until(1), 333'333'334ns);  // rounded up
  EXPECT_EQ(b.until_full(), 1s);
  b.refill(kT0 + 333'333'333ns);
  EXPECT_FALSE(b.holds(1));
  b.refill(kT0 + 333'333'334ns);
  EXPECT_TRUE(b.holds(1));
  b.refill(kT0);  // time never goes back
  EXPECT_TRUE(b.holds(1));
  b.take(3);  // overdrawn by two
  EXPECT_EQ(b.available(), 0u);
  EXPECT_FALSE(b.holds(0));
  b.give(1000);  // never beyond full
  EXPECT_EQ(b.available(), 3u);
  EXPECT_EQ(b.until_full(), Duration::zero());
  b.take(2);
  b.refill(kT0 + 1h);
  EXPECT_EQ(b.available(), 3u);
}

TEST(MockHelpers, GoDurations) {
  EXPECT_EQ(go_duration(0s), "0s");
  EXPECT_EQ(go_duration(-3s), "0s");
  EXPECT_EQ(go_duration(1ns), "1ms");
  EXPECT_EQ(go_duration(12ms), "12ms");
  EXPECT_EQ(go_duration(1s), "1s");
  EXPECT_EQ(go_duration(1500ms), "1.5s");
  EXPECT_EQ(go_duration(1010ms), "1.01s");
  EXPECT_EQ(go_duration(6min), "6m0s");
  EXPECT_EQ(go_duration(61250ms), "1m1.25s");
  EXPECT_EQ(go_duration(1h), "1h0m0s");
}

TEST(MockHelpers, LoopbackOnly) {
  for (const char* ok : {"127.0.0.1", "127.1.2.3", "localhost"}) EXPECT_TRUE(is_loopback_address(ok)) << ok;
  for (const char* no :
       {"0.0.0.0", "10.0.0.1", "192.168.1.1", "::1", "::", "example.com", "", "127.0.0.1 ", "128.0.0.1", "127.0.0.256"})
    EXPECT_FALSE(is_loopback_address(no)) << no;
}

TEST(MockHelpers, Styles) {
  for (const auto& [style, name] : kStyleNames) EXPECT_EQ(parse_style(name), style);
  EXPECT_FALSE(parse_style("Draft11"));
  LimiterOptions o;
  EXPECT_EQ(validate(o), "");
  o.limited_status = 500;
  EXPECT_NE(validate(o), "");
  for (const Style s : {Style::kOpenaiTokens, Style::kAnthropicTokens, Style::kGemini}) {
    LimiterOptions v;
    v.style = s;
    EXPECT_EQ(validate(v), "") << to_string(s);
    v.limited_status = 503;  // their bodies are 429s
    EXPECT_NE(validate(v).find("429"), std::string::npos) << to_string(s);
  }
  LimiterOptions t;
  t.style = Style::kAnthropicTokens;
  t.token_limit = 0;
  EXPECT_NE(validate(t).find("--token-limit"), std::string::npos);
  t.token_limit = 1;
  t.output_token_limit = kMaxTokenLimit + 1;
  EXPECT_NE(validate(t).find("--output-token-limit"), std::string::npos);
}

// ---- the real server, as `abide mock-server` in a child process --------------

#ifdef ABIDE_CLI_PATH

// `abide mock-server --port 0 ARGS...`, its port read from its first line.
class MockProcess {
 public:
  explicit MockProcess(std::vector<std::string> args) : proc_(argv(std::move(args))) {
    const auto line = proc_.read_line(30s);
    const std::string prefix = "listening on 127.0.0.1:";
    if (line && line->rfind(prefix, 0) == 0) port_ = std::stoi(line->substr(prefix.size()));
  }
  int port() const { return port_; }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(10s);
    c.set_read_timeout(20s);
    c.set_write_timeout(10s);
    return c;
  }

  json stats() const {
    auto c = client();
    const auto r = c.Get("/__stats");
    if (!r || r->status != 200) return json();
    return json::parse(r->body);
  }

  // Stops with SIGTERM and expects a clean exit: 0, and no sanitizer report.
  test::RunResult stop_cleanly(int sig = SIGTERM) {
    auto r = proc_.stop(sig);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("Sanitizer"), std::string::npos) << r.err;
    return r;
  }

 private:
  static std::vector<std::string> argv(std::vector<std::string> args) {
    args.insert(args.begin(), {ABIDE_CLI_PATH, "mock-server", "--port", "0", "--threads", "16"});
    return args;
  }
  test::BackgroundProcess proc_;
  int port_ = -1;
};

httplib::Headers id(const std::string& client) { return {{"X-Client-Id", client}}; }

TEST(MockServerCli, ServesEveryMethodOnAnyPathAndControlPathsDoNotCount) {
  MockProcess m({"--style", "draft11", "--limit", "100", "--window", "1"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  auto get = c.Get("/v1/items?x=1");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 200);
  EXPECT_NE(get->body.find("\"ok\":true"), std::string::npos);
  EXPECT_TRUE(get->has_header("RateLimit"));
  EXPECT_TRUE(get->has_header("Date"));
  auto head = c.Head("/a");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  EXPECT_EQ(c.Post("/b", "{\"k\":1}", "application/json")->status, 200);
  EXPECT_EQ(c.Put("/c", "x", "text/plain")->status, 200);
  EXPECT_EQ(c.Patch("/d", "x", "text/plain")->status, 200);
  EXPECT_EQ(c.Delete("/e")->status, 200);
  EXPECT_EQ(c.Post("/__stats", "", "text/plain")->status, 405);
  EXPECT_EQ(c.Get("/__reset")->status, 405);
  const json s = m.stats();
  EXPECT_EQ(s["totals"]["requests"], 6);
  EXPECT_EQ(s["totals"]["accepted"], 6);
  EXPECT_TRUE(s["clients"].contains("127.0.0.1"));
  EXPECT_EQ(c.Post("/__reset", "", "text/plain")->status, 200);
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
  m.stop_cleanly();
}

// curl's `-X POST` sends no body and no Content-Length: the reset still works.
TEST(MockServerCli, ResetWorksWithCurlsBodilessPost) {
  if (!std::filesystem::exists("/usr/bin/curl")) GTEST_SKIP() << "no curl binary";
  MockProcess m({"--style", "draft11", "--limit", "100", "--window", "60"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  ASSERT_EQ(c.Get("/x")->status, 200);
  ASSERT_EQ(m.stats()["totals"]["requests"], 1);
  const std::string url = "http://127.0.0.1:" + std::to_string(m.port()) + "/__reset";
  std::FILE* p = ::popen(("/usr/bin/curl -sS -o /dev/null -w '%{http_code}' -X POST " + url).c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[64] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, p);
  EXPECT_EQ(::pclose(p), 0);
  EXPECT_EQ(std::string(buf, n), "200");
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
  // Still a POST only, and the connection after a bodiless reset still works.
  EXPECT_EQ(c.Get("/__reset")->status, 405);
  EXPECT_EQ(c.Get("/y")->status, 200);
  m.stop_cleanly();
}

TEST(MockServerCli, EveryStyleSendsItsFieldsAndItsWaitSignal) {
  struct Case {
    std::string style;
    std::string status;
    std::vector<std::string> on_every;    // fields on the accepted answer
    std::vector<std::string> on_limited;  // fields added when limited
  };
  const std::vector<Case> cases{
      {"draft11", "429", {"RateLimit", "RateLimit-Policy"}, {"Retry-After"}},
      {"draft11", "503", {"RateLimit", "RateLimit-Policy"}, {"Retry-After"}},
      {"draft-legacy",
       "429",
       {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy"},
       {"Retry-After"}},
      {"github", "403", {"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-used", "x-ratelimit-reset"}, {}},
      {"openai",
       "429",
       {"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"},
       {"retry-after-ms"}},
      {"retry-after-seconds", "429", {}, {"Retry-After"}},
      {"retry-after-date", "429", {}, {"Retry-After"}},
      {"malformed", "429", {"RateLimit"}, {"Retry-After"}},
      {"draft12", "429", {"RateLimit", "RateLimit-Policy", "RateLimit-Partition"}, {}},
      {"none", "429", {}, {}},
      {"gemini", "429", {}, {}},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.style + " " + k.status);
    MockProcess m({"--style", k.style, "--limited-status", k.status, "--limit", "1", "--window", "1"});
    ASSERT_GT(m.port(), 0);
    auto c = m.client();
    const auto ok = c.Get("/");
    const auto limited = c.Get("/");
    ASSERT_TRUE(ok && limited);
    EXPECT_EQ(ok->status, 200);
    EXPECT_EQ(limited->status, std::stoi(k.status));
    for (const auto& h : k.on_every) {
      EXPECT_TRUE(ok->has_header(h)) << h;
      EXPECT_TRUE(limited->has_header(h)) << h;
    }
    for (const auto& h : k.on_limited) {
      EXPECT_FALSE(ok->has_header(h)) << h;
      EXPECT_TRUE(limited->has_header(h)) << h;
    }
    if (k.style == "retry-after-seconds" || k.style == "draft11") {
      EXPECT_EQ(limited->get_header_value("Retry-After"), "1");
    }
    if (k.style == "retry-after-date") {
      EXPECT_TRUE(parse_retry_after(limited->get_header_value("Retry-After"), system_wall_clock().now()));
    }
    if (k.style == "github") {
      EXPECT_EQ(limited->get_header_value("x-ratelimit-remaining"), "0");
    }
    if (k.style == "draft12") {
      EXPECT_FALSE(limited->has_header("Retry-After"));
      EXPECT_EQ(limited->get_header_value("RateLimit"), "\"default\";a=0;w=1;c=0");
    }
    if (k.style == "gemini") {
      EXPECT_FALSE(limited->has_header("Retry-After"));
      EXPECT_NE(limited->body.find("RESOURCE_EXHAUSTED"), std::string::npos) << limited->body;
    }
    if (k.style == "none" || k.style == "retry-after-seconds" || k.style == "retry-after-date" || k.style == "gemini") {
      for (const auto& [name, value] : ok->headers) {
        std::string lower = name;
        for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        EXPECT_EQ(lower.find("ratelimit"), std::string::npos) << name;
      }
    }
    m.stop_cleanly();
  }
}

TEST(MockServerCli, CountsAnEarlyRetryAndNotAnOnTimeOne) {
  MockProcess m({"--style", "retry-after-seconds", "--limit", "1", "--window", "1"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  c.set_keep_alive(true);  // the early retry goes on the connection that got the answer
  ASSERT_EQ(c.Get("/", id("early"))->status, 200);
  ASSERT_EQ(c.Get("/", id("early"))->status, 429);
  const auto again = c.Get("/", id("early"));  // at once: premature
  ASSERT_TRUE(again);
  ASSERT_EQ(again->status, 429);
  const auto received = std::chrono::steady_clock::now();
  const int wait_s = std::stoi(again->get_header_value("Retry-After"));
  std::this_thread::sleep_until(received + std::chrono::seconds(wait_s) + 20ms);
  const auto on_time = c.Get("/", id("early"));
  ASSERT_TRUE(on_time);
  EXPECT_EQ(on_time->status, 200);
  c.stop();
  const json s = m.stats();
  EXPECT_EQ(s["clients"]["early"]["premature"], 1);
  EXPECT_EQ(s["clients"]["early"]["limited"], 2);
  EXPECT_EQ(s["clients"]["early"]["accepted"], 2);
  EXPECT_EQ(s["totals"]["premature"], 1);
  m.stop_cleanly();
}

TEST(MockServerCli, InFlightAllowanceOnNewConnections) {
  MockProcess m({"--style", "retry-after-seconds", "--limit", "1", "--window", "1", "--grace", "500"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();  // no keep-alive: each request on a new connection
  ASSERT_EQ(c.Get("/", id("g"))->status, 200);
  ASSERT_EQ(c.Get("/", id("g"))->status, 429);
  ASSERT_EQ(c.Get("/", id("g"))->status, 429);  // within the allowance: not counted
  std::this_thread::sleep_for(600ms);
  ASSERT_TRUE(c.Get("/", id("g")));  // past it, before the stated second
  const json s = m.stats();
  EXPECT_EQ(s["clients"]["g"]["premature"], 1);
  m.stop_cleanly();
}

TEST(MockServerCli, ClientIdsAreSeparate) {
  MockProcess m({"--style", "draft11", "--limit", "1", "--window", "1"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  c.set_keep_alive(true);
  auto d = m.client();
  d.set_keep_alive(true);
  EXPECT_EQ(c.Get("/", id("a"))->status, 200);
  EXPECT_EQ(c.Get("/", id("a"))->status, 429);
  EXPECT_EQ(d.Get("/", id("b"))->status, 429);  // shared quota; b was not told before
  EXPECT_EQ(c.Get("/", id("a"))->status, 429);  // a retries at once
  EXPECT_EQ(d.Get("/")->status, 429);           // no id: the peer address
  c.stop();
  d.stop();
  const json s = m.stats();
  EXPECT_EQ(s["clients"]["a"]["requests"], 3);
  EXPECT_EQ(s["clients"]["a"]["premature"], 1);
  EXPECT_EQ(s["clients"]["b"]["requests"], 1);
  EXPECT_EQ(s["clients"]["b"]["premature"], 0);
  EXPECT_EQ(s["clients"]["127.0.0.1"]["requests"], 1);
  EXPECT_EQ(s["totals"]["requests"], 5);
  m.stop_cleanly();
}

TEST(MockServerCli, FailRateWithASeedIsReproducible) {
  const auto statuses = [](MockProcess& m, int n) {
    auto c = m.client();
    std::vector<int> out;
    for (int i = 0; i < n; ++i) {
      const auto r = c.Get("/");
      out.push_back(r ? r->status : -1);
    }
    return out;
  };
  std::vector<int> first;
  {
    MockProcess m({"--fail-rate", "0.5", "--seed", "7", "--limit", "1000", "--window", "1"});
    ASSERT_GT(m.port(), 0);
    first = statuses(m, 30);
    m.client().Post("/__reset", "", "text/plain");
    EXPECT_EQ(statuses(m, 30), first);
    EXPECT_EQ(m.stats()["totals"]["failed"], std::count(first.begin(), first.end(), 503));
    m.stop_cleanly();
  }
  EXPECT_GT(std::count(first.begin(), first.end(), 503), 0);
  EXPECT_GT(std::count(first.begin(), first.end(), 200), 0);
  MockProcess again({"--fail-rate", "0.5", "--seed", "7", "--limit", "1000", "--window", "1"});
  ASSERT_GT(again.port(), 0);
  EXPECT_EQ(statuses(again, 30), first);
  again.stop_cleanly();
}

TEST(MockServerCli, LatencyDelaysEveryApiAnswer) {
  MockProcess m({"--latency", "300"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  const auto start = std::chrono::steady_clock::now();
  const auto r = c.Get("/slow");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
  m.stop_cleanly();
}

// Sends `request` on a new loopback connection and reads until the server
// closes it (or `timeout`): what came back, and whether it closed in time.
struct RawExchange {
  std::string received;
  bool closed = false;
};
RawExchange raw_exchange(int port, const std::string& request, std::chrono::milliseconds timeout) {
  RawExchange r;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return r;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return r;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[4096];
    const ssize_t k = recv(fd, buf, sizeof buf, 0);
    if (k <= 0) {
      r.closed = true;
      break;
    }
    r.received.append(buf, static_cast<std::size_t>(k));
  }
  close(fd);
  return r;
}

TEST(MockServerCli, EchoAnswersTheRequestAsReceivedAndIsNotCounted) {
  MockProcess m({"--limit", "1", "--window", "600"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  const auto r = c.Post("/__echo?a=1&b=x%2Fy", {{"X-Foo", "bar"}, {"Authorization", "Bearer t"}}, "the body",
                        "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const json e = json::parse(r->body);
  EXPECT_EQ(e["method"], "POST");
  EXPECT_EQ(e["path"], "/__echo");
  EXPECT_EQ(e["query"], "a=1&b=x%2Fy");
  EXPECT_EQ(e["body"], "the body");
  std::map<std::string, std::string> fields;
  for (const auto& h : e["headers"]) {
    ASSERT_EQ(h.size(), 2u);
    fields[h[0].get<std::string>()] = h[1].get<std::string>();
  }
  EXPECT_EQ(fields["X-Foo"], "bar");
  EXPECT_EQ(fields["Authorization"], "Bearer t");
  EXPECT_EQ(fields["Content-Type"], "text/plain");
  EXPECT_FALSE(fields.count("REMOTE_ADDR"));  // httplib's own, not received
  for (const char* method : {"GET", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    const auto x = raw_exchange(m.port(),
                                std::string(method) +
                                    " /__echo HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                                10s);
    ASSERT_NE(x.received.find("\r\n\r\n"), std::string::npos) << method;
    EXPECT_EQ(x.received.rfind("HTTP/1.1 200", 0), 0u) << method << ": " << x.received;
    const json j = json::parse(x.received.substr(x.received.find("\r\n\r\n") + 4), nullptr, false);
    EXPECT_EQ(j.value("method", ""), method);
  }
  // Control paths leave the quota alone: the one API request allowed is still there.
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
  EXPECT_EQ(c.Get("/api")->status, 200);
  m.stop_cleanly();
}

TEST(MockServerCli, StreamSendsEachEventAsItsOwnChunkAfterTheGap) {
  MockProcess m({"--limit", "1", "--window", "600"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::string>> arrivals;
  const auto start = std::chrono::steady_clock::now();
  const auto r = c.Get("/__stream?chunks=4&gap_ms=150", [&](const char* data, std::size_t n) {
    arrivals.emplace_back(std::chrono::steady_clock::now(), std::string(data, n));
    return true;
  });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_EQ(r->get_header_value("Transfer-Encoding"), "chunked");
  std::string body;
  for (const auto& [t, d] : arrivals) body += d;
  EXPECT_EQ(body, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\n");
  ASSERT_GE(arrivals.size(), 2u);
  // Three gaps of 150 ms lie between the first event and the last: the
  // first is not held back until the end. (The first may reach the client
  // later after it was sent than the last does, so the span seen can fall a
  // little short of 450 ms: a body held back whole would show almost none.)
  EXPECT_EQ(arrivals.front().second.rfind("data: 0", 0), 0u);
  EXPECT_GE(arrivals.back().first - arrivals.front().first, 300ms);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 450ms);
  const auto empty = c.Get("/__stream?chunks=0");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->status, 200);
  EXPECT_EQ(empty->body, "");
  for (const char* bad : {"/__stream?chunks=1001", "/__stream?gap_ms=10001", "/__stream?chunks=abc",
                          "/__stream?chunks=-1", "/__stream?gap_ms=", "/__stream?chunks=99999999999999999999"}) {
    const auto b = c.Get(bad);
    ASSERT_TRUE(b) << bad;
    EXPECT_EQ(b->status, 400) << bad;
  }
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
  m.stop_cleanly();
}

TEST(MockServerCli, HangReadsTheRequestThenClosesWithoutAnAnswer) {
  MockProcess m({"--limit", "1", "--window", "600"});
  ASSERT_GT(m.port(), 0);
  const auto start = std::chrono::steady_clock::now();
  const auto x = raw_exchange(m.port(), "POST /__hang?ms=200 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc", 20s);
  EXPECT_TRUE(x.closed);
  EXPECT_EQ(x.received, "");  // not one byte of answer
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  // On a kept-alive connection after an answered request: the first is
  // answered, then the connection closes with nothing for the second.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(m.port()));
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string first = "GET /__echo HTTP/1.1\r\nHost: h\r\n\r\n";
  ASSERT_EQ(send(fd, first.data(), first.size(), MSG_NOSIGNAL), static_cast<ssize_t>(first.size()));
  std::string got;
  while (got.find("\n}\n") == std::string::npos) {  // the echo's JSON ends its body
    pollfd p{fd, POLLIN, 0};
    ASSERT_GT(poll(&p, 1, 10000), 0) << got;
    char buf[4096];
    const ssize_t k = recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(k, 0) << got;
    got.append(buf, static_cast<std::size_t>(k));
  }
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  const std::string second = "GET /__hang?ms=0 HTTP/1.1\r\nHost: h\r\n\r\n";
  ASSERT_EQ(send(fd, second.data(), second.size(), MSG_NOSIGNAL), static_cast<ssize_t>(second.size()));
  pollfd p{fd, POLLIN, 0};
  ASSERT_GT(poll(&p, 1, 10000), 0);
  char buf[64];
  EXPECT_EQ(recv(fd, buf, sizeof buf, 0), 0);  // closed, not one byte of answer
  close(fd);
  const auto bad = m.client().Get("/__hang?ms=600001");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
  m.stop_cleanly();
}

TEST(MockServerCli, StopEndsAHangAndAStreamAtOnce) {
  MockProcess m({});
  ASSERT_GT(m.port(), 0);
  RawExchange hang, stream;
  std::thread h([&] { hang = raw_exchange(m.port(), "GET /__hang?ms=600000 HTTP/1.1\r\nHost: h\r\n\r\n", 30s); });
  std::thread s([&] {
    stream = raw_exchange(m.port(), "GET /__stream?chunks=1000&gap_ms=10000 HTTP/1.1\r\nHost: h\r\n\r\n", 30s);
  });
  // Both held in the server before it is told to stop: the stream's first event came.
  for (int i = 0; i < 200 && m.stats().is_null(); ++i) std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(300ms);
  const auto start = std::chrono::steady_clock::now();
  m.stop_cleanly();
  h.join();
  s.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);  // not the hour the requests asked for
  EXPECT_TRUE(hang.closed);
  EXPECT_EQ(hang.received, "");
  EXPECT_TRUE(stream.closed);
  EXPECT_NE(stream.received.find("data: 0"), std::string::npos) << stream.received;
}

TEST(MockServerCli, ConcurrentClientsAreCountedExactly) {
  const auto record = std::filesystem::temp_directory_path() / ("abide_mock_record_" + std::to_string(getpid()));
  // One long window: every request falls in it whatever the machine's speed.
  MockProcess m({"--limit", "100", "--window", "600", "--record", record.string()});
  ASSERT_GT(m.port(), 0);
  constexpr int kThreads = 8, kEach = 40;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0}, limited{0}, other{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto c = m.client();
      c.set_keep_alive(t % 2 == 0);
      for (int i = 0; i < kEach; ++i) {
        const auto r = c.Get("/w", id("w" + std::to_string(t)));
        (r && r->status == 200 ? ok : r && r->status == 429 ? limited : other).fetch_add(1);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 100);
  EXPECT_EQ(limited.load(), kThreads * kEach - 100);
  EXPECT_EQ(other.load(), 0);
  const json s = m.stats();
  EXPECT_EQ(s["totals"]["requests"], kThreads * kEach);
  EXPECT_EQ(s["totals"]["accepted"], 100);
  int sum = 0;
  for (const auto& [name, cj] : s["clients"].items()) {
    EXPECT_EQ(cj["requests"], kEach) << name;
    sum += cj["accepted"].get<int>();
  }
  EXPECT_EQ(sum, 100);
  ASSERT_EQ(s["windows"].size(), 1u);
  EXPECT_EQ(s["windows"][0]["accepted"], 100);
  m.stop_cleanly();
  std::ifstream in(record);
  int lines = 0, accepted = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    const json r = json::parse(line);
    if (r["status"] == 200) ++accepted;
    // A limited answer's record states its permitted time P (after the answer); others have none.
    if (r["outcome"] == "limited") {
      ASSERT_TRUE(r.contains("permitted")) << line;
      EXPECT_GT(r["permitted"].get<double>(), r["t"].get<double>()) << line;
    } else {
      EXPECT_FALSE(r.contains("permitted")) << line;
    }
  }
  EXPECT_EQ(lines, kThreads * kEach);
  EXPECT_EQ(accepted, 100);
  std::filesystem::remove(record);
}

// The token styles over HTTP: the body reaches the limiter, bounded; a stream
// is sent as text/event-stream; the stats count the tokens.
TEST(MockServerCli, TokenStylesReadTheBodyOverHttp) {
  MockProcess m({"--style", "openai-tokens", "--limit", "100", "--window", "60", "--token-limit", "1000"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  const auto ok = c.Post("/v1/chat/completions", chat(400, {{"max_tokens", 50}}), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->get_header_value("x-ratelimit-remaining-tokens"), "900");
  EXPECT_EQ(json::parse(ok->body)["usage"]["prompt_tokens"], 100);
  const auto stream = c.Post("/v1/chat/completions", chat(4, {{"max_tokens", 8}, {"stream", true}}),
                             "application/json");
  ASSERT_TRUE(stream);
  EXPECT_EQ(stream->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_NE(stream->body.find("data: [DONE]"), std::string::npos);
  const auto bad = c.Post("/v1/chat/completions", "{\"messages\":", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["type"], "invalid_request_error");
  const auto large = c.Post("/v1/chat/completions", std::string(kMaxBodyBytes + 1, ' '), "application/json");
  ASSERT_TRUE(large);
  EXPECT_EQ(large->status, 413);
  const auto limited = c.Post("/v1/chat/completions", chat(4, {{"max_tokens", 950}}), "application/json");
  ASSERT_TRUE(limited);
  EXPECT_EQ(limited->status, 429);
  EXPECT_TRUE(limited->has_header("retry-after-ms"));
  EXPECT_TRUE(limited->has_header("retry-after"));
  const json s = m.stats();
  EXPECT_EQ(s["totals"]["requests"], 3);
  EXPECT_EQ(s["totals"]["invalid"], 1);  // the 413 never reached the limiter: the server refused it first
  EXPECT_EQ(s["totals"]["tokens"]["admitted"], 100 + 8);
  m.stop_cleanly();

  MockProcess a({"--style", "anthropic-tokens", "--limit", "10", "--window", "60", "--token-limit", "500",
                 "--output-token-limit", "300"});
  ASSERT_GT(a.port(), 0);
  auto ac = a.client();
  const auto msg = ac.Post("/v1/messages", message(0, 40, {{"max_tokens", 100}}), "application/json");
  ASSERT_TRUE(msg);
  EXPECT_EQ(msg->status, 200);
  EXPECT_EQ(msg->get_header_value("anthropic-ratelimit-input-tokens-remaining"), "490");
  EXPECT_EQ(msg->get_header_value("anthropic-ratelimit-output-tokens-remaining"), "200");
  EXPECT_EQ(json::parse(msg->body)["usage"]["input_tokens"], 10);
  const auto missing = ac.Post("/v1/messages", message(0, 40), "application/json");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 400);
  EXPECT_EQ(json::parse(missing->body)["error"]["type"], "invalid_request_error");
  a.stop_cleanly();
}

TEST(MockServerCli, RefusesAnythingButLoopback) {
  for (const char* addr : {"0.0.0.0", "192.168.1.1", "10.0.0.1", "::1", "::", "example.com"}) {
    const auto r = test::abide({"mock-server", "--bind", addr, "--port", "0"});
    EXPECT_EQ(r.exit_code, 2) << addr;
    EXPECT_NE(r.err.find("loopback"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("listening"), std::string::npos);
  }
}

TEST(MockServerCli, UsageErrors) {
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--style", "bogus"},
                                              {"--limited-status", "500"},
                                              {"--window", "0"},
                                              {"--limit", "0"},
                                              {"--fail-rate", "2"},
                                              {"--port", "70000"},
                                              {"--align", "noon"},
                                              {"--token-limit", "0"},
                                              {"--style", "anthropic-tokens", "--output-token-limit", "0"},
                                              {"--style", "draft11", "--token-limit", "5"},
                                              {"--style", "openai-tokens", "--output-token-limit", "5"},
                                              {"--style", "gemini", "--limited-status", "503"}}) {
    std::vector<std::string> args{"mock-server"};
    args.insert(args.end(), bad.begin(), bad.end());
    const auto r = test::abide(args);
    EXPECT_EQ(r.exit_code, 2) << bad[0] << " " << bad[1] << ": " << r.err;
  }
}

TEST(MockServerCli, StopsOnSigintAndAfterItsDuration) {
  {
    MockProcess m({});
    ASSERT_GT(m.port(), 0);
    const auto r = m.stop_cleanly(SIGINT);
    EXPECT_NE(r.err.find("stopped (SIGINT)"), std::string::npos) << r.err;
  }
  const auto stats_file = std::filesystem::temp_directory_path() / ("abide_mock_stats_" + std::to_string(getpid()));
  const auto r = test::abide(
      {"mock-server", "--port", "0", "--duration", "0.3", "--quiet", "--stats-file", stats_file.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("listening on 127.0.0.1:", 0), 0u) << r.out;
  EXPECT_EQ(r.err.find("abide"), std::string::npos) << r.err;  // --quiet
  std::ifstream in(stats_file);
  const json s = json::parse(in, nullptr, false);
  ASSERT_FALSE(s.is_discarded());
  EXPECT_EQ(s["totals"]["requests"], 0);
  std::filesystem::remove(stats_file);
}

TEST(MockServerCli, HelpDefinesPrematureAndTheStatsShape) {
  const auto r = test::abide({"mock-server", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Premature request"), std::string::npos);
  EXPECT_NE(r.out.find("strictly earlier"), std::string::npos);
  EXPECT_NE(r.out.find("/__stats"), std::string::npos);
}

#endif  // ABIDE_CLI_PATH

}  // namespace
}  // namespace abide::mock
