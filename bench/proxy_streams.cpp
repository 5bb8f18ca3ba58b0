// proxy_streams: the streams scenario's callers for bench/proxy/run.py.
//
// N keep-alive HTTP/1.1 connections to a proxy, opened and left idle; on a
// line "stream" on standard input every one sends GET PATH and reads its
// whole trickled answer, all at once. The answers are event streams of
// bench/proxy/stream_upstream.js ("id: I\ndata: I/K t=MS\n\n"), checked
// event by event: a stream is whole when its K events came in order and the
// answer ended cleanly (the last chunk, its Content-Length, or a close after
// K events). Meanwhile a second thread times a fresh caller: a new
// connection, GET FRESH_PATH, the whole answer, every --probe-every-ms.
//
// Standard output, one JSON object a line, each with its "phase":
//   connected  once every connection is open (or failed): run.py measures
//              the idle proxy, then writes "stream" (EOF: stop here);
//   sent       the requests are out;
//   done       everything: statuses, whole streams, failures by reason, how
//              late the events arrived (their t= against this process's
//              CLOCK_MONOTONIC, the clock Node's hrtime reads), the probes.
//
// One thread and one epoll set for all N, one shared read buffer, a few
// hundred bytes of state per connection: at 10,000 connections it spends far
// less than the proxy it measures. POSIX sockets and the standard library.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  int streams = 100;
  int events = 5;
  std::string path = "/stream";
  std::string fresh_path = "/fresh";
  int probe_every_ms = 500;
  double timeout_s = 60;    // after the requests are sent
  int connect_batch = 512;  // connects in flight at once
  double connect_timeout_s = 20;
};

