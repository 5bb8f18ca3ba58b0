// One origin's server clock from the Dates it sends (abide/server_clock.h).
#include "abide/server_clock.h"

#include <chrono>

#include "mutex.h"

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

struct ServerClock::State {
  mutable detail::Mutex mu;
  bool known ABIDE_GUARDED_BY(mu) = false;
  bool several ABIDE_GUARDED_BY(mu) = false;     // Dates contradicted the bounds: the floor is not used
  bool reset_once ABIDE_GUARDED_BY(mu) = false;  // the bounds were started afresh once (a clock set)
  int agreed ABIDE_GUARDED_BY(mu) = 0;           // Dates that agreed with the bounds since they started (capped)
  Duration low ABIDE_GUARDED_BY(mu){};     // server wall time - monotonic time, at its best lower-bound sample
  MonoTime low_at ABIDE_GUARDED_BY(mu){};  // when that sample was received
  Duration high ABIDE_GUARDED_BY(mu){};    // ... exclusive upper bound, at its best sample
  MonoTime high_at ABIDE_GUARDED_BY(mu){};

  // Saturating throughout: a Date may sit at an end of WallTime's range (year
  // 1413 reads as its earliest instant), and the bounds are that Date minus a
  // monotonic instant.
  Duration low_bound(MonoTime at) const noexcept ABIDE_REQUIRES(mu) {
    return saturating_sub(low, drift_over(low_at, at));
  }
  Duration high_bound(MonoTime at) const noexcept ABIDE_REQUIRES(mu) {
    return saturating_add(high, drift_over(high_at, at));
  }
};

ServerClock::ServerClock() : state_(std::make_unique<State>()) {}
ServerClock::~ServerClock() = default;

void ServerClock::learn(std::optional<WallTime> server_date, MonoTime received, std::optional<MonoTime> sent) noexcept {
  if (!server_date) return;
  const MonoTime at = received;
  // This Date alone: the server's clock at receipt is at least the Date, and
  // below Date + 1 s plus the time the answer took (the Date was written at
  // some instant after the request was sent).
  const Duration took = sent && *sent < at ? at - *sent : Duration::zero();
  const Duration low = saturating_sub(server_date->time_since_epoch(), at.time_since_epoch());
  const Duration high = saturating_add(saturating_add(low, std::chrono::seconds{1}), took);
  State& s = *state_;
  detail::MutexLock lock(s.mu);
  if (s.known) {
    const Duration known_low = s.low_bound(at);
    const Duration known_high = s.high_bound(at);
    if (high > known_low && low < known_high) {
      // Consistent with one clock: keep the tighter of each bound.
      if (s.agreed < kConfirmations) ++s.agreed;
      if (low > known_low) {
        s.low = low;
        s.low_at = at;
      }
      if (high < known_high) {
        s.high = high;
        s.high_at = at;
      }
      return;
    }
    // No single clock reads this: another server answered, or the clock was set.
    const Duration by = high <= known_low ? saturating_sub(known_low, high) : saturating_sub(low, known_high);
    if (by < kClockSet || s.reset_once) {
      s.several = true;
      return;
    }
    s.reset_once = true;  // a clock set once: start afresh from this Date
  }
  s.known = true;
  s.agreed = 1;
  s.low = low;
  s.low_at = at;
  s.high = high;
  s.high_at = at;
}

std::optional<WallTime> ServerClock::floor_at(MonoTime at) const noexcept {
  const State& s = *state_;
  detail::MutexLock lock(s.mu);
  if (!s.known || s.several) return std::nullopt;
  return WallTime{saturating_add(at.time_since_epoch(), s.low_bound(at))};
}

std::optional<WallTime> ServerClock::trusted_floor_at(MonoTime at) const noexcept {
  const State& s = *state_;
  detail::MutexLock lock(s.mu);
  if (!s.known || s.several || s.agreed < kConfirmations) return std::nullopt;
  return WallTime{saturating_add(at.time_since_epoch(), s.low_bound(at))};
}

bool ServerClock::several_clocks() const noexcept {
  const State& s = *state_;
  detail::MutexLock lock(s.mu);
  return s.several;
}

}  // namespace abide
