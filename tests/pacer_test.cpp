// The pacer's rules, each driven by the manual clock (no test sleeps).
#include "abide/pacer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "abide/testing/manual_clock.h"

namespace abide {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
// The manual clock counts sleepers exactly (a woken one stops counting at once).
using Clock = ManualClock;

Signals response(const Clock& clock, int status = 200) {
  Signals s;
  s.status = status;
  s.received_wall = clock.wall_now();
  s.received_mono = clock.mono_now();
  return s;
}

Signals retry_after(const Clock& clock, Duration wait) {
  Signals s = response(clock, 429);
  s.limited = true;
  s.retry_after = RetryHint{RetryHint::Kind::kDelay, wait, std::nullopt, "retry-after"};
  return s;
}

QuotaObservation window_obs(std::int64_t remaining, Duration reset, std::string policy = "") {
  QuotaObservation o;
  o.policy = std::move(policy);
  o.remaining = remaining;
  o.reset = reset;
  return o;
}

QuotaObservation policy_obs(std::int64_t limit, Duration window, std::string policy = "") {
  QuotaObservation o;
  o.policy = std::move(policy);
  o.limit = limit;
  o.window = window;
  return o;
}

Signals with(Signals s, QuotaObservation o) {
  s.quota.push_back(std::move(o));
  return s;
}

// Advances the clock by `step` whenever every worker still waiting sleeps,
// until all of f[from..] are ready.
void drive_until_ready(Clock& clock, std::vector<std::future<AcquireResult>>& f, std::size_t from, Duration step) {
  for (;;) {
    std::size_t pending = 0;
    for (std::size_t i = from; i < f.size(); ++i) {
      if (f[i].wait_for(std::chrono::seconds{0}) != std::future_status::ready) ++pending;
    }
    if (pending == 0) return;
    if (clock.sleepers() >= pending) {
      clock.advance(step);
    } else {
      std::this_thread::yield();
    }
  }
}

struct Fixture : ::testing::Test {
  Clock clock;
  PacerConfig config() {
    PacerConfig c;
    c.seed = 42;
    return c;
  }
  Pacer make(PacerConfig c) { return Pacer(std::move(c), nullptr, clock.monotonic(), clock.wall()); }

  // Acquires without waiting: a permit now, or the time one would be permitted.
  AcquireResult peek(Pacer& p, const Pacer::Key& k) { return p.acquire(k, clock.mono_now()); }

  // Acquires sequentially, jumping the clock to each permitted time, and
  // returns the permit times (offsets from `t0`) until `until`.
  std::vector<Duration> drain(Pacer& p, const Pacer::Key& k, MonoTime until, std::size_t max = 1000) {
    std::vector<Duration> times;
    const MonoTime t0 = clock.mono_now();
    while (times.size() < max && clock.mono_now() < until) {
      const AcquireResult r = peek(p, k);
      if (r.ok()) {
        times.push_back(clock.mono_now() - t0);
        continue;
      }
      if (r.status != AcquireStatus::kDeadlineExceeded || r.not_before <= clock.mono_now()) break;
      if (r.not_before >= until) break;
      clock.advance(r.not_before - clock.mono_now());
    }
    return times;
  }
};

// ---- keys ---------------------------------------------------------------------------

TEST(PacerKey, OriginAndScope) {
  EXPECT_EQ(pacer_key("https://api.github.com"), "https://api.github.com");
  EXPECT_EQ(pacer_key("https://api.github.com", "search"), "https://api.github.com|search");
  QuotaObservation o;
  o.policy = "burst";
  o.partition_key = "user-7";
  EXPECT_EQ(quota_scope(o), "burst;pk=user-7");
  EXPECT_EQ(quota_scope(QuotaObservation{}), "");
}

TEST(PacerKey, LongKeysAreBoundedAndDistinct) {
  const std::string a(5000, 'a');
  std::string b = a;
  b.back() = 'b';
  const std::string ka = pacer_key("https://x", a);
  const std::string kb = pacer_key("https://x", b);
  EXPECT_LE(ka.size(), 256u);
  EXPECT_NE(ka, kb);
  EXPECT_EQ(ka, pacer_key("https://x", a));
}

TEST(PacerKey, StatusNames) {
  EXPECT_EQ(to_string(AcquireStatus::kPermit), "permit");
  EXPECT_EQ(to_string(AcquireStatus::kDeadlineExceeded), "deadline_exceeded");
  EXPECT_EQ(to_string(AcquireStatus::kDeferred), "deferred");
}

// ---- basics -------------------------------------------------------------------------

TEST_F(Fixture, PermitsAtOnceWithNothingKnown) {
  Pacer p = make(config());
  const auto k = p.key("k");
  for (int i = 0; i < 100; ++i) {
    const AcquireResult r = peek(p, k);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r.probe);
    EXPECT_EQ(r.not_before, clock.mono_now());
  }
}

TEST_F(Fixture, KeysAreIndependent) {
  Pacer p = make(config());
  p.record("a", retry_after(clock, seconds{30}));
  EXPECT_FALSE(p.acquire("a", clock.mono_now()).ok());
  EXPECT_TRUE(p.acquire("b", clock.mono_now()).ok());
}

// ---- cooldown -----------------------------------------------------------------------

TEST_F(Fixture, CooldownGivesDeadlineExceededWithEarliestTime) {
  Pacer p = make(config());
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  p.record(k, retry_after(clock, seconds{30}));
  const AcquireResult r = p.acquire(k, t0 + seconds{10});
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(r.not_before, t0 + seconds{30});
  ASSERT_TRUE(r.not_before_wall.has_value());
  EXPECT_EQ(*r.not_before_wall, clock.wall_now() + seconds{30});
}

TEST_F(Fixture, CooldownBeyondMaxWaitIsDeferred) {
  PacerConfig c = config();
  c.max_wait = seconds{5};
  Pacer p = make(c);
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  p.record(k, retry_after(clock, seconds{30}));
  AcquireResult r = p.acquire(k);
  EXPECT_EQ(r.status, AcquireStatus::kDeferred);
  EXPECT_EQ(r.not_before, t0 + seconds{30});
  // A deadline shorter than max_wait decides instead.
  r = p.acquire(k, t0 + seconds{1});
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
  // A deadline already past never permits a send.
  clock.advance(seconds{31});
  r = p.acquire(k, clock.mono_now() - seconds{1});
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
}

TEST_F(Fixture, CooldownCountsFromReceipt) {
  Pacer p = make(config());
  const auto k = p.key("k");
  Signals s = retry_after(clock, seconds{30});
  clock.advance(seconds{10});  // recorded 10 s after it was received
  p.record(k, s);
  const AcquireResult r = peek(p, k);
  EXPECT_EQ(r.not_before, s.received_mono + seconds{30});
  // An unset receive time counts as now, never as long ago.
  Signals unset = retry_after(clock, seconds{30});
  unset.received_mono = MonoTime{};
  p.record(k, unset);
  EXPECT_EQ(peek(p, k).not_before, clock.mono_now() + seconds{30});
}

TEST_F(Fixture, ExhaustedQuotaIsACooldown) {
  Pacer p = make(config());
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  p.record(k, with(response(clock), window_obs(0, seconds{12})));
  const AcquireResult r = peek(p, k);
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(r.not_before, t0 + seconds{12});
}

