// Test support: runs a program (usually the abide CLI) and captures what it did.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "servers/exec_argv.h"

namespace abide::test {

// The full path of an executable found on PATH, or "" when there is none.
inline std::string program_on_path(const std::string& name) {
  const char* env = std::getenv("PATH");
  std::istringstream dirs(env != nullptr ? env : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

struct RunResult {
  int exit_code = -1;  // exit status, or 128 + signal number
  std::string out;
  std::string err;
};

// Runs argv[0] with the given arguments and standard input; waits for it,
// for at most 240 s: a child that hangs is killed and says so in `err`, so
// that the test fails with what the child wrote rather than at ctest's timeout.
inline RunResult run(const std::vector<std::string>& argv, const std::string& input = {}) {
  int in[2], out[2], err[2];
  if (pipe(in) != 0 || pipe(out) != 0 || pipe(err) != 0) return {};
  const std::vector<char*> args = exec_argv(argv);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
    execv(args[0], args.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  signal(SIGPIPE, SIG_IGN);
  std::size_t written = 0;
  if (input.empty()) {
    close(in[1]);
    in[1] = -1;
  }
  RunResult r;
  pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {in[1], POLLOUT, 0}};
  int open_outputs = 2;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds{240};
  bool killed = false;
  while (open_outputs > 0) {
    const nfds_t n = in[1] >= 0 ? 3 : 2;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now());
    const int ready = poll(fds, n, killed ? -1 : static_cast<int>(std::max<std::int64_t>(0, left.count())));
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (ready == 0 && !killed) {
      kill(pid, SIGKILL);
      killed = true;
      r.err += "\n[test support: " + argv.front() + " was still running after 240 s and was killed]\n";
      continue;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd >= 0 && (fds[i].revents & (POLLIN | POLLHUP))) {
        char buf[4096];
        const ssize_t k = read(fds[i].fd, buf, sizeof buf);
        if (k <= 0) {
          close(fds[i].fd);
          fds[i].fd = -1;
          --open_outputs;
        } else {
          (i == 0 ? r.out : r.err).append(buf, static_cast<std::size_t>(k));
        }
      }
    }
    if (in[1] >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t k = write(in[1], input.data() + written, input.size() - written);
      if (k > 0) written += static_cast<std::size_t>(k);
      if (k <= 0 || written == input.size()) {
        close(in[1]);
        in[1] = -1;
      }
    }
  }
  if (in[1] >= 0) close(in[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

#ifdef ABIDE_CLI_PATH
// Runs the abide CLI with the given arguments.
inline RunResult abide(std::vector<std::string> args, const std::string& input = {}) {
  args.insert(args.begin(), ABIDE_CLI_PATH);
  return run(args, input);
}
#endif

}  // namespace abide::test
