// The pacer's keys, cooldowns and the probe that goes first after one or after
// a window, each driven by the manual clock (no test sleeps).
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
using test::drive_until_ready;
using test::Fixture;

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

}  // namespace
}  // namespace abide
