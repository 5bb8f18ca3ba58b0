// Tests for abide/planner.h: every "must hold" item of issue 5 is a named test
// here, and the invariants of rules 4 and 5 are also checked as properties over
// seeded, generated inputs. Signals are built by hand: the planner's input is
// the normalized view, whoever produced it.
#include "abide/planner.h"
#include "duration_text.h"
#include "planner_internal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <type_traits>

#include <random>
#include <set>
#include <thread>

namespace abide {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

const WallTime kWall{std::chrono::seconds{1767225600}};  // 2026-01-01T00:00:00Z
const MonoTime kMono{std::chrono::hours{1000}};

// Returns the same number every time.
class ConstRandom final : public RandomSource {
 public:
  explicit ConstRandom(double v) : v_(v) {}
  double next_unit() noexcept override { return v_; }

 private:
  double v_;
};

Signals response(int status) {
  Signals s;
  s.status = status;
  s.received_wall = kWall;
  s.received_mono = kMono;
  s.limited = status == 429;
  return s;
}

Signals with_delay(int status, Duration d) {
  Signals s = response(status);
  s.retry_after = RetryHint{RetryHint::Kind::kDelay, d, std::nullopt, "retry-after"};
  return s;
}

QuotaObservation quota(std::int64_t remaining, std::optional<Duration> reset,
                       QuotaSource source = QuotaSource::kDraft08) {
  QuotaObservation q;
  q.policy = "default";
  q.limit = 100;
  q.remaining = remaining;
  q.reset = reset;
  q.window = 60s;
  q.source = source;
  return q;
}

// A vendor quota, read through the named profile.
QuotaObservation quota(std::int64_t remaining, std::optional<Duration> reset, const char* profile) {
  QuotaObservation q = quota(remaining, reset, QuotaSource::kVendor);
  q.profile = profile;
  return q;
}

PlannerConfig config(Jitter jitter = Jitter::kNone, Duration base = 1s, Duration cap = 60s) {
  PlannerConfig c;
  c.backoff = BackoffPolicy(base, cap, jitter);
  return c;
}

Plan decide(const PlannerConfig& c, const PlanInput& in, double u = 0.5) {
  ConstRandom rng(u);
  return Planner(c).decide(in, rng);
}

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

// ---- rule 8: quota ------------------------------------------------------------------------

TEST(Planner, RateLimitQuotaAtZeroBoundsTheWaitWithoutRetryAfter) {
  Signals s = response(429);
  s.quota.push_back(quota(0, 42s, QuotaSource::kDraft08));
  const Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.basis, Basis::kRateLimit);
  EXPECT_EQ(p.wait, 42s);
  EXPECT_EQ(p.quota_wait, 42s);
  EXPECT_EQ(p.quota_index, 0u);
}

TEST(Planner, VendorQuotaAtZeroBoundsTheWaitOnALimited403) {
  // GitHub answers 403 with x-ratelimit-remaining: 0; its profile marks it limited.
  Signals s = response(403);
  s.limited = true;
  s.profile = "github";
  s.quota.push_back(quota(0, 1800s, "github"));
  const Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.basis, Basis::kVendor);
  EXPECT_EQ(p.wait, 1800s);
}

TEST(Planner, QuotaWithRoomLeftNeverShortensRetryAfter) {
  Signals s = with_delay(429, 30s);
  s.quota.push_back(quota(99, 1s, QuotaSource::kDraft08));
  s.quota.push_back(quota(5000, 0s, "github"));
  const Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.wait, 30s);
  EXPECT_EQ(p.basis, Basis::kRetryAfter);
  EXPECT_FALSE(p.quota_wait.has_value());
  EXPECT_TRUE(p.notes.has(PlanNote::kQuotaRoomIgnored));
}

TEST(Planner, ExhaustedQuotaOutlastingRetryAfterWins) {
  Signals s = with_delay(429, 10s);
  s.quota.push_back(quota(0, 60s, QuotaSource::kDraft08));
  const Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.wait, 60s);
  EXPECT_EQ(p.basis, Basis::kRateLimit);
  EXPECT_EQ(p.retry_after, 10s);
  EXPECT_TRUE(p.notes.has(PlanNote::kQuotaOutlastsRetryAfter));
}

TEST(Planner, RetryAfterWinsATieWithAQuota) {
  Signals s = with_delay(429, 30s);
  s.quota.push_back(quota(0, 30s, QuotaSource::kDraft08));
  EXPECT_EQ(decide(config(), PlanInput(s)).basis, Basis::kRetryAfter);
}

TEST(Planner, TheLongestExhaustedQuotaWins) {
  Signals s = response(429);
  s.quota.push_back(quota(0, 10s, QuotaSource::kDraft08));
  s.quota.push_back(quota(0, 90s, "openai"));
  s.quota.push_back(quota(3, 500s, "openai"));  // room left: no bound
  const Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.wait, 90s);
  EXPECT_EQ(p.quota_index, 1u);
  EXPECT_EQ(p.basis, Basis::kVendor);
}

