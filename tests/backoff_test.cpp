// Tests for abide/backoff.h: capped exponential backoff, the four jitter kinds,
// the seeded random source and the retry budget.
#include "abide/backoff.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace abide {
namespace {

using namespace std::chrono_literals;

// Returns the given numbers in turn (the last one forever).
class FixedRandom final : public RandomSource {
 public:
  explicit FixedRandom(std::vector<double> values) : values_(std::move(values)) {}
  double next_unit() noexcept override {
    ++calls;
    const double v = values_[std::min(i_, values_.size() - 1)];
    ++i_;
    return v;
  }
  int calls = 0;

 private:
  std::vector<double> values_;
  std::size_t i_ = 0;
};

// ---- exponential_backoff ----------------------------------------------------

TEST(ExponentialBackoff, DoublesFromBaseAtTheFirstAttempt) {
  EXPECT_EQ(exponential_backoff(1s, 60s, 1), 1s);
  EXPECT_EQ(exponential_backoff(1s, 60s, 2), 2s);
  EXPECT_EQ(exponential_backoff(1s, 60s, 3), 4s);
  EXPECT_EQ(exponential_backoff(1s, 60s, 6), 32s);
  EXPECT_EQ(exponential_backoff(250ms, 60s, 4), 2s);
}

TEST(ExponentialBackoff, CapsAtTheMaximum) {
  EXPECT_EQ(exponential_backoff(1s, 60s, 7), 60s);  // 64 s capped
  EXPECT_EQ(exponential_backoff(1s, 60s, 50), 60s);
  EXPECT_EQ(exponential_backoff(1s, 64s, 7), 64s);  // exactly the cap
  EXPECT_EQ(exponential_backoff(10s, 5s, 1), 5s);   // base above the cap
}

TEST(ExponentialBackoff, HugeAttemptNumbersSaturateInsteadOfOverflowing) {
  for (std::int64_t attempt : {std::int64_t{62}, std::int64_t{63}, std::int64_t{64}, std::int64_t{65},
                               std::int64_t{1000}, std::numeric_limits<std::int64_t>::max()}) {
    EXPECT_EQ(exponential_backoff(1ns, 60s, attempt), 60s) << attempt;
    EXPECT_EQ(exponential_backoff(1s, Duration::max(), attempt), Duration::max()) << attempt;
  }
  // Near the top of the range: one doubling fits, the next does not.
  const Duration half = Duration{Duration::max().count() / 2};
  EXPECT_EQ(exponential_backoff(half, Duration::max(), 2), Duration{half.count() * 2});
  EXPECT_EQ(exponential_backoff(half, Duration::max(), 3), Duration::max());
}

TEST(ExponentialBackoff, OddInputsAreSafe) {
  EXPECT_EQ(exponential_backoff(1s, 60s, 0), 1s);
  EXPECT_EQ(exponential_backoff(1s, 60s, -5), 1s);
  EXPECT_EQ(exponential_backoff(std::numeric_limits<std::int64_t>::min() * 1ns, 60s, 3), 0s);
  EXPECT_EQ(exponential_backoff(0s, 60s, 3), 0s);
  EXPECT_EQ(exponential_backoff(1s, -1s, 3), 0s);
}

// ---- jitter kinds -------------------------------------------------------------

TEST(Jitter, NamesRoundTrip) {
  for (Jitter j : {Jitter::kNone, Jitter::kFull, Jitter::kEqual, Jitter::kDecorrelated}) {
    EXPECT_EQ(parse_jitter(to_string(j)), j);
  }
  EXPECT_FALSE(parse_jitter("Full").has_value());
  EXPECT_FALSE(parse_jitter("").has_value());
}

TEST(Jitter, NoneIsTheBackoffItselfAndDrawsNothing) {
  FixedRandom rng({0.7});
  const BackoffDraw d = BackoffPolicy(1s, 60s, Jitter::kNone).draw(3, std::nullopt, rng);
  EXPECT_EQ(d.floor, 4s);
  EXPECT_EQ(d.jitter, 0s);
  EXPECT_EQ(d.total(), 4s);
  EXPECT_EQ(d.nominal, 4s);
  EXPECT_EQ(rng.calls, 0);
}

TEST(Jitter, FullIsUniformFromZeroToTheBackoff) {
  const BackoffPolicy p(1s, 60s, Jitter::kFull);
  FixedRandom zero({0.0}), half({0.5}), top({0.75});
  EXPECT_EQ(p.draw(3, std::nullopt, zero).total(), 0s);
  EXPECT_EQ(p.draw(3, std::nullopt, half).total(), 2s);
  const BackoffDraw d = p.draw(3, std::nullopt, top);
  EXPECT_EQ(d.floor, 0s);
  EXPECT_EQ(d.jitter, 3s);
  EXPECT_EQ(d.nominal, 4s);
}

TEST(Jitter, EqualKeepsHalfAndRandomisesTheOtherHalf) {
  const BackoffPolicy p(1s, 60s, Jitter::kEqual);
  FixedRandom zero({0.0}), half({0.5});
  EXPECT_EQ(p.draw(3, std::nullopt, zero).total(), 2s);
  const BackoffDraw d = p.draw(3, std::nullopt, half);
  EXPECT_EQ(d.floor, 2s);
  EXPECT_EQ(d.jitter, 1s);
}

TEST(Jitter, DecorrelatedGrowsFromThePreviousSleep) {
  const BackoffPolicy p(1s, 60s, Jitter::kDecorrelated);
  FixedRandom half({0.5});
  // uniform(base, 3 * previous) = uniform(1 s, 30 s): the midpoint is 15.5 s.
  BackoffDraw d = p.draw(2, 10s, half);
  EXPECT_EQ(d.floor, 1s);
  EXPECT_EQ(d.total(), 15500ms);
  // Without a previous sleep: attempt 1 grows from base (uniform(1 s, 3 s)).
  FixedRandom one({1.0});
  EXPECT_EQ(p.draw(1, std::nullopt, one).total(), 3s);
  // ... attempt 4 from the nominal backoff of attempt 3 (4 s): uniform(1 s, 12 s).
  FixedRandom one2({1.0});
  EXPECT_EQ(p.draw(4, std::nullopt, one2).total(), 12s);
}

TEST(Jitter, DecorrelatedIsCapped) {
  const BackoffPolicy p(1s, 20s, Jitter::kDecorrelated);
  FixedRandom one({1.0});
  EXPECT_EQ(p.draw(2, 100s, one).total(), 20s);
  FixedRandom one2({1.0});
  EXPECT_EQ(p.draw(2, Duration::max(), one2).total(), 20s);  // 3 * previous saturates
  // A cap below base: the cap wins, even as the floor.
  FixedRandom one3({1.0});
  const BackoffDraw d = BackoffPolicy(10s, 2s, Jitter::kDecorrelated).draw(1, std::nullopt, one3);
  EXPECT_EQ(d.floor, 2s);
  EXPECT_EQ(d.total(), 2s);
}

TEST(Jitter, OutOfRangeRandomNumbersAreClamped) {
  for (Jitter j : {Jitter::kFull, Jitter::kEqual, Jitter::kDecorrelated}) {
    const BackoffPolicy p(1s, 60s, j);
    for (double u :
         {-1.0, 2.0, std::nan(""), std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()}) {
      FixedRandom rng({u});
      const BackoffDraw d = p.draw(3, std::nullopt, rng);
      EXPECT_GE(d.jitter, 0s) << to_string(j) << " " << u;
      EXPECT_LE(d.total(), 60s) << to_string(j) << " " << u;
    }
  }
}

// Property: over many seeded draws, every kind stays within [floor, cap],
// jitter is never negative, and the total is what the kind's definition allows.
TEST(Jitter, PropertyEveryDrawStaysInItsRange) {
  std::mt19937_64 gen(20260101);
  SeededRandom rng(7);
  std::uniform_int_distribution<std::int64_t> ns(0, std::int64_t{1} << 50);
  std::uniform_int_distribution<std::int64_t> att(-3, 200);
  for (int i = 0; i < 20000; ++i) {
    const Duration base{ns(gen)};
    const Duration cap{ns(gen)};
    const Jitter kind = static_cast<Jitter>(i % 4);
    const BackoffPolicy p(base, cap, kind);
    const std::int64_t attempt = att(gen);
    const std::optional<Duration> prev = (i % 3 == 0) ? std::optional<Duration>{}
                                                      : std::optional<Duration>{Duration{ns(gen)}};
    const BackoffDraw d = p.draw(attempt, prev, rng);
    const Duration b = p.nominal(attempt);
    ASSERT_GE(d.jitter, 0s);
    ASSERT_GE(d.floor, 0s);
    ASSERT_LE(d.total(), cap) << i;
    ASSERT_LE(b, cap);
    switch (kind) {
      case Jitter::kNone: ASSERT_EQ(d.total(), b); break;
      case Jitter::kFull: ASSERT_LE(d.total(), b); break;
      case Jitter::kEqual:
        ASSERT_GE(d.total(), b / 2);
        ASSERT_LE(d.total(), b);
        break;
      case Jitter::kDecorrelated: ASSERT_GE(d.total(), std::min(base, cap)); break;
    }
  }
}

// ---- SeededRandom -------------------------------------------------------------

TEST(SeededRandom, SameSeedSameSequence) {
  SeededRandom a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const double x = a.next_unit();
    EXPECT_EQ(x, b.next_unit());
    if (x != c.next_unit()) differs = true;
  }
  EXPECT_TRUE(differs);
}

