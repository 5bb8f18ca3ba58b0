// Signals, quota observations and retry hints as JSON, in the shape docs/RULES.md
// gives for `abide parse ratelimit` (and reused by `abide explain`).
//
//   {"quota": [Q...], "retry_after": R or null, "clock_skew_s": X or null,
//    "should_retry": true | false | null, "warnings": [..]}
//
//   Q = {"policy", "limit", "remaining", "window_s", "reset_s", "unit",
//        "partition_key", "source", "confidence", "cost", "reset_is_full_refill"}
//       null where unknown (also "policy" when the form has no name); reset_s
//       counts from receipt; confidence "high" or "low"; cost: the quota
//       units the request consumed (integer or null); reset_is_full_refill:
//       the reset counts to a full refill, not to the next permitted request.
//       A partition key is printed as is when it is printable ASCII, else as
//       an RFC 9651 byte sequence (":base64:"). Policy, unit and source come
//       from the server or a profile and pass through abide::printable().
//   should_retry: the server's own retry verdict (Stripe-Should-Retry,
//       x-should-retry, per profile), null when it gave none.
//   R = {"kind": "delay" | "date", "seconds": S, "unix": N or null, "source": H}
//       seconds: from receipt until the earliest permitted retry (for a date,
//       the larger of date - receive time and date - server Date, never < 0);
//       unix: the date's instant in Unix seconds (null for a delay); source:
//       the header that carried it ("retry-after", "retry-after-ms", ...).
//
// Durations are numbers of seconds: an integer when whole, else a decimal.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <span>

#include "abide/clock.h"
#include "abide/signals.h"

namespace abide::cli {

// A duration in seconds: 30 or 2.5.
nlohmann::ordered_json seconds_json(Duration d);
// One quota observation (Q above).
nlohmann::ordered_json quota_json(const QuotaObservation& q);
// A list of observations.
nlohmann::ordered_json quota_list_json(std::span<const QuotaObservation> quota);
// The retry hint (R above), or null.
nlohmann::ordered_json retry_hint_json(const std::optional<RetryHint>& hint);
// The server's retry verdict: true, false or null.
nlohmann::ordered_json should_retry_json(const Signals& s);
// The whole `parse ratelimit` object. extra_warnings come first (for example
// those of the response head reader).
nlohmann::ordered_json signals_json(const Signals& s, std::span<const std::string> extra_warnings = {});

}  // namespace abide::cli
