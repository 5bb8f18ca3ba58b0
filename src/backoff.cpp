#include "abide/backoff.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace abide {

namespace {

// u clamped into [0, 1]: a user's random source is not trusted to stay in range.
double clamp_unit(double u) noexcept {
  if (!(u > 0.0)) return 0.0;  // also NaN
  if (u > 1.0) return 1.0;
  return u;
}

// u * span for u in [0, 1], exact at the ends and never above span.
Duration scale(Duration span, double u) noexcept {
  if (span <= Duration::zero()) return Duration::zero();
  u = clamp_unit(u);
  const double x = static_cast<double>(span.count()) * u;
  // span.count() as a double may round up past INT64_MAX; clamp before converting.
  if (!(x < static_cast<double>(span.count()))) return span;
  const auto n = static_cast<std::int64_t>(x);
  return Duration{std::clamp<std::int64_t>(n, 0, span.count())};
}

Duration non_negative(Duration d) noexcept { return d < Duration::zero() ? Duration::zero() : d; }

}  // namespace

std::uint64_t SeededRandom::next_u64() noexcept {
  // SplitMix64: a counter advanced by the golden-ratio increment, then mixed.
  std::uint64_t z = state_.fetch_add(0x9E3779B97F4A7C15ULL, std::memory_order_relaxed) + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double SeededRandom::next_unit() noexcept {
  // The top 53 bits as a fraction: uniform on [0, 1), identical everywhere.
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

std::string_view to_string(Jitter j) noexcept {
  switch (j) {
    case Jitter::kNone: return "none";
    case Jitter::kFull: return "full";
    case Jitter::kEqual: return "equal";
    case Jitter::kDecorrelated: return "decorrelated";
  }
  return "none";
}

std::optional<Jitter> parse_jitter(std::string_view s) noexcept {
  for (Jitter j : {Jitter::kNone, Jitter::kFull, Jitter::kEqual, Jitter::kDecorrelated}) {
    if (s == to_string(j)) return j;
  }
  return std::nullopt;
}

Duration exponential_backoff(Duration base, Duration cap, std::int64_t attempt) noexcept {
  base = non_negative(base);
  cap = non_negative(cap);
  if (base == Duration::zero() || cap == Duration::zero()) return Duration::zero();
  if (base >= cap) return cap;
  const std::int64_t shift = attempt <= 1 ? 0 : attempt - 1;
  // base * 2^shift <= cap  <=>  base <= cap / 2^shift (integers, rounding down):
  // decided without ever forming the product.
  if (shift >= 63) return cap;
  if (base.count() > (cap.count() >> shift)) return cap;
  return Duration{base.count() << shift};
}

BackoffDraw BackoffPolicy::draw(std::int64_t attempt, std::optional<Duration> previous,
                                RandomSource& rng) const noexcept {
  BackoffDraw d;
  d.nominal = nominal(attempt);
  const Duration b = d.nominal;
  switch (jitter_) {
    case Jitter::kNone: d.floor = b; break;
    case Jitter::kFull: d.jitter = scale(b, rng.next_unit()); break;
    case Jitter::kEqual:
      d.floor = b / 2;
      d.jitter = scale(b - d.floor, rng.next_unit());
      break;
    case Jitter::kDecorrelated: {
      // uniform(base, 3 * previous), capped; the floor is base (or the cap, if lower).
      const Duration prev = non_negative(previous.value_or(nominal(attempt - 1)));
      d.floor = std::min(base_, cap_);
      const Duration triple = saturating_add(saturating_add(prev, prev), prev);
      const Duration upper = std::max(d.floor, std::min(cap_, triple));
      d.jitter = scale(upper - d.floor, rng.next_unit());
      break;
    }
  }
  return d;
}

// ---- RetryBudget -------------------------------------------------------------

namespace {

std::int64_t to_milli(double tokens, double lo, double hi) noexcept {
  if (!(tokens >= lo)) tokens = lo;  // also NaN
  if (tokens > hi) tokens = hi;
  return static_cast<std::int64_t>(std::llround(tokens * 1000.0));
}

}  // namespace

RetryBudget::RetryBudget(double max_tokens, double token_ratio) noexcept
    : max_milli_(to_milli(max_tokens, 1.0, 1e9)),
      ratio_milli_(std::min(to_milli(token_ratio, 0.001, 1e9), max_milli_)),
      milli_(max_milli_) {}

bool RetryBudget::try_spend() noexcept {
  std::int64_t cur = milli_.load(std::memory_order_relaxed);
  while (true) {
    if (cur * 2 <= max_milli_) return false;  // half or less left: no retry
    if (milli_.compare_exchange_weak(cur, std::max<std::int64_t>(0, cur - 1000), std::memory_order_relaxed)) {
      return true;
    }
  }
}

void RetryBudget::on_success() noexcept {
  std::int64_t cur = milli_.load(std::memory_order_relaxed);
  while (cur < max_milli_) {
    const std::int64_t next = std::min(max_milli_, cur + ratio_milli_);
    if (milli_.compare_exchange_weak(cur, next, std::memory_order_relaxed)) return;
  }
}

bool RetryBudget::can_retry() const noexcept { return milli_.load(std::memory_order_relaxed) * 2 > max_milli_; }

double RetryBudget::tokens() const noexcept {
  return static_cast<double>(milli_.load(std::memory_order_relaxed)) / 1000.0;
}

double RetryBudget::max_tokens() const noexcept { return static_cast<double>(max_milli_) / 1000.0; }

}  // namespace abide