TEST(Planner, QuotaAtZeroWithoutResetCannotBoundTheWait) {
  Signals s = response(429);
  s.quota.push_back(quota(0, std::nullopt));
  const Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.basis, Basis::kBackoff);
  EXPECT_EQ(p.wait, 1s);
  EXPECT_TRUE(p.notes.has(PlanNote::kQuotaZeroWithoutReset));
}

TEST(Planner, LowConfidenceQuotaIsReportedNotUsedUnlessEnabled) {
  Signals s = response(429);
  QuotaObservation q = quota(0, 300s, QuotaSource::kHeuristic);
  q.confidence = Confidence::kLow;
  s.quota.push_back(q);
  Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.wait, 1s);
  EXPECT_TRUE(p.notes.has(PlanNote::kLowConfidenceQuotaIgnored));
  PlannerConfig c = config();
  c.use_low_confidence_quota = true;
  p = decide(c, PlanInput(s));
  EXPECT_EQ(p.wait, 300s);
}

TEST(Planner, QuotaBasisNamesTheDraftFormsAsRateLimit) {
  for (QuotaSource src : {QuotaSource::kDraft03, QuotaSource::kDraft06, QuotaSource::kDraft07, QuotaSource::kDraft08,
                          QuotaSource::kDraft12Provisional, QuotaSource::kDraftPolli00}) {
    EXPECT_TRUE(is_ietf_draft(src)) << to_string(src);
    EXPECT_EQ(quota_basis(quota(0, 1s, src)), Basis::kRateLimit) << to_string(src);
  }
  for (QuotaSource src : {QuotaSource::kVendor, QuotaSource::kHeuristic, QuotaSource::kUnknown}) {
    EXPECT_FALSE(is_ietf_draft(src)) << to_string(src);
    EXPECT_EQ(quota_basis(quota(0, 1s, src)), Basis::kVendor) << to_string(src);
  }
  // A profile named like a draft is still a vendor: the enum decides, not the name.
  QuotaObservation q = quota(0, 1s, QuotaSource::kVendor);
  q.profile = "draft-08";
  EXPECT_EQ(quota_basis(q), Basis::kVendor);
}

// ---- rule 7: permission and idempotency ---------------------------------------------------

TEST(Planner, PostWithoutIdempotencyKeyIsNotRetryableWithThePermittedTimeReported) {
  for (const char* method : {"POST", "PATCH", "post"}) {
    const Signals s = with_delay(429, 30s);
    PlanInput in(s);
    in.method = method;
    const Plan p = decide(config(), in);
    EXPECT_EQ(p.decision, Decision::kNotRetryable) << method;
    EXPECT_EQ(p.reason, Reason::kNotIdempotent);
    EXPECT_FALSE(p.ambiguous);
    EXPECT_EQ(p.not_before_wall, kWall + 30s);
    EXPECT_EQ(p.not_before_mono, kMono + 30s);
  }
}

TEST(Planner, PostWithIdempotencyKeyIsRetried) {
  const Signals s = with_delay(503, 30s);
  PlanInput in(s);
  in.method = "POST";
  in.idempotency_key = true;
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.wait, 30s);
}

TEST(Planner, MethodsDeclaredNonIdempotentAreNotRetried) {
  const Signals s = with_delay(503, 5s);
  PlanInput in(s);
  in.method = "LOCK";
  EXPECT_EQ(decide(config(), in).decision, Decision::kRetry);
  PlannerConfig c = config();
  c.non_idempotent_methods.push_back("LOCK");
  EXPECT_EQ(decide(c, in).decision, Decision::kNotRetryable);
  in.method = "GET";
  in.declared_non_idempotent = true;
  EXPECT_EQ(decide(config(), in).decision, Decision::kNotRetryable);
}

TEST(Planner, TransportErrorAfterSendingNonIdempotentIsNotRetryableAndAmbiguous) {
  const TransportError e{true, kWall, kMono};
  PlanInput in(e);
  in.method = "POST";
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kNotRetryable);
  EXPECT_EQ(p.reason, Reason::kAmbiguous);
  EXPECT_TRUE(p.ambiguous);
  EXPECT_EQ(p.status, 0);
  EXPECT_TRUE(p.not_before_mono.has_value());
  EXPECT_THAT(Planner(config()).describe(p, in), HasSubstr("reconcile"));
}

TEST(Planner, TransportErrorAfterSendingWithIdempotencyKeyIsRetriedButStillAmbiguous) {
  PlanInput in(TransportError{true, kWall, kMono});
  in.method = "POST";
  in.idempotency_key = true;
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_TRUE(p.ambiguous);
}

TEST(Planner, ConnectionFailedBeforeSendingIsRetryableForEveryMethod) {
  for (const char* method : {"GET", "HEAD", "PUT", "DELETE", "POST", "PATCH", "LOCK"}) {
    PlanInput in(TransportError{false, kWall, kMono});
    in.method = method;
    in.attempt = 2;
    const Plan p = decide(config(), in);
    EXPECT_EQ(p.decision, Decision::kRetry) << method;
    EXPECT_FALSE(p.ambiguous) << method;
    EXPECT_EQ(p.basis, Basis::kBackoff);
    EXPECT_EQ(p.wait, 2s);
    EXPECT_EQ(p.not_before_mono, kMono + 2s);
  }
}

