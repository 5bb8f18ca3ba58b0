// abide/signals.h: everything one response says about waiting and quota, in
// one normalized, trustworthy view (docs/RULES.md rules 1, 2, 3 and 8).
//
// observe() reads the status and header lines of a response together with the
// times it was received, and returns Signals: the Retry-After (from whichever
// header carried it), quota observations from the IETF RateLimit fields of every
// draft generation and from the vendor profile of the API that sent them, the
// server Date and the clock skew it implies, and every warning. It never fails:
// a malformed field is ignored with a warning, and the rest is still read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abide/clock.h"
#include "abide/headers.h"
#include "abide/quota.h"
#include "abide/server_clock.h"

namespace abide {

class ProfileRegistry;  // abide/profiles.h
struct Profile;         // abide/profiles.h

// What one response says.
struct Signals {
  int status = 0;
  WallTime received_wall{};
  MonoTime received_mono{};

  std::optional<RetryHint> retry_after;  // absent, or rejected (see retry_after_rejected)
  bool retry_after_rejected = false;     // a Retry-After was present but malformed
  std::vector<QuotaObservation> quota;   // in order of trust: IETF fields first
  std::optional<WallTime> server_date;   // a valid Date field
  // The server's clock at receipt as far as known: a learned floor
  // (ObserveOptions::server_time_floor) when it lies within the second that
  // Date names, else absent (the Date itself is then the best bound).
  std::optional<WallTime> server_time_floor;
  std::optional<Duration> clock_skew;  // server Date - local receive time
  std::string profile;                 // the vendor profile used, empty if none
  bool limited = false;                // the status means "rate limited" (429, or per profile)
  // Limited, and the profile cites the vendor's word that a limited answer
  // processed nothing: the request may be repeated whatever its method (rule 7).
  bool unprocessed = false;
  std::vector<Header> uninterpreted;   // vendor-style quota headers seen but not read (no profile)
  // The server's own verdict on retrying this request (Stripe-Should-Retry,
  // x-should-retry, per profile), when it gave one. false: do not retry; true
  // grants no permission to repeat a non-idempotent request (rule 7).
  std::optional<bool> should_retry;
  std::string should_retry_source;    // the header that carried the verdict
  std::vector<std::string> warnings;  // every field ignored or adjusted, and why
  // The quota observation that restricts the client most (see
  // abide::most_restrictive in ratelimit.h), or nullptr when there is none.
  const QuotaObservation* most_restrictive() const noexcept;
};

// When one answer permits the next request, from receipt: the one computation
// that the planner (its server hint) and the pacer (its cooldown) both use, so
// the two never disagree about an answer.
//
// - Retry-After (or the vendor retry delay that replaced it): for a date, the
//   larger of (date - local receipt) and (date - the server's clock at
//   receipt), rule 3. The server's clock at receipt is its Date, raised to a
//   learned floor only while that floor lies within the second the Date names:
//   a floor can never make the answer earlier than its own Date allows.
// - Every exhausted quota (remaining <= 0 with a reset): its reset. A reset
//   that counts to a full refill (QuotaObservation::reset_is_full_refill) is
//   not the next permitted time: with a server retry delay the delay decides;
//   without one the bound is the time the units the next request needs take to
//   refill (reset x needed / limit, never longer than the reset; the reset
//   itself when the limit is unknown, since the refill rate is then unknown).
//
// Low-confidence quotas count only with `use_low_confidence`. Never fails,
// allocates nothing; every duration is >= 0.
struct PermittedWait {
  std::optional<Duration> wait;            // the longest of the two parts below: the server hint
  std::optional<Duration> retry_after;     // Retry-After's part
  std::optional<Duration> quota;           // the longest wait among exhausted quotas
  std::optional<std::size_t> quota_index;  // which Signals::quota entry gave it
  bool skew_lengthened = false;            // the server's clock (behind ours) lengthened a Retry-After date
  bool retry_after_in_past = false;        // a Retry-After date at or before receipt
  bool full_refill = false;                // an exhausted quota's full-refill reset was not waited for in full
  bool zero_without_reset = false;         // a quota at zero without a reset (no bound)
  bool low_confidence_ignored = false;     // an exhausted low-confidence quota was not used
  bool room_left = false;                  // some quota reported room left
};
PermittedWait permitted_wait(const Signals& s, bool use_low_confidence = false) noexcept;

// How observe() reads a response.
struct ObserveOptions {
  std::string_view host;                      // selects a vendor profile by host (exact or suffix)
  std::string_view profile;                   // selects one by name; "none" disables profiles
  const ProfileRegistry* registry = nullptr;  // nullptr: the built-in profiles
  bool robust = true;                         // accept unambiguous deviations that only lengthen waits
  bool heuristic = false;                     // interpret vendor-style headers without a profile (low confidence)
  // A lower bound of the server's clock at receipt, learned from earlier
  // responses (ServerClock::floor_at). Used only with this response's Date, and
  // only within the second that Date names: it tightens rule 3, never loosens it.
  std::optional<WallTime> server_time_floor;
};

// Reads one response. Never fails; problems become warnings. `status` decides
// `limited` only; every field is read on every status. Thread-safe (the
// built-in registry is loaded once, on first use).
Signals observe(int status, const HeaderList& headers, WallTime received_wall, MonoTime received_mono,
                const ObserveOptions& options = {});

}  // namespace abide
