// Test and benchmark support: a private redis-server on a free loopback port
// and/or a unix socket in a temporary folder, started with persistence off
// (--save "" --appendonly no), and command() to look inside it through hiredis
// (where hiredis is installed; the server alone needs nothing but POSIX).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#if __has_include(<hiredis/hiredis.h>)
#include <hiredis/hiredis.h>
#define ABIDE_TEST_HAVE_HIREDIS 1
#else
#define ABIDE_TEST_HAVE_HIREDIS 0
#endif

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "servers/exec_argv.h"

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

// One reply, flattened: simple strings, errors and bulk strings as text,
// integers as integer, arrays as their elements (nested integers as text).
struct RespReply {
  bool ok = false;  // a reply was read
  char type = 0;    // as RESP writes it: '+' status, '-' error, ':' integer, '$' string or nil, '*' array
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

#if ABIDE_TEST_HAVE_HIREDIS
  // Sends one command over a new hiredis connection (the unix socket when
  // there is one) and reads the reply; `auth` is sent first when not empty.
  RespReply command(const std::vector<std::string>& args, const std::vector<std::string>& auth = {}) const {
    RespReply r;
    const timeval timeout{5, 0};
    redisContext* c = options_.unix_socket ? redisConnectUnixWithTimeout(socket_path().c_str(), timeout)
                                           : redisConnectWithTimeout("127.0.0.1", port_, timeout);
    if (c == nullptr) return r;
    if (c->err == 0) {
      redisSetTimeout(c, timeout);
      if (!auth.empty()) freeReplyObject(send(c, auth));
      if (redisReply* reply = send(c, args)) {
        r = flatten(*reply);
        freeReplyObject(reply);
      }
    }
    redisFree(c);
    return r;
  }
#endif

 private:
  bool launch(const std::string& binary) {
    std::vector<std::string> args{binary, "--save",      "",   "--appendonly", "no",     "--dir",
                                  dir_,   "--daemonize", "no", "--loglevel",   "notice", "--protected-mode",
                                  "no"};
    if (options_.tcp) {
      args.insert(args.end(), {"--port", std::to_string(port_), "--bind", "127.0.0.1"});
    } else {
      args.insert(args.end(), {"--port", "0"});
    }
    if (options_.unix_socket) args.insert(args.end(), {"--unixsocket", socket_path(), "--unixsocketperm", "700"});
    args.insert(args.end(), options_.extra.begin(), options_.extra.end());
    int out[2];
    if (pipe(out) != 0) return false;
    const std::vector<char*> argv = exec_argv(args);
    const pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
      dup2(out[1], 1);
      dup2(out[1], 2);
      close(out[0]);
      close(out[1]);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    // Event-driven start: read the log until it says it is ready (or exits).
    std::string log;
    bool ready = false;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds{10};
    while (!ready) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up -
                                                                              std::chrono::steady_clock::now());
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

#if ABIDE_TEST_HAVE_HIREDIS
  static redisReply* send(redisContext* c, const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    return static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()));
  }

  static RespReply flatten(const redisReply& reply) {
    RespReply r;
    r.ok = true;
    switch (reply.type) {
      case REDIS_REPLY_STATUS: r.type = '+'; break;
      case REDIS_REPLY_ERROR: r.type = '-'; break;
      case REDIS_REPLY_INTEGER: r.type = ':'; break;
      case REDIS_REPLY_ARRAY: r.type = '*'; break;
      default: r.type = '$'; break;  // a string, or nil (empty text)
    }
    if (reply.str != nullptr) r.text.assign(reply.str, reply.len);
    r.integer = reply.integer;
    for (std::size_t i = 0; reply.type == REDIS_REPLY_ARRAY && i < reply.elements; ++i) {
      const redisReply& e = *reply.element[i];
      r.elements.push_back(e.type == REDIS_REPLY_INTEGER ? std::to_string(e.integer)
                                                         : std::string(e.str != nullptr ? e.str : "", e.len));
    }
    return r;
  }
#endif

  Options options_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace abide::test
