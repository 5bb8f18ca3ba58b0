// `abide fetch`: the requests of a run, from its options: the method, the
// headers and the body every request sends, and one FetchJob per URL.
#pragma once

#include <string>
#include <vector>

#include "abide/headers.h"
#include "abide/result.h"
#include "fetch_jobs.h"
#include "fetch_options.h"

namespace abide::cli {

// Why the requests cannot be made: the exit status (kExitUsage for a bad
// flag, kExitRejected for an input that cannot be read) and one line to say.
struct FetchError {
  int exit_code = 0;
  std::string message;  // without the "abide fetch: " prefix
};

// Every request of a run.
struct RequestPlan {
  HeaderList headers;          // sent with every request (-H, ...)
  std::vector<FetchJob> jobs;  // in the order given
  bool batch = false;          // from --urls or --resume: a summary line is printed
};

[[nodiscard]] Result<RequestPlan, FetchError> plan_requests(const FetchOptions& options);

}  // namespace abide::cli
