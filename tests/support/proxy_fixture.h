// What the end-to-end tests of `abide proxy` (tests/proxy_*_test.cpp with
// processes) share: the client programs and what they printed, raw sockets,
// and the times in the answers' fields.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "servers/redis_server.h"
#include "support/concurrency.h"
#include "support/process.h"
#include "support/proxy_processes.h"
#include "support/run.h"

namespace abide::test {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

inline const std::string kClients = std::string(ABIDE_SOURCE_DIR) + "/tests/support/proxy_clients";

// ---- the programs ------------------------------------------------------------

// A test needs each client it runs: missing is a failure (CI installs them),
// except node when ABIDE_TEST_NO_NODE is set (a machine without it).
#define REQUIRE_PROGRAM(var, name)                                                                     \
  const std::string var##_name = (name);                                                               \
  const std::string var = program_on_path(var##_name);                                                 \
  do {                                                                                                 \
    if (var.empty() && var##_name == "node" && std::getenv("ABIDE_TEST_NO_NODE"))                      \
      GTEST_SKIP() << "node is not on PATH and ABIDE_TEST_NO_NODE is set";                             \
    ASSERT_FALSE(var.empty()) << var##_name << " is not on PATH (a test dependency: scripts/deps.sh)"; \
  } while (0)

// ---- the callers ---------------------------------------------------------------

// One answer, as a client program printed it (client.py / client.mjs / curl).
struct Answer {
  int status = 0;
  std::string outcome, attempts, waited, not_before, retry_after, error, body;
  std::size_t body_len = 0;
  double start_s = 0, head_s = 0, end_s = 0;  // the client's own clock, from its start
  double start_unix = 0;                      // wall clock when the request began
  json chunks;                                // [[t_s, text], ...]
};

inline std::string field(const json& j, const char* name) {
  return j.contains(name) && j[name].is_string() ? j[name].get<std::string>() : std::string();
}

inline std::vector<Answer> parse_lines(const std::string& out) {
  std::vector<Answer> answers;
  std::stringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    Answer a;
    a.status = j.value("status", 0);
    a.outcome = field(j, "outcome");
    a.attempts = field(j, "attempts");
    a.waited = field(j, "waited");
    a.not_before = field(j, "not_before");
    a.retry_after = field(j, "retry_after");
    a.error = field(j, "error");
    a.body = field(j, "body");
    a.body_len = j.value("body_len", std::size_t{0});
    a.start_s = j.value("start_s", 0.0);
    a.start_unix = j.value("start_unix", 0.0);
    a.head_s = j.value("head_s", 0.0);
    a.end_s = j.value("end_s", 0.0);
    if (j.contains("chunks")) a.chunks = j["chunks"];
    answers.push_back(std::move(a));
  }
  return answers;
}

struct ClientRun {
  RunResult raw;
  std::vector<Answer> answers;
};

// client.py or client.mjs (`interpreter` is python3 or node) with these options.
inline ClientRun run_client(const std::string& interpreter, const std::string& script,
                            const std::vector<std::string>& args) {
  ClientRun r;
  r.raw = run(with({interpreter, kClients + "/" + script}, args));
  r.answers = parse_lines(r.raw.out);
  return r;
}

// `curl` (no --retry) fetching each URL in turn on one kept-alive connection;
// one Answer per response head it printed.
inline ClientRun run_curl(const std::string& curl, const std::vector<std::string>& urls,
                          const std::vector<std::string>& headers) {
  std::vector<std::string> argv{curl, "-sS", "-D", "-", "--max-time", "60"};
  for (const auto& h : headers) argv.insert(argv.end(), {"-H", h});
  for (const auto& u : urls) argv.insert(argv.end(), {u, "-o", "/dev/null"});
  ClientRun r;
  r.raw = run(argv);
  std::stringstream in(r.raw.out);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("HTTP/", 0) == 0) {
      Answer a;
      const auto sp = line.find(' ');
      a.status = sp == std::string::npos ? 0 : std::atoi(line.c_str() + sp + 1);
      r.answers.push_back(a);
      continue;
    }
    if (r.answers.empty()) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    Answer& a = r.answers.back();
    if (name == "abide-outcome") a.outcome = value;
    if (name == "abide-attempts") a.attempts = value;
    if (name == "abide-waited") a.waited = value;
    if (name == "abide-not-before") a.not_before = value;
    if (name == "retry-after") a.retry_after = value;
  }
  return r;
}

