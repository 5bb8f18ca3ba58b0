// Quota store benchmarks: the file store's acquire + record on one key,
// uncontended, beside one Redis round trip over loopback TCP (the anchor: a
// fleet store's acquire is one EVALSHA); and 8 processes contending on one
// key of one file. bench/report.py judges the file store against the Redis
// round trip (at most half of it), both in real time.
//
//   build/release/bench/store_bench
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "bench_redis.h"
#include "abide/clock.h"
#include "abide/redis_store.h"
#include "abide/sqlite_store.h"

namespace {

namespace fs = std::filesystem;
using abide::MonoTime;
using abide::StoreRecord;

// A scratch file, removed with its WAL when the benchmark ends.
struct ScratchFile {
  std::string path;
  explicit ScratchFile(const std::string& name)
      : path((fs::temp_directory_path() / ("abide-bench-" + std::to_string(::getpid()) + "-" + name)).string()) {
    remove();
  }
  ~ScratchFile() { remove(); }
  void remove() const {
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  }
};

std::shared_ptr<abide::SqliteStore> open_file(const std::string& path) {
  abide::SqliteStoreOptions o;
  o.path = path;
  auto s = abide::SqliteStore::open_file(o);
  return s ? *s : nullptr;
}

// One request's store work: the acquire before it and the record of its answer.
void acquire_and_record(abide::QuotaStore::Handle& key, const abide::PacingRules& rules) {
  const MonoTime now = abide::system_monotonic_clock().now();
  benchmark::DoNotOptimize(key.acquire({now, abide::kMaxDuration}, rules));
  StoreRecord r;
  r.now = now;
  benchmark::DoNotOptimize(key.record(r, rules));
}

void BM_FileAcquireRecord(benchmark::State& state) {
  const ScratchFile file("one");
  auto store = open_file(file.path);
  if (store == nullptr) {
    state.SkipWithError("the file store could not be opened");
    return;
  }
  const abide::PacingRules rules;
  auto key = store->open("https://api.example.com");
  for (auto _ : state) acquire_and_record(*key, rules);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FileAcquireRecord)->UseRealTime();

using abide_bench::bench_redis;

// The anchor: one acquire on the Redis store over loopback TCP, one round trip.
void BM_RedisRoundTripTcp(benchmark::State& state) {
  abide::test::RedisServer* redis = bench_redis();
  if (redis == nullptr) {
    state.SkipWithError("no redis-server found (looked in /usr/bin and /usr/local/bin): skipped");
    return;
  }
  abide::RedisStoreOptions o;
  o.endpoint.host = "127.0.0.1";
  o.endpoint.port = static_cast<std::uint16_t>(redis->port());
  o.endpoint.prefix = "bench-rtt:";
  abide::RedisStore store(o);
  const abide::PacingRules rules;
  auto key = store.open("rtt");
  (void)key->acquire({abide::system_monotonic_clock().now(), abide::kMaxDuration}, rules);  // connect, load
  for (auto _ : state) {
    benchmark::DoNotOptimize(key->acquire({abide::system_monotonic_clock().now(), abide::kMaxDuration}, rules));
  }
  if (store.stats().fallbacks != 0) state.SkipWithError("redis answered not every acquire");
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RedisRoundTripTcp)->UseRealTime();

// 8 processes, each its own store on one file, all on one key: the time per
// request's store work (acquire + record) across the machine, and its rate.
void BM_File8ProcessesOneKey(benchmark::State& state) {
  constexpr int kProcesses = 8;
  constexpr int kEach = 250;
  const ScratchFile file("eight");
  if (open_file(file.path) == nullptr) {
    state.SkipWithError("the file store could not be opened");
    return;
  }
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    pid_t kids[kProcesses];
    for (pid_t& kid : kids) {
      kid = ::fork();
      if (kid == 0) {
        auto store = open_file(file.path);
        if (store == nullptr) ::_exit(1);
        const abide::PacingRules rules;
        auto key = store->open("https://api.example.com");
        for (int i = 0; i < kEach; ++i) acquire_and_record(*key, rules);
        ::_exit(0);
      }
    }
    bool ok = true;
    for (pid_t kid : kids) {
      int status = 0;
      ok = ::waitpid(kid, &status, 0) == kid && WIFEXITED(status) && WEXITSTATUS(status) == 0 && ok;
    }
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (!ok) {
      state.SkipWithError("a process failed");
      return;
    }
    state.SetIterationTime(took.count() / (kProcesses * kEach));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_File8ProcessesOneKey)->UseManualTime()->Iterations(3);

}  // namespace
