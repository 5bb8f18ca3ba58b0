// Structured Field Values: the streaming walk (what the RateLimit reader does)
// and the owning tree, on RateLimit / RateLimit-Policy shaped values.
// Targets (issue 3, Release build): streaming walk <= 30, 70 and 50 ns on a
// quiet minute; bench/report.py judges them by their ratio to the anchor below,
// nghttp2's RFC 9218 Priority parser (an SF Dictionary walk by sfparse's author).
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "abide/sf_value.h"
#include "abide/structured_fields.h"

#ifdef ABIDE_HAVE_NGHTTP2_PRIORITY
#include <nghttp2/nghttp2.h>
#ifndef ABIDE_NGHTTP2_PUBLIC_PRIORITY_PARSER
// nghttp2 1.52 (Debian 12) exports the parser from libnghttp2.a but declares it
// only in its internal lib/nghttp2_http.h; later versions publish it as
// nghttp2_extpri_parse_priority. Same arguments: dest, value, length.
extern "C" int nghttp2_http_parse_priority(nghttp2_extpri* dest, const std::uint8_t* value, std::size_t valuelen);
#endif
#endif

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

#ifdef ABIDE_HAVE_NGHTTP2_PRIORITY
// The anchor: `u=5, i`, a two-member dictionary, about 20 ns on a quiet minute.
void BM_Nghttp2ParsePriority(benchmark::State& state) {
  constexpr std::string_view kPriority = "u=5, i";
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(kPriority.data());
  for (auto _ : state) {
    // The parser only assigns what it read: start from the defaults each time.
    nghttp2_extpri pri{3, 0};
    benchmark::DoNotOptimize(bytes);
#ifdef ABIDE_NGHTTP2_PUBLIC_PRIORITY_PARSER
    const int rv = nghttp2_extpri_parse_priority(&pri, bytes, kPriority.size());
#else
    const int rv = nghttp2_http_parse_priority(&pri, bytes, kPriority.size());
#endif
    if (rv != 0 || pri.urgency != 5 || pri.inc != 1) {
      state.SkipWithError("nghttp2 did not read `u=5, i`");
      break;
    }
    benchmark::DoNotOptimize(pri);
  }
}
BENCHMARK(BM_Nghttp2ParsePriority);
#endif

BENCHMARK(BM_StreamRateLimit);
BENCHMARK(BM_StreamPolicy);
BENCHMARK(BM_StreamPartitionKey);
BENCHMARK(BM_TreeRateLimit);
BENCHMARK(BM_TreePolicy);
BENCHMARK(BM_TreePartitionKey);
BENCHMARK(BM_SerializePolicy);

}  // namespace
