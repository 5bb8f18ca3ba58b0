// Structured Field Values: the streaming walk (what the RateLimit reader does)
// and the owning tree, on RateLimit / RateLimit-Policy shaped values.
// Targets (issue 3, Release build): streaming walk <= 30, 70 and 50 ns.
#include <benchmark/benchmark.h>

#include <string_view>

#include "abide/sf_value.h"
#include "abide/structured_fields.h"

namespace {

constexpr std::string_view kRateLimit = R"("default";r=50;t=30)";
constexpr std::string_view kPolicy = R"("burst";q=100;w=60, "daily";q=1000;w=86400;qu="requests")";
constexpr std::string_view kPartition = R"("default";q=100;w=60;pk=:cHsxMjM0NTY3ODk6:)";

// Walks every member, inner item and parameter of a list, touching each value.
void walk_list(std::string_view field) {
  abide::sf::Parser p(field);
  while (auto m = p.next_list_member()) {
    benchmark::DoNotOptimize(m->item);
    if (m->inner_list) {
      while (auto it = p.next_inner_item()) {
        benchmark::DoNotOptimize(*it);
        while (auto param = p.next_param()) benchmark::DoNotOptimize(*param);
      }
    }
    while (auto param = p.next_param()) benchmark::DoNotOptimize(*param);
  }
  if (p.failed()) std::abort();
}

void BM_StreamRateLimit(benchmark::State& state) {
  for (auto _ : state) walk_list(kRateLimit);
}
void BM_StreamPolicy(benchmark::State& state) {
  for (auto _ : state) walk_list(kPolicy);
}
void BM_StreamPartitionKey(benchmark::State& state) {
  for (auto _ : state) walk_list(kPartition);
}

void tree(std::string_view field) {
  auto list = abide::sf::parse_list(field);
  if (!list) std::abort();
  benchmark::DoNotOptimize(list->data());
}

void BM_TreeRateLimit(benchmark::State& state) {
  for (auto _ : state) tree(kRateLimit);
}
void BM_TreePolicy(benchmark::State& state) {
  for (auto _ : state) tree(kPolicy);
}
void BM_TreePartitionKey(benchmark::State& state) {
  for (auto _ : state) tree(kPartition);
}

void BM_SerializePolicy(benchmark::State& state) {
  const auto list = abide::sf::parse_list(kPolicy).value();
  for (auto _ : state) {
    auto s = abide::sf::serialize_list(list);
    benchmark::DoNotOptimize(s);
  }
}

BENCHMARK(BM_StreamRateLimit);
BENCHMARK(BM_StreamPolicy);
BENCHMARK(BM_StreamPartitionKey);
BENCHMARK(BM_TreeRateLimit);
BENCHMARK(BM_TreePolicy);
BENCHMARK(BM_TreePartitionKey);
BENCHMARK(BM_SerializePolicy);

}  // namespace
