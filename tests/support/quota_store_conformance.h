// The QuotaStore state machine, checked operation by operation. Every store
// (MemoryStore, RedisStore) instantiates this suite with a factory:
//
//   INSTANTIATE_TEST_SUITE_P(Memory, QuotaStoreConformance, ::testing::Values(factory));
//
// Times are explicit `now` values (no clock). Stores may keep time in whole
// microseconds, so durations compare within a microsecond.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <ostream>
#include <string>

#include "abide/quota_store.h"
#include "support/fixed_window_sim.h"

namespace abide::test {

using StoreFactory = std::function<std::shared_ptr<QuotaStore>()>;

struct StoreParam {
  std::string name;
  StoreFactory make;
};

inline std::string store_param_name(const ::testing::TestParamInfo<StoreParam>& p) { return p.param.name; }
inline void PrintTo(const StoreParam& p, std::ostream* os) { *os << p.name; }

class QuotaStoreConformance : public ::testing::TestWithParam<StoreParam> {
 protected:
  void SetUp() override {
    store = GetParam().make();
    if (store == nullptr) GTEST_SKIP() << GetParam().name << " store not available";
    key = store->open("conformance-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  }

  StoreGrant acquire(Duration max_wait = kMaxDuration) {
    return store->acquire(*key, StoreAcquire{now, max_wait}, rules);
  }
  RecordOutcome record(StoreRecord r) {
    r.now = now;
    return store->record(*key, r, rules);
  }
  RecordOutcome cooldown(Duration d) {
    StoreRecord r;
    r.cooldown = d;
    return record(r);
  }
  RecordOutcome answer() { return record(StoreRecord{}); }
  static PolicyUpdate window(std::int64_t remaining, Duration reset, std::string id = "") {
    PolicyUpdate u;
    u.id = std::move(id);
    u.remaining = remaining;
    u.reset = reset;
    return u;
  }
  // A window whose reset is stated in whole seconds.
  static PolicyUpdate coarse_window(std::int64_t remaining, Duration reset) {
    PolicyUpdate u = window(remaining, reset);
    u.reset_resolution = std::chrono::seconds{1};
    return u;
  }
  static PolicyUpdate policy(std::int64_t limit, Duration w, std::string id = "") {
    PolicyUpdate u;
    u.id = std::move(id);
    u.limit = limit;
    u.window = w;
    return u;
  }
  RecordOutcome update(std::vector<PolicyUpdate> u) {
    StoreRecord r;
    r.policies = std::move(u);
    return record(r);
  }

  // Acquires one slot per entry of `expected_ms` (waits from now, in ms),
  // then one more: the probe, at `probe_at`.
  void expect_smooth_slots(std::initializer_list<double> expected_ms, Duration probe_at) {
    for (double e : expected_ms) {
      const StoreGrant g = acquire();
      ASSERT_EQ(g.kind, StoreGrant::Kind::kGranted);
      EXPECT_NEAR(wait_ms(g), e, 0.5);
    }
    const StoreGrant probe = acquire();
    EXPECT_EQ(probe.kind, StoreGrant::Kind::kProbe);
    expect_near(probe.wait, probe_at);
  }
  static double wait_ms(const StoreGrant& g) { return static_cast<double>(g.wait.count()) / 1e6; }

  static void expect_near(Duration actual, Duration expected, const char* what = "") {
    EXPECT_LE(actual - expected, std::chrono::microseconds{1}) << what;
    EXPECT_GE(actual - expected, -std::chrono::microseconds{1}) << what;
  }

  std::shared_ptr<QuotaStore> store;
  std::shared_ptr<QuotaStore::Handle> key;
  PacingRules rules;
  MonoTime now{std::chrono::hours{1000}};
};

using std::chrono::milliseconds;
using std::chrono::seconds;
using Kind = StoreGrant::Kind;

TEST_P(QuotaStoreConformance, GrantsAtOnceWhenNothingIsKnown) {
  for (int i = 0; i < 5; ++i) {
    const StoreGrant g = acquire();
    EXPECT_EQ(g.kind, Kind::kGranted);
    EXPECT_EQ(g.wait, Duration::zero());
  }
}

TEST_P(QuotaStoreConformance, CooldownThenOneProbeThenAnswer) {
  EXPECT_TRUE(cooldown(seconds{30}).blocked);
  StoreGrant g = acquire(seconds{10});
  EXPECT_EQ(g.kind, Kind::kTooLate);
  expect_near(g.wait, seconds{30});
  g = acquire();
  EXPECT_EQ(g.kind, Kind::kProbe);
  expect_near(g.wait, seconds{30});
  g = acquire();
  EXPECT_EQ(g.kind, Kind::kAwaitProbe);
  expect_near(g.wait, seconds{30} + rules.probe_timeout);
  now += seconds{31};
  EXPECT_EQ(acquire().kind, Kind::kAwaitProbe);
  const RecordOutcome o = answer();
  EXPECT_TRUE(o.released);
  EXPECT_FALSE(o.blocked);
  g = acquire();
  EXPECT_EQ(g.kind, Kind::kGranted);
  EXPECT_EQ(g.wait, Duration::zero());
}

TEST_P(QuotaStoreConformance, AShorterCooldownDoesNotShortenTheCurrentOne) {
  cooldown(seconds{30});
  EXPECT_FALSE(cooldown(seconds{5}).blocked);
  const StoreGrant g = acquire(Duration{-1});
  EXPECT_EQ(g.kind, Kind::kTooLate);
  expect_near(g.wait, seconds{30});
}

TEST_P(QuotaStoreConformance, NegativeMaxWaitOnlyReports) {
  update({policy(1, seconds{1})});
  EXPECT_EQ(acquire().kind, Kind::kGranted);
  for (int i = 0; i < 3; ++i) {
    const StoreGrant g = acquire(Duration{-1});
    EXPECT_EQ(g.kind, Kind::kTooLate);
    expect_near(g.wait, milliseconds{1050});
  }
}

TEST_P(QuotaStoreConformance, GcraReservesSlotsInOrder) {
  update({policy(10, seconds{1})});
  for (int i = 0; i < 10; ++i) {
    const StoreGrant g = acquire();
    EXPECT_EQ(g.kind, Kind::kGranted);
    expect_near(g.wait, milliseconds{105} * i, "slot");
  }
  // Beyond max_wait: nothing reserved.
  EXPECT_EQ(acquire(milliseconds{500}).kind, Kind::kTooLate);
  expect_near(acquire().wait, milliseconds{1050});
}

TEST_P(QuotaStoreConformance, ACooldownVoidsEarlierReservations) {
  update({policy(1, seconds{1})});
  acquire();
  const StoreGrant g = acquire();
  EXPECT_TRUE(store->still_valid(*key, g.epoch, now));
  cooldown(seconds{10});
  EXPECT_FALSE(store->still_valid(*key, g.epoch, now));
  const StoreGrant probe = acquire();
  EXPECT_EQ(probe.kind, Kind::kProbe);
  EXPECT_NE(probe.epoch, g.epoch);
  EXPECT_TRUE(store->still_valid(*key, probe.epoch, now));
}

TEST_P(QuotaStoreConformance, ALostProbeTimesOutAndAnAbandonedOneIsHandedOn) {
  rules.probe_timeout = seconds{5};
  cooldown(seconds{1});
  EXPECT_EQ(acquire().kind, Kind::kProbe);
  now += seconds{5};
  EXPECT_EQ(acquire().kind, Kind::kAwaitProbe);
  now += seconds{1};
  EXPECT_EQ(acquire().kind, Kind::kProbe);
  EXPECT_EQ(acquire().kind, Kind::kAwaitProbe);
  store->abandon_probe(*key, now);
  EXPECT_EQ(acquire().kind, Kind::kProbe);
}

TEST_P(QuotaStoreConformance, WithoutProbeAfterCooldownReleasedSlotsAreSpread) {
  rules.probe_after_cooldown = false;
  rules.cooldown_spread = milliseconds{20};
  StoreRecord r;
  r.cooldown = seconds{2};
  r.spread_seed = 0.3;
  record(r);
  Duration previous{};
  for (int i = 0; i < 40; ++i) {
    const StoreGrant g = acquire();
    ASSERT_EQ(g.kind, Kind::kGranted);
    if (i == 0) {
      expect_near(g.wait, seconds{2});
    } else {
      EXPECT_GE(g.wait - previous, milliseconds{5} - std::chrono::microseconds{1}) << i;
      EXPECT_LE(g.wait - previous, milliseconds{20} + std::chrono::microseconds{1}) << i;
    }
    previous = g.wait;
  }
  // After the spread period, no spread.
  now += seconds{10};
  EXPECT_EQ(acquire().wait, Duration::zero());
  EXPECT_EQ(acquire().wait, Duration::zero());
}

TEST_P(QuotaStoreConformance, SmoothDividesTheWindow) {
  update({window(4, seconds{4})});
  // The fifth would come after the reset: it is the probe, at the reset.
  expect_smooth_slots({0, 1050, 2082.5, 3089.1875}, seconds{4});
}

// A reset stated in whole seconds: the window may end up to a second before
// it. Smooth pacing spends the quota by that earliest end, and still sends
// nothing more before the stated reset.
TEST_P(QuotaStoreConformance, SmoothAimsAtTheEarliestEndOfACoarseReset) {
  update({coarse_window(4, seconds{5})});
  expect_smooth_slots({0, 1050, 2082.5, 3089.1875}, seconds{5});  // as a 4 s window, probe at 5 s
}

// A step as long as the time to the reset aims at most half way: a window
// shorter than the step is still spread, not burst.
TEST_P(QuotaStoreConformance, ACoarseResetStillSpreadsOverHalfTheTimeLeft) {
  update({coarse_window(2, seconds{1})});
  EXPECT_EQ(acquire().wait, Duration::zero());
  EXPECT_NEAR(wait_ms(acquire()), 262.5, 0.5);
}

// Each answer bounds the true end from below (its reset minus the step); a
// later answer in the window tightens the aim to its bound, and an answer
// whose bound is past the tracked reset (the next window's) leaves it alone.
TEST_P(QuotaStoreConformance, LaterAnswersTightenTheAimToTheirBound) {
  update({coarse_window(3, seconds{2})});  // the window ends in (1 s, 2 s]: aim at 1 s
  now += milliseconds{500};
  update({coarse_window(3, seconds{2})});  // at 0.5 s, in 2 s: so it ends in (1.5 s, 2 s]: aim at 1.5 s
  EXPECT_EQ(acquire().wait, Duration::zero());
  // 1 s to the aim for 3 left: 350 ms, not the 175 ms of an aim at 1 s.
  EXPECT_NEAR(wait_ms(acquire()), 350.0, 0.5);
}

TEST_P(QuotaStoreConformance, TheNextWindowsBoundDoesNotMoveTheAim) {
  update({coarse_window(3, seconds{2})});  // aim at 1 s
  now += milliseconds{500};
  update({coarse_window(50, seconds{4})});  // bound at 3.5 s: past the tracked end at 2 s
  EXPECT_EQ(acquire().wait, Duration::zero());
  EXPECT_NEAR(wait_ms(acquire()), 175.0, 0.5);
}

TEST_P(QuotaStoreConformance, BurstSpendsThenProbesAtTheReset) {
  rules.pacing = Pacing::kBurst;
  update({window(3, seconds{6})});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(acquire().wait, Duration::zero());
  const StoreGrant probe = acquire();
  EXPECT_EQ(probe.kind, Kind::kProbe);
  expect_near(probe.wait, seconds{6});
  EXPECT_EQ(acquire().kind, Kind::kAwaitProbe);
  now += seconds{7};
  update({window(2, seconds{10})});
  EXPECT_EQ(acquire().kind, Kind::kGranted);
  EXPECT_EQ(acquire().kind, Kind::kGranted);
  EXPECT_EQ(acquire().kind, Kind::kProbe);
}

TEST_P(QuotaStoreConformance, CountsOnlyGoDownWithinAWindow) {
  rules.pacing = Pacing::kBurst;
  update({window(5, seconds{10})});
  update({window(9, seconds{10})});  // a late response from earlier
  PolicyUpdate only_remaining;
  only_remaining.remaining = 2;
  update({only_remaining});
  EXPECT_EQ(acquire().kind, Kind::kGranted);
  EXPECT_EQ(acquire().kind, Kind::kGranted);
  EXPECT_EQ(acquire().kind, Kind::kProbe);
}

TEST_P(QuotaStoreConformance, AResponseFromBeforeTheWindowEndIsNoAnswer) {
  rules.pacing = Pacing::kBurst;
  update({window(1, seconds{5})});
  EXPECT_EQ(acquire().kind, Kind::kGranted);
  now += seconds{5};
  EXPECT_EQ(acquire().kind, Kind::kProbe);
  StoreRecord old;
  old.age = seconds{2};  // received before the probe went out
  EXPECT_FALSE(record(old).released);
  EXPECT_EQ(acquire().kind, Kind::kAwaitProbe);
  EXPECT_TRUE(answer().released);
  EXPECT_EQ(acquire().kind, Kind::kGranted);
}

TEST_P(QuotaStoreConformance, TheMostRestrictivePolicyWins) {
  update({policy(100, seconds{1}, "a"), policy(5, seconds{1}, "b"), policy(20, seconds{1}, "c")});
  EXPECT_EQ(acquire().wait, Duration::zero());
  expect_near(acquire().wait, milliseconds{210});
}

TEST_P(QuotaStoreConformance, KeepsAtMostEightPolicies) {
  std::vector<PolicyUpdate> many;
  for (int i = 0; i < 8; ++i) many.push_back(policy(1000, seconds{1}, "p" + std::to_string(i)));
  many.push_back(policy(1, seconds{100}, "ignored"));
  update(many);
  acquire();
  expect_near(acquire().wait, std::chrono::microseconds{1050}, "the ninth policy is not kept");
}

TEST_P(QuotaStoreConformance, BadNumbersNeverOverflow) {
  PolicyUpdate weird;
  weird.limit = 0;
  weird.window = seconds{-5};
  weird.remaining = -7;
  weird.reset = kMaxDuration;
  update({weird, policy(std::numeric_limits<std::int64_t>::max(), Duration{1}, "dense"),
          policy(1, kMaxDuration, "sparse")});
  StoreGrant g = acquire();
  EXPECT_EQ(g.kind, Kind::kProbe);  // remaining 0 (from -7) until a reset far away
  EXPECT_GT(g.wait, std::chrono::hours{24 * 365});
  EXPECT_GE(g.wait, Duration::zero());
  cooldown(kMaxDuration);
  g = acquire(Duration{-1});
  EXPECT_EQ(g.kind, Kind::kTooLate);
  EXPECT_GT(g.wait, std::chrono::hours{24 * 365});
}

TEST_P(QuotaStoreConformance, KeysAreIndependent) {
  auto other = store->open("conformance-other-" +
                           std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  cooldown(seconds{30});
  EXPECT_EQ(store->acquire(*other, StoreAcquire{now, Duration::zero()}, rules).kind, Kind::kGranted);
}

// Whole workloads against a simulated fixed-window server (support/fixed_window_sim.h):
// the quota is used to the full, and never exceeded once the key knows it.
// Runs one workload on a fresh key, with the checks every pacing must pass.
inline SimResult run_workload(QuotaStore& store, PacingRules rules, Pacing pacing, Duration phase, MonoTime start) {
  SimOptions o;
  o.phase = phase;
  rules.pacing = pacing;
  o.rules = rules;
  auto k = store.open(std::string(pacing == Pacing::kSmooth ? "smooth-" : "burst-") + std::to_string(phase.count()) +
                      "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  const SimResult r = simulate(store, *k, o, start);
  EXPECT_EQ(r.accepted, o.requests);
  EXPECT_EQ(r.limited, 0);
  EXPECT_LE(r.max_arrivals_per_window, o.limit);
  return r;
}

TEST_P(QuotaStoreConformance, SmoothWorkloadUsesTheQuotaAndNeverExceedsIt) {
  for (const auto phase : {milliseconds{0}, milliseconds{300}, milliseconds{1000}, milliseconds{1700}}) {
    SCOPED_TRACE("phase " + std::to_string(phase.count()) + " ms");
    const SimResult r = run_workload(*store, rules, Pacing::kSmooth, phase, now);
    EXPECT_LE(r.ratio(), 1.05);
    EXPECT_GE(r.ratio(), 0.80);
    now += std::chrono::minutes{1};
  }
}

TEST_P(QuotaStoreConformance, BurstWorkloadFinishesBeforeTheLongRunTime) {
  for (const auto phase : {milliseconds{0}, milliseconds{300}, milliseconds{1000}, milliseconds{1700}}) {
    SCOPED_TRACE("phase " + std::to_string(phase.count()) + " ms");
    const SimResult r = run_workload(*store, rules, Pacing::kBurst, phase, now);
    EXPECT_LT(r.ratio(), 1.0);
    now += std::chrono::minutes{1};
  }
}

// GitHub's style: no window announced, and the reset a Unix second, so the
// window ends up to a second before the stated reset. Smooth pacing spends the
// quota by the earliest end instead of losing up to half of a 2 s window.
TEST_P(QuotaStoreConformance, UnixSecondResetWorkloadUsesTheQuota) {
  for (const auto offset : {milliseconds{0}, milliseconds{250}, milliseconds{500}, milliseconds{900}}) {
    SCOPED_TRACE("offset " + std::to_string(offset.count()) + " ms");
    SimOptions o;
    o.announce_window = false;
    o.reset_unix_second = true;
    o.unix_offset = offset;
    o.rules = rules;
    auto k = store->open("unix-" + std::to_string(offset.count()) + "-" +
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    const SimResult r = simulate(*store, *k, o, now);
    EXPECT_EQ(r.accepted, o.requests);
    EXPECT_EQ(r.limited, 0);
    EXPECT_LE(r.max_arrivals_per_window, o.limit);
    EXPECT_LE(r.ratio(), 1.05);
    now += std::chrono::minutes{1};
  }
}

TEST_P(QuotaStoreConformance, PolicyOnlyWorkloadStaysWithinTheQuota) {
  SimOptions o;
  o.announce_remaining = false;
  o.phase = milliseconds{700};
  o.rules = rules;
  const SimResult r = simulate(*store, *key, o, now);
  EXPECT_EQ(r.accepted, o.requests);
  EXPECT_LE(r.max_arrivals_per_window, o.limit);
  EXPECT_LE(r.ratio(), 1.10);
}

}  // namespace abide::test
