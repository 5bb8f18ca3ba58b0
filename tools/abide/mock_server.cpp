// MockServer: the Limiter behind cpp-httplib (see mock_server.h).
#include "mock_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <csignal>
#include <fstream>
#include <optional>
#include <string_view>
#include <thread>

#include "mock_request_body.h"
#include "mutex.h"

namespace abide::mock {
namespace {

// httplib::Server with access to its listening socket, to raise the listen
// backlog: the library's is 5, and a fleet of clients opening connections at
// once would see dropped SYNs and one-second connect stalls.
class Server final : public httplib::Server {
 public:
  void raise_backlog() {
    const auto fd = svr_sock_.load();
    if (fd != INVALID_SOCKET) ::listen(fd, SOMAXCONN);
  }
};

// Longer bodies are answered 413 by the server library before anything reads them.
constexpr std::size_t kMaxBody = kMaxBodyBytes;
constexpr std::uint64_t kMaxStreamChunks = 1000;
constexpr std::uint64_t kMaxGapMs = 10000;
constexpr std::uint64_t kMaxHangMs = 600000;

// The descriptor of this process's connection from peer ADDR:PORT to local
// port `local_port`, or -1. httplib hands a handler no socket; /__hang finds
// its own among the open descriptors (a peer address and port name one
// connection).
int connection_socket(const std::string& peer_addr, int peer_port, int local_port) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (const dirent* e = ::readdir(dir)) {
    int fd = -1;
    const std::string_view name = e->d_name;
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc{}) continue;
    sockaddr_in local{}, peer{};
    socklen_t llen = sizeof local, plen = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &llen) != 0 || local.sin_family != AF_INET) continue;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    if (::inet_ntop(AF_INET, &peer.sin_addr, text, sizeof text) == nullptr) continue;
    if (ntohs(local.sin_port) == local_port && ntohs(peer.sin_port) == peer_port && peer_addr == text) {
      found = fd;
      break;
    }
  }
  ::closedir(dir);
  return found;
}

// A query parameter as a bounded decimal: `fallback` when absent, nullopt
// when malformed or above `max` (answered 400, never clamped silently).
std::optional<std::uint64_t> bounded_param(const httplib::Request& req, const char* name, std::uint64_t fallback,
                                           std::uint64_t max) {
  if (!req.has_param(name)) return fallback;
  const std::string v = req.get_param_value(name);
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc{} || end != v.data() + v.size() || n > max) return std::nullopt;
  return n;
}

}  // namespace

#if defined(__SANITIZE_THREAD__)
#define ABIDE_MOCK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)  // clang's way of saying it
#define ABIDE_MOCK_TSAN 1
#endif
#endif

#if defined(ABIDE_MOCK_TSAN)
// Debian's cpp-httplib is a compiled, uninstrumented library. ThreadSanitizer
// sees its memcpy/memcmp calls but not the inline guard check of its
// function-local statics (the request-method set shared by every worker), and
// reports a race that is not one. Ignore what that library's own calls touch;
// this code (the handlers it calls, the limiter) stays fully checked.
extern "C" const char* __tsan_default_suppressions() { return "called_from_lib:libcpp-httplib.so\n"; }
#endif

class MockServer::Impl {
 public:
  explicit Impl(ServerOptions opts) : opts_(std::move(opts)), limiter_(opts_.limiter, system_wall_clock()) {}

  std::string start() {
    if (started_) return "already started";
    if (!is_loopback_address(opts_.bind))
      return "refusing to bind " + opts_.bind + ": the mock server binds IPv4 loopback (127.0.0.0/8) only";
    if (auto err = validate(opts_.limiter); !err.empty()) return err;
    if (opts_.port < 0 || opts_.port > 65535) return "--port must be between 0 and 65535";
    if (opts_.threads < 1 || opts_.threads > 1024) return "--threads must be between 1 and 1024";
    const std::string host = opts_.bind == "localhost" ? "127.0.0.1" : opts_.bind;
    if (!opts_.record_path.empty()) {
      record_.open(opts_.record_path, std::ios::out | std::ios::trunc);
      if (!record_) return "cannot open " + opts_.record_path + " for writing";
      limiter_.set_record(&record_);
    }

    struct sigaction old {};
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) std::signal(SIGPIPE, SIG_IGN);

