// Profiles whose heads were written from each vendor's documentation, retry
// verdicts, full refills, windows that bound a wait, and absurd or malformed
// values.
#include "support/profiles_fixture.h"

namespace abide {
namespace {

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
