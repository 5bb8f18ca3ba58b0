// `abide fetch`: where the final answers go (stdout, -o FILE, --output-dir DIR,
// -O), with their heads where -i, -I and -D put them, streamed as they arrive.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>  // std::once_flag
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abide/client.h"
#include "fetch/fetch_jobs.h"
#include "fetch/fetch_options.h"
#include "mutex.h"

namespace abide::cli {

// The file name of a request in --output-dir: NNNNNN-LAST_PATH_SEGMENT (N: the
// request's line), the segment reduced to [A-Za-z0-9._-].
std::string output_name(const FetchJob& job);

// The file name -O gives a URL, as curl: its path's last segment as it stands
// (query and fragment left out); nullopt when there is none (no path, a path
// ending in '/', "." or "..").
std::optional<std::string> remote_file_name(std::string_view url);
// Why -O cannot name a file for this request, or nullopt.
std::optional<std::string> remote_name_error(const FetchJob& job);

// A response head as curl -i writes it: the status line (HTTP/1.1 and the
// standard reason phrase: the line as received is not kept), each field line
// as received, and an empty line, all ending in CRLF. For a terminal, the
// names and values go through abide::printable(): no server byte reaches a
// terminal raw (a file or a pipe gets them as received).
std::string head_text(const engine::Response& response, bool for_terminal = false);

// Why a file cannot be written there ("cannot write DIR/F: No such file or
// directory"), found without leaving anything behind, or nullopt. `what` names
// the flag in the message ("--stats").
std::optional<std::string> unwritable(const std::string& path, std::string_view what);

// Where the final answers go, as they arrive (Client::fetch with a
// ResponseSink): nothing is held in memory beyond a chunk, or a short answer.
// A shared output (stdout, -o FILE) takes one request at a time, whole, so
// that what belongs to a request (heads with -i or -D -, the body, the -w
// text) never interleaves with another's. Requests made one after the other
// write straight to it. Requests of a concurrent batch (all on one thread:
// fetch_batch.h) are held aside until they end (in memory up to
// kMemorySpoolBytes), then copied over at once; one that grows past that
// writes straight to the output if no other request does, else it goes on in
// an unnamed temporary file, copied over when it is complete. One that ends
// while another writes straight to the output is copied over as soon as that
// one ends (nothing waits for the output). Not thread-safe.
class BodyOutput {
 public:
  // What a request held aside keeps in memory before it moves on: most API
  // answers fit, and a file costs several system calls and an inode per
  // request. At most one per request out (8 MiB at -j 256).
  static constexpr std::size_t kMemorySpoolBytes = std::size_t{32} << 10;

  // One request's output on its way (over every redirect it follows).
  struct Body {
    enum class Mode : std::uint8_t { kNone, kShared, kOwn, kSpool };
    Mode mode = Mode::kNone;
    std::FILE* file = nullptr;  // kSpool: null while the request is held in `held`
    std::string held;           // kSpool: what is held in memory (up to kMemorySpoolBytes)
    bool spill_failed = false;  // kSpool: it outgrew memory, and no temporary file could be made
    std::string own_path;       // --output-dir, -O: the request's file
    long shared_start = -1;     // where the request started in a seekable shared output
    bool body_open = false;     // this answer's body is written (else its bytes are dropped)
    std::uint64_t bytes = 0;
    bool too_large = false;    // over --max-filesize: refused, and nothing of it kept
    bool http_failed = false;  // -f or --fail-with-body, and an answer of 400 or more
    int failed_status = 0;
    bool failed = false;  // a write failed
    std::string error;    // the first failure's reason, when one did
  };

  // Opens every output and checks that each can be written, before anything
  // is sent: -o FILE (or stdout), --output-dir DIR, -O (each URL's file name,
  // in DIR or the working folder), -D FILE. The error names the output and why.
  std::optional<std::string> open(const FetchOptions& o, const std::vector<FetchJob>& jobs);
  ~BodyOutput();
  BodyOutput() = default;
  BodyOutput(const BodyOutput&) = delete;
  BodyOutput& operator=(const BodyOutput&) = delete;