    const std::size_t threads = opts_.threads;
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server_.set_keep_alive_max_count(1000);
    server_.set_keep_alive_timeout(opts_.keep_alive.count());
    server_.set_payload_max_length(kMaxBody);
    server_.set_tcp_nodelay(true);
    server_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      res.status = 500;
      res.set_content("{\"error\":\"internal\"}\n", "application/json");
    });
    const auto api = [this](const httplib::Request& req, httplib::Response& res) { serve(req, res); };
    // `curl -X POST .../__reset` sends no Content-Length, and httplib answers
    // a POST without one 400 when it reads its body; a reset has none to read.
    // A request that declares a body takes the usual path (its body is read).
    server_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (req.path != "/__reset" || req.method != "POST" || req.has_header("Content-Length") ||
          req.has_header("Transfer-Encoding"))
        return httplib::Server::HandlerResponse::Unhandled;
      serve(req, res);
      return httplib::Server::HandlerResponse::Handled;
    });
    server_.Get(".*", api);
    server_.Post(".*", api);
    server_.Put(".*", api);
    server_.Patch(".*", api);
    server_.Delete(".*", api);
    server_.Options("/__echo", api);  // the echo takes any method; the API has no OPTIONS

    if (opts_.port == 0) {
      port_ = server_.bind_to_any_port(host);
      if (port_ < 0) return "cannot bind " + host + " on any port";
    } else {
      if (!server_.bind_to_port(host, opts_.port)) return "cannot bind " + host + ":" + std::to_string(opts_.port);
      port_ = opts_.port;
    }
    server_.raise_backlog();
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() only works once the accept loop runs; wait for it (bounded).
    for (int i = 0; i < 5000 && !server_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    started_ = true;
    if (!server_.is_running()) {
      stop();
      return "the server did not start";
    }
    return {};
  }

  int port() const noexcept { return port_; }

  void stop() {
    if (!started_ || stopped_) return;
    stopped_ = true;
    {
      detail::MutexLock lock(stop_mu_);
      stopping_ = true;
    }
    stop_cv_.notify_all();
    server_.stop();
    if (thread_.joinable()) thread_.join();
    limiter_.flush_record();
  }

  Limiter& limiter() noexcept { return limiter_; }

 private:
  static void json_response(httplib::Response& res, int status, const nlohmann::ordered_json& j) {
    res.status = status;
    res.set_content(j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n", "application/json");
  }

  static void not_allowed(httplib::Response& res, const char* allow) {
    res.set_header("Allow", allow);
    json_response(res, 405, {{"error", "method_not_allowed"}});
  }

  void serve(const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/__stats") {
      if (req.method != "GET" && req.method != "HEAD") return not_allowed(res, "GET, HEAD");
      limiter_.flush_record();
      return json_response(res, 200, limiter_.stats());
    }
    if (req.path == "/__reset") {
      if (req.method != "POST") return not_allowed(res, "POST");
      limiter_.reset();
      return json_response(res, 200, {{"reset", true}});
    }
    if (req.path == "/__echo") return echo(req, res);
    if (req.path == "/__stream") return stream(req, res);
    if (req.path == "/__hang") return hang(req, res);
    std::string client = req.get_header_value("X-Client-Id");
    if (client.empty()) client = req.remote_addr;
    const std::string connection = req.remote_addr + ":" + std::to_string(req.remote_port);
    Answer a = limiter_.handle({req.method, req.path, client, connection, req.body});
    // Held, not slept: stop() wakes it.
    if (opts_.limiter.latency > Duration::zero()) held_until_stop(opts_.limiter.latency);
    res.status = a.status;
    for (auto& [name, value] : a.headers) res.set_header(name, value);
    res.set_content(std::move(a.body), a.content_type);
  }

  // /__echo: the request as received, for checking what a proxy forwarded.
  static void echo(const httplib::Request& req, httplib::Response& res) {
    const std::string_view target = req.target;
    const auto q = target.find('?');
    nlohmann::ordered_json headers = nlohmann::ordered_json::array();
    for (const auto& [name, value] : req.headers) {
      // httplib adds the peer's address as a field of its own; it was not received.
      if (name == "REMOTE_ADDR" || name == "REMOTE_PORT" || name == "LOCAL_ADDR" || name == "LOCAL_PORT") continue;
      headers.push_back({name, value});
    }
    json_response(res, 200,
                  {{"method", req.method},
                   {"path", std::string(target.substr(0, q))},
                   {"query", q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1))},
                   {"headers", std::move(headers)},
                   {"body", req.body}});
  }

  // /__stream?chunks=N&gap_ms=M: a chunked event stream, one event per chunk,
  // so that a proxy's streaming (or buffering) shows in arrival times.
  void stream(const httplib::Request& req, httplib::Response& res) {
    const auto chunks = bounded_param(req, "chunks", 5, kMaxStreamChunks);
    const auto gap = bounded_param(req, "gap_ms", 100, kMaxGapMs);
    if (!chunks || !gap) {
      return json_response(res, 400,
                           {{"error", "chunks must be 0.." + std::to_string(kMaxStreamChunks) + " and gap_ms 0.." +
                                          std::to_string(kMaxGapMs)}});
    }
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    auto next = std::make_shared<std::uint64_t>(0);
    res.set_chunked_content_provider("text/event-stream", [this, next, n = *chunks,
                                                           gap_ms = *gap](std::size_t, httplib::DataSink& sink) {
      if (*next > 0 && gap_ms > 0 && held_until_stop(std::chrono::milliseconds(gap_ms))) return false;
      if (*next < n) {
        const std::string event = "data: " + std::to_string(*next) + "\n\n";
        if (!sink.write(event.data(), event.size())) return false;
        ++*next;
      }
      if (*next >= n) sink.done();
      return true;
    });
  }

  // /__hang?ms=M: reads the request, holds it M ms (or until stop), then
  // closes the connection without a byte of answer: what a proxy sees when
  // an upstream may or may not have applied a request.
  void hang(const httplib::Request& req, httplib::Response& res) {
    const auto ms = bounded_param(req, "ms", 1000, kMaxHangMs);
    if (!ms) return json_response(res, 400, {{"error", "ms must be 0.." + std::to_string(kMaxHangMs)}});
    held_until_stop(std::chrono::milliseconds(*ms));
    // Shut down, not closed: httplib still owns (and closes) the descriptor.
    // Its answer then fails to send, and the connection ends.
    const int fd = connection_socket(req.remote_addr, req.remote_port, port_);
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
    res.status = 500;
  }

  // Waits `d` unless stop() comes first; true when stopped.
  bool held_until_stop(Duration d) {
    detail::UniqueLock lock(stop_mu_);
    return stop_cv_.wait_for(lock.native(), d, [this]() ABIDE_REQUIRES(stop_mu_) { return stopping_; });
  }

  ServerOptions opts_;
  Limiter limiter_;
  Server server_;
  std::ofstream record_;
  std::thread thread_;
  int port_ = -1;
  bool started_ = false;
  bool stopped_ = false;
  detail::Mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ ABIDE_GUARDED_BY(stop_mu_) = false;
};

MockServer::MockServer(ServerOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}
MockServer::~MockServer() { impl_->stop(); }
std::string MockServer::start() { return impl_->start(); }
int MockServer::port() const noexcept { return impl_->port(); }
void MockServer::stop() { impl_->stop(); }
nlohmann::ordered_json MockServer::stats() const { return impl_->limiter().stats(); }
Counts MockServer::totals() const { return impl_->limiter().totals(); }

}  // namespace abide::mock
