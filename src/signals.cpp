// One response to Signals (abide/signals.h). First version: the structure
// only; Retry-After, RateLimit fields and vendor profiles follow.
#include "abide/signals.h"

#include <algorithm>

namespace abide {

std::optional<Duration> Signals::quota_wait() const noexcept {
  std::optional<Duration> longest;
  for (const auto& q : quota) {
    if (q.confidence != Confidence::kHigh || !q.exhausted()) continue;
    if (!longest || *q.reset > *longest) longest = *q.reset;
  }
  return longest;
}

Signals observe(int status, const HeaderList& headers, WallTime received_wall, MonoTime received_mono,
                const ObserveOptions& options) {
  (void)headers;
  (void)options;
  Signals s;
  s.status = status;
  s.received_wall = received_wall;
  s.received_mono = received_mono;
  s.limited = status == 429;
  return s;
}

}  // namespace abide