TEST_F(Fixture, WaitingAcquireGetsTheProbeWhenTheCooldownEnds) {
  Pacer p = make(config());
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  p.record(k, retry_after(clock, seconds{30}));
  auto f = std::async(std::launch::async, [&] { return p.acquire(k); });
  clock.wait_for_sleepers(1);
  clock.advance(seconds{29});
  clock.wait_for_sleepers(1);
  EXPECT_EQ(f.wait_for(seconds{0}), std::future_status::timeout);
  clock.advance(seconds{1});
  const AcquireResult r = f.get();
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.probe);
  EXPECT_EQ(r.not_before, t0 + seconds{30});
  EXPECT_EQ(r.waited, seconds{30});
}

TEST_F(Fixture, CooldownReachesEveryWaitingWorker) {
  Pacer p = make(config());
  const auto k = p.key("k");
  // One request per second: workers hold reservations one second apart.
  p.record(k, with(response(clock), policy_obs(1, seconds{1})));
  constexpr int kWorkers = 8;
  std::vector<std::future<AcquireResult>> f;
  // The first sends at once; it must be done before the others queue, or one of
  // them could take its slot and leave it asleep with nobody to wake it.
  f.push_back(std::async(std::launch::async, [&] { return p.acquire(k); }));
  ASSERT_TRUE(f[0].get().ok());
  for (int i = 1; i < kWorkers; ++i) {
    f.push_back(std::async(std::launch::async, [&] { return p.acquire(k); }));
    clock.wait_for_sleepers(static_cast<std::size_t>(i));
  }
  const MonoTime t0 = clock.mono_now();
  p.record(k, retry_after(clock, seconds{60}));
  for (int s = 1; s < 60; ++s) {
    clock.advance(seconds{1});
    clock.wait_for_sleepers(kWorkers - 1);
    for (int i = 1; i < kWorkers; ++i) {
      ASSERT_EQ(f[static_cast<std::size_t>(i)].wait_for(seconds{0}), std::future_status::timeout)
          << "worker " << i << " sent during the cooldown, at " << s << " s";
    }
  }
  clock.advance(seconds{1});
  // The earliest arrival probes; the others wait for its answer.
  const AcquireResult probe = f[1].get();
  EXPECT_TRUE(probe.ok());
  EXPECT_TRUE(probe.probe);
  EXPECT_EQ(probe.not_before, t0 + seconds{60});
  clock.wait_for_sleepers(kWorkers - 2);
  clock.advance(seconds{1});
  const MonoTime answered = clock.mono_now();
  p.record(k, response(clock));
  drive_until_ready(clock, f, 2, milliseconds{100});
  for (std::size_t i = 2; i < kWorkers; ++i) {
    const AcquireResult r = f[i].get();
    EXPECT_TRUE(r.ok());
    EXPECT_FALSE(r.probe);
    EXPECT_GE(r.not_before, answered) << "worker " << i << " did not wait for the probe's answer";
  }
}

TEST_F(Fixture, ReleasedWorkersAreSpreadInArrivalOrder) {
  PacerConfig c = config();
  c.rules.probe_after_cooldown = false;
  c.rules.cooldown_spread = milliseconds{20};
  Pacer p = make(c);
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  p.record(k, retry_after(clock, seconds{10}));
  constexpr std::size_t kWorkers = 16;
  std::vector<std::future<AcquireResult>> f;
  for (std::size_t i = 0; i < kWorkers; ++i) {
    f.push_back(std::async(std::launch::async, [&] { return p.acquire(k); }));
    clock.wait_for_sleepers(i + 1);
  }
  clock.advance(seconds{11});
  MonoTime previous = t0 + seconds{10} - milliseconds{1};
  for (std::size_t i = 0; i < kWorkers; ++i) {
    const AcquireResult r = f[i].get();
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r.probe);
    EXPECT_GE(r.not_before, t0 + seconds{10});
    if (i > 0) {
      // Never the same millisecond, never more than the spread apart.
      EXPECT_GE(r.not_before - previous, milliseconds{5}) << i;
      EXPECT_LE(r.not_before - previous, milliseconds{20}) << i;
    }
    previous = r.not_before;
  }
}

TEST_F(Fixture, ProbeAnswerReleasesWaitersInArrivalOrderWithSpread) {
  Pacer p = make(config());
  const auto k = p.key("k");
  p.record(k, retry_after(clock, seconds{10}));
  constexpr std::size_t kWorkers = 12;
  std::vector<std::future<AcquireResult>> f;
  for (std::size_t i = 0; i < kWorkers; ++i) {
    f.push_back(std::async(std::launch::async, [&] { return p.acquire(k); }));
    clock.wait_for_sleepers(i + 1);
  }
  clock.advance(seconds{10});
  const AcquireResult probe = f[0].get();
  ASSERT_TRUE(probe.ok());
  EXPECT_TRUE(probe.probe);
  clock.wait_for_sleepers(kWorkers - 1);
  clock.advance(seconds{1});  // the probe's answer takes a second
  clock.wait_for_sleepers(kWorkers - 1);
  for (std::size_t i = 1; i < kWorkers; ++i) {
    EXPECT_EQ(f[i].wait_for(seconds{0}), std::future_status::timeout);
  }
  const MonoTime answered = clock.mono_now();
  p.record(k, response(clock));
  drive_until_ready(clock, f, 1, milliseconds{1});
  MonoTime previous = answered - milliseconds{1};
  for (std::size_t i = 1; i < kWorkers; ++i) {
    const AcquireResult r = f[i].get();
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r.probe);
    EXPECT_GE(r.not_before, answered);
    EXPECT_GT(r.not_before, previous) << "worker " << i << " overtook an earlier arrival";
    if (i > 1) {
      EXPECT_GE(r.not_before - previous, milliseconds{5});
    }
    previous = r.not_before;
  }
}

// ---- probe after a window -----------------------------------------------------------

struct ProbeFixture : Fixture {
  Pacer p = make([] {
    PacerConfig c;
    c.rules.pacing = Pacing::kBurst;
    c.rules.probe_timeout = seconds{5};
    return c;
  }());
  Pacer::Key k = p.key("k");
  MonoTime t0 = clock.mono_now();

  // Spends a window of two, then three workers queue: the first is the probe.
  std::vector<std::future<AcquireResult>> queue_three() {
    p.record(k, with(response(clock), window_obs(2, seconds{10})));
    EXPECT_TRUE(peek(p, k).ok());
    EXPECT_TRUE(peek(p, k).ok());
    std::vector<std::future<AcquireResult>> f;
    for (std::size_t i = 0; i < 3; ++i) {
      f.push_back(std::async(std::launch::async, [this] { return p.acquire(k); }));
      clock.wait_for_sleepers(i + 1);
    }
    return f;
  }
};

