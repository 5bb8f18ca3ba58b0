// abide/planner.h, the invariants of rules 4 and 5 checked as properties over
// seeded, generated inputs.
#include "support/planner_fixture.h"

namespace abide {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using test::ConstRandom;
using test::quota;
using test::config;
using test::decide;
using test::Generated;
using test::generate;

// ---- properties over generated inputs -------------------------------------------------------------

// The longest valid server hint, computed independently of the planner.
std::optional<Duration> expected_hint(const Signals& s, const PlannerConfig& c) {
  std::optional<Duration> h;
  auto take = [&](Duration d) { h = std::max(h.value_or(Duration::zero()), std::max(d, Duration::zero())); };
  if (s.retry_after) {
    take(s.retry_after->wait);
    if (s.retry_after->date) {
      take(*s.retry_after->date - s.received_wall);
      if (s.server_date) take(*s.retry_after->date - *s.server_date);
    }
  }
  for (const auto& q : s.quota) {
    if (q.exhausted() && (q.confidence == Confidence::kHigh || c.use_low_confidence_quota)) take(*q.reset);
  }
  return h;
}

class PlannerProperty : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(PlannerProperty, WaitIsNeverShorterThanAValidServerHintNorTheLocalBackoff) {
  std::mt19937_64 g(GetParam());
  Generated x;
  for (int i = 0; i < 5000; ++i) {
    generate(g, x);
    SeededRandom rng(g());
    const Plan p = Planner(x.config).decide(x.input, rng);
    if (!p.not_before_mono) continue;  // done/not retryable without any hint
    const auto hint = x.input.outcome.signals ? expected_hint(*x.input.outcome.signals, x.config) : std::nullopt;
    if (hint && p.decision != Decision::kDone) {
      ASSERT_GE(p.wait, *hint) << "case " << i;
    }
    if (hint && p.decision == Decision::kDone) {
      ASSERT_GE(*p.not_before_mono, saturating_add(x.signals.received_mono, *hint));
    }
    ASSERT_GE(p.wait, p.backoff) << "case " << i;
    if (p.decision == Decision::kRetry) {
      // And at least the kind's floor, recomputed from the policy.
      ConstRandom zero(0.0);
      const BackoffDraw floor_only = x.config.backoff.draw(std::max<std::int64_t>(x.input.attempt, 1),
                                                           x.input.previous_backoff, zero);
      ASSERT_GE(p.wait, floor_only.floor) << "case " << i;
    }
  }
}

TEST_P(PlannerProperty, JitterIsNeverNegative) {
  std::mt19937_64 g(GetParam() + 1);
  Generated x;
  for (int i = 0; i < 5000; ++i) {
    generate(g, x);
    SeededRandom rng(g());
    const Plan p = Planner(x.config).decide(x.input, rng);
    ASSERT_GE(p.jitter, Duration::zero()) << "case " << i;
    ASSERT_GE(p.wait, Duration::zero()) << "case " << i;
    ASSERT_GE(p.backoff, Duration::zero()) << "case " << i;
    if (p.decision != Decision::kRetry) {
      ASSERT_EQ(p.jitter, Duration::zero());
    }
  }
}

TEST_P(PlannerProperty, HintAboveMaxWaitIsDeferredWithItsTimeNeverARetry) {
  std::mt19937_64 g(GetParam() + 2);
  Generated x;
  int deferred = 0;
  for (int i = 0; i < 5000; ++i) {
    generate(g, x);
    x.input.deadline.reset();  // the deadline is the other reason to stop; leave it out here
    SeededRandom rng(g());
    const Plan p = Planner(x.config).decide(x.input, rng);
    if (!p.server_hint || *p.server_hint <= x.config.max_wait) continue;
    ASSERT_NE(p.decision, Decision::kRetry) << "case " << i;
    if (p.decision == Decision::kDeferred) {
      ++deferred;
      ASSERT_GE(p.wait, *p.server_hint);
      ASSERT_EQ(p.not_before_mono, saturating_add(x.signals.received_mono, p.wait));
      ASSERT_EQ(p.not_before_wall, saturating_add(x.signals.received_wall, p.wait));
    } else {
      // Only a reason that comes first may pre-empt deferral.
      ASSERT_TRUE(p.decision == Decision::kDone || p.decision == Decision::kNotRetryable ||
                  p.decision == Decision::kExhausted)
          << "case " << i << " " << to_string(p.decision);
    }
  }
  EXPECT_GT(deferred, 50);
}

TEST_P(PlannerProperty, RetryNeverEndsAfterTheDeadline) {
  std::mt19937_64 g(GetParam() + 3);
  Generated x;
  int retries_with_deadline = 0;
  for (int i = 0; i < 5000; ++i) {
    generate(g, x);
    SeededRandom rng(g());
    const Plan p = Planner(x.config).decide(x.input, rng);
    const MonoTime received = x.input.outcome.signals ? x.signals.received_mono : x.input.outcome.transport.at_mono;
    if (p.decision == Decision::kRetry) {
      ASSERT_EQ(p.not_before_mono, saturating_add(received, p.wait));
      if (x.input.deadline) {
        ++retries_with_deadline;
        ASSERT_LE(*p.not_before_mono, *x.input.deadline) << "case " << i;
      }
    }
    if (p.decision == Decision::kDeadlineExceeded) {
      ASSERT_GT(*p.not_before_mono, *x.input.deadline);
    }
  }
  EXPECT_GT(retries_with_deadline, 50);
}

INSTANTIATE_TEST_SUITE_P(Seeds, PlannerProperty, ::testing::Values(1u, 20260101u, 0xabcdefu));

}  // namespace
}  // namespace abide