TEST(Planner, TransportErrorAfterSendingIdempotentIsRetried) {
  PlanInput in(TransportError{true, kWall, kMono});
  in.method = "PUT";
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_FALSE(p.ambiguous);
}

// ---- statuses -------------------------------------------------------------------------------

TEST(Planner, SuccessIsDoneAndItsQuotaIsStillReported) {
  Signals s = response(200);
  s.quota.push_back(quota(0, 45s, QuotaSource::kDraft08));
  const Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.decision, Decision::kDone);
  EXPECT_EQ(p.reason, Reason::kSucceeded);
  EXPECT_EQ(p.quota_wait, 45s);
  EXPECT_EQ(p.quota_index, 0u);
  EXPECT_EQ(p.not_before_wall, kWall + 45s);
  EXPECT_EQ(p.wait, 0s);
  EXPECT_EQ(p.basis, Basis::kRateLimit);
}

TEST(Planner, SuccessWithoutHintsHasNoPermittedTime) {
  const Signals s = response(204);
  const Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.decision, Decision::kDone);
  EXPECT_FALSE(p.not_before_wall.has_value());
  EXPECT_EQ(p.basis, Basis::kNone);
}

// An Outcome keeps a pointer to its Signals: it takes no temporary, so
// `PlanInput in = observe(...);` does not compile instead of dangling.
TEST(Planner, AnOutcomeTakesNoTemporarySignals) {
  static_assert(std::is_constructible_v<Outcome, const Signals&>);
  static_assert(!std::is_constructible_v<Outcome, Signals&&>);
  static_assert(!std::is_convertible_v<Signals&&, PlanInput>);
  SUCCEED();
}

TEST(Planner, Other4xxAreNotRetryable) {
  for (int status : {400, 401, 403, 404, 409, 410, 422}) {
    const Signals s = response(status);
    const Plan p = decide(config(), PlanInput(s));
    EXPECT_EQ(p.decision, Decision::kNotRetryable) << status;
    EXPECT_EQ(p.reason, Reason::kStatusNotRetryable);
    EXPECT_FALSE(p.not_before_wall.has_value());
  }
}

TEST(Planner, DefaultRetryableStatusesAreRetried) {
  for (int status : {408, 429, 500, 502, 503, 504}) {
    Signals s = response(status);
    s.limited = false;
    EXPECT_EQ(decide(config(), PlanInput(s)).decision, Decision::kRetry) << status;
  }
  const Signals not_implemented = response(501);
  EXPECT_EQ(decide(config(), PlanInput(not_implemented)).decision, Decision::kNotRetryable);
}

TEST(Planner, RetryableStatusesAreConfigurable) {
  PlannerConfig c = config();
  c.retryable_statuses.add(529);
  c.retryable_statuses.remove(500);
  const Signals overloaded = response(529);
  const Signals internal = response(500);
  EXPECT_EQ(decide(c, PlanInput(overloaded)).decision, Decision::kRetry);
  EXPECT_EQ(decide(c, PlanInput(internal)).decision, Decision::kNotRetryable);
}

TEST(Planner, NotRetryableStatusStillReportsTheServerHint) {
  const Signals s = with_delay(501, 120s);
  const Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.decision, Decision::kNotRetryable);
  EXPECT_EQ(p.not_before_wall, kWall + 120s);
  EXPECT_EQ(p.basis, Basis::kRetryAfter);
}

TEST(Planner, RedirectWithRetryAfterIsDoneWithItsTime) {
  const Signals s = with_delay(301, 10s);
  const Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.decision, Decision::kDone);
  EXPECT_EQ(p.reason, Reason::kNotAFailure);
  EXPECT_EQ(p.not_before_mono, kMono + 10s);
}

// ---- attempts and budget ----------------------------------------------------------------------

TEST(Planner, LastAttemptIsExhaustedWithThePermittedTime) {
  const Signals s = with_delay(429, 30s);
  PlanInput in(s);
  in.attempt = 3;
  in.max_attempts = 3;
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kExhausted);
  EXPECT_EQ(p.reason, Reason::kAttemptsExhausted);
  EXPECT_EQ(p.not_before_wall, kWall + 30s);
  EXPECT_EQ(p.not_before_mono, kMono + 30s);
}

TEST(Planner, NonsenseAttemptNumbersAreSafe) {
  const Signals s = response(503);
  PlanInput in(s);
  in.attempt = -7;
  in.max_attempts = 0;  // counts as 1: no retry
  EXPECT_EQ(decide(config(), in).decision, Decision::kExhausted);
  in.attempt = std::numeric_limits<std::int64_t>::max() - 1;
  in.max_attempts = std::numeric_limits<std::int64_t>::max();
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.wait, 60s);  // the cap
}

