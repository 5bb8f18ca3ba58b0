// Retry-After delay-seconds and the three HTTP-date forms, with libcurl's
// curl_getdate on the same strings as the anchor. Targets on a quiet minute:
// delay-seconds <= 10 ns, each date form <= 40 ns; bench/report.py judges them
// by their ratio to curl_getdate measured here, beside them.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string_view>

#include "abide/http_date.h"
#include "abide/retry_after.h"

#ifdef ABIDE_HAVE_CURL
#include <curl/curl.h>
#endif

namespace {

constexpr abide::WallTime kNow{std::chrono::seconds{1795991400}};  // 2026-11-29T22:30:00Z

constexpr const char* kImf = "Sun, 06 Nov 1994 08:49:37 GMT";
constexpr const char* kRfc850 = "Sunday, 06-Nov-94 08:49:37 GMT";
constexpr const char* kAsctime = "Sun Nov  6 08:49:37 1994";
constexpr const char* kRobustImf = "sun,  6 nov 1994 08:49:37 UTC";
constexpr const char* kWrongDayImf = "Mon, 06 Nov 1994 08:49:37 GMT";  // 6 Nov 1994 was a Sunday

void BM_RetryAfterDelaySeconds(benchmark::State& state) {
  std::string_view v = "120";
  for (auto _ : state) {
    benchmark::DoNotOptimize(v);
    auto r = abide::parse_retry_after(v, kNow);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_RetryAfterDelaySeconds);

void BM_RetryAfterImfFixdate(benchmark::State& state) {
  std::string_view v = kImf;
  for (auto _ : state) {
    benchmark::DoNotOptimize(v);
    auto r = abide::parse_retry_after(v, kNow);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_RetryAfterImfFixdate);

void http_date(benchmark::State& state, const char* text, abide::ParseMode mode) {
  std::string_view v = text;
  if (!abide::parse_http_date(v, kNow, mode)) state.SkipWithError("does not parse");
  for (auto _ : state) {
    benchmark::DoNotOptimize(v);
    auto r = abide::parse_http_date(v, kNow, mode);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK_CAPTURE(http_date, imf_fixdate, kImf, abide::ParseMode::kStrict);
BENCHMARK_CAPTURE(http_date, rfc850_date, kRfc850, abide::ParseMode::kStrict);
BENCHMARK_CAPTURE(http_date, asctime_date, kAsctime, abide::ParseMode::kStrict);
BENCHMARK_CAPTURE(http_date, imf_fixdate_robust, kImf, abide::ParseMode::kRobust);
BENCHMARK_CAPTURE(http_date, deviant_imf_robust, kRobustImf, abide::ParseMode::kRobust);
BENCHMARK_CAPTURE(http_date, wrong_day_imf_fixdate, kWrongDayImf, abide::ParseMode::kStrict);

void BM_FormatImfFixdate(benchmark::State& state) {
  char buf[abide::kImfFixdateLength];
  abide::WallTime t = kNow;
  for (auto _ : state) {
    benchmark::DoNotOptimize(t);
    abide::format_imf_fixdate(t, buf);
    benchmark::DoNotOptimize(buf);
  }
}
BENCHMARK(BM_FormatImfFixdate);

void BM_Rfc3339(benchmark::State& state) {
  std::string_view v = "2026-11-29T22:30:00.25Z";
  for (auto _ : state) {
    benchmark::DoNotOptimize(v);
    auto r = abide::parse_rfc3339(v);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Rfc3339);

#ifdef ABIDE_HAVE_CURL
void curl_getdate_bench(benchmark::State& state, const char* text) {
  if (curl_getdate(text, nullptr) < 0) state.SkipWithError("curl_getdate does not parse it");
  for (auto _ : state) {
    const char* p = text;
    benchmark::DoNotOptimize(p);
    time_t t = curl_getdate(p, nullptr);
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK_CAPTURE(curl_getdate_bench, imf_fixdate, kImf);
BENCHMARK_CAPTURE(curl_getdate_bench, rfc850_date, kRfc850);
BENCHMARK_CAPTURE(curl_getdate_bench, asctime_date, kAsctime);
BENCHMARK_CAPTURE(curl_getdate_bench, deviant_imf, kRobustImf);
#endif

}  // namespace