TEST_F(ProbeFixture, OneProbeGoesFirstWhenAWindowEnds) {
  auto f = queue_three();
  clock.advance(seconds{10});
  const AcquireResult probe = f[0].get();
  ASSERT_TRUE(probe.ok());
  EXPECT_TRUE(probe.probe);
  EXPECT_EQ(probe.not_before, t0 + seconds{10});
  clock.wait_for_sleepers(2);
  clock.advance(seconds{2});
  clock.wait_for_sleepers(2);
  EXPECT_EQ(f[1].wait_for(seconds{0}), std::future_status::timeout);
  EXPECT_EQ(f[2].wait_for(seconds{0}), std::future_status::timeout);
  // The answer: a fresh window of five.
  p.record(k, with(response(clock), window_obs(5, seconds{10})));
  drive_until_ready(clock, f, 1, milliseconds{1});
  const AcquireResult a = f[1].get();
  const AcquireResult b = f[2].get();
  EXPECT_TRUE(a.ok());
  EXPECT_TRUE(b.ok());
  EXPECT_FALSE(a.probe);
  EXPECT_LE(a.not_before, b.not_before);
}

TEST_F(ProbeFixture, ALostProbeTimesOut) {
  auto f = queue_three();
  clock.advance(seconds{10});
  ASSERT_TRUE(f[0].get().probe);
  clock.wait_for_sleepers(2);
  clock.advance(seconds{4});
  clock.wait_for_sleepers(2);
  EXPECT_EQ(f[1].wait_for(seconds{0}), std::future_status::timeout);
  // No answer within the probe timeout: the next worker probes.
  clock.advance(seconds{1});
  const AcquireResult second = f[1].get();
  EXPECT_TRUE(second.ok());
  EXPECT_TRUE(second.probe);
  EXPECT_EQ(second.not_before, t0 + seconds{15});
  clock.wait_for_sleepers(1);
  EXPECT_EQ(f[2].wait_for(seconds{0}), std::future_status::timeout);
  p.abandon_probe(k);  // the second probe failed at the transport: the next one probes at once
  const AcquireResult third = f[2].get();
  EXPECT_TRUE(third.probe);
  EXPECT_EQ(third.not_before, t0 + seconds{15});
}

TEST_F(ProbeFixture, WaitingForAProbeRespectsTheDeadline) {
  auto f = queue_three();
  clock.advance(seconds{10});
  ASSERT_TRUE(f[0].get().probe);
  // Queued behind the waiters: the deadline (now) has come, so it reports.
  const AcquireResult r = p.acquire(k, clock.mono_now());
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(r.not_before, t0 + seconds{15});  // at the latest when the probe times out
  p.record(k, response(clock));
  drive_until_ready(clock, f, 1, milliseconds{1});
  EXPECT_TRUE(f[1].get().ok());
  EXPECT_TRUE(f[2].get().ok());
}

TEST_F(ProbeFixture, ALateResponseFromBeforeTheWindowEndIsNoAnswer) {
  auto f = queue_three();
  Signals old = response(clock);  // received before the window ended
  old.quota.push_back(window_obs(1, seconds{10}));
  clock.advance(seconds{10});
  ASSERT_TRUE(f[0].get().probe);
  p.record(k, old);
  clock.wait_for_sleepers(2);
  EXPECT_EQ(f[1].wait_for(seconds{0}), std::future_status::timeout);
  p.record(k, response(clock));
  drive_until_ready(clock, f, 1, milliseconds{1});
  EXPECT_TRUE(f[1].get().ok());
  EXPECT_TRUE(f[2].get().ok());
}

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

// A store whose answer takes `latency` of the test's clock to come back.
class SlowStore final : public QuotaStore {
 public:
  SlowStore(ManualClock& clock, Duration latency, bool shared) : clock_(clock), latency_(latency), shared_(shared) {}
  std::shared_ptr<Handle> open(std::string_view key) override {
    return std::make_shared<Slow>(inner_.open(key), clock_, latency_);
  }
  bool shared() const noexcept override { return shared_; }

 private:
  class Slow final : public Handle {
   public:
    Slow(std::shared_ptr<Handle> inner, ManualClock& clock, Duration latency)
        : inner_(std::move(inner)), clock_(clock), latency_(latency) {}
    StoreGrant acquire(const StoreAcquire& request, const PacingRules& rules) override {
      const StoreGrant g = inner_->acquire(request, rules);
      clock_.advance(latency_);
      return g;
    }
    RecordOutcome record(const StoreRecord& record, const PacingRules& rules) override {
      return inner_->record(record, rules);
    }
    bool still_valid(std::uint64_t epoch, MonoTime now) override { return inner_->still_valid(epoch, now); }
    void abandon_probe(MonoTime now) override { inner_->abandon_probe(now); }
    std::optional<LearnedPolicy> learned(MonoTime now) override { return inner_->learned(now); }

   private:
    std::shared_ptr<Handle> inner_;
    ManualClock& clock_;
    Duration latency_;
  };

  ManualClock& clock_;
  Duration latency_;
  bool shared_;
  MemoryStore inner_;
};

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

// ---- the floor: what this process was told outlives a store that forgets ------------------

// A store that can lose everything at once, as a shared store does when it is
// flushed, restarted empty or failed over; and that can be down.
class ForgetfulStore final : public QuotaStore {
 public:
  explicit ForgetfulStore(bool shared) : shared_(shared) {}

  void forget() {
    std::lock_guard lock(mu_);
    inner_ = std::make_shared<MemoryStore>();
  }
  void set_down(bool down) { down_ = down; }
  int records() const { return records_.load(); }

  std::shared_ptr<Handle> open(std::string_view key) override {
    return std::make_shared<Named>(*this, std::string(key));
  }
  bool shared() const noexcept override { return shared_; }

 private:
  // A key by its name, looked up in whatever the store holds now.
  class Named final : public Handle {
   public:
    Named(ForgetfulStore& store, std::string name) : store_(store), name_(std::move(name)) {}
    StoreGrant acquire(const StoreAcquire& request, const PacingRules& rules) override {
      if (store_.down_) return {StoreGrant::Kind::kUnavailable, milliseconds{100}, 0, WaitCause::kStore};
      return resolve()->acquire(request, rules);
    }
    RecordOutcome record(const StoreRecord& record, const PacingRules& rules) override {
      ++store_.records_;
      if (store_.down_) return {};
      return resolve()->record(record, rules);
    }
    bool still_valid(std::uint64_t epoch, MonoTime now) override {
      return !store_.down_ && resolve()->still_valid(epoch, now);
    }
    void abandon_probe(MonoTime now) override { resolve()->abandon_probe(now); }
    std::optional<LearnedPolicy> learned(MonoTime now) override { return resolve()->learned(now); }

   private:
    std::shared_ptr<Handle> resolve() {
      std::shared_ptr<MemoryStore> inner;
      {
        std::lock_guard lock(store_.mu_);
        inner = store_.inner_;
      }
      return inner->open(name_);
    }
    ForgetfulStore& store_;
    std::string name_;
  };

  bool shared_;
  std::atomic<bool> down_{false};
  std::atomic<int> records_{0};
  std::mutex mu_;
  std::shared_ptr<MemoryStore> inner_ = std::make_shared<MemoryStore>();
};

