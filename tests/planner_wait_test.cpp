// abide/planner.h, the wait: rule 4, the worked example of rule 5, the
// maximum acceptable wait, rule 2 (malformed is not zero) and rule 3 (dates
// and skew). Every "must hold" item of issue 5 is a named test.
#include "support/planner_fixture.h"

namespace abide {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using test::kWall;
using test::kMono;
using test::ConstRandom;
using test::response;
using test::with_delay;
using test::config;
using test::decide;

// ---- rule 4: the wait -------------------------------------------------------------

TEST(Planner, RetryAfterSetsTheWaitWhenLongerThanTheBackoff) {
  const Signals s = with_delay(429, 30s);
  PlanInput in(s);
  in.attempt = 2;
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.basis, Basis::kRetryAfter);
  EXPECT_EQ(p.wait, 30s);
  EXPECT_EQ(p.server_hint, 30s);
  EXPECT_EQ(p.retry_after, 30s);
  EXPECT_EQ(p.backoff, 2s);
  EXPECT_EQ(p.not_before_wall, kWall + 30s);
  EXPECT_EQ(p.not_before_mono, kMono + 30s);
}

TEST(Planner, WaitIsNeverShorterThanTheLocalBackoff) {
  const Signals s = with_delay(503, 1s);
  PlanInput in(s);
  in.attempt = 4;  // backoff 8 s
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.basis, Basis::kBackoff);
  EXPECT_EQ(p.wait, 8s);
  EXPECT_EQ(p.server_hint, 1s);
}

TEST(Planner, JitterIsAddedOnTopOfTheServerHint) {
  const Signals s = with_delay(429, 30s);
  PlanInput in(s);
  in.attempt = 4;  // nominal 8 s, full jitter: uniform(0, 8 s)
  const Plan p = decide(config(Jitter::kFull), in, 0.25);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.jitter, 2s);
  EXPECT_EQ(p.wait, 32s);
  EXPECT_GE(p.wait, *p.server_hint);
}

TEST(Planner, CapAppliesToTheLocalBackoffOnlyNeverToAServerHint) {
  const Signals s = with_delay(429, 600s);
  PlanInput in(s);
  in.attempt = 30;
  in.max_attempts = 100;
  const Plan p = decide(config(Jitter::kNone, 1s, 60s), in);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.backoff, 60s);  // capped
  EXPECT_EQ(p.wait, 600s);    // the hint is not
  EXPECT_EQ(p.basis, Basis::kRetryAfter);
}

TEST(Planner, NoSignalsAt429FallsBackToBackoff) {
  const Signals s = response(429);
  PlanInput in(s);
  in.attempt = 3;
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.basis, Basis::kBackoff);
  EXPECT_EQ(p.wait, 4s);
  EXPECT_FALSE(p.server_hint.has_value());
}

// ---- the worked example (rule 5) -----------------------------------------------------

TEST(Planner, WorkedExampleServerAsks30sBackoff8s12sLeftIsDeadlineExceededAt30s) {
  const Signals s = with_delay(429, 30s);
  PlanInput in(s);
  in.attempt = 4;  // local backoff 8 s
  in.deadline = kMono + 12s;
  for (Jitter j : {Jitter::kNone, Jitter::kFull, Jitter::kEqual, Jitter::kDecorrelated}) {
    const Plan p = decide(config(j), in);
    EXPECT_EQ(p.decision, Decision::kDeadlineExceeded) << to_string(j);
    EXPECT_EQ(p.not_before_mono, kMono + 30s) << to_string(j);
    EXPECT_EQ(p.not_before_wall, kWall + 30s) << to_string(j);
    EXPECT_EQ(p.wait, 30s);
    EXPECT_EQ(p.time_left, 12s);
    EXPECT_NE(p.wait, 12s);
  }
}

TEST(Planner, DeadlineAlreadyPassedIsDeadlineExceeded) {
  const Signals s = response(503);
  PlanInput in(s);
  in.deadline = kMono - 1s;
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kDeadlineExceeded);
  EXPECT_EQ(p.time_left, -1s);
  EXPECT_EQ(p.not_before_mono, kMono + 1s);
}

TEST(Planner, JitterIsShortenedSoTheRetryEndsByTheDeadline) {
  const Signals s = with_delay(429, 10s);
  PlanInput in(s);
  in.attempt = 4;  // full jitter up to 8 s
  in.deadline = kMono + 12s;
  const Plan p = decide(config(Jitter::kFull), in, 0.9);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.wait, 12s);
  EXPECT_EQ(p.jitter, 2s);
  EXPECT_TRUE(p.notes.has(PlanNote::kJitterShortened));
  EXPECT_LE(*p.not_before_mono, *in.deadline);
}

TEST(Planner, RetryEndingExactlyAtTheDeadlineIsAllowed) {
  const Signals s = with_delay(429, 12s);
  PlanInput in(s);
  in.deadline = kMono + 12s;
  EXPECT_EQ(decide(config(), in).decision, Decision::kRetry);
}

// ---- maximum acceptable wait ------------------------------------------------------------

TEST(Planner, HintAboveMaxWaitIsDeferredWithItsTimeNeverAShorterWait) {
  const Signals s = with_delay(429, 3600s);
  PlanInput in(s);
  PlannerConfig c = config(Jitter::kFull);
  c.max_wait = 5min;
  const Plan p = decide(c, in);
  EXPECT_EQ(p.decision, Decision::kDeferred);
  EXPECT_EQ(p.reason, Reason::kHintTooLong);
  EXPECT_EQ(p.wait, 3600s);
  EXPECT_EQ(p.not_before_wall, kWall + 3600s);
  EXPECT_EQ(p.not_before_mono, kMono + 3600s);
}

