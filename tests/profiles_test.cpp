// Vendor profiles: every built-in profile against its vendor's documented
// example (../shared/reference/header-formats.md section 3; [3p] marks facts
// from third-party captures), value semantics, selection, and malformed files.
#include "abide/profiles.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abide/headers.h"
#include "abide/signals.h"
#include "profile_values.h"
#include "profiles_internal.h"

namespace abide {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

const WallTime kNow{std::chrono::seconds{1767225600}};  // 2026-01-01T00:00:00Z

Signals see(std::string_view head_text, std::string_view host, std::string_view profile = {}, WallTime now = kNow,
            bool heuristic = false) {
  auto head = parse_response_head(head_text);
  EXPECT_TRUE(head) << head.error().message;
  if (!head) return {};
  ObserveOptions o;
  o.host = host;
  o.profile = profile;
  o.heuristic = heuristic;
  return observe(head->status, head->headers, now, MonoTime{}, o);
}

const QuotaObservation* policy(const Signals& s, std::string_view name) {
  for (const auto& q : s.quota) {
    if (q.policy == name) return &q;
  }
  return nullptr;
}

bool warned(const Signals& s, std::string_view text) {
  for (const auto& w : s.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

// ---- built-in profiles -------------------------------------------------------------

TEST(BuiltinProfiles, EveryFileInProfilesDirLoads) {
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(ABIDE_SOURCE_DIR) + "/profiles")) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto p = parse_profile(text, entry.path().filename().string());
    EXPECT_TRUE(p) << (p ? "" : p.error().what());
  }
  EXPECT_EQ(ProfileRegistry::builtin().size(), files);
  for (std::string_view name : {"github",     "gitlab",     "openai",       "anthropic",    "discord",
                                "reddit",     "x",          "shopify",      "okta",         "azure-resource-manager",
                                "salesforce", "zendesk",    "atlassian",    "slack",        "envoy",
                                "kong",       "cloudflare", "auth0",        "digitalocean", "fastly",
                                "linear",     "mastodon",   "sendgrid",     "sentry",       "twitch",
                                "vimeo",      "hubspot",    "docker-hub",   "heroku",       "bitbucket",
                                "stripe",     "twilio",     "azure-openai", "gemini"}) {
    EXPECT_NE(ProfileRegistry::builtin().find(name), nullptr) << name;
  }
}

// GitHub REST docs: primary limit exceeded, 403 or 429, remaining 0, reset in epoch seconds.
TEST(GitHub, PrimaryLimitExceededOn403) {
  const auto s = see("HTTP/2 403 \r\n"
                     "date: Thu, 01 Jan 2026 00:00:00 GMT\r\n"
                     "x-ratelimit-limit: 60\r\n"
                     "x-ratelimit-remaining: 0\r\n"
                     "x-ratelimit-used: 60\r\n"
                     "x-ratelimit-reset: 1767226000\r\n"
                     "x-ratelimit-resource: core\r\n\r\n",
                     "api.github.com");
  EXPECT_EQ(s.profile, "github");
  ASSERT_EQ(s.quota.size(), 1u);
  const auto& q = s.quota[0];
  EXPECT_EQ(q.policy, "core");
  EXPECT_EQ(q.limit, 60);
  EXPECT_EQ(q.remaining, 0);
  EXPECT_EQ(q.reset, 400s);
  EXPECT_EQ(q.reset_resolution, 1s);  // a Unix second: the window ends within the second before
  EXPECT_EQ(q.source_name(), "github");
  EXPECT_EQ(q.confidence, Confidence::kHigh);
  EXPECT_TRUE(s.limited);
  EXPECT_EQ(permitted_wait(s).quota, 400s);
  EXPECT_TRUE(s.uninterpreted.empty());
  EXPECT_TRUE(s.warnings.empty());
}

TEST(GitHub, PermissionError403IsNotALimit) {
  const auto s = see("HTTP/2 403 \r\nx-ratelimit-limit: 5000\r\nx-ratelimit-remaining: 4999\r\n"
                     "x-ratelimit-reset: 1767229200\r\nx-ratelimit-resource: core\r\n\r\n",
                     "api.github.com");
  EXPECT_FALSE(s.limited);
  EXPECT_FALSE(permitted_wait(s).quota);
}

// GitHub docs: secondary limit with retry-after; remaining may be non-zero [3p capture: 14].
TEST(GitHub, SecondaryLimitWithRetryAfter) {
  const auto s = see("HTTP/2 403 \r\nretry-after: 60\r\nx-ratelimit-limit: 5000\r\nx-ratelimit-remaining: 14\r\n"
                     "x-ratelimit-reset: 1767229200\r\n\r\n",
                     "api.github.com");
  EXPECT_TRUE(s.limited);
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, 60s);
  EXPECT_EQ(s.quota[0].remaining, 14);  // room left never overrides Retry-After
}

// GitLab issue 199738 capture: RateLimit-Reset is epoch seconds, agreeing with RateLimit-ResetTime.
TEST(GitLab, ResetIsUnixSecondsNotTheDraftsDelta) {
  const WallTime now{std::chrono::seconds{1580393657}};  // 60 s before the reset
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\n"
                     "RateLimit-Limit: 600\r\n"
                     "RateLimit-Name: throttle_authenticated_api\r\n"
                     "RateLimit-Observed: 5\r\n"
                     "RateLimit-Remaining: 595\r\n"
                     "RateLimit-Reset: 1580393717\r\n"
                     "RateLimit-ResetTime: Thu, 30 Jan 2020 14:15:17 GMT\r\n\r\n",
                     "gitlab.com", {}, now);
  EXPECT_EQ(s.profile, "gitlab");
  ASSERT_EQ(s.quota.size(), 1u);  // not also read as the IETF draft
  EXPECT_EQ(s.quota[0].source_name(), "gitlab");
  EXPECT_EQ(s.quota[0].policy, "throttle_authenticated_api");
  EXPECT_EQ(s.quota[0].limit, 600);
  EXPECT_EQ(s.quota[0].remaining, 595);
  EXPECT_EQ(s.quota[0].reset, 60s);
  EXPECT_EQ(s.quota[0].window, 60s);
  EXPECT_TRUE(s.limited);
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_TRUE(s.uninterpreted.empty());
}

TEST(GitLab, ResetTimeUsedWhenResetIsMissing) {
  const WallTime now{std::chrono::seconds{1580393657}};
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nRateLimit-Remaining: 0\r\n"
                     "RateLimit-ResetTime: Thu, 30 Jan 2020 14:15:17 GMT\r\n\r\n",
                     "gitlab.com", {}, now);
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].reset, 60s);
}

// GitLab MR !50833 lists RateLimit-Reset 1800 next to Retry-After 1800: a small "epoch" is read as a delta.
TEST(GitLab, SmallResetIsReadAsSecondsFromNow) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1800\r\nRateLimit-Remaining: 0\r\n"
                     "RateLimit-Reset: 1800\r\n\r\n",
                     "gitlab.example.com", "gitlab");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].reset, 1800s);
  EXPECT_TRUE(warned(s, "too small for Unix time"));
}

// OpenAI docs sample values: 60 / 150000 / 59 / 149984 / 1s / 6m0s.
TEST(OpenAI, RequestsAndTokensWithGoDurations) {
  const auto s = see("HTTP/2 200 \r\n"
                     "x-ratelimit-limit-requests: 60\r\n"
                     "x-ratelimit-limit-tokens: 150000\r\n"
                     "x-ratelimit-remaining-requests: 59\r\n"
                     "x-ratelimit-remaining-tokens: 149984\r\n"
                     "x-ratelimit-reset-requests: 1s\r\n"
                     "x-ratelimit-reset-tokens: 6m0s\r\n\r\n",
                     "api.openai.com");
  ASSERT_EQ(s.quota.size(), 2u);
  const auto* r = policy(s, "requests");
  const auto* t = policy(s, "tokens");
  ASSERT_TRUE(r && t);
  EXPECT_EQ(r->limit, 60);
  EXPECT_EQ(r->remaining, 59);
  EXPECT_EQ(r->reset, 1s);
  EXPECT_EQ(t->unit, "tokens");
  EXPECT_EQ(t->remaining, 149984);
  EXPECT_EQ(t->reset, 6min);
}

// openai-python reads retry-after-ms first; [3p] observed 12ms resets.
TEST(OpenAI, RetryAfterMsLongerThanRetryAfterIsUsed) {
  const auto s = see("HTTP/2 429 \r\nretry-after: 1\r\nretry-after-ms: 1500\r\nx-ratelimit-remaining-requests: 0\r\n"
                     "x-ratelimit-reset-requests: 12ms\r\n\r\n",
                     "api.openai.com");
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, 1500ms);
  EXPECT_EQ(s.retry_after->source, "retry-after-ms");
  EXPECT_EQ(s.quota[0].reset, 12ms);
  EXPECT_TRUE(warned(s, "longer than Retry-After"));
}

TEST(OpenAI, RetryAfterMsNeverShortensRetryAfter) {
  const auto s = see("HTTP/2 429 \r\nretry-after: 2\r\nretry-after-ms: 500\r\n\r\n", "api.openai.com");
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, 2s);
  EXPECT_EQ(s.retry_after->source, "retry-after");
}

// Azure OpenAI has its own profile, selected by the suffix: remaining counts
// only [3p], no reset, so the window (10 s for requests, a minute for tokens)
// bounds the wait; retry-after-ms and x-ms-retry-after-ms.
TEST(AzureOpenAI, RemainingOnlyWindowsBoundTheWait) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nx-ratelimit-remaining-requests: 0\r\n"
                     "x-ratelimit-remaining-tokens: 0\r\nretry-after-ms: 20\r\n\r\n",
                     "myres.openai.azure.com");
  EXPECT_EQ(s.profile, "azure-openai");
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, 20ms);
  ASSERT_EQ(s.quota.size(), 2u);
  ASSERT_NE(policy(s, "requests"), nullptr);
  EXPECT_EQ(policy(s, "requests")->remaining, 0);
  EXPECT_EQ(policy(s, "requests")->reset, 10s);
  ASSERT_NE(policy(s, "tokens"), nullptr);
  EXPECT_EQ(policy(s, "tokens")->unit, "tokens");
  EXPECT_EQ(policy(s, "tokens")->reset, 60s);
  const auto ms = see("HTTP/1.1 429 \r\nx-ms-retry-after-ms: 1500\r\n\r\n", "myres.openai.azure.com");
  ASSERT_TRUE(ms.retry_after);
  EXPECT_EQ(ms.retry_after->wait, 1500ms);
  const Profile* p = ProfileRegistry::builtin().find("azure-openai");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->costs, CostRule::kOpenAI);
  EXPECT_EQ(p->body_hints, std::vector<BodyHintKind>{BodyHintKind::kTryAgainSentence});
  EXPECT_EQ(ProfileRegistry::builtin().for_host("api.openai.com")->name, "openai");
}

