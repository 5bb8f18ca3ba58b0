// abide/planner.h, quotas: rule 8, and full-refill resets.
#include "support/planner_fixture.h"

namespace abide {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using test::ConstRandom;
using test::response;
using test::with_delay;
using test::quota;
using test::config;
using test::decide;

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

}  // namespace
}  // namespace abide
