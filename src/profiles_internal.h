// Internal: the readers of vendor headers observe() uses (by a profile, or the
// opt-in heuristic), over the response's one field index, and the small
// helpers the profile sources (src/profile_*.cpp) share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abide/clock.h"
#include "abide/headers.h"
#include "abide/profiles.h"
#include "abide/quota.h"
#include "always_inline.h"
#include "ascii.h"
#include "decimal.h"
#include "field_index.h"

namespace abide::detail {

// ---- small helpers the profile sources share ----

// Digits only, at most 18 of them (so never too large for an int64); nullopt
// when empty, longer or not digits.
ABIDE_ALWAYS_INLINE inline std::optional<std::int64_t> parse_digits(std::string_view s) noexcept {
  const auto r = read_decimal<std::int64_t, std::numeric_limits<std::int64_t>::max(), 18>(s);
  if (r.digits == 0 || r.digits != s.size()) return std::nullopt;
  return r.value;
}

// s in lower case (ASCII letters only).
inline std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii::to_lower(c);
  return out;
}

// A server's value in a warning: escaped (no control bytes reach a terminal)
// and short whatever the server sent.
// (Built in place: GCC 12 at -O3 misreads `"\"" + std::string` as an
// overlapping copy, -Wrestrict.)
inline std::string shown(std::string_view v) {
  std::string s = printable(v, 64);
  s.insert(s.begin(), '"');
  s.push_back('"');
  return s;
}

// ---- what observe() needs ----

// A set of field line indices. Exact for the first 64 lines (the usual
// response); beyond them it answers "unknown" and callers fall back to a
// slower check.
class LineMask {
 public:
  static constexpr std::size_t kExact = 64;
  void set(std::size_t i) noexcept {
    if (i < kExact) bits_ |= std::uint64_t{1} << i;
  }
  bool test(std::size_t i) const noexcept { return i < kExact && ((bits_ >> i) & 1u) != 0; }
  bool any() const noexcept { return bits_ != 0; }

 private:
  std::uint64_t bits_ = 0;
};

// The quota observations, retry delay and retry verdict read from vendor
// headers, with the warnings of what was ignored.
struct VendorReading {
  std::vector<QuotaObservation> quota;
  std::optional<RetryHint> retry_delay;  // the longest valid retry-delay header, if any
  std::optional<bool> should_retry;      // the server's retry verdict, if the profile reads one
  std::string should_retry_source;       // the header that carried it
  std::vector<std::string> warnings;
};

// Reads what the profile describes (quotas, retry delays, the retry verdict),
// marking the field lines it read.
void read_vendor(const Profile& profile, const FieldIndex& index, WallTime received,
                 std::optional<WallTime> server_date, VendorReading& out, LineMask& read);

// The opt-in heuristic for a host without a profile: reads X-RateLimit-* and
// X-Rate-Limit-* (limit, remaining, used, reset) guessing the reset format from
// the value (a number above 1e9 is Unix seconds, a duration with units is a Go
// duration, a date is a date, else seconds from now), plus retry-after-ms and
// x-ms-retry-after-ms. Every observation is Confidence::kLow, QuotaSource::kHeuristic.
void read_heuristic(const FieldIndex& index, WallTime received, std::optional<WallTime> server_date,
                    VendorReading& out);

// True when a header name looks like a vendor quota header (X-RateLimit-*,
// X-Rate-Limit-*, *-ratelimit-*, retry-after-ms, Sforce-Limit-Info, ...), and
// is not one of the IETF fields.
bool looks_like_vendor_quota_header(std::string_view name) noexcept;

// registry.for_host(host), remembered per thread for the last registry
// state and host asked (the answer changes only when the registry does).
const Profile* cached_for_host(const ProfileRegistry& registry, std::string_view host);

}  // namespace abide::detail
