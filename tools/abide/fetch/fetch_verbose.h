// `abide fetch --verbose`: one line per thing that happened, on stderr.
#pragma once

#include <string>
#include <vector>

#include "abide/client.h"
#include "fetch/fetch_jobs.h"
#include "fetch/fetch_progress.h"
#include "learned_text.h"

namespace abide::cli {

// "1.25 s".
std::string fmt_seconds(Duration d);

// Prints what `e` says about its request, `job`, credentials redacted.
void verbose_event(Progress& progress, const FetchJob& job, const ClientEvent& e);

}  // namespace abide::cli
