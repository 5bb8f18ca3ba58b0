// A private redis-server for the benchmarks that measure against Redis,
// started on first use (on a free port and a unix socket), or null when none
// is installed.
#pragma once

#include <memory>
#include <mutex>

#include "servers/redis_server.h"

namespace abide_bench {

inline abide::test::RedisServer* bench_redis() {
  static std::once_flag once;
  static std::unique_ptr<abide::test::RedisServer> server;
  std::call_once(once, [] {
    auto s = std::make_unique<abide::test::RedisServer>();
    if (s->start()) server = std::move(s);
  });
  return server.get();
}

}  // namespace abide_bench
