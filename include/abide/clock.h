// abide/clock.h: time types, injectable clocks and a cancellable wait.
//
// Every rule in abide that depends on time takes its clocks as parameters, so
// tests drive time with a manual clock instead of sleeping (abide::ManualClock, in
// abide/testing/manual_clock.h of the abide::testing library). Wall-clock time is
// used only to interpret server dates; every wait runs on the monotonic clock,
// so a wall-clock jump can neither shorten nor lengthen it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stop_token>

namespace abide {

// Durations are nanoseconds everywhere in the core.
using Duration = std::chrono::nanoseconds;
// A wall-clock instant (UTC, system_clock).
using WallTime = std::chrono::time_point<std::chrono::system_clock, Duration>;
// A monotonic instant (steady_clock).
using MonoTime = std::chrono::time_point<std::chrono::steady_clock, Duration>;

// The longest duration abide represents. Hints beyond it saturate to it; it is
// "too long to wait", never a wrap-around.
inline constexpr Duration kMaxDuration = Duration::max();

// a + b, saturating at kMaxDuration / Duration::min() instead of overflowing.
constexpr Duration saturating_add(Duration a, Duration b) noexcept {
  const auto x = a.count();
  const auto y = b.count();
  if (y > 0 && x > Duration::max().count() - y) return Duration::max();
  if (y < 0 && x < Duration::min().count() - y) return Duration::min();
  return Duration{x + y};
}

// a - b, saturating at kMaxDuration / Duration::min() instead of overflowing.
constexpr Duration saturating_sub(Duration a, Duration b) noexcept {
  const auto x = a.count();
  const auto y = b.count();
  if (y < 0 && x > Duration::max().count() + y) return Duration::max();
  if (y > 0 && x < Duration::min().count() + y) return Duration::min();
  return Duration{x - y};
}

// t + d for any time point, saturating at the time point's range.
template <class Clock>
constexpr std::chrono::time_point<Clock, Duration> saturating_add(std::chrono::time_point<Clock, Duration> t,
                                                                  Duration d) noexcept {
  return std::chrono::time_point<Clock, Duration>{saturating_add(t.time_since_epoch(), d)};
}

// Converts whole seconds to Duration, saturating instead of overflowing.
constexpr Duration seconds_saturating(std::int64_t s) noexcept {
  constexpr std::int64_t kMax = Duration::max().count() / 1'000'000'000;
  constexpr std::int64_t kMin = Duration::min().count() / 1'000'000'000;
  if (s >= kMax) return Duration::max();
  if (s <= kMin) return Duration::min();
  return std::chrono::seconds{s};
}

// Seconds as a double, for reports and JSON.
constexpr double to_seconds(Duration d) noexcept { return std::chrono::duration<double>(d).count(); }

// Source of wall-clock time.
class WallClock {
 public:
  virtual ~WallClock() = default;
  // The current UTC instant.
  virtual WallTime now() const noexcept = 0;
};

// Why a wait returned.
enum class WaitResult {
  kReached,    // the time point was reached
  kCancelled,  // the stop token was triggered first
};

// Source of monotonic time, and the only way abide waits.
class MonotonicClock {
 public:
  virtual ~MonotonicClock() = default;
  // The current monotonic instant.
  virtual MonoTime now() const noexcept = 0;
  // Blocks until `deadline` or until `stop` is requested, whichever is first.
  // Returns kCancelled if a stop was requested (also when it already was).
  virtual WaitResult sleep_until(MonoTime deadline, std::stop_token stop) const = 0;
};

// The system's wall clock (std::chrono::system_clock).
class SystemWallClock final : public WallClock {
 public:
  WallTime now() const noexcept override;
};

// The system's monotonic clock (std::chrono::steady_clock). Waits wake promptly
// on cancellation.
class SystemMonotonicClock final : public MonotonicClock {
 public:
  MonoTime now() const noexcept override;
  WaitResult sleep_until(MonoTime deadline, std::stop_token stop) const override;
};

// Process-wide instances of the system clocks.
const SystemWallClock& system_wall_clock() noexcept;
const SystemMonotonicClock& system_monotonic_clock() noexcept;

}  // namespace abide