TEST_F(Fixture, ARetryAfterOutlivesAStoreThatForgetsAndIsWrittenBack) {
  for (const bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "shared" : "local");
    auto store = std::make_shared<ForgetfulStore>(shared);
    Pacer p(config(), store, clock.monotonic(), clock.wall());
    const auto k = p.key("api");
    const MonoTime t0 = clock.mono_now();
    p.record(k, retry_after(clock, seconds{30}));
    clock.advance(seconds{4});
    store->forget();
    const AcquireResult r = peek(p, k);
    ASSERT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
    EXPECT_EQ(r.not_before, t0 + seconds{30});
    EXPECT_EQ(r.cause, WaitCause::kCooldown);
    // Written back: another process on the store learns it again.
    Pacer other(config(), store, clock.monotonic(), clock.wall());
    const AcquireResult o = other.acquire(other.key("api"), clock.mono_now());
    ASSERT_EQ(o.status, AcquireStatus::kDeadlineExceeded);
    EXPECT_GE(o.not_before, t0 + seconds{30});
    // A worker that may wait goes at the end, as the probe.
    auto waiter = std::async(std::launch::async, [&] { return p.acquire(k); });
    clock.wait_for_sleepers(1);
    clock.advance(t0 + seconds{30} - clock.mono_now());
    const AcquireResult w = waiter.get();
    EXPECT_TRUE(w.ok());
    EXPECT_EQ(w.not_before, t0 + seconds{30});
    EXPECT_TRUE(w.probe);
    p.record(k, response(clock));
  }
}

TEST_F(Fixture, ABlockUntilOutlivesAStoreThatForgets) {
  auto store = std::make_shared<ForgetfulStore>(true);
  Pacer p(config(), store, clock.monotonic(), clock.wall());
  const auto k = p.key("api");
  const MonoTime t0 = clock.mono_now();
  ASSERT_TRUE(p.block_until(k, clock.wall_now() + seconds{20}));
  store->forget();
  const AcquireResult r = peek(p, k);
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(r.not_before, t0 + seconds{20});
}