// The language-model profiles say how their requests are priced and where a
// limited answer's body states a wait.
TEST(LlmProfiles, CostsAndBodyHints) {
  const auto& r = ProfileRegistry::builtin();
  EXPECT_EQ(r.find("openai")->costs, CostRule::kOpenAI);
  EXPECT_EQ(r.find("openai")->body_hints, std::vector<BodyHintKind>{BodyHintKind::kTryAgainSentence});
  EXPECT_EQ(r.find("anthropic")->costs, CostRule::kAnthropic);
  EXPECT_EQ(r.find("anthropic")->body_hints, std::vector<BodyHintKind>{BodyHintKind::kTryAgainSentence});
  EXPECT_EQ(r.find("github")->costs, CostRule::kNone);
  EXPECT_TRUE(r.find("github")->body_hints.empty());
}

// Gemini and Vertex AI: no quota headers; 429 with the wait in the body; no
// word from Google that a 429 processed nothing.
TEST(Gemini, HostsAndBodyHint) {
  const auto& r = ProfileRegistry::builtin();
  for (std::string_view host :
       {"generativelanguage.googleapis.com", "aiplatform.googleapis.com", "x.aiplatform.googleapis.com"}) {
    ASSERT_NE(r.for_host(host), nullptr) << host;
    EXPECT_EQ(r.for_host(host)->name, "gemini") << host;
  }
  const Profile* g = r.find("gemini");
  EXPECT_EQ(g->body_hints, std::vector<BodyHintKind>{BodyHintKind::kGoogleRetryInfo});
  EXPECT_EQ(g->costs, CostRule::kNone);
  EXPECT_TRUE(g->limited_unprocessed.empty());
  EXPECT_TRUE(g->quotas.empty());
  EXPECT_TRUE(see("HTTP/2 429 \r\n\r\n", "generativelanguage.googleapis.com").limited);
}

// Anthropic docs: anthropic-ratelimit-*-reset in RFC 3339 [3p value 2025-08-21T12:40:59Z]; 529 overload.
TEST(Anthropic, Rfc3339Resets) {
  const WallTime now{std::chrono::sys_days{std::chrono::year{2025} / 8 / 21} + 12h + 40min};
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\n"
                     "retry-after: 59\r\n"
                     "anthropic-ratelimit-requests-limit: 50\r\n"
                     "anthropic-ratelimit-requests-remaining: 0\r\n"
                     "anthropic-ratelimit-requests-reset: 2025-08-21T12:40:59Z\r\n"
                     "anthropic-ratelimit-tokens-limit: 80000\r\n"
                     "anthropic-ratelimit-tokens-remaining: 80000\r\n"
                     "anthropic-ratelimit-tokens-reset: 2025-08-21T12:40:01Z\r\n"
                     "anthropic-ratelimit-input-tokens-limit: 40000\r\n"
                     "anthropic-ratelimit-input-tokens-remaining: 39000\r\n"
                     "anthropic-ratelimit-input-tokens-reset: 2025-08-21T12:40:02Z\r\n"
                     "anthropic-ratelimit-output-tokens-limit: 8000\r\n"
                     "anthropic-ratelimit-output-tokens-remaining: 8000\r\n"
                     "anthropic-ratelimit-output-tokens-reset: 2025-08-21T12:40:00Z\r\n\r\n",
                     "api.anthropic.com", {}, now);
  ASSERT_EQ(s.quota.size(), 4u);
  EXPECT_EQ(policy(s, "requests")->reset, 59s);
  EXPECT_EQ(policy(s, "input-tokens")->unit, "input-tokens");
  EXPECT_EQ(policy(s, "input-tokens")->reset, 2s);
  EXPECT_EQ(policy(s, "output-tokens")->reset, 0s);
  EXPECT_EQ(permitted_wait(s).wait, 59s);  // the Retry-After and the requests reset agree
  EXPECT_TRUE(s.limited);
  EXPECT_TRUE(see("HTTP/1.1 529 Overloaded\r\n\r\n", "api.anthropic.com").limited);
}

// Discord docs: Reset-After (float seconds) preferred, bucket as partition key, scope on 429.
TEST(Discord, RateLimitedRoute) {
  const auto s = see("HTTP/1.1 429 TOO MANY REQUESTS\r\n"
                     "Retry-After: 65\r\n"
                     "X-RateLimit-Limit: 10\r\n"
                     "X-RateLimit-Remaining: 0\r\n"
                     "X-RateLimit-Reset: 1470173023.123\r\n"
                     "X-RateLimit-Reset-After: 64.57\r\n"
                     "X-RateLimit-Bucket: abcd1234\r\n"
                     "X-RateLimit-Scope: user\r\n\r\n",
                     "discord.com");
  ASSERT_EQ(s.quota.size(), 1u);
  const auto& q = s.quota[0];
  EXPECT_EQ(q.policy, "user");
  EXPECT_EQ(q.limit, 10);
  EXPECT_EQ(q.remaining, 0);
  EXPECT_EQ(q.reset, 64570ms);
  EXPECT_EQ(q.partition_key, "abcd1234");
  EXPECT_EQ(s.retry_after->wait, 65s);
  EXPECT_TRUE(s.uninterpreted.empty());
}

TEST(Discord, EpochWithFractionWhenResetAfterIsMissing) {
  const WallTime now{std::chrono::seconds{1470173000}};
  const auto s = see("HTTP/1.1 200 OK\r\nX-RateLimit-Limit: 5\r\nX-RateLimit-Remaining: 1\r\n"
                     "X-RateLimit-Reset: 1470173023.123\r\nX-RateLimit-Bucket: abcd1234\r\n\r\n",
                     "discord.com", {}, now);
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].reset, 23123ms);
  EXPECT_EQ(s.quota[0].policy, "");
}

// Reddit wiki: used / remaining (decimal in PRAW) / reset in seconds; no limit header.
TEST(Reddit, UsedRemainingResetDelta) {
  const auto s = see("HTTP/1.1 200 OK\r\nX-Ratelimit-Used: 4\r\nX-Ratelimit-Remaining: 596.0\r\n"
                     "X-Ratelimit-Reset: 240\r\n\r\n",
                     "oauth.reddit.com");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].remaining, 596);
  EXPECT_EQ(s.quota[0].limit, 600);
  EXPECT_EQ(s.quota[0].reset, 240s);  // a delta here, an epoch at GitHub
}

// X API v2 docs: x-rate-limit-reset is a Unix timestamp; 15-minute windows.
TEST(X, RateLimitExceeded) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nx-rate-limit-limit: 900\r\nx-rate-limit-remaining: 0\r\n"
                     "x-rate-limit-reset: 1767226500\r\n\r\n",
                     "api.x.com");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].reset, 900s);
  EXPECT_EQ(permitted_wait(s).quota, 900s);
  EXPECT_EQ(see("HTTP/1.1 200 OK\r\n\r\n", "api.twitter.com").profile, "x");
}

// Shopify REST Admin docs: 32/40 call limit; Retry-After: 2.0 on 429.
TEST(Shopify, CallLimitAndDecimalRetryAfter) {
  const auto s =
      see("HTTP/1.1 429 Too Many Requests\r\nX-Shopify-Shop-Api-Call-Limit: 40/40\r\nRetry-After: 2.0\r\n\r\n",
          "shop.myshopify.com");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].limit, 40);
  EXPECT_EQ(s.quota[0].remaining, 0);
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, 2s);
  const auto ok = see("HTTP/1.1 200 OK\r\nX-Shopify-Shop-Api-Call-Limit: 32/40\r\n\r\n", "shop.myshopify.com");
  EXPECT_EQ(ok.quota[0].remaining, 8);
  EXPECT_EQ(ok.quota[0].policy, "rest-admin");
}

// Okta docs: X-Rate-Limit-* with reset in UTC epoch seconds.
TEST(Okta, EpochReset) {
  const auto s = see("HTTP/1.1 200 OK\r\nX-Rate-Limit-Limit: 600\r\nX-Rate-Limit-Remaining: 599\r\n"
                     "X-Rate-Limit-Reset: 1767225660\r\n\r\n",
                     "dev-123.okta.com");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].limit, 600);
  EXPECT_EQ(s.quota[0].reset, 60s);
}

// Azure docs: remaining-only counters; [3p] global-reads and a Compute resource list; ms retry delays.
TEST(AzureResourceManager, RemainingCountersAndResourceList) {
  const auto s = see(
      "HTTP/1.1 200 OK\r\n"
      "x-ms-ratelimit-remaining-subscription-reads: 11999\r\n"
      "x-ms-ratelimit-remaining-subscription-global-reads: 3749\r\n"
      "x-ms-ratelimit-remaining-tenant-writes: 1199\r\n"
      "x-ms-ratelimit-remaining-resource: Microsoft.Compute/GetVMScaleSet3Min;197,Microsoft.Compute/GetVMScaleSet30Min;1297\r\n\r\n",
      "management.azure.com");
  ASSERT_EQ(s.quota.size(), 5u);
  EXPECT_EQ(policy(s, "Microsoft.Compute/GetVMScaleSet3Min")->remaining, 197);
  EXPECT_EQ(policy(s, "Microsoft.Compute/GetVMScaleSet30Min")->remaining, 1297);
  EXPECT_EQ(policy(s, "subscription-reads")->remaining, 11999);
  EXPECT_EQ(policy(s, "subscription-global-reads")->remaining, 3749);
  EXPECT_EQ(policy(s, "tenant-writes")->remaining, 1199);
  EXPECT_TRUE(s.uninterpreted.empty());
}

TEST(AzureResourceManager, ThrottledWithMillisecondRetryDelay) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 17\r\nx-ms-retry-after-ms: 17500\r\n"
                     "x-ms-ratelimit-remaining-subscription-writes: 0\r\n\r\n",
                     "management.azure.com");
  EXPECT_TRUE(s.limited);
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, 17500ms);
  EXPECT_EQ(s.retry_after->source, "x-ms-retry-after-ms");
}

// Azure Cosmos DB [3p]: x-ms-retry-after-ms from a host without a profile: reported, not used.
TEST(AzureResourceManager, CosmosHostWithoutProfileIsUninterpreted) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nx-ms-retry-after-ms: 1500\r\n\r\n", "acct.documents.azure.com");
  EXPECT_EQ(s.profile, "");
  EXPECT_FALSE(s.retry_after);
  ASSERT_EQ(s.uninterpreted.size(), 1u);
  EXPECT_EQ(s.uninterpreted[0].name, "x-ms-retry-after-ms");
  const auto chosen = see("HTTP/1.1 429 Too Many Requests\r\nx-ms-retry-after-ms: 1500\r\n\r\n",
                          "acct.documents.azure.com", "azure-resource-manager");
  ASSERT_TRUE(chosen.retry_after);
  EXPECT_EQ(chosen.retry_after->wait, 1500ms);
}

// Salesforce docs: Sforce-Limit-Info: api-usage=18/5000; pilot per-app usage after "; ".
TEST(Salesforce, ApiUsage) {
  const auto s = see("HTTP/1.1 200 OK\r\nSforce-Limit-Info: api-usage=18/5000\r\n\r\n", "na1.salesforce.com");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].policy, "api-usage");
  EXPECT_EQ(s.quota[0].limit, 5000);
  EXPECT_EQ(s.quota[0].remaining, 4982);
  EXPECT_EQ(s.quota[0].window, 24h);
}

