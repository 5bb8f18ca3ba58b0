#include "fetch/body_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "fetch/shown_url.h"
#include "proxy/proxy_rules.h"

namespace abide::cli {
namespace body_output {  // private to this file (the CLI is compiled in unity batches)

std::string cannot(std::string_view what, const std::string& path, int error) {
  return "cannot write " + std::string(what) + " " + path + ": " + std::strerror(error);
}

// The path part of a URL (after scheme and authority), without query and fragment.
std::string_view url_path(std::string_view url) {
  if (const auto q = url.find_first_of("?#"); q != std::string_view::npos) url = url.substr(0, q);
  if (const auto s = url.find("://"); s != std::string_view::npos) url = url.substr(s + 3);
  const auto slash = url.find('/');
  return slash == std::string_view::npos ? std::string_view() : url.substr(slash);
}

}  // namespace body_output

// A file name for request `index` in --output-dir.
std::string output_name(const FetchJob& job) {
  char num[32];
  std::snprintf(num, sizeof num, "%06zu", job.index + 1);
  std::string_view path = body_output::url_path(job.url);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  const auto slash = path.rfind('/');
  std::string seg;
  if (slash != std::string_view::npos) {
    for (char c : path.substr(slash + 1)) {
      if (seg.size() >= 60) break;
      const auto u = static_cast<unsigned char>(c);
      seg += (std::isalnum(u) != 0 || c == '.' || c == '-' || c == '_') ? c : '_';
    }
  }
  if (seg.empty() || seg == "." || seg == "..") return num;
  return std::string(num) + "-" + seg;
}

std::optional<std::string> remote_name_error(const FetchJob& job) {
  if (remote_file_name(job.url)) return std::nullopt;
  return "-O: the URL " + (job.shown_url.empty() ? shown_url(job.url) : job.shown_url) +
         " has no file name (its path ends without a last segment)";
}

std::optional<std::string> remote_file_name(std::string_view url) {
  const std::string_view path = body_output::url_path(url);
  const auto slash = path.rfind('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::string_view seg = path.substr(slash + 1);
  if (seg.empty() || seg == "." || seg == "..") return std::nullopt;
  return std::string(seg);
}

std::string head_text(const engine::Response& response, bool for_terminal) {
  // The status line as curl writes it: HTTP/2 and HTTP/3 have no reason
  // phrase, and curl ends their status with a space ("HTTP/2 200 ").
  const bool h2_or_later = response.http_version >= 20;
  std::string t = response.http_version == 10   ? "HTTP/1.0 "
                  : response.http_version == 20 ? "HTTP/2 "
                  : response.http_version == 30 ? "HTTP/3 "
                                                : "HTTP/1.1 ";
  t += std::to_string(response.status);
  if (h2_or_later) t += ' ';
  if (const std::string_view phrase = h2_or_later ? std::string_view() : proxy::reason_phrase(response.status);
      !phrase.empty()) {
    t += ' ';
    t += phrase;
  }
  t += "\r\n";
  constexpr std::size_t kMaxShown = std::size_t{1} << 20;
  for (const Header& h : response.headers.lines()) {
    t += for_terminal ? printable(h.name, kMaxShown) : h.name;
    t += ": ";
    t += for_terminal ? printable(h.value, kMaxShown) : h.value;
    t += "\r\n";
  }
  t += "\r\n";
  return t;
}

std::optional<std::string> unwritable(const std::string& path, std::string_view what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return body_output::cannot(what, path, EISDIR);
  if (fs::exists(path, ec)) {
    if (::access(path.c_str(), W_OK) != 0) return body_output::cannot(what, path, errno);
    return std::nullopt;
  }
  // A probe file in the folder it would go to, removed at once.
  const fs::path parent = fs::path(path).parent_path();
  std::string probe = ((parent.empty() ? fs::path(".") : parent) / ".abide-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) return body_output::cannot(what, path, errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return std::nullopt;
}

std::optional<std::string> BodyOutput::open(const FetchOptions& o, const std::vector<FetchJob>& jobs) {
  max_bytes_ = o.max_filesize;
  single_ = jobs.size() == 1;
  // As run_fetch runs them: a --urls or --resume batch on its --jobs workers.
  concurrent_ = (!o.urls_file.empty() || !o.resume.empty()) && o.jobs > 1 && !single_;
  include_ = o.include || o.head;
  fail_ = o.fail;
  fail_with_body_ = o.fail_with_body;
  remote_name_ = o.remote_name;
  dir_ = o.output_dir;
  if (!dir_.empty()) {
    std::error_code ec;
    if (std::filesystem::exists(dir_, ec) && !std::filesystem::is_directory(dir_, ec))
      return "cannot create --output-dir " + dir_ + ": " + std::strerror(ENOTDIR);
    std::filesystem::create_directories(dir_, ec);
    if (ec) return "cannot create --output-dir " + dir_ + ": " + ec.message();
  }
  if (remote_name_) {
    for (const FetchJob& job : jobs) {
      if (auto err = remote_name_error(job)) return err;
    }
    // A --urls file's names were checked as it was read; standard input's
    // lines come later, and are written where -O can.
    if (!jobs.empty()) {
      const std::string where = ((dir_.empty() ? std::filesystem::path(".") : std::filesystem::path(dir_)) /
                                 *remote_file_name(jobs.front().url))
                                    .string();
      if (auto err = unwritable(where, "-O file")) return err;
    }
  }
  if (!o.dump_header.empty()) {
    if (o.dump_header == "-") {
      dump_stdout_ = true;
    } else {
      dump_path_ = o.dump_header;
      dump_file_ = std::fopen(o.dump_header.c_str(), "wb");
      if (dump_file_ == nullptr) return body_output::cannot("-D file", o.dump_header, errno);
    }
  }
  stdout_terminal_ = ::isatty(STDOUT_FILENO) == 1;
  if (!dir_.empty() || remote_name_) return std::nullopt;
  if (o.output.empty() || o.output == "-") {
    file_ = stdout;
    return std::nullopt;
  }
  path_ = o.output;
  {
    std::error_code ec;
    created_output_ = !std::filesystem::exists(o.output, ec) && !ec;
  }
  // Opened without truncating: what was there stays until an answer is to be
  // written (head()), as curl leaves it when no server answers.
  const int fd = ::open(o.output.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return body_output::cannot("-o file", o.output, errno);
  file_ = ::fdopen(fd, "wb");
  if (file_ == nullptr) {
    const int error = errno;
    ::close(fd);
    return body_output::cannot("-o file", o.output, error);
  }
  owned_ = true;
  struct stat st {};
  seekable_ = ::fstat(::fileno(file_), &st) == 0 && S_ISREG(st.st_mode);
  return std::nullopt;
}

BodyOutput::~BodyOutput() {
  for (const Waiting& w : waiting_) {
    if (w.spool != nullptr) std::fclose(w.spool);
  }
  if (owned_) std::fclose(file_);
  if (dump_file_ != nullptr) std::fclose(dump_file_);
}

void BodyOutput::note_failure(Body* b, std::string_view where) {
  const int error = errno != 0 ? errno : EIO;
  std::string text = "cannot write " + std::string(where) + ": " + std::strerror(error);
  if (b != nullptr && b->error.empty()) b->error = text;
  detail::MutexLock lock(error_mu_);
  if (first_error_.empty()) first_error_ = std::move(text);
}

std::string BodyOutput::first_error() const {
  detail::MutexLock lock(error_mu_);
  return first_error_;
}

std::string BodyOutput::where(const Body& b) const {
  switch (b.mode) {
    case Body::Mode::kOwn: return "file " + b.own_path;
    case Body::Mode::kSpool: return "a temporary file";
    case Body::Mode::kShared:
    case Body::Mode::kNone: break;
  }
  return path_.empty() ? "standard output" : "-o file " + path_;
}

bool BodyOutput::open_unit(Body& b, const FetchJob& job) {
  if (b.mode == Body::Mode::kSpool) return !b.spill_failed;
  if (b.mode != Body::Mode::kNone) return b.file != nullptr;
  if (!dir_.empty() || remote_name_) {
    const std::string name = remote_name_ ? remote_file_name(job.url).value_or(output_name(job)) : output_name(job);
    b.own_path = ((dir_.empty() ? std::filesystem::path(".") : std::filesystem::path(dir_)) / name).string();
    b.file = std::fopen(b.own_path.c_str(), "wb");
    b.mode = Body::Mode::kOwn;
  } else if (!concurrent_ && take_output()) {
    b.file = file_;
    b.mode = Body::Mode::kShared;
    if (seekable_) b.shared_start = std::ftell(file_);
  } else {
    // Held in memory first (write_unit): the output or a temporary file
    // only if it grows.
    b.mode = Body::Mode::kSpool;
    return true;
  }
  if (b.file == nullptr) {
    b.failed = true;
    note_failure(&b, where(b));
  }
  return b.file != nullptr;
}

bool BodyOutput::write_unit(Body& b, std::string_view text) {
  if (text.empty()) return true;
  if (b.mode == Body::Mode::kSpool && b.file == nullptr) {
    if (b.spill_failed) return false;
    // (held never passes the bound, so the subtraction cannot wrap.)
    if (text.size() <= kMemorySpoolBytes - b.held.size()) {
      b.held.append(text);
      return true;
    }
    if (take_output() ? !take_shared(b) : !spill(b)) return false;
  }
  if (std::fwrite(text.data(), 1, text.size(), b.file) != text.size()) {
    b.failed = true;
    note_failure(&b, where(b));
    return false;
  }
  return true;
}

// Text for stdout that belongs to a request (-D -, -w): when stdout is the
// shared output, it goes with the request's body, so that requests do not
// interleave; else straight to stdout.
bool BodyOutput::write_stdout(Body& b, const FetchJob& job, std::string_view text) {
  if (text.empty()) return true;
  if (file_ == stdout) return open_unit(b, job) && write_unit(b, text);
  detail::MutexLock lock(stdout_);
  const bool ok = std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0;
  if (!ok) {
    b.failed = true;
    note_failure(&b, "standard output");
  }
  return ok;
}

bool BodyOutput::emptied(Body& b) {
  if (!owned_ || created_output_) return true;
  // Once, before any request writes to it: each writes only after this.
  std::call_once(truncated_, [this] {
    if (seekable_ && ::ftruncate(::fileno(file_), 0) != 0) truncate_error_ = errno;
  });
  if (truncate_error_ == 0) return true;
  // What it held would show through what is written: nothing is.
  errno = truncate_error_;
  b.failed = true;
  note_failure(&b, "-o file " + path_);
  return false;
}

bool BodyOutput::head(Body& b, const FetchJob& job, const FinalHead& head, bool hop) {
  b.body_open = false;
  // Only a final answer is written (done, or not to be repeated), or a
  // redirect being followed: never an answer that is retried.
  answered_.store(true, std::memory_order_relaxed);  // a server answered: the -o file stays
  if (!hop && head.kind != OutcomeKind::kDone && head.kind != OutcomeKind::kNotRetryable) return true;
  const int status = head.response.status;
  const bool http_error = !hop && status >= 400;
  if (http_error && (fail_ || fail_with_body_)) {
    b.http_failed = true;
    b.failed_status = status;
  }
  // A declared length over the limit is refused before any byte (as curl does).
  if (!hop && max_bytes_ > 0) {
    if (auto len = head.response.headers.first("Content-Length")) {
      std::uint64_t n = 0;
      const auto* end = len->data() + len->size();
      if (std::from_chars(len->data(), end, n).ptr == end && !len->empty() && over_limit(n)) {
        b.too_large = true;
        return false;
      }
    }
  }
  if (dump_file_ != nullptr || dump_stdout_ || include_) {
    const std::string text = head_text(head.response);
    // What goes to a terminal is escaped; files and pipes get the bytes as received.
    const std::string shown = stdout_terminal_ ? head_text(head.response, true) : text;
    if (dump_file_ != nullptr) {
      detail::MutexLock lock(dump_);
      if (std::fwrite(text.data(), 1, text.size(), dump_file_) != text.size() || std::fflush(dump_file_) != 0) {
        dump_failed_ = true;
        note_failure(&b, "-D file " + dump_path_);
      }
    }
    if (dump_stdout_ && !write_stdout(b, job, shown)) return false;
    if (include_ && !(emptied(b) && open_unit(b, job) && write_unit(b, file_ == stdout ? shown : text))) return false;
  }
  if (hop) return true;
  // -f: the head is said (with -i), the body is not; the transfer stops, as curl's.
  if (b.http_failed && !fail_with_body_) return false;
  if (!emptied(b) || !open_unit(b, job)) return false;
  b.body_open = true;
  return true;
}

bool BodyOutput::chunk(Body& b, std::string_view data) {
  if (!b.body_open) return true;
  b.bytes += data.size();
  if (over_limit(b.bytes)) {
    b.too_large = true;
    return false;
  }
  return write_unit(b, data);
}

// A request held aside outgrew memory, and no other request writes to the
// shared output (the caller has just locked it): it takes the output, what
// it holds first, then the rest straight on. False when that write failed.
bool BodyOutput::take_shared(Body& b) {
  b.mode = Body::Mode::kShared;
  b.file = file_;
  if (seekable_) b.shared_start = std::ftell(file_);
  const bool ok = std::fwrite(b.held.data(), 1, b.held.size(), file_) == b.held.size();
  std::string().swap(b.held);
  if (!ok) {
    b.failed = true;
    note_failure(&b, where(b));
  }
  return ok;
}

// A request held aside outgrew memory and the output is taken: what it holds
// goes to a temporary file, and the rest follows it there.
bool BodyOutput::spill(Body& b) {
  b.file = std::tmpfile();
  if (b.file == nullptr) {
    b.spill_failed = true;
    b.failed = true;
    note_failure(&b, where(b));
    return false;
  }
  const bool ok = std::fwrite(b.held.data(), 1, b.held.size(), b.file) == b.held.size();
  std::string().swap(b.held);  // its memory too
  if (!ok) {
    b.failed = true;
    note_failure(&b, where(b));
  }
  return ok;
}

bool BodyOutput::copy_held(const std::string& held) {
  const bool ok = std::fwrite(held.data(), 1, held.size(), file_) == held.size();
  return std::fflush(file_) == 0 && ok;
}

bool BodyOutput::copy_spool(std::FILE* spool) {
  std::rewind(spool);
  constexpr std::size_t kBuffer = std::size_t{64} << 10;
  // Not zeroed: fread fills what is used (zeroing 64 KiB per request showed
  // in a batch's profile).
  const auto buf = std::make_unique_for_overwrite<char[]>(kBuffer);
  bool ok = true;
  while (ok) {
    const std::size_t n = std::fread(buf.get(), 1, kBuffer, spool);
    if (n == 0) break;
    ok = std::fwrite(buf.get(), 1, n, file_) == n;
  }
  ok = std::ferror(spool) == 0 && ok;
  return std::fflush(file_) == 0 && ok;
}

bool BodyOutput::end(Body& b, std::string_view stdout_text) {
  // -f and one request: no new -o file for an answer that wrote nothing, as
  // curl (which creates it at the first byte) leaves none; an existing one
  // was not touched.
  if (b.http_failed && !fail_with_body_ && single_ && created_output_ && b.mode == Body::Mode::kNone)
    remove_output_ = true;
  // The -w text of a request whose body went to a file of its own goes to
  // stdout after the file is complete.
  const bool own = b.mode == Body::Mode::kOwn;
  if (!own && !write_stdout(b, FetchJob{}, stdout_text)) b.failed = true;
  bool ok = !b.failed;
  switch (b.mode) {
    case Body::Mode::kNone: break;
    case Body::Mode::kOwn:
      if (b.file == nullptr || std::fclose(b.file) != 0) {
        if (ok) note_failure(&b, where(b));
        ok = false;
      }
      // No partial file for a refused body, as curl --max-filesize.
      if (b.too_large) {
        std::error_code ec;
        std::filesystem::remove(b.own_path, ec);
      }
      break;
    case Body::Mode::kShared:
      if (b.too_large) {
        std::fflush(file_);
        if (single_ && created_output_) remove_output_ = true;
        // Cut what was written of it off again (a pipe keeps what it got).
        if (b.shared_start >= 0 && ::ftruncate(::fileno(file_), b.shared_start) == 0)
          std::fseek(file_, b.shared_start, SEEK_SET);
      }
      if (std::fflush(file_) != 0) {
        if (ok) note_failure(&b, where(b));
        ok = false;
      }
      shared_busy_ = false;
      if (!copy_waiting()) ok = false;
      break;
    case Body::Mode::kSpool:
      if (shared_busy_ && !b.too_large && ok && (b.file != nullptr || !b.held.empty())) {
        // Another request writes to the output: this one follows it, whole.
        waiting_.push_back({std::move(b.held), b.file});
        b.file = nullptr;
      } else if (b.file != nullptr) {
        if (!b.too_large && ok && !copy_spool(b.file)) {
          note_failure(&b, path_.empty() ? "standard output" : "-o file " + path_);
          ok = false;
        }
        ok = std::fclose(b.file) == 0 && ok;
      } else if (!b.too_large && ok && !b.held.empty() && !copy_held(b.held)) {
        note_failure(&b, path_.empty() ? "standard output" : "-o file " + path_);
        ok = false;
      }
      break;
  }
  b.mode = Body::Mode::kNone;
  b.file = nullptr;
  b.held.clear();
  b.body_open = false;
  if (own && !stdout_text.empty()) {
    Body after;
    ok = write_stdout(after, FetchJob{}, stdout_text) && ok;
    if (after.mode != Body::Mode::kNone) ok = end(after) && ok;
  }
  return ok;
}

bool BodyOutput::take_output() {
  if (shared_busy_) return false;
  shared_busy_ = true;
  return true;
}

// The requests that ended while another wrote to the output, in the order
// they ended. False when a copy failed (its reason is the run's first error).
bool BodyOutput::copy_waiting() {
  bool ok = !waiting_failed_;
  while (!waiting_.empty()) {
    Waiting w = std::move(waiting_.front());
    waiting_.pop_front();
    bool copied = true;
    if (w.spool != nullptr) {
      copied = copy_spool(w.spool);
      copied = std::fclose(w.spool) == 0 && copied;
    } else {
      copied = copy_held(w.held);
    }
    if (!copied) {
      note_failure(nullptr, path_.empty() ? "standard output" : "-o file " + path_);
      waiting_failed_ = true;
      ok = false;
    }
  }
  return ok;
}

bool BodyOutput::close() {
  bool ok = copy_waiting();
  bool dump_failed = false;
  {
    detail::MutexLock lock(dump_);
    dump_failed = dump_failed_;
  }
  if (dump_file_ != nullptr) {
    const bool closed = std::fclose(dump_file_) == 0;
    if (!closed && !dump_failed) note_failure(nullptr, "-D file " + dump_path_);
    ok = closed && !dump_failed;
    dump_file_ = nullptr;
  } else if (dump_failed) {
    ok = false;
  }
  if (!owned_) {
    if (std::fflush(stdout) != 0) {
      note_failure(nullptr, "standard output");
      ok = false;
    }
    return ok;
  }
  owned_ = false;
  if (std::fclose(file_) != 0) {
    note_failure(nullptr, "-o file " + path_);
    ok = false;
  }
  if (remove_output_ || (created_output_ && !answered_.load(std::memory_order_relaxed))) {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  return ok;
}

}  // namespace abide::cli
