// Internal: what observe() needs from the profiles module beyond the public
// API, to keep one response's reading to a few passes over its field lines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "abide/clock.h"
#include "abide/headers.h"
#include "abide/profiles.h"
#include "line_index.h"

namespace abide::detail {

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

// read_vendor, also marking the field lines it read.
void read_vendor(const Profile& profile, const LineIndex& headers, WallTime received,
                 std::optional<WallTime> server_date, VendorReading& out, LineMask& read);

// registry.for_host(host), remembered per thread for the last registry
// state and host asked (the answer changes only when the registry does).
const Profile* cached_for_host(const ProfileRegistry& registry, std::string_view host);

}  // namespace abide::detail
