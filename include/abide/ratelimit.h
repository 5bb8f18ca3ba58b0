// abide/ratelimit.h: the IETF RateLimit header fields, every draft generation
// that servers still send (draft-polli-ratelimit-headers-00 to
// draft-ietf-httpapi-ratelimit-headers-11), read into QuotaObservation.
//
// The forms, and the `source` each observation gets:
//   "draft-03"  RateLimit-Limit / -Remaining / -Reset where RateLimit-Limit is
//               a quota-policy list: `10, 10;w=1, 50;w=60` (polli-00 to ietf-03)
//   "draft-06"  RateLimit-Limit / -Remaining / -Reset with an Integer limit,
//               with or without `RateLimit-Policy: 100;w=10` (ietf-04 to -06,
//               and any earlier revision that sent no policy list)
//   "draft-07"  `RateLimit: limit=100, remaining=50, reset=30` (a Dictionary)
//   "draft-08"  `RateLimit-Policy: "default";q=100;w=60` with
//               `RateLimit: "default";r=50;t=30` (ietf-08 to -11, Cloudflare),
//               with `qu` quota units, `pk` partition keys, several policies
//   "draft-polli-00"  the separate fields where RateLimit-Reset is an IMF-fixdate
//
// Defensive reading: field lines of one field are combined (RFC 9110 5.3); an
// unknown parameter is ignored; a malformed field (RFC 9651 syntax, or a wrong
// type, or a negative number) is ignored as a whole, with a warning, and the
// other fields are still read. reset / `t` always count seconds from receipt,
// never a timestamp; a reset that looks like a Unix timestamp (GitLab sends
// those under the same name) is still read as seconds, with a warning, unless
// the caller opts into the heuristic (then: a timestamp, Confidence::kLow).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abide/clock.h"
#include "abide/headers.h"
#include "abide/signals.h"

namespace abide {

inline constexpr std::string_view kSourceDraft03 = "draft-03";
inline constexpr std::string_view kSourceDraft06 = "draft-06";
inline constexpr std::string_view kSourceDraft07 = "draft-07";
inline constexpr std::string_view kSourceDraft08 = "draft-08";
inline constexpr std::string_view kSourceDraftPolli00 = "draft-polli-00";

// How read_ratelimit reads.
struct RateLimitOptions {
  // Read the fields under a name prefix ("x-" for Envoy's x-ratelimit-limit,
  // "beta-" for Atlassian's Beta-RateLimit). Empty: the standard names.
  std::string_view prefix;
  // Label the observations with this source instead of the draft form (a
  // vendor profile reading the draft syntax under its own names).
  std::string_view source;
  // Skip RateLimit-Limit / -Remaining / -Reset (a vendor profile reads them).
  bool skip_separate_fields = false;
  // Read a reset that looks like a Unix timestamp as one (Confidence::kLow).
  bool heuristic = false;
  // Needed only for the polli-00 IMF-fixdate reset and the heuristic.
  WallTime received{};
  std::optional<WallTime> server_date;
};

// Appends one observation per policy found in headers, and a warning for every
// field ignored or adjusted. Never fails.
void read_ratelimit(const HeaderList& headers, std::vector<QuotaObservation>& quota,
                    std::vector<std::string>& warnings, const RateLimitOptions& options = {});

// The same, returning a fresh result.
struct RateLimitReading {
  std::vector<QuotaObservation> quota;
  std::vector<std::string> warnings;
};
RateLimitReading read_ratelimit(const HeaderList& headers, const RateLimitOptions& options = {});

// Which of several observations restricts the client most, by index; nullopt
// for an empty span. Order: an exhausted quota (remaining <= 0) first, the one
// with the longest reset winning; then the largest spacing a pacer would need
// to make the remaining quota last (time to reset, else the window, divided by
// remaining); then, without any time, the smallest remaining share of the
// limit; then the smallest remaining. Low-confidence observations count only
// when there is no high-confidence one. Ties: the earlier observation (trust order).
std::optional<std::size_t> most_restrictive(std::span<const QuotaObservation> quota) noexcept;

}  // namespace abide