TEST(SeededRandom, KnownFirstOutputIsPortable) {
  // SplitMix64 from seed 0: the reference sequence begins 0xE220A8397B1DCDAF.
  SeededRandom r(0);
  EXPECT_EQ(r.next_u64(), 0xE220A8397B1DCDAFULL);
}

TEST(SeededRandom, UniformInUnitInterval) {
  SeededRandom r(1);
  double sum = 0;
  constexpr int kN = 100000;
  for (int i = 0; i < kN; ++i) {
    const double u = r.next_unit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / kN, 0.5, 0.01);
}

TEST(SeededRandom, SharedByThreadsEveryDrawIsDistinct) {
  SeededRandom r(9);
  constexpr int kThreads = 4, kEach = 5000;
  std::vector<std::vector<std::uint64_t>> got(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) got[static_cast<std::size_t>(t)].push_back(r.next_u64());
    });
  }
  for (auto& t : ts) t.join();
  std::set<std::uint64_t> all;
  for (const auto& g : got) all.insert(g.begin(), g.end());
  EXPECT_EQ(all.size(), static_cast<std::size_t>(kThreads * kEach));
}

// ---- RetryBudget ----------------------------------------------------------------

TEST(RetryBudget, AFailingDependencyGetsOnlyHalfTheBucketInRetries) {
  RetryBudget b(10, 0.1);
  EXPECT_DOUBLE_EQ(b.tokens(), 10.0);
  int allowed = 0;
  for (int i = 0; i < 100; ++i) allowed += b.try_spend() ? 1 : 0;
  EXPECT_EQ(allowed, 5);
  EXPECT_FALSE(b.can_retry());
  EXPECT_DOUBLE_EQ(b.tokens(), 5.0);
}

