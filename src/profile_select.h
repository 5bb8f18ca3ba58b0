// Internal: which vendor profile a request's answers are read with, chosen
// one way for observe() (signals.cpp) and for what the engine prices before
// sending (engine.cpp). Not installed.
#pragma once

#include "abide/profiles.h"
#include "abide/signals.h"

namespace abide::detail {

// The profile `options` select: by name ("none": none), else by host; nullptr
// when none does (a name no profile has, too).
const Profile* selected_profile(const ObserveOptions& options);

}  // namespace abide::detail
