// pacing/units.h: the pacing kernel's one time unit, the microsecond, and the
// one way a caller's nanoseconds are brought into it.
//
// Every store runs the kernel on whole microseconds: MemoryStore and the file
// store in C++, RedisStore in Lua, whose numbers are doubles (exact to 2^53 us,
// about 285 years; nanoseconds would be exact for only 104 days of uptime).
// With the same inputs and the same arithmetic, every store answers to the
// microsecond alike. The rounding never lets a send go early:
// - `now` is cut down to its microsecond, and a wait is counted from that cut
//   instant; the caller sleeps it from its own (later) now.
// - The end of a span that holds sends back (a cooldown, a window's reset) is
//   rounded up: never before now + d.
// - A longest acceptable wait is rounded down: a wait within it in whole
//   microseconds is within it exactly.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "abide/clock.h"

namespace abide::pacing {

using Micros = std::chrono::microseconds;
// An instant on the caller's monotonic clock, in whole microseconds.
using Instant = std::chrono::time_point<std::chrono::steady_clock, Micros>;

// Spans longer than ten years count as ten years: "forever" for a pacer, and
// far inside what a double holds exactly.
inline constexpr Micros kMaxMicros{315'576'000'000'000};

// d rounded up to the microsecond, within [0, kMaxMicros].
constexpr Micros micros_up(Duration d) noexcept {
  if (d <= Duration::zero()) return Micros::zero();
  return std::min(std::chrono::ceil<Micros>(d), kMaxMicros);
}

// d rounded down to the microsecond, within [0, kMaxMicros].
constexpr Micros micros_down(Duration d) noexcept {
  if (d <= Duration::zero()) return Micros::zero();
  return std::min(std::chrono::floor<Micros>(d), kMaxMicros);
}

// The caller's now, cut to its microsecond (never before the clock's start).
constexpr Instant instant_of(MonoTime now) noexcept {
  return Instant{std::max(std::chrono::floor<Micros>(now.time_since_epoch()), Micros::zero())};
}

// A span from now that holds sends back, counted from instant_of(now): it
// reaches now + d rounded up, never before.
constexpr Micros span_up(MonoTime now, Duration d) noexcept {
  if (d <= Duration::zero()) return Micros::zero();
  const Duration cut = now.time_since_epoch() - instant_of(now).time_since_epoch();
  return micros_up(saturating_add(cut, d));
}

// A longest acceptable wait: rounded down; negative stays negative ("only report").
constexpr Micros max_wait_of(Duration max_wait) noexcept {
  return max_wait < Duration::zero() ? Micros{-1} : micros_down(max_wait);
}

// Back to the caller's units: exact (saturating past the nanoseconds' range).
constexpr Duration duration_of(Micros d) noexcept {
  constexpr auto kMost = Duration::max().count() / 1000;
  if (d.count() > kMost) return Duration::max();
  if (d.count() < -kMost) return Duration::min();
  return Duration{d.count() * 1000};
}
constexpr MonoTime mono_of(Instant t) noexcept { return MonoTime{duration_of(t.time_since_epoch())}; }

// a + b, saturating (the kernel's spans are bounded, but a state read back
// may hold anything within range).
constexpr Micros add(Micros a, Micros b) noexcept {
  if (b.count() > 0 && a.count() > Micros::max().count() - b.count()) return Micros::max();
  if (b.count() < 0 && a.count() < Micros::min().count() - b.count()) return Micros::min();
  return a + b;
}
constexpr Instant add(Instant t, Micros d) noexcept { return Instant{add(t.time_since_epoch(), d)}; }

}  // namespace abide::pacing
