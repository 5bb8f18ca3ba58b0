// Planner::decide() on prepared Signals (issue 5: at most 100 ns per decision
// on a quiet minute; bench/report.py judges it as a ratio to the calibration
// loop of bench/calibration.h, which runs in this executable too).
//
// The Signals come from observe() on a realistic 429 head with Retry-After and
// the current draft's RateLimit / RateLimit-Policy fields, read once outside the
// loop: this measures the decision alone.
#include <benchmark/benchmark.h>

#include "abide/headers.h"
#include "abide/planner.h"
#include "abide/signals.h"

namespace {

using namespace std::chrono_literals;

const abide::WallTime kWall{std::chrono::seconds{1767225600}};
const abide::MonoTime kMono{std::chrono::hours{1000}};

abide::Signals prepared_429() {
  abide::HeaderList h;
  h.add("Date", "Thu, 01 Jan 2026 00:00:00 GMT");
  h.add("Content-Type", "application/json");
  h.add("Retry-After", "30");
  h.add("RateLimit-Policy", "\"burst\";q=100;w=60, \"daily\";q=1000;w=86400");
  h.add("RateLimit", "\"burst\";r=0;t=30, \"daily\";r=870;t=40000");
  return abide::observe(429, h, kWall, kMono);
}

void BM_Decide429RetryAfterAndRateLimit(benchmark::State& state) {
  const abide::Signals s = prepared_429();
  abide::PlannerConfig config;
  config.backoff = abide::BackoffPolicy(1s, 60s, abide::Jitter::kFull);
  const abide::Planner planner(config);
  abide::SeededRandom rng(1);
  abide::PlanInput in(s);
  in.attempt = 2;
  in.deadline = kMono + 120s;
  for (auto _ : state) {
    benchmark::DoNotOptimize(in);
    abide::Plan p = planner.decide(in, rng);
    benchmark::DoNotOptimize(p);
  }
  state.counters["quota"] = static_cast<double>(s.quota.size());
}
BENCHMARK(BM_Decide429RetryAfterAndRateLimit);

void BM_Decide429WithBudget(benchmark::State& state) {
  const abide::Signals s = prepared_429();
  abide::PlannerConfig config;
  // A huge budget that never runs dry during the run: measures the atomic spend.
  config.budget = std::make_shared<abide::RetryBudget>(1e9, 1e9);
  const abide::Planner planner(config);
  abide::SeededRandom rng(1);
  abide::PlanInput in(s);
  in.attempt = 2;
  for (auto _ : state) {
    benchmark::DoNotOptimize(in);
    abide::Plan p = planner.decide(in, rng);
    config.budget->on_success();
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_Decide429WithBudget);

void BM_DecidePostNotRetryable(benchmark::State& state) {
  const abide::Signals s = prepared_429();
  const abide::Planner planner;
  abide::SeededRandom rng(1);
  abide::PlanInput in(s);
  in.method = "POST";
  for (auto _ : state) {
    benchmark::DoNotOptimize(in);
    abide::Plan p = planner.decide(in, rng);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_DecidePostNotRetryable);

// The permitted time alone, as the planner and the pacer's record() compute it.
void BM_PermittedWait(benchmark::State& state) {
  const abide::Signals s = prepared_429();
  for (auto _ : state) {
    benchmark::DoNotOptimize(s);
    abide::PermittedWait w = abide::permitted_wait(s);
    benchmark::DoNotOptimize(w);
  }
}
BENCHMARK(BM_PermittedWait);

}  // namespace