TEST(Planner, EmptyRetryBudgetStopsRetriesWithAClearReason) {
  PlannerConfig c = config();
  c.budget = std::make_shared<RetryBudget>(4, 0.5);  // two retries, then none
  const Planner planner(c);
  const Signals s = response(503);
  ConstRandom rng(0.5);
  EXPECT_EQ(planner.decide(PlanInput(s), rng).decision, Decision::kRetry);
  EXPECT_EQ(planner.decide(PlanInput(s), rng).decision, Decision::kRetry);
  const Plan p = planner.decide(PlanInput(s), rng);
  EXPECT_EQ(p.decision, Decision::kExhausted);
  EXPECT_EQ(p.reason, Reason::kBudgetExhausted);
  EXPECT_TRUE(p.not_before_mono.has_value());
  EXPECT_THAT(planner.describe(p, PlanInput(s)), HasSubstr("retry budget is empty"));
  // A success earns it back.
  const Signals ok = response(200);
  EXPECT_EQ(planner.decide(PlanInput(ok), rng).decision, Decision::kDone);
  EXPECT_EQ(planner.decide(PlanInput(s), rng).decision, Decision::kRetry);
}

TEST(Planner, DecideIsThreadSafeWithASharedBudget) {
  PlannerConfig c = config(Jitter::kFull);
  c.budget = std::make_shared<RetryBudget>(100, 0.1);
  const Planner planner(c);
  SeededRandom rng(3);
  const Signals s = with_delay(503, 1s);
  std::atomic<int> retries{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (planner.decide(PlanInput(s), rng).decision == Decision::kRetry) retries.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(retries.load(), 50);
}

// ---- words --------------------------------------------------------------------------------------

TEST(Planner, DescribeSaysWhatWonWithNumbers) {
  const Signals s = with_delay(429, 30s);
  PlanInput in(s);
  in.attempt = 2;
  const Planner planner(config());
  ConstRandom rng(0.5);
  EXPECT_EQ(planner.describe(planner.decide(in, rng), in),
            "Retry in 30 s: the server's Retry-After asks for 30 s (local backoff 2 s).");
  in.deadline = kMono + 12s;
  EXPECT_THAT(planner.describe(planner.decide(in, rng), in), HasSubstr("after the deadline (12 s left)"));
  in.method = "POST";
  EXPECT_THAT(planner.describe(planner.decide(in, rng), in), HasSubstr("POST is not idempotent"));
}

// A limited answer the vendor documents as a refusal of a request it did not
// process lets a POST without a key repeat, within the rest of the rules: not
// against the server's "do not retry", not past the deadline.
TEST(Planner, AnUnprocessedRefusalLetsAPostRepeat) {
  Signals s = with_delay(429, 2s);
  s.unprocessed = true;
  PlanInput in(s);
  in.method = "POST";
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_TRUE(p.notes.has(PlanNote::kRefusedUnprocessed));
  EXPECT_EQ(p.wait, 2s);
  const Signals plain = with_delay(429, 2s);
  PlanInput keyless(plain);
  keyless.method = "POST";
  const Plan kept = decide(config(), keyless);
  EXPECT_EQ(kept.decision, Decision::kNotRetryable);
  EXPECT_FALSE(kept.notes.has(PlanNote::kRefusedUnprocessed));
  Signals no = with_delay(429, 2s);
  no.unprocessed = true;
  no.should_retry = false;
  PlanInput told(no);
  told.method = "POST";
  const Plan verdict = decide(config(), told);
  EXPECT_EQ(verdict.decision, Decision::kNotRetryable);
  EXPECT_EQ(verdict.reason, Reason::kServerSaysNoRetry);
  // A transport failure after sending is still ambiguous: no signals, no refusal.
  PlanInput lost(TransportError{true, kWall, kMono});
  lost.method = "POST";
  const Plan l = decide(config(), lost);
  EXPECT_EQ(l.decision, Decision::kNotRetryable);
  EXPECT_TRUE(l.ambiguous);
}

// ---- the server's retry verdict (issue 13 item 2) ------------------------------------------

Signals with_verdict(Signals s, bool verdict) {
  s.should_retry = verdict;
  s.should_retry_source = "stripe-should-retry";
  return s;
}

TEST(Planner, ServerSaysDoNotRetryEndsRetriesEvenOnA429WithRetryAfter) {
  for (const int status : {429, 503}) {
    const Signals s = with_verdict(with_delay(status, 30s), false);
    PlanInput in(s);
    in.attempt = 2;
    const Plan p = decide(config(), in);
    EXPECT_EQ(p.decision, Decision::kNotRetryable) << status;
    EXPECT_EQ(p.reason, Reason::kServerSaysNoRetry);
    // The permitted time is still reported.
    EXPECT_EQ(p.server_hint, 30s);
    EXPECT_EQ(p.not_before_wall, kWall + 30s);
    EXPECT_EQ(p.not_before_mono, kMono + 30s);
    EXPECT_EQ(p.jitter, 0s);
    const std::string text = Planner(config()).describe(p, in);
    EXPECT_THAT(text, HasSubstr("server says not to retry (stripe-should-retry: false)"));
    EXPECT_THAT(text, HasSubstr("in 30 s"));
  }
  EXPECT_EQ(to_string(Reason::kServerSaysNoRetry), "the server says not to retry");
  // Without any hint: not retried, with the backoff's time.
  const Signals bare = with_verdict(response(503), false);
  const Plan p = decide(config(), PlanInput(bare));
  EXPECT_EQ(p.reason, Reason::kServerSaysNoRetry);
  EXPECT_EQ(p.not_before_mono, kMono + 1s);
  // An idempotency key does not override it either.
  PlanInput post(bare);
  post.method = "POST";
  post.idempotency_key = true;
  EXPECT_EQ(decide(config(), post).reason, Reason::kServerSaysNoRetry);
}

TEST(Planner, ServerSaysRetryGrantsNoPermissionToRepeatAPost) {
  const Signals s = with_verdict(with_delay(503, 5s), true);
  PlanInput in(s);
  in.method = "POST";
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kNotRetryable);
  EXPECT_EQ(p.reason, Reason::kNotIdempotent);
  EXPECT_TRUE(p.notes.has(PlanNote::kServerSaysRetry));
  EXPECT_THAT(Planner(config()).describe(p, in),
              HasSubstr("stripe-should-retry says it may be retried, which grants no such permission"));
  EXPECT_THAT(notes_text(p.notes), ::testing::Contains(HasSubstr("grants no permission")));
  // With a key it is retried, as without the verdict.
  in.idempotency_key = true;
  EXPECT_EQ(decide(config(), in).decision, Decision::kRetry);
}

