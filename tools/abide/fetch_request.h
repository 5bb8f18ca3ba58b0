// `abide fetch`: the requests of a run, from its options: the method, the
// headers and the body every request sends (curl's request flags: -X -H -d
// --data-* --json -F -G -I -u -A -e), and one FetchJob per URL.
#pragma once

#include <string>
#include <vector>

#include "abide/headers.h"
#include "abide/result.h"
#include "fetch_form.h"
#include "fetch_jobs.h"
#include "fetch_options.h"

namespace abide::cli {

// Every request of a run.
struct RequestPlan {
  HeaderList headers;          // sent with every request (-H, ...)
  std::vector<FetchJob> jobs;  // in the order given
  bool batch = false;          // from --urls or --resume: a summary line is printed
};

// The requests of a run, or why they cannot be made (FetchError, fetch_form.h):
// flags that contradict each other (as curl refuses them), a file that cannot
// be read, a -u without a password (abide never prompts).
[[nodiscard]] Result<RequestPlan, FetchError> plan_requests(const FetchOptions& options);

// A URL as curl takes it: one that starts with a scheme ("name://", the name
// a letter then letters, digits, '+', '-' or '.') is kept as it is (a scheme
// abide cannot fetch is refused when it is sent); anything else, such as
// "host:port/path", means http://.
std::string with_default_scheme(std::string_view url);

// -G: the data appended to the URL's query, with '?' or '&' as the URL needs,
// before a fragment.
std::string with_query(std::string_view url, std::string_view data);

}  // namespace abide::cli