TEST_F(Fixture, ASpentWindowsEndOutlivesAStoreThatForgets) {
  auto store = std::make_shared<ForgetfulStore>(true);
  Pacer p(config(), store, clock.monotonic(), clock.wall());
  const auto exact = p.key("exact");
  const auto coarse = p.key("coarse");
  const MonoTime t0 = clock.mono_now();
  p.record(exact, with(response(clock), window_obs(0, seconds{10})));
  // A reset in whole seconds proves the window lasts one second less.
  QuotaObservation whole = window_obs(0, seconds{10});
  whole.reset_resolution = seconds{1};
  p.record(coarse, with(response(clock), whole));
  store->forget();
  const AcquireResult e = peek(p, exact);
  EXPECT_EQ(e.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(e.not_before, t0 + seconds{10});
  EXPECT_EQ(e.cause, WaitCause::kQuota);
  const AcquireResult c = peek(p, coarse);
  EXPECT_EQ(c.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(c.not_before, t0 + seconds{9});
}

TEST_F(Fixture, TheFloorNeverHoldsAKeyLongerThanTheStoreDoes) {
  // Answers of one window in whole seconds: the store ends the spent window at
  // the earliest reset any of them gave, and so does the floor; the store is
  // not written to by acquires.
  auto store = std::make_shared<ForgetfulStore>(false);
  PacerConfig c = config();
  c.rules.pacing = Pacing::kBurst;
  Pacer p(c, store, clock.monotonic(), clock.wall());
  const auto k = p.key("api");
  const MonoTime t0 = clock.mono_now();
  QuotaObservation first = window_obs(3, seconds{10});
  first.reset_resolution = seconds{1};
  p.record(k, with(response(clock), first));
  clock.advance(seconds{5});
  QuotaObservation spent = window_obs(0, seconds{6});  // rounded up: the window ends at 10 s, not 11 s
  spent.reset_resolution = seconds{1};
  p.record(k, with(response(clock), spent));
  const int records = store->records();
  const AcquireResult r = peek(p, k);
  EXPECT_EQ(r.not_before, t0 + seconds{10});
  clock.advance(seconds{5});
  const AcquireResult probe = peek(p, k);
  EXPECT_TRUE(probe.ok());
  EXPECT_TRUE(probe.probe);
  EXPECT_EQ(store->records(), records);
}

TEST_F(Fixture, TheFloorServesWhileTheStoreIsDown) {
  auto store = std::make_shared<ForgetfulStore>(true);
  Pacer p(config(), store, clock.monotonic(), clock.wall());
  const auto k = p.key("api");
  const MonoTime t0 = clock.mono_now();
  p.record(k, retry_after(clock, seconds{30}));
  store->set_down(true);
  // Not "the store cannot answer": when the send may go, with the server's reason.
  const AcquireResult r = p.acquire(k, clock.mono_now());
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(r.not_before, t0 + seconds{30});
  EXPECT_EQ(r.cause, WaitCause::kCooldown);
}

TEST_F(Fixture, AFloorOutlivesTheKeyBoundWhileItRuns) {
  // Past max_keys, keys nobody holds are dropped, those whose floor has
  // passed first: a key still in a cooldown keeps it while the store forgets.
  auto store = std::make_shared<ForgetfulStore>(true);
  PacerConfig c = config();
  c.max_keys = 4;
  Pacer p(c, store, clock.monotonic(), clock.wall());
  const MonoTime t0 = clock.mono_now();
  p.record("live", retry_after(clock, seconds{60}));
  for (int i = 0; i < 16; ++i) p.key("k" + std::to_string(i));
  store->forget();
  const AcquireResult r = peek(p, p.key("live"));
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(r.not_before, t0 + seconds{60});
}

// ---- defects --------------------------------------------------------------------------------

TEST_F(Fixture, TwoCallersOfOneKeyPastMaxKeysShareOneLine) {
  // Past max_keys (every key held), a key handed out twice was two lines: a
  // slot reserved through one survived a cooldown recorded through the other.
  PacerConfig c = config();
  c.max_keys = 1;
  Pacer p = make(c);
  const auto held = p.key("held");
  const auto k1 = p.key("k");
  const auto k2 = p.key("k");
  p.record(k1, with(response(clock), policy_obs(2, seconds{10})));
  Pacer::Ticket a, b;
  ASSERT_TRUE(p.try_acquire(a, k1).ok());
  const TryAcquireResult rb = p.try_acquire(b, k1);
  ASSERT_EQ(rb.status, TryStatus::kReserved);
  p.record(k2, retry_after(clock, seconds{60}));
  clock.advance(rb.at - clock.mono_now());
  const TryAcquireResult again = p.try_acquire(b, k1);
  EXPECT_NE(again.status, TryStatus::kPermit);
  EXPECT_GE(again.at, clock.mono_now() + seconds{50});
}

TEST_F(Fixture, AReservedSlotIsCheckedAgainstASpentQuotaRecordedBeforeItsTime) {
  // A slot granted, then an answer says "0 left for 0.1 s" (a reading too
  // uncertain to start a cooldown, which the store still counts): the slot,
  // 15 ms later, is not used inside those 0.1 s.
  Pacer p = make(config());
  const auto k = p.key("api");
  QuotaObservation room = window_obs(10, seconds{10});
  room.limit = 100;
  p.record(k, with(response(clock), room));
  Pacer::Ticket a, b;
  ASSERT_TRUE(p.try_acquire(a, k).ok());
  const TryAcquireResult rb = p.try_acquire(b, k);
  ASSERT_EQ(rb.status, TryStatus::kReserved);
  clock.advance(rb.at - clock.mono_now() - milliseconds{15});
  const MonoTime answered = clock.mono_now();
  QuotaObservation spent = window_obs(0, milliseconds{100});
  spent.limit = 100;
  spent.confidence = Confidence::kLow;
  p.record(k, with(response(clock), spent));
  clock.advance(milliseconds{15});
  const TryAcquireResult again = p.try_acquire(b, k);
  EXPECT_NE(again.status, TryStatus::kPermit);
  EXPECT_GE(again.at, answered + milliseconds{100});
}

TEST_F(Fixture, ASharedStoresWaitCountedFromItsAnswerIsNotAcceptedBeyondMaxWait) {
  // The store is asked with max_wait from the caller's now; its wait counts
  // from its answer, a round trip later: a wait it accepted right at the
  // limit ends past it.
  ManualClock c;
  PacerConfig cfg = config();
  cfg.max_wait = seconds{10};
  Pacer p(cfg, std::make_shared<SlowStore>(c, seconds{1}, true), c.monotonic(), c.wall());
  const auto k = p.key("k");
  const MonoTime t0 = c.mono_now();
  p.record(k, retry_after(c, seconds{10}));
  Pacer::Ticket t;
  const TryAcquireResult r = p.try_acquire(t, k);
  EXPECT_EQ(r.status, TryStatus::kDeferred) << to_string(r.status);
  EXPECT_EQ(r.at, t0 + seconds{11});
  EXPECT_FALSE(t.held());
  // The probe it was granted is handed on, not held until it times out.
  c.advance(seconds{10});
  Pacer::Ticket next;
  const TryAcquireResult n = p.try_acquire(next, k);
  EXPECT_TRUE(n.ok() || n.status == TryStatus::kReserved) << to_string(n.status);
  EXPECT_TRUE(n.probe);
}

TEST_F(Fixture, ASharedStoresSlotThatIsDueGoesWhateverItsRoundTrip) {
  // A caller that accepts no wait, on a key with nothing known and on one
  // whose cooldown has ended (its first send is the probe): the store's
  // round trip is no wait, so the send goes.
  ManualClock c;
  PacerConfig cfg = config();
  cfg.max_wait = Duration::zero();
  Pacer p(cfg, std::make_shared<SlowStore>(c, milliseconds{5}, true), c.monotonic(), c.wall());
  const auto k = p.key("k");
  Pacer::Ticket t;
  EXPECT_TRUE(p.try_acquire(t, k).ok());
  EXPECT_TRUE(p.acquire(k).ok());
  p.record(k, retry_after(c, seconds{1}));
  c.advance(seconds{1});
  const AcquireResult probe = p.acquire(k);
  EXPECT_TRUE(probe.ok()) << to_string(probe.status);
  EXPECT_TRUE(probe.probe);
}

// ---- try_acquire: the same rules without blocking ----------------------------------------

// A policy of 2 per 10 s: slots 5.25 s apart (the margin of 5%), the first now.
Pacer::Key spaced_key(Pacer& p, const Clock& clock) {
  const auto k = p.key("k");
  p.record(k, with(response(clock), policy_obs(2, seconds{10})));
  return k;
}
constexpr Duration kSpacing = milliseconds{5250};
constexpr Duration cooldown_spread_max = milliseconds{20};

// A key whose server announces no quota learns one from a limited answer
// with a Retry-After delay: the answers accepted before it are a window. A
// Retry-After date teaches nothing (its boundary may be seconds late).
TEST_F(Fixture, ARetryAfterDelayTeachesAWindowAndADateDoesNot) {
  for (const bool dated : {false, true}) {
    SCOPED_TRACE(dated ? "date" : "delay");
    PacerConfig c = config();
    c.rules.pacing = Pacing::kBurst;
    c.rules.cooldown_spread = Duration::zero();
    Pacer p = make(c);
    const auto k = p.key(dated ? "dated" : "delay");
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(peek(p, k).ok());
      p.record(k, response(clock));
    }
    Signals limited = retry_after(clock, seconds{2});
    if (dated) {
      limited.retry_after->kind = RetryHint::Kind::kDate;
      limited.retry_after->date = clock.wall_now() + seconds{2};
    }
    p.record(k, limited);
    clock.advance(seconds{2});
    const AcquireResult probe = peek(p, k);
    ASSERT_TRUE(probe.ok());
    EXPECT_TRUE(probe.probe);
    p.record(k, response(clock));
    int sent = 1;
    while (sent < 20 && peek(p, k).ok()) {
      ++sent;
      p.record(k, response(clock));
    }
    // Learned: 5 in this window, the next at its end; a date: no bound.
    EXPECT_EQ(sent, dated ? 20 : 5);
  }
}

TEST_F(Fixture, TryAcquireReservesSlotsInArrivalOrder) {
  Pacer p = make(config());
  const auto k = spaced_key(p, clock);
  const MonoTime t0 = clock.mono_now();
  Pacer::Ticket a, b, c;
  EXPECT_TRUE(p.try_acquire(a, k).ok());
  const TryAcquireResult rb = p.try_acquire(b, k);
  const TryAcquireResult rc = p.try_acquire(c, k);
  ASSERT_EQ(rb.status, TryStatus::kReserved) << to_string(rb.status);
  ASSERT_EQ(rc.status, TryStatus::kReserved);
  EXPECT_EQ(rb.at, t0 + kSpacing);
  EXPECT_EQ(rc.at, t0 + 2 * kSpacing);
  EXPECT_TRUE(b.held());
  // Asking early changes nothing; at b's time, c asking first does not get b's slot.
  EXPECT_EQ(p.try_acquire(b, k).at, rb.at);
  clock.advance(kSpacing);
  EXPECT_EQ(p.try_acquire(c, k).status, TryStatus::kReserved);
  const TryAcquireResult now_b = p.try_acquire(b, k);
  EXPECT_TRUE(now_b.ok());
  EXPECT_EQ(now_b.at, t0 + kSpacing);
  EXPECT_FALSE(b.held());
  clock.advance(kSpacing);
  EXPECT_TRUE(p.try_acquire(c, k).ok());
  EXPECT_EQ(clock.sleepers(), 0u);
}

TEST_F(Fixture, ASlotGivenBackGoesToTheNextToAsk) {
  Pacer p = make(config());
  const auto k = spaced_key(p, clock);
  const MonoTime t0 = clock.mono_now();
  Pacer::Ticket a, b, c, d;
  EXPECT_TRUE(p.try_acquire(a, k).ok());
  EXPECT_EQ(p.try_acquire(b, k).at, t0 + kSpacing);
  EXPECT_EQ(p.try_acquire(c, k).at, t0 + 2 * kSpacing);
  b.release();  // b gives up: its slot is not lost
  EXPECT_FALSE(b.held());
  const TryAcquireResult rd = p.try_acquire(d, k);
  ASSERT_EQ(rd.status, TryStatus::kReserved);
  EXPECT_EQ(rd.at, t0 + kSpacing);
  // A ticket destroyed while holding a slot gives it back too.
  {
    Pacer::Ticket e;
    EXPECT_EQ(p.try_acquire(e, k).at, t0 + 3 * kSpacing);
  }
  Pacer::Ticket f;
  EXPECT_EQ(p.try_acquire(f, k).at, t0 + 3 * kSpacing);
  clock.advance(kSpacing);
  EXPECT_TRUE(p.try_acquire(d, k).ok());
}

TEST_F(Fixture, ASlotGivenBackAfterACooldownBeganIsVoid) {
  Pacer p = make(config());
  const auto k = spaced_key(p, clock);
  Pacer::Ticket a, b, c;
  EXPECT_TRUE(p.try_acquire(a, k).ok());
  ASSERT_EQ(p.try_acquire(b, k).status, TryStatus::kReserved);
  p.record(k, retry_after(clock, seconds{60}));
  b.release();
  const TryAcquireResult rc = p.try_acquire(c, k);
  ASSERT_EQ(rc.status, TryStatus::kReserved);
  EXPECT_GE(rc.at, clock.mono_now() + seconds{60});
  EXPECT_TRUE(rc.probe);
}

TEST_F(Fixture, ACancelledBlockingWaitGivesItsSlotBack) {
  Pacer p = make(config());
  const auto k = spaced_key(p, clock);
  const MonoTime t0 = clock.mono_now();
  EXPECT_TRUE(p.acquire(k).ok());
  std::stop_source stop;
  auto f = std::async(std::launch::async, [&] { return p.acquire(k, std::nullopt, stop.get_token()); });
  clock.wait_for_sleepers(1);
  stop.request_stop();
  const AcquireResult r = f.get();
  EXPECT_EQ(r.status, AcquireStatus::kCancelled);
  EXPECT_EQ(r.not_before, t0 + kSpacing);
  Pacer::Ticket t;
  EXPECT_EQ(p.try_acquire(t, k).at, t0 + kSpacing);
}

TEST_F(Fixture, AWaiterForTheProbeIsNotifiedWhenItsAnswerIsRecorded) {
  Pacer p = make(config());
  const auto k = p.key("k");
  p.record(k, retry_after(clock, seconds{5}));
  clock.advance(seconds{5});
  Pacer::Ticket probe, waiter;
  const TryAcquireResult rp = p.try_acquire(probe, k);
  ASSERT_TRUE(rp.ok());
  ASSERT_TRUE(rp.probe);
  const TryAcquireResult rw = p.try_acquire(waiter, k);
  ASSERT_EQ(rw.status, TryStatus::kAskAgain) << to_string(rw.status);
  EXPECT_EQ(rw.at, clock.mono_now() + seconds{10});  // the probe timeout, at the latest
  int notified = 0;
  waiter.set_notify([&] { ++notified; });
  EXPECT_EQ(notified, 0);
  EXPECT_EQ(p.try_acquire(waiter, k).status, TryStatus::kAskAgain);
  clock.advance(milliseconds{200});
  p.record(k, response(clock));  // the probe's answer
  EXPECT_EQ(notified, 1);
  EXPECT_TRUE(p.try_acquire(waiter, k).ok());
  EXPECT_EQ(clock.sleepers(), 0u);
}

// Only a record that can change a waiter's answer wakes it (the probe's
// answer, a cooldown): the rest skip the wake, which every record paid for.
TEST_F(Fixture, ARecordThatAnswersNoProbeWakesNoWaiter) {
  Pacer p = make(config());
  const auto k = p.key("k");
  const Signals early = response(clock);  // received before the cooldown: it answers no probe
  p.record(k, retry_after(clock, seconds{5}));
  clock.advance(seconds{5});
  Pacer::Ticket probe, waiter;
  ASSERT_TRUE(p.try_acquire(probe, k).probe);
  ASSERT_EQ(p.try_acquire(waiter, k).status, TryStatus::kAskAgain);
  int notified = 0;
  waiter.set_notify([&] { ++notified; });
  p.record(k, early);  // late, and about the time before the cooldown
  EXPECT_EQ(notified, 0);
  EXPECT_EQ(p.try_acquire(waiter, k).status, TryStatus::kAskAgain);
  p.record(k, response(clock));  // the probe's answer
  EXPECT_EQ(notified, 1);
  EXPECT_TRUE(p.try_acquire(waiter, k).ok());
}

TEST_F(Fixture, ANotificationBeforeTheCallbackIsSetFiresItAtOnce) {
  Pacer p = make(config());
  const auto k = p.key("k");
  p.record(k, retry_after(clock, seconds{5}));
  clock.advance(seconds{5});
  Pacer::Ticket probe, waiter;
  ASSERT_TRUE(p.try_acquire(probe, k).probe);
  ASSERT_EQ(p.try_acquire(waiter, k).status, TryStatus::kAskAgain);
  p.abandon_probe(k);  // no answer will come: the waiter may probe
  int notified = 0;
  waiter.set_notify([&] { ++notified; });
  EXPECT_EQ(notified, 1);
  const TryAcquireResult r = p.try_acquire(waiter, k);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.probe);
}

