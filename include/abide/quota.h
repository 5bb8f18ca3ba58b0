// abide/quota.h: the quota model, the types that every reader of a response
// fills (the IETF RateLimit fields in ratelimit.h, vendor profiles in
// profiles.h) and that observe() (signals.h), the planner and the pacer read.
//
// It sits below every reader: it includes nothing of abide but clock.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "abide/clock.h"

namespace abide {

// How much a quota observation can be trusted.
enum class Confidence {
  kHigh,  // a standard field, or a vendor header read through that vendor's profile
  kLow,   // a vendor-style header interpreted by the opt-in heuristic
};

// Where a quota observation came from. The IETF forms are the draft
// generations ratelimit.h reads (see there for what each one looks like).
enum class QuotaSource : std::uint8_t {
  kUnknown,             // "": not stated (an observation built by hand)
  kDraft03,             // "draft-03": RateLimit-Limit as a quota-policy list
  kDraft06,             // "draft-06": the separate fields with an Integer limit
  kDraft07,             // "draft-07": RateLimit as a Dictionary
  kDraft08,             // "draft-08": RateLimit-Policy with named RateLimit items
  kDraft12Provisional,  // "draft-12 (provisional)": draft-08 with the names of the open PR #166
  kDraftPolli00,        // "draft-polli-00": RateLimit-Reset as an IMF-fixdate
  kVendor,              // a vendor profile; QuotaObservation::profile names it
  kHeuristic,           // "heuristic": vendor-style headers read without a profile (low confidence)
};

// The label outputs show (CLI, JSON, explain): "draft-08", "heuristic", ...;
// "vendor" for kVendor, whose observations show their profile's name instead
// (QuotaObservation::source_name()); "" for kUnknown.
std::string_view to_string(QuotaSource s) noexcept;

// True for the IETF RateLimit forms (every draft generation): the planner's
// Basis::kRateLimit, as opposed to a vendor's quota.
constexpr bool is_ietf_draft(QuotaSource s) noexcept {
  switch (s) {
    case QuotaSource::kDraft03:
    case QuotaSource::kDraft06:
    case QuotaSource::kDraft07:
    case QuotaSource::kDraft08:
    case QuotaSource::kDraft12Provisional:
    case QuotaSource::kDraftPolli00: return true;
    case QuotaSource::kUnknown:
    case QuotaSource::kVendor:
    case QuotaSource::kHeuristic: return false;
  }
  return false;
}

// One quota policy as a response described it, normalized. An aggregate:
// designated initialisers name what they set.
struct QuotaObservation {
  std::string policy;                          // policy name; empty when the form has none
  std::optional<std::int64_t> limit;           // quota units per window
  std::optional<std::int64_t> remaining;       // quota units left
  std::optional<Duration> window;              // the policy's window
  std::optional<Duration> reset;               // from receipt until the quota resets (>= 0)
  Duration reset_resolution{};                 // the step reset was stated in (1 s: whole seconds); 0: exact
  std::string unit = "requests";               // quota unit (requests, content-bytes, tokens, ...)
  std::optional<std::string> partition_key;    // raw bytes of `pk`, or a vendor scope/bucket
  QuotaSource source = QuotaSource::kUnknown;  // the IETF draft form, a vendor profile, the heuristic
  std::string profile;                         // for QuotaSource::kVendor: the profile's name ("github")
  Confidence confidence = Confidence::kHigh;
  // Quota units the request that got this answer consumed (the provisional draft-12 `c`).
  std::optional<std::int64_t> cost;
  // The reset counts to a full refill of the quota (OpenAI's x-ratelimit-reset-*),
  // not to the next permitted request: it does not bound the wait as a reset would.
  bool reset_is_full_refill = false;

  // True when the observation says nothing may be sent before `reset`.
  bool exhausted() const noexcept { return remaining && *remaining <= 0 && reset.has_value(); }
  // Where it came from, as outputs show it: the profile's name for a vendor
  // quota, else to_string(source).
  std::string_view source_name() const noexcept {
    return source == QuotaSource::kVendor ? std::string_view(profile) : to_string(source);
  }
};

// An amount of one quota unit other than requests ("tokens", 1200): what a
// request needs before it is sent (an estimate, or the caller's own word), or
// what its answer says it used. Units are named as quotas name them
// (QuotaObservation::unit): "tokens", "input-tokens", "output-tokens",
// "content-bytes". A request always needs one unit of each request quota.
struct UnitCost {
  std::string unit;
  std::int64_t amount = 0;  // >= 0

  friend bool operator==(const UnitCost&, const UnitCost&) = default;
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
