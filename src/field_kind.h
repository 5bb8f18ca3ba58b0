// Internal: the fields abide reads, recognised by name, and the kind that
// HeaderList gives each of its lines as it is added, so that reading a
// response does not compare names again and again. Not installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "abide/headers.h"

namespace abide {

enum class FieldKind : std::uint8_t {
  kOther,
  kDate,
  kRetryAfter,
  kRateLimit,           // RateLimit
  kRateLimitPolicy,     // RateLimit-Policy
  kRateLimitLimit,      // RateLimit-Limit
  kRateLimitRemaining,  // RateLimit-Remaining
  kRateLimitReset,      // RateLimit-Reset
  kRateLimitPartition,  // RateLimit-Partition (provisional draft-12): read with the fields above,
                        // never reported as a vendor header
  kVendorQuota,         // a vendor-style quota header: *ratelimit* / *rate-limit* other than the
                        // above, retry-after-ms, x-ms-retry-after-ms,
                        // x-shopify-shop-api-call-limit, sforce-limit-info
};

// The kind of a field name (any case).
FieldKind classify_field(std::string_view name) noexcept;

namespace detail {

// The kinds HeaderList keeps beside its lines (HeaderList befriends this).
struct HeaderKinds {
  // The kind of line i (i < headers.size()).
  static FieldKind at(const HeaderList& headers, std::size_t i) noexcept {
    return static_cast<FieldKind>(headers.kinds_[i]);
  }
  // True when some line has this kind.
  static bool has(const HeaderList& headers, FieldKind k) noexcept {
    return ((headers.kind_mask_ >> static_cast<unsigned>(k)) & 1u) != 0;
  }
};

}  // namespace detail
}  // namespace abide
