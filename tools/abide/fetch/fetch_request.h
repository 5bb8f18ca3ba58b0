// `abide fetch`: the requests of a run, from its options: the method, the
// headers and the body every request sends (curl's request flags: -X -H -d
// --data-* --json -F -G -I -u -A -e), and one FetchJob per URL.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "abide/headers.h"
#include "abide/result.h"
#include "fetch/fetch_form.h"
#include "fetch/fetch_jobs.h"
#include "fetch/fetch_options.h"
#include "mutex.h"

namespace abide::cli {

// Every request of a run: the URL arguments or a resume file's requests as
// a list (they are few), a --urls file as the file, read as the requests are
// taken (JobFeed).
struct RequestPlan {
  HeaderList headers;          // sent with every request (-H, ...)
  std::vector<FetchJob> jobs;  // in the order given; empty with urls_file
  bool batch = false;          // from --urls or --resume: a summary line is printed
  std::string urls_file;       // --urls FILE ("-": standard input)
  // How many requests the run makes, when known before they are sent: a
  // regular --urls file is counted (and checked) in a first pass that keeps
  // nothing; standard input is read once, so its count is not known.
  std::optional<std::size_t> total;
  // What a bare URL line of the list takes from the command line.
  std::string method;
  std::string body;
  std::string query;  // -G
  std::string idempotency_key;
};

// The request that line `seq` (0-based, among the lines that describe one)
// of a --urls list describes.
FetchJob job_for_line(const RequestPlan& plan, UrlLine line, std::size_t seq);

// Hands out a run's requests one at a time to the workers that take them:
// the plan's list, or the lines of its --urls file read as they are needed
// (so a batch of any length holds one line, not the list). Thread-safe.
class JobFeed {
 public:
  explicit JobFeed(RequestPlan& plan) : plan_(plan) {}
  // Opens the --urls file (once more for a regular file: the plan read it to
  // count it); an error message when it cannot.
  [[nodiscard]] std::optional<std::string> open();
  // The next request and its position in the run, or nullopt at the end (or
  // after a bad line of standard input: error() then says it).
  std::optional<std::pair<std::size_t, FetchJob>> next();
  std::string error() const;

 private:
  RequestPlan& plan_;
  mutable detail::Mutex mu_;
  std::size_t next_ ABIDE_GUARDED_BY(mu_) = 0;
  std::optional<UrlListReader> reader_ ABIDE_GUARDED_BY(mu_);
  std::string error_ ABIDE_GUARDED_BY(mu_);
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