TEST(RetryBudget, SuccessesEarnRetriesBack) {
  RetryBudget b(10, 0.1);
  while (b.try_spend()) {
  }
  b.on_success();  // 5.1 > 5: one more retry
  EXPECT_TRUE(b.can_retry());
  EXPECT_TRUE(b.try_spend());
  EXPECT_FALSE(b.try_spend());
  // About one retry per ten successes from here on.
  int allowed = 0;
  for (int i = 0; i < 100; ++i) {
    b.on_success();
    allowed += b.try_spend() ? 1 : 0;
  }
  EXPECT_GE(allowed, 9);
  EXPECT_LE(allowed, 11);
}

TEST(RetryBudget, NeverEarnsAboveTheMaximum) {
  RetryBudget b(3, 1);
  for (int i = 0; i < 100; ++i) b.on_success();
  EXPECT_DOUBLE_EQ(b.tokens(), 3.0);
  EXPECT_DOUBLE_EQ(b.max_tokens(), 3.0);
}

TEST(RetryBudget, ClampsNonsenseParameters) {
  RetryBudget nan_budget(std::nan(""), std::nan(""));
  EXPECT_DOUBLE_EQ(nan_budget.max_tokens(), 1.0);
  EXPECT_TRUE(nan_budget.try_spend());  // 1 > 0.5
  EXPECT_FALSE(nan_budget.try_spend());
  EXPECT_GE(nan_budget.tokens(), 0.0);
  RetryBudget odd(1.5, 0.1);  // a spend from 1.5 lands at 0.5, never below zero
  EXPECT_TRUE(odd.try_spend());
  EXPECT_FALSE(odd.try_spend());
  EXPECT_DOUBLE_EQ(odd.tokens(), 0.5);
}

TEST(RetryBudget, ConcurrentSpendersNeverOverspend) {
  RetryBudget b(1000, 0.1);
  std::atomic<int> allowed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        if (b.try_spend()) allowed.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(allowed.load(), 500);
}

}  // namespace
}  // namespace abide
