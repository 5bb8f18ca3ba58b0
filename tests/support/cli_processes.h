// Test support shared by the end-to-end tests of the CLI: abide commands that
// listen (mock-server, proxy) as background processes on 127.0.0.1, each
// announcing its port on its first stdout line, and a client to reach each.
#pragma once

#ifdef ABIDE_CLI_PATH

#include <httplib.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/process.h"
#include "support/run.h"

namespace abide::test {

// A background abide command whose first stdout line is "listening on ADDR:PORT".
class Listening {
 public:
  explicit Listening(std::vector<std::string> args) : proc_(std::move(args)) {
    using namespace std::chrono_literals;
    const auto line = proc_.read_line(30s);
    const std::string prefix = "listening on ";
    if (line && line->rfind(prefix, 0) == 0) {
      first_line_ = *line;
      const auto colon = line->rfind(':');
      if (colon != std::string::npos) port_ = std::atoi(line->c_str() + colon + 1);
    }
  }
  int port() const { return port_; }
  const std::string& first_line() const { return first_line_; }
  std::string url(const std::string& target = "") const { return "http://127.0.0.1:" + std::to_string(port_) + target; }
  std::string err_so_far() const { return proc_.err_so_far(); }
  RunResult stop(int sig = SIGTERM, std::chrono::milliseconds timeout = std::chrono::seconds{20}) {
    return proc_.stop(sig, timeout);
  }
  bool running() const { return proc_.running(); }

  // A client of this process with bounded waits (a hung child fails the test, not ctest's timeout).
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(std::chrono::seconds{10});
    c.set_read_timeout(std::chrono::seconds{30});
    return c;
  }

 private:
  BackgroundProcess proc_;
  int port_ = -1;
  std::string first_line_;
};

// `head` followed by `tail`: a command line built from a fixed part and a test's options.
inline std::vector<std::string> with(std::vector<std::string> head, const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// `abide mock-server` with these options.
// `abide mock-server --port 0 --quiet` with these options, in the background
// (32 worker threads: plenty for a test's connections); stopped with SIGTERM,
// so that what it writes as it stops (--stats-file) is written.
class Mock : public Listening {
 public:
  explicit Mock(const std::vector<std::string>& args)
      : Listening(with({ABIDE_CLI_PATH, "mock-server", "--port", "0", "--quiet", "--threads", "32"}, args)) {}
  ~Mock() {
    if (running()) static_cast<void>(stop(SIGTERM, std::chrono::seconds{10}));
  }
  Mock(const Mock&) = delete;
  Mock& operator=(const Mock&) = delete;

  // Its /__stats JSON (null when it does not answer).
  nlohmann::json stats() const {
    auto c = client();
    const auto r = c.Get("/__stats");
    if (!r || r->status != 200) return nlohmann::json();
    return nlohmann::json::parse(r->body, nullptr, false);
  }
  // The API requests it has counted (-1 when it does not answer).
  long long requests() const {
    const nlohmann::json s = stats();
    return s.is_object() ? s["totals"]["requests"].get<long long>() : -1;
  }
  // Waits (bounded) until the mock has counted `n` API requests.
  bool wait_for_requests(long long n, std::chrono::milliseconds timeout = std::chrono::seconds{10}) const {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      if (requests() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    return false;
  }
  // Writes URLs /items/<first..first+n-1> of this mock to `path`, one a line.
  std::string url_file(const std::string& path, int n, int first = 1) const {
    std::ofstream out(path);
    out << "# a batch\n";
    for (int i = first; i < first + n; ++i) out << url("/items/" + std::to_string(i)) << "\n";
    return path;
  }
};

}  // namespace abide::test

#endif  // ABIDE_CLI_PATH
