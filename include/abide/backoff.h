// abide/backoff.h: local backoff, jitter and a retry budget (docs/RULES.md rule 4).
//
// When a server says nothing about waiting, a client still must not hammer it:
// the wait grows exponentially with the attempt number up to a cap, and jitter
// spreads clients that failed together so they do not retry together. A retry
// budget shared by all requests of one client keeps a failing dependency from
// turning into a retry storm.
//
// Randomness is injected (RandomSource) so tests and `abide explain --seed` are
// deterministic. Every function here is overflow-safe: huge attempt numbers and
// huge durations saturate, they never wrap.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string_view>

#include "abide/clock.h"

namespace abide {

// A source of uniform random numbers in [0, 1).
class RandomSource {
 public:
  virtual ~RandomSource() = default;
  // The next number. Values outside [0, 1) (or NaN) from a user's source are
  // clamped by the users of this interface, never trusted.
  virtual double next_unit() noexcept = 0;
};

// A seeded, portable random source (SplitMix64): the same seed gives the same
// sequence on every platform and standard library. Thread-safe and lock-free
// (the state is one atomic counter), so one instance can serve many workers.
class SeededRandom final : public RandomSource {
 public:
  explicit SeededRandom(std::uint64_t seed) noexcept : state_(seed) {}
  double next_unit() noexcept override;
  // The next raw 64-bit output.
  std::uint64_t next_u64() noexcept;

 private:
  std::atomic<std::uint64_t> state_;
};

// The jitter kinds, as commonly defined for capped exponential backoff (the AWS
// Architecture Blog, "Exponential Backoff And Jitter"), with b the capped
// exponential backoff of the attempt:
enum class Jitter : std::uint8_t {
  kNone,          // sleep = b
  kFull,          // sleep = uniform(0, b)
  kEqual,         // sleep = b/2 + uniform(0, b/2)
  kDecorrelated,  // sleep = min(cap, uniform(base, 3 * previous sleep))
};

// "none", "full", "equal", "decorrelated".
std::string_view to_string(Jitter j) noexcept;
// The inverse of to_string; nullopt for anything else.
std::optional<Jitter> parse_jitter(std::string_view s) noexcept;

// One drawn backoff, split into its deterministic floor and its random part, so
// that callers can keep rule 4 (wait = max(server hint, floor) + jitter, jitter
// never negative). floor + jitter is exactly the sleep the jitter kind defines.
struct BackoffDraw {
  Duration floor{};    // the smallest sleep the kind allows: b, 0, b/2 or min(base, cap)
  Duration jitter{};   // the random part, >= 0
  Duration nominal{};  // the capped exponential b of the attempt, for reports
  // floor + jitter (saturating).
  Duration total() const noexcept { return saturating_add(floor, jitter); }
};

// base * 2^(attempt-1), capped at cap. Attempt 1 (the first failure) gives base.
// Attempts below 1 count as 1; negative durations count as zero; any attempt
// number, however large, saturates at cap instead of overflowing.
Duration exponential_backoff(Duration base, Duration cap, std::int64_t attempt) noexcept;

// Capped exponential backoff with jitter: a value type, cheap to copy.
class BackoffPolicy {
 public:
  constexpr BackoffPolicy() = default;
  // base: the first backoff; cap: the largest; both clamped to >= 0.
  constexpr BackoffPolicy(Duration base, Duration cap, Jitter jitter) noexcept
      : base_(base < Duration::zero() ? Duration::zero() : base),
        cap_(cap < Duration::zero() ? Duration::zero() : cap),
        jitter_(jitter) {}

  constexpr Duration base() const noexcept { return base_; }
  constexpr Duration cap() const noexcept { return cap_; }
  constexpr Jitter jitter() const noexcept { return jitter_; }

  // The capped exponential backoff of an attempt (no jitter).
  Duration nominal(std::int64_t attempt) const noexcept { return exponential_backoff(base_, cap_, attempt); }

  // Draws the backoff after `attempt` (1 = the first attempt failed). previous:
  // the sleep drawn after the previous attempt, which decorrelated jitter grows
  // from; when absent it is taken as nominal(attempt - 1) (base for attempt 1).
  // The other kinds ignore it. Uses one number from rng (none: no number).
  BackoffDraw draw(std::int64_t attempt, std::optional<Duration> previous, RandomSource& rng) const noexcept;

 private:
  Duration base_ = std::chrono::seconds{1};
  Duration cap_ = std::chrono::seconds{60};
  Jitter jitter_ = Jitter::kFull;
};

// A retry budget: a token bucket shared by all requests of one client (gRPC's
// retry throttling is the model). Successes earn `token_ratio` tokens, up to
// max_tokens; every retry spends one token, and a retry is allowed only while
// more than half the bucket is left. With the defaults (10 tokens, 0.1 per
// success) a client retries at most 5 times in a row, then about once per ten
// successes, however many requests fail. Thread-safe and lock-free.
class RetryBudget {
 public:
  // max_tokens is clamped to [1, 1e9]; token_ratio to [0.001, max_tokens]
  // (tokens are counted in thousandths, as gRPC does). Starts full.
  explicit RetryBudget(double max_tokens = 10.0, double token_ratio = 0.1) noexcept;
  RetryBudget(const RetryBudget&) = delete;
  RetryBudget& operator=(const RetryBudget&) = delete;

  // Spends one token for a retry if more than half the bucket is left. False:
  // the budget is empty and the retry must not happen.
  bool try_spend() noexcept;
  // Earns token_ratio for a response that shows the dependency is healthy.
  void on_success() noexcept;
  // True when try_spend() would succeed now.
  bool can_retry() const noexcept;
  // Tokens left.
  double tokens() const noexcept;
  double max_tokens() const noexcept;

 private:
  std::int64_t max_milli_;
  std::int64_t ratio_milli_;
  std::atomic<std::int64_t> milli_;
};

}  // namespace abide
