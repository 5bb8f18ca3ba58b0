// Durations in words for people (src/duration_text.h).
#include "duration_text.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace abide {

std::string format_seconds(Duration d) {
  if (d == Duration::max()) return "forever";
  char buf[64];
  const bool neg = d < Duration::zero();
  const std::uint64_t ns = neg ? static_cast<std::uint64_t>(-(d.count() + 1)) + 1
                               : static_cast<std::uint64_t>(d.count());
  const std::uint64_t whole = ns / 1'000'000'000u;
  const std::uint64_t ms = (ns % 1'000'000'000u) / 1'000'000u;
  int n = 0;
  if (ms == 0) {
    n = std::snprintf(buf, sizeof buf, "%s%" PRIu64 " s", neg ? "-" : "", whole);
  } else {
    n = std::snprintf(buf, sizeof buf, "%s%" PRIu64 ".%03" PRIu64, neg ? "-" : "", whole, ms);
    while (n > 0 && buf[n - 1] == '0') --n;
    buf[n] = '\0';
    n = std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), " s") + n;
  }
  return std::string(buf, static_cast<std::size_t>(std::max(n, 0)));
}

}  // namespace abide