TEST(Salesforce, PerAppUsageAndBursts) {
  const auto s = see("HTTP/1.1 200 OK\r\nSforce-Limit-Info: api-usage=25/5000; "
                     "per-app-api-usage=17/250(appName=sample-connected-app); api-bursts=1/750\r\n\r\n",
                     "acme.my.salesforce.com");
  ASSERT_EQ(s.quota.size(), 3u);
  const auto* app = policy(s, "per-app-api-usage");
  ASSERT_NE(app, nullptr);
  EXPECT_EQ(app->remaining, 233);
  EXPECT_EQ(app->partition_key, "appName=sample-connected-app");
  EXPECT_EQ(policy(s, "api-bursts")->remaining, 749);
}

TEST(Salesforce, Forbidden403WithExhaustedUsageIsLimited) {
  EXPECT_TRUE(
      see("HTTP/1.1 403 Forbidden\r\nSforce-Limit-Info: api-usage=5000/5000\r\n\r\n", "na1.salesforce.com").limited);
  EXPECT_FALSE(
      see("HTTP/1.1 403 Forbidden\r\nSforce-Limit-Info: api-usage=18/5000\r\n\r\n", "na1.salesforce.com").limited);
}

// Zendesk docs: X-Rate-Limit (no -Limit suffix), ratelimit-* delta, and the endpoint field.
TEST(Zendesk, AccountEndpointAndTicketsIndex) {
  const auto s = see("HTTP/1.1 200 OK\r\n"
                     "X-Rate-Limit: 700\r\n"
                     "X-Rate-Limit-Remaining: 699\r\n"
                     "ratelimit-limit: 100\r\n"
                     "ratelimit-remaining: 99\r\n"
                     "ratelimit-reset: 41\r\n"
                     "zendesk-ratelimit-tickets-index: total=100; remaining=99; resets=41\r\n\r\n",
                     "acme.zendesk.com");
  ASSERT_EQ(s.quota.size(), 3u);
  EXPECT_EQ(policy(s, "account")->limit, 700);
  EXPECT_EQ(policy(s, "account")->window, 60s);
  EXPECT_EQ(policy(s, "endpoint")->reset, 41s);
  const auto* t = policy(s, "tickets-index");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->limit, 100);
  EXPECT_EQ(t->remaining, 99);
  EXPECT_EQ(t->reset, 41s);
  for (const auto& q : s.quota) EXPECT_EQ(q.source_name(), "zendesk");
}

// Atlassian Jira Cloud docs: Retry-After plus X-RateLimit-Reset in yyyy-MM-ddTHH:mmZ; RateLimit-Reason.
TEST(Atlassian, MinutePrecisionResetAndReason) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\n"
                     "Retry-After: 5\r\n"
                     "X-RateLimit-Limit: 100\r\n"
                     "X-RateLimit-Remaining: 0\r\n"
                     "X-RateLimit-Reset: 2026-01-01T00:05Z\r\n"
                     "X-RateLimit-NearLimit: true\r\n"
                     "RateLimit-Reason: jira-burst-based\r\n\r\n",
                     "acme.atlassian.net");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].policy, "jira-burst-based");
  EXPECT_EQ(s.quota[0].reset, 300s);
  EXPECT_EQ(s.retry_after->wait, 5s);
  EXPECT_TRUE(s.uninterpreted.empty());
  EXPECT_TRUE(s.warnings.empty());
}

// Atlassian 2026 points quota [3p capture]: Beta-RateLimit in draft-08 syntax.
TEST(Atlassian, BetaPointsQuota) {
  const auto s = see("HTTP/1.1 200 OK\r\n"
                     "Beta-RateLimit-Policy: \"global-app-quota\";q=65000;w=3600\r\n"
                     "Beta-RateLimit: \"global-app-quota\";r=120;t=1500\r\n"
                     "X-Beta-RateLimit-Reset: 2026-01-01T00:25Z\r\n\r\n",
                     "acme.atlassian.net");
  const auto* q = policy(s, "global-app-quota");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->source_name(), "atlassian");
  EXPECT_EQ(q->limit, 65000);
  EXPECT_EQ(q->remaining, 120);
  EXPECT_EQ(q->window, 1h);
  EXPECT_EQ(policy(s, "beta")->reset, 25min);
}

// Slack docs: only Retry-After on 429.
TEST(Slack, RetryAfterOnly) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 30\r\n\r\n", "slack.com");
  EXPECT_EQ(s.profile, "slack");
  EXPECT_TRUE(s.limited);
  EXPECT_TRUE(s.quota.empty());
  EXPECT_EQ(s.retry_after->wait, 30s);
}

// Envoy global filter: draft-03 list under x-ratelimit-*; x-envoy-ratelimited on 429.
TEST(Envoy, GlobalAndLocalFilters) {
  const auto global = see("HTTP/1.1 429 Too Many Requests\r\n"
                          "x-envoy-ratelimited: true\r\n"
                          "x-ratelimit-limit: 10, 10;w=60;name=\"per-minute\", 1000;w=86400\r\n"
                          "x-ratelimit-remaining: 0\r\n"
                          "x-ratelimit-reset: 42\r\n\r\n",
                          "gateway.internal", "envoy");
  EXPECT_EQ(global.profile, "envoy");
  ASSERT_EQ(global.quota.size(), 2u);
  EXPECT_EQ(global.quota[0].source_name(), "envoy");
  EXPECT_EQ(global.quota[0].policy, "per-minute");
  EXPECT_EQ(global.quota[0].reset, 42s);
  EXPECT_EQ(permitted_wait(global).quota, 42s);
  EXPECT_TRUE(global.uninterpreted.empty());
  EXPECT_TRUE(global.limited);

  const auto local = see("HTTP/1.1 200 OK\r\nx-ratelimit-limit: 100\r\nx-ratelimit-remaining: 99\r\n"
                         "x-ratelimit-reset: 1\r\n\r\n",
                         "gateway.internal", "envoy");
  ASSERT_EQ(local.quota.size(), 1u);
  EXPECT_EQ(local.quota[0].limit, 100);
}

// Kong rate-limiting plugin: RateLimit-* for the tightest window plus per-window headers.
TEST(Kong, PerWindowHeaders) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\n"
                     "Retry-After: 40\r\n"
                     "RateLimit-Limit: 5\r\n"
                     "RateLimit-Remaining: 0\r\n"
                     "RateLimit-Reset: 40\r\n"
                     "X-RateLimit-Limit-Minute: 5\r\n"
                     "X-RateLimit-Remaining-Minute: 0\r\n"
                     "X-RateLimit-Limit-Hour: 100\r\n"
                     "X-RateLimit-Remaining-Hour: 95\r\n\r\n",
                     "kong.internal", "kong");
  ASSERT_EQ(s.quota.size(), 3u);
  for (const auto& q : s.quota) EXPECT_EQ(q.source_name(), "kong");
  EXPECT_EQ(s.quota[0].reset, 40s);
  EXPECT_EQ(policy(s, "minute")->window, 60s);
  EXPECT_EQ(policy(s, "hour")->remaining, 95);
  EXPECT_TRUE(s.uninterpreted.empty());
}

// Cloudflare docs: the draft-08 fields, names need not match.
TEST(Cloudflare, Draft08FieldsDifferentNames) {
  const auto s = see("HTTP/2 429 \r\nretry-after: 300\r\nratelimit: \"default\";r=0;t=300\r\n"
                     "ratelimit-policy: \"burst\";q=1200;w=300\r\n\r\n",
                     "api.cloudflare.com");
  EXPECT_EQ(s.profile, "cloudflare");
  ASSERT_EQ(s.quota.size(), 2u);
  EXPECT_EQ(policy(s, "default")->remaining, 0);
  EXPECT_EQ(policy(s, "burst")->limit, 1200);
  EXPECT_EQ(policy(s, "default")->source, QuotaSource::kDraft08);
}

// ---- selection -------------------------------------------------------------------------

TEST(Selection, ByHostExactOrSuffixIgnoringCaseAndPort) {
  const auto& r = ProfileRegistry::builtin();
  EXPECT_EQ(r.for_host("api.github.com")->name, "github");
  EXPECT_EQ(r.for_host("API.GitHub.com:443")->name, "github");
  EXPECT_EQ(r.for_host("github.com.")->name, "github");
  EXPECT_EQ(r.for_host("uploads.github.com")->name, "github");
  EXPECT_EQ(r.for_host("notgithub.com"), nullptr);
  EXPECT_EQ(r.for_host("github.com.evil.example"), nullptr);
  EXPECT_EQ(r.for_host(""), nullptr);
  EXPECT_EQ(r.for_host("example.com"), nullptr);
  EXPECT_EQ(r.find("GitHub")->name, "github");
  EXPECT_EQ(r.find("nope"), nullptr);
}

TEST(Selection, ExactBeatsSuffixAndLongerSuffixBeatsShorter) {
  ProfileRegistry r;
  ASSERT_TRUE(r.load_text(R"({"name":"wide","hosts":[".example.com"]})", "wide.json"));
  ASSERT_TRUE(r.load_text(R"({"name":"narrow","hosts":[".api.example.com"]})", "narrow.json"));
  ASSERT_TRUE(r.load_text(R"({"name":"exact","hosts":["v2.api.example.com"]})", "exact.json"));
  EXPECT_EQ(r.for_host("www.example.com")->name, "wide");
  EXPECT_EQ(r.for_host("v1.api.example.com")->name, "narrow");
  EXPECT_EQ(r.for_host("v2.api.example.com")->name, "exact");
}

TEST(Selection, ProfileNoneAndUnknownName) {
  const char* head = "HTTP/2 200 \r\nx-ratelimit-remaining: 1\r\nx-ratelimit-reset: 1767229200\r\n\r\n";
  const auto none = see(head, "api.github.com", "none");
  EXPECT_EQ(none.profile, "");
  EXPECT_TRUE(none.quota.empty());
  EXPECT_EQ(none.uninterpreted.size(), 2u);
  const auto unknown = see(head, "", "nope");
  EXPECT_TRUE(warned(unknown, "no profile named \"nope\""));
}

// A host without a profile: vendor headers reported, never used; heuristic only on request.
TEST(NoProfile, VendorHeadersAreReportedNotUsed) {
  const char* head = "HTTP/1.1 429 Too Many Requests\r\nX-RateLimit-Limit: 100\r\nX-RateLimit-Remaining: 0\r\n"
                     "X-RateLimit-Reset: 1767225630\r\nContent-Type: text/plain\r\n\r\n";
  const auto s = see(head, "api.unknown.example");
  EXPECT_TRUE(s.quota.empty());
  EXPECT_FALSE(permitted_wait(s).quota);
  ASSERT_EQ(s.uninterpreted.size(), 3u);
  EXPECT_EQ(s.uninterpreted[0].name, "X-RateLimit-Limit");
  EXPECT_TRUE(warned(s, "not interpreted (no vendor profile)"));
  EXPECT_TRUE(s.limited);

  const auto h = see(head, "api.unknown.example", {}, kNow, /*heuristic=*/true);
  ASSERT_EQ(h.quota.size(), 1u);
  EXPECT_EQ(h.quota[0].confidence, Confidence::kLow);
  EXPECT_EQ(h.quota[0].source, QuotaSource::kHeuristic);
  EXPECT_EQ(h.quota[0].source_name(), "heuristic");
  EXPECT_EQ(h.quota[0].reset, 30s);       // a large number is read as Unix seconds
  EXPECT_FALSE(permitted_wait(h).quota);  // low confidence never blocks
  EXPECT_TRUE(h.uninterpreted.empty());
}