double ms_since(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

// CLOCK_MONOTONIC in ms: the clock of the upstream's t= stamps.
double mono_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

bool iequals_prefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char a = line[i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (a != name[i]) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// What an answer's head says about its body.
struct Head {
  int status = -1;
  bool chunked = false;
  bool has_length = false;
  std::uint64_t length = 0;
};

bool parse_head(std::string_view head, Head& h) {
  if (head.size() < 12 || head.substr(0, 5) != "HTTP/") return false;
  if (std::from_chars(head.data() + 9, head.data() + 12, h.status).ec != std::errc{}) return false;
  std::size_t at = head.find("\r\n");
  while (at != std::string_view::npos && at + 2 < head.size()) {
    const std::size_t start = at + 2;
    const std::size_t end = head.find("\r\n", start);
    if (end == std::string_view::npos || end == start) break;
    const std::string_view line = head.substr(start, end - start);
    if (iequals_prefix(line, "content-length:")) {
      const auto v = trim(line.substr(15));
      if (std::from_chars(v.data(), v.data() + v.size(), h.length).ec != std::errc{}) return false;
      h.has_length = true;
    } else if (iequals_prefix(line, "transfer-encoding:")) {
      const auto v = trim(line.substr(18));
      h.chunked = v.size() >= 7 && iequals_prefix(v.substr(v.size() - 7), "chunked");
    }
    at = end;
  }
  return true;
}

// ---- the streams ----------------------------------------------------------------

enum class State : std::uint8_t {
  kConnecting,
  kIdle,
  kHead,
  kChunkSize,
  kChunkData,
  kChunkEnd,
  kTrailer,
  kLength,
  kToClose,
  kDone,
  kFailed
};

struct Conn {
  int fd = -1;
  State state = State::kConnecting;
  bool whole = false;
  int status = 0;
  int events = 0;
  std::uint64_t remaining = 0;
  std::string line;     // the head, a chunk-size line or a trailer line, as it comes
  std::string pending;  // body text after the last complete event
  Clock::time_point started{};
};

struct Totals {
  int connected = 0;
  int connect_errors = 0;
  std::string first_connect_error;
  int closed_while_idle = 0;
  int sent = 0;
  int whole = 0;
  int unfinished = 0;
  std::map<int, int> statuses;
  std::map<std::string, int> failures;
  std::vector<float> event_delay_ms;
  std::vector<float> head_ms;
  long long events = 0;
  double stream_s = 0;
};

class Streams {
 public:
  Streams(const Options& o, const sockaddr_in& addr) : o_(o), addr_(addr), conns_(static_cast<std::size_t>(o.streams)) {
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    request_ = "GET " + o.path + " HTTP/1.1\r\nHost: " + o.host + ":" + std::to_string(o.port) +
               "\r\nUser-Agent: proxy_streams\r\nAccept: text/event-stream\r\n\r\n";
    t_.event_delay_ms.reserve(static_cast<std::size_t>(o.streams) * static_cast<std::size_t>(o.events));
  }
  ~Streams() {
    for (Conn& c : conns_)
      if (c.fd >= 0) ::close(c.fd);
    if (epfd_ >= 0) ::close(epfd_);
  }
  Streams(const Streams&) = delete;
  Streams& operator=(const Streams&) = delete;

  Totals& totals() { return t_; }

  // Opens every connection, at most connect_batch in flight.
  void connect_all() {
    std::size_t next = 0;
    int in_flight = 0;
    const auto give_up = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(o_.connect_timeout_s));
    while ((next < conns_.size() || in_flight > 0) && Clock::now() < give_up) {
      while (next < conns_.size() && in_flight < o_.connect_batch) {
        if (start_connect(next)) ++in_flight;
        ++next;
      }
      epoll_event evs[256];
      const int n = ::epoll_wait(epfd_, evs, 256, 100);
      for (int i = 0; i < n; ++i) {
        const std::size_t k = evs[i].data.u64;
        Conn& c = conns_[k];
        if (c.state != State::kConnecting) {
          on_ready(k, evs[i].events);
          continue;
        }
        --in_flight;
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          connect_failed(c, std::string("connect: ") + std::strerror(err));
          continue;
        }
        c.state = State::kIdle;
        ++t_.connected;
        // From now on only input matters: an idle connection the proxy closes.
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.u64 = k;
        ::epoll_ctl(epfd_, EPOLL_CTL_MOD, c.fd, &ev);
      }
    }
    for (Conn& c : conns_)
      if (c.state == State::kConnecting) connect_failed(c, c.fd < 0 ? "not attempted" : "connect: timed out");
  }

  // Waits for a line on `control_fd` ("stream": go on; EOF: stop), noting
  // the idle connections the proxy closes meanwhile.
  bool idle_until(int control_fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kControl;
    ::epoll_ctl(epfd_, EPOLL_CTL_ADD, control_fd, &ev);
    std::string line;
    for (;;) {
      epoll_event evs[256];
      const int n = ::epoll_wait(epfd_, evs, 256, 1000);
      for (int i = 0; i < n; ++i) {
        if (evs[i].data.u64 != kControl) {
          on_ready(evs[i].data.u64, evs[i].events);
          continue;
        }
        char buf[256];
        const ssize_t k = ::read(control_fd, buf, sizeof buf);
        if (k <= 0) {
          ::epoll_ctl(epfd_, EPOLL_CTL_DEL, control_fd, nullptr);
          return false;
        }
        line.append(buf, static_cast<std::size_t>(k));
        if (line.find('\n') != std::string::npos) {
          ::epoll_ctl(epfd_, EPOLL_CTL_DEL, control_fd, nullptr);
          return line.starts_with("stream");
        }
      }
    }
  }

  // Every idle connection sends its request.
  void send_all() {
    sent_at_ = Clock::now();
    for (std::size_t k = 0; k < conns_.size(); ++k) {
      Conn& c = conns_[k];
      if (c.state != State::kIdle) continue;
      const ssize_t n = ::send(c.fd, request_.data(), request_.size(), MSG_NOSIGNAL);
      if (n != static_cast<ssize_t>(request_.size())) {
        fail(c, n < 0 ? std::string("send: ") + std::strerror(errno) : "send: partial");
        continue;
      }
      c.state = State::kHead;
      c.started = Clock::now();
      ++t_.sent;
    }
    open_ = t_.sent;
  }

  // Reads the answers until all ended or the timeout.
  void stream() {
    const auto give_up = sent_at_ +
                         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.timeout_s));
    Clock::time_point last_end = sent_at_;
    while (open_ > 0 && Clock::now() < give_up) {
      epoll_event evs[512];
      const int n = ::epoll_wait(epfd_, evs, 512, 200);
      for (int i = 0; i < n; ++i) {
        const int before = open_;
        on_ready(evs[i].data.u64, evs[i].events);
        if (open_ < before) last_end = Clock::now();
      }
    }
    for (Conn& c : conns_) {
      if (c.state == State::kDone || c.state == State::kFailed || c.state == State::kIdle) continue;
      ++t_.unfinished;
      if (c.fd >= 0) ::close(c.fd);
      c.fd = -1;
    }
    t_.stream_s = std::chrono::duration<double>(last_end - sent_at_).count();
  }

 private:
  static constexpr std::uint64_t kControl = ~std::uint64_t{0};

  bool start_connect(std::size_t k) {
    Conn& c = conns_[k];
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) {
      connect_failed(c, std::string("socket: ") + std::strerror(errno));
      return false;
    }
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(c.fd, reinterpret_cast<const sockaddr*>(&addr_), sizeof addr_) != 0 && errno != EINPROGRESS) {
      connect_failed(c, std::string("connect: ") + std::strerror(errno));
      return false;
    }
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.u64 = k;
    ::epoll_ctl(epfd_, EPOLL_CTL_ADD, c.fd, &ev);
    return true;
  }

  void connect_failed(Conn& c, const std::string& why) {
    ++t_.connect_errors;
    if (t_.first_connect_error.empty()) t_.first_connect_error = why;
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
    c.state = State::kFailed;
  }

  void fail(Conn& c, const std::string& why) {
    if (c.state != State::kIdle) {
      ++t_.failures[why];
      --open_;
    }
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
    c.state = State::kFailed;
  }

  void finish(Conn& c) {
    // A 200 is whole when every event came and nothing followed the last.
    c.whole = c.status == 200 && c.events == o_.events && c.pending.empty();
    if (c.whole) ++t_.whole;
    else if (c.status == 200) ++t_.failures[c.events == o_.events ? "extra bytes after the last event" : "ended early"];
    else ++t_.failures["status " + std::to_string(c.status)];
    --open_;
    ::close(c.fd);
    c.fd = -1;
    c.state = State::kDone;
  }

  void on_ready(std::uint64_t k, std::uint32_t events) {
    Conn& c = conns_[k];
    if (c.fd < 0) return;
    (void)events;  // errors and hang-ups show in recv
    for (;;) {
      const ssize_t n = ::recv(c.fd, buf_, sizeof buf_, 0);
      if (n > 0) {
        if (c.state == State::kIdle) {
          ++t_.closed_while_idle;  // the proxy spoke unasked: a 408, a 503
          fail(c, "");
          return;
        }
        if (!feed(c, std::string_view(buf_, static_cast<std::size_t>(n)))) return;
        if (c.state == State::kDone || c.state == State::kFailed) return;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0 && errno == EINTR) continue;
      // The end of the connection.
      if (c.state == State::kIdle) {
        ++t_.closed_while_idle;
        fail(c, "");
      } else if (c.state == State::kToClose) {
        finish(c);
      } else {
        fail(c, n == 0 ? "closed mid-answer" : std::string("recv: ") + std::strerror(errno));
      }
      return;
    }
  }

  // Body text: complete events are checked and dropped.
  bool body(Conn& c, std::string_view data) {
    c.pending.append(data);
    std::size_t at = 0;
    for (;;) {
      const std::size_t end = c.pending.find("\n\n", at);
      if (end == std::string::npos) break;
      const std::string_view ev(c.pending.data() + at, end - at);
      at = end + 2;
      // "id: I\ndata: I/K t=MS"
      const int want = c.events + 1;
      const std::string head = "id: " + std::to_string(want) + "\ndata: " + std::to_string(want) + "/" +
                               std::to_string(o_.events) + " t=";
      if (!ev.starts_with(head)) {
        fail(c, "an event out of order or malformed");
        return false;
      }
      double stamp = 0;
      const std::string_view t = ev.substr(head.size());
      if (std::from_chars(t.data(), t.data() + t.size(), stamp).ec != std::errc{}) {
        fail(c, "an event without its time");
        return false;
      }
      t_.event_delay_ms.push_back(static_cast<float>(mono_ms() - stamp));
      ++c.events;
      ++t_.events;
    }
    c.pending.erase(0, at);
    return true;
  }

  // Feeds received bytes through the answer's framing; false when the connection ended.
  bool feed(Conn& c, std::string_view data) {
    while (!data.empty()) {
      switch (c.state) {
        case State::kHead: {
          const std::size_t before = c.line.size();
          c.line.append(data);
          const std::size_t end = c.line.find("\r\n\r\n", before >= 3 ? before - 3 : 0);
          if (end == std::string::npos) {
            if (c.line.size() > 65536) return fail(c, "head too large"), false;
            return true;
          }
          Head h;
          if (!parse_head(std::string_view(c.line).substr(0, end + 4), h)) return fail(c, "bad head"), false;
          t_.head_ms.push_back(static_cast<float>(ms_since(c.started, Clock::now())));
          c.status = h.status;
          ++t_.statuses[h.status];
          data = std::string_view(c.line).substr(end + 4);
          std::string rest(data);  // c.line is reused below
          c.line.clear();
          if (h.chunked) c.state = State::kChunkSize;
          else if (h.has_length) c.state = State::kLength, c.remaining = h.length;
          else c.state = State::kToClose;
          if (c.state == State::kLength && c.remaining == 0) {
            finish(c);
            return false;
          }
          return rest.empty() || feed(c, rest);
        }
        case State::kChunkSize:
        case State::kTrailer: {
          const std::size_t nl = data.find('\n');
          c.line.append(data.substr(0, nl == std::string_view::npos ? data.size() : nl + 1));
          if (nl == std::string_view::npos) {
            if (c.line.size() > 4096) return fail(c, "chunk line too long"), false;
            return true;
          }
          data.remove_prefix(nl + 1);
          const std::string_view line = trim(std::string_view(c.line).substr(0, c.line.size() - 1));
          if (c.state == State::kTrailer) {
            const bool last = line.empty();
            c.line.clear();
            if (last) {
              finish(c);
              return false;
            }
            break;
          }
          std::uint64_t size = 0;
          if (std::from_chars(line.data(), line.data() + line.size(), size, 16).ec != std::errc{})
            return fail(c, "bad chunk size"), false;
          c.line.clear();
          if (size == 0) c.state = State::kTrailer;
          else c.state = State::kChunkData, c.remaining = size;
          break;
        }
        case State::kChunkData:
        case State::kLength: {
          const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(c.remaining, data.size()));
          if (!body(c, data.substr(0, take))) return false;
          data.remove_prefix(take);
          c.remaining -= take;
          if (c.remaining == 0) {
            if (c.state == State::kLength) {
              finish(c);
              return false;
            }
            c.state = State::kChunkEnd;
            c.remaining = 2;
          }
          break;
        }
        case State::kChunkEnd: {
          // The CRLF after a chunk's data.
          while (c.remaining > 0 && !data.empty()) {
            const char want = c.remaining == 2 ? '\r' : '\n';
            if (data.front() != want) return fail(c, "bad chunk end"), false;
            data.remove_prefix(1);
            --c.remaining;
          }
          if (c.remaining == 0) c.state = State::kChunkSize;
          break;
        }
        case State::kToClose:
          if (!body(c, data)) return false;
          return true;
        default: return fail(c, "bytes after the answer"), false;
      }
    }
    return true;
  }

  const Options& o_;
  sockaddr_in addr_;
  std::vector<Conn> conns_;
  int epfd_ = -1;
  std::string request_;
  Totals t_;
  int open_ = 0;
  Clock::time_point sent_at_{};
  char buf_[65536];
};

