// What a key learned from its limited answers, in words: `fetch -v`, its
// --stats and `explain --history` say it alike.
#pragma once

#include <string>

#include "abide/quota_store.h"

namespace abide::cli {

// "about 20 per 2 s, from 3 windows", and how the window was found where that
// is less than measured.
std::string learned_text(const LearnedPolicy& learned);

}  // namespace abide::cli
