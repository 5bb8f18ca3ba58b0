// Internal: one response's field lines as the readers see them, indexed once
// per response (observe() builds it and hands it to every reader; a public
// reader called on its own builds its own). For each line its kind (the
// fields abide reads, recognised by name), the set of kinds present, and the
// lines by name length, so that reading a response neither compares names
// again and again nor scans every line per lookup. Not installed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "abide/headers.h"
#include "ascii.h"

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

// The index of one HeaderList, which must outlive it. One pass, no allocation
// for up to kIndexed lines. Lookups by name are exact for the first kIndexed
// lines through the name-length buckets; lines beyond are scanned one by one.
// Every line's kind is known, however many there are.
class FieldIndex {
 public:
  static constexpr std::size_t kIndexed = 255;
  static constexpr std::size_t kBuckets = 64;  // names of 63 bytes and more share the last one
  static constexpr std::uint8_t kNone = 0xFF;

  explicit FieldIndex(const HeaderList& headers);
  FieldIndex(const FieldIndex&) = delete;
  FieldIndex& operator=(const FieldIndex&) = delete;

  const HeaderList& headers() const noexcept { return headers_; }
  const std::vector<Header>& lines() const noexcept { return headers_.lines(); }

  // The kind of line i (i < lines().size()).
  FieldKind kind(std::size_t i) const noexcept {
    return static_cast<FieldKind>(i < kIndexed ? kinds_[i] : more_kinds_[i - kIndexed]);
  }
  // True when some line has this kind.
  bool has(FieldKind k) const noexcept { return ((mask_ >> static_cast<unsigned>(k)) & 1u) != 0; }

  // Calls f(index, header) for every line named `name` (any case), in order;
  // stops early when f returns false.
  template <class F>
  void for_each(std::string_view name, F&& f) const {
    const auto& lines = headers_.lines();
    for (std::uint8_t i = head_[bucket(name.size())]; i != kNone; i = next_[i]) {
      if (ascii::iequals(lines[i].name, name) && !f(std::size_t{i}, lines[i])) return;
    }
    for (std::size_t i = kIndexed; i < lines.size(); ++i) {
      if (ascii::iequals(lines[i].name, name) && !f(i, lines[i])) return;
    }
  }

  // The first line named `name`, or nullptr.
  const Header* first(std::string_view name) const noexcept {
    const Header* found = nullptr;
    for_each(name, [&](std::size_t, const Header& h) {
      found = &h;
      return false;
    });
    return found;
  }

  // The first line of kind k, or nullptr.
  const Header* first(FieldKind k) const noexcept;

 private:
  static std::size_t bucket(std::size_t size) noexcept { return size < kBuckets ? size : kBuckets - 1; }

  const HeaderList& headers_;
  std::uint32_t mask_ = 0;                    // bit k: some line has kind k
  std::array<std::uint8_t, kBuckets> head_;   // filled by the constructor
  std::array<std::uint8_t, kIndexed> next_;   // only entries of indexed lines are ever read
  std::array<std::uint8_t, kIndexed> kinds_;  // the first kIndexed lines' kinds
  std::vector<std::uint8_t> more_kinds_;      // the kinds of the lines beyond (rare: empty)
};

}  // namespace detail
}  // namespace abide
