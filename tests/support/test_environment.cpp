// Linked into every test program: what the programs it starts (the abide CLI)
// find in their environment. Tests never touch the real home directory, so
// XDG_STATE_HOME (where fetch and proxy keep their quota file and key
// secret) is a fresh folder of this process, removed at exit; and
// ABIDE_STORE=memory keeps each run's quota state its own, as before the
// file store, so that two tests that happen to use one port do not share a
// cooldown. Tests of the file store give --store file:PATH, or set their own
// environment for the child.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

std::string& state_home() {
  static std::string dir;
  return dir;
}

pid_t& owner() {
  static pid_t pid = 0;
  return pid;
}

// Only by the process that made it: a forked child that exits must not
// remove its parent's folder.
void remove_state_home() {
  std::error_code ec;
  if (!state_home().empty() && ::getpid() == owner()) std::filesystem::remove_all(state_home(), ec);
}

const bool kEnvironmentSet = [] {
  std::error_code ec;
  const auto dir = std::filesystem::temp_directory_path(ec) / ("abide-test-state-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir, ec);
  state_home() = dir.string();
  owner() = ::getpid();
  ::setenv("XDG_STATE_HOME", state_home().c_str(), 1);
  ::setenv("ABIDE_STORE", "memory", 1);
  std::atexit(remove_state_home);
  return true;
}();

}  // namespace
