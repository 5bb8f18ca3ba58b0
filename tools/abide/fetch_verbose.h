// `abide fetch --verbose`: one line per thing that happened, on stderr.
#pragma once

#include <string>
#include <vector>

#include "abide/client.h"
#include "fetch_jobs.h"
#include "fetch_progress.h"

namespace abide::cli {

// "1.25 s".
std::string fmt_seconds(Duration d);

// What a key learned from its limited answers: "about 20 per 2 s, from 3
// windows", and how the window was found where that is less than measured.
std::string learned_text(const LearnedPolicy& learned);

// Prints what `e` says about its request, `job`, credentials redacted.
void verbose_event(Progress& progress, const FetchJob& job, const ClientEvent& e);

}  // namespace abide::cli
