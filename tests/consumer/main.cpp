// Built against an installed abide (find_package or pkg-config) in CI.
#include <abide/clock.h>
#include <abide/retry_after.h>

#include <cstdio>

int main() {
  const abide::ManualClock clock;
  const auto hint = abide::parse_retry_after("120", clock.wall_now());
  if (!hint) {
    std::fprintf(stderr, "consumer: %s\n", hint.error().message().c_str());
    return 1;
  }
  const auto wait = abide::remaining(*hint, clock.wall_now());
  std::printf("consumer: wait %.0f s\n", abide::to_seconds(wait));
  return wait == std::chrono::seconds{120} ? 0 : 1;
}
