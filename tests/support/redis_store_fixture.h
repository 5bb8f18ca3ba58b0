// What the tests of RedisStore (tests/redis_store_*_test.cpp) share: one
// redis-server for the tests that do not stop it (started before the first
// test, persistence off), a fresh prefix per store, the answers they record,
// and the events a store reports.
#pragma once

#include "abide/redis_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "abide/pacer.h"
#include "abide/testing/manual_clock.h"
#include "redis/pacer_script.h"
#include "servers/redis_server.h"

namespace abide::test {

using std::chrono::milliseconds;
using std::chrono::seconds;

// One server for the tests that do not stop it.
inline RedisServer* shared_server = nullptr;

class SharedRedis : public ::testing::Environment {
 public:
  void SetUp() override {
    shared_server = new RedisServer();
    if (!shared_server->start()) {
      delete shared_server;
      shared_server = nullptr;
    }
  }
  void TearDown() override {
    delete shared_server;
    shared_server = nullptr;
  }
};
[[maybe_unused]] ::testing::Environment* const kEnv = ::testing::AddGlobalTestEnvironment(new SharedRedis);

#define REQUIRE_REDIS()                                                            \
  do {                                                                             \
    if (shared_server == nullptr) GTEST_SKIP() << "redis-server is not available"; \
  } while (false)

inline std::atomic<int> prefix_counter{0};

inline std::string unique_prefix() {
  return "t" + std::to_string(getpid()) + "-" + std::to_string(prefix_counter++) + ":";
}

inline RedisStoreOptions options_for(const RedisServer& server, RedisTimeBase base = RedisTimeBase::kClient) {
  RedisStoreOptions o;
  o.endpoint.unix_socket = server.socket_path();
  o.endpoint.prefix = unique_prefix();
  o.time_base = base;
  return o;
}

inline Signals response(const ManualClock& clock, int status = 200) {
  Signals s;
  s.status = status;
  s.received_wall = clock.wall_now();
  s.received_mono = clock.mono_now();
  return s;
}

inline Signals retry_after(const ManualClock& clock, Duration wait) {
  Signals s = response(clock, 429);
  s.retry_after = RetryHint{RetryHint::Kind::kDelay, wait, std::nullopt, "retry-after"};
  return s;
}

// A Retry-After received now on the system clock.
inline Signals system_retry_after(Duration wait) {
  Signals s;
  s.status = 429;
  s.received_wall = system_wall_clock().now();
  s.received_mono = system_monotonic_clock().now();
  s.retry_after = RetryHint{RetryHint::Kind::kDelay, wait, std::nullopt, "retry-after"};
  return s;
}

inline Signals with_policy(Signals s, std::int64_t limit, Duration window) {
  QuotaObservation o;
  o.limit = limit;
  o.window = window;
  s.quota.push_back(o);
  return s;
}
struct Events {
  std::mutex mu;
  std::vector<std::pair<RedisEvent, std::string>> seen;
  std::function<void(RedisEvent, std::string_view)> hook() {
    return [this](RedisEvent e, std::string_view m) {
      std::lock_guard lock(mu);
      seen.emplace_back(e, std::string(m));
    };
  }
  int count(RedisEvent e) {
    std::lock_guard lock(mu);
    return static_cast<int>(std::count_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == e; }));
  }
  std::string all() {
    std::lock_guard lock(mu);
    std::string s;
    for (const auto& [e, m] : seen) s += std::string(to_string(e)) + ": " + m + "\n";
    return s;
  }
};

}  // namespace abide::test
