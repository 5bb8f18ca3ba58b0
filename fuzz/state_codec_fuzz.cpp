// The file store's reader of a key's state (pacing/state_codec.h) on
// arbitrary bytes, as a damaged or hostile quota file holds them: it never
// crashes, and a blob it accepts in the current format is exactly what
// encoding its state gives back (one layout, no second reading of the same
// bytes); one of the older format (nanoseconds) encodes to a blob that reads
// back as the same state; and every state is one the kernel can run on.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "pacing/kernel.h"
#include "pacing/state_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto state = abide::pacing::decode(bytes);
  if (!state) {
    if (state.error().empty()) std::abort();  // a refusal always says why
    return 0;
  }
  const std::string again = abide::pacing::encode(*state);
  const bool current = !bytes.empty() && static_cast<std::uint8_t>(bytes[0]) == abide::pacing::kStateFormat;
  const auto back = abide::pacing::decode(again);
  if ((current && again != bytes) || !back || abide::pacing::encode(*back) != again) {
    std::fprintf(stderr, "state codec: an accepted blob does not encode back to itself\n");
    std::abort();
  }
  const abide::MonoTime now{std::chrono::hours{1000}};
  const abide::PacingRules rules;
  (void)abide::pacing::acquire(*state, now, abide::kMaxDuration, rules);
  abide::StoreRecord r;
  r.now = now;
  r.cooldown = std::chrono::seconds{1};
  (void)abide::pacing::record(*state, r, rules);
  (void)abide::pacing::expiry(*state);
  return 0;
}
