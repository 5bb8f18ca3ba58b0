// `abide fetch`: where the final answers' bodies go (stdout, -o FILE,
// --output-dir DIR), streamed as they arrive.
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "abide/client.h"
#include "fetch_jobs.h"
#include "fetch_options.h"

namespace abide::cli {

// The file name of a request in --output-dir: NNNNNN-LAST_PATH_SEGMENT (N: the
// request's line), the segment reduced to [A-Za-z0-9._-].
std::string output_name(const FetchJob& job);

// Where the final answers' bodies go, as they arrive (Client::fetch with a
// ResponseSink): nothing is held in memory beyond a chunk. A shared output
// (stdout, -o FILE) takes one body at a time, whole: the first final answer to
// arrive writes straight to it, and bodies arriving meanwhile go to an
// unnamed temporary file, copied over when they are complete, so that bodies
// never interleave and each appears when it has finished.
class BodyOutput {
 public:
  // One request's body on its way out.
  struct Body {
    enum class Mode : std::uint8_t { kNone, kShared, kOwn, kSpool };
    Mode mode = Mode::kNone;
    std::FILE* file = nullptr;
    std::string own_path;   // --output-dir: the request's file
    long shared_start = -1;  // where the body started in a seekable shared output
    std::uint64_t bytes = 0;
    bool too_large = false;  // over --max-filesize: refused, and nothing of it kept
    bool failed = false;     // a write failed
  };

  // Opens -o FILE (or stdout); --output-dir is written per request.
  std::optional<std::string> open(const FetchOptions& o, std::size_t requests);
  ~BodyOutput() {
    if (owned_) std::fclose(file_);
  }
  BodyOutput() = default;
  BodyOutput(const BodyOutput&) = delete;
  BodyOutput& operator=(const BodyOutput&) = delete;

  // The final answer's head: false refuses it (a Content-Length over the limit).
  bool begin(Body& b, const FetchJob& job, const FinalHead& head);
  // A chunk of it: false stops the transfer (over the limit, or a write failed).
  bool chunk(Body& b, std::string_view data);
  // After the request ended; false when the body could not be written.
  bool end(Body& b);
  // Closes the shared output; false on failure.
  bool close();

 private:
  bool over_limit(std::uint64_t bytes) const { return max_bytes_ > 0 && bytes > max_bytes_; }
  bool copy_spool(std::FILE* spool);

  std::mutex shared_;  // held by the body writing to file_
  std::string dir_;
  std::string path_;   // -o FILE ("" for stdout)
  std::FILE* file_ = nullptr;
  bool owned_ = false;
  bool seekable_ = false;       // a regular file: a refused body can be cut off again
  bool single_ = false;         // one request: a refused body leaves no -o file at all
  bool remove_output_ = false;  // that happened
  std::uint64_t max_bytes_ = 0;
};

}  // namespace abide::cli
