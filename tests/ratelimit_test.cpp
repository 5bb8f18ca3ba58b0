// The IETF RateLimit fields in every draft generation. Examples are written
// from the draft texts (see ../shared/reference/header-formats.md section 1).
#include "abide/ratelimit.h"

#include "abide/backoff.h"
#include "abide/planner.h"
#include "abide/signals.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace abide {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

const WallTime kNow{std::chrono::seconds{1767225600}};  // 2026-01-01T00:00:00Z

RateLimitReading read(std::initializer_list<Header> h, RateLimitOptions o = {}) {
  o.received = kNow;
  return read_ratelimit(HeaderList(h), o);
}

bool any_warning_contains(const RateLimitReading& r, std::string_view text) {
  for (const auto& w : r.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

// ---- era A: draft-polli-00 to ietf-01 (ABNF) -------------------------------------------

TEST(Polli00, WindowParameterAndExpiringLimit) {
  const auto r = read(
      {{"RateLimit-Limit", "100, 100;window=60"}, {"RateLimit-Remaining", "50"}, {"RateLimit-Reset", "30"}});
  ASSERT_EQ(r.quota.size(), 1u);
  const auto& q = r.quota[0];
  EXPECT_EQ(q.source, QuotaSource::kDraft03);
  EXPECT_EQ(q.limit, 100);
  EXPECT_EQ(q.remaining, 50);
  EXPECT_EQ(q.window, 60s);
  EXPECT_EQ(q.reset, 30s);
  EXPECT_EQ(q.unit, "requests");
  EXPECT_EQ(q.confidence, Confidence::kHigh);
  EXPECT_TRUE(r.warnings.empty());
}

TEST(Polli00, ResetAsImfFixdate) {
  const auto r = read(
      {{"RateLimit-Limit", "100"}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "Thu, 01 Jan 2026 00:01:30 GMT"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].source, QuotaSource::kDraftPolli00);
  EXPECT_EQ(r.quota[0].reset, 90s);
  EXPECT_TRUE(r.quota[0].exhausted());
}

// A date at the far end of the calendar saturates instead of overflowing.
TEST(Polli00, ResetDateBeforeTheClocksRangeIsZeroWithoutOverflow) {
  RateLimitOptions o;
  o.server_date = kNow;
  const auto r = read({{"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "Mon, 01 Jan 0001 00:00:00 GMT"}}, o);
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].reset, Duration::zero());
}

TEST(Polli00, ResetDateUsesServerDateSoSkewCannotShortenIt) {
  RateLimitOptions o;
  o.server_date = kNow - 20s;  // server clock behind: date - server Date is longer
  const auto r = read({{"RateLimit-Reset", "Thu, 01 Jan 2026 00:01:00 GMT"}}, o);
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].reset, 80s);
}

// ---- polli-01 to ietf-03: quota policies in RateLimit-Limit ------------------------------

TEST(Draft03, PolicyListInLimit) {
  const auto r = read({{"RateLimit-Limit", "10, 10;w=1, 50;w=60, 1000;w=3600, 5000;w=86400"},
                       {"RateLimit-Remaining", "9"},
                       {"RateLimit-Reset", "1"}});
  ASSERT_EQ(r.quota.size(), 4u);
  EXPECT_EQ(r.quota[0].limit, 10);
  EXPECT_EQ(r.quota[0].window, 1s);
  EXPECT_EQ(r.quota[0].remaining, 9);
  EXPECT_EQ(r.quota[0].reset, 1s);
  EXPECT_EQ(r.quota[1].limit, 50);
  EXPECT_EQ(r.quota[1].window, 60s);
  EXPECT_FALSE(r.quota[1].remaining);
  EXPECT_EQ(r.quota[3].limit, 5000);
  EXPECT_EQ(r.quota[3].window, 86400s);
  for (const auto& q : r.quota) EXPECT_EQ(q.source, QuotaSource::kDraft03);
}

TEST(Draft03, UnknownPolicyParametersAreComments) {
  const auto r = read(
      {{"RateLimit-Limit", "10, 10;w=1;burst=1000, 1000;w=3600;comment=\"hourly\""}, {"RateLimit-Reset", "1"}});
  ASSERT_EQ(r.quota.size(), 2u);
  EXPECT_EQ(r.quota[0].window, 1s);
  EXPECT_EQ(r.quota[1].limit, 1000);
  EXPECT_TRUE(r.warnings.empty());
}

// ---- ietf-04 to -06: Integer limit plus RateLimit-Policy ---------------------------------

TEST(Draft06, SeparateFieldsWithPolicy) {
  const auto r = read({{"RateLimit-Limit", "100"},
                       {"RateLimit-Policy", "100;w=10"},
                       {"Ratelimit-Remaining", "50"},  // the drafts' own casing
                       {"Ratelimit-Reset", "50"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].source, QuotaSource::kDraft06);
  EXPECT_EQ(r.quota[0].limit, 100);
  EXPECT_EQ(r.quota[0].window, 10s);
  EXPECT_EQ(r.quota[0].remaining, 50);
  EXPECT_EQ(r.quota[0].reset, 50s);
}

TEST(Draft06, ParametersOnItemsAreIgnored) {
  const auto r = read(
      {{"RateLimit-Limit", "100;foo=bar"}, {"RateLimit-Remaining", "5;x=1"}, {"RateLimit-Reset", "7;y"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].limit, 100);
  EXPECT_EQ(r.quota[0].remaining, 5);
  EXPECT_EQ(r.quota[0].reset, 7s);
}

TEST(Draft06, SeveralPoliciesTheCurrentOneMatched) {
  const auto r = read({{"RateLimit-Limit", "50"},
                       {"RateLimit-Policy", "10;w=1, 50;w=60, 1000;w=3600"},
                       {"RateLimit-Remaining", "3"},
                       {"RateLimit-Reset", "20"}});
  ASSERT_EQ(r.quota.size(), 3u);
  EXPECT_EQ(r.quota[0].limit, 50);
  EXPECT_EQ(r.quota[0].window, 60s);
  EXPECT_EQ(r.quota[0].remaining, 3);
  EXPECT_EQ(r.quota[1].limit, 10);
  EXPECT_EQ(r.quota[2].limit, 1000);
}

TEST(Draft06, RemainingAboveLimitIsKeptWithAWarning) {
  const auto r = read({{"RateLimit-Limit", "10"}, {"RateLimit-Remaining", "20"}, {"RateLimit-Reset", "1"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_TRUE(any_warning_contains(r, "exceeds"));
}

// ---- ietf-07: the Dictionary ----------------------------------------------------------

TEST(Draft07, Dictionary) {
  const auto r = read({{"RateLimit", "limit=100, remaining=50, reset=5"}, {"RateLimit-Policy", "100;w=10"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].source, QuotaSource::kDraft07);
  EXPECT_EQ(r.quota[0].limit, 100);
  EXPECT_EQ(r.quota[0].remaining, 50);
  EXPECT_EQ(r.quota[0].reset, 5s);
  EXPECT_EQ(r.quota[0].window, 10s);
  EXPECT_TRUE(r.warnings.empty());
}

TEST(Draft07, UnknownKeysAndParametersIgnoredDuplicateLastWins) {
  const auto r = read({{"RateLimit", "limit=100;x=1, remaining=60, remaining=50, reset=5, policy=?1"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].remaining, 50);
}

TEST(Draft07, WrongTypeIgnoresTheField) {
  const auto r = read({{"RateLimit", "limit=100, remaining=fifty, reset=5"}, {"RateLimit-Remaining", "4"}});
  // The dictionary is ignored as a whole; the other field is still read.
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].remaining, 4);
  EXPECT_EQ(r.quota[0].source, QuotaSource::kDraft06);
  EXPECT_TRUE(any_warning_contains(r, "RateLimit ignored"));
}

// ---- ietf-08 to -11: named policies ----------------------------------------------------

TEST(Draft08, NamedPoliciesMatchedByName) {
  const auto r = read(
      {{"RateLimit-Policy", "\"burst\";q=100;w=60,\"daily\";q=1000;w=86400"}, {"RateLimit", "\"burst\";r=50;t=30"}});
  ASSERT_EQ(r.quota.size(), 2u);
  EXPECT_EQ(r.quota[0].policy, "burst");
  EXPECT_EQ(r.quota[0].limit, 100);
  EXPECT_EQ(r.quota[0].window, 60s);
  EXPECT_EQ(r.quota[0].remaining, 50);
  EXPECT_EQ(r.quota[0].reset, 30s);
  EXPECT_EQ(r.quota[0].source, QuotaSource::kDraft08);
  EXPECT_EQ(r.quota[1].policy, "daily");
  EXPECT_EQ(r.quota[1].limit, 1000);
  EXPECT_EQ(r.quota[1].window, 86400s);
  EXPECT_FALSE(r.quota[1].remaining);
  EXPECT_TRUE(r.warnings.empty());
}

TEST(Draft08, QuotaUnitsAndPartitionKeys) {
  const auto r = read({{"RateLimit-Policy", "\"peruser\";q=65535;qu=\"content-bytes\";w=10;pk=:sdfjLJUOUH==:"},
                       {"RateLimit", "\"default\";r=300000000;t=60;pk=:QXBwLTk5OQ==:"}});
  ASSERT_EQ(r.quota.size(), 2u);  // names differ: two policies
  EXPECT_EQ(r.quota[0].policy, "peruser");
  EXPECT_EQ(r.quota[0].unit, "content-bytes");
  EXPECT_EQ(r.quota[0].limit, 65535);
  ASSERT_TRUE(r.quota[0].partition_key);
  EXPECT_EQ(r.quota[0].partition_key->size(), 7u);  // non-zero pad bits are tolerated
  EXPECT_EQ(r.quota[1].policy, "default");
  EXPECT_EQ(r.quota[1].remaining, 300000000);
  EXPECT_EQ(r.quota[1].partition_key, "App-999");
}

TEST(Draft08, Draft08BytesSpellingAndSingularRequest) {
  const auto r = read(
      {{"RateLimit-Policy", "\"a\";q=1;qu=\"bytes\", \"b\";q=2;qu=\"request\", \"c\";q=3;qu=\"concurrent-requests\""}});
  ASSERT_EQ(r.quota.size(), 3u);
  EXPECT_EQ(r.quota[0].unit, "content-bytes");
  EXPECT_EQ(r.quota[1].unit, "requests");
  EXPECT_EQ(r.quota[2].unit, "concurrent-requests");
}

TEST(Draft08, UnknownParameterOnRateLimitIsAComment) {
  // The draft appendix itself puts q on RateLimit.
  const auto r = read({{"RateLimit", "\"sliding\";q=12;r=6;t=1;x-acme-cost=3"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].policy, "sliding");
  EXPECT_FALSE(r.quota[0].limit);
  EXPECT_EQ(r.quota[0].remaining, 6);
  EXPECT_EQ(r.quota[0].reset, 1s);
  EXPECT_TRUE(r.warnings.empty());
}

TEST(Draft08, SpacesAfterSemicolonsAsExpressRateLimitSends) {
  const auto r = read({{"RateLimit-Policy", "\"100-in-1min\"; q=100; w=60; pk=:ZGVtbw==:"},
                       {"RateLimit", "\"100-in-1min\"; r=99; t=60"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].remaining, 99);
  EXPECT_EQ(r.quota[0].partition_key, "demo");
}

TEST(Draft08, SeveralFieldLinesAreCombined) {
  const auto r = read({{"RateLimit-Policy", "\"a\";q=10;w=1"},
                       {"RateLimit", "\"a\";r=1;t=1"},
                       {"RateLimit-Policy", "\"b\";q=100;w=60"},
                       {"RateLimit", "\"b\";r=40;t=50"}});
  ASSERT_EQ(r.quota.size(), 2u);
  EXPECT_EQ(r.quota[1].policy, "b");
  EXPECT_EQ(r.quota[1].limit, 100);
  EXPECT_EQ(r.quota[1].remaining, 40);
}

TEST(Draft08, TokenPolicyNamesAreAccepted) {
  const auto r = read({{"RateLimit-Policy", "default;q=100;w=60"}, {"RateLimit", "default;r=50;t=30"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].policy, "default");
  EXPECT_EQ(r.quota[0].remaining, 50);
}

TEST(Draft08, EscapedPolicyName) {
  const auto r = read({{"RateLimit-Policy", "\"a\\\"b\";q=5"}, {"RateLimit", "\"a\\\"b\";r=1"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].policy, "a\"b");
  EXPECT_EQ(r.quota[0].remaining, 1);
}

// Issue 13 changes this: a `t` that can only be a Unix time is read as that
// instant (low confidence), no longer as 56 years.
TEST(Draft08, ResetThatCanOnlyBeATimestampIsReadAsThatInstant) {
  const auto r = read({{"RateLimit", "\"x\";r=0;t=1767225660"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].reset, 60s);
  EXPECT_EQ(r.quota[0].confidence, Confidence::kLow);
  EXPECT_TRUE(any_warning_contains(r, "read as that instant"));
}

TEST(Draft08, DecimalResetIgnoresTheWholeFieldButNotThePolicy) {
  const auto r = read({{"RateLimit-Policy", "\"default\";q=100;w=60"}, {"RateLimit", "\"default\";r=50;t=1.5"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].limit, 100);
  EXPECT_FALSE(r.quota[0].remaining);
  EXPECT_FALSE(r.quota[0].reset);
  EXPECT_TRUE(any_warning_contains(r, "RateLimit ignored"));
}

TEST(Draft08, MalformedPolicyIgnoredRateLimitStillRead) {
  const auto r = read({{"RateLimit-Policy", "\"default\";q=abc;w=60"}, {"RateLimit", "\"default\";r=5;t=3"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].remaining, 5);
  EXPECT_FALSE(r.quota[0].limit);
  EXPECT_TRUE(any_warning_contains(r, "RateLimit-Policy ignored: parameter q"));
}

TEST(Draft08, NegativeRemainingIsMalformed) {
  const auto r = read({{"RateLimit", "\"default\";r=-1;t=3"}});
  EXPECT_TRUE(r.quota.empty());
  EXPECT_EQ(r.warnings.size(), 1u);
}

TEST(Draft08, SyntaxErrorIsReportedWithItsPosition) {
  const auto r = read({{"RateLimit", "\"default;r=1"}});
  EXPECT_TRUE(r.quota.empty());
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("RateLimit ignored"));
  EXPECT_THAT(r.warnings[0], HasSubstr("byte"));
}

TEST(Draft08, BetaPrefixAsAtlassianSendsIt) {
  RateLimitOptions o;
  o.prefix = "beta-";
  o.profile = "atlassian";
  const auto r = read({{"Beta-RateLimit-Policy", "\"global-app-quota\";q=65000;w=3600"},
                       {"Beta-RateLimit", "\"global-app-quota\";r=12;t=600"},
                       {"RateLimit", "\"other\";r=1;t=1"}},
                      o);
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].source, QuotaSource::kVendor);
  EXPECT_EQ(r.quota[0].profile, "atlassian");
  EXPECT_EQ(r.quota[0].source_name(), "atlassian");
  EXPECT_EQ(r.quota[0].limit, 65000);
  EXPECT_EQ(r.quota[0].remaining, 12);
}

// ---- draft-12 (provisional): a, w, c and RateLimit-Partition ---------------------------

// The example of issue 13: a 429 with only the renamed parameters. It used to
// give nothing (r and t missing) and a one-second backoff.
TEST(Draft12, ExhaustedBurstOnA429WaitsTheEffectiveWindow) {
  const auto r = read({{"RateLimit", "\"burst\";a=0;w=45"}});
  ASSERT_EQ(r.quota.size(), 1u);
  const auto& q = r.quota[0];
  EXPECT_EQ(q.policy, "burst");
  EXPECT_EQ(q.remaining, 0);
  EXPECT_EQ(q.reset, 45s);
  EXPECT_EQ(q.reset_resolution, 1s);
  EXPECT_TRUE(q.exhausted());
  EXPECT_EQ(q.source, QuotaSource::kDraft12Provisional);
  EXPECT_EQ(to_string(q.source), "draft-12 (provisional)");
  EXPECT_EQ(q.confidence, Confidence::kHigh);
  EXPECT_TRUE(r.warnings.empty());

  HeaderList h{{"RateLimit", "\"burst\";a=0;w=45"}};
  const WallTime wall = kNow;
  const MonoTime mono{std::chrono::hours{1}};
  const Signals s = observe(429, h, wall, mono);
  ASSERT_EQ(s.quota.size(), 1u);
  ASSERT_TRUE(permitted_wait(s).quota);
  EXPECT_EQ(*permitted_wait(s).quota, 45s);
  PlannerConfig c;
  c.backoff = BackoffPolicy(1s, 60s, Jitter::kNone);
  SeededRandom rng(1);
  const Plan p = Planner(c).decide(PlanInput(s), rng);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_EQ(p.basis, Basis::kRateLimit);  // "draft-12 (provisional)" counts as IETF
  EXPECT_GE(p.wait, 45s);
}

TEST(Draft12, NamesTheWindowOfBothFieldsWithoutConfusingThem) {
  // `w` on RateLimit-Policy is the policy window; on RateLimit, the effective window.
  const auto r = read({{"RateLimit-Policy", "\"burst\";q=100;w=60"}, {"RateLimit", "\"burst\";a=80;w=45;c=2"}});
  ASSERT_EQ(r.quota.size(), 1u);
  const auto& q = r.quota[0];
  EXPECT_EQ(q.limit, 100);
  EXPECT_EQ(q.window, 60s);
  EXPECT_EQ(q.remaining, 80);
  EXPECT_EQ(q.reset, 45s);
  EXPECT_EQ(q.cost, 2);
  EXPECT_EQ(q.source, QuotaSource::kDraft12Provisional);
  EXPECT_TRUE(r.warnings.empty());
}

TEST(Draft12, CostAloneLabelsTheObservation) {
  const auto r = read({{"RateLimit", "\"default\";r=9;t=30;c=0"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].cost, 0);
  EXPECT_EQ(r.quota[0].remaining, 9);
  EXPECT_EQ(r.quota[0].source, QuotaSource::kDraft12Provisional);
}

TEST(Draft12, OldAndNewNamesThatDisagreeGiveTheMoreRestrictive) {
  const auto r = read({{"RateLimit", "\"p\";r=10;a=3;t=30;w=45"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].remaining, 3);  // smaller available
  EXPECT_EQ(r.quota[0].reset, 45s);    // longer window
  EXPECT_TRUE(any_warning_contains(r, "r=10 and a=3 differ"));
  EXPECT_TRUE(any_warning_contains(r, "t=30 and w=45 differ"));
  // The other way round: still the smaller and the longer.
  const auto o = read({{"RateLimit", "\"p\";a=10;r=3;w=30;t=45"}});
  ASSERT_EQ(o.quota.size(), 1u);
  EXPECT_EQ(o.quota[0].remaining, 3);
  EXPECT_EQ(o.quota[0].reset, 45s);
  // Agreeing: no warning.
  const auto same = read({{"RateLimit", "\"p\";r=3;a=3;t=45;w=45"}});
  EXPECT_TRUE(same.warnings.empty());
  EXPECT_EQ(same.quota[0].source, QuotaSource::kDraft12Provisional);
}

TEST(Draft12, MalformedNewParametersIgnoreTheWholeField) {
  const char* values[] = {"\"p\";a=-1;w=45",     "\"p\";a=0;w=-45",      "\"p\";a=0;w=4.5",
                          "\"p\";a=1.0;w=45",    "\"p\";a=\"0\";w=45",   "\"p\";a=0;w=?1",
                          "\"p\";a=0;w=45;c=-1", "\"p\";a=0;w=45;c=0.5", "\"p\";a=0;w=45;c=:AA==:",
                          "\"p\";a=0;w=45;c=tok"};
  for (const char* v : values) {
    const auto r = read({{"RateLimit-Policy", "\"p\";q=10;w=60"}, {"RateLimit", v}});
    ASSERT_EQ(r.quota.size(), 1u) << v;  // the policy alone
    EXPECT_FALSE(r.quota[0].remaining) << v;
    EXPECT_FALSE(r.quota[0].reset) << v;
    EXPECT_FALSE(r.quota[0].cost) << v;
    EXPECT_EQ(r.quota[0].source, QuotaSource::kDraft08) << v;
    EXPECT_TRUE(any_warning_contains(r, "RateLimit ignored")) << v;
  }
}

TEST(Draft12, OldFormsReadExactlyAsBefore) {
  const auto r = read({{"RateLimit-Policy", "\"burst\";q=100;w=60,\"daily\";q=1000;w=86400"},
                       {"RateLimit", "\"burst\";r=80;t=30, \"daily\";r=20;t=7200"}});
  ASSERT_EQ(r.quota.size(), 2u);
  for (const auto& q : r.quota) {
    EXPECT_EQ(q.source, QuotaSource::kDraft08);
    EXPECT_FALSE(q.cost);
    EXPECT_EQ(q.confidence, Confidence::kHigh);
  }
  EXPECT_EQ(r.quota[0].remaining, 80);
  EXPECT_EQ(r.quota[0].reset, 30s);
  EXPECT_EQ(r.quota[1].remaining, 20);
  EXPECT_EQ(r.quota[1].reset, 7200s);
  EXPECT_TRUE(r.warnings.empty());
  // A draft-07 dictionary is untouched by the new names (`w` is no key of it).
  const auto d = read({{"RateLimit", "limit=100, remaining=50, reset=30, w=99"}});
  ASSERT_EQ(d.quota.size(), 1u);
  EXPECT_EQ(d.quota[0].source, QuotaSource::kDraft07);
  EXPECT_EQ(d.quota[0].reset, 30s);
}

TEST(Draft12, TokenPolicyNamesWithNewParameters) {
  const auto r = read({{"RateLimit-Policy", "burst;q=100;w=60"}, {"RateLimit", "burst;a=0;w=45"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].policy, "burst");
  EXPECT_EQ(r.quota[0].limit, 100);
  EXPECT_TRUE(r.quota[0].exhausted());
}

TEST(Draft12, ValidPartitionChangesNothing) {
  const std::initializer_list<Header> base = {{"RateLimit-Policy", "\"p\";q=10;w=60"}, {"RateLimit", "\"p\";a=2;w=30"}};
  const auto without = read(base);
  const auto with = read({{"RateLimit-Policy", "\"p\";q=10;w=60"},
                          {"RateLimit", "\"p\";a=2;w=30"},
                          {"RateLimit-Partition", "\"p\";user;ip, daily;org=\"x\""}});
  ASSERT_EQ(with.quota.size(), 1u);
  EXPECT_TRUE(with.warnings.empty());
  EXPECT_EQ(with.quota[0].remaining, without.quota[0].remaining);
  EXPECT_EQ(with.quota[0].reset, without.quota[0].reset);
  EXPECT_EQ(with.quota[0].partition_key, without.quota[0].partition_key);
  EXPECT_EQ(with.quota[0].source, without.quota[0].source);
}

TEST(Draft12, MalformedPartitionIsIgnoredWithAWarningAndNothingElseChanges) {
  const char* values[] = {"\"p\";user;", "5;user", "(\"p\");user", "", "\"p\", ,", "\x1b[31m"};
  for (const char* v : values) {
    const auto r = read({{"RateLimit", "\"p\";a=0;w=30"}, {"RateLimit-Partition", v}});
    ASSERT_EQ(r.quota.size(), 1u) << v;
    EXPECT_TRUE(r.quota[0].exhausted()) << v;
    EXPECT_EQ(r.quota[0].reset, 30s) << v;
    ASSERT_EQ(r.warnings.size(), 1u) << v;
    EXPECT_THAT(r.warnings[0], HasSubstr("RateLimit-Partition ignored")) << v;
    EXPECT_EQ(r.warnings[0].find('\x1b'), std::string::npos) << v;
  }
}

TEST(Draft12, HugePartitionIsBoundedAndChangesNothing) {
  std::string many;
  for (int i = 0; i < 2000; ++i) many += (i ? ", " : "") + std::string("\"p\";user;ip");  // over the member limit
  const auto r = read({{"RateLimit", "\"p\";a=0;w=30"}, {"RateLimit-Partition", many}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].reset, 30s);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("RateLimit-Partition ignored"));
  const auto big = read({{"RateLimit", "\"p\";a=0;w=30"}, {"RateLimit-Partition", std::string(200'000, 'a')}});
  ASSERT_EQ(big.quota.size(), 1u);
  EXPECT_EQ(big.warnings.size(), 1u);
}

// RateLimit-Partition has its own kind: never an "uninterpreted vendor header".
TEST(Draft12, PartitionIsNoVendorHeader) {
  HeaderList h{{"RateLimit", "\"p\";a=0;w=30"}, {"RateLimit-Partition", "\"p\";user"}};
  const Signals s = observe(429, h, kNow, MonoTime{});
  EXPECT_TRUE(s.uninterpreted.empty());
  EXPECT_TRUE(s.warnings.empty());
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].source, QuotaSource::kDraft12Provisional);
}

// ---- two policies with the same quota (issue 13 item 7) ---------------------------------

TEST(SharedQuota, UnnamedPoliciesWithTheSameQuotaAreReadButWarned) {
  const auto r = read({{"RateLimit-Policy", "10;w=1, 10;w=60"},
                       {"RateLimit-Limit", "10"},
                       {"RateLimit-Remaining", "0"},
                       {"RateLimit-Reset", "1"}});
  ASSERT_EQ(r.quota.size(), 2u);  // as before: the current quota and the other policy
  EXPECT_EQ(r.quota[0].window, 1s);
  EXPECT_EQ(r.quota[1].window, 60s);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("two policies have the same quota 10"));
  // Also in a long list, and only one warning.
  std::string many;
  for (int i = 0; i < 40; ++i) many += std::to_string(i) + ";w=" + std::to_string(i + 1) + ", ";
  many += "7;w=99";
  const auto l = read({{"RateLimit-Policy", many}});
  EXPECT_EQ(l.quota.size(), 41u);
  ASSERT_EQ(l.warnings.size(), 1u);
  EXPECT_THAT(l.warnings[0], HasSubstr("same quota 7"));
}

TEST(SharedQuota, DistinctQuotasAndNamedPoliciesAreNotWarned) {
  EXPECT_TRUE(read({{"RateLimit-Policy", "10;w=1, 50;w=60"}}).warnings.empty());
  // Named policies (draft-08 on) are told apart by name.
  EXPECT_TRUE(read({{"RateLimit-Policy", "\"a\";q=10;w=1, \"b\";q=10;w=60"}}).warnings.empty());
}

// Server bytes in warnings go through printable().
TEST(Warnings, ServerBytesAreEscaped) {
  const auto n = read({{"RateLimit-Policy", "\"a\\\\b\";w=0"}});
  ASSERT_EQ(n.warnings.size(), 2u);                            // no q, w=0
  EXPECT_THAT(n.warnings[0], HasSubstr("policy \"a\\\\b\""));  // printable() doubles the backslash
}

// ---- malformed fields never fail the response ---------------------------------------

TEST(Malformed, EachFieldIgnoredAloneTheRestRead) {
  const auto r = read(
      {{"RateLimit-Limit", "100"}, {"RateLimit-Remaining", "-1"}, {"RateLimit-Reset", "soon"}, {"RateLimit", "!!!"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].limit, 100);
  EXPECT_FALSE(r.quota[0].remaining);
  EXPECT_FALSE(r.quota[0].reset);
  EXPECT_EQ(r.warnings.size(), 3u);
  EXPECT_TRUE(any_warning_contains(r, "RateLimit-Remaining ignored"));
  EXPECT_TRUE(any_warning_contains(r, "RateLimit-Reset ignored"));
}

TEST(Malformed, RepeatedSingletonIsIgnored) {
  const auto r = read({{"RateLimit-Remaining", "5"}, {"RateLimit-Remaining", "6"}});
  EXPECT_TRUE(r.quota.empty());
  EXPECT_TRUE(any_warning_contains(r, "RateLimit-Remaining ignored"));
}

TEST(Malformed, DecimalOrHugeOrInnerList) {
  EXPECT_TRUE(read({{"RateLimit-Remaining", "1.5"}}).quota.empty());
  EXPECT_TRUE(read({{"RateLimit-Remaining", "9999999999999999"}}).quota.empty());  // 16 digits
  EXPECT_TRUE(read({{"RateLimit-Policy", "(1 2);w=1"}}).quota.empty());
  EXPECT_TRUE(read({{"RateLimit-Policy", "\"a\";q=1, 5;w=1"}}).quota.empty());  // mixed forms
  EXPECT_TRUE(read({{"RateLimit", ""}}).quota.empty());
}

// Issue 13 changes this: the largest Integer was a saturated wait (292
// years); it is neither a delay nor a nearby Unix time, so it is ignored.
TEST(Malformed, LargestIntegerIsNoWaitAtAll) {
  const auto r = read({{"RateLimit", "\"x\";r=0;t=999999999999999"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].remaining, 0);
  EXPECT_FALSE(r.quota[0].reset);
  EXPECT_FALSE(r.quota[0].exhausted());
  EXPECT_EQ(r.quota[0].confidence, Confidence::kLow);
  EXPECT_TRUE(any_warning_contains(r, "ignored: neither a plausible delay"));
}

// ---- a reset that can only be a timestamp (issue 13 item 5) --------------------------

// DigitalOcean and Twitch send a Unix time as RateLimit-Reset. It was read as
// 56 years with high confidence (and `heuristic` changed that); now it is the
// instant, with low confidence, with or without the option.
TEST(EpochReset, UnixTimeInRateLimitResetIsThatInstant) {
  for (const bool heuristic : {false, true}) {
    RateLimitOptions o;
    o.heuristic = heuristic;
    const auto r = read({{"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "1767225660"}}, o);
    ASSERT_EQ(r.quota.size(), 1u);
    EXPECT_EQ(r.quota[0].reset, 60s);
    EXPECT_TRUE(r.quota[0].exhausted());
    EXPECT_EQ(r.quota[0].confidence, Confidence::kLow);
    EXPECT_EQ(r.quota[0].source, QuotaSource::kDraft06);
    EXPECT_TRUE(any_warning_contains(r, "RateLimit-Reset 1767225660 is no plausible delay"));
    EXPECT_TRUE(any_warning_contains(r, "the receive time"));
  }
}

TEST(EpochReset, EveryDeltaFormTakesTheRule) {
  const std::initializer_list<Header> forms[] = {
      {{"RateLimit-Limit", "10, 10;w=60"}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "1767225660"}},
      {{"RateLimit", "limit=10, remaining=0, reset=1767225660"}},
      {{"RateLimit", "\"p\";r=0;t=1767225660"}},
      {{"RateLimit", "\"p\";a=0;w=1767225660"}},
  };
  for (const auto& f : forms) {
    const auto r = read(f);
    ASSERT_EQ(r.quota.size(), 1u);
    EXPECT_EQ(r.quota[0].reset, 60s) << r.quota[0].source_name();
    EXPECT_EQ(r.quota[0].confidence, Confidence::kLow) << r.quota[0].source_name();
    EXPECT_EQ(r.warnings.size(), 1u) << r.quota[0].source_name();
  }
}

// Rule 3: the server's clock behind ours makes the wait longer, never shorter;
// the instant is judged near or far against the server's Date.
TEST(EpochReset, SkewCanOnlyLengthenTheWait) {
  RateLimitOptions o;
  o.server_date = kNow - 20s;
  const auto behind = read({{"RateLimit-Reset", "1767225660"}}, o);
  ASSERT_EQ(behind.quota.size(), 1u);
  EXPECT_EQ(behind.quota[0].reset, 80s);
  EXPECT_TRUE(any_warning_contains(behind, "the server's Date"));
  o.server_date = kNow + 20s;  // server ahead: the local receipt counts
  const auto ahead = read({{"RateLimit-Reset", "1767225660"}}, o);
  EXPECT_EQ(ahead.quota[0].reset, 60s);
}

TEST(EpochReset, InstantInThePastIsZeroNotNegative) {
  const auto r = read({{"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "1767225000"}});
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_EQ(r.quota[0].reset, Duration::zero());
  EXPECT_EQ(r.quota[0].confidence, Confidence::kLow);
}

// Neither a delay nor an instant near the Date: never a wait of decades. The
// reset is dropped (low confidence, the rest kept), as a malformed one would be.
TEST(EpochReset, NeitherDelayNorNearbyInstantIsIgnored) {
  const char* values[] = {"1000000000000",  // 10^12: 31,000 years, or the year 33658
                          "1924905600",     // a Unix time 5 years after the receive time
                          "1609459200",     // a Unix time 5 years before it
                          "31708801"};      // a year and a day
  for (const char* v : values) {
    const auto r = read({{"RateLimit-Limit", "10"}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", v}});
    ASSERT_EQ(r.quota.size(), 1u) << v;
    EXPECT_FALSE(r.quota[0].reset) << v;
    EXPECT_EQ(r.quota[0].limit, 10) << v;
    EXPECT_EQ(r.quota[0].remaining, 0) << v;
    EXPECT_EQ(r.quota[0].confidence, Confidence::kLow) << v;
    EXPECT_TRUE(any_warning_contains(r, "ignored: neither a plausible delay")) << v;
  }
  // Far from the server's Date although near the local clock: the Date decides.
  RateLimitOptions o;
  o.server_date = kNow - std::chrono::hours{24 * 400};
  const auto r = read({{"RateLimit-Reset", "1767225660"}}, o);
  ASSERT_EQ(r.quota.size(), 1u);
  EXPECT_FALSE(r.quota[0].reset);
  // Near a server Date decades ahead of ours: rule 3 would make it decades from
  // receipt, so it is ignored too.
  o.server_date = kNow + std::chrono::hours{24 * 365 * 30};
  const auto ahead = read({{"RateLimit-Reset", std::to_string(1767225600 + 3600LL * 24 * 365 * 30 + 60)}}, o);
  ASSERT_EQ(ahead.quota.size(), 1u);
  EXPECT_FALSE(ahead.quota[0].reset);
  EXPECT_TRUE(any_warning_contains(ahead, "more than a year after the receive time"));
}

// A year (a yearly quota's reset) is still a delay, high confidence, and a
// receive time near 1970 cannot turn small delays into "instants".
TEST(EpochReset, DelaysUpToAYearStayDelays) {
  const auto year = read({{"RateLimit-Reset", "31622400"}});  // 366 days
  ASSERT_EQ(year.quota.size(), 1u);
  EXPECT_EQ(year.quota[0].reset, std::chrono::seconds{31622400});
  EXPECT_EQ(year.quota[0].confidence, Confidence::kHigh);
  EXPECT_TRUE(year.warnings.empty());
  RateLimitOptions o;
  o.received = WallTime{};  // read() sets kNow; call directly
  const auto early = read_ratelimit(HeaderList{{"RateLimit-Reset", "86400"}}, o);
  ASSERT_EQ(early.quota.size(), 1u);
  EXPECT_EQ(early.quota[0].reset, 86400s);
  EXPECT_EQ(early.quota[0].confidence, Confidence::kHigh);
}

TEST(Malformed, NothingPresentNothingRead) {
  const auto r = read({{"Content-Type", "text/plain"}, {"X-RateLimit-Limit", "5"}});
  EXPECT_TRUE(r.quota.empty());
  EXPECT_TRUE(r.warnings.empty());
}

// ---- Envoy: draft-03 under x- --------------------------------------------------------

TEST(Prefixed, EnvoyGlobalFilterDraft03) {
  RateLimitOptions o;
  o.prefix = "x-";
  o.profile = "envoy";
  const auto r = read({{"x-ratelimit-limit", "10, 10;w=60;name=\"per-minute\", 100;w=3600;name=\"per-hour\""},
                       {"x-ratelimit-remaining", "0"},
                       {"x-ratelimit-reset", "42"}},
                      o);
  ASSERT_EQ(r.quota.size(), 2u);
  EXPECT_EQ(r.quota[0].source, QuotaSource::kVendor);
  EXPECT_EQ(r.quota[0].source_name(), "envoy");
  EXPECT_EQ(r.quota[0].policy, "per-minute");
  EXPECT_EQ(r.quota[0].window, 60s);
  EXPECT_EQ(r.quota[0].reset, 42s);
  EXPECT_TRUE(r.quota[0].exhausted());
  EXPECT_EQ(r.quota[1].policy, "per-hour");
}

// ---- the most restrictive of several policies ------------------------------------------

QuotaObservation obs(std::optional<std::int64_t> limit, std::optional<std::int64_t> remaining,
                     std::optional<Duration> reset, std::optional<Duration> window = std::nullopt,
                     Confidence c = Confidence::kHigh) {
  QuotaObservation q;
  q.limit = limit;
  q.remaining = remaining;
  q.reset = reset;
  q.window = window;
  q.confidence = c;
  return q;
}

TEST(MostRestrictive, ExhaustedWithLongestResetFirst) {
  std::vector<QuotaObservation> v{obs(100, 50, 30s), obs(10, 0, 5s), obs(1000, 0, 3600s), obs(5, 1, 1s)};
  EXPECT_EQ(most_restrictive(v), 2u);
}

TEST(MostRestrictive, LargestPacingIntervalAmongQuotasWithRoom) {
  // burst: 50 left for 30 s (0.6 s each); daily: 900 left for 3600 s (4 s each).
  std::vector<QuotaObservation> v{obs(100, 50, 30s), obs(1000, 900, 3600s)};
  EXPECT_EQ(most_restrictive(v), 1u);
  // The window stands in for an unknown reset.
  std::vector<QuotaObservation> w{obs(100, 50, std::nullopt, 10s), obs(1000, 10, std::nullopt, 60s)};
  EXPECT_EQ(most_restrictive(w), 1u);
}

TEST(MostRestrictive, FromDraftFields) {
  const auto r = read({{"RateLimit-Policy", "\"burst\";q=100;w=60,\"daily\";q=1000;w=86400"},
                       {"RateLimit", "\"burst\";r=80;t=30, \"daily\";r=20;t=7200"}});
  ASSERT_EQ(r.quota.size(), 2u);
  EXPECT_EQ(most_restrictive(r.quota), 1u);
}

TEST(MostRestrictive, WithoutTimeTheSmallestShareLeft) {
  std::vector<QuotaObservation> v{obs(100, 50, std::nullopt), obs(10, 2, std::nullopt),
                                  obs(std::nullopt, 1, std::nullopt)};
  EXPECT_EQ(most_restrictive(v), 1u);
}

TEST(MostRestrictive, LowConfidenceOnlyWhenNothingElse) {
  std::vector<QuotaObservation> v{obs(100, 50, 30s), obs(10, 0, 500s, std::nullopt, Confidence::kLow)};
  EXPECT_EQ(most_restrictive(v), 0u);
  std::vector<QuotaObservation> low{obs(10, 0, 500s, std::nullopt, Confidence::kLow)};
  EXPECT_EQ(most_restrictive(low), 0u);
  EXPECT_FALSE(most_restrictive({}));
}

// Every draft form states reset in whole seconds: the quota resets within the
// second before it, which smooth pacing aims at (docs/RULES.md rule 9).
TEST(ResetResolution, EveryDraftFormStatesWholeSeconds) {
  const std::initializer_list<Header> forms[] = {
      {{"RateLimit-Limit", "100"}, {"RateLimit-Remaining", "5"}, {"RateLimit-Reset", "30"}},
      {{"RateLimit", "limit=100, remaining=5, reset=30"}},
      {{"RateLimit-Policy", "\"p\";q=100;w=60"}, {"RateLimit", "\"p\";r=5;t=30"}},
  };
  for (const auto& f : forms) {
    const auto r = read(f);
    ASSERT_EQ(r.quota.size(), 1u);
    EXPECT_EQ(r.quota[0].reset, 30s);
    EXPECT_EQ(r.quota[0].reset_resolution, 1s) << r.quota[0].source_name();
  }
  // A policy without a reset has no resolution either.
  const auto p = read({{"RateLimit-Policy", "\"p\";q=100;w=60"}});
  ASSERT_EQ(p.quota.size(), 1u);
  EXPECT_EQ(p.quota[0].reset_resolution, Duration::zero());
}

}  // namespace
}  // namespace abide
