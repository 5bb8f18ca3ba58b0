// What a key learned from its limited answers, in words and as JSON: `fetch
// -v`, its --stats and `explain --history` say it alike.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "abide/quota_store.h"

namespace abide::cli {

// "about 20 per 2 s, from 3 windows", and how the window was found where that
// is less than measured.
std::string learned_text(const LearnedPolicy& learned);

// Adds the fields "count", "window_s", "window_measured", "windows", "from"
// ("retry-after" or "limited answers") and "text" (learned_text) to `j`.
void put_learned_json(nlohmann::ordered_json& j, const LearnedPolicy& learned);

}  // namespace abide::cli
