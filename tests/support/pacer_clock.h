// Test support for the pacer: a manual clock whose sleeper count is exact.
//
// abide::ManualClock counts a woken sleeper until that thread runs again, so a
// test that advances time "whenever every worker sleeps" can run ahead of a
// worker that was already woken, and the worker then acts later than it would
// in reality. Here a sleeper stops counting the moment it is woken (by advance()
// or by its stop token), so drive() advances only when nothing else can happen.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <list>
#include <mutex>
#include <stop_token>
#include <thread>

#include "abide/clock.h"

namespace abide::test {

class StepClock {
 public:
  explicit StepClock(WallTime wall_start = WallTime{std::chrono::seconds{1767225600}},
                     MonoTime mono_start = MonoTime{std::chrono::hours{1000}})
      : wall_now_(wall_start), mono_now_(mono_start) {}
  StepClock(const StepClock&) = delete;
  StepClock& operator=(const StepClock&) = delete;

  const WallClock& wall() const noexcept { return wall_; }
  const MonotonicClock& monotonic() const noexcept { return mono_; }

  WallTime wall_now() const {
    std::lock_guard lock(mu_);
    return wall_now_;
  }
  MonoTime mono_now() const {
    std::lock_guard lock(mu_);
    return mono_now_;
  }

  // Moves both clocks forward by d and wakes the sleepers now due.
  void advance(Duration d) {
    std::lock_guard lock(mu_);
    wall_now_ = saturating_add(wall_now_, d);
    mono_now_ = saturating_add(mono_now_, d);
    for (auto& s : sleeping_) {
      if (s.counted && s.deadline <= mono_now_) {
        s.counted = false;
        --asleep_;
      }
    }
    cv_.notify_all();
  }

  // Threads blocked in sleep_until and not yet woken.
  std::size_t sleepers() const {
    std::lock_guard lock(mu_);
    return asleep_;
  }

  // Blocks (really) until at least n threads sleep.
  void wait_for_sleepers(std::size_t n) const {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return asleep_ >= n; });
  }

  // Advances by `step` whenever at least `alive` threads sleep, until alive is 0.
  void drive(const std::atomic<int>& alive, Duration step) {
    for (;;) {
      const int n = alive.load();
      if (n <= 0) return;
      if (sleepers() >= static_cast<std::size_t>(n)) {
        advance(step);
      } else {
        std::this_thread::yield();
      }
    }
  }

 private:
  struct Sleeper {
    MonoTime deadline;
    bool counted = true;
  };

  WaitResult sleep(MonoTime deadline, std::stop_token stop) const {
    std::unique_lock lock(mu_);
    if (stop.stop_requested()) return WaitResult::kCancelled;
    if (mono_now_ >= deadline) return WaitResult::kReached;
    auto it = sleeping_.insert(sleeping_.end(), Sleeper{deadline});
    ++asleep_;
    cv_.notify_all();
    lock.unlock();
    {
      // Runs in the thread that requests the stop: uncount at once.
      std::stop_callback on_stop(stop, [&] {
        std::lock_guard l(mu_);
        if (it->counted) {
          it->counted = false;
          --asleep_;
        }
        cv_.notify_all();
      });
      lock.lock();
      cv_.wait(lock, [&] { return mono_now_ >= deadline || stop.stop_requested(); });
      if (it->counted) {
        it->counted = false;
        --asleep_;
      }
      lock.unlock();
    }
    lock.lock();
    sleeping_.erase(it);
    return mono_now_ >= deadline ? WaitResult::kReached : WaitResult::kCancelled;
  }

  class Wall final : public WallClock {
   public:
    explicit Wall(const StepClock& c) : c_(c) {}
    WallTime now() const noexcept override { return c_.wall_now(); }

   private:
    const StepClock& c_;
  };
  class Mono final : public MonotonicClock {
   public:
    explicit Mono(const StepClock& c) : c_(c) {}
    MonoTime now() const noexcept override { return c_.mono_now(); }
    WaitResult sleep_until(MonoTime deadline, std::stop_token stop) const override {
      return c_.sleep(deadline, std::move(stop));
    }

   private:
    const StepClock& c_;
  };

  mutable std::mutex mu_;
  mutable std::condition_variable_any cv_;
  WallTime wall_now_;
  MonoTime mono_now_;
  mutable std::list<Sleeper> sleeping_;
  mutable std::size_t asleep_ = 0;
  Wall wall_{*this};
  Mono mono_{*this};
};

}  // namespace abide::test
