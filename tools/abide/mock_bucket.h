// The refilling bucket of `abide mock-server`: one algorithm for every bucket
// it keeps (the openai styles' requests, openai-tokens' tokens,
// anthropic-tokens' requests, input and output tokens).
//
// A bucket holds `capacity` units and refills continuously, the whole
// capacity over `window` (one unit every window/capacity). It starts full.
// Kept exact in integers: what is missing is stored as the time until the
// bucket is full again, in units of 1/capacity ns, so that one unit costs
// exactly window-in-ns of them whatever the capacity and the window are (128
// bits: window x capacity reaches 1e26 for the limits the server accepts).
// Nothing is rounded until a time is stated, and then it is rounded up, so a
// client that waits as told always finds what it was told about.
#pragma once

#include <cstdint>

#include "abide/clock.h"

namespace abide::mock {

class Bucket {
  __extension__ using Wide = __int128;

 public:
  // The longest window (about 104 days; the server's is at most one): with it,
  // every product below stays under 2^119.
  static constexpr std::int64_t kMaxWindowNs = std::int64_t{1} << 53;

  // capacity >= 1 units, window > 0 (raised to 1 and 1 ns, the window cut to
  // kMaxWindowNs; the caller validates both). Full at `now`.
  Bucket(std::uint64_t capacity, Duration window, WallTime now = {}) noexcept;

  // Full again, from `now`.
  void reset(WallTime now) noexcept;

  // Adds what flowed in since the last call. An earlier `now` adds nothing:
  // the bucket's time never goes back.
  void refill(WallTime now) noexcept;

  // n whole units are in the bucket (false for n > capacity: never).
  bool holds(std::uint64_t n) const noexcept;

  // Takes n units, even beyond what is there: a charge found larger after the
  // fact (usage above the reservation) overdraws the bucket, and it takes
  // correspondingly longer to refill. The debt is bounded at two capacities
  // (what is missing beyond is dropped); the server's charges stay within it.
  void take(std::uint64_t n) noexcept;

  // Gives n units back (a reservation not used), never beyond full.
  void give(std::uint64_t n) noexcept;

  std::uint64_t capacity() const noexcept { return capacity_; }

  // Whole units in the bucket (0 when it is overdrawn).
  std::uint64_t available() const noexcept;

  // Until the bucket is full again (up to twice the window when overdrawn).
  Duration until_full() const noexcept { return time_of(debt_); }

  // Until n whole units are in it: 0 when they are; Duration::max() when n >
  // capacity, which never fits.
  Duration until(std::uint64_t n) const noexcept;

 private:
  Wide unit() const noexcept { return window_ns_; }
  Wide full_debt() const noexcept { return static_cast<Wide>(capacity_) * window_ns_; }

  // Debt units as time, rounded up to the ns (never states a refill earlier than it is).
  Duration time_of(Wide debt) const noexcept;

  std::uint64_t capacity_;
  std::int64_t window_ns_;
  Wide debt_ = 0;  // time until full, in 1/capacity ns; 0: full
  WallTime at_{};  // when debt_ was last brought up to date
};

}  // namespace abide::mock
