// Built against an installed abide (find_package or pkg-config) in CI: the core
// alone, with no libcurl and no hiredis.
#include <abide/clock.h>
#include <abide/retry_after.h>
#include <abide/version.h>

#include <cstdio>
#include <string_view>

static_assert(ABIDE_VERSION == ABIDE_VERSION_MAJOR * 10000 + ABIDE_VERSION_MINOR * 100 + ABIDE_VERSION_PATCH);
static_assert(abide::version.major_number == ABIDE_VERSION_MAJOR);
static_assert(abide::version.minor_number == ABIDE_VERSION_MINOR);
static_assert(abide::version.patch_number == ABIDE_VERSION_PATCH);

int main() {
#ifdef ABIDE_CONSUMER_EXPECT_VERSION
  if (abide::version_string() != std::string_view{ABIDE_CONSUMER_EXPECT_VERSION}) {
    std::fprintf(stderr, "consumer: abide/version.h says %s, the package %s\n", ABIDE_VERSION_STRING,
                 ABIDE_CONSUMER_EXPECT_VERSION);
    return 1;
  }
#endif
  const abide::WallTime now{std::chrono::seconds{1767225600}};
  const auto hint = abide::parse_retry_after("120", now);
  if (!hint) {
    std::fprintf(stderr, "consumer: %s\n", hint.error().message().c_str());
    return 1;
  }
  const auto wait = abide::remaining(*hint, now);
  std::printf("consumer: abide %s, wait %.0f s\n", ABIDE_VERSION_STRING, abide::to_seconds(wait));
  return wait == std::chrono::seconds{120} ? 0 : 1;
}
