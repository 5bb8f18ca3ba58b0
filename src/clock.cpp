#include "abide/clock.h"

namespace abide {

WallTime SystemWallClock::now() const noexcept {
  return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
}

MonoTime SystemMonotonicClock::now() const noexcept {
  return std::chrono::time_point_cast<Duration>(std::chrono::steady_clock::now());
}

WaitResult SystemMonotonicClock::sleep_until(MonoTime deadline, std::stop_token stop) const {
  if (stop.stop_requested()) return WaitResult::kCancelled;
  // A condition variable with the stop token wakes the sleeper as soon as stop
  // is requested; the predicate is the stop state itself.
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  const bool stopped = cv.wait_until(lock, stop, deadline, [] { return false; });
  (void)stopped;
  return stop.stop_requested() ? WaitResult::kCancelled : WaitResult::kReached;
}

const SystemWallClock& system_wall_clock() noexcept {
  static const SystemWallClock c;
  return c;
}

const SystemMonotonicClock& system_monotonic_clock() noexcept {
  static const SystemMonotonicClock c;
  return c;
}

ManualClock::ManualClock(WallTime wall_start, MonoTime mono_start)
    : wall_now_(wall_start), mono_now_(mono_start) {}

WallTime ManualClock::wall_now() const {
  std::lock_guard lock(mu_);
  return wall_now_;
}

MonoTime ManualClock::mono_now() const {
  std::lock_guard lock(mu_);
  return mono_now_;
}

void ManualClock::advance(Duration d) {
  {
    std::lock_guard lock(mu_);
    if (d < Duration::zero()) d = Duration::zero();
    wall_now_ = saturating_add(wall_now_, d);
    mono_now_ = saturating_add(mono_now_, d);
  }
  cv_.notify_all();
}

void ManualClock::advance_monotonic(Duration d) {
  {
    std::lock_guard lock(mu_);
    if (d < Duration::zero()) d = Duration::zero();
    mono_now_ = saturating_add(mono_now_, d);
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
  return sleepers_;
}

void ManualClock::wait_for_sleepers(std::size_t n) const {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return sleepers_ >= n; });
}

WallTime ManualClock::Wall::now() const noexcept { return c_.wall_now(); }

MonoTime ManualClock::Mono::now() const noexcept { return c_.mono_now(); }

WaitResult ManualClock::Mono::sleep_until(MonoTime deadline, std::stop_token stop) const {
  std::unique_lock lock(c_.mu_);
  ++c_.sleepers_;
  c_.cv_.notify_all();  // wait_for_sleepers() watches this count
  const bool reached =
      c_.cv_.wait(lock, stop, [&] { return c_.mono_now_ >= deadline; });
  --c_.sleepers_;
  c_.cv_.notify_all();
  return reached ? WaitResult::kReached : WaitResult::kCancelled;
}

}  // namespace abide
