// Quota store benchmarks: the file store's acquire + record on one key,
// uncontended, beside two anchors: one Redis round trip over loopback TCP (a
// fleet store's acquire is one EVALSHA) and the least SQLite itself takes for
// one operation of the file store (a read-modify-write of a changed row in
// WAL mode, one transaction); and 8 processes contending on one key of one
// file. bench/report.py judges the file store against both, in real time.
//
//   build/release/bench/store_bench
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include <sqlite3.h>

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

// The timed loop of the file store's benchmarks: a request's store work on one key.
void acquire_and_record_loop(benchmark::State& state, abide::SqliteStore* store) {
  if (store == nullptr) {
    state.SkipWithError("the file store could not be opened");
    return;
  }
  const abide::PacingRules rules;
  auto key = store->open("https://api.example.com");
  for (auto _ : state) acquire_and_record(*key, rules);
  state.SetItemsProcessed(state.iterations());
}

void BM_FileAcquireRecord(benchmark::State& state) {
  const ScratchFile file("one");
  acquire_and_record_loop(state, open_file(file.path).get());
}
BENCHMARK(BM_FileAcquireRecord)->UseRealTime();

// 8 threads of one process on one store and one key (a proxy's callers): the
// time per request's store work across the process. Operations queued while a
// transaction runs share the next one.
void BM_FileAcquireRecord8Threads(benchmark::State& state) {
  static const ScratchFile file("threads");
  static const std::shared_ptr<abide::SqliteStore> store = open_file(file.path);
  acquire_and_record_loop(state, store.get());
}
BENCHMARK(BM_FileAcquireRecord8Threads)->Threads(8)->UseRealTime();

// The anchor of SQLite's own cost: what one file-store operation cannot do
// with less. One row of a WITHOUT ROWID table in a WAL file (synchronous =
// NORMAL, as the store opens it), read and written back changed in one
// BEGIN IMMEDIATE transaction. (A row written back unchanged costs far less:
// SQLite then writes no page at all.)
void BM_SqliteReadModifyWrite(benchmark::State& state) {
  const ScratchFile file("bare");
  sqlite3* db = nullptr;
  if (sqlite3_open(file.path.c_str(), &db) != SQLITE_OK) {
    sqlite3_close(db);
    state.SkipWithError("sqlite3_open failed");
    return;
  }
  const char* setup =
      "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
      "CREATE TABLE t (key TEXT PRIMARY KEY NOT NULL, state BLOB NOT NULL) WITHOUT ROWID;"
      "INSERT INTO t VALUES ('https://api.example.com', zeroblob(96));";
  sqlite3_stmt* begin = nullptr;
  sqlite3_stmt* select = nullptr;
  sqlite3_stmt* update = nullptr;
  sqlite3_stmt* commit = nullptr;
  bool ok = sqlite3_exec(db, setup, nullptr, nullptr, nullptr) == SQLITE_OK &&
            sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, nullptr) == SQLITE_OK &&
            sqlite3_prepare_v2(db, "SELECT state FROM t WHERE key = ?1", -1, &select, nullptr) == SQLITE_OK &&
            sqlite3_prepare_v2(db, "UPDATE t SET state = ?2 WHERE key = ?1", -1, &update, nullptr) == SQLITE_OK &&
            sqlite3_prepare_v2(db, "COMMIT", -1, &commit, nullptr) == SQLITE_OK;
  const std::string key = "https://api.example.com";
  std::string blob(96, '\0');
  std::uint64_t n = 0;
  for (auto _ : state) {
    if (!ok) break;
    ok = sqlite3_step(begin) == SQLITE_DONE;
    sqlite3_reset(begin);
    sqlite3_bind_text(select, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
    ok = ok && sqlite3_step(select) == SQLITE_ROW;
    benchmark::DoNotOptimize(sqlite3_column_blob(select, 0));
    sqlite3_reset(select);
    ++n;
    std::memcpy(blob.data(), &n, sizeof n);  // a changed row, as every store operation writes
    sqlite3_bind_text(update, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
    sqlite3_bind_blob(update, 2, blob.data(), static_cast<int>(blob.size()), SQLITE_STATIC);
    ok = ok && sqlite3_step(update) == SQLITE_DONE;
    sqlite3_reset(update);
    ok = ok && sqlite3_step(commit) == SQLITE_DONE;
    sqlite3_reset(commit);
  }
  for (sqlite3_stmt* s : {begin, select, update, commit}) sqlite3_finalize(s);
  sqlite3_close(db);
  if (!ok) state.SkipWithError("a SQLite statement failed");
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SqliteReadModifyWrite)->UseRealTime();

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
