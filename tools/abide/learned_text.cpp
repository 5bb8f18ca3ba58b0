#include "learned_text.h"

#include <cstdio>
#include <string_view>

namespace abide::cli {

std::string learned_text(const LearnedPolicy& learned) {
  // The window as a person says it: "2 s", "1.5 s", "250 ms".
  const double s = to_seconds(learned.window);
  char window[32];
  if (s >= 1.0) {
    std::snprintf(window, sizeof window, "%.1f s", s);
    if (const std::string_view w = window; w.ends_with(".0 s")) std::snprintf(window, sizeof window, "%.0f s", s);
  } else {
    std::snprintf(window, sizeof window, "%.0f ms", s * 1000.0);
  }
  std::string t = "about " + std::to_string(learned.count) + " per " + window + ", from " +
                  std::to_string(learned.windows) + (learned.windows == 1 ? " window" : " windows");
  if (!learned.from_retry_after) t += " (limited answers without Retry-After)";
  else if (!learned.window_measured) t += " (the window's length guessed from one Retry-After)";
  return t;
}

void put_learned_json(nlohmann::ordered_json& j, const LearnedPolicy& learned) {
  j["count"] = learned.count;
  j["window_s"] = to_seconds(learned.window);
  j["window_measured"] = learned.window_measured;
  j["windows"] = learned.windows;
  j["from"] = learned.from_retry_after ? "retry-after" : "limited answers";
  j["text"] = learned_text(learned);
}

}  // namespace abide::cli
