#include "mock_token_quota.h"

#include <algorithm>
#include <random>

#include "abide/http_date.h"
#include "mock_vendor.h"

namespace abide::mock {
namespace mock_token_quota {  // private to this file (the tools are compiled in batches)

using std::chrono::ceil;
using std::chrono::seconds;

// Settles a bucket charged `admitted` at admission with what the answer used.
void reconcile(Bucket& b, std::uint64_t admitted, std::uint64_t used) {
  if (used < admitted) b.give(admitted - used);
  else b.take(used - admitted);
}

// The instant a bucket is full again, as Anthropic states it: RFC 3339, whole
// seconds, rounded up (never earlier than it is).
std::string full_at(WallTime now, const Bucket& b) {
  const WallTime t = saturating_add(now, b.until_full());
  return format_rfc3339(WallTime{ceil<seconds>(t.time_since_epoch())});
}

std::int64_t unix_floor(WallTime t) { return std::chrono::floor<seconds>(t.time_since_epoch()).count(); }

// The whole seconds of a wait, rounded up, at least 1.
std::int64_t whole_seconds(Duration d) { return std::max<std::int64_t>(1, ceil<seconds>(d).count()); }

}  // namespace mock_token_quota

namespace tq = mock_token_quota;

TokenQuota::TokenQuota(const LimiterOptions& o, WallTime now)
    : opts_(o),
      requests_(o.limit, o.window, now),
      tokens_(o.token_limit, o.window, now),
      output_(o.output_token_limit, o.window, now) {}

void TokenQuota::reset(WallTime now) {
  requests_.reset(now);
  tokens_.reset(now);
  output_.reset(now);
}

std::uint64_t TokenQuota::output_tokens(std::uint64_t seed, std::uint64_t serial, std::uint64_t max_tokens) {
  if (max_tokens == 0) return 0;
  // seed_seq and mt19937_64 are specified to the bit: the same on every platform.
  std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                    static_cast<std::uint32_t>(serial), static_cast<std::uint32_t>(serial >> 32)};
  std::mt19937_64 g(seq);
  const std::uint64_t lo = max_tokens / 4;
  return lo + g() % (max_tokens - lo + 1);  // no overflow: lo >= 1 whenever max_tokens >= 4
}

TokenCounts TokenQuota::decide(WallTime now, const TokenRequest& r, std::uint64_t serial, Answer& a) {
  requests_.refill(now);
  tokens_.refill(now);
  output_.refill(now);
  return opts_.style == Style::kOpenaiTokens ? decide_openai(now, r, serial, a) : decide_anthropic(now, r, serial, a);
}

TokenCounts TokenQuota::decide_openai(WallTime now, const TokenRequest& r, std::uint64_t serial, Answer& a) {
  TokenCounts counts;
  const std::uint64_t charge = std::max(r.max_tokens, r.estimate);
  if (a.outcome == Outcome::kFailed) {
    openai_fields(a.headers);
    a.body = openai_error("The server had an error while processing your request (simulated, --fail-rate).",
                          "server_error", "");
    return counts;
  }
  if (!requests_.holds(1) || !tokens_.holds(charge)) {
    a.status = 429;
    a.outcome = Outcome::kLimited;
    openai_fields(a.headers);
    openai_limited(now, r, charge, a);
    return counts;
  }
  requests_.take(1);
  tokens_.take(charge);
  openai_fields(a.headers);
  const Usage u{r.estimate, output_tokens(opts_.seed, serial, r.max_tokens)};
  const std::uint64_t used = sat_add(u.input, u.output);
  tq::reconcile(tokens_, charge, used);
  a.status = 200;
  a.outcome = Outcome::kAccepted;
  a.body = openai_completion("chatcmpl-mock-" + std::to_string(serial), tq::unix_floor(now), r, u);
  if (r.stream) a.content_type = "text/event-stream";
  counts.admitted = charge;
  counts.charged = used;
  counts.input_charged = u.input;
  counts.output_charged = u.output;
  return counts;
}

void TokenQuota::openai_fields(HeaderList& h) const {
  h.emplace_back("x-ratelimit-limit-requests", std::to_string(requests_.capacity()));
  h.emplace_back("x-ratelimit-limit-tokens", std::to_string(tokens_.capacity()));
  h.emplace_back("x-ratelimit-remaining-requests", std::to_string(requests_.available()));
  h.emplace_back("x-ratelimit-remaining-tokens", std::to_string(tokens_.available()));
  h.emplace_back("x-ratelimit-reset-requests", go_duration(requests_.until_full()));
  h.emplace_back("x-ratelimit-reset-tokens", go_duration(tokens_.until_full()));
}

