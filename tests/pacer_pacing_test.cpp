// The pacer's pacing of a known quota (smooth, burst, policies, full-refill
// resets), cancellations, and a local store's wait, on the manual clock.
#include "support/pacer_fixture.h"

namespace abide {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test::response;
using test::retry_after;
using test::window_obs;
using test::policy_obs;
using test::with;
using test::Fixture;
using test::SlowStore;

// ---- pacing -------------------------------------------------------------------------

TEST_F(Fixture, SmoothSpreadsTheRemainingQuotaOverTheWindow) {
  Pacer p = make(config());
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  p.record(k, with(response(clock), window_obs(10, seconds{10})));
  const auto times = drain(p, k, t0 + seconds{10});
  ASSERT_EQ(times.size(), 10u) << "never more than the remaining quota before the reset";
  EXPECT_EQ(times[0], Duration::zero());
  for (std::size_t i = 1; i < times.size(); ++i) {
    const Duration gap = times[i] - times[i - 1];
    EXPECT_GE(gap, milliseconds{900}) << i;
    EXPECT_LE(gap, milliseconds{1100}) << i;
  }
  // The quota lasts the window, with the margin to spare.
  EXPECT_GE(times.back(), seconds{8});
  EXPECT_LT(times.back(), seconds{10});
  // After the reset, with no fresh information: a probe.
  clock.advance(t0 + seconds{10} - clock.mono_now());
  const AcquireResult r = peek(p, k);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.probe);
}

// A reset stated in whole seconds (GitHub's Unix second, the drafts' delta
// seconds) can be up to a second late: the quota is spent by the earliest end,
// and nothing more goes out before the stated reset.
TEST_F(Fixture, SmoothSpendsACoarseResetByItsEarliestEnd) {
  Pacer p = make(config());
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  QuotaObservation o = window_obs(10, seconds{10});
  o.reset_resolution = seconds{1};
  p.record(k, with(response(clock), o));
  const auto times = drain(p, k, t0 + seconds{10});
  ASSERT_EQ(times.size(), 10u);
  EXPECT_GE(times.back(), seconds{7});
  EXPECT_LT(times.back(), seconds{9}) << "spent by the earliest end, a second before the stated reset";
  clock.advance(t0 + seconds{10} - milliseconds{1} - clock.mono_now());
  EXPECT_FALSE(peek(p, k).ok()) << "nothing before the stated reset";
}

TEST_F(Fixture, BurstSpendsTheRestThenWaitsForTheReset) {
  PacerConfig c = config();
  c.rules.pacing = Pacing::kBurst;
  Pacer p = make(c);
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  p.record(k, with(response(clock), window_obs(5, seconds{10})));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(peek(p, k).ok()) << i;
  const AcquireResult r = peek(p, k);
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(r.not_before, t0 + seconds{10});
}

TEST_F(Fixture, AStaleResponseNeverRaisesTheRemainingCount) {
  PacerConfig c = config();
  c.rules.pacing = Pacing::kBurst;
  Pacer p = make(c);
  const auto k = p.key("k");
  const Signals early = with(response(clock), window_obs(9, seconds{10}));
  p.record(k, with(response(clock), window_obs(3, seconds{10})));
  p.record(k, early);  // arrives late, says more is left
  int permits = 0;
  while (peek(p, k).ok() && permits < 100) ++permits;
  EXPECT_EQ(permits, 3);
}

TEST_F(Fixture, PolicyAloneRunsAGcra) {
  Pacer p = make(config());
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  p.record(k, with(response(clock), policy_obs(10, seconds{1})));
  const auto times = drain(p, k, t0 + seconds{5});
  ASSERT_GE(times.size(), 45u);
  for (std::size_t i = 1; i < times.size(); ++i) {
    EXPECT_EQ(times[i] - times[i - 1], milliseconds{105});  // w/q stretched by the 5% margin
  }
}

TEST_F(Fixture, TheMostRestrictivePolicyWins) {
  Pacer p = make(config());
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  Signals s = response(clock);
  s.quota.push_back(policy_obs(100, seconds{1}, "burst"));
  s.quota.push_back(policy_obs(600, seconds{60}, "minute"));  // 10 per second
  p.record(k, s);
  auto times = drain(p, k, t0 + seconds{3});
  ASSERT_GE(times.size(), 20u);
  EXPECT_EQ(times[1] - times[0], milliseconds{105});
  // The drained sends were answered (none is in flight to count against a window).
  for (std::size_t i = 0; i < times.size(); ++i) p.record(k, response(clock));
  // A known window that is tighter still takes over.
  Signals w = response(clock);
  w.quota.push_back(window_obs(2, seconds{10}, "daily"));
  p.record(k, w);
  const MonoTime t1 = clock.mono_now();
  times = drain(p, k, t1 + seconds{10});
  EXPECT_EQ(times.size(), 2u);
}

