// proxy_load: a small keep-alive HTTP/1.1 load generator for bench/proxy/run.py.
//
// C connections, one thread each, send GET requests back to back for a warm-up
// and then D seconds, read every answer fully (Content-Length, chunked, or up to
// close) and record the latency of each request that started inside the measured
// span. Prints one JSON object: count, errors, rps, p50/p90/p99/max (µs), status counts.
//
// It shares two cores with the servers it measures, so it stays cheap: blocking
// sockets, one read buffer per connection, no per-request allocation after warm-up.
// POSIX sockets and the standard library only.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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
  std::string path = "/";
  int connections = 16;
  double duration_s = 5;
  double warmup_s = 1;
  std::vector<std::string> headers;
};

// Samples per connection are capped so that a very fast target cannot make the
// generator itself grow without bound (16M x 8 bytes = 128 MB per thread at most).
constexpr std::size_t kMaxSamplesPerConnection = std::size_t{1} << 24;
constexpr std::size_t kBufferSize = 64 * 1024;

struct ConnectionResult {
  std::vector<std::uint64_t> latencies_ns;
  std::uint64_t errors = 0;
  std::uint64_t connects = 0;
  std::map<int, std::uint64_t> statuses;
  std::string first_error;
};

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

// One keep-alive connection and its read buffer.
class Connection {
 public:
  explicit Connection(const sockaddr_in& addr) : addr_(addr), buf_(kBufferSize) {}
  ~Connection() { close_fd(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool connect_now(std::string& why) {
    close_fd();
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
      why = std::string("socket: ") + std::strerror(errno);
      return false;
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr_), sizeof addr_) != 0) {
      why = std::string("connect: ") + std::strerror(errno);
      close_fd();
      return false;
    }
    begin_ = end_ = 0;
    return true;
  }

  bool connected() const { return fd_ >= 0; }

  // Sends the request and reads the whole answer. Returns the status, or -1 with why.
  int exchange(const std::string& request, bool& keep_alive, std::string& why) {
    if (!send_all(request, why)) return -1;
    // The head: up to the blank line.
    std::size_t head_end = 0;
    for (;;) {
      std::string_view data(buf_.data() + begin_, end_ - begin_);
      auto pos = data.find("\r\n\r\n");
      if (pos != std::string_view::npos) {
        head_end = begin_ + pos + 4;
        break;
      }
      if (!fill(why)) return -1;
    }
    std::string_view head(buf_.data() + begin_, head_end - begin_);
    int status = -1;
    if (head.size() >= 12 && head.substr(0, 5) == "HTTP/") {
      std::from_chars(head.data() + 9, head.data() + 12, status);
    }
    if (status < 100) {
      why = "bad status line";
      return -1;
    }
    bool chunked = false;
    bool has_length = false;
    std::uint64_t length = 0;
    keep_alive = head.substr(0, 8) != "HTTP/1.0";
    std::size_t line_start = head.find("\r\n") + 2;
    while (line_start < head.size()) {
      std::size_t line_end = head.find("\r\n", line_start);
      if (line_end == std::string_view::npos || line_end == line_start) break;
      std::string_view line = head.substr(line_start, line_end - line_start);
      if (iequals_prefix(line, "content-length:")) {
        auto v = trim(line.substr(15));
        if (std::from_chars(v.data(), v.data() + v.size(), length).ec != std::errc{}) {
          why = "bad Content-Length";
          return -1;
        }
        has_length = true;
      } else if (iequals_prefix(line, "transfer-encoding:")) {
        auto v = trim(line.substr(18));
        chunked = v.size() >= 7 && iequals_prefix(v.substr(v.size() - 7), "chunked");
      } else if (iequals_prefix(line, "connection:")) {
        auto v = trim(line.substr(11));
        if (v.size() == 5 && iequals_prefix(v, "close")) keep_alive = false;
        if (v.size() == 10 && iequals_prefix(v, "keep-alive")) keep_alive = true;
      }
      line_start = line_end + 2;
    }
    begin_ = head_end;
    bool ok = true;
    if (status == 204 || status == 304 || (status >= 100 && status < 200)) {
      ok = true;
    } else if (chunked) {
      ok = read_chunked(why);
    } else if (has_length) {
      ok = skip(length, why);
    } else {
      ok = read_to_close();
      keep_alive = false;
    }
    if (!ok) return -1;
    if (begin_ == end_) begin_ = end_ = 0;
    return status;
  }

  void close_fd() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  bool send_all(const std::string& data, std::string& why) {
    std::size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        why = std::string("send: ") + std::strerror(errno);
        return false;
      }
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }

  // Reads more bytes after end_, compacting the buffer when it is full.
  bool fill(std::string& why) {
    if (end_ == buf_.size()) {
      if (begin_ == 0) {
        why = "head larger than the buffer";
        return false;
      }
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    for (;;) {
      ssize_t n = ::recv(fd_, buf_.data() + end_, buf_.size() - end_, 0);
      if (n > 0) {
        end_ += static_cast<std::size_t>(n);
        return true;
      }
      if (n < 0 && errno == EINTR) continue;
      why = n == 0 ? "closed by peer" : std::string("recv: ") + std::strerror(errno);
      return false;
    }
  }

  bool skip(std::uint64_t count, std::string& why) {
    while (count > 0) {
      if (begin_ == end_) {
        begin_ = end_ = 0;
        if (!fill(why)) return false;
      }
      std::uint64_t take = std::min<std::uint64_t>(count, end_ - begin_);
      begin_ += static_cast<std::size_t>(take);
      count -= take;
    }
    return true;
  }

  bool read_line(std::string_view& line, std::string& why) {
    for (;;) {
      std::string_view data(buf_.data() + begin_, end_ - begin_);
      auto pos = data.find("\r\n");
      if (pos != std::string_view::npos) {
        line = data.substr(0, pos);
        begin_ += pos + 2;
        return true;
      }
      if (!fill(why)) return false;
    }
  }

  bool read_chunked(std::string& why) {
    for (;;) {
      std::string_view line;
      if (!read_line(line, why)) return false;
      std::uint64_t size = 0;
      auto r = std::from_chars(line.data(), line.data() + line.size(), size, 16);
      if (r.ec != std::errc{}) {
        why = "bad chunk size";
        return false;
      }
      if (size == 0) {
        // Trailers, up to the blank line.
        for (;;) {
          if (!read_line(line, why)) return false;
          if (line.empty()) return true;
        }
      }
      if (!skip(size + 2, why)) return false;
    }
  }

  bool read_to_close() {
    std::string ignored;
    begin_ = end_ = 0;
    while (fill(ignored)) begin_ = end_ = 0;
    return true;
  }

  sockaddr_in addr_;
  std::vector<char> buf_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  int fd_ = -1;
};

