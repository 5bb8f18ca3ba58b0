// libFuzzer target: arbitrary response head text -> parse_response_head ->
// observe(). Invariants beyond "never crash": waits and resets are never
// negative; a rejected Retry-After never becomes a hint unless a vendor
// retry-delay header supplied one; low-confidence observations appear only in
// heuristic mode or with a warning that says why (a draft reset that can only
// be a Unix time); a draft field's delta reset is never more than a year;
// permitted_wait() reads only exhausted high-confidence quotas; a heuristic
// reset is at most a year; with a learned server clock beside the Date,
// waits and resets are still never negative.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "abide/clock.h"
#include "abide/headers.h"
#include "abide/ratelimit.h"
#include "abide/signals.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

constexpr std::string_view kHosts[] = {"",
                                       "api.github.com",
                                       "gitlab.com",
                                       "api.openai.com",
                                       "api.anthropic.com",
                                       "discord.com",
                                       "oauth.reddit.com",
                                       "api.x.com",
                                       "shop.myshopify.com",
                                       "acme.okta.com",
                                       "management.azure.com",
                                       "na1.salesforce.com",
                                       "acme.zendesk.com",
                                       "acme.atlassian.net",
                                       "slack.com",
                                       "api.cloudflare.com"};
constexpr std::string_view kProfiles[] = {"", "envoy", "kong", "none"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // The first byte picks the options; the rest is the head.
  const std::uint8_t opts = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto head = abide::parse_response_head(text);
  if (!head) return 0;
  check(head->status >= 100 && head->status <= 999);
  check(head->headers.size() <= 10'000);

  abide::ObserveOptions o;
  o.host = kHosts[opts & 15];
  o.profile = kProfiles[(opts >> 4) & 3];
  o.heuristic = (opts & 64) != 0;
  o.robust = (opts & 128) == 0;
  const abide::WallTime now{std::chrono::seconds{1767225600}};
  const auto s = abide::observe(head->status, head->headers, now, abide::MonoTime{}, o);

  if (s.retry_after) {
    check(s.retry_after->wait >= abide::Duration::zero());
    if (s.retry_after_rejected) check(s.retry_after->source != "retry-after");
  }
  for (const auto& q : s.quota) {
    if (q.reset) check(*q.reset >= abide::Duration::zero());
    if (q.window) check(*q.window > abide::Duration::zero());
    if (q.limit) check(*q.limit >= 0);
    if (q.confidence == abide::Confidence::kLow) check(o.heuristic || !s.warnings.empty());
    if (q.reset && abide::is_ietf_draft(q.source) && q.source != abide::QuotaSource::kDraftPolli00) {
      check(*q.reset <= std::chrono::hours{24 * 366});
    }
    if (q.source == abide::QuotaSource::kDraft12Provisional && q.cost) check(*q.cost >= 0);
    // A guessed vendor time is never a wait of decades.
    if (q.reset && q.source == abide::QuotaSource::kHeuristic) check(*q.reset <= std::chrono::hours{24 * 366});
    check(q.source != abide::QuotaSource::kUnknown);
    check((q.source == abide::QuotaSource::kVendor) == !q.profile.empty());
  }
  if (const auto w = permitted_wait(s).quota) check(*w >= abide::Duration::zero());
  if (const auto* m = s.most_restrictive()) check(m >= s.quota.data() && m < s.quota.data() + s.quota.size());

  // A server clock learned from earlier answers, half a second past this
  // Date: inside its second, so it is used (a Date at WallTime's end too).
  if (s.server_date) {
    o.server_time_floor = abide::saturating_add(*s.server_date, abide::Duration{std::chrono::milliseconds{500}});
    const auto floored = abide::observe(head->status, head->headers, now, abide::MonoTime{}, o);
    if (floored.retry_after) check(floored.retry_after->wait >= abide::Duration::zero());
    for (const auto& q : floored.quota) {
      if (q.reset) check(*q.reset >= abide::Duration::zero());
    }
  }
  return 0;
}