TEST_F(Fixture, OtherQuotaUnitsAreNotCounted) {
  Pacer p = make(config());
  const auto k = p.key("k");
  QuotaObservation o = policy_obs(1, seconds{60});
  o.unit = "content-bytes";
  p.record(k, with(response(clock), o));
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(peek(p, k).ok());
}

// ---- full-refill resets (issue 13 items 5 and 6) --------------------------------------

QuotaObservation full_refill_obs(std::string unit, std::int64_t limit, std::int64_t remaining, Duration reset) {
  QuotaObservation o;
  o.policy = unit;
  o.unit = std::move(unit);
  o.limit = limit;
  o.remaining = remaining;
  o.reset = reset;
  o.source = QuotaSource::kVendor;
  o.profile = "openai";
  o.reset_is_full_refill = true;
  return o;
}

TEST_F(Fixture, OpenAIFullRefillTokensHoldTheKeyOnlyForTheServersRetryDelay) {
  // x-ratelimit-remaining-tokens: 0, x-ratelimit-reset-tokens: 6m0s, retry-after-ms: 1500.
  Pacer p = make(config());
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  Signals s = retry_after(clock, milliseconds{1500});
  s.retry_after->source = "retry-after-ms";
  s.quota.push_back(full_refill_obs("requests", 500, 499, milliseconds{120}));
  s.quota.push_back(full_refill_obs("tokens", 30000, 0, seconds{360}));
  p.record(k, s);
  const AcquireResult r = peek(p, k);
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(r.not_before, t0 + milliseconds{1500});  // not 360 s
  EXPECT_EQ(r.not_before, s.received_mono + *permitted_wait(s).wait);
  clock.advance(milliseconds{1500});
  EXPECT_TRUE(peek(p, k).ok());
}

TEST_F(Fixture, AnExhaustedFullRefillRequestsQuotaHoldsTheKeyForOneRequestsRefill) {
  // 3 requests per 20 s, none left, full again in 20 s, no retry delay: one request is back in 20/3 s.
  Pacer p = make(config());
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  const Signals s = with(response(clock, 429), full_refill_obs("requests", 3, 0, seconds{20}));
  p.record(k, s);
  const AcquireResult r = peek(p, k);
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(r.not_before, t0 + std::chrono::microseconds{6666667});  // 20/3 s, rounded up to the kernel's microsecond
  clock.advance(r.not_before - clock.mono_now());
  const AcquireResult probe = peek(p, k);
  EXPECT_TRUE(probe.ok());
  EXPECT_TRUE(probe.probe);  // one request learns the quota afresh
}

TEST_F(Fixture, AFullRefillQuotaWithRoomLeftIsSpentAsItRefillsNotHeldForTheRefill) {
  // 10 of 100 requests left, full again in 60 s: the 90 missing come back at
  // 1.5 per second, so the 10 are spread over the 6.7 s in which 10 more come back.
  Pacer p = make(config());
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  p.record(k, with(response(clock), full_refill_obs("requests", 100, 10, seconds{60})));
  const MonoTime refilled = t0 + std::chrono::microseconds{6666667};  // 20/3 s, rounded up to the kernel's microsecond
  const auto times = drain(p, k, refilled);
  ASSERT_EQ(times.size(), 10u);  // never more than the remaining before the window ends
  for (std::size_t i = 1; i < times.size(); ++i) {
    EXPECT_GE(times[i] - times[i - 1], milliseconds{600}) << i;
    EXPECT_LE(times[i] - times[i - 1], milliseconds{750}) << i;
  }
  // Then one request learns the quota afresh: nothing waits for the 60 s refill.
  clock.advance(refilled - clock.mono_now());
  const AcquireResult probe = peek(p, k);
  EXPECT_TRUE(probe.ok());
  EXPECT_TRUE(probe.probe);
}