TEST(NoProfile, HeuristicGuessesTheResetFormat) {
  const auto delta = see("HTTP/1.1 200 OK\r\nX-RateLimit-Remaining: 5\r\nX-RateLimit-Reset: 30\r\n\r\n", "h", {}, kNow,
                         true);
  EXPECT_EQ(delta.quota[0].reset, 30s);
  const auto go = see("HTTP/1.1 200 OK\r\nX-RateLimit-Reset: 6m0s\r\n\r\n", "h", {}, kNow, true);
  EXPECT_EQ(go.quota[0].reset, 6min);
  const auto iso = see("HTTP/1.1 200 OK\r\nX-Rate-Limit-Reset: 2026-01-01T00:01:00Z\r\n\r\n", "h", {}, kNow, true);
  EXPECT_EQ(iso.quota[0].reset, 60s);
  // lemlist [3p]: Date.toString() text is not understood, and says so.
  const auto js = see(
      "HTTP/1.1 200 OK\r\nX-RateLimit-Reset: Tue Feb 16 2021 09:02:42 GMT+0100 (Central European Standard Time)\r\n\r\n",
      "h", {}, kNow, true);
  EXPECT_TRUE(js.quota.empty());
  EXPECT_TRUE(warned(js, "not understood"));
  // As for a profile, nothing is read as a wait of decades (2286; 31,000 years).
  const auto far = see("HTTP/1.1 429 \r\nX-RateLimit-Reset: 9999999999\r\nretry-after-ms: 999999999999999\r\n\r\n",
                       "h", {}, kNow, true);
  EXPECT_TRUE(far.quota.empty());
  EXPECT_FALSE(far.retry_after);
  EXPECT_TRUE(warned(far, "\"9999999999\" ignored: more than a year ahead"));
  EXPECT_TRUE(warned(far, "\"999999999999999\" ignored: more than a year ahead"));
}

TEST(VendorHeaderNames, WhatLooksLikeAQuotaHeader) {
  using detail::looks_like_vendor_quota_header;
  EXPECT_TRUE(looks_like_vendor_quota_header("X-RateLimit-Remaining"));
  EXPECT_TRUE(looks_like_vendor_quota_header("x-rate-limit-reset"));
  EXPECT_TRUE(looks_like_vendor_quota_header("anthropic-ratelimit-tokens-reset"));
  EXPECT_TRUE(looks_like_vendor_quota_header("RateLimit-Observed"));
  EXPECT_TRUE(looks_like_vendor_quota_header("retry-after-ms"));
  EXPECT_TRUE(looks_like_vendor_quota_header("Sforce-Limit-Info"));
  EXPECT_FALSE(looks_like_vendor_quota_header("RateLimit"));
  EXPECT_FALSE(looks_like_vendor_quota_header("ratelimit-policy"));
  EXPECT_FALSE(looks_like_vendor_quota_header("RateLimit-Reset"));
  EXPECT_FALSE(looks_like_vendor_quota_header("Retry-After"));
  EXPECT_FALSE(looks_like_vendor_quota_header("Content-Type"));
}

// ---- malformed profile files ---------------------------------------------------------------

std::string load_error(std::string_view text, std::string_view file = "mine.json") {
  ProfileRegistry r;
  auto loaded = r.load_text(text, file);
  EXPECT_FALSE(loaded);
  return loaded ? std::string() : loaded.error().what();
}

TEST(MalformedProfile, MessageNamesFileAndField) {
  EXPECT_EQ(load_error(R"({"name": "acme", "quotas": [{"reset": {"header": "x-reset", "format": "epoch"}}]})"),
            "mine.json: quotas[0].reset.format: unknown time format \"epoch\" (line 1)");
  EXPECT_EQ(load_error(
                "{\n  \"name\": \"acme\",\n  \"quotas\": [\n    {\"limit\": \"x-limit\", \"remaining\": 5}\n  ]\n}"),
            "mine.json: quotas[0].remaining: expected a header name or an object with \"header\" (line 4)");
  EXPECT_EQ(load_error(R"({"name": "acme", "limited_statuses": [429, "403"]})"),
            "mine.json: limited_statuses[1]: expected an HTTP status (an integer from 100 to 999) (line 1)");
  EXPECT_EQ(load_error(R"({"name": "acme", "hosts": ["api.acme.com"], "quota": []})"),
            "mine.json: quota: unknown field (line 1)");
  EXPECT_EQ(load_error(R"({"hosts": []})"), "mine.json: name: missing (line 1)");
  EXPECT_EQ(load_error(R"({"name": "Acme Corp"})"),
            "mine.json: name: use lower-case letters, digits, '-' and '_' (line 1)");
  EXPECT_THAT(
      load_error(R"({"name": "acme", "quotas": [{"window": {"header": "x-w", "format": "rfc3339"}, "limit": "x-l"}]})"),
      HasSubstr("quotas[0].window.format: a window is a length"));
  EXPECT_THAT(load_error(R"({"name": "acme", "quotas": [{"limit": {"header": "x-l", "format": "used_limit"}}]})"),
              HasSubstr("quotas[0].limit.format: format \"used_limit\" is not allowed here"));
  EXPECT_THAT(load_error(R"({"name": "acme", "quotas": [{"policy": "p"}]})"),
              HasSubstr("quotas[0]: a quota must read"));
  EXPECT_THAT(load_error(R"({"name": "acme", "quotas": [{"limit": "bad name"}]})"),
              HasSubstr("quotas[0].limit: not a valid header name"));
  EXPECT_THAT(load_error(R"({"name": "acme", "retry_delays": [{"header": "x-ms", "format": "minutes"}]})"),
              HasSubstr("retry_delays[0].format: unknown time format"));
  EXPECT_THAT(load_error(R"({"name": "none", "limited_statuses": [429]})"), HasSubstr("reserved"));
  // A claim that lets a POST repeat says where it comes from.
  EXPECT_EQ(load_error(R"({"name": "acme", "limited_unprocessed": ""})"),
            "mine.json: limited_unprocessed: must not be empty (line 1)");
  EXPECT_THAT(load_error(R"({"name": "acme", "limited_unprocessed": true})"),
              HasSubstr("limited_unprocessed: expected string"));
}

TEST(MalformedProfile, CostsAndBodyHints) {
  EXPECT_EQ(load_error(R"({"name": "acme", "limited_statuses": [429], "costs": "gemini"})"),
            "mine.json: costs: unknown cost rule \"gemini\" (expected \"openai\" or \"anthropic\") (line 1)");
  EXPECT_EQ(load_error(R"({"name": "acme", "limited_statuses": [429], "costs": "none"})"),
            "mine.json: costs: unknown cost rule \"none\" (expected \"openai\" or \"anthropic\") (line 1)");
  EXPECT_EQ(load_error(R"({"name": "acme", "costs": ["openai"]})"),
            "mine.json: costs: expected string, found array (line 1)");
  EXPECT_EQ(load_error(R"({"name": "acme", "body_hints": "try_again_sentence"})"),
            "mine.json: body_hints: expected array, found string (line 1)");
  EXPECT_EQ(load_error("{\"name\": \"acme\",\n \"body_hints\": [\"try_again_sentence\", \"retry_info\"]}"),
            "mine.json: body_hints[1]: unknown body hint \"retry_info\" (expected \"google_retry_info\" or "
            "\"try_again_sentence\") (line 2)");
  EXPECT_EQ(load_error(R"({"name": "acme", "body_hints": [1]})"),
            "mine.json: body_hints[0]: expected string, found number (line 1)");
  EXPECT_EQ(load_error(R"({"name": "acme", "body_hints": ["google_retry_info", "google_retry_info"]})"),
            "mine.json: body_hints[1]: \"google_retry_info\" is listed twice (line 1)");
  // A hostile value is shown escaped.
  EXPECT_THAT(load_error("{\"name\": \"acme\", \"costs\": \"\\u001b[2J\"}"), ::testing::Not(HasSubstr("\x1b")));

  const auto p = parse_profile(R"({"name": "llm", "hosts": ["llm.test"], "costs": "anthropic",
      "body_hints": ["try_again_sentence", "google_retry_info"]})");
  ASSERT_TRUE(p) << p.error().what();
  EXPECT_EQ(p->costs, CostRule::kAnthropic);
  EXPECT_EQ(p->body_hints,
            (std::vector<BodyHintKind>{BodyHintKind::kTryAgainSentence, BodyHintKind::kGoogleRetryInfo}));
  EXPECT_EQ(to_string(CostRule::kOpenAI), "openai");
  EXPECT_EQ(to_string(BodyHintKind::kGoogleRetryInfo), "google_retry_info");
  EXPECT_EQ(cost_rule_from_string("anthropic"), CostRule::kAnthropic);
  EXPECT_EQ(body_hint_kind_from_string("Try_Again_Sentence"), std::nullopt);
}

TEST(MalformedProfile, InvalidJsonNamesFileAndLine) {
  EXPECT_EQ(load_error("{\"name\": \"acme\",\n \"hosts\": [\"a.com\",]\n}"),
            "mine.json: invalid JSON: unexpected character ']' at column 20 (line 2)");
  EXPECT_THAT(load_error(R"({"name": "a", "name": "b"})"), HasSubstr("duplicate member \"name\""));
  EXPECT_THAT(load_error(R"({"name": "acme"} trailing)"), HasSubstr("unexpected characters after"));
  EXPECT_THAT(load_error("[1, 2]"), HasSubstr("expected object, found array"));
  EXPECT_THAT(load_error(""), HasSubstr("invalid JSON"));
  EXPECT_THAT(load_error(R"({"name": "acme\u0000"})"), HasSubstr("name"));
  EXPECT_THAT(load_error("{\"name\": \"a\xff\"}"), HasSubstr("invalid UTF-8"));
  EXPECT_THAT(load_error(std::string(100, '[') + std::string(100, ']')), HasSubstr("nesting deeper than 32"));
  EXPECT_THAT(load_error(R"({"name": "acme", "limited_statuses": [01]})"), HasSubstr("leading zero"));
  EXPECT_THAT(load_error(R"({"name": "acme", // comment
  })"),
              HasSubstr("invalid JSON"));
}

TEST(MalformedProfile, LoadFileReportsThePath) {
  const auto dir = std::filesystem::temp_directory_path() / "abide_profiles_test";
  std::filesystem::create_directories(dir);
  const auto bad = dir / "broken.json";
  std::ofstream(bad) << R"({"name": "acme", "quotas": [{"reset": [{"header": "x-r", "format": "fortnights"}]}]})";
  ProfileRegistry r;
  auto loaded = r.load_file(bad);
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().file, bad.string());
  EXPECT_EQ(loaded.error().field, "quotas[0].reset[0].format");
  EXPECT_THAT(loaded.error().what(), HasSubstr("broken.json: quotas[0].reset[0].format: unknown time format"));
  auto missing = r.load_file(dir / "missing.json");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().what(), HasSubstr("missing.json: cannot be read"));
  std::filesystem::remove_all(dir);
}