TEST_F(Fixture, TryAcquireAndBlockingAcquireShareOneLine) {
  Pacer p = make(config());
  const auto k = p.key("k");
  p.record(k, retry_after(clock, seconds{5}));
  clock.advance(seconds{5});
  Pacer::Ticket probe, first;
  ASSERT_TRUE(p.try_acquire(probe, k).probe);
  ASSERT_EQ(p.try_acquire(first, k).status, TryStatus::kAskAgain);
  auto later = std::async(std::launch::async, [&] { return p.acquire(k); });
  clock.wait_for_sleepers(1);
  p.record(k, response(clock));
  // The blocking worker came later: it is not woken past the first in line.
  clock.wait_for_sleepers(1);
  EXPECT_EQ(later.wait_for(std::chrono::seconds{0}), std::future_status::timeout);
  EXPECT_TRUE(p.try_acquire(first, k).ok());
  // Its turn now, one spread step later (released workers are spread).
  clock.wait_for_sleepers(1);
  clock.advance(cooldown_spread_max);
  const AcquireResult r = later.get();
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.probe);
}

TEST_F(Fixture, TryAcquireDefersAndMissesDeadlinesAsAcquireDoes) {
  PacerConfig c = config();
  c.max_wait = seconds{30};
  Pacer p = make(c);
  const auto k = p.key("k");
  p.record(k, retry_after(clock, seconds{60}));
  const MonoTime end = clock.mono_now() + seconds{60};
  Pacer::Ticket t;
  const TryAcquireResult late = p.try_acquire(t, k, clock.mono_now() + seconds{10});
  EXPECT_EQ(late.status, TryStatus::kDeadlineExceeded);
  EXPECT_EQ(late.at, end);
  ASSERT_TRUE(late.not_before_wall);
  EXPECT_EQ(*late.not_before_wall, clock.wall_now() + seconds{60});
  EXPECT_FALSE(t.held());
  const TryAcquireResult deferred = p.try_acquire(t, k);
  EXPECT_EQ(deferred.status, TryStatus::kDeferred);
  EXPECT_EQ(deferred.at, end);
  // Within the limits: the probe's slot at the cooldown's end.
  clock.advance(seconds{40});
  const TryAcquireResult r = p.try_acquire(t, k);
  EXPECT_EQ(r.status, TryStatus::kReserved);
  EXPECT_TRUE(r.probe);
  EXPECT_EQ(r.at, end);
}

// ---- block_until --------------------------------------------------------------------------

