// `abide fetch`: the requests of a run, where they come from (one URL, a URL
// list, a resume file), and the records it writes (the --stats summary and the
// resume file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "abide/client.h"
#include "abide/clock.h"
#include "abide/headers.h"
#include "abide/result.h"
#include "key_secret.h"

namespace abide::cli {

// One request of a run, as the command line (or a resume file) describes it.
struct FetchJob {
  std::size_t index = 0;  // position in the original batch (0-based): output names, resume
  std::string method = "GET";
  std::string url;
  std::string body;
  std::optional<std::string> idempotency_key;
  std::optional<WallTime> not_before;  // from a resume file: nothing is sent before it
  std::string shown_url;               // the URL as shown (shown_url()), worked out once for every line that shows it
};

// One line of a --urls file: `URL`, `METHOD URL`, or `METHOD URL BODY`, where
// BODY is `@FILE` (the file as it is; a relative FILE is taken from the folder
// of the --urls file, or from the working directory for standard input) or
// the rest of the line as it is. A line with a METHOD describes its request
// whole: its method and its body (none without BODY) replace -X and -d for
// that request; a bare `URL` takes them from the command line.
struct UrlLine {
  std::size_t line = 0;  // 1-based, in the file
  std::optional<std::string> method;
  std::string url;
  std::optional<std::string> body;
};

// Every body of a list is held until its request is made: their sum is bounded.
inline constexpr std::size_t kMaxUrlListBodyBytes = std::size_t{1} << 30;

// The lines of a --urls file ("-" for standard input): blank lines and lines
// starting with '#' are skipped; surrounding whitespace is trimmed. An error
// names the file and line.
Result<std::vector<UrlLine>, std::string> read_url_list(const std::string& path,
                                                        std::size_t max_body_bytes = kMaxUrlListBodyBytes);

// A --urls file read one line at a time, as the requests are taken, so that
// a list of any length costs the memory of one line. Not thread-safe: its
// user holds the lock.
class UrlListReader {
 public:
  // Opens path ("-" for standard input); an error message when it cannot.
  [[nodiscard]] static Result<UrlListReader, std::string> open(const std::string& path);
  // The next line that describes a request (as read_url_list() parses it),
  // nullopt at the end, or the error, naming the file and line.
  [[nodiscard]] Result<std::optional<UrlLine>, std::string> next();

 private:
  UrlListReader() = default;
  std::string path_;
  std::filesystem::path folder_;
  std::unique_ptr<std::ifstream> file_;  // null for standard input
  std::istream* in_ = nullptr;
  std::size_t line_no_ = 0;
};

// A line longer than this is refused: one line is all a reader holds.
inline constexpr std::size_t kMaxUrlLineBytes = std::size_t{1} << 20;

// True when running the request again may finish it: cancelled, deferred,
// deadline_exceeded, exhausted. not_retryable requests are not (repeating them
// is unsafe or pointless); done ones are finished.
bool resumable(const RequestOutcome& outcome) noexcept;

// What a finished request leaves of itself when it is not done: enough for
// the --stats `unfinished` list, the resume file and the error lines.
struct UnfinishedRequest {
  std::size_t seq = 0;  // position in the run, for the records' order
  FetchJob job;         // its body is kept: the resume file sends it again
  OutcomeKind kind = OutcomeKind::kDone;
  std::string reason;
  std::optional<WallTime> not_before;
  bool ambiguous = false;
  bool http_failed = false;  // -f / --fail-with-body and an HTTP error: said without its kind
};

// The outcomes of a run folded in as each request finishes (then dropped):
// the counts of the --stats summary, and a record of every request not done.
// Not thread-safe: its user holds the lock.
class RunSummary {
 public:
  void add(std::size_t seq, const FetchJob& job, const RequestOutcome& outcome, bool http_failed = false);
  std::uint64_t requests() const noexcept { return requests_; }
  std::uint64_t done() const noexcept { return done_; }
  std::uint64_t resumable_left() const noexcept { return resumable_; }
  // The requests not done, in the run's order.
  std::vector<UnfinishedRequest> unfinished() const;
  // The --stats summary (the fields of stats_json()).
  nlohmann::ordered_json stats(Duration elapsed, bool interrupted) const;
  // The resume file (the fields of resume_json()).
  nlohmann::ordered_json resume(WallTime now) const;

 private:
  std::uint64_t requests_ = 0, done_ = 0, attempts_ = 0, retries_ = 0, transport_errors_ = 0, ambiguous_ = 0;
  std::uint64_t resumable_ = 0;
  Duration waited_{};
  std::map<int, std::uint64_t> statuses_;
  std::map<std::string, std::uint64_t> kinds_;
  std::vector<UnfinishedRequest> unfinished_;
  // Per quota unit ("requests", "tokens", ...): the sends it paced, for how
  // long in all, the requests it deferred, and the last one's counts in words.
  struct Held {
    std::uint64_t sends = 0;
    Duration paced{};
    std::uint64_t deferred = 0;
    std::string last;
  };
  Held& held_by(const QuotaHeld& held);
  std::map<std::string, Held> held_;
};

// The resume file: every resumable request that is not done, with its
// permitted time. Request headers are not written (they may carry
// credentials): a resumed run takes them from its command line again.
//   {"version": 1, "written": RFC3339, "requests": [{"index", "method", "url",
//    "body"?, "idempotency_key"?, "outcome", "reason", "not_before": RFC3339|null}]}
nlohmann::ordered_json resume_json(const std::vector<FetchJob>& jobs, const std::vector<RequestOutcome>& outcomes,
                                   WallTime now);

// Reads a resume file written by resume_json().
Result<std::vector<FetchJob>, std::string> read_resume(const std::string& path);

// The --stats summary (docs/RULES.md, `abide fetch`): requests, done, attempts,
// retries, status_counts, waited_s, elapsed_s, unfinished [{url, outcome,
// not_before}], and more (outcomes, transport_errors, ambiguous, interrupted).
// URLs are shown as shown_url() shows them: the summary is shared.
nlohmann::ordered_json stats_json(const std::vector<FetchJob>& jobs, const std::vector<RequestOutcome>& outcomes,
                                  Duration elapsed, bool interrupted);

// The pacer key of one request: `override_key` when given (--pacer-key: one
// key for every request), else the URL's origin with a keyed hash of its
// credential headers (Authorization, X-Api-Key, ...; proxy::quota_key, under
// `secret`), so that requests made with different credentials are paced
// apart, and the key never holds a credential nor reveals one to a reader of
// the store. Empty for a URL without an http(s) origin: the engine then keys
// it (and refuses it) itself. Without `secret`, this process's own: right
// for keys that never leave the process (--store memory).
std::string request_pacer_key(std::string_view url, const HeaderList& headers, const std::string& override_key,
                              const KeySecret& secret = KeySecret::per_process());

// Who may read a file abide writes.
enum class FileAccess : std::uint8_t {
  kShared,     // as the umask allows (the --stats summary: no credentials)
  kOwnerOnly,  // 0600 (the resume file: its URLs and bodies may carry credentials)
};

// Writes text to a file, replacing it through a new temporary in the same
// folder (so a reader never sees half a file). The temporary is created with
// the final permissions (O_CREAT | O_EXCL, never chmod afterwards), so a
// kOwnerOnly file is at no moment readable by others, and an existing file's
// wider permissions do not carry over: it is replaced, not rewritten. An
// error message on failure.
std::optional<std::string> write_file_atomically(const std::string& path, const std::string& text,
                                                 FileAccess access = FileAccess::kShared);

}  // namespace abide::cli
