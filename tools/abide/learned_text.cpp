#include "learned_text.h"

#include <cstdio>
#include <string_view>

namespace abide::cli {

std::string learned_text(const LearnedPolicy& learned) {
  // The window as a person says it: "2 s", "1.5 s", "250 ms"; none yet while
  // bare 429s' first search looks for the window's end.
  std::string window = "window (its length not found yet)";
  if (learned.window > Duration::zero()) {
    const double s = to_seconds(learned.window);
    char text[32];
    if (s >= 1.0) {
      std::snprintf(text, sizeof text, "%.1f s", s);
      if (const std::string_view w = text; w.ends_with(".0 s")) std::snprintf(text, sizeof text, "%.0f s", s);
    } else {
      std::snprintf(text, sizeof text, "%.0f ms", s * 1000.0);
    }
    window = text;
  }
  std::string t = "about " + std::to_string(learned.count) + " per " + window + ", from " +
                  std::to_string(learned.windows) + (learned.windows == 1 ? " window" : " windows");
  if (!learned.from_retry_after) t += " (limited answers without Retry-After)";
  else if (!learned.window_measured) t += " (the window's length guessed from one Retry-After)";
  return t;
}

void put_learned_json(nlohmann::ordered_json& j, const LearnedPolicy& learned) {
  j["count"] = learned.count;
  j["window_s"] = learned.window > Duration::zero() ? nlohmann::ordered_json(to_seconds(learned.window)) : nullptr;
  j["window_measured"] = learned.window_measured;
  j["windows"] = learned.windows;
  j["from"] = learned.from_retry_after ? "retry-after" : "limited answers";
  j["text"] = learned_text(learned);
}

}  // namespace abide::cli