TEST_F(Fixture, BlockUntilHoldsTheKeyUntilThatWallTime) {
  Pacer p = make(config());
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  EXPECT_TRUE(p.block_until(k, clock.wall_now() + seconds{30}));
  const AcquireResult r = peek(p, k);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.not_before, t0 + seconds{30});
  // A shorter one changes nothing; a past one neither.
  EXPECT_FALSE(p.block_until(k, clock.wall_now() + seconds{10}));
  EXPECT_FALSE(p.block_until("k", clock.wall_now() - seconds{10}));
  EXPECT_EQ(peek(p, k).not_before, t0 + seconds{30});
  clock.advance(seconds{30});
  const AcquireResult after = peek(p, k);
  EXPECT_TRUE(after.ok());
  EXPECT_TRUE(after.probe);  // then the probe rule, as after any cooldown
}

TEST_F(Fixture, BlockUntilInThePastLeavesTheKeyFree) {
  Pacer p = make(config());
  EXPECT_FALSE(p.block_until("k", clock.wall_now() - seconds{1}));
  EXPECT_FALSE(p.block_until("k", clock.wall_now()));
  const AcquireResult r = peek(p, p.key("k"));
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.probe);
}

TEST_F(Fixture, BlockUntilRedirectsAWaiterForTheProbe) {
  Pacer p = make(config());
  const auto k = p.key("k");
  p.record(k, retry_after(clock, seconds{5}));
  clock.advance(seconds{5});
  Pacer::Ticket probe, waiter;
  ASSERT_TRUE(p.try_acquire(probe, k).probe);
  ASSERT_EQ(p.try_acquire(waiter, k).status, TryStatus::kAskAgain);
  int notified = 0;
  waiter.set_notify([&] { ++notified; });
  ASSERT_TRUE(p.block_until(k, clock.wall_now() + seconds{20}));
  EXPECT_EQ(notified, 1);
  // The probe handed out before is void; the waiter gets the probe at the new end.
  const TryAcquireResult r = p.try_acquire(waiter, k);
  EXPECT_EQ(r.status, TryStatus::kReserved);
  EXPECT_EQ(r.at, clock.mono_now() + seconds{20});
  EXPECT_TRUE(r.probe);
}

TEST_F(Fixture, ClocksAndRandomnessComeFromTheConfig) {
  PacerConfig c = config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  c.random = std::make_shared<SeededRandom>(3);
  Pacer p(c);
  const auto k = p.key("k");
  EXPECT_TRUE(p.block_until(k, clock.wall_now() + seconds{2}));
  EXPECT_EQ(p.acquire(k, clock.mono_now()).not_before, clock.mono_now() + seconds{2});
}

// ---- many workers against a server that counts ---------------------------------------

// A server with fixed windows that answers with RateLimit-style observations
// and counts every request per window.
class CountingServer {
 public:
  CountingServer(const Clock& clock, std::int64_t quota, Duration window)
      : clock_(clock), quota_(quota), window_(window), origin_(clock.mono_now()) {}

  Signals send() {
    std::lock_guard lock(mu_);
    const MonoTime now = clock_.mono_now();
    const auto index = (now - origin_) / window_;
    const std::int64_t used = ++counts_[index];
    sends_.push_back(now);
    Signals s = response(clock_, used > quota_ ? 429 : 200);
    QuotaObservation o;
    o.limit = quota_;
    o.window = window_;
    o.remaining = std::max<std::int64_t>(quota_ - used, 0);
    o.reset = origin_ + (index + 1) * window_ - now;
    s.quota.push_back(o);
    return s;
  }
  std::int64_t max_per_window() const {
    std::int64_t m = 0;
    for (const auto& [i, c] : counts_) m = std::max(m, c);
    return m;
  }
  // The most sends in any interval [t, t + window).
  std::int64_t max_per_sliding_window() const {
    std::vector<MonoTime> s = sends_;
    std::sort(s.begin(), s.end());
    std::int64_t best = 0;
    std::size_t lo = 0;
    for (std::size_t hi = 0; hi < s.size(); ++hi) {
      while (s[hi] - s[lo] >= window_) ++lo;
      best = std::max<std::int64_t>(best, static_cast<std::int64_t>(hi - lo + 1));
    }
    return best;
  }
  std::size_t total() const { return sends_.size(); }

 private:
  const Clock& clock_;
  std::int64_t quota_;
  Duration window_;
  MonoTime origin_;
  std::mutex mu_;
  std::map<std::int64_t, std::int64_t> counts_;
  std::vector<MonoTime> sends_;
};

struct ManyWorkers : Fixture, ::testing::WithParamInterface<Pacing> {};

TEST_P(ManyWorkers, SixteenThreadsOnOneKeyNeverExceedTheQuota) {
  PacerConfig c = config();
  c.rules.pacing = GetParam();
  Pacer p = make(c);
  const auto k = p.key("api");
  CountingServer server(clock, 20, seconds{1});
  p.record(k, server.send());  // the first response teaches the window
  constexpr int kThreads = 16;
  constexpr int kPerThread = 8;
  std::atomic<int> alive{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        const AcquireResult r = p.acquire(k);
        if (!r.ok()) break;
        p.record(k, server.send());
      }
      alive.fetch_sub(1);
    });
  }
  clock.drive(alive, milliseconds{5});
  for (auto& t : threads) t.join();
  EXPECT_EQ(server.total(), std::size_t{kThreads * kPerThread + 1});
  EXPECT_LE(server.max_per_window(), 20);
}

TEST_P(ManyWorkers, SixteenThreadsUnderAPolicyNeverExceedItInAnyWindow) {
  PacerConfig c = config();
  c.rules.pacing = GetParam();
  Pacer p = make(c);
  const auto k = p.key("api");
  p.record(k, with(response(clock), policy_obs(20, seconds{1})));
  constexpr int kThreads = 16;
  constexpr int kPerThread = 6;
  std::atomic<int> alive{kThreads};
  std::mutex mu;
  std::vector<MonoTime> sends;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        if (!p.acquire(k).ok()) break;
        std::lock_guard lock(mu);
        sends.push_back(clock.mono_now());
      }
      alive.fetch_sub(1);
    });
  }
  clock.drive(alive, milliseconds{5});
  for (auto& t : threads) t.join();
  ASSERT_EQ(sends.size(), std::size_t{kThreads * kPerThread});
  std::sort(sends.begin(), sends.end());
  for (std::size_t i = 20; i < sends.size(); ++i) {
    EXPECT_GE(sends[i] - sends[i - 20], seconds{1}) << "21 sends within one second, ending at " << i;
  }
}

std::string pacing_name(const ::testing::TestParamInfo<Pacing>& p) {
  return p.param == Pacing::kSmooth ? "Smooth" : "Burst";
}
INSTANTIATE_TEST_SUITE_P(Pacing, ManyWorkers, ::testing::Values(Pacing::kSmooth, Pacing::kBurst), pacing_name);

