// MockServer: the Limiter behind cpp-httplib (see mock_server.h).
#include "mock_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <fstream>
#include <mutex>
#include <thread>

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

constexpr std::size_t kMaxBody = 1 << 20;

}  // namespace

#if defined(__SANITIZE_THREAD__)
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
    server_.Get(".*", api);
    server_.Post(".*", api);
    server_.Put(".*", api);
    server_.Patch(".*", api);
    server_.Delete(".*", api);

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
      std::lock_guard lock(stop_mu_);
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
    std::string client = req.get_header_value("X-Client-Id");
    if (client.empty()) client = req.remote_addr;
    const std::string connection = req.remote_addr + ":" + std::to_string(req.remote_port);
    Answer a = limiter_.handle({req.method, req.path, client, connection});
    if (opts_.limiter.latency > Duration::zero()) {
      // Held, not slept: stop() wakes it.
      std::unique_lock lock(stop_mu_);
      stop_cv_.wait_for(lock, opts_.limiter.latency, [this] { return stopping_; });
    }
    res.status = a.status;
    for (auto& [name, value] : a.headers) res.set_header(name, value);
    res.set_content(std::move(a.body), "application/json");
  }

  ServerOptions opts_;
  Limiter limiter_;
  Server server_;
  std::ofstream record_;
  std::thread thread_;
  int port_ = -1;
  bool started_ = false;
  bool stopped_ = false;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
};

MockServer::MockServer(ServerOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}
MockServer::~MockServer() { impl_->stop(); }
std::string MockServer::start() { return impl_->start(); }
int MockServer::port() const noexcept { return impl_->port(); }
void MockServer::stop() { impl_->stop(); }
nlohmann::ordered_json MockServer::stats() const { return impl_->limiter().stats(); }
Counts MockServer::totals() const { return impl_->limiter().totals(); }

}  // namespace abide::mock