TEST_F(Fixture, AFullRefillQuotaWithOneLeftIsNotSpreadOverTheWholeRefill) {
  // OpenAI-style: 1 of 500 requests left, full in 59.88 s: one more is back every 120 ms.
  Pacer p = make(config());
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  p.record(k, with(response(clock), full_refill_obs("requests", 500, 1, milliseconds{59880})));
  EXPECT_TRUE(peek(p, k).ok());
  const AcquireResult next = peek(p, k);
  EXPECT_EQ(next.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(next.not_before, t0 + milliseconds{120});  // the probe, when one more is back
  // A quota that is not a full refill spreads its one over its whole window.
  Pacer plain = make(config());
  QuotaObservation o = full_refill_obs("requests", 500, 1, milliseconds{59880});
  o.reset_is_full_refill = false;
  plain.record("k", with(response(clock), o));
  EXPECT_TRUE(plain.acquire("k", clock.mono_now()).ok());
  EXPECT_EQ(plain.acquire("k", clock.mono_now()).not_before, t0 + milliseconds{59880});
}

TEST_F(Fixture, AnExhaustedQuotaThatIsNotAFullRefillStillHoldsTheKeyUntilItsReset) {
  Pacer p = make(config());
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  Signals s = retry_after(clock, milliseconds{1500});
  QuotaObservation o = full_refill_obs("requests", 500, 0, seconds{360});
  o.reset_is_full_refill = false;
  s.quota.push_back(o);
  p.record(k, s);
  EXPECT_EQ(peek(p, k).not_before, t0 + seconds{360});
}

TEST_F(Fixture, LowConfidenceQuotaStartsACooldownOnlyWhenEnabledAsInThePlanner) {
  const MonoTime t0 = clock.mono_now();
  QuotaObservation o;
  o.unit = "tokens";  // a send that needs no tokens: only the cooldown can hold it
  o.remaining = 0;
  o.reset = seconds{30};
  o.confidence = Confidence::kLow;
  const Signals s = with(response(clock, 429), o);
  Pacer off = make(config());
  off.record("k", s);
  EXPECT_TRUE(off.acquire("k", clock.mono_now()).ok());
  PacerConfig c = config();
  c.use_low_confidence_quota = true;
  Pacer on = make(c);
  on.record("k", s);
  EXPECT_EQ(on.acquire("k", clock.mono_now()).not_before, t0 + seconds{30});
}

TEST_F(Fixture, CancellationInterruptsAWait) {
  Pacer p = make(config());
  const auto k = p.key("k");
  p.record(k, retry_after(clock, seconds{3600}));
  std::stop_source stop;
  auto f = std::async(std::launch::async, [&] { return p.acquire(k, std::nullopt, stop.get_token()); });
  clock.wait_for_sleepers(1);
  stop.request_stop();
  EXPECT_EQ(f.get().status, AcquireStatus::kCancelled);
  // Already cancelled: no wait at all.
  EXPECT_EQ(p.acquire(k, std::nullopt, stop.get_token()).status, AcquireStatus::kCancelled);
}

TEST_F(Fixture, CancellingQueuedWorkersKeepsTheQueueMoving) {
  Pacer p = make(config());
  const auto k = p.key("k");
  p.record(k, retry_after(clock, seconds{10}));
  std::vector<std::stop_source> stops(4);
  std::vector<std::future<AcquireResult>> f;
  for (std::size_t i = 0; i < 4; ++i) {
    f.push_back(std::async(std::launch::async, [&, i] { return p.acquire(k, std::nullopt, stops[i].get_token()); }));
    clock.wait_for_sleepers(i + 1);
  }
  stops[1].request_stop();  // the head of the probe queue
  stops[2].request_stop();
  EXPECT_EQ(f[1].get().status, AcquireStatus::kCancelled);
  EXPECT_EQ(f[2].get().status, AcquireStatus::kCancelled);
  clock.advance(seconds{10});
  EXPECT_TRUE(f[0].get().probe);
  p.record(k, response(clock));
  EXPECT_TRUE(f[3].get().ok());
}

TEST_F(Fixture, ACancelledProbeIsHandedOn) {
  Pacer p = make(config());
  const auto k = p.key("k");
  p.record(k, retry_after(clock, seconds{10}));
  std::stop_source stop;
  auto probe = std::async(std::launch::async, [&] { return p.acquire(k, std::nullopt, stop.get_token()); });
  clock.wait_for_sleepers(1);
  auto next = std::async(std::launch::async, [&] { return p.acquire(k); });
  clock.wait_for_sleepers(2);
  stop.request_stop();
  EXPECT_EQ(probe.get().status, AcquireStatus::kCancelled);
  clock.advance(seconds{10});
  const AcquireResult r = next.get();
  EXPECT_TRUE(r.probe);
}

TEST_F(Fixture, ALocalStoresWaitCountsFromTheInstantItWasAsked) {
  // Time that passes while the store answers must not push the slot later: a
  // waiter woken at the slot's time would otherwise sleep past it, for good
  // under a test clock that moves no further.
  for (const bool shared : {false, true}) {
    ManualClock c;
    Pacer p(config(), std::make_shared<SlowStore>(c, seconds{1}, shared), c.monotonic(), c.wall());
    const auto k = p.key("k");
    const MonoTime t0 = c.mono_now();
    Signals s = retry_after(c, seconds{10});
    p.record(k, s);
    const AcquireResult r = p.acquire(k, c.mono_now());
    EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded) << shared;
    // A shared store's clock is its own: its wait counts from its answer, never early.
    EXPECT_EQ(r.not_before, t0 + (shared ? seconds{11} : seconds{10})) << shared;
  }
}

}  // namespace
}  // namespace abide
