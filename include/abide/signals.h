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
  // The server's clock at receipt as far as known: a learned floor
  // (ObserveOptions::server_time_floor) when it lies within the second that
  // Date names, else absent (the Date itself is then the best bound).
  std::optional<WallTime> server_time_floor;
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

  // The longest `reset` among exhausted quota observations of high confidence
  // (a full-refill reset counts as its reset here; permitted_wait() does not
  // wait for it). Nullopt when no quota is exhausted.
  std::optional<Duration> quota_wait() const noexcept;
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
  std::optional<Duration> wait;         // the longest of the two parts below: the server hint
  std::optional<Duration> retry_after;  // Retry-After's part
  std::optional<Duration> quota;        // the longest wait among exhausted quotas
  std::optional<std::size_t> quota_index;  // which Signals::quota entry gave it
  bool skew_lengthened = false;         // the server's clock (behind ours) lengthened a Retry-After date
  bool retry_after_in_past = false;     // a Retry-After date at or before receipt
  bool full_refill = false;             // an exhausted quota's full-refill reset was not waited for in full
  bool zero_without_reset = false;      // a quota at zero without a reset (no bound)
  bool low_confidence_ignored = false;  // an exhausted low-confidence quota was not used
  bool room_left = false;               // some quota reported room left
};
PermittedWait permitted_wait(const Signals& s, bool use_low_confidence = false) noexcept;

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

// What one origin's server clock reads, learned from the Date of many responses.
//
// A Date names a whole second, rounded down, so one response alone says only
// that the server's clock was at most a second ahead of it; taken alone (rule 3)
// that costs up to a second on every wait for a server's time. Against the
// monotonic clock, the server's time at any response is at least
// `Date_i + (mono - mono_i)` and below `Date_i + 1 s + (mono - mono_i)` (plus
// the time answer i took) for every earlier response i, so the best of many is
// close to the truth. Both bounds allow for 100 ppm of drift between the two
// clocks.
//
// An origin may be several servers behind a load balancer, whose clocks differ
// by a fraction of a second: a floor learned from the fastest would make a
// slower one's dates early. A Date outside the bounds (its second ends at or
// before the floor, or begins at or after the ceiling) shows that. The first
// such Date off by a second or more is taken as the server's clock having been
// set (it starts afresh from that Date); any other contradiction means several
// clocks, and the origin's floor is no longer used (floor_at() is nullopt from
// then on): each answer is then read by its own Date alone, never early.
// Until a contradiction shows, clocks that differ by less than a second cannot
// be told from one, so the floor is trusted only once 16 Dates agreed with it
// (trusted_floor_at(), what observe() is given): a second clock shows in each
// of its answers with a probability of about its difference. Thread-safe.
class ServerClock {
 public:
  // Learns from one response (its Date and monotonic receive time); ignores one
  // without Date. `sent`: when its request was sent, if known; the Date was
  // written between the two, so without it a slow answer can look like a
  // second clock (the floor is then given up, never made early).
  void learn(const Signals& s, std::optional<MonoTime> sent = std::nullopt) noexcept;
  // A lower bound of the server's clock at monotonic time `at`; nullopt before
  // any Date, and once the origin has shown several clocks.
  std::optional<WallTime> floor_at(MonoTime at) const noexcept;
  // floor_at() once enough Dates agreed with it, else nullopt: the floor to
  // pass to observe() (ObserveOptions::server_time_floor).
  std::optional<WallTime> trusted_floor_at(MonoTime at) const noexcept;
  // True once Dates showed more than one clock (or a clock set twice).
  bool several_clocks() const noexcept;

 private:
  mutable std::mutex mu_;
  bool known_ = false;
  bool several_ = false;  // Dates contradicted the bounds: the floor is not used
  bool reset_once_ = false;  // the bounds were started afresh once (a clock set)
  int agreed_ = 0;           // Dates that agreed with the bounds since they started (capped)
  Duration low_{};      // server wall time - monotonic time, at its best lower-bound sample
  MonoTime low_at_{};   // when that sample was received
  Duration high_{};     // ... exclusive upper bound, at its best sample
  MonoTime high_at_{};
  Duration low_locked(MonoTime at) const noexcept;
  Duration high_locked(MonoTime at) const noexcept;
};

// Reads one response. Never fails; problems become warnings. `status` decides
// `limited` only; every field is read on every status. Thread-safe (the
// built-in registry is loaded once, on first use).
Signals observe(int status, const HeaderList& headers, WallTime received_wall,
                MonoTime received_mono, const ObserveOptions& options = {});

}  // namespace abide