TEST(UserProfiles, LoadedAtRunTimeAndOverrideBuiltins) {
  ProfileRegistry r = ProfileRegistry::with_builtins();
  const std::size_t before = r.size();
  auto name = r.load_text(R"({
    "name": "acme",
    "hosts": ["api.acme.test"],
    "limited_statuses": [429, 420],
    "quotas": [{"policy": "main", "limit": "x-acme-limit", "remaining": "x-acme-left",
                "reset": {"header": "x-acme-reset", "format": "milliseconds"}, "window_s": 1.5}]
  })",
                          "acme.json");
  ASSERT_TRUE(name);
  EXPECT_EQ(*name, "acme");
  EXPECT_EQ(r.size(), before + 1);
  ASSERT_TRUE(r.load_text(R"({"name": "github", "hosts": ["api.github.com"], "limited_statuses": [418]})", "gh.json"));
  EXPECT_EQ(r.size(), before + 1);
  EXPECT_EQ(r.find("github")->file, "gh.json");

  HeaderList h{{"X-Acme-Limit", "10"}, {"X-Acme-Left", "0"}, {"X-Acme-Reset", "2500"}};
  ObserveOptions o;
  o.host = "api.acme.test";
  o.registry = &r;
  const auto s = observe(420, h, kNow, MonoTime{}, o);
  EXPECT_TRUE(s.limited);
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].reset, 2500ms);
  EXPECT_EQ(s.quota[0].window, 1500ms);
}

// ---- value semantics -------------------------------------------------------------------------

TEST(GoDuration, ParsesGoStrings) {
  EXPECT_EQ(parse_go_duration("1s"), 1s);
  EXPECT_EQ(parse_go_duration("6m0s"), 6min);
  EXPECT_EQ(parse_go_duration("20ms"), 20ms);
  EXPECT_EQ(parse_go_duration("12ms"), 12ms);
  EXPECT_EQ(parse_go_duration("1h2m3.5s"), 1h + 2min + 3500ms);
  EXPECT_EQ(parse_go_duration("1.5h"), 90min);
  EXPECT_EQ(parse_go_duration("300us"), 300us);
  EXPECT_EQ(parse_go_duration("300\xC2\xB5s"), 300us);
  EXPECT_EQ(parse_go_duration("300\xCE\xBCs"), 300us);
  EXPECT_EQ(parse_go_duration("7ns"), 7ns);
  EXPECT_EQ(parse_go_duration("0"), 0s);
  EXPECT_EQ(parse_go_duration(".5s"), 500ms);
  EXPECT_EQ(parse_go_duration("5.s"), 5s);
  EXPECT_EQ(parse_go_duration("0.0000000001s"), 1ns);  // rounds up, never down
  EXPECT_EQ(parse_go_duration("99999999999h"), kMaxDuration);
  for (const char* bad : {"", "1", "s", "-1s", "+1s", "1x", "1s ", " 1s", "1..5s", ".s", "1m-2s", "1S"}) {
    EXPECT_FALSE(parse_go_duration(bad)) << bad;
  }
}

TEST(DecimalDuration, ExactToTheNanosecond) {
  EXPECT_EQ(parse_decimal_duration("64.57", 1s), 64570ms);
  EXPECT_EQ(parse_decimal_duration("1470173023.123", 1s), std::chrono::milliseconds{1470173023123});
  EXPECT_EQ(parse_decimal_duration("1500", 1ms), 1500ms);
  EXPECT_EQ(parse_decimal_duration("0.5", 1ms), 500us);
  EXPECT_EQ(parse_decimal_duration("0.1234567891", 1s), 123456790ns);
  EXPECT_EQ(parse_decimal_duration("99999999999999999999999", 1s), kMaxDuration);
  for (const char* bad : {"", ".", "1.", ".5", "-1", "+1", "1e3", "1,5", "0x10", " 1"}) {
    EXPECT_FALSE(parse_decimal_duration(bad, 1s)) << bad;
  }
}

TEST(TimeValue, EveryFormat) {
  const auto v = [](std::string_view text, TimeFormat f, std::optional<WallTime> date = std::nullopt) {
    auto t = parse_time_value(text, f, kNow, date);
    return t ? std::optional<Duration>(t->from_receipt) : std::nullopt;
  };
  EXPECT_EQ(v("1767225630", TimeFormat::kUnixSeconds), 30s);
  EXPECT_FALSE(v("1767225630.5", TimeFormat::kUnixSeconds));
  EXPECT_EQ(v("1767225630.5", TimeFormat::kUnixSecondsFraction), 30500ms);
  EXPECT_EQ(v("1767225000", TimeFormat::kUnixSeconds), 0s);  // in the past
  EXPECT_EQ(v("30", TimeFormat::kDeltaSeconds), 30s);
  EXPECT_FALSE(v("-30", TimeFormat::kDeltaSeconds));
  EXPECT_FALSE(v("1.5", TimeFormat::kDeltaSeconds));
  EXPECT_EQ(v("1.5", TimeFormat::kFloatSeconds), 1500ms);
  EXPECT_EQ(v("600000", TimeFormat::kMilliseconds), 600s);  // Prisjakt [3p]
  EXPECT_EQ(v("6m0s", TimeFormat::kGoDuration), 6min);
  EXPECT_EQ(v("2026-01-01T00:00:30Z", TimeFormat::kRfc3339), 30s);
  EXPECT_EQ(v("2026-01-01T01:00:30+01:00", TimeFormat::kRfc3339), 30s);
  EXPECT_EQ(v("2026-01-01T00:01Z", TimeFormat::kRfc3339), 60s);
  EXPECT_FALSE(v("2026-01-01T00Z", TimeFormat::kRfc3339));
  EXPECT_EQ(v("Thu, 01 Jan 2026 00:00:30 GMT", TimeFormat::kHttpDate), 30s);
  // Skew: the server's clock is 10 s behind ours, so its reset instant is 10 s further away.
  EXPECT_EQ(v("1767225630", TimeFormat::kUnixSeconds, kNow - 10s), 40s);
  EXPECT_EQ(v("1767225630", TimeFormat::kUnixSeconds, kNow + 10s), 30s);
  // A delta ignores Date.
  EXPECT_EQ(v("30", TimeFormat::kDeltaSeconds, kNow - 10s), 30s);
}

// The step each format states a time in: the true instant lies within one
// step before the stated one when the server rounds up.
TEST(TimeValue, ResolutionOfEveryFormat) {
  const auto step = [](std::string_view text, TimeFormat f) {
    auto t = parse_time_value(text, f, kNow, std::nullopt);
    return t ? std::optional<Duration>(t->resolution) : std::nullopt;
  };
  EXPECT_EQ(step("1767225630", TimeFormat::kUnixSeconds), 1s);
  EXPECT_EQ(step("1767225630", TimeFormat::kUnixSecondsFraction), 1s);
  EXPECT_EQ(step("1767225630.123", TimeFormat::kUnixSecondsFraction), 1ms);  // Discord
  EXPECT_EQ(step("30", TimeFormat::kDeltaSeconds), 1s);
  EXPECT_EQ(step("64.57", TimeFormat::kFloatSeconds), 10ms);
  EXPECT_EQ(step("1500", TimeFormat::kMilliseconds), 1ms);
  EXPECT_EQ(step("1500.5", TimeFormat::kMilliseconds), 100us);
  EXPECT_EQ(step("6m0s", TimeFormat::kGoDuration), 1s);  // OpenAI
  EXPECT_EQ(step("20ms", TimeFormat::kGoDuration), 1ms);
  EXPECT_EQ(step("1.5s", TimeFormat::kGoDuration), 100ms);
  EXPECT_EQ(step("1h", TimeFormat::kGoDuration), 1h);
  EXPECT_EQ(step("3\xC2\xB5s", TimeFormat::kGoDuration), 1us);
  EXPECT_EQ(step("2026-01-01T00:00:30Z", TimeFormat::kRfc3339), 1s);  // Anthropic
  EXPECT_EQ(step("2026-01-01T00:00:30.25Z", TimeFormat::kRfc3339), 10ms);
  EXPECT_EQ(step("2026-01-01T01:00:30+01:00", TimeFormat::kRfc3339), 1s);
  EXPECT_EQ(step("2026-01-01T00:01Z", TimeFormat::kRfc3339), 1min);  // Atlassian
  EXPECT_EQ(step("Thu, 01 Jan 2026 00:00:30 GMT", TimeFormat::kHttpDate), 1s);
}

// An instant read against a server Date a fraction of a second behind the
// receipt: the longer reading is used (never early), and the step widens by
// how far apart the two are, up to a second, so that the value less its step
// still bounds the true time from below.
TEST(TimeValue, AStepWidensByHowFarItsReadingsDiffer) {
  const auto t = parse_time_value("1767225630", TimeFormat::kUnixSeconds, kNow, kNow - 800ms);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->from_receipt, 30800ms);
  EXPECT_EQ(t->resolution, 1800ms);
  const auto far = parse_time_value("1767225630", TimeFormat::kUnixSeconds, kNow, kNow - 5s);
  ASSERT_TRUE(far);
  EXPECT_EQ(far->from_receipt, 35s);
  EXPECT_EQ(far->resolution, 2s);
  const auto same = parse_time_value("1767225630.123", TimeFormat::kUnixSecondsFraction, kNow, kNow);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->resolution, 1ms);
}

TEST(Counts, IntegerNumberUsedLimitMembers) {
  EXPECT_EQ(parse_count("4999", CountFormat::kInteger), 4999);
  EXPECT_FALSE(parse_count("596.0", CountFormat::kInteger));
  EXPECT_EQ(parse_count("596.9", CountFormat::kNumber), 596);
  EXPECT_EQ(parse_count("4.2", CountFormat::kNumber, /*round_up=*/true), 5);
  EXPECT_EQ(parse_count("4.0", CountFormat::kNumber, true), 4);
  EXPECT_FALSE(parse_count("-1", CountFormat::kInteger));
  EXPECT_FALSE(parse_count("", CountFormat::kNumber));
  EXPECT_FALSE(parse_count("9999999999999999999", CountFormat::kInteger));

  auto ul = parse_used_limit("32/40");
  ASSERT_TRUE(ul);
  EXPECT_EQ(ul->used, 32);
  EXPECT_EQ(ul->limit, 40);
  ul = parse_used_limit("17/250(appName=sample-connected-app)");
  ASSERT_TRUE(ul);
  EXPECT_EQ(ul->detail, "appName=sample-connected-app");
  EXPECT_FALSE(parse_used_limit("32"));
  EXPECT_FALSE(parse_used_limit("a/40"));
  EXPECT_FALSE(parse_used_limit("1/2(x"));

  EXPECT_EQ(find_member("api-usage=25/5000; per-app-api-usage=17/250(appName=x)", "per-app-api-usage"),
            "17/250(appName=x)");
  EXPECT_EQ(find_member("total=100; remaining=99; resets=41", "resets"), "41");
  EXPECT_FALSE(find_member("total=100", "remaining"));
}

