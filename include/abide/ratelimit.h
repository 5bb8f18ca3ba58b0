// abide/ratelimit.h: the IETF RateLimit header fields, every draft generation
// that servers still send (draft-polli-ratelimit-headers-00 to
// draft-ietf-httpapi-ratelimit-headers-11, and the provisional -12), read into
// QuotaObservation.
//
// The forms, and the `source` each observation gets (QuotaSource, abide/quota.h;
// to_string() gives the label shown here):
//   "draft-03"  RateLimit-Limit / -Remaining / -Reset where RateLimit-Limit is
//               a quota-policy list: `10, 10;w=1, 50;w=60` (polli-00 to ietf-03)
//   "draft-06"  RateLimit-Limit / -Remaining / -Reset with an Integer limit,
//               with or without `RateLimit-Policy: 100;w=10` (ietf-04 to -06,
//               and any earlier revision that sent no policy list)
//   "draft-07"  `RateLimit: limit=100, remaining=50, reset=30` (a Dictionary)
//   "draft-08"  `RateLimit-Policy: "default";q=100;w=60` with
//               `RateLimit: "default";r=50;t=30` (ietf-08 to -11, Cloudflare),
//               with `qu` quota units, `pk` partition keys, several policies;
//               policy names may be Tokens as well as Strings (issue #158)
//   "draft-12 (provisional)"  the same, where a `RateLimit` item uses any of
//               the names of the draft's open PR #166: `a` (available quota,
//               read like `r`), `w` (effective window, read like `t`; on
//               RateLimit-Policy `w` stays the policy window) and `c` (the
//               quota units the request consumed: QuotaObservation::cost).
//               Both `r` and `a` present: the smaller; both `t` and `w`: the
//               longer (each with a warning when they differ).
//               `RateLimit-Partition` (an SF List of policy names whose
//               parameters name the request dimensions a policy is
//               partitioned by) is checked, and a malformed one is ignored
//               with a warning; a valid one contributes nothing: the key it
//               describes is built from the client's own request attributes,
//               which the caller already keys its quota by, and the server's
//               `pk` stays the partition key. The -12 text was not available
//               when this was written: provisional, hence the label.
//   "draft-polli-00"  the separate fields where RateLimit-Reset is an IMF-fixdate
//
// Defensive reading: field lines of one field are combined (RFC 9110 5.3); an
// unknown parameter is ignored; a malformed field (RFC 9651 syntax, or a wrong
// type, or a negative number, or a Decimal where an Integer belongs) is
// ignored as a whole, with a warning, and the other fields are still read.
// Drafts -06 and -07 forbid two policies with the same quota value: such a
// RateLimit-Policy is read as sent, with a warning.
//
// A reset (RateLimit-Reset, `reset`, `t`, `w`) counts seconds from receipt.
// Some servers (DigitalOcean, Twitch, GitLab) send a Unix time under these
// names instead. A value of at most a year (366 days) is always a delay. A
// longer one is no plausible delay: when it is a Unix time within a year of
// the server's Date (or of the receive time when there is no Date), it is read
// as that instant (the larger of instant - receipt and instant - Date, never
// below zero: rule 3), with a warning and Confidence::kLow; otherwise (or
// when that wait would still exceed a year, a Date far ahead of the local
// clock) it is neither, and the reset is ignored with a warning
// (Confidence::kLow, the rest of the observation kept), as a malformed value
// would be: it never becomes a wait of years. So a delta reset from these
// fields is never more than a year. A vendor profile that knows its server
// sends Unix times decides for sure.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abide/clock.h"
#include "abide/headers.h"
#include "abide/quota.h"

namespace abide {

// How read_ratelimit reads.
struct RateLimitOptions {
  // Read the fields under a name prefix ("x-" for Envoy's x-ratelimit-limit,
  // "beta-" for Atlassian's Beta-RateLimit). Empty: the standard names.
  std::string_view prefix;
  // Label the observations as this vendor profile's (QuotaSource::kVendor,
  // QuotaObservation::profile) instead of with the draft form: a profile
  // reading the draft syntax under its own names. Empty: the draft form.
  std::string_view profile;
  // Skip RateLimit-Limit / -Remaining / -Reset (a vendor profile reads them).
  bool skip_separate_fields = false;
  // No longer changes what read_ratelimit reads (kept for source
  // compatibility): a reset that can only be a Unix time is always read as
  // one, with low confidence (see above). observe() still uses its own
  // `heuristic` option for vendor headers.
  bool heuristic = false;
  // The receive time and the server's Date: needed for the polli-00
  // IMF-fixdate reset and for a reset that is a Unix time.
  WallTime received{};
  std::optional<WallTime> server_date;
};

// Appends one observation per policy found in headers, and a warning for every
// field ignored or adjusted. Never fails.
void read_ratelimit(const HeaderList& headers, std::vector<QuotaObservation>& quota, std::vector<std::string>& warnings,
                    const RateLimitOptions& options = {});

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
