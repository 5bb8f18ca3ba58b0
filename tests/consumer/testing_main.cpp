// Built against an installed abide: abide::testing's manual clock, which tests
// of code that takes abide's clocks use instead of sleeping.
#include <abide/testing/manual_clock.h>

#include <cstdio>

int main() {
  abide::ManualClock clock;
  const abide::MonoTime start = clock.mono_now();
  clock.advance(std::chrono::seconds{90});
  const bool moved = clock.mono_now() - start == std::chrono::seconds{90};
  std::printf("consumer_testing: the manual clock %s\n", moved ? "moves when told" : "did not move");
  return moved ? 0 : 1;
}
