// Test and benchmark support: a private redis-server on a free loopback port
// and/or a unix socket in a temporary folder, started with persistence off
// (--save "" --appendonly no), and a minimal RESP client to look inside it.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace abide::test {

// The redis-server binary, or empty when none is installed.
inline std::string redis_server_binary() {
  for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return {};
}

// A free TCP port on 127.0.0.1 (free when asked; a race is retried by start()).
inline int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    socklen_t len = sizeof a;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

// A loopback port nothing listens on, held for the object's life: the socket
// is bound but never listens, so connections are refused, and no other test
// (running in parallel) can start a server on it meanwhile, as it could on a
// port that was merely free when asked.
class DeadPort {
 public:
  DeadPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) return;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
    }
  }
  ~DeadPort() {
    if (fd_ >= 0) close(fd_);
  }
  DeadPort(const DeadPort&) = delete;
  DeadPort& operator=(const DeadPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// One RESP reply, flattened: simple strings, errors ("-..."), integers and
// bulk strings as text; arrays as their elements.
struct RespReply {
  bool ok = false;  // a reply was read
  char type = 0;    // '+', '-', ':', '$', '*'
  std::string text;
  long long integer = 0;
  std::vector<std::string> elements;
};

class RedisServer {
 public:
  struct Options {
    bool tcp = true;
    bool unix_socket = true;
    std::vector<std::string> extra;  // more redis-server arguments
  };

  explicit RedisServer(Options options) : options_(std::move(options)) {
    char tmpl[] = "/tmp/abide-redis-XXXXXX";
    if (mkdtemp(tmpl) != nullptr) dir_ = tmpl;
  }
  RedisServer() : RedisServer(Options{}) {}
  ~RedisServer() {
    stop();
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts (or restarts, on the same port and socket) and waits until it
  // accepts connections. False when there is no redis-server or it would not start.
  bool start() {
    if (pid_ > 0) return true;
    const std::string binary = redis_server_binary();
    if (binary.empty() || dir_.empty()) return false;
    for (int attempt = 0; attempt < 5; ++attempt) {
      if (options_.tcp && (port_ == 0 || attempt > 0)) port_ = free_loopback_port();
      if (launch(binary)) return true;
    }
    return false;
  }

  // SIGKILL: the server vanishes mid-run.
  void kill_now() { end(SIGKILL); }
  // SIGTERM and wait.
  void stop() { end(SIGTERM); }
  bool running() const { return pid_ > 0; }
  // SIGSTOP / SIGCONT: a server that hangs without closing connections.
  void pause() {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
  }
  void resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
  }

  int port() const { return port_; }
  std::string socket_path() const { return dir_ + "/redis.sock"; }
  std::string tcp_url(const std::string& prefix = "") const {
    return "redis://127.0.0.1:" + std::to_string(port_) + (prefix.empty() ? "" : "/" + prefix);
  }

  // Sends one command over a new connection (unix socket when there is one)
  // and reads the reply; `auth` is sent first when not empty.
  RespReply command(const std::vector<std::string>& args, const std::vector<std::string>& auth = {}) const {
    const int fd = dial();
    RespReply r;
    if (fd < 0) return r;
    if (!auth.empty()) {
      send_command(fd, auth);
      read_reply(fd);
    }
    send_command(fd, args);
    r = read_reply(fd);
    close(fd);
    return r;
  }

 private:
  bool launch(const std::string& binary) {
    std::vector<std::string> args{binary, "--save", "", "--appendonly", "no", "--dir", dir_, "--daemonize", "no",
                                  "--loglevel", "notice", "--protected-mode", "no"};
    if (options_.tcp) {
      args.insert(args.end(), {"--port", std::to_string(port_), "--bind", "127.0.0.1"});
    } else {
      args.insert(args.end(), {"--port", "0"});
    }
    if (options_.unix_socket) args.insert(args.end(), {"--unixsocket", socket_path(), "--unixsocketperm", "700"});
    args.insert(args.end(), options_.extra.begin(), options_.extra.end());
    int out[2];
    if (pipe(out) != 0) return false;
    const pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
      dup2(out[1], 1);
      dup2(out[1], 2);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    // Event-driven start: read the log until it says it is ready (or exits).
    std::string log;
    bool ready = false;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds{10};
    while (!ready) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{out[0], POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[4096];
      const ssize_t n = read(out[0], buf, sizeof buf);
      if (n <= 0) break;
      log.append(buf, static_cast<std::size_t>(n));
      ready = log.find("eady to accept connections") != std::string::npos;
    }
    close(out[0]);  // redis ignores SIGPIPE; later log lines are dropped
    pid_ = pid;
    if (!ready) {
      end(SIGKILL);
      return false;
    }
    return true;
  }

  void end(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  int dial() const {
    if (options_.unix_socket) {
      const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::strncpy(a.sun_path, socket_path().c_str(), sizeof a.sun_path - 1);
      if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
      close(fd);
      return -1;
    }
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port_));
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
    close(fd);
    return -1;
  }

  static void send_command(int fd, const std::vector<std::string>& args) {
    std::string wire = "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& a : args) wire += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    std::size_t sent = 0;
    while (sent < wire.size()) {
      const ssize_t n = ::send(fd, wire.data() + sent, wire.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<std::size_t>(n);
    }
  }

  static std::optional<std::string> read_line(int fd) {
    std::string line;
    char c = 0;
    while (read(fd, &c, 1) == 1) {
      if (c == '\n') {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return line;
      }
      line.push_back(c);
    }
    return std::nullopt;
  }

  static std::optional<std::string> read_bulk(int fd, long long len) {
    if (len < 0) return std::string();
    std::string s(static_cast<std::size_t>(len) + 2, '\0');
    std::size_t got = 0;
    while (got < s.size()) {
      const ssize_t n = read(fd, s.data() + got, s.size() - got);
      if (n <= 0) return std::nullopt;
      got += static_cast<std::size_t>(n);
    }
    s.resize(static_cast<std::size_t>(len));
    return s;
  }

  static RespReply read_reply(int fd) {
    RespReply r;
    const auto line = read_line(fd);
    if (!line || line->empty()) return r;
    r.type = (*line)[0];
    r.text = line->substr(1);
    r.ok = true;
    if (r.type == ':' ) r.integer = std::atoll(r.text.c_str());
    if (r.type == '$') {
      auto b = read_bulk(fd, std::atoll(r.text.c_str()));
      r.text = b.value_or("");
    }
    if (r.type == '*') {
      const long long n = std::atoll(r.text.c_str());
      for (long long i = 0; i < n; ++i) {
        const RespReply e = read_reply(fd);
        r.elements.push_back(e.type == ':' ? std::to_string(e.integer) : e.text);
      }
    }
    return r;
  }

  Options options_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace abide::test
