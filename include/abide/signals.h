// abide/signals.h: everything one response says about waiting and quota, in
// one normalized, trustworthy view (DESIGN.md rules 1, 2, 3 and 8).
//
// observe() reads the status and header lines of a response together with the
// times it was received, and returns Signals: the Retry-After (from whichever
// header carried it), quota observations from the IETF RateLimit fields of every
// draft generation and from the vendor profile of the API that sent them, the
// server Date and the clock skew it implies, and every warning. It never fails:
// a malformed field is ignored with a warning, and the rest is still read.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abide/clock.h"
#include "abide/headers.h"

namespace abide {

class ProfileRegistry;  // abide/profiles.h
struct Profile;          // abide/profiles.h

// How much a quota observation can be trusted.
enum class Confidence {
  kHigh,  // a standard field, or a vendor header read through that vendor's profile
  kLow,   // a vendor-style header interpreted by the opt-in heuristic
};

// One quota policy as a response described it, normalized.
struct QuotaObservation {
  // User-provided so that emplace_back() sets each member instead of zero-filling the record first.
  QuotaObservation() noexcept {}

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

// What one response says.
struct Signals {
  int status = 0;
  WallTime received_wall{};
  MonoTime received_mono{};

  std::optional<RetryHint> retry_after;     // absent, or rejected (see retry_after_rejected)
  bool retry_after_rejected = false;        // a Retry-After was present but malformed
  std::vector<QuotaObservation> quota;      // in order of trust: IETF fields first
  std::optional<WallTime> server_date;      // a valid Date field
  std::optional<Duration> clock_skew;       // server Date - local receive time
  std::string profile;                      // the vendor profile used, empty if none
  bool limited = false;                     // the status means "rate limited" (429, or per profile)
  std::vector<Header> uninterpreted;        // vendor-style quota headers seen but not read (no profile)
  // The server's own verdict on retrying this request (Stripe-Should-Retry,
  // x-should-retry, per profile), when it gave one. false: do not retry; true
  // grants no permission to repeat a non-idempotent request (rule 7).
  std::optional<bool> should_retry;
  std::string should_retry_source;          // the header that carried the verdict
  std::vector<std::string> warnings;        // every field ignored or adjusted, and why

  // The longest `reset` among exhausted quota observations: nothing may be
  // sent on that quota before it. Nullopt when no quota is exhausted.
  std::optional<Duration> quota_wait() const noexcept;
  // The quota observation that restricts the client most (see
  // abide::most_restrictive in ratelimit.h), or nullptr when there is none.
  const QuotaObservation* most_restrictive() const noexcept;
};

// How observe() reads a response.
struct ObserveOptions {
  std::string_view host;                     // selects a vendor profile by host (exact or suffix)
  std::string_view profile;                  // selects one by name; "none" disables profiles
  const ProfileRegistry* registry = nullptr; // nullptr: the built-in profiles
  bool robust = true;                        // accept unambiguous deviations that only lengthen waits
  bool heuristic = false;                    // interpret vendor-style headers without a profile (low confidence)
  // A lower bound of the server's clock at receipt, learned from earlier
  // responses (ServerClock::floor_at). Used only with this response's Date, and
  // only within the second that Date names: it tightens rule 3, never loosens it.
  std::optional<WallTime> server_time_floor;
};

// What one server's clock reads, learned from the Date of many responses.
//
// A Date names a whole second, rounded down, so one response alone says only
// that the server's clock was at most a second ahead of it; taken alone (rule 3)
// that costs up to a second on every wait for a server's time. Against the
// monotonic clock, the server's time at any response is at least
// `Date_i + (mono - mono_i)` for every earlier response i, so the best of many
// is close to the truth. The bound allows for 100 ppm of drift between the two
// clocks, and starts afresh when a Date contradicts it by more than a second
// (the server's clock was set back). Thread-safe.
class ServerClock {
 public:
  // Learns from one response (its Date and monotonic receive time); ignores one without Date.
  void learn(const Signals& s) noexcept;
  // A lower bound of the server's clock at monotonic time `at`; nullopt before any Date.
  std::optional<WallTime> floor_at(MonoTime at) const noexcept;

 private:
  mutable std::mutex mu_;
  bool known_ = false;
  Duration offset_{};  // server wall time - monotonic time, at its best sample
  MonoTime sample_{};  // when the best sample was received
  Duration decayed_locked(MonoTime at) const noexcept;
};

// Reads one response. Never fails; problems become warnings. `status` decides
// `limited` only; every field is read on every status. Thread-safe (the
// built-in registry is loaded once, on first use).
Signals observe(int status, const HeaderList& headers, WallTime received_wall,
                MonoTime received_mono, const ObserveOptions& options = {});

}  // namespace abide