void run_connection(const sockaddr_in& addr, const std::string& request,
                    Clock::time_point start, Clock::time_point measure_from, Clock::time_point stop,
                    ConnectionResult& out) {
  Connection conn(addr);
  out.latencies_ns.reserve(std::min<std::size_t>(kMaxSamplesPerConnection, 1 << 16));
  std::this_thread::sleep_until(start);
  std::string why;
  auto note_error = [&](bool measured) {
    if (measured) ++out.errors;
    if (out.first_error.empty()) out.first_error = why;
    conn.close_fd();
  };
  while (true) {
    auto t0 = Clock::now();
    if (t0 >= stop) break;
    bool measured = t0 >= measure_from;
    if (!conn.connected()) {
      if (!conn.connect_now(why)) {
        note_error(measured);
        // A refused connection must not turn into a busy loop.
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      ++out.connects;
      t0 = Clock::now();
    }
    bool keep_alive = true;
    int status = conn.exchange(request, keep_alive, why);
    auto t1 = Clock::now();
    if (status < 0) {
      note_error(measured);
      continue;
    }
    if (!keep_alive) conn.close_fd();
    if (!measured) continue;
    ++out.statuses[status];
    if (status < 200 || status > 299) ++out.errors;
    if (out.latencies_ns.size() < kMaxSamplesPerConnection) {
      out.latencies_ns.push_back(static_cast<std::uint64_t>(std::chrono::nanoseconds(t1 - t0).count()));
    }
  }
}

double percentile_us(std::vector<std::uint64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  // Nearest rank: the smallest sample with at least q of all samples at or below it.
  auto rank = static_cast<std::size_t>(q * static_cast<double>(sorted.size()));
  if (rank >= sorted.size()) rank = sorted.size() - 1;
  return static_cast<double>(sorted[rank]) / 1000.0;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "proxy_load: %s\n"
               "usage: proxy_load --port N [--host 127.0.0.1] [--path /] [--connections 16]\n"
               "                  [--duration 5] [--warmup 1] [--header 'Name: value']...\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value");
      return argv[++i];
    };
    if (a == "--host") {
      o.host = value();
    } else if (a == "--port") {
      o.port = std::atoi(value().c_str());
    } else if (a == "--path") {
      o.path = value();
    } else if (a == "--connections") {
      o.connections = std::atoi(value().c_str());
    } else if (a == "--duration") {
      o.duration_s = std::atof(value().c_str());
    } else if (a == "--warmup") {
      o.warmup_s = std::atof(value().c_str());
    } else if (a == "--header") {
      o.headers.push_back(value());
    } else {
      usage("unknown option");
    }
  }
  if (o.port <= 0 || o.port > 65535) usage("--port is required (1-65535)");
  if (o.connections < 1 || o.connections > 4096) usage("--connections must be 1-4096");
  if (!(o.duration_s > 0) || o.duration_s > 3600) usage("--duration must be in (0, 3600]");
  if (!(o.warmup_s >= 0) || o.warmup_s > 3600) usage("--warmup must be in [0, 3600]");
  for (const auto& h : o.headers) {
    if (h.find_first_of("\r\n") != std::string::npos) usage("a --header must be one line");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse(argc, argv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(opt.port));
  if (::inet_pton(AF_INET, opt.host.c_str(), &addr.sin_addr) != 1) usage("--host must be an IPv4 address");

  std::string request = "GET " + opt.path + " HTTP/1.1\r\nHost: " + opt.host + ":" + std::to_string(opt.port) +
                        "\r\nUser-Agent: proxy_load\r\nAccept: */*\r\n";
  for (const auto& h : opt.headers) request += h + "\r\n";
  request += "\r\n";

  std::vector<ConnectionResult> results(static_cast<std::size_t>(opt.connections));
  // Every thread starts at the same instant, so the warm-up covers connection setup.
  auto start = Clock::now() + std::chrono::milliseconds(50 + opt.connections);
  auto measure_from = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.warmup_s));
  auto stop = measure_from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.duration_s));
  {
    std::vector<std::thread> threads;
    threads.reserve(results.size());
    for (auto& r : results) {
      threads.emplace_back(run_connection, std::cref(addr), std::cref(request), start, measure_from,
                           stop, std::ref(r));
    }
    for (auto& t : threads) t.join();
  }

  std::vector<std::uint64_t> all;
  std::size_t total = 0;
  for (const auto& r : results) total += r.latencies_ns.size();
  all.reserve(total);
  std::uint64_t errors = 0, connects = 0;
  std::map<int, std::uint64_t> statuses;
  std::string first_error;
  for (auto& r : results) {
    all.insert(all.end(), r.latencies_ns.begin(), r.latencies_ns.end());
    errors += r.errors;
    connects += r.connects;
    for (auto [s, n] : r.statuses) statuses[s] += n;
    if (first_error.empty()) first_error = r.first_error;
  }
  std::sort(all.begin(), all.end());
  double sum = 0;
  for (auto v : all) sum += static_cast<double>(v);
  double mean_us = all.empty() ? 0 : sum / static_cast<double>(all.size()) / 1000.0;

  std::printf("{\"connections\":%d,\"duration_s\":%.3f,\"count\":%zu,\"errors\":%llu,\"connects\":%llu,"
              "\"rps\":%.1f,\"mean_us\":%.1f,\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,"
              "\"statuses\":{",
              opt.connections, opt.duration_s, all.size(), static_cast<unsigned long long>(errors),
              static_cast<unsigned long long>(connects), static_cast<double>(all.size()) / opt.duration_s, mean_us,
              percentile_us(all, 0.50), percentile_us(all, 0.90), percentile_us(all, 0.99),
              all.empty() ? 0.0 : static_cast<double>(all.back()) / 1000.0);
  bool first = true;
  for (auto [s, n] : statuses) {
    std::printf("%s\"%d\":%llu", first ? "" : ",", s, static_cast<unsigned long long>(n));
    first = false;
  }
  // The first transport error, as text of our own making (errno strings and fixed words).
  std::printf("},\"first_error\":\"%s\"}\n", first_error.c_str());
  return 0;
}
