// One origin's server clock from the Dates it sends (abide/server_clock.h).
#include "abide/server_clock.h"

#include <chrono>

namespace abide {

namespace {
constexpr double kDriftAllowance = 1e-4;  // 100 ppm between the server's clock and ours
// A contradiction this large is one clock set (back or forward), not two clocks
// a fraction of a second apart.
constexpr Duration kClockSet = std::chrono::seconds{1};
// Dates that must agree before the floor is trusted. A second clock a fraction
// d of a second off shows in each of its answers with probability about d, so
// waiting for this many answers makes one that never showed unlikely; a single
// clock loses nothing it had (its floor is tight only after many answers anyway).
constexpr int kConfirmations = 16;

Duration drift_over(MonoTime from, MonoTime to) noexcept {
  const Duration since = to > from ? to - from : Duration::zero();
  return Duration{static_cast<Duration::rep>(static_cast<double>(since.count()) * kDriftAllowance)};
}
}  // namespace

// Saturating throughout: a Date may sit at an end of WallTime's range (year
// 1413 reads as its earliest instant), and the bounds are that Date minus a
// monotonic instant.
Duration ServerClock::low_locked(MonoTime at) const noexcept { return saturating_sub(low_, drift_over(low_at_, at)); }
Duration ServerClock::high_locked(MonoTime at) const noexcept {
  return saturating_add(high_, drift_over(high_at_, at));
}

void ServerClock::learn(std::optional<WallTime> server_date, MonoTime received, std::optional<MonoTime> sent) noexcept {
  if (!server_date) return;
  const MonoTime at = received;
  // This Date alone: the server's clock at receipt is at least the Date, and
  // below Date + 1 s plus the time the answer took (the Date was written at
  // some instant after the request was sent).
  const Duration took = sent && *sent < at ? at - *sent : Duration::zero();
  const Duration low = saturating_sub(server_date->time_since_epoch(), at.time_since_epoch());
  const Duration high = saturating_add(saturating_add(low, std::chrono::seconds{1}), took);
  std::lock_guard lock(mu_);
  if (known_) {
    const Duration known_low = low_locked(at);
    const Duration known_high = high_locked(at);
    if (high > known_low && low < known_high) {
      // Consistent with one clock: keep the tighter of each bound.
      if (agreed_ < kConfirmations) ++agreed_;
      if (low > known_low) {
        low_ = low;
        low_at_ = at;
      }
      if (high < known_high) {
        high_ = high;
        high_at_ = at;
      }
      return;
    }
    // No single clock reads this: another server answered, or the clock was set.
    const Duration by = high <= known_low ? saturating_sub(known_low, high) : saturating_sub(low, known_high);
    if (by < kClockSet || reset_once_) {
      several_ = true;
      return;
    }
    reset_once_ = true;  // a clock set once: start afresh from this Date
  }
  known_ = true;
  agreed_ = 1;
  low_ = low;
  low_at_ = at;
  high_ = high;
  high_at_ = at;
}

std::optional<WallTime> ServerClock::floor_at(MonoTime at) const noexcept {
  std::lock_guard lock(mu_);
  if (!known_ || several_) return std::nullopt;
  return WallTime{saturating_add(at.time_since_epoch(), low_locked(at))};
}

std::optional<WallTime> ServerClock::trusted_floor_at(MonoTime at) const noexcept {
  std::lock_guard lock(mu_);
  if (!known_ || several_ || agreed_ < kConfirmations) return std::nullopt;
  return WallTime{saturating_add(at.time_since_epoch(), low_locked(at))};
}

bool ServerClock::several_clocks() const noexcept {
  std::lock_guard lock(mu_);
  return several_;
}

}  // namespace abide
