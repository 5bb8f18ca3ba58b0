// abide mock-server's limiter with a manual clock: every style's fields,
// exact values and exact premature boundaries, failures, stats and records.
#include "support/mock_server_fixture.h"

namespace abide::mock {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using fixture::kT0;
using fixture::header;
using fixture::header_names;
using fixture::options;
using fixture::get;

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

}  // namespace
}  // namespace abide::mock
