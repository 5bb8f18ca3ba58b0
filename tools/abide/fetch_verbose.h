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

// Prints what `e` says about request e.index of `jobs`, credentials redacted.
void verbose_event(Progress& progress, const std::vector<FetchJob>& jobs, const ClientEvent& e);

}  // namespace abide::cli
