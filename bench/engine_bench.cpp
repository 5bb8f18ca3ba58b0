// Engine benchmarks: what the engine costs per attempt on a scripted
// transport that answers at once, with clocks that cost nothing to read, so
// that the figure is the engine's own work plus the stages it drives (pacer
// acquire and record, observe, decide, the reason sentence). The scripted
// transports reuse the head they hand over; what building one costs a
// transport is measured on its own (BM_ScriptedTransportBuildsHead). The
// stages alone are in pacer_bench, signals_bench and planner_bench.
//
//   build/NAME/bench/engine_bench
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <utility>

#include "abide/engine.h"

namespace {

using namespace std::chrono_literals;
using abide::engine::Engine;
using abide::engine::Machine;
using abide::engine::Step;

// Clocks that stand still: reading them is free, and no wait ever comes due
// (nothing in these scripts asks for one).
class StillClock final : public abide::MonotonicClock {
 public:
  abide::MonoTime now() const noexcept override { return abide::MonoTime{std::chrono::hours{1000}}; }
  abide::WaitResult sleep_until(abide::MonoTime, std::stop_token) const override { return abide::WaitResult::kReached; }
};
class StillWall final : public abide::WallClock {
 public:
  abide::WallTime now() const noexcept override { return abide::WallTime{std::chrono::seconds{1767225600}}; }
};

const StillClock& mono_clock() {
  static const StillClock c;
  return c;
}
const StillWall& wall_clock() {
  static const StillWall c;
  return c;
}

abide::engine::Config config() {
  abide::engine::Config c;
  c.mono = &mono_clock();
  c.wall = &wall_clock();
  c.random = std::make_shared<abide::SeededRandom>(1);
  c.profile = "none";
  return c;
}

// One GET answered 200 with a small head and body, in the driven form: the
// machine's start (URL, pacer key, server clock), one acquire, one observe,
// one record, one decide (with the attempt's reason sentence), the body to a
// sink, the finish, and the outcome's release. This is the figure of issue
// 14's target: the engine's own cost per attempt with the stages it drives.
//
// The scripted transport hands over the same HeaderList every time and takes
// it back from the outcome, as a transport that reuses its buffers does: what
// building a fresh one costs is the transport's, measured beside it in
// BM_ScriptedTransportBuildsHead (BM_EngineDrivenOneAttemptFreshHead is the
// two together). The outcome is destroyed once read: its attempts' storage
// and its two reason sentences are allocations of every request.
void one_driven_attempt(benchmark::State& state) {
  Engine engine(config());
  abide::engine::Request req;
  req.url = "https://api.example.com/v1/items";
  abide::HeaderList head{{"Content-Type", "application/json"}, {"Content-Length", "2"}};
  std::size_t bytes = 0;
  for (auto _ : state) {
    Machine m(engine, req, [&bytes](std::string_view c) {
      bytes += c.size();
      return true;
    });
    const Step s = m.next();
    benchmark::DoNotOptimize(s);
    if (m.head(200, std::move(head), wall_clock().now(), mono_clock().now())) (void)m.body("{}");
    m.complete();
    abide::engine::RequestOutcome out = m.take_outcome();
    benchmark::DoNotOptimize(out);
    if (out.response) head = std::move(out.response->headers);
  }
  benchmark::DoNotOptimize(bytes);
  state.SetItemsProcessed(state.iterations());
}

void BM_EngineDrivenOneAttempt(benchmark::State& state) { one_driven_attempt(state); }
BENCHMARK(BM_EngineDrivenOneAttempt);

// What the scripted transport itself does per attempt when it builds the head
// afresh (two field lines, as a real transport parses them): not the engine's.
void BM_ScriptedTransportBuildsHead(benchmark::State& state) {
  for (auto _ : state) {
    abide::HeaderList head{{"Content-Type", "application/json"}, {"Content-Length", "2"}};
    benchmark::DoNotOptimize(head);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ScriptedTransportBuildsHead);

// BM_EngineDrivenOneAttempt with a transport that builds a fresh head for the
// attempt: the engine's cost plus BM_ScriptedTransportBuildsHead.
void BM_EngineDrivenOneAttemptFreshHead(benchmark::State& state) {
  Engine engine(config());
  abide::engine::Request req;
  req.url = "https://api.example.com/v1/items";
  std::size_t bytes = 0;
  for (auto _ : state) {
    Machine m(engine, req, [&bytes](std::string_view c) {
      bytes += c.size();
      return true;
    });
    const Step s = m.next();
    benchmark::DoNotOptimize(s);
    abide::HeaderList head{{"Content-Type", "application/json"}, {"Content-Length", "2"}};
    if (m.head(200, std::move(head), wall_clock().now(), mono_clock().now())) (void)m.body("{}");
    m.complete();
    benchmark::DoNotOptimize(m.outcome());
  }
  benchmark::DoNotOptimize(bytes);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EngineDrivenOneAttemptFreshHead);

// Clocks that move only when told (the driven loop moves them to each wait's end).
struct MovingClock final : public abide::MonotonicClock {
  mutable abide::MonoTime t{std::chrono::hours{1000}};
  abide::MonoTime now() const noexcept override { return t; }
  abide::WaitResult sleep_until(abide::MonoTime until, std::stop_token) const override {
    if (until > t) t = until;
    return abide::WaitResult::kReached;
  }
};

// One GET answered 503 (Retry-After: 1) three times, then 200: four attempts
// per iteration, counted as items, so the time per item is the cost of one
// attempt with the request's start spread over four.
void BM_EngineDrivenFourAttempts(benchmark::State& state) {
  MovingClock mono;
  abide::engine::Config c = config();
  c.mono = &mono;
  c.planner.backoff = abide::BackoffPolicy(std::chrono::milliseconds{1}, std::chrono::milliseconds{1},
                                           abide::Jitter::kNone);
  c.pacer_config.rules.probe_after_cooldown = false;
  c.pacer_config.rules.cooldown_spread = abide::Duration::zero();
  Engine engine(c);
  abide::engine::Request req;
  req.url = "https://api.example.com/v1/items";
  const abide::HeaderList busy{{"Retry-After", "1"}, {"Content-Length", "4"}};
  const abide::HeaderList fine{{"Content-Type", "application/json"}, {"Content-Length", "2"}};
  for (auto _ : state) {
    Machine m(engine, req);
    for (Step s = m.next(); s.kind != Step::Kind::kFinished; s = m.next()) {
      if (s.kind == Step::Kind::kWait) {
        mono.t = s.until;
        continue;
      }
      const bool last = s.attempt == 4;
      if (m.head(last ? 200 : 503, last ? fine : busy, wall_clock().now(), mono.t)) (void)m.body("{}");
      m.complete();
    }
    benchmark::DoNotOptimize(m.outcome());
  }
  state.SetItemsProcessed(state.iterations() * 4);
}
BENCHMARK(BM_EngineDrivenFourAttempts);

// The same request through the blocking form and a Transport (which reuses
// its head, as BM_EngineDrivenOneAttempt's does).
class Instant final : public abide::engine::Transport {
 public:
  void perform(const abide::engine::Request&, const Step&, Machine& m, std::stop_token) override {
    if (m.head(200, std::move(head), wall_clock().now(), mono_clock().now())) (void)m.body("{}");
    m.complete();
  }
  abide::HeaderList head{{"Content-Type", "application/json"}, {"Content-Length", "2"}};
};

void BM_EngineBlockingOneAttempt(benchmark::State& state) {
  Engine engine(config());
  abide::engine::Request req;
  req.url = "https://api.example.com/v1/items";
  Instant transport;
  for (auto _ : state) {
    abide::engine::RequestOutcome out = engine.run(req, transport);
    benchmark::DoNotOptimize(out);
    if (out.response) transport.head = std::move(out.response->headers);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EngineBlockingOneAttempt);

// The stages the engine drives for that attempt, called by hand: acquire,
// observe, record, decide. The engine's own cost is the difference.
void BM_EngineStagesByHand(benchmark::State& state) {
  abide::Pacer pacer(abide::PacerConfig{}, nullptr, mono_clock(), wall_clock());
  const auto key = pacer.key(abide::pacer_key("https://api.example.com"));
  abide::Planner planner;
  abide::SeededRandom rng(1);
  const abide::HeaderList head{{"Content-Type", "application/json"}, {"Content-Length", "2"}};
  abide::ObserveOptions options;
  options.profile = "none";
  for (auto _ : state) {
    benchmark::DoNotOptimize(pacer.acquire(key));
    const abide::Signals s = abide::observe(200, head, wall_clock().now(), mono_clock().now(), options);
    pacer.record(key, s);
    const abide::PlanInput in{abide::Outcome(s)};
    benchmark::DoNotOptimize(planner.decide(in, rng));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EngineStagesByHand);

// The stages of one retried attempt of BM_EngineDrivenFourAttempts by hand,
// with the reason sentence (Planner::describe) every attempt carries.
void BM_EngineStagesByHandRetry(benchmark::State& state) {
  abide::Pacer pacer(abide::PacerConfig{}, nullptr, mono_clock(), wall_clock());
  const auto key = pacer.key(abide::pacer_key("https://api.example.com"));
  abide::Planner planner;
  abide::SeededRandom rng(1);
  const abide::HeaderList busy{{"Retry-After", "1"}, {"Content-Length", "4"}};
  abide::ObserveOptions options;
  options.profile = "none";
  for (auto _ : state) {
    benchmark::DoNotOptimize(pacer.acquire(key, mono_clock().now()));
    const abide::Signals s = abide::observe(503, busy, wall_clock().now(), mono_clock().now(), options);
    pacer.record(key, s);
    const abide::PlanInput in{abide::Outcome(s)};
    const abide::Plan p = planner.decide(in, rng);
    benchmark::DoNotOptimize(planner.describe(p, in));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EngineStagesByHandRetry);

}  // namespace