// ---- the fresh caller ----------------------------------------------------------

struct Probe {
  int phase = 0;  // 0 idle, 1 streaming
  double ms = 0;
  int status = 0;
  std::string error;
};

// One fresh caller: connect, GET, the whole answer; its time in ms.
Probe probe_once(const Options& o, const sockaddr_in& addr, int phase) {
  Probe p;
  p.phase = phase;
  const auto t0 = Clock::now();
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    p.error = std::string("socket: ") + std::strerror(errno);
    return p;
  }
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const std::string req = "GET " + o.fresh_path + " HTTP/1.1\r\nHost: " + o.host + ":" + std::to_string(o.port) +
                          "\r\nUser-Agent: proxy_streams\r\nConnection: close\r\n\r\n";
  std::string got;
  Head h;
  std::size_t head_end = std::string::npos;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    p.error = std::string("connect: ") + std::strerror(errno);
  } else if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    p.error = std::string("send: ") + std::strerror(errno);
  } else {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) got.append(buf, static_cast<std::size_t>(n));
      if (head_end == std::string::npos && (head_end = got.find("\r\n\r\n")) != std::string::npos) {
        if (!parse_head(std::string_view(got).substr(0, head_end + 4), h)) {
          p.error = "bad head";
          break;
        }
        p.status = h.status;
      }
      if (head_end != std::string::npos) {
        const std::size_t body = got.size() - head_end - 4;
        if (h.has_length && body >= h.length) break;
        if (h.chunked && got.ends_with("0\r\n\r\n")) break;
      }
      if (n == 0) {
        if (head_end == std::string::npos) p.error = "closed without an answer";
        break;
      }
      if (n < 0) {
        p.error = std::string("recv: ") + std::strerror(errno);
        break;
      }
    }
  }
  p.ms = ms_since(t0, Clock::now());
  ::close(fd);
  return p;
}

