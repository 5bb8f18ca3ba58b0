// abide/testing/manual_clock.h: the clock for tests of code that takes abide's
// clocks (Pacer, Planner, engine, Client). Link abide::testing.
//
// Wall and monotonic time move only when the test says, and independently (a
// test can jump the wall clock by an hour while monotonic time moves by a
// second). A thread in sleep_until wakes when the test advances monotonic time
// to its deadline, or when its stop token is requested. Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <list>
#include <mutex>
#include <stop_token>

#include "abide/clock.h"

namespace abide {

class ManualClock {
 public:
  // Starts at the given instants (defaults: 2026-01-01T00:00:00Z, and an
  // arbitrary non-zero monotonic origin).
  explicit ManualClock(WallTime wall_start = WallTime{std::chrono::seconds{1767225600}},
                       MonoTime mono_start = MonoTime{std::chrono::hours{1000}});
  ManualClock(const ManualClock&) = delete;
  ManualClock& operator=(const ManualClock&) = delete;

  // The two faces, to pass where a WallClock or a MonotonicClock is expected.
  const WallClock& wall() const noexcept { return wall_; }
  const MonotonicClock& monotonic() const noexcept { return mono_; }

  WallTime wall_now() const;
  MonoTime mono_now() const;

  // Moves both clocks forward by d (a negative d counts as zero) and wakes the
  // sleepers now due.
  void advance(Duration d);
  // Moves only the monotonic clock forward, and wakes the sleepers now due.
  void advance_monotonic(Duration d);
  // Moves only the wall clock, forward or back (a clock jump). Wakes nobody.
  void jump_wall(Duration d);
  // Sets the wall clock to t. Wakes nobody.
  void set_wall(WallTime t);

  // Threads asleep in sleep_until and not yet woken. A sleeper stops counting
  // the moment it is woken (by an advance or its stop token), before it runs
  // again, so "every worker sleeps" is never true while one is about to act.
  std::size_t sleepers() const;
  // Blocks (really) until at least n threads sleep on this clock: for tests
  // that may advance time only once their workers wait.
  void wait_for_sleepers(std::size_t n) const;
  // Advances by `step` whenever at least `alive` threads sleep, until `alive`
  // drops to zero: runs a set of workers through simulated time.
  void drive(const std::atomic<int>& alive, Duration step);

 private:
  struct Sleeper {
    MonoTime deadline;
    bool counted = true;
  };
  WaitResult sleep(MonoTime deadline, std::stop_token stop) const;
  void wake_due_locked() const;  // uncounts the sleepers whose deadline passed

  class Wall final : public WallClock {
   public:
    explicit Wall(const ManualClock& c) : c_(c) {}
    WallTime now() const noexcept override;

   private:
    const ManualClock& c_;
  };
  class Mono final : public MonotonicClock {
   public:
    explicit Mono(const ManualClock& c) : c_(c) {}
    MonoTime now() const noexcept override;
    WaitResult sleep_until(MonoTime deadline, std::stop_token stop) const override;

   private:
    const ManualClock& c_;
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

}  // namespace abide