TEST_F(Fixture, SixteenThreadsRecordingCooldownsConcurrently) {
  Pacer p = make(config());
  const auto k = p.key("api");
  constexpr int kThreads = 16;
  std::atomic<int> alive{kThreads};
  std::atomic<int> permits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const AcquireResult r = p.acquire(k, clock.mono_now() + seconds{30});
        if (r.ok()) ++permits;
        if ((i + t) % 5 == 0) p.record(k, retry_after(clock, milliseconds{50}));
        else p.record(k, response(clock));
      }
      alive.fetch_sub(1);
    });
  }
  clock.drive(alive, milliseconds{10});
  for (auto& t : threads) t.join();
  EXPECT_GT(permits.load(), 0);
}

}  // namespace
}  // namespace abide

// ---- costs: token quotas --------------------------------------------------------------

namespace abide {
namespace {

QuotaObservation tokens_obs(std::int64_t remaining, Duration reset, std::optional<std::int64_t> cost = std::nullopt) {
  QuotaObservation o = window_obs(remaining, reset, "tokens");
  o.unit = "tokens";
  o.cost = cost;
  return o;
}

// A tokens quota the server states is paced by what each send needs of it:
// sends that do not fit wait for the window's end, though requests have room.
TEST_F(Fixture, ATokensQuotaHoldsSendsThatDoNotFit) {
  PacerConfig c = config();
  c.rules.pacing = Pacing::kBurst;
  Pacer p = make(c);
  const Pacer::Key k = p.key("llm");
  p.record(k, with(with(response(clock), window_obs(100, seconds{60}, "requests")), tokens_obs(10'000, seconds{60})));
  const std::vector<UnitCost> big{{"tokens", 4'000}};
  EXPECT_TRUE(p.acquire(k, clock.mono_now(), {}, big).ok());
  EXPECT_TRUE(p.acquire(k, clock.mono_now(), {}, big).ok());
  const AcquireResult third = p.acquire(k, clock.mono_now(), {}, big);
  EXPECT_EQ(third.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(third.not_before, clock.mono_now() + seconds{60});
  EXPECT_EQ(third.cause, WaitCause::kQuota);
  // The answer names the quota and its counts, for what is said to people.
  ASSERT_TRUE(third.held);
  EXPECT_EQ(describe(*third.held), "tokens: 2,000 left, 4,000 needed");
  // A send that needs less still fits.
  const std::vector<UnitCost> small{{"tokens", 1'500}};
  EXPECT_TRUE(p.acquire(k, clock.mono_now(), {}, small).ok());
  // The driven form says the same while it holds the slot, and with the permit.
  Pacer::Ticket t;
  const TryAcquireResult reserved = p.try_acquire(t, k, std::nullopt, big);
  ASSERT_EQ(reserved.status, TryStatus::kReserved);
  ASSERT_TRUE(reserved.held);
  EXPECT_EQ(reserved.held->unit, "tokens");
  clock.advance(seconds{60});
  const TryAcquireResult permit = p.try_acquire(t, k, std::nullopt, big);
  ASSERT_EQ(permit.status, TryStatus::kPermit);
  EXPECT_EQ(permit.cause, WaitCause::kQuota);
  EXPECT_EQ(permit.held, reserved.held);
  p.abandon_probe(k);
}

// What an answer says was used settles what its send reserved: the unused
// part comes back for the next sends (the draft's `c` counts as the usage).
TEST_F(Fixture, AnAnswersUsageGivesTheUnusedTokensBack) {
  PacerConfig c = config();
  c.rules.pacing = Pacing::kBurst;
  Pacer p = make(c);
  const Pacer::Key k = p.key("llm");
  p.record(k, with(response(clock), tokens_obs(10'000, seconds{60})));
  const std::vector<UnitCost> reserve{{"tokens", 8'000}};
  ASSERT_TRUE(p.acquire(k, clock.mono_now(), {}, reserve).ok());
  const std::vector<UnitCost> next{{"tokens", 5'000}};
  EXPECT_FALSE(p.acquire(k, clock.mono_now(), {}, next).ok());
  clock.advance(seconds{1});
  const std::vector<UnitCost> used{{"tokens", 1'000}};
  p.record(k, with(response(clock), tokens_obs(9'000, seconds{59})), SendCosts{reserve, used});
  EXPECT_TRUE(p.acquire(k, clock.mono_now(), {}, next).ok());

  // The same through the server's `c`, with no usage from the caller.
  const Pacer::Key k2 = p.key("llm-c");
  p.record(k2, with(response(clock), tokens_obs(10'000, seconds{60})));
  ASSERT_TRUE(p.acquire(k2, clock.mono_now(), {}, reserve).ok());
  clock.advance(seconds{1});
  p.record(k2, with(response(clock), tokens_obs(9'000, seconds{58}, 1'000)), SendCosts{reserve, {}});
  EXPECT_TRUE(p.acquire(k2, clock.mono_now(), {}, next).ok());
}

// A slot given back holds what its send reserved: it goes only to a send
// that needs no more than that, never letting a larger one through early.
TEST_F(Fixture, AReturnedSlotGoesOnlyToASendItHasRoomFor) {
  Pacer p = make(config());
  const Pacer::Key k = p.key("llm");
  p.record(k, with(response(clock), tokens_obs(10'000, seconds{10})));
  const std::vector<UnitCost> small{{"tokens", 1'000}};
  const std::vector<UnitCost> large{{"tokens", 6'000}};
  ASSERT_TRUE(p.acquire(k, clock.mono_now(), {}, small).ok());
  Pacer::Ticket t;
  const TryAcquireResult held = p.try_acquire(t, k, std::nullopt, small);
  ASSERT_EQ(held.status, TryStatus::kReserved);
  t.release();  // its 1,000 tokens' slot goes back
  Pacer::Ticket big;
  const TryAcquireResult r = p.try_acquire(big, k, std::nullopt, large);
  ASSERT_TRUE(r.pending());
  EXPECT_GT(r.at, held.at) << "the large send took the small one's slot";
  Pacer::Ticket again;
  const TryAcquireResult same = p.try_acquire(again, k, std::nullopt, small);
  EXPECT_EQ(same.status, TryStatus::kReserved);
  EXPECT_EQ(same.at, held.at) << "a send of the same size takes the slot given back";
}

}  // namespace
}  // namespace abide

namespace abide {
namespace {

// A usage known only at the end of the body settles the send's reservation
// after the head was recorded.
TEST_F(Fixture, AUsageAtTheEndOfTheBodySettlesTheReservation) {
  PacerConfig c = config();
  c.rules.pacing = Pacing::kBurst;
  Pacer p = make(c);
  const Pacer::Key k = p.key("llm");
  p.record(k, with(response(clock), tokens_obs(10'000, seconds{60})));
  const std::vector<UnitCost> reserve{{"tokens", 8'000}};
  ASSERT_TRUE(p.acquire(k, clock.mono_now(), {}, reserve).ok());
  const Signals head = with(response(clock), tokens_obs(9'000, seconds{59}));
  p.record(k, head, SendCosts{reserve, {}});
  const std::vector<UnitCost> next{{"tokens", 5'000}};
  EXPECT_FALSE(p.acquire(k, clock.mono_now(), {}, next).ok());
  clock.advance(seconds{3});  // the stream ends
  const std::vector<UnitCost> used{{"tokens", 2'000}};
  p.settle(k, head.received_mono, SendCosts{reserve, used});
  EXPECT_TRUE(p.acquire(k, clock.mono_now(), {}, next).ok());
}

}  // namespace
}  // namespace abide