void TokenQuota::openai_limited(WallTime now, const TokenRequest& r, std::uint64_t charge, Answer& a) const {
  const std::string where = "Rate limit reached for " + r.model + " in organization org-mock on ";
  if (charge > tokens_.capacity()) {  // no wait helps: say so, and state none
    a.body = openai_error("Request too large for " + r.model +
                              " in organization org-mock on tokens per min (TPM): Limit " +
                              std::to_string(tokens_.capacity()) + ", Requested " + std::to_string(charge) +
                              ". The input or output tokens must be reduced in order to run successfully.",
                          "tokens", "rate_limit_exceeded");
    return;
  }
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(std::max(requests_.until(1), tokens_.until(charge)));
  a.headers.emplace_back("retry-after-ms", std::to_string(ms.count()));
  a.headers.emplace_back("retry-after", std::to_string(tq::whole_seconds(ms)));
  a.permitted = now + ms;
  const bool tokens_short = !tokens_.holds(charge);
  const Bucket& b = tokens_short ? tokens_ : requests_;
  const std::string what = tokens_short ? "tokens per min (TPM)" : "requests per min (RPM)";
  a.body = openai_error(where + what + ": Limit " + std::to_string(b.capacity()) + ", Used " +
                            std::to_string(b.capacity() - b.available()) + ", Requested " +
                            std::to_string(tokens_short ? charge : 1) + ". Please try again in " + go_duration(ms) +
                            ". Visit https://platform.openai.com/account/rate-limits to learn more.",
                        tokens_short ? "tokens" : "requests", "rate_limit_exceeded");
}

TokenCounts TokenQuota::decide_anthropic(WallTime now, const TokenRequest& r, std::uint64_t serial, Answer& a) {
  TokenCounts counts;
  if (a.outcome == Outcome::kFailed) {
    anthropic_fields(now, a.headers);
    a.body = anthropic_error("api_error", "Internal server error (simulated, --fail-rate)");
    return counts;
  }
  if (!requests_.holds(1) || !tokens_.holds(r.estimate) || !output_.holds(r.max_tokens)) {
    a.status = 429;
    a.outcome = Outcome::kLimited;
    anthropic_fields(now, a.headers);
    anthropic_limited(now, r, a);
    return counts;
  }
  requests_.take(1);
  tokens_.take(r.estimate);
  output_.take(r.max_tokens);
  anthropic_fields(now, a.headers);
  const Usage u{r.estimate, output_tokens(opts_.seed, serial, r.max_tokens)};
  output_.give(r.max_tokens - u.output);  // the answer has ended: its unused reservation
  a.status = 200;
  a.outcome = Outcome::kAccepted;
  a.body = anthropic_message("msg_mock_" + std::to_string(serial), r, u);
  if (r.stream) a.content_type = "text/event-stream";
  counts.admitted = sat_add(r.estimate, r.max_tokens);
  counts.charged = sat_add(u.input, u.output);
  counts.input_admitted = r.estimate;
  counts.input_charged = u.input;
  counts.output_admitted = r.max_tokens;
  counts.output_charged = u.output;
  return counts;
}

void TokenQuota::anthropic_fields(WallTime now, HeaderList& h) const {
  const auto quota = [&](const std::string& name, const Bucket& b) {
    h.emplace_back("anthropic-ratelimit-" + name + "-limit", std::to_string(b.capacity()));
    h.emplace_back("anthropic-ratelimit-" + name + "-remaining", std::to_string(b.available()));
    h.emplace_back("anthropic-ratelimit-" + name + "-reset", tq::full_at(now, b));
  };
  quota("requests", requests_);
  // "tokens": the most restrictive of the two token limits, the one with fewer left.
  quota("tokens", output_.available() < tokens_.available() ? output_ : tokens_);
  quota("input-tokens", tokens_);
  quota("output-tokens", output_);
}

void TokenQuota::anthropic_limited(WallTime now, const TokenRequest& r, Answer& a) const {
  const bool input_short = !tokens_.holds(r.estimate);
  const bool output_short = !input_short && !output_.holds(r.max_tokens);
  const Bucket& b = input_short ? tokens_ : output_short ? output_ : requests_;
  const std::string what = input_short ? "input tokens" : output_short ? "output tokens" : "requests";
  const std::string limit = "This request would exceed the rate limit for your organization (org-mock) of " +
                            std::to_string(b.capacity()) + " " + what + " per " + window_words() + ".";
  if (r.estimate > tokens_.capacity() || r.max_tokens > output_.capacity()) {  // no wait helps
    a.body = anthropic_error("rate_limit_error",
                             limit + " Please reduce the prompt length or the maximum tokens requested.");
    return;
  }
  const Duration wait = std::max({requests_.until(1), tokens_.until(r.estimate), output_.until(r.max_tokens)});
  const std::int64_t s = tq::whole_seconds(wait);
  a.headers.emplace_back("retry-after", std::to_string(s));
  a.permitted = now + std::chrono::seconds{s};
  a.body = anthropic_error("rate_limit_error", limit + " Please try again in " + std::to_string(s) + " s.");
}

std::string TokenQuota::window_words() const {
  return opts_.window == std::chrono::seconds{60} ? "minute" : go_duration(opts_.window);
}

}  // namespace abide::mock
