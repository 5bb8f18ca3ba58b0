// abide/planner.h, whether to retry: rule 7 (permission and idempotency),
// statuses, attempts and the retry budget, and the server's retry verdict.
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
using test::quota;
using test::config;
using test::decide;

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

}  // namespace
}  // namespace abide
