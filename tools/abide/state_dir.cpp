#include "state_dir.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace abide::cli {
namespace state_dir_cpp {  // private to this file (the tool is compiled in unity batches)

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

bool usable(const std::optional<std::string>& v) { return v && !v->empty() && v->front() == '/'; }

// Makes `dir` and its missing parents, each 0700. An existing directory is
// left as it is (its owner chose its mode); anything else in the way is an error.
Result<bool, ErrorMessage> make_dirs(const std::filesystem::path& dir) {
  std::filesystem::path so_far;
  for (const auto& part : dir) {
    so_far /= part;
    if (so_far == so_far.root_path()) continue;
    if (::mkdir(so_far.c_str(), 0700) == 0) {
      // The umask may only have narrowed it; 0700 exactly, so the owner can use it.
      ::chmod(so_far.c_str(), 0700);
      continue;
    }
    const int err = errno;
    struct stat st {};
    if (err == EEXIST && ::stat(so_far.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    if (err == EEXIST) return fail(so_far.string() + " is in the way of the state directory: it is not a directory");
    return fail("cannot create the state directory " + so_far.string() + ": " + std::strerror(err));
  }
  return true;
}

}  // namespace state_dir_cpp

Result<std::filesystem::path, ErrorMessage> state_dir_from(const std::optional<std::string>& xdg_state_home,
                                                          const std::optional<std::string>& home, bool create) {
  using namespace state_dir_cpp;
  std::filesystem::path dir;
  if (usable(xdg_state_home)) {
    dir = std::filesystem::path(*xdg_state_home) / kStateDirName;
  } else if (usable(home)) {
    dir = std::filesystem::path(*home) / ".local" / "state" / kStateDirName;
  } else {
    return fail(std::string("no state directory: set XDG_STATE_HOME or HOME to an absolute path"));
  }
  dir = dir.lexically_normal();
  if (create) {
    auto made = make_dirs(dir);
    if (!made) return fail(std::move(made.error()));
  }
  return dir;
}

Result<std::filesystem::path, ErrorMessage> state_dir(bool create) {
  using namespace state_dir_cpp;
  return state_dir_from(env("XDG_STATE_HOME"), env("HOME"), create);
}

}  // namespace abide::cli