// ---- output --------------------------------------------------------------------

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\', out += ch;
    else if (static_cast<unsigned char>(ch) < 0x20) out += ' ';
    else out += ch;
  }
  return out + "\"";
}

// {"n":..,"p50":..,"p99":..,"max":..} of samples (sorted here).
std::string spread(std::vector<float>& v) {
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) {
    if (v.empty()) return 0.0;
    auto rank = static_cast<std::size_t>(q * static_cast<double>(v.size()));
    return static_cast<double>(v[std::min(rank, v.size() - 1)]);
  };
  char out[160];
  std::snprintf(out, sizeof out, "{\"n\":%zu,\"p50\":%.1f,\"p99\":%.1f,\"max\":%.1f}", v.size(), at(0.5), at(0.99),
                v.empty() ? 0.0 : static_cast<double>(v.back()));
  return out;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "proxy_streams: %s\n"
               "usage: proxy_streams --port N [--host 127.0.0.1] [--streams 100] [--events 5] [--path /stream]\n"
               "                     [--fresh-path /fresh] [--probe-every-ms 500] [--timeout 60]\n"
               "                     [--connect-batch 512] [--connect-timeout 20]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value");
      return argv[++i];
    };
    if (a == "--host") o.host = value();
    else if (a == "--port") o.port = std::atoi(value().c_str());
    else if (a == "--streams") o.streams = std::atoi(value().c_str());
    else if (a == "--events") o.events = std::atoi(value().c_str());
    else if (a == "--path") o.path = value();
    else if (a == "--fresh-path") o.fresh_path = value();
    else if (a == "--probe-every-ms") o.probe_every_ms = std::atoi(value().c_str());
    else if (a == "--timeout") o.timeout_s = std::atof(value().c_str());
    else if (a == "--connect-batch") o.connect_batch = std::atoi(value().c_str());
    else if (a == "--connect-timeout") o.connect_timeout_s = std::atof(value().c_str());
    else usage("unknown option");
  }
  if (o.port <= 0 || o.port > 65535) usage("--port is required (1-65535)");
  if (o.streams < 1 || o.streams > 200000) usage("--streams must be 1-200000");
  if (o.events < 1 || o.events > 100000) usage("--events must be 1-100000");
  if (o.probe_every_ms < 10) usage("--probe-every-ms must be at least 10");
  if (!(o.timeout_s > 0)) usage("--timeout must be positive");
  if (o.connect_batch < 1) usage("--connect-batch must be positive");
  for (const std::string* s : {&o.path, &o.fresh_path})
    if (s->empty() || s->front() != '/' || s->find_first_of(" \r\n") != std::string::npos) usage("a path is one /word");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(o.port));
  if (::inet_pton(AF_INET, o.host.c_str(), &addr.sin_addr) != 1) usage("--host must be an IPv4 address");

  // One descriptor per caller: the soft limit up to the hard one.
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  ::getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < static_cast<rlim_t>(o.streams) + 64)
    std::fprintf(stderr, "proxy_streams: the descriptor limit %llu is below %d callers: some will not connect\n",
                 static_cast<unsigned long long>(lim.rlim_cur), o.streams);

  auto streams = std::make_unique<Streams>(o, addr);
  const auto t0 = Clock::now();
  streams->connect_all();
  Totals& t = streams->totals();
  std::printf("{\"phase\":\"connected\",\"connected\":%d,\"connect_errors\":%d,\"connect_s\":%.3f}\n", t.connected,
              t.connect_errors, std::chrono::duration<double>(Clock::now() - t0).count());
  std::fflush(stdout);

  // The fresh caller, from now to the end, on its own thread.
  std::atomic<int> phase{0};
  std::atomic<bool> stop{false};
  std::mutex probes_mu;
  std::vector<Probe> probes;
  std::thread prober([&] {
    while (!stop.load()) {
      const int ph = phase.load();
      Probe p = probe_once(o, addr, ph);
      if (phase.load() == ph && !stop.load()) {  // a probe that spans two phases counts in neither
        const std::lock_guard lock(probes_mu);
        probes.push_back(std::move(p));
      }
      for (int waited = 0; waited < o.probe_every_ms && !stop.load(); waited += 10)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });

  if (streams->idle_until(STDIN_FILENO)) {
    phase.store(1);
    streams->send_all();
    std::printf("{\"phase\":\"sent\",\"sent\":%d,\"closed_while_idle\":%d}\n", t.sent, t.closed_while_idle);
    std::fflush(stdout);
    streams->stream();
  }
  stop.store(true);
  prober.join();

  std::string out = "{\"phase\":\"done\",\"streams\":" + std::to_string(o.streams) +
                    ",\"events_per_stream\":" + std::to_string(o.events) +
                    ",\"connected\":" + std::to_string(t.connected) +
                    ",\"connect_errors\":" + std::to_string(t.connect_errors) +
                    ",\"first_connect_error\":" + json_string(t.first_connect_error) +
                    ",\"closed_while_idle\":" + std::to_string(t.closed_while_idle) +
                    ",\"sent\":" + std::to_string(t.sent) + ",\"whole\":" + std::to_string(t.whole) +
                    ",\"unfinished\":" + std::to_string(t.unfinished) + ",\"events\":" + std::to_string(t.events) +
                    ",\"statuses\":{";
  bool first = true;
  for (const auto& [s, n] : t.statuses) {
    // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "literal" + std::string.
    out += first ? "\"" : ",\"";
    out += std::to_string(s);
    out += "\":";
    out += std::to_string(n);
    first = false;
  }
  out += "},\"failures\":{";
  first = true;
  for (const auto& [why, n] : t.failures) {
    out += first ? "" : ",";
    out += json_string(why);
    out += ":";
    out += std::to_string(n);
    first = false;
  }
  char stream_s[32];
  std::snprintf(stream_s, sizeof stream_s, "%.3f", t.stream_s);
  out += "},\"stream_s\":" + std::string(stream_s) + ",\"event_delay_ms\":" + spread(t.event_delay_ms) +
         ",\"head_ms\":" + spread(t.head_ms) + ",\"probes\":[";
  first = true;
  for (const Probe& p : probes) {
    char one[96];
    std::snprintf(one, sizeof one,
                  "{\"phase\":\"%s\",\"ms\":%.2f,\"status\":%d,\"error\":", p.phase == 0 ? "idle" : "streaming", p.ms,
                  p.status);
    out += first ? "" : ",";
    out += one;
    out += json_string(p.error);
    out += "}";
    first = false;
  }
  out += "]}";
  std::printf("%s\n", out.c_str());
  std::fflush(stdout);
  streams.reset();
  return 0;
}