TEST(Planner, ServerSaysRetryDoesNotMakeAStatusRetryable) {
  for (const int status : {400, 404, 409}) {
    const Signals s = with_verdict(response(status), true);
    const Plan p = decide(config(), PlanInput(s));
    EXPECT_EQ(p.decision, Decision::kNotRetryable) << status;
    EXPECT_EQ(p.reason, Reason::kStatusNotRetryable) << status;
    EXPECT_TRUE(p.notes.has(PlanNote::kServerSaysRetry));
  }
}

// ---- full-refill resets (issue 13 items 5 and 6) ----------------------------------------------

QuotaObservation full_refill(std::string unit, std::int64_t limit, std::int64_t remaining, Duration reset) {
  QuotaObservation q;
  q.policy = unit;
  q.unit = std::move(unit);
  q.limit = limit;
  q.remaining = remaining;
  q.reset = reset;
  q.source = QuotaSource::kVendor;
  q.profile = "openai";
  q.reset_is_full_refill = true;
  return q;
}

TEST(Planner, OpenAIFullRefillResetWaitsForTheServersRetryDelayNotTheRefill) {
  // x-ratelimit-remaining-tokens: 0, x-ratelimit-reset-tokens: 6m0s, retry-after-ms: 1500.
  Signals s = with_delay(429, 1500ms);
  s.retry_after->source = "retry-after-ms";
  s.profile = "openai";
  s.quota.push_back(full_refill("requests", 500, 499, 120ms));
  s.quota.push_back(full_refill("tokens", 30000, 0, 6min));
  PlanInput in(s);
  Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.basis, Basis::kRetryAfter);
  EXPECT_EQ(p.server_hint, 1500ms);
  EXPECT_EQ(p.wait, 1500ms);
  EXPECT_FALSE(p.quota_wait);
  EXPECT_TRUE(p.notes.has(PlanNote::kFullRefillReset));
  // Rule 4 still holds: the backoff floor and jitter come on top as usual.
  in.attempt = 3;
  p = decide(config(Jitter::kFull), in, 0.5);
  EXPECT_EQ(p.backoff, 0s);
  EXPECT_EQ(p.wait, 1500ms + 2s);
  p = decide(config(Jitter::kEqual), in, 0.5);
  EXPECT_EQ(p.wait, 2s + 1s);  // floor 2 s (half of 4 s) beats 1.5 s, plus 1 s of jitter
}

TEST(Planner, FullRefillResetWithoutARetryDelayWaitsForOneRequestsRefill) {
  // 3 requests per 20 s, none left, full in 20 s: one request is back in 20/3 s.
  Signals s = response(429);
  s.quota.push_back(full_refill("requests", 3, 0, 20s));
  Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.basis, Basis::kVendor);
  EXPECT_EQ(p.quota_wait, Duration{6666666667});
  EXPECT_EQ(p.wait, Duration{6666666667});
  EXPECT_THAT(Planner(config()).describe(p, PlanInput(s)), HasSubstr("counts to a full refill"));
  // A cost (the provisional draft-12 `c`) and an overdraft need more units.
  s.quota[0].cost = 2;
  s.quota[0].remaining = -1;
  EXPECT_EQ(decide(config(), PlanInput(s)).wait, 20s);  // 3 units: the whole refill, never more
  // Tokens refill fast: the local backoff is the floor.
  s.quota[0] = full_refill("tokens", 30000, 0, 6min);
  p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.quota_wait, 12ms);
  EXPECT_EQ(p.basis, Basis::kBackoff);
  EXPECT_EQ(p.wait, 1s);
  // Without a limit the refill rate is unknown: the reset is the only bound.
  s.quota[0].limit.reset();
  EXPECT_EQ(decide(config(), PlanInput(s)).wait, 6min);
}