TEST(MalformedVendorValues, IgnoredWithWarningRestRead) {
  const auto s = see("HTTP/2 200 \r\nx-ratelimit-limit: lots\r\nx-ratelimit-remaining: 10\r\n"
                     "x-ratelimit-reset: tomorrow\r\nx-ratelimit-resource: core\r\n\r\n",
                     "api.github.com");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_FALSE(s.quota[0].limit);
  EXPECT_EQ(s.quota[0].remaining, 10);
  EXPECT_FALSE(s.quota[0].reset);
  EXPECT_TRUE(warned(s, "github: x-ratelimit-limit \"lots\" ignored"));
  EXPECT_TRUE(warned(s, "x-ratelimit-reset \"tomorrow\" ignored: not unix_seconds"));
}

TEST(MalformedVendorValues, RepeatedDifferentValuesUseTheFirst) {
  const auto s = see("HTTP/2 200 \r\nx-ratelimit-remaining: 10\r\nx-ratelimit-remaining: 3\r\n\r\n", "api.github.com");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].remaining, 10);
  EXPECT_TRUE(warned(s, "several different values"));
}


// ---- profiles from issue 13 (heads written from each vendor's documentation) ------------------

// One observation, from the profile, high confidence, nothing left uninterpreted.
void expect_clean(const Signals& s, std::string_view profile) {
  EXPECT_EQ(s.profile, profile);
  for (const auto& q : s.quota) {
    EXPECT_EQ(q.source, QuotaSource::kVendor);
    EXPECT_EQ(q.profile, profile);
    EXPECT_EQ(q.confidence, Confidence::kHigh);
  }
  EXPECT_TRUE(s.uninterpreted.empty()) << s.uninterpreted.size();
  EXPECT_TRUE(s.warnings.empty()) << (s.warnings.empty() ? "" : s.warnings[0]);
}

// Auth0 rate limit policy: x-ratelimit-reset is a UNIX timestamp.
TEST(Auth0, TenantHostEpochReset) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nx-ratelimit-limit: 50\r\nx-ratelimit-remaining: 0\r\n"
                     "x-ratelimit-reset: 1767225660\r\n\r\n",
                     "acme.us.auth0.com");
  expect_clean(s, "auth0");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].limit, 50);
  EXPECT_EQ(s.quota[0].remaining, 0);
  EXPECT_EQ(s.quota[0].reset, 60s);
  EXPECT_EQ(s.quota[0].reset_resolution, 1s);
  EXPECT_TRUE(s.limited);
  EXPECT_EQ(permitted_wait(s).quota, 60s);
}

// DigitalOcean OpenAPI: ratelimit-reset "given in Unix epoch time" under the draft's name (issue 13 item 5):
// with the profile it is an instant for sure, not 56 years.
TEST(DigitalOcean, IetfNamesWithUnixReset) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nratelimit-limit: 5000\r\nratelimit-remaining: 0\r\n"
                     "ratelimit-reset: 1767225660\r\n\r\n",
                     "api.digitalocean.com");
  expect_clean(s, "digitalocean");
  ASSERT_EQ(s.quota.size(), 1u);  // not also read as the IETF draft
  EXPECT_EQ(s.quota[0].limit, 5000);
  EXPECT_EQ(s.quota[0].remaining, 0);
  EXPECT_EQ(s.quota[0].reset, 60s);
  EXPECT_EQ(s.quota[0].reset_resolution, 1s);
  EXPECT_EQ(s.quota[0].window, 3600s);
  EXPECT_EQ(permitted_wait(s).quota, 60s);
}

// Fastly API docs: Fastly-RateLimit-Reset in UTC epoch seconds; no limit header.
TEST(Fastly, RemainingAndEpochReset) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nFastly-RateLimit-Remaining: 0\r\n"
                     "Fastly-RateLimit-Reset: 1767225660\r\n\r\n",
                     "api.fastly.com");
  expect_clean(s, "fastly");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_FALSE(s.quota[0].limit);
  EXPECT_EQ(s.quota[0].remaining, 0);
  EXPECT_EQ(s.quota[0].reset, 60s);
  EXPECT_EQ(s.quota[0].window, 3600s);
}

// Linear: resets in Unix milliseconds [3p]; X-Complexity is the query's cost.
TEST(Linear, MillisecondResetsAndComplexityCost) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\n"
                     "X-RateLimit-Requests-Limit: 5000\r\nX-RateLimit-Requests-Remaining: 0\r\n"
                     "X-RateLimit-Requests-Reset: 1767225660000\r\n"
                     "X-RateLimit-Complexity-Limit: 250000\r\nX-RateLimit-Complexity-Remaining: 1000\r\n"
                     "X-RateLimit-Complexity-Reset: 1767225630500\r\nX-Complexity: 52\r\n\r\n",
                     "api.linear.app");
  expect_clean(s, "linear");
  ASSERT_EQ(s.quota.size(), 2u);
  const auto* r = policy(s, "requests");
  const auto* c = policy(s, "complexity");
  ASSERT_TRUE(r && c);
  EXPECT_EQ(r->limit, 5000);
  EXPECT_EQ(r->remaining, 0);
  EXPECT_EQ(r->reset, 60s);
  EXPECT_EQ(r->reset_resolution, 1ms);
  EXPECT_FALSE(r->cost);
  EXPECT_EQ(c->unit, "complexity");
  EXPECT_EQ(c->remaining, 1000);
  EXPECT_EQ(c->reset, 30500ms);
  EXPECT_EQ(c->cost, 52);
  EXPECT_EQ(permitted_wait(s).quota, 60s);
}

// Seconds sent where milliseconds are expected name 1970 as milliseconds: never "retry now", never guessed.
TEST(Linear, SecondsUnderAMillisecondNameAreIgnored) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nX-RateLimit-Requests-Remaining: 0\r\n"
                     "X-RateLimit-Requests-Reset: 1767225660\r\n\r\n",
                     "api.linear.app");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_FALSE(s.quota[0].reset);
  EXPECT_FALSE(permitted_wait(s).quota);
  EXPECT_TRUE(warned(s, "linear: X-RateLimit-Requests-Reset \"1767225660\" ignored: too small for unix_milliseconds"));
}

// Mastodon docs: X-RateLimit-Reset is an ISO 8601 time; instances send microseconds [3p capture].
TEST(Mastodon, Rfc3339ResetWithFraction) {
  const auto s = see("HTTP/2 429 \r\nx-ratelimit-limit: 300\r\nx-ratelimit-remaining: 0\r\n"
                     "x-ratelimit-reset: 2026-01-01T00:05:00.019685Z\r\n\r\n",
                     "mastodon.social");
  expect_clean(s, "mastodon");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].limit, 300);
  EXPECT_EQ(s.quota[0].reset, 300s + 19685us);
  EXPECT_EQ(s.quota[0].reset_resolution, 1us);
}

// SendGrid v3 docs example: 429 with X-RateLimit-Reset in Unix seconds.
TEST(SendGrid, EpochReset) {
  const auto s = see("HTTP/1.1 429 TOO MANY REQUESTS\r\nX-RateLimit-Limit: 150\r\nX-RateLimit-Remaining: 0\r\n"
                     "X-RateLimit-Reset: 1767225660\r\n\r\n",
                     "api.sendgrid.com");
  expect_clean(s, "sendgrid");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].limit, 150);
  EXPECT_EQ(s.quota[0].reset, 60s);
  EXPECT_EQ(s.quota[0].reset_resolution, 1s);
}

// Sentry docs: a request quota (reset in UTC epoch seconds) and a concurrency quota.
TEST(Sentry, RequestAndConcurrentQuotas) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nX-Sentry-Rate-Limit-Limit: 40\r\n"
                     "X-Sentry-Rate-Limit-Remaining: 0\r\nX-Sentry-Rate-Limit-Reset: 1767225601\r\n"
                     "X-Sentry-Rate-Limit-ConcurrentLimit: 25\r\nX-Sentry-Rate-Limit-ConcurrentRemaining: 24\r\n\r\n",
                     "sentry.io");
  expect_clean(s, "sentry");
  ASSERT_EQ(s.quota.size(), 2u);
  const auto* r = policy(s, "requests");
  const auto* c = policy(s, "concurrent");
  ASSERT_TRUE(r && c);
  EXPECT_EQ(r->limit, 40);
  EXPECT_EQ(r->reset, 1s);
  EXPECT_EQ(c->unit, "concurrent-requests");
  EXPECT_EQ(c->limit, 25);
  EXPECT_EQ(c->remaining, 24);
  EXPECT_FALSE(c->reset);
}

// Twitch guide: Ratelimit-Reset is a Unix epoch timestamp (issue 13 item 5), not 56 years.
TEST(Twitch, IetfNamesWithUnixReset) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nRatelimit-Limit: 800\r\nRatelimit-Remaining: 0\r\n"
                     "Ratelimit-Reset: 1767225660\r\n\r\n",
                     "api.twitch.tv");
  expect_clean(s, "twitch");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].unit, "points");
  EXPECT_EQ(s.quota[0].limit, 800);
  EXPECT_EQ(s.quota[0].reset, 60s);
  EXPECT_EQ(s.quota[0].window, 60s);
  EXPECT_EQ(permitted_wait(s).quota, 60s);
}

// Vimeo: X-RateLimit-Reset in RFC 3339 with a numeric offset.
TEST(Vimeo, Rfc3339ResetWithOffset) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nX-RateLimit-Limit: 250\r\nX-RateLimit-Remaining: 0\r\n"
                     "X-RateLimit-Reset: 2025-12-31T19:15:00-05:00\r\n\r\n",
                     "api.vimeo.com");
  expect_clean(s, "vimeo");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].reset, 15min);
  EXPECT_EQ(s.quota[0].reset_resolution, 1s);
}

// HubSpot: a window in milliseconds and no reset; the window bounds the wait.
TEST(HubSpot, IntervalWindowBoundsTheWait) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\n"
                     "X-HubSpot-RateLimit-Interval-Milliseconds: 10000\r\nX-HubSpot-RateLimit-Max: 100\r\n"
                     "X-HubSpot-RateLimit-Remaining: 0\r\nX-HubSpot-RateLimit-Daily: 250000\r\n"
                     "X-HubSpot-RateLimit-Daily-Remaining: 249000\r\n\r\n",
                     "api.hubapi.com");
  expect_clean(s, "hubspot");
  ASSERT_EQ(s.quota.size(), 2u);
  const auto* i = policy(s, "interval");
  const auto* d = policy(s, "daily");
  ASSERT_TRUE(i && d);
  EXPECT_EQ(i->limit, 100);
  EXPECT_EQ(i->remaining, 0);
  EXPECT_EQ(i->window, 10s);
  EXPECT_EQ(i->reset, 10s);  // at most one window
  EXPECT_EQ(i->reset_resolution, 1ms);
  EXPECT_EQ(d->remaining, 249000);
  EXPECT_EQ(d->window, 24h);
  EXPECT_EQ(permitted_wait(s).quota, 10s);
}

