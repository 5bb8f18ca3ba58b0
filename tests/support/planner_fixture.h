// What the tests of abide/planner.h (tests/planner_*_test.cpp) share: signals
// built by hand (the planner's input is the normalized view, whoever produced
// it), a config, one decision, and the generated inputs of the properties.
#pragma once

#include "abide/planner.h"
#include "duration_text.h"
#include "planner_internal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <type_traits>

#include <random>
#include <set>
#include <thread>

namespace abide::test {

using namespace std::chrono_literals;

const WallTime kWall{std::chrono::seconds{1767225600}};  // 2026-01-01T00:00:00Z
const MonoTime kMono{std::chrono::hours{1000}};

// Returns the same number every time.
class ConstRandom final : public RandomSource {
 public:
  explicit ConstRandom(double v) : v_(v) {}
  double next_unit() noexcept override { return v_; }

 private:
  double v_;
};

inline Signals response(int status) {
  Signals s;
  s.status = status;
  s.received_wall = kWall;
  s.received_mono = kMono;
  s.limited = status == 429;
  return s;
}

inline Signals with_delay(int status, Duration d) {
  Signals s = response(status);
  s.retry_after = RetryHint{RetryHint::Kind::kDelay, d, std::nullopt, "retry-after"};
  return s;
}

inline QuotaObservation quota(std::int64_t remaining, std::optional<Duration> reset,
                              QuotaSource source = QuotaSource::kDraft08) {
  QuotaObservation q;
  q.policy = "default";
  q.limit = 100;
  q.remaining = remaining;
  q.reset = reset;
  q.window = 60s;
  q.source = source;
  return q;
}

// A vendor quota, read through the named profile.
inline QuotaObservation quota(std::int64_t remaining, std::optional<Duration> reset, const char* profile) {
  QuotaObservation q = quota(remaining, reset, QuotaSource::kVendor);
  q.profile = profile;
  return q;
}

inline PlannerConfig config(Jitter jitter = Jitter::kNone, Duration base = 1s, Duration cap = 60s) {
  PlannerConfig c;
  c.backoff = BackoffPolicy(base, cap, jitter);
  return c;
}

inline Plan decide(const PlannerConfig& c, const PlanInput& in, double u = 0.5) {
  ConstRandom rng(u);
  return Planner(c).decide(in, rng);
}

struct Generated {
  Signals signals;
  PlanInput input{signals};
  PlannerConfig config;
};

inline Duration any_duration(std::mt19937_64& g) {
  switch (g() % 6) {
    case 0: return Duration::zero();
    case 1: return Duration{static_cast<std::int64_t>(g() % 1'000'000'000)};        // < 1 s
    case 2: return std::chrono::seconds{static_cast<std::int64_t>(g() % 120)};      // minutes
    case 3: return std::chrono::seconds{static_cast<std::int64_t>(g() % 100'000)};  // a day
    case 4: return kMaxDuration;
    default: return Duration{static_cast<std::int64_t>(g() >> 1)};  // anything
  }
}

inline void generate(std::mt19937_64& g, Generated& out) {
  static constexpr int kStatuses[] = {200, 204, 301, 400, 403, 404, 408, 429, 500, 501, 502, 503, 504, 529};
  Signals& s = out.signals;
  s = Signals{};
  s.status = kStatuses[g() % std::size(kStatuses)];
  s.received_wall = kWall + std::chrono::seconds{static_cast<std::int64_t>(g() % 1000)};
  s.received_mono = kMono + std::chrono::seconds{static_cast<std::int64_t>(g() % 1000)};
  s.limited = s.status == 429 || (s.status == 403 && g() % 2 == 0);
  switch (g() % 4) {
    case 0: break;
    case 1: s.retry_after_rejected = true; break;
    case 2: s.retry_after = RetryHint{RetryHint::Kind::kDelay, any_duration(g), std::nullopt, "retry-after"}; break;
    case 3: {
      const WallTime date = saturating_add(s.received_wall, any_duration(g) - std::chrono::seconds{500});
      RetryHint h{RetryHint::Kind::kDate, std::max(Duration::zero(), date - s.received_wall), date, "retry-after"};
      if (g() % 2 == 0) {
        s.server_date = s.received_wall + std::chrono::seconds{static_cast<std::int64_t>(g() % 121) - 60};
        s.clock_skew = *s.server_date - s.received_wall;
      }
      s.retry_after = h;
      break;
    }
  }
  const auto nq = g() % 4;
  for (std::uint64_t i = 0; i < nq; ++i) {
    // One draw per statement: the order of a call's arguments is the
    // compiler's choice (GCC takes them last to first, clang first to last),
    // and the digest below must not depend on it. These draws keep GCC's order.
    const QuotaSource source = g() % 2 ? QuotaSource::kDraft08 : QuotaSource::kVendor;
    const Duration reset = any_duration(g);
    const auto remaining = static_cast<std::int64_t>(g() % 3);
    QuotaObservation q = quota(remaining, reset, source);
    if (q.source == QuotaSource::kVendor) q.profile = "github";
    if (g() % 5 == 0) q.reset.reset();
    if (g() % 7 == 0) q.confidence = Confidence::kLow;
    s.quota.push_back(q);
  }
  PlanInput in(s);
  static constexpr const char* kMethods[] = {"GET", "PUT", "DELETE", "POST", "PATCH"};
  if (g() % 8 == 0) {
    in = PlanInput(TransportError{g() % 2 == 0, s.received_wall, s.received_mono});
  }
  in.method = kMethods[g() % std::size(kMethods)];
  in.idempotency_key = g() % 2 == 0;
  in.max_attempts = static_cast<std::int64_t>(g() % 10);
  in.attempt = static_cast<std::int64_t>(g() % 12);
  if (g() % 2 == 0) in.deadline = saturating_add(s.received_mono, any_duration(g) - std::chrono::seconds{5});
  if (g() % 3 == 0) in.previous_backoff = any_duration(g);
  out.input = in;
  PlannerConfig& c = out.config;
  c = PlannerConfig{};
  const auto jitter = static_cast<Jitter>(g() % 4);
  const Duration cap = any_duration(g);
  const Duration base = any_duration(g);
  c.backoff = BackoffPolicy(base, cap, jitter);
  c.max_wait = g() % 2 ? kMaxDuration : any_duration(g);
  c.use_low_confidence_quota = g() % 3 == 0;
}

}  // namespace abide::test
