// Test support: a program running in the background (usually `abide
// mock-server`), whose stdout lines a test can read while it runs, and which is
// stopped by a signal at the end. Waits are bounded; a child still running when
// the object dies is killed (and it dies with the test process, PR_SET_PDEATHSIG).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <vector>

#include "support/run.h"

namespace abide::test {

class BackgroundProcess {
 public:
  // Starts argv[0] with the given arguments; stdin is /dev/null, stdout and
  // stderr are pipes. Check running() for success.
  explicit BackgroundProcess(const std::vector<std::string>& argv) {
    int out[2], err[2];
    if (pipe(out) != 0) return;
    if (pipe(err) != 0) {
      close(out[0]);
      close(out[1]);
      return;
    }
    signal(SIGPIPE, SIG_IGN);
    const std::vector<char*> args = exec_argv(argv);
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) dup2(devnull, 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
      execv(args[0], args.data());
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    if (pid_ < 0) {
      close(out[0]);
      close(err[0]);
      return;
    }
    out_ = out[0];
    err_ = err[0];
  }

  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  ~BackgroundProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    for (int fd : {out_, err_})
      if (fd >= 0) close(fd);
  }

  bool running() const noexcept { return pid_ > 0 && !reaped_; }
  pid_t pid() const noexcept { return pid_; }

  // The next line of stdout (without the newline), waiting at most `timeout`;
  // nullopt on timeout or end of output. Stderr is collected meanwhile.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (const auto nl = out_buf_.find('\n'); nl != std::string::npos) {
        std::string line = out_buf_.substr(0, nl);
        out_buf_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                              std::chrono::steady_clock::now());
      if (left.count() <= 0 || out_ < 0) return std::nullopt;
      pump(static_cast<int>(left.count()));
    }
  }

  // Sends `sig`, waits at most `timeout` for the process to end (then kills
  // it), and returns its exit status (128 + signal when killed) with the rest
  // of its stdout (lines not yet read) and stderr.
  RunResult stop(int sig = SIGTERM, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    if (running()) kill(pid_, sig);
    return wait(timeout);
  }

  // Waits at most `timeout` for the process to end by itself (then kills it).
  RunResult wait(std::chrono::milliseconds timeout) {
    RunResult r;
    if (pid_ <= 0) return r;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (out_ >= 0 || err_ >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                              std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        kill(pid_, SIGKILL);
        break;
      }
      pump(static_cast<int>(left.count()));
    }
    int status = 0;
    if (!reaped_) waitpid(pid_, &status, 0);
    reaped_ = true;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = std::move(out_buf_);
    r.err = std::move(err_buf_);
    return r;
  }

  // What the process wrote on stderr so far.
  const std::string& err_so_far() const noexcept { return err_buf_; }

 private:
  // Reads whatever is available on stdout and stderr, waiting up to timeout_ms.
  void pump(int timeout_ms) {
    pollfd fds[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
    const int n = poll(fds, 2, timeout_ms);
    if (n < 0 && errno != EINTR) {
      for (int* fd : {&out_, &err_}) {
        if (*fd >= 0) close(*fd);
        *fd = -1;
      }
      return;
    }
    for (int i = 0; i < 2; ++i) {
      int& fd = i == 0 ? out_ : err_;
      if (fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[4096];
      const ssize_t k = read(fd, buf, sizeof buf);
      if (k <= 0) {
        close(fd);
        fd = -1;
      } else {
        (i == 0 ? out_buf_ : err_buf_).append(buf, static_cast<std::size_t>(k));
      }
    }
  }

  pid_t pid_ = -1;
  bool reaped_ = false;
  int out_ = -1;
  int err_ = -1;
  std::string out_buf_;
  std::string err_buf_;
};

}  // namespace abide::test
