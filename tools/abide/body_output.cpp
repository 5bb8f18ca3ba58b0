#include "body_output.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <filesystem>
#include <vector>

namespace abide::cli {

// A file name for request `index` in --output-dir.
std::string output_name(const FetchJob& job) {
  char num[32];
  std::snprintf(num, sizeof num, "%06zu", job.index + 1);
  std::string_view path = job.url;
  if (const auto q = path.find_first_of("?#"); q != std::string_view::npos) path = path.substr(0, q);
  if (const auto s = path.find("://"); s != std::string_view::npos) path = path.substr(s + 3);
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

std::optional<std::string> BodyOutput::open(const FetchOptions& o, std::size_t requests) {
  max_bytes_ = o.max_filesize;
  single_ = requests == 1;
  dir_ = o.output_dir;
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec || !std::filesystem::is_directory(dir_)) return "cannot create --output-dir " + dir_;
    return std::nullopt;
  }
  if (o.output.empty() || o.output == "-") {
    file_ = stdout;
    return std::nullopt;
  }
  path_ = o.output;
  file_ = std::fopen(o.output.c_str(), "wb");
  owned_ = file_ != nullptr;
  if (file_ == nullptr) return "cannot write " + o.output;
  struct stat st {};
  seekable_ = ::fstat(::fileno(file_), &st) == 0 && S_ISREG(st.st_mode);
  return std::nullopt;
}

bool BodyOutput::begin(Body& b, const FetchJob& job, const FinalHead& head) {
  // Only a final answer's body is written (done, or not to be repeated), as before streaming.
  if (head.kind != OutcomeKind::kDone && head.kind != OutcomeKind::kNotRetryable) return true;
  // A declared length over the limit is refused before any byte (as curl does).
  if (max_bytes_ > 0) {
    if (auto len = head.response.headers.first("Content-Length")) {
      std::uint64_t n = 0;
      const auto* end = len->data() + len->size();
      if (std::from_chars(len->data(), end, n).ptr == end && !len->empty() && over_limit(n)) {
        b.too_large = true;
        return false;
      }
    }
  }
  if (!dir_.empty()) {
    b.own_path = (std::filesystem::path(dir_) / output_name(job)).string();
    b.file = std::fopen(b.own_path.c_str(), "wb");
    b.mode = Body::Mode::kOwn;
  } else if (shared_.try_lock()) {
    b.file = file_;
    b.mode = Body::Mode::kShared;
    if (seekable_) b.shared_start = std::ftell(file_);
  } else {
    b.file = std::tmpfile();
    b.mode = Body::Mode::kSpool;
  }
  if (b.file == nullptr) {
    b.failed = true;
    return false;
  }
  return true;
}

bool BodyOutput::chunk(Body& b, std::string_view data) {
  if (b.mode == Body::Mode::kNone) return true;
  b.bytes += data.size();
  if (over_limit(b.bytes)) {
    b.too_large = true;
    return false;
  }
  if (std::fwrite(data.data(), 1, data.size(), b.file) != data.size()) {
    b.failed = true;
    return false;
  }
  return true;
}

bool BodyOutput::copy_spool(std::FILE* spool) {
  std::rewind(spool);
  std::vector<char> buf(std::size_t{64} << 10);
  bool ok = true;
  std::lock_guard lock(shared_);
  while (ok) {
    const std::size_t n = std::fread(buf.data(), 1, buf.size(), spool);
    if (n == 0) break;
    ok = std::fwrite(buf.data(), 1, n, file_) == n;
  }
  ok = std::ferror(spool) == 0 && ok;
  return std::fflush(file_) == 0 && ok;
}

bool BodyOutput::end(Body& b) {
  bool ok = !b.failed;
  switch (b.mode) {
    case Body::Mode::kNone: break;
    case Body::Mode::kOwn:
      ok = std::fclose(b.file) == 0 && ok;
      // No partial file for a refused body, as curl --max-filesize.
      if (b.too_large) {
        std::error_code ec;
        std::filesystem::remove(b.own_path, ec);
      }
      break;
    case Body::Mode::kShared:
      if (b.too_large) {
        std::fflush(file_);
        if (single_ && !path_.empty()) remove_output_ = true;
        // Cut what was written of it off again (a pipe keeps what it got).
        if (b.shared_start >= 0 && ::ftruncate(::fileno(file_), b.shared_start) == 0)
          std::fseek(file_, b.shared_start, SEEK_SET);
      }
      ok = std::fflush(file_) == 0 && ok;
      shared_.unlock();
      break;
    case Body::Mode::kSpool:
      if (!b.too_large && ok) ok = copy_spool(b.file);
      ok = std::fclose(b.file) == 0 && ok;
      break;
  }
  b.mode = Body::Mode::kNone;
  b.file = nullptr;
  return ok;
}

bool BodyOutput::close() {
  if (!owned_) return std::fflush(stdout) == 0;
  owned_ = false;
  const bool ok = std::fclose(file_) == 0;
  if (remove_output_) {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  return ok;
}

}  // namespace abide::cli