TEST(Planner, AnExhaustedQuotaThatIsNotAFullRefillStillWaitsForItsReset) {
  Signals s = with_delay(429, 1500ms);
  QuotaObservation q = full_refill("tokens", 30000, 0, 6min);
  q.reset_is_full_refill = false;
  s.quota.push_back(q);
  const Plan p = decide(config(), PlanInput(s));
  EXPECT_EQ(p.wait, 6min);
  EXPECT_EQ(p.basis, Basis::kVendor);
  EXPECT_FALSE(p.notes.has(PlanNote::kFullRefillReset));
}

TEST(Planner, DescribeEscapesTheServersPolicyName) {
  Signals s = response(429);
  QuotaObservation q = quota(0, 42s, QuotaSource::kDraft08);
  q.policy = "burst\x1b]0;owned\x07";
  s.quota.push_back(q);
  const PlanInput in(s);
  const Planner planner(config());
  ConstRandom rng(0.5);
  const std::string text = planner.describe(planner.decide(in, rng), in);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_THAT(text, HasSubstr("\"burst\\x1b]0;owned\\x07\""));
}

TEST(Planner, FormatSeconds) {
  EXPECT_EQ(format_seconds(30s), "30 s");
  EXPECT_EQ(format_seconds(2500ms), "2.5 s");
  EXPECT_EQ(format_seconds(125ms), "0.125 s");
  EXPECT_EQ(format_seconds(-1500ms), "-1.5 s");
  EXPECT_EQ(format_seconds(kMaxDuration), "forever");
  EXPECT_EQ(format_seconds(Duration::min()), "-9223372036.854 s");
}

// ---- properties over generated inputs -------------------------------------------------------------

struct Generated {
  Signals signals;
  PlanInput input{signals};
  PlannerConfig config;
};

