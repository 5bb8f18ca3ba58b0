// Built-in vendor profiles, each against its vendor's documented example
// (../shared/reference/header-formats.md section 3; [3p] marks facts from
// third-party captures).
#include "support/profiles_fixture.h"

namespace abide {
namespace {

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

}  // namespace
}  // namespace abide
