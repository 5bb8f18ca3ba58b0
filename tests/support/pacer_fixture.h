// What the tests of the pacer (tests/pacer_*_test.cpp) share: answers and
// quota observations made on the manual clock, the Fixture that owns a pacer
// and its clock, and a store whose answers take time.
#pragma once

#include "abide/pacer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "abide/testing/manual_clock.h"

namespace abide::test {

using std::chrono::milliseconds;
using std::chrono::seconds;
// The manual clock counts sleepers exactly (a woken one stops counting at once).
using Clock = ManualClock;

inline Signals response(const Clock& clock, int status = 200) {
  Signals s;
  s.status = status;
  s.received_wall = clock.wall_now();
  s.received_mono = clock.mono_now();
  return s;
}

inline Signals retry_after(const Clock& clock, Duration wait) {
  Signals s = response(clock, 429);
  s.limited = true;
  s.retry_after = RetryHint{RetryHint::Kind::kDelay, wait, std::nullopt, "retry-after"};
  return s;
}

inline QuotaObservation window_obs(std::int64_t remaining, Duration reset, std::string policy = "") {
  QuotaObservation o;
  o.policy = std::move(policy);
  o.remaining = remaining;
  o.reset = reset;
  return o;
}

inline QuotaObservation policy_obs(std::int64_t limit, Duration window, std::string policy = "") {
  QuotaObservation o;
  o.policy = std::move(policy);
  o.limit = limit;
  o.window = window;
  return o;
}

inline Signals with(Signals s, QuotaObservation o) {
  s.quota.push_back(std::move(o));
  return s;
}

// Advances the clock by `step` whenever every worker still waiting sleeps,
// until all of f[from..] are ready.
inline void drive_until_ready(Clock& clock, std::vector<std::future<AcquireResult>>& f, std::size_t from,
                              Duration step) {
  for (;;) {
    std::size_t pending = 0;
    for (std::size_t i = from; i < f.size(); ++i) {
      if (f[i].wait_for(std::chrono::seconds{0}) != std::future_status::ready) ++pending;
    }
    if (pending == 0) return;
    if (clock.sleepers() >= pending) {
      clock.advance(step);
    } else {
      std::this_thread::yield();
    }
  }
}

struct Fixture : ::testing::Test {
  Clock clock;
  PacerConfig config() {
    PacerConfig c;
    c.seed = 42;
    return c;
  }
  Pacer make(PacerConfig c) { return Pacer(std::move(c), nullptr, clock.monotonic(), clock.wall()); }

  // Acquires without waiting: a permit now, or the time one would be permitted.
  AcquireResult peek(Pacer& p, const Pacer::Key& k) { return p.acquire(k, clock.mono_now()); }

  // Acquires sequentially, jumping the clock to each permitted time, and
  // returns the permit times (offsets from `t0`) until `until`.
  std::vector<Duration> drain(Pacer& p, const Pacer::Key& k, MonoTime until, std::size_t max = 1000) {
    std::vector<Duration> times;
    const MonoTime t0 = clock.mono_now();
    while (times.size() < max && clock.mono_now() < until) {
      const AcquireResult r = peek(p, k);
      if (r.ok()) {
        times.push_back(clock.mono_now() - t0);
        continue;
      }
      if (r.status != AcquireStatus::kDeadlineExceeded || r.not_before <= clock.mono_now()) break;
      if (r.not_before >= until) break;
      clock.advance(r.not_before - clock.mono_now());
    }
    return times;
  }
};

// A store whose answer takes `latency` of the test's clock to come back.
class SlowStore final : public QuotaStore {
 public:
  SlowStore(ManualClock& clock, Duration latency, bool shared) : clock_(clock), latency_(latency), shared_(shared) {}
  std::shared_ptr<Handle> open(std::string_view key) override {
    return std::make_shared<Slow>(inner_.open(key), clock_, latency_);
  }
  bool shared() const noexcept override { return shared_; }

 private:
  class Slow final : public Handle {
   public:
    Slow(std::shared_ptr<Handle> inner, ManualClock& clock, Duration latency)
        : inner_(std::move(inner)), clock_(clock), latency_(latency) {}
    StoreGrant acquire(const StoreAcquire& request, const PacingRules& rules) override {
      const StoreGrant g = inner_->acquire(request, rules);
      clock_.advance(latency_);
      return g;
    }
    RecordOutcome record(const StoreRecord& record, const PacingRules& rules) override {
      return inner_->record(record, rules);
    }
    bool still_valid(std::uint64_t epoch, MonoTime now) override { return inner_->still_valid(epoch, now); }
    void abandon_probe(MonoTime now) override { inner_->abandon_probe(now); }
    std::optional<LearnedPolicy> learned(MonoTime now) override { return inner_->learned(now); }

   private:
    std::shared_ptr<Handle> inner_;
    ManualClock& clock_;
    Duration latency_;
  };

  ManualClock& clock_;
  Duration latency_;
  bool shared_;
  MemoryStore inner_;
};

}  // namespace abide::test
