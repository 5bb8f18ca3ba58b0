// Reads a server's Retry-After the way abide does: exactly, in every form, and
// never turning garbage into "retry now".
#include <abide/clock.h>
#include <abide/http_date.h>
#include <abide/retry_after.h>

#include <cstdio>
#include <string_view>

int main() {
  const abide::WallTime received = abide::system_wall_clock().now();
  for (std::string_view value : {"120", "Sun, 06 Nov 1994 08:49:37 GMT", "2.5", "soon"}) {
    const auto hint = abide::parse_retry_after(value, received, abide::ParseMode::kRobust);
    if (!hint) {
      // Malformed is not zero: the caller falls back to its own backoff.
      std::printf("%-32.*s rejected: %s\n", static_cast<int>(value.size()), value.data(),
                  hint.error().message().c_str());
      continue;
    }
    const abide::Duration wait = abide::remaining(*hint, received);
    std::printf("%-32.*s wait %.0f s%s\n", static_cast<int>(value.size()), value.data(), abide::to_seconds(wait),
                hint->rounded_up ? " (fraction rounded up)" : "");
  }
}
