// One response's field index (field_index.h): the kinds of the fields abide
// reads, and the lines by name length.
#include "field_index.h"

#include <bit>
#include <cstring>

#include "always_inline.h"

namespace abide {

namespace {

// name[i, i + word.size()) equals the lower-case word ignoring case (word:
// letters and '-'; for those, c | 0x20 folds case and matches nothing else a
// field name may hold).
bool folded_at(std::string_view name, std::size_t i, std::string_view word) noexcept {
  if (i + word.size() > name.size()) return false;
  for (std::size_t k = 0; k < word.size(); ++k) {
    if ((name[i + k] | 0x20) != word[k]) return false;
  }
  return true;
}

// Is there "ratelimit" or "rate-limit" in the name? Looks for 'l' eight bytes
// at a time and checks the words around each one.
ABIDE_ALWAYS_INLINE inline bool has_ratelimit(std::string_view name) noexcept {
  auto around = [&](std::size_t i) {
    return folded_at(name, i, "limit") &&
           ((i >= 4 && folded_at(name, i - 4, "rate")) || (i >= 5 && folded_at(name, i - 5, "rate-")));
  };
  const std::size_t n = name.size();
  if constexpr (std::endian::native != std::endian::little) {
    for (std::size_t i = 0; i < n; ++i) {
      if ((name[i] | 0x20) == 'l' && around(i)) return true;
    }
    return false;
  }
  if (n < 9) return false;
  constexpr std::uint64_t kOnes = 0x0101010101010101u;
  constexpr std::uint64_t kHigh = 0x8080808080808080u;
  constexpr std::uint64_t kFold = 0x2020202020202020u;
  constexpr std::uint64_t kL = 0x6C6C6C6C6C6C6C6Cu;  // 'l'
  for (std::size_t base = 0;; base += 8) {
    if (base + 8 > n) base = n - 8;  // the last word overlaps the one before
    std::uint64_t v;
    std::memcpy(&v, name.data() + base, 8);
    const std::uint64_t x = (v | kFold) ^ kL;
    std::uint64_t hit = (x - kOnes) & ~x & kHigh;  // may over-report after a real hit: each is checked
    while (hit != 0) {
      const std::size_t i = base + static_cast<std::size_t>(std::countr_zero(hit)) / 8;
      hit &= hit - 1;
      if (around(i)) return true;
    }
    if (base + 8 == n) return false;
  }
}

static_assert(static_cast<unsigned>(FieldKind::kVendorQuota) < 32, "FieldIndex keeps the kinds present in 32 bits");

// classify_field, inlined into the index's one pass over the lines (every
// line of every response observed goes through it).
ABIDE_ALWAYS_INLINE inline FieldKind classify(std::string_view name) noexcept {
  switch (name.size()) {
    case 4: return ascii::iequals(name, "date") ? FieldKind::kDate : FieldKind::kOther;
    case 9:
      if (ascii::iequals(name, "ratelimit")) return FieldKind::kRateLimit;
      break;
    case 11:
      if (ascii::iequals(name, "retry-after")) return FieldKind::kRetryAfter;
      break;
    case 14:
      if (ascii::iequals(name, "retry-after-ms")) return FieldKind::kVendorQuota;
      break;
    case 15:
      if (ascii::iequals(name, "ratelimit-limit")) return FieldKind::kRateLimitLimit;
      if (ascii::iequals(name, "ratelimit-reset")) return FieldKind::kRateLimitReset;
      break;
    case 16:
      if (ascii::iequals(name, "ratelimit-policy")) return FieldKind::kRateLimitPolicy;
      break;
    case 17:
      if (ascii::iequals(name, "sforce-limit-info")) return FieldKind::kVendorQuota;
      break;
    case 19:
      if (ascii::iequals(name, "ratelimit-remaining")) return FieldKind::kRateLimitRemaining;
      if (ascii::iequals(name, "ratelimit-partition")) return FieldKind::kRateLimitPartition;
      if (ascii::iequals(name, "x-ms-retry-after-ms")) return FieldKind::kVendorQuota;
      break;
    case 29:
      if (ascii::iequals(name, "x-shopify-shop-api-call-limit")) return FieldKind::kVendorQuota;
      break;
    default: break;
  }
  return has_ratelimit(name) ? FieldKind::kVendorQuota : FieldKind::kOther;
}

}  // namespace

FieldKind classify_field(std::string_view name) noexcept { return classify(name); }

detail::FieldIndex::FieldIndex(const HeaderList& headers) : headers_(headers) {
  head_.fill(kNone);
  const auto& lines = headers.lines();
  const std::size_t n = lines.size() < kIndexed ? lines.size() : kIndexed;
  std::uint32_t mask = 0;
  for (std::size_t i = n; i-- > 0;) {  // backwards: chains come out in line order
    const std::string_view name = lines[i].name;
    const std::size_t b = bucket(name.size());
    next_[i] = head_[b];
    head_[b] = static_cast<std::uint8_t>(i);
    const FieldKind k = classify(name);
    kinds_[i] = static_cast<std::uint8_t>(k);
    mask |= 1u << static_cast<unsigned>(k);
  }
  if (lines.size() > kIndexed) {
    more_kinds_.reserve(lines.size() - kIndexed);
    for (std::size_t i = kIndexed; i < lines.size(); ++i) {
      const FieldKind k = classify_field(lines[i].name);
      more_kinds_.push_back(static_cast<std::uint8_t>(k));
      mask |= 1u << static_cast<unsigned>(k);
    }
  }
  mask_ = mask;
}

const Header* detail::FieldIndex::first(FieldKind k) const noexcept {
  if (!has(k)) return nullptr;
  const auto& lines = headers_.lines();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (kind(i) == k) return &lines[i];
  }
  return nullptr;
}

}  // namespace abide
