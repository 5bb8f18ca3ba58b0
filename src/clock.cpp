#include "abide/clock.h"

#include <condition_variable>
#include <mutex>

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

}  // namespace abide
