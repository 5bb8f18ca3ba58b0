// Internal: a wait stated in the body of a limited answer, where some APIs
// put it instead of (or beside) Retry-After: Gemini's and Vertex AI's
// google.rpc.RetryInfo, and the "Please try again in 1.5s" of OpenAI's and
// Anthropic's error messages. A profile names which readers apply
// (Profile::body_hints). A pure reader over bytes. Not installed.
//
// What cannot be read is never "now" (rule 2): garbage, a negative value, NaN
// and overflow give no hint at all; a fraction is rounded up, never down; a
// wait is capped at kMaxBodyHintWait.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "abide/clock.h"
#include "abide/profiles.h"
#include "abide/signals.h"

namespace abide::detail {

// Bodies longer than this are not read (error bodies are small).
inline constexpr std::size_t kMaxBodyHintBytes = 256 * 1024;
// The longest wait a body may state; a longer one is cut to it (a day is
// longer than any quota window these APIs use but a daily one).
inline constexpr Duration kMaxBodyHintWait = std::chrono::hours{24};

struct BodyHint {
  Duration wait{};     // from receipt of the answer, 0 .. kMaxBodyHintWait
  std::string source;  // e.g. `body: error.details[].retryDelay "52s"`; printable ASCII, at most 100 bytes
};

// The wait the body states, trying `kinds` in the order given; the first kind
// that reads a wait decides (the longest of its readings when it finds several).
[[nodiscard]] std::optional<BodyHint> read_body_hint(std::span<const BodyHintKind> kinds, std::string_view body);

// Reads a limited answer's body for its wait (read_body_hint) and merges it
// into the answer's signals as their retry delay: the API's structured field
// (Gemini's RetryInfo) where no header gave a wait or where it asks for
// longer; a sentence of an error message only where no header gave any (it
// never shortens one). True when the body's wait is now the one planned on.
bool apply_body_hint(std::span<const BodyHintKind> kinds, std::string_view body, Signals& s);

}  // namespace abide::detail
