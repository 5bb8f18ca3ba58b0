#include "abide/testing/manual_clock.h"

#include <thread>

namespace abide {

ManualClock::ManualClock(WallTime wall_start, MonoTime mono_start) : wall_now_(wall_start), mono_now_(mono_start) {}

WallTime ManualClock::wall_now() const {
  std::lock_guard lock(mu_);
  return wall_now_;
}

MonoTime ManualClock::mono_now() const {
  std::lock_guard lock(mu_);
  return mono_now_;
}

void ManualClock::wake_due_locked() const {
  for (auto& s : sleeping_) {
    if (s.counted && s.deadline <= mono_now_) {
      s.counted = false;
      --asleep_;
    }
  }
}

void ManualClock::advance(Duration d) {
  {
    std::lock_guard lock(mu_);
    if (d < Duration::zero()) d = Duration::zero();
    wall_now_ = saturating_add(wall_now_, d);
    mono_now_ = saturating_add(mono_now_, d);
    wake_due_locked();
  }
  cv_.notify_all();
}

void ManualClock::advance_monotonic(Duration d) {
  {
    std::lock_guard lock(mu_);
    if (d < Duration::zero()) d = Duration::zero();
    mono_now_ = saturating_add(mono_now_, d);
    wake_due_locked();
  }
  cv_.notify_all();
}

void ManualClock::jump_wall(Duration d) {
  std::lock_guard lock(mu_);
  wall_now_ = saturating_add(wall_now_, d);
}

void ManualClock::set_wall(WallTime t) {
  std::lock_guard lock(mu_);
  wall_now_ = t;
}

std::size_t ManualClock::sleepers() const {
  std::lock_guard lock(mu_);
  return asleep_;
}

void ManualClock::wait_for_sleepers(std::size_t n) const {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return asleep_ >= n; });
}

void ManualClock::drive(const std::atomic<int>& alive, Duration step) {
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

WaitResult ManualClock::sleep(MonoTime deadline, std::stop_token stop) const {
  std::unique_lock lock(mu_);
  // A deadline already reached wins over a stop, as after a wait.
  if (mono_now_ >= deadline) return WaitResult::kReached;
  if (stop.stop_requested()) return WaitResult::kCancelled;
  auto it = sleeping_.insert(sleeping_.end(), Sleeper{deadline});
  ++asleep_;
  cv_.notify_all();  // wait_for_sleepers() watches the count
  lock.unlock();
  {
    // Runs in the thread that requests the stop: the sleeper stops counting
    // then, not when it gets the lock back.
    std::stop_callback on_stop(stop, [&] {
      {
        std::lock_guard l(mu_);
        if (it->counted) {
          it->counted = false;
          --asleep_;
        }
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
  }  // the stop callback is gone before the sleeper's record is
  lock.lock();
  sleeping_.erase(it);
  const bool reached = mono_now_ >= deadline;
  lock.unlock();
  cv_.notify_all();
  return reached ? WaitResult::kReached : WaitResult::kCancelled;
}

WallTime ManualClock::Wall::now() const noexcept { return c_.wall_now(); }

MonoTime ManualClock::Mono::now() const noexcept { return c_.mono_now(); }

WaitResult ManualClock::Mono::sleep_until(MonoTime deadline, std::stop_token stop) const {
  return c_.sleep(deadline, std::move(stop));
}

}  // namespace abide
