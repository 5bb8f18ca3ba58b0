// libFuzzer target for profile loading: arbitrary text -> ProfileRegistry::
// load_text. A rejected profile must say which file (and, for a schema error,
// which field); an accepted one must have a valid name and be usable: it is
// then applied to a fixed response head full of vendor-style headers.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "abide/headers.h"
#include "abide/profiles.h"
#include "abide/signals.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

const abide::HeaderList& head() {
  static const abide::HeaderList h{
      {"Date", "Thu, 01 Jan 2026 00:00:00 GMT"},
      {"Retry-After", "5"},
      {"retry-after-ms", "1500"},
      {"x-ratelimit-limit", "100"},
      {"x-ratelimit-remaining", "0"},
      {"x-ratelimit-used", "100"},
      {"x-ratelimit-reset", "1767225660"},
      {"x-ratelimit-reset-after", "12.5"},
      {"x-ratelimit-resource", "core"},
      {"x-ratelimit-reset-requests", "6m0s"},
      {"anthropic-ratelimit-requests-reset", "2026-01-01T00:01:00Z"},
      {"x-shopify-shop-api-call-limit", "32/40"},
      {"sforce-limit-info", "api-usage=25/5000; per-app-api-usage=17/250(appName=x)"},
      {"x-ms-ratelimit-remaining-subscription-reads", "11999"},
      {"x-ms-ratelimit-remaining-resource", "A;1,B;2"},
      {"ratelimit-reset", "2026-01-01T00:05Z"},
      {"x-ratelimit-limit", "10, 10;w=60"},
      {"beta-ratelimit", "\"q\";r=1;t=2"},
      {"x-ratelimit-requests-reset", "1767225660000"},
      {"x-ratelimit-complexity-reset", "1767225660"},
      {"x-complexity", "52"},
      {"ratelimit-remaining", "0;w=21600"},
      {"x-hubspot-ratelimit-interval-milliseconds", "10000"},
      {"x-reset-far", "999999999999999999"},
      {"x-reset-offset", "2025-12-31T19:01:30.5-05:00"},
      {"stripe-should-retry", "false"},
      {"x-should-retry", "TRUE"},
      {"x-retry-verdict", "maybe"},
      {"x-esc", "\x1b]0;owned\x07"},
  };
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  abide::ProfileRegistry registry;
  auto loaded = registry.load_text(text, "fuzz.json");
  if (!loaded) {
    check(loaded.error().file == "fuzz.json");
    check(!loaded.error().message.empty());
    check(loaded.error().what().rfind("fuzz.json", 0) == 0);
    return 0;
  }
  const abide::Profile* p = registry.find(*loaded);
  check(p != nullptr && !p->name.empty() && p->name != "none");
  abide::ObserveOptions o;
  o.registry = &registry;
  o.profile = p->name;
  const auto s = abide::observe(429, head(), abide::WallTime{std::chrono::seconds{1767225600}}, abide::MonoTime{}, o);
  check(s.profile == p->name);
  if (s.retry_after) check(s.retry_after->wait >= abide::Duration::zero());
  // A verdict always names its header.
  check(s.should_retry.has_value() == !s.should_retry_source.empty());
  // Server bytes in warnings are escaped: no control byte reaches a terminal.
  for (const auto& w : s.warnings) {
    for (const char c : w) check(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
  }
  for (const auto& q : s.quota) {
    if (q.reset) check(*q.reset >= abide::Duration::zero());
    // No server value becomes a reset beyond a year (only the profile's own
    // window can, through window_bounds_wait).
    if (q.reset) check(*q.reset <= std::chrono::hours{24 * 366} || (q.window && *q.reset == *q.window));
    if (q.cost) check(*q.cost >= 0);
    if (q.remaining) check(*q.remaining >= 0);
  }
  return 0;
}
