// own_transport URL N: sends N GETs one after another through abide's engine
// over a transport of its own (plain HTTP/1.1 on POSIX sockets; no libcurl),
// and prints one line per request: its status, attempts and time waited.
//
// The engine does the obeying (pacer, Retry-After, quota headers, backoff);
// the transport only sends and reports what came back. http:// only: a
// transport with TLS is written the same way.
#include <abide/engine.h>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

using abide::engine::Machine;
using abide::engine::Step;

constexpr std::size_t kMaxHead = 64 * 1024;  // a longer head is a transport error

// A connected socket, closed when it goes.
class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

int connect_to(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

// Waits for the socket to be readable until the attempt's deadline (if any),
// a slice at a time so that a stop is seen promptly. False: give up.
bool readable(int fd, const Step& step, const abide::MonotonicClock& mono, const std::stop_token& stop) {
  for (;;) {
    if (stop.stop_requested()) return false;
    int timeout_ms = 100;
    if (step.deadline) {
      const abide::Duration left = *step.deadline - mono.now();
      if (left <= abide::Duration::zero()) return false;
      timeout_ms = static_cast<int>(
          std::min<std::int64_t>(100, std::chrono::ceil<std::chrono::milliseconds>(left).count()));
    }
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, timeout_ms);
    if (n > 0) return true;
    if (n < 0) return false;
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// HTTP/1.1 over a fresh connection per attempt ("Connection: close"), so the
// body runs to Content-Length or to the close. Chunked bodies are passed on
// as they come (this example does not decode them).
class SocketTransport final : public abide::engine::Transport {
 public:
  explicit SocketTransport(const abide::engine::Engine& engine) : engine_(engine) {}

  void perform(const abide::engine::Request& req, const Step& step, Machine& m, std::stop_token stop) override {
    const auto url = abide::parse_origin(req.url);
    if (!url || url->scheme != "http") {
      m.failed("this transport speaks http:// only", false);
      return;
    }
    Socket s(connect_to(url->host, url->port));
    if (s.fd() < 0) {
      m.failed("could not connect to " + url->host, false);
      return;
    }
    std::string out = req.method + " " + url->target + " HTTP/1.1\r\nHost: " + url->host;
    if (url->port != 80) out += ":" + std::to_string(url->port);
    out += "\r\nConnection: close\r\nUser-Agent: own_transport\r\n";
    for (const abide::Header& h : req.headers.lines()) out += h.name + ": " + h.value + "\r\n";
    if (req.idempotency_key) out += "Idempotency-Key: " + *req.idempotency_key + "\r\n";
    if (!req.body.empty()) out += "Content-Length: " + std::to_string(req.body.size()) + "\r\n";
    out += "\r\n" + req.body;
    for (std::size_t done = 0; done < out.size();) {
      const ssize_t n = ::send(s.fd(), out.data() + done, out.size() - done, MSG_NOSIGNAL);
      if (n <= 0) {
        m.failed("send failed", done > 0);
        return;
      }
      done += static_cast<std::size_t>(n);
    }

    // The head: read until the blank line.
    std::string buf;
    std::size_t head_end = std::string::npos;
    char chunk[16384];
    while (head_end == std::string::npos) {
      if (!readable(s.fd(), step, engine_.mono(), stop)) {
        m.failed(stop.stop_requested() ? "cancelled" : "timed out waiting for the response", true);
        return;
      }
      const ssize_t n = ::recv(s.fd(), chunk, sizeof chunk, 0);
      if (n <= 0) {
        m.failed("connection closed before the response head", true);
        return;
      }
      buf.append(chunk, static_cast<std::size_t>(n));
      head_end = buf.find("\r\n\r\n");
      if (head_end == std::string::npos && buf.size() > kMaxHead) {
        m.failed("response head too long", true);
        return;
      }
    }
    const abide::WallTime received_wall = engine_.wall().now();
    const abide::MonoTime received_mono = engine_.mono().now();
    const std::string_view head(buf.data(), head_end);
    const std::size_t line_end = head.find("\r\n");
    const std::string_view status_line = head.substr(0, line_end);
    int status = 0;
    if (status_line.size() < 12 || status_line.substr(0, 5) != "HTTP/" ||
        std::from_chars(status_line.data() + 9, status_line.data() + 12, status).ec != std::errc{} || status < 100 ||
        status > 999) {
      m.failed("malformed status line", true);
      return;
    }
    abide::HeaderList headers;
    std::optional<std::size_t> length;
    std::string_view rest = line_end == std::string_view::npos ? std::string_view{} : head.substr(line_end + 2);
    while (!rest.empty()) {
      const std::size_t e = rest.find("\r\n");
      const std::string_view line = rest.substr(0, e);
      rest = e == std::string_view::npos ? std::string_view{} : rest.substr(e + 2);
      const std::size_t colon = line.find(':');
      if (colon == std::string_view::npos || colon == 0) continue;
      const std::string_view name = line.substr(0, colon);
      const std::string_view value = trim(line.substr(colon + 1));
      headers.add(name, value);
      if (abide::iequals(name, "Content-Length")) {
        std::size_t v = 0;
        if (std::from_chars(value.data(), value.data() + value.size(), v).ec == std::errc{}) length = v;
      }
    }
    if (status < 200) {  // 1xx: this example sends no Expect, so treat it as malformed
      m.failed("unexpected interim response", true);
      return;
    }
    if (!m.head(status, std::move(headers), received_wall, received_mono)) return;  // not wanted: drop it

    // The body, as it arrives.
    std::size_t got = buf.size() - (head_end + 4);
    if (got > 0 && !m.body(std::string_view(buf).substr(head_end + 4))) return;
    if (req.method == "HEAD" || status == 204 || status == 304) length = 0;
    while (!length || got < *length) {
      if (!readable(s.fd(), step, engine_.mono(), stop)) {
        m.failed(stop.stop_requested() ? "cancelled" : "timed out in the body", true);
        return;
      }
      const ssize_t n = ::recv(s.fd(), chunk, sizeof chunk, 0);
      if (n == 0 && !length) break;  // the body ran to the close
      if (n <= 0) {
        m.failed("connection closed in the body", true);
        return;
      }
      got += static_cast<std::size_t>(n);
      if (!m.body(std::string_view(chunk, static_cast<std::size_t>(n)))) return;
    }
    m.complete();
  }

 private:
  const abide::engine::Engine& engine_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: own_transport URL N\n");
    return 2;
  }
  const long n = std::strtol(argv[2], nullptr, 10);
  if (n < 1 || n > 1000000 || !abide::parse_origin(argv[1])) {
    std::fprintf(stderr, "own_transport: need an http:// URL and a count from 1\n");
    return 2;
  }
  abide::engine::Config config;
  config.planner.max_wait = std::chrono::minutes{5};  // a longer hint ends the request as deferred
  abide::engine::Engine engine(config);
  SocketTransport transport(engine);
  abide::engine::Request req;
  req.url = argv[1];
  int failures = 0;
  for (long i = 1; i <= n; ++i) {
    std::size_t bytes = 0;
    const abide::engine::RequestOutcome out = engine.run(req, transport, [&bytes](std::string_view c) {
      bytes += c.size();
      return true;
    });
    const int status = out.response ? out.response->status : 0;
    std::printf("%ld status=%d attempts=%zu waited=%.3fs outcome=%s\n", i, status, out.attempts.size(),
                abide::to_seconds(out.waited), std::string(abide::engine::to_string(out.kind)).c_str());
    std::fflush(stdout);
    if (!out.done()) ++failures;
  }
  return failures == 0 ? 0 : 1;
}