// Docker Hub docs: `ratelimit-remaining: 76;w=21600`, the window from `w`, no reset.
TEST(DockerHub, WindowParameterBoundsTheWait) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nratelimit-limit: 100;w=21600\r\n"
                     "ratelimit-remaining: 0;w=21600\r\ndocker-ratelimit-source: 192.0.2.1\r\n\r\n",
                     "registry-1.docker.io");
  expect_clean(s, "docker-hub");
  ASSERT_EQ(s.quota.size(), 1u);  // not also read as the IETF draft
  const auto& q = s.quota[0];
  EXPECT_EQ(q.policy, "pulls");
  EXPECT_EQ(q.limit, 100);
  EXPECT_EQ(q.remaining, 0);
  EXPECT_EQ(q.window, 6h);
  EXPECT_EQ(q.reset, 6h);
  EXPECT_EQ(q.reset_resolution, 1s);
  EXPECT_EQ(q.partition_key, "192.0.2.1");
  EXPECT_EQ(permitted_wait(s).quota, 6h);
}

// Heroku Platform API: RateLimit-Remaining alone (tokens); no reset, so no wait is made up.
TEST(Heroku, RemainingOnly) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nRateLimit-Remaining: 0\r\n\r\n", "api.heroku.com");
  expect_clean(s, "heroku");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].remaining, 0);
  EXPECT_FALSE(s.quota[0].reset);
  EXPECT_EQ(s.quota[0].window, 1h);
  EXPECT_TRUE(s.limited);
  EXPECT_FALSE(permitted_wait(s).quota);
}

// Bitbucket Cloud: X-RateLimit-Limit per resource, X-RateLimit-NearLimit known but not used.
TEST(Bitbucket, LimitPerResource) {
  const auto s = see("HTTP/2 200 \r\nX-RateLimit-Limit: 2500\r\nX-RateLimit-Resource: api\r\n"
                     "X-RateLimit-NearLimit: false\r\n\r\n",
                     "api.bitbucket.org");
  expect_clean(s, "bitbucket");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].policy, "api");
  EXPECT_EQ(s.quota[0].limit, 2500);
  EXPECT_EQ(s.quota[0].window, 1h);
}

// Stripe: no quota headers; Stripe-Should-Retry is the server's verdict, in any case.
TEST(Stripe, ShouldRetryVerdict) {
  auto s = see("HTTP/1.1 429 Too Many Requests\r\nStripe-Should-Retry: false\r\n"
               "Stripe-Rate-Limited-Reason: global-rate\r\n\r\n",
               "api.stripe.com");
  expect_clean(s, "stripe");
  EXPECT_TRUE(s.limited);
  EXPECT_TRUE(s.quota.empty());
  EXPECT_EQ(s.should_retry, false);
  EXPECT_EQ(s.should_retry_source, "stripe-should-retry");
  s = see("HTTP/1.1 409 Conflict\r\nStripe-Should-Retry: TRUE\r\n\r\n", "api.stripe.com");
  EXPECT_EQ(s.should_retry, true);
  s = see("HTTP/1.1 500 Internal Server Error\r\nStripe-Should-Retry: maybe\r\n\r\n", "api.stripe.com");
  EXPECT_FALSE(s.should_retry);
  EXPECT_TRUE(s.should_retry_source.empty());
  EXPECT_TRUE(warned(s, "stripe: Stripe-Should-Retry \"maybe\" ignored: not true or false"));
  s = see("HTTP/1.1 500 Internal Server Error\r\n\r\n", "api.stripe.com");
  EXPECT_FALSE(s.should_retry);
}

// OpenAI and Anthropic document a limited answer as a refusal of a request
// they did not process (rule 7); a limited answer elsewhere is not one, nor
// an answer of theirs that is not limited.
TEST(LimitedUnprocessed, OnlyWhereTheVendorDocumentsIt) {
  EXPECT_TRUE(see("HTTP/2 429 \r\nretry-after-ms: 1500\r\n\r\n", "api.openai.com").unprocessed);
  EXPECT_TRUE(see("HTTP/1.1 529 \r\n\r\n", "api.anthropic.com").unprocessed);
  EXPECT_FALSE(see("HTTP/2 500 \r\n\r\n", "api.openai.com").unprocessed);
  EXPECT_FALSE(see("HTTP/1.1 429 Too Many Requests\r\n\r\n", "api.stripe.com").unprocessed);
  EXPECT_FALSE(see("HTTP/1.1 429 Too Many Requests\r\n\r\n", "api.example.com").unprocessed);
  EXPECT_FALSE(ProfileRegistry::builtin().find("openai")->limited_unprocessed.empty());
}

// An upstream on a host no profile names (a gateway, 127.0.0.1) is told by
// the fields only one built-in profile knows; shared names tell nothing.
TEST(ByFields, TheOneProfileWhoseDistinctiveFieldsAnAnswerCarries) {
  const ProfileRegistry& builtin = ProfileRegistry::builtin();
  std::string why;
  const Profile* openai = builtin.by_fields(
      {{"x-ratelimit-limit-requests", "500"}, {"x-ratelimit-remaining-requests", "0"}, {"retry-after-ms", "20"}}, &why);
  ASSERT_NE(openai, nullptr);
  EXPECT_EQ(openai->name, "openai");
  EXPECT_EQ(why, "x-ratelimit-limit-requests");
  const Profile* anthropic = builtin.by_fields({{"anthropic-ratelimit-requests-remaining", "0"}});
  ASSERT_NE(anthropic, nullptr);
  EXPECT_EQ(anthropic->name, "anthropic");
  // Names many vendors use, or none: no guess.
  EXPECT_EQ(builtin.by_fields({{"X-RateLimit-Remaining", "0"}, {"retry-after-ms", "5"}}), nullptr);
  EXPECT_EQ(builtin.by_fields({{"Content-Type", "application/json"}}), nullptr);
  EXPECT_EQ(builtin.by_fields({}), nullptr);
  // Two vendors' fields at once: no guess either.
  EXPECT_EQ(builtin.by_fields({{"x-ratelimit-limit-requests", "5"}, {"anthropic-ratelimit-requests-limit", "5"}}),
            nullptr);
}

// Without the profile the verdict is nobody's: not read.
TEST(Stripe, VerdictNeedsTheProfile) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nStripe-Should-Retry: false\r\n\r\n", "api.example.com");
  EXPECT_FALSE(s.should_retry);
}

// Twilio error 20429: too many concurrent requests; no quota headers documented.
TEST(Twilio, LimitedWithoutQuotaHeaders) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\n\r\n", "api.twilio.com");
  EXPECT_EQ(s.profile, "twilio");
  EXPECT_TRUE(s.limited);
  EXPECT_TRUE(s.quota.empty());
}

// OpenAI documents reset-tokens as the time until the limit is back to its initial state (reference §9);
// x-should-retry is the server's verdict.
TEST(OpenAI, ResetsCountToAFullRefillAndVerdictIsRead) {
  const auto s = see("HTTP/2 429 \r\nretry-after-ms: 1500\r\nx-should-retry: false\r\n"
                     "x-ratelimit-remaining-tokens: 0\r\nx-ratelimit-reset-tokens: 6m0s\r\n"
                     "x-ratelimit-remaining-requests: 10\r\nx-ratelimit-reset-requests: 1s\r\n\r\n",
                     "api.openai.com");
  const auto* t = policy(s, "tokens");
  const auto* r = policy(s, "requests");
  ASSERT_TRUE(t && r);
  EXPECT_TRUE(t->reset_is_full_refill);
  EXPECT_TRUE(r->reset_is_full_refill);
  EXPECT_EQ(t->reset, 6min);
  EXPECT_EQ(s.should_retry, false);
  EXPECT_EQ(s.should_retry_source, "x-should-retry");
  EXPECT_TRUE(s.uninterpreted.empty());
}

TEST(Anthropic, VerdictAndFullRefill) {
  const auto s = see("HTTP/1.1 429 Too Many Requests\r\nx-should-retry: true\r\n"
                     "anthropic-ratelimit-tokens-remaining: 0\r\n"
                     "anthropic-ratelimit-tokens-reset: 2026-01-01T00:01:00Z\r\n\r\n",
                     "api.anthropic.com");
  EXPECT_EQ(s.should_retry, true);
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_TRUE(s.quota[0].reset_is_full_refill);
  EXPECT_TRUE(s.uninterpreted.empty());
}

// A reset without "reset_meaning" counts to the next permitted request, as before.
TEST(FullRefill, OnlyWhereTheProfileSaysSo) {
  const auto s = see("HTTP/2 403 \r\nx-ratelimit-remaining: 0\r\nx-ratelimit-reset: 1767226000\r\n\r\n",
                     "api.github.com");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_FALSE(s.quota[0].reset_is_full_refill);
}

Signals see_with(std::string_view profile_json, std::string_view head_text) {
  ProfileRegistry r;
  auto loaded = r.load_text(profile_json, "mine.json");
  EXPECT_TRUE(loaded) << (loaded ? "" : loaded.error().what());
  auto head = parse_response_head(head_text);
  EXPECT_TRUE(head);
  if (!loaded || !head) return {};
  ObserveOptions o;
  o.registry = &r;
  o.profile = *loaded;
  return observe(head->status, head->headers, kNow, MonoTime{}, o);
}

// Two verdicts: a `false` wins over a `true` whatever their order (a verdict never grants retries).
TEST(RetryVerdicts, FalseWinsOverTrue) {
  constexpr std::string_view kProfile = R"({"name": "acme", "retry_verdicts": ["x-a-retry", "x-b-retry"]})";
  auto s = see_with(kProfile, "HTTP/1.1 503 \r\nx-a-retry: true\r\nx-b-retry: false\r\n\r\n");
  EXPECT_EQ(s.should_retry, false);
  EXPECT_EQ(s.should_retry_source, "x-b-retry");
  s = see_with(kProfile, "HTTP/1.1 503 \r\nx-a-retry: false\r\nx-b-retry: true\r\n\r\n");
  EXPECT_EQ(s.should_retry, false);
  EXPECT_EQ(s.should_retry_source, "x-a-retry");
  s = see_with(kProfile, "HTTP/1.1 503 \r\nx-b-retry:  True \r\n\r\n");
  EXPECT_EQ(s.should_retry, true);
}

// Without window_bounds_wait a quota without a reset gets none (the flag decides, not a guess).
TEST(WindowBoundsWait, OnlyWhenFlagged) {
  auto s = see_with(R"({"name": "acme", "quotas": [{"remaining": "x-left", "window_s": 30}]})",
                    "HTTP/1.1 429 \r\nx-left: 0\r\n\r\n");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_FALSE(s.quota[0].reset);
  s = see_with(R"({"name": "acme", "quotas": [{"remaining": "x-left", "window_s": 30, "window_bounds_wait": true,
                   "reset": "x-reset"}]})",
               "HTTP/1.1 429 \r\nx-left: 0\r\nx-reset: 5\r\n\r\n");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].reset, 5s);  // a stated reset wins over the bound
  s = see_with(R"({"name": "acme", "quotas": [{"remaining": "x-left", "window_s": 30, "window_bounds_wait": true,
                   "reset": "x-reset"}]})",
               "HTTP/1.1 429 \r\nx-left: 0\r\nx-reset: soon\r\n\r\n");
  EXPECT_EQ(s.quota[0].reset, 30s);  // a malformed reset falls back to the bound, with a warning
  EXPECT_TRUE(warned(s, "\"soon\" ignored"));
}