  // An answer's head, final or a redirect that -L follows (`hop`: its head is
  // written, its body is not). False refuses it (a Content-Length over the
  // limit; -f and an HTTP error): the transfer stops.
  bool head(Body& b, const FetchJob& job, const FinalHead& head, bool hop);
  // A chunk of the body: false stops the transfer (over the limit, or a write failed).
  bool chunk(Body& b, std::string_view data);
  // After the request ended: `stdout_text` (the -w text) goes to stdout after
  // everything else of the request. False when something could not be written.
  bool end(Body& b, std::string_view stdout_text = {});
  // Closes the outputs; false on failure.
  bool close();
  // The first write that failed, and why ("cannot write -o file F: No space
  // left on device"); empty when none did.
  std::string first_error() const;

 private:
  bool over_limit(std::uint64_t bytes) const { return max_bytes_ > 0 && bytes > max_bytes_; }
  bool open_unit(Body& b, const FetchJob& job);
  bool write_unit(Body& b, std::string_view text);
  bool write_stdout(Body& b, const FetchJob& job, std::string_view text);
  bool take_shared(Body& b);
  bool spill(Body& b);
  // An existing -o file is emptied before the first answer is written to it
  // (false: that failed, and the request's output with it).
  bool emptied(Body& b);
  bool copy_spool(std::FILE* spool);
  bool copy_held(const std::string& held);
  // Keeps the first failure's reason (errno, as the failed call left it),
  // for the request's Body too when there is one.
  void note_failure(Body* b, std::string_view where);
  std::string where(const Body& b) const;

  // The shared output is taken by the request writing straight to it; a
  // request held aside that ends meanwhile waits in `waiting_` (its memory or
  // its temporary file) and is copied over when the output is free.
  bool take_output();
  bool copy_waiting();
  struct Waiting {
    std::string held;
    std::FILE* spool = nullptr;
  };
  bool shared_busy_ = false;
  std::deque<Waiting> waiting_;
  bool waiting_failed_ = false;
  detail::Mutex stdout_;  // stdout when it is not the shared output
  detail::Mutex dump_;    // the -D file
  std::string dir_;       // --output-dir
  bool remote_name_ = false;
  std::string path_;  // -o FILE ("" for stdout)
  std::FILE* file_ = nullptr;
  bool owned_ = false;
  bool seekable_ = false;       // a regular file: a refused body can be cut off again
  bool single_ = false;         // one request: a refused body leaves no -o file at all
  bool concurrent_ = false;     // a batch on several workers: requests are held aside first
  bool remove_output_ = false;  // that happened
  // -o FILE did not exist before this run: abide made it. curl makes it at the
  // first byte, so a run whose transfers all failed before any answer (a
  // refused connection or certificate) leaves none; an existing file stays
  // as it was until the first answer to write (then it is cut to nothing).
  bool created_output_ = false;
  std::atomic<bool> answered_{false};  // some request got an answer head
  std::once_flag truncated_;           // an existing -o file, emptied for the first answer written
  int truncate_error_ = 0;             // errno of that, when it failed (set once, under truncated_)
  std::uint64_t max_bytes_ = 0;
  bool include_ = false;  // -i or -I: the head goes before the body
  bool fail_ = false;     // -f: no body for an answer of 400 or more
  bool fail_with_body_ = false;
  std::FILE* dump_file_ = nullptr;  // -D FILE
  bool dump_stdout_ = false;        // -D -
  bool stdout_terminal_ = false;    // stdout is a terminal: heads written there are escaped
  bool dump_failed_ ABIDE_GUARDED_BY(dump_) = false;  // a write to the -D file failed
  std::string dump_path_;
  mutable detail::Mutex error_mu_;
  std::string first_error_ ABIDE_GUARDED_BY(error_mu_);
};

}  // namespace abide::cli
