#include "mock_bucket.h"

#include <algorithm>

namespace abide::mock {

Bucket::Bucket(std::uint64_t capacity, Duration window, WallTime now) noexcept
    : capacity_(std::max<std::uint64_t>(capacity, 1)),
      window_ns_(std::clamp<std::int64_t>(window.count(), 1, kMaxWindowNs)),
      at_(now) {}

void Bucket::reset(WallTime now) noexcept {
  debt_ = 0;
  at_ = now;
}

void Bucket::refill(WallTime now) noexcept {
  if (now <= at_) return;
  const std::int64_t elapsed = (now - at_).count();
  at_ = now;
  // The debt never exceeds two capacities (see take), which two windows
  // repay: past that the bucket is full, and the product below stays small.
  if (elapsed / 2 >= window_ns_) {
    debt_ = 0;
    return;
  }
  const Wide refilled = static_cast<Wide>(elapsed) * capacity_;
  debt_ = refilled >= debt_ ? 0 : debt_ - refilled;
}

bool Bucket::holds(std::uint64_t n) const noexcept {
  if (n > capacity_) return false;
  return debt_ <= full_debt() - static_cast<Wide>(n) * unit();
}

void Bucket::take(std::uint64_t n) noexcept {
  const Wide cost = static_cast<Wide>(n) * unit();  // < 2^64 x 2^53: no overflow
  debt_ = std::min(debt_ + cost, 2 * full_debt());
}

void Bucket::give(std::uint64_t n) noexcept {
  const Wide back = static_cast<Wide>(n) * unit();
  debt_ = back >= debt_ ? 0 : debt_ - back;
}

std::uint64_t Bucket::available() const noexcept {
  if (debt_ >= full_debt()) return 0;
  return static_cast<std::uint64_t>((full_debt() - debt_) / unit());
}

Duration Bucket::until(std::uint64_t n) const noexcept {
  if (n > capacity_) return Duration::max();
  return time_of(debt_ - (full_debt() - static_cast<Wide>(n) * unit()));
}

Duration Bucket::time_of(Wide debt) const noexcept {
  if (debt <= 0) return Duration::zero();
  const Wide c = capacity_;
  return Duration{static_cast<Duration::rep>((debt + c - 1) / c)};  // <= two windows
}

}  // namespace abide::mock