// first_member reads `100` of `100;w=21600`; without it the value is not a count.
TEST(FirstMember, ReadsTheValueBeforeParameters) {
  auto s = see_with(R"({"name": "acme", "quotas": [{"limit": {"header": "x-l", "first_member": true}}]})",
                    "HTTP/1.1 200 \r\nx-l: 100 ;w=60;burst=5\r\n\r\n");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].limit, 100);
  s = see_with(R"({"name": "acme", "quotas": [{"limit": "x-l"}]})", "HTTP/1.1 200 \r\nx-l: 100;w=60\r\n\r\n");
  EXPECT_TRUE(s.quota.empty());
  EXPECT_TRUE(warned(s, "not a non-negative count"));
}

// An instant more than a year ahead is garbage, never a wait of decades; a saturating one never overflows.
TEST(AbsurdInstants, RejectedWithAWarning) {
  constexpr std::string_view kProfile = R"({"name": "acme", "quotas": [{"remaining": "x-left",
      "reset": [{"header": "x-ms", "format": "unix_milliseconds"}, {"header": "x-s", "format": "unix_seconds"}]}]})";
  auto s = see_with(kProfile, "HTTP/1.1 429 \r\nx-left: 0\r\nx-ms: 999999999999999999\r\n\r\n");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_FALSE(s.quota[0].reset);
  EXPECT_TRUE(warned(s, "\"999999999999999999\" ignored: more than a year ahead"));
  s = see_with(kProfile, "HTTP/1.1 429 \r\nx-left: 0\r\nx-s: 3534451200\r\n\r\n");  // 2082
  EXPECT_FALSE(s.quota[0].reset);
  EXPECT_TRUE(warned(s, "more than a year ahead"));
  s = see_with(R"({"name": "acme", "quotas": [{"remaining": "x-left", "reset": "x-delta"}]})",
               "HTTP/1.1 429 \r\nx-left: 0\r\nx-delta: 999999999999\r\n\r\n");  // 31,000 years as a delay
  EXPECT_FALSE(s.quota[0].reset);
  EXPECT_TRUE(warned(s, "\"999999999999\" ignored: more than a year ahead"));
  s = see_with(R"({"name": "acme", "quotas": [{"remaining": "x-left", "reset": "x-delta"}]})",
               "HTTP/1.1 429 \r\nx-left: 0\r\nx-delta: 2592000\r\n\r\n");  // a month is a plausible wait
  EXPECT_EQ(s.quota[0].reset, 720h);
  s = see_with(kProfile, "HTTP/1.1 429 \r\nx-left: 0\r\nx-ms: -1767225660000\r\nx-s: 1767225660\r\n\r\n");
  EXPECT_EQ(s.quota[0].reset, 60s);  // the negative one rejected, the next field read
  EXPECT_TRUE(warned(s, "\"-1767225660000\" ignored: not unix_milliseconds"));
}

// A Date centuries back puts the reading by Date at the largest Duration; the
// gap between the two readings saturates too instead of overflowing (the
// asan preset halts on any overflow). The input is in the observe fuzz corpus.
TEST(AbsurdInstants, ADateCenturiesBackSaturates) {
  constexpr std::string_view kHead =
      "HTTP/1.1 429 Too Many Requests\r\nDate: Thu, 01 Jan 1413 00:00:00 GMT\r\nX-RateLimit-Limit: 5\r\n"
      "X-RateLimit-Remaining: 0\r\nX-RateLimit-Reset: 1470173023.123\r\nX-RateLimit-Bucket: abcd\r\n"
      "X-RateLimit-Scope: user\r\n\r\n";
  const auto vendor = see(kHead, "discord.com");
  ASSERT_EQ(vendor.quota.size(), 1u);
  EXPECT_FALSE(vendor.quota[0].reset);
  EXPECT_TRUE(warned(vendor, "\"1470173023.123\" ignored: more than a year ahead"));
  const auto guessed = see(kHead, "api.unknown.example", {}, kNow, /*heuristic=*/true);
  ASSERT_EQ(guessed.quota.size(), 1u);
  EXPECT_FALSE(guessed.quota[0].reset);
  EXPECT_TRUE(warned(guessed, "heuristic: X-RateLimit-Reset \"1470173023.123\" ignored: more than a year ahead"));

  const auto v = parse_time_value("1470173023.123", TimeFormat::kUnixSecondsFraction, kNow, WallTime::min());
  ASSERT_TRUE(v);
  EXPECT_EQ(v->from_receipt, kMaxDuration);
  EXPECT_EQ(v->resolution, 1001ms);  // the step, widened by at most a second
}

// A retry delay header gets the same checks as a reset: 1970 is never "retry now".
TEST(AbsurdInstants, RetryDelaysAreCheckedLikeResets) {
  constexpr std::string_view kProfile =
      R"({"name": "acme", "retry_delays": [{"header": "x-retry-at", "format": "unix_milliseconds"}]})";
  auto s = see_with(kProfile, "HTTP/1.1 503 \r\nx-retry-at: 1767225\r\n\r\n");
  EXPECT_FALSE(s.retry_after);
  EXPECT_TRUE(warned(s, "too small for unix_milliseconds"));
  s = see_with(kProfile, "HTTP/1.1 503 \r\nx-retry-at: 1767225612000\r\n\r\n");
  ASSERT_TRUE(s.retry_after);
  EXPECT_EQ(s.retry_after->wait, 12s);
  EXPECT_EQ(s.retry_after->kind, RetryHint::Kind::kDate);
}

// Server bytes in a profile warning are escaped where the warning is made.
TEST(ProfileWarnings, ServerBytesAreEscaped) {
  const auto s = see("HTTP/2 200 \r\nx-ratelimit-limit: \x1b[31mred\x07\r\nx-ratelimit-remaining: 1\r\n\r\n",
                     "api.github.com");
  ASSERT_FALSE(s.warnings.empty());
  EXPECT_TRUE(warned(s, "\"\\x1b[31mred\\x07\" ignored"));
  for (const auto& w : s.warnings) {
    EXPECT_EQ(w.find('\x1b'), std::string::npos);
    EXPECT_EQ(w.find('\x07'), std::string::npos);
  }
}

TEST(UnixMilliseconds, ParsedExactlySaturatingNeverNegative) {
  const auto v = [](std::string_view text) {
    auto t = parse_time_value(text, TimeFormat::kUnixMilliseconds, kNow, std::nullopt);
    return t ? std::optional<Duration>(t->from_receipt) : std::nullopt;
  };
  EXPECT_EQ(v("1767225630000"), 30s);
  EXPECT_EQ(v("1767225630001"), 30001ms);
  EXPECT_EQ(v("1767225000000"), 0s);  // in the past
  EXPECT_FALSE(v("-1"));
  EXPECT_FALSE(v("1767225630000.5"));
  EXPECT_FALSE(v("17672256300001767225630000"));  // too many digits
  EXPECT_FALSE(v("soon"));
  EXPECT_FALSE(v(""));
  const auto big = parse_time_value("999999999999999999", TimeFormat::kUnixMilliseconds, kNow, std::nullopt);
  ASSERT_TRUE(big && big->at);
  EXPECT_EQ(*big->at, WallTime{Duration::max()});  // saturated, not wrapped
  EXPECT_GT(big->from_receipt, Duration::zero());
  const auto t = parse_time_value("1767225630000", TimeFormat::kUnixMilliseconds, kNow, std::nullopt);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->resolution, 1ms);
  EXPECT_EQ(time_format_from_string("unix_milliseconds"), TimeFormat::kUnixMilliseconds);
  EXPECT_EQ(to_string(TimeFormat::kUnixMilliseconds), "unix_milliseconds");
}

TEST(Rfc3339, FractionAndNumericOffsets) {
  const auto t = [](std::string_view text) { return parse_time_value(text, TimeFormat::kRfc3339, kNow, std::nullopt); };
  auto a = t("2026-01-01T00:00:30.123Z");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->from_receipt, 30123ms);
  EXPECT_EQ(a->resolution, 1ms);
  a = t("2026-01-01T01:00:30+01:00");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->from_receipt, 30s);
  a = t("2025-12-31T19:00:30-05:00");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->from_receipt, 30s);
  a = t("2025-12-31T19:00:30.5-05:00");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->from_receipt, 30500ms);
  EXPECT_EQ(a->resolution, 100ms);
  EXPECT_FALSE(t("2026-01-01T00:00:30+25:00"));
  EXPECT_FALSE(t("2026-01-01T00:00:30.Z"));
}

TEST(MalformedProfile, NewFieldsAreChecked) {
  EXPECT_THAT(load_error(R"({"name": "acme", "quotas": [{"reset": "x-r", "reset_meaning": "eventually"}]})"),
              HasSubstr("quotas[0].reset_meaning: expected \"next_request\" or \"full_refill\""));
  EXPECT_THAT(load_error(R"({"name": "acme", "quotas": [{"limit": "x-l", "reset_meaning": "full_refill"}]})"),
              HasSubstr("quotas[0].reset_meaning: the quota reads no reset"));
  EXPECT_THAT(load_error(R"({"name": "acme", "quotas": [{"limit": "x-l", "window_bounds_wait": true}]})"),
              HasSubstr("quotas[0].window_bounds_wait: the quota has no window"));
  EXPECT_THAT(load_error(R"({"name": "acme", "quotas": [{"limit": "x-l", "window_s": 5, "window_bounds_wait": 1}]})"),
              HasSubstr("quotas[0].window_bounds_wait: expected boolean"));
  EXPECT_THAT(load_error(
                  R"({"name": "acme", "quotas": [{"limit": {"header": "x-l", "key": "a", "first_member": true}}]})"),
              HasSubstr("quotas[0].limit.first_member: give key or first_member, not both"));
  EXPECT_THAT(load_error(R"({"name": "acme", "retry_verdicts": ["not a header"]})"),
              HasSubstr("retry_verdicts[0]: not a valid header name"));
  EXPECT_THAT(load_error(R"({"name": "acme", "quotas": [{"reset": {"header": "x-r", "format": "unix_millis"}}]})"),
              HasSubstr("unknown time format \"unix_millis\""));
  EXPECT_THAT(
      load_error(
          R"({"name": "acme", "quotas": [{"limit": "x-l", "window": {"header": "x-w", "format": "unix_milliseconds"}}]})"),
      HasSubstr("a window is a length"));
  ProfileRegistry r;
  EXPECT_TRUE(r.load_text(R"({"name": "acme", "limited_statuses": [], "retry_verdicts": ["x-retry"]})"));
}

}  // namespace
}  // namespace abide