Duration any_duration(std::mt19937_64& g) {
  switch (g() % 6) {
    case 0: return Duration::zero();
    case 1: return Duration{static_cast<std::int64_t>(g() % 1'000'000'000)};        // < 1 s
    case 2: return std::chrono::seconds{static_cast<std::int64_t>(g() % 120)};      // minutes
    case 3: return std::chrono::seconds{static_cast<std::int64_t>(g() % 100'000)};  // a day
    case 4: return kMaxDuration;
    default: return Duration{static_cast<std::int64_t>(g() >> 1)};  // anything
  }
}

void generate(std::mt19937_64& g, Generated& out) {
  static constexpr int kStatuses[] = {200, 204, 301, 400, 403, 404, 408, 429, 500, 501, 502, 503, 504, 529};
  Signals& s = out.signals;
  s = Signals{};
  s.status = kStatuses[g() % std::size(kStatuses)];
  s.received_wall = kWall + std::chrono::seconds{static_cast<std::int64_t>(g() % 1000)};
  s.received_mono = kMono + std::chrono::seconds{static_cast<std::int64_t>(g() % 1000)};
  s.limited = s.status == 429 || (s.status == 403 && g() % 2 == 0);
  switch (g() % 4) {
    case 0: break;
    case 1: s.retry_after_rejected = true; break;
    case 2: s.retry_after = RetryHint{RetryHint::Kind::kDelay, any_duration(g), std::nullopt, "retry-after"}; break;
    case 3: {
      const WallTime date = saturating_add(s.received_wall, any_duration(g) - std::chrono::seconds{500});
      RetryHint h{RetryHint::Kind::kDate, std::max(Duration::zero(), date - s.received_wall), date, "retry-after"};
      if (g() % 2 == 0) {
        s.server_date = s.received_wall + std::chrono::seconds{static_cast<std::int64_t>(g() % 121) - 60};
        s.clock_skew = *s.server_date - s.received_wall;
      }
      s.retry_after = h;
      break;
    }
  }
  const auto nq = g() % 4;
  for (std::uint64_t i = 0; i < nq; ++i) {
    // One draw per statement: the order of a call's arguments is the
    // compiler's choice (GCC takes them last to first, clang first to last),
    // and the digest below must not depend on it. These draws keep GCC's order.
    const QuotaSource source = g() % 2 ? QuotaSource::kDraft08 : QuotaSource::kVendor;
    const Duration reset = any_duration(g);
    const auto remaining = static_cast<std::int64_t>(g() % 3);
    QuotaObservation q = quota(remaining, reset, source);
    if (q.source == QuotaSource::kVendor) q.profile = "github";
    if (g() % 5 == 0) q.reset.reset();
    if (g() % 7 == 0) q.confidence = Confidence::kLow;
    s.quota.push_back(q);
  }
  PlanInput in(s);
  static constexpr const char* kMethods[] = {"GET", "PUT", "DELETE", "POST", "PATCH"};
  if (g() % 8 == 0) {
    in = PlanInput(TransportError{g() % 2 == 0, s.received_wall, s.received_mono});
  }
  in.method = kMethods[g() % std::size(kMethods)];
  in.idempotency_key = g() % 2 == 0;
  in.max_attempts = static_cast<std::int64_t>(g() % 10);
  in.attempt = static_cast<std::int64_t>(g() % 12);
  if (g() % 2 == 0) in.deadline = saturating_add(s.received_mono, any_duration(g) - std::chrono::seconds{5});
  if (g() % 3 == 0) in.previous_backoff = any_duration(g);
  out.input = in;
  PlannerConfig& c = out.config;
  c = PlannerConfig{};
  const auto jitter = static_cast<Jitter>(g() % 4);
  const Duration cap = any_duration(g);
  const Duration base = any_duration(g);
  c.backoff = BackoffPolicy(base, cap, jitter);
  c.max_wait = g() % 2 ? kMaxDuration : any_duration(g);
  c.use_low_confidence_quota = g() % 3 == 0;
}

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

// ---- the words stay the words (issue 14: describe() made cheap) ----------------------------

// describe() over many generated plans, every Reason and basis among them,
// with the server's verdict, policy names (with bytes to escape) and full
// refills mixed in. The digest is of the sentences the plain implementation
// (one std::string per piece, joined by concatenation) gave for these very
// inputs: a change of a single byte of any sentence changes it. A deliberate
// change of words updates it, and says so.
std::uint64_t fnv1a(std::uint64_t h, std::string_view s) {
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

TEST(Planner, DescribeGivesTheSameWordsAsThePlainImplementation) {
  std::mt19937_64 g(20261201);
  Generated x;
  std::uint64_t digest = 14695981039346656037ULL;
  std::set<Reason> reasons;
  std::set<Basis> bases;
  for (int i = 0; i < 20000; ++i) {
    generate(g, x);
    if (g() % 4 == 0) {
      x.signals.should_retry = g() % 2 == 0;
      x.signals.should_retry_source = g() % 3 == 0 ? "" : "x-should-retry";
    }
    for (QuotaObservation& q : x.signals.quota) {
      if (g() % 3 == 0) q.policy = g() % 2 ? "per\x1b[31mminute" : "";
      q.reset_is_full_refill = g() % 4 == 0;
    }
    // generate() copied the signals' address into the input; the copy moved.
    if (x.input.outcome.signals != nullptr) x.input.outcome = Outcome(x.signals);
    SeededRandom rng(g());
    const Planner planner(x.config);
    const Plan p = planner.decide(x.input, rng);
    reasons.insert(p.reason);
    bases.insert(p.basis);
    digest = fnv1a(digest, planner.describe(p, x.input));
    digest = fnv1a(digest, "\n");
  }
  EXPECT_EQ(reasons.size(), 10u);  // all but kBudgetExhausted (no budget here), checked below
  EXPECT_EQ(bases.size(), 5u);
  EXPECT_EQ(digest, 0x208f1cce4b571a3cULL) << std::hex << digest;
}

// One sentence of each kind, word for word.
TEST(Planner, DescribeSentencesWordForWord) {
  const Planner planner(config());
  ConstRandom rng(0.5);
  const auto words = [&](const PlanInput& in) { return planner.describe(planner.decide(in, rng), in); };
  std::vector<std::string> got;
  {
    const Signals s = response(200);
    got.push_back(words(PlanInput(s)));
  }
  {
    const Signals s = with_delay(200, 30s);
    got.push_back(words(PlanInput(s)));
  }
  {
    const Signals s = with_delay(304, 2500ms);
    got.push_back(words(PlanInput(s)));
  }
  {
    const Signals s = with_delay(404, 30s);
    got.push_back(words(PlanInput(s)));
  }
  {
    Signals s = with_delay(503, 5s);
    s.should_retry = true;
    s.should_retry_source = "x-should-retry";
    PlanInput in(s);
    in.method = "PATCH";
    got.push_back(words(in));
  }
  {
    Signals s = response(503);
    s.should_retry = false;
    got.push_back(words(PlanInput(s)));
  }
  {
    PlanInput in(TransportError{true, kWall, kMono});
    in.method = "POST";
    got.push_back(words(in));
  }
  {
    Signals s = response(429);
    s.quota.push_back(quota(0, 42s));
    PlanInput in(s);
    in.attempt = 5;
    got.push_back(words(in));
  }
  {
    Signals s = response(429);
    QuotaObservation q = quota(0, 3600s, "github");
    q.reset_is_full_refill = true;
    s.quota.push_back(q);
    PlannerConfig c = config();
    c.max_wait = 60s;
    const Planner p(c);
    PlanInput in(s);
    got.push_back(p.describe(p.decide(in, rng), in));
  }
  {
    Signals s = with_delay(429, 3600s);
    s.quota.push_back(quota(0, 7200s));
    PlannerConfig c = config();
    c.max_wait = 60s;
    const Planner p(c);
    PlanInput in(s);
    got.push_back(p.describe(p.decide(in, rng), in));
  }
  {
    const Signals s = with_delay(503, 90s);
    PlanInput in(s);
    in.deadline = kMono + 10s;
    got.push_back(words(in));
    in.deadline = kMono - 1s;
    got.push_back(words(in));
  }
  {
    const Signals s = response(500);
    PlanInput in(s);
    in.attempt = 3;
    PlannerConfig c = config(Jitter::kFull);
    const Planner p(c);
    got.push_back(p.describe(p.decide(in, rng), in));
  }
  {
    const Signals s = with_delay(429, 1500ms);
    PlanInput in(s);
    const Planner p(config(Jitter::kEqual, 1s));
    got.push_back(p.describe(p.decide(in, rng), in));
  }
  {
    PlannerConfig c = config();
    c.budget = std::make_shared<RetryBudget>(1.0, 0.001);
    (void)c.budget->try_spend();  // now empty
    const Planner p(c);
    const Signals s = response(503);
    const PlanInput in(s);
    got.push_back(p.describe(p.decide(in, rng), in));
  }
  const std::vector<std::string> want = {
      R"(The request succeeded (status 200); nothing to retry.)",
      R"(The request succeeded (status 200); nothing to retry, but the server permits the next request only in 30 s (the server's Retry-After asks for 30 s).)",
      R"(The response (status 304) is not a failure; nothing to retry, and the server asks for 2.5 s before the next request.)",
      R"(The status 404 is not retryable; the server would permit a new request in 30 s.)",
      R"(PATCH is not idempotent and the request carried no idempotency key, so it is not repeated automatically; a retry would be permitted in 5 s (the server's x-should-retry says it may be retried, which grants no such permission).)",
      R"(The server says not to retry (retry verdict: false), so the status 503 is not repeated; a new request would be permitted in 1 s.)",
      R"(The connection failed after the POST request was sent, so it may have been applied: reconcile before repeating (a retry would be permitted in 1 s).)",
      R"(Attempt 5 of 5 was the last; a retry would be permitted in 42 s (the RateLimit quota "default" is exhausted for 42 s).)",
      R"(Retry in 36 s: the vendor quota "default" (github) is exhausted; its reset counts to a full refill, and the next request's units refill in 36 s (local backoff 1 s).)",
      R"(Deferred: the RateLimit quota "default" is exhausted for 7200 s, longer than the acceptable 60 s; come back in 7200 s.)",
      R"(The earliest permitted retry is in 90 s (the server's Retry-After asks for 90 s), after the deadline (10 s left); it is not cut short.)",
      R"(The earliest permitted retry is in 90 s (the server's Retry-After asks for 90 s), after the deadline that had already passed; it is not cut short.)",
      R"(Retry in 2 s: the local backoff for attempt 3 is 4 s nominal with full jitter.)",
      R"(Retry in 1.75 s: the server's Retry-After asks for 1.5 s (local backoff 0.5 s), plus 0.25 s of jitter.)",
      R"(The client's retry budget is empty (too many recent retries), so this one is not retried; a retry would be permitted in 1 s.)"};
  EXPECT_EQ(got, want);
}

}  // namespace
// The sentence of most attempts is a constant with static storage, so an
// engine keeps it without allocating: the same words as describe(), for every
// 2xx without a server hint, and nothing for any sentence that must be made.
TEST(Describe, ConstantSentenceIsDescribesWordsForA2xxWithoutAHint) {
  const Planner planner(config());
  SeededRandom rng(1);
  for (const int code : {200, 201, 204, 299}) {
    const Signals s = response(code);
    const PlanInput in(s);
    const Plan p = planner.decide(in, rng);
    const std::string_view fixed = Planner::constant_sentence(p);
    EXPECT_EQ(fixed, planner.describe(p, in)) << code;
    EXPECT_EQ(fixed.data()[fixed.size()], '\0') << code;
    EXPECT_EQ(Planner::constant_sentence(p).data(), fixed.data()) << code;  // the same storage each time
  }
  const auto constant_for = [&](const Signals& s) {
    return Planner::constant_sentence(planner.decide(PlanInput(s), rng));
  };
  EXPECT_TRUE(constant_for(with_delay(200, std::chrono::seconds{30})).empty());  // a hint: the sentence says it
  EXPECT_TRUE(constant_for(response(304)).empty());
  EXPECT_TRUE(constant_for(response(404)).empty());
  EXPECT_TRUE(constant_for(response(503)).empty());
  EXPECT_TRUE(Planner::constant_sentence(planner.decide(PlanInput(TransportError{}), rng)).empty());
  Plan odd;  // a hand-made "succeeded" outside 2xx is described, not looked up
  odd.reason = Reason::kSucceeded;
  odd.status = 404;
  EXPECT_TRUE(Planner::constant_sentence(odd).empty());
  EXPECT_EQ(planner.describe(odd, PlanInput(TransportError{})),
            "The request succeeded (status 404); nothing to retry.");
}

}  // namespace abide