inline std::string describe(const ClientRun& r) { return "stdout:\n" + r.raw.out + "\nstderr:\n" + r.raw.err; }

// ---- raw sockets -------------------------------------------------------------

inline int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

inline bool send_all(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t k = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (k <= 0) return false;
    done += static_cast<std::size_t>(k);
  }
  return true;
}

// Reads until the peer closes, or until a whole answer (head and a
// Content-Length body) is in, or `timeout`.
inline std::string read_answer(int fd, std::chrono::milliseconds timeout) {
  std::string got;
  const auto end = Clock::now() + timeout;
  for (;;) {
    const auto head_end = got.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      std::string lower = got.substr(0, head_end);
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const auto cl = lower.find("\r\ncontent-length:");
      if (cl != std::string::npos && got.size() >= head_end + 4 + std::strtoull(lower.c_str() + cl + 17, nullptr, 10))
        return got;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (left <= 0) return got;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[8192];
    const ssize_t k = recv(fd, buf, sizeof buf, 0);
    if (k <= 0) return got;
    got.append(buf, static_cast<std::size_t>(k));
  }
}

// An upstream that answers every request with the same bytes, written as
// given (heads no HTTP library would send), then closes the connection.
class RawUpstream {
 public:
  explicit RawUpstream(std::string answer) : answer_(std::move(answer)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(listen_fd_, 8) != 0 || getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        const int fd = accept(listen_fd_, nullptr, nullptr);
        if (fd < 0) return;  // closed by the destructor
        std::string got;
        char buf[4096];
        while (got.find("\r\n\r\n") == std::string::npos) {
          const ssize_t k = recv(fd, buf, sizeof buf, 0);
          if (k <= 0) break;
          got.append(buf, static_cast<std::size_t>(k));
        }
        ++requests_;
        send_all(fd, answer_);
        shutdown(fd, SHUT_WR);
        while (recv(fd, buf, sizeof buf, 0) > 0) {
        }
        close(fd);
      }
    });
  }
  ~RawUpstream() {
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    if (thread_.joinable()) thread_.join();
  }
  RawUpstream(const RawUpstream&) = delete;
  RawUpstream& operator=(const RawUpstream&) = delete;
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }

 private:
  std::string answer_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> requests_{0};
  std::thread thread_;
};

// One exchange on a new connection: `request` sent (as far as the peer
// takes it), the answer read.
inline std::string raw_exchange(int port, const std::string& request, std::chrono::milliseconds timeout = 20s) {
  const int fd = connect_loopback(port);
  if (fd < 0) return {};
  send_all(fd, request);  // a peer that answers early and closes may refuse the rest
  std::string got = read_answer(fd, timeout);
  close(fd);
  return got;
}

struct RawAnswer {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  std::string header(const std::string& lower_name) const {
    for (const auto& [n, v] : headers)
      if (n == lower_name) return v;
    return {};
  }
  bool has(const std::string& lower_name) const {
    for (const auto& [n, v] : headers)
      if (n == lower_name) return true;
    return false;
  }
};

inline RawAnswer parse_answer(const std::string& bytes) {
  RawAnswer a;
  const auto head_end = bytes.find("\r\n\r\n");
  if (bytes.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos) return a;
  a.status = std::atoi(bytes.c_str() + 9);
  std::stringstream head(bytes.substr(0, head_end));
  std::string line;
  std::getline(head, line);
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
    a.headers.emplace_back(name, value);
  }
  a.body = bytes.substr(head_end + 4);
  return a;
}

// "2026-12-01T14:03:12.345Z" (RFC 3339 UTC) as Unix seconds; nullopt when not that form.
inline std::optional<double> rfc3339_unix(const std::string& s) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                  &tm.tm_sec, &consumed) != 6 ||
      consumed != 19)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  double frac = 0;
  std::size_t i = 19;
  if (i < s.size() && s[i] == '.') {
    double scale = 0.1;
    for (++i; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i, scale /= 10)
      frac += (s[i] - '0') * scale;
  }
  if (i + 1 != s.size() || s[i] != 'Z') return std::nullopt;
  return static_cast<double>(timegm(&tm)) + frac;
}

inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Whole non-negative seconds, as Retry-After must be; -1 otherwise.
inline long long whole_seconds(const std::string& s) {
  if (s.empty() || s.size() > 12) return -1;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
  return std::stoll(s);
}

inline double number(const std::string& s) { return s.empty() ? -1 : std::strtod(s.c_str(), nullptr); }

}  // namespace abide::test