TEST(Planner, MaxWaitDoesNotDeferALongLocalBackoff) {
  const Signals s = response(503);
  PlanInput in(s);
  in.attempt = 8;
  in.max_attempts = 10;
  PlannerConfig c = config(Jitter::kNone, 1s, 600s);
  c.max_wait = 30s;
  const Plan p = decide(c, in);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.wait, 128s);
}

TEST(Planner, EnormousHintSaturatesAndIsDeferredNeverWrapped) {
  const Signals s = with_delay(429, kMaxDuration);
  PlanInput in(s);
  PlannerConfig c = config(Jitter::kFull);
  c.max_wait = 1h;
  const Plan p = decide(c, in);
  EXPECT_EQ(p.decision, Decision::kDeferred);
  EXPECT_EQ(p.wait, kMaxDuration);
  EXPECT_EQ(p.not_before_mono, MonoTime::max());
  EXPECT_EQ(p.not_before_wall, WallTime::max());
}

// ---- rule 2: malformed is not zero -----------------------------------------------------

TEST(Planner, MalformedRetryAfterGivesBackoffPlusAWarningNeverZero) {
  Signals s = response(429);
  s.retry_after_rejected = true;
  s.warnings.push_back("Retry-After: \"soon\" is not a delay or a date");
  PlanInput in(s);
  in.attempt = 2;
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.basis, Basis::kBackoff);
  EXPECT_EQ(p.wait, 2s);
  EXPECT_GT(p.wait, 0s);
  EXPECT_FALSE(p.server_hint.has_value());
  EXPECT_TRUE(p.notes.has(PlanNote::kRetryAfterMalformed));
  EXPECT_THAT(notes_text(p.notes), testing::Contains(HasSubstr("malformed")));
}

TEST(Planner, MalformedRetryAfterWithFullJitterStillWaitsAtLeastTheBackoffFloor) {
  Signals s = response(503);
  s.retry_after_rejected = true;
  PlanInput in(s);
  in.attempt = 3;
  const Plan p = decide(config(Jitter::kEqual), in, 0.0);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.wait, 2s);  // equal jitter: half of 4 s at least
}

TEST(Planner, MalformedRetryAfterWithTheDefaultConfigIsNeverZeroEvenAtTheLowestDraw) {
  Signals s = response(429);
  s.retry_after_rejected = true;
  ConstRandom lowest(0.0);
  const Plan p = Planner().decide(PlanInput(s), lowest);  // defaults: 1 s base, equal jitter
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.wait, 500ms);
  EXPECT_EQ(p.backoff, 500ms);
}

// ---- rule 3: dates and skew --------------------------------------------------------------

Signals with_date(int status, WallTime date, std::optional<WallTime> server_date) {
  Signals s = response(status);
  RetryHint h{RetryHint::Kind::kDate, Duration::zero(), date, "retry-after"};
  h.wait = std::max(Duration::zero(), date - kWall);
  if (server_date) {
    h.wait = std::max(h.wait, date - *server_date);
    s.server_date = server_date;
    s.clock_skew = *server_date - kWall;
  }
  s.retry_after = h;
  return s;
}

TEST(Planner, PastDateGivesZeroHintButTheBackoffStillApplies) {
  const Signals s = with_date(503, kWall - 10min, std::nullopt);
  PlanInput in(s);
  in.attempt = 3;
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.server_hint, 0s);
  EXPECT_EQ(p.wait, 4s);
  EXPECT_EQ(p.basis, Basis::kBackoff);
  EXPECT_TRUE(p.notes.has(PlanNote::kRetryAfterInPast));
}

TEST(Planner, SkewServerBehindCountsFromTheServerDate) {
  // The server's clock is 20 s behind ours; it says "retry at its 12:00:30",
  // which is 10 s from receipt by our clock but 30 s by its own: 30 s it is.
  const WallTime server_now = kWall - 20s;
  const Signals s = with_date(503, server_now + 30s, server_now);
  PlanInput in(s);
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.server_hint, 30s);
  EXPECT_EQ(p.wait, 30s);
  EXPECT_EQ(p.clock_skew, -20s);
  EXPECT_TRUE(p.notes.has(PlanNote::kSkewLengthened));
}

TEST(Planner, SkewServerAheadCountsFromTheLocalReceiveTime) {
  // The server is 20 s ahead: its date is 30 s after its Date, 50 s after our receipt.
  const WallTime server_now = kWall + 20s;
  const Signals s = with_date(503, server_now + 30s, server_now);
  const Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.server_hint, 50s);
  EXPECT_EQ(p.clock_skew, 20s);
  EXPECT_FALSE(p.notes.has(PlanNote::kSkewLengthened));
}

TEST(Planner, SkewRuleHoldsEvenWhenTheHintWasResolvedWithoutIt) {
  // A hand-built hint whose wait ignored the server Date: the planner applies rule 3 itself.
  const WallTime server_now = kWall - 20s;
  Signals s = with_date(503, server_now + 30s, server_now);
  s.retry_after->wait = 10s;  // date - local receipt only
  const Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.server_hint, 30s);
}

TEST(Planner, WaitRunsOnTheMonotonicClockFromReceipt) {
  // A wall-clock jump after receipt cannot change the plan: both permitted
  // times count from the receive instants in Signals.
  Signals s = with_delay(429, 30s);
  s.received_wall = kWall + 1h;  // the wall clock had jumped
  const Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.not_before_mono, kMono + 30s);
  EXPECT_EQ(p.not_before_wall, kWall + 1h + 30s);
}

}  // namespace
}  // namespace abide
