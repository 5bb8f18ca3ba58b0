// The ClientConfig the HTTP tests of abide::Client and abide::LoopClient
// share: short backoffs, three attempts, quick connect and probe timeouts, so
// that a retry or a probe costs milliseconds of a test's time.
#pragma once

#include <abide/client.h>

#include <chrono>

namespace abide::test {

inline ClientConfig fast_config() {
  using namespace std::chrono_literals;
  ClientConfig c;
  c.planner.backoff = BackoffPolicy(20ms, 100ms, Jitter::kNone);
  c.max_attempts = 3;
  c.connect_timeout = 2s;
  c.pacer_config.rules.probe_timeout = 2s;
  return c;
}

}  // namespace abide::test
