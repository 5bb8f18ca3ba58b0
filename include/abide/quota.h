// abide/quota.h: the quota model, the types that every reader of a response
// fills (the IETF RateLimit fields in ratelimit.h, vendor profiles in
// profiles.h) and that observe() (signals.h), the planner and the pacer read.
//
// It sits below every reader: it includes nothing of abide but clock.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "abide/clock.h"

namespace abide {

// How much a quota observation can be trusted.
enum class Confidence {
  kHigh,  // a standard field, or a vendor header read through that vendor's profile
  kLow,   // a vendor-style header interpreted by the opt-in heuristic
};

// One quota policy as a response described it, normalized.
struct QuotaObservation {
  std::string policy;                        // policy name; empty when the form has none
  std::optional<std::int64_t> limit;         // quota units per window
  std::optional<std::int64_t> remaining;     // quota units left
  std::optional<Duration> window;            // the policy's window
  std::optional<Duration> reset;             // from receipt until the quota resets (>= 0)
  Duration reset_resolution{};               // the step reset was stated in (1 s: whole seconds); 0: exact
  std::string unit = "requests";             // quota unit (requests, content-bytes, tokens, ...)
  std::optional<std::string> partition_key;  // raw bytes of `pk`, or a vendor scope/bucket
  std::string source;                        // draft form ("draft-08", ...) or profile name
  Confidence confidence = Confidence::kHigh;
  // Quota units the request that got this answer consumed (the provisional draft-12 `c`).
  std::optional<std::int64_t> cost;
  // The reset counts to a full refill of the quota (OpenAI's x-ratelimit-reset-*),
  // not to the next permitted request: it does not bound the wait as a reset would.
  bool reset_is_full_refill = false;

  // True when the observation says nothing may be sent before `reset`.
  bool exhausted() const noexcept { return remaining && *remaining <= 0 && reset.has_value(); }
};

// A server's retry hint, resolved against the receive time.
struct RetryHint {
  enum class Kind { kDelay, kDate };
  Kind kind = Kind::kDelay;
  // From receipt until the earliest permitted retry, >= 0. For a date: the
  // larger of (date - local receive time) and (date - server Date), so clock
  // skew can never make a retry early (rule 3); zero for a date in the past.
  Duration wait{};
  std::optional<WallTime> date;  // the instant, for Kind::kDate
  std::string source;            // header that carried it: "retry-after", "retry-after-ms", ...
};
// Retry-After is authoritative: a vendor retry-delay header (retry-after-ms,
// x-ms-retry-after-ms, per profile) is used only when Retry-After is absent or
// rejected, or when it asks for a longer wait (with a warning). No quota
// observation ever shortens or removes it.

}  // namespace abide
