// A cpp-httplib server on 127.0.0.1 with a request log, for the tests of
// abide's libcurl clients; and no proxy from the environment.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/concurrency.h"

namespace abide::test {

// Nothing may leave the machine: no proxy from the environment. (no_proxy
// too: it would bypass the proxy a test configures.)
inline const bool kNoProxy = [] {
  for (const char* v :
       {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy", "no_proxy", "NO_PROXY"})
    unsetenv(v);
  return true;
}();

// A cpp-httplib server on 127.0.0.1 with a request log.
class TestServer {
 public:
  struct Seen {
    std::string method;
    std::string path;
    std::string idempotency_key;
    std::string authorization;
    std::string user_agent;
    std::string caller;  // the X-Caller header
    int remote_port = 0;
    std::chrono::steady_clock::time_point at;
  };

  TestServer() {
    svr_.set_keep_alive_timeout(1);
    svr_.set_keep_alive_max_count(1000);
    port_ = svr_.bind_to_any_port("127.0.0.1");
  }
  ~TestServer() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    svr_.stop();
    if (thread_.joinable()) thread_.join();
  }

  // Handlers are registered before the first url(), which starts serving: the
  // server's threads then start after the handlers exist (ThreadSanitizer cannot
  // see the order a request over loopback would give them).
  httplib::Server& svr() { return svr_; }
  std::string url(const std::string& path) {
    std::call_once(started_, [this] {
      thread_ = std::thread([this] { svr_.listen_after_bind(); });
      for (int i = 0; i < 2000 && !svr_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds{1});
    });
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  // Logs a request; returns how many came before it on this path.
  std::size_t log(const httplib::Request& req) {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (const auto& s : seen_)
      if (s.path == req.path) ++n;
    seen_.push_back({req.method, req.path, req.get_header_value("Idempotency-Key"),
                     req.get_header_value("Authorization"), req.get_header_value("User-Agent"),
                     req.get_header_value("X-Caller"), req.remote_port, std::chrono::steady_clock::now()});
    return n;
  }
  std::vector<Seen> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  // Blocks a handler until the server stops or `d` passes.
  void hold(std::chrono::milliseconds d) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, d, [this] { return stopping_; });
  }

 private:
  httplib::Server svr_;
  int port_ = -1;
  std::once_flag started_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<Seen> seen_;
};

// GET `path` on `server` answers "ok" after `work` spent inside
// `concurrency` (declared before the server: its handlers use it until the
// server stops), logging each request.
inline void serve_counted(TestServer& server, Concurrency& concurrency, const std::string& path,
                          std::chrono::milliseconds work) {
  server.svr().Get(path, [&server, &concurrency, work](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    {
      const auto inside = concurrency.enter();
      std::this_thread::sleep_for(work);
    }
    res.set_content("ok", "text/plain");
  });
}

}  // namespace abide::test
