#include "common.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <sstream>

#include "abide/headers.h"
#include "command.h"

namespace abide::cli {

std::string host_of(std::string h) {
  const auto scheme = h.find("://");
  if (scheme != std::string::npos) h = h.substr(scheme + 3);
  const auto slash = h.find_first_of("/?#");
  if (slash != std::string::npos) h = h.substr(0, slash);
  const auto at = h.rfind('@');
  if (at != std::string::npos) h = h.substr(at + 1);
  return h;
}

std::optional<std::size_t> raise_descriptor_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return std::nullopt;
  if (lim.rlim_cur != RLIM_INFINITY && (lim.rlim_max == RLIM_INFINITY || lim.rlim_cur < lim.rlim_max)) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  if (lim.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<std::size_t>(lim.rlim_cur);
}

Result<std::string, ErrorMessage> read_text(const std::string& path) {
  if (path.empty() || path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    if (std::cin.bad()) return fail(ErrorMessage("cannot read standard input"));
    return ss.str();
  }
  // POSIX reads, not a stream: libstdc++'s file stream throws on a folder.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const auto failed = [&path](int error) { return fail(ErrorMessage("cannot read " + path + ": " + std::strerror(error))); };
  if (fd < 0) return failed(errno);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return failed(EISDIR);
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    const int error = n < 0 ? errno : 0;
    ::close(fd);
    if (error != 0) return failed(error);
    return text;
  }
}

std::string input_name(const std::string& path) { return path.empty() || path == "-" ? "<stdin>" : path; }

std::optional<std::string> read_input(const std::string& path) {
  auto text = read_text(path);
  if (!text) {
    std::cerr << "abide: " << text.error().text << "\n";
    return std::nullopt;
  }
  return std::move(*text);
}

int reject(std::string_view what) {
  std::cerr << "abide: " << what << "\n";
  return kExitRejected;
}

std::string safe_text(std::string_view text, std::size_t max_bytes) {
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f) return abide::printable(text, max_bytes);
  }
  if (text.size() <= max_bytes) return std::string(text);
  std::string out(text.substr(0, max_bytes));
  out += "...";
  return out;
}

Duration seconds_option(double s) {
  if (!(s > 0)) return Duration::zero();
  if (s > 1e9) return kMaxDuration;
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

Result<ProfileRegistry, RejectedProfileFile> load_profiles(const std::vector<std::string>& files) {
  ProfileRegistry registry = ProfileRegistry::with_builtins();
  for (const std::string& f : files) {
    auto loaded = registry.load_file(f);
    if (!loaded) return fail(RejectedProfileFile{f, loaded.error()});
  }
  return registry;
}

std::optional<std::string> unknown_profile(const ProfileRegistry& registry, std::string_view chosen,
                                           bool auto_allowed) {
  if (chosen.empty() || chosen == "none" || (auto_allowed && chosen == "auto")) return std::nullopt;
  if (registry.find(chosen) != nullptr) return std::nullopt;
  std::string names;
  for (const Profile* p : registry.all()) names += (names.empty() ? "" : ", ") + p->name;
  return "no profile named \"" + std::string(chosen) + "\" (known: " + names + (auto_allowed ? ", auto" : "") +
         ", or none)";
}

Result<ProfileRegistry, int> load_chosen_profiles(const std::vector<std::string>& files, std::string_view chosen) {
  auto profiles = load_profiles(files);
  if (!profiles) return fail(reject("profile rejected: " + profiles.error().error.what()));
  if (const auto unknown = unknown_profile(*profiles, chosen)) {
    std::cerr << "abide: " << *unknown << "\n";
    return fail(kExitUsage);
  }
  return std::move(*profiles);
}

}  // namespace abide::cli
