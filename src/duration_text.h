// Internal: durations in words for people (the planner's sentences, the CLI's
// explanations). Not installed.
#pragma once

#include <string>

#include "abide/clock.h"

namespace abide {

// A duration in seconds to the millisecond: "30 s", "2.5 s", "0.125 s";
// "forever" for kMaxDuration.
std::string format_seconds(Duration d);

}  // namespace abide
