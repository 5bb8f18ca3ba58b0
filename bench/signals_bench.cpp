// observe() on realistic response heads (about 15 header lines each), the
// header list prepared outside the timed loop. Target: <= 300 ns each on a
// quiet minute, judged by bench/report.py as a ratio to the calibration loop
// (bench/calibration.h) that runs in this executable too.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string_view>

#include "abide/headers.h"
#include "abide/profiles.h"
#include "abide/signals.h"

namespace {

// What `curl -sI https://api.github.com/repos/o/r` prints, numbers made up.
constexpr std::string_view kGitHubHead = "HTTP/2 200 \r\n"
                                         "date: Thu, 01 Jan 2026 00:00:00 GMT\r\n"
                                         "content-type: application/json; charset=utf-8\r\n"
                                         "cache-control: private, max-age=60, s-maxage=60\r\n"
                                         "vary: Accept, Authorization, Cookie, X-GitHub-OTP\r\n"
                                         "etag: W/\"5f1c0b3d2e7a4c9b8a6f0e1d2c3b4a59\"\r\n"
                                         "x-oauth-scopes: repo\r\n"
                                         "x-github-media-type: github.v3; format=json\r\n"
                                         "x-github-api-version-selected: 2022-11-28\r\n"
                                         "x-ratelimit-limit: 5000\r\n"
                                         "x-ratelimit-remaining: 4987\r\n"
                                         "x-ratelimit-reset: 1767229200\r\n"
                                         "x-ratelimit-used: 13\r\n"
                                         "x-ratelimit-resource: core\r\n"
                                         "access-control-allow-origin: *\r\n"
                                         "strict-transport-security: max-age=31536000; includeSubdomains; preload\r\n"
                                         "x-github-request-id: C0DE:1A2B:3C4D5E:6F7A8B:65A0B1C2\r\n\r\n";

// A service sending the current draft (-08 and later) fields.
constexpr std::string_view kDraftHead = "HTTP/2 200 \r\n"
                                        "date: Thu, 01 Jan 2026 00:00:00 GMT\r\n"
                                        "content-type: application/json\r\n"
                                        "content-length: 1532\r\n"
                                        "cache-control: no-store\r\n"
                                        "server: cloudflare\r\n"
                                        "cf-ray: 8f1e2d3c4b5a6978-FRA\r\n"
                                        "ratelimit-policy: \"burst\";q=100;w=60, \"daily\";q=1000;w=86400\r\n"
                                        "ratelimit: \"burst\";r=99;t=59, \"daily\";r=999;t=86399\r\n"
                                        "vary: Accept-Encoding\r\n"
                                        "x-content-type-options: nosniff\r\n"
                                        "strict-transport-security: max-age=31536000\r\n"
                                        "alt-svc: h3=\":443\"; ma=86400\r\n"
                                        "x-request-id: 6b1f9a2e-3c4d-4e5f-8a9b-0c1d2e3f4a5b\r\n"
                                        "via: 1.1 google\r\n\r\n";

const abide::WallTime kNow{std::chrono::seconds{1767225600}};

void run(benchmark::State& state, std::string_view text, std::string_view host) {
  const auto head = abide::parse_response_head(text);
  if (!head) {
    state.SkipWithError("head did not parse");
    return;
  }
  abide::ObserveOptions o;
  o.host = host;
  (void)abide::ProfileRegistry::builtin();  // loaded once, outside the loop
  const auto probe = abide::observe(head->status, head->headers, kNow, abide::MonoTime{}, o);
  if (probe.quota.empty() || !probe.warnings.empty()) {
    state.SkipWithError("unexpected reading");
    return;
  }
  for (auto _ : state) {
    auto s = abide::observe(head->status, head->headers, kNow, abide::MonoTime{}, o);
    benchmark::DoNotOptimize(s);
  }
}

void BM_ObserveGitHub(benchmark::State& state) { run(state, kGitHubHead, "api.github.com"); }
void BM_ObserveCurrentDraft(benchmark::State& state) { run(state, kDraftHead, {}); }
void BM_ParseResponseHeadGitHub(benchmark::State& state) {
  for (auto _ : state) {
    auto head = abide::parse_response_head(kGitHubHead);
    benchmark::DoNotOptimize(head);
  }
}

// One origin's server clock: the trusted floor for a response, then learning from it.
void BM_ServerClockFloorAndLearn(benchmark::State& state) {
  abide::ServerClock clock;
  abide::Signals s;
  s.server_date = kNow;
  std::int64_t i = 0;
  for (auto _ : state) {
    s.received_mono = abide::MonoTime{std::chrono::milliseconds{290 * ++i}};
    s.server_date = kNow + std::chrono::seconds{(290 * i) / 1000};
    auto floor = clock.trusted_floor_at(s.received_mono);
    benchmark::DoNotOptimize(floor);
    clock.learn(s, s.received_mono - std::chrono::milliseconds{20});
  }
}

}  // namespace

BENCHMARK(BM_ServerClockFloorAndLearn);
BENCHMARK(BM_ObserveGitHub);
BENCHMARK(BM_ObserveCurrentDraft);
BENCHMARK(BM_ParseResponseHeadGitHub);
