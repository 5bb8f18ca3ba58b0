// What the tests of abide::Client (tests/client_*_test.cpp) share: servers
// that cut a body or never answer, a caller's own easy handle, and a
// ResponseSink that records what it was told.
#pragma once

#include <abide/client.h>
#include <abide/clock.h>
#include <abide/http_date.h>
#include <abide/testing/manual_clock.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "curl/transfer.h"
#include "support/client_config.h"
#include "support/http_test_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace abide::test {

using namespace std::chrono_literals;

// The first answer promises 1000 bytes and the connection closes after 10.
inline void serve_cut_body(TestServer& server, httplib::Response& res, bool cut) {
  if (!cut) {
    res.set_content(std::string(1000, 'x'), "text/plain");
    return;
  }
  res.set_content_provider(1000, "text/plain", [](std::size_t, std::size_t, httplib::DataSink& sink) {
    sink.write("0123456789", 10);
    return false;  // closes the connection mid-body
  });
  static_cast<void>(server);
}

// A socket that listens and never accepts: the kernel completes the handshake,
// the request goes out, no answer ever comes.
class SilentServer {
 public:
  SilentServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~SilentServer() { ::close(fd_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

struct EasyDeleter {
  void operator()(CURL* h) const noexcept { curl_easy_cleanup(h); }
};
using Easy = std::unique_ptr<CURL, EasyDeleter>;
struct SlistDeleter {
  void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

// A handle configured as a program of its own would: a custom header, its user
// agent, a timeout.
struct CallersHandle {
  Easy easy{curl_easy_init()};
  Slist headers{curl_slist_append(nullptr, "X-Caller: mine")};
  CallersHandle() {
    curl_easy_setopt(easy.get(), CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(easy.get(), CURLOPT_USERAGENT, "caller-agent/1");
    curl_easy_setopt(easy.get(), CURLOPT_TIMEOUT_MS, 20000L);
    curl_easy_setopt(easy.get(), CURLOPT_NOSIGNAL, 1L);
  }
};

// What a ResponseSink was told.
struct SinkLog {
  std::mutex mu;
  int heads = 0;
  int status = 0;
  OutcomeKind kind = OutcomeKind::kCancelled;
  std::size_t attempts_at_head = 0;
  std::optional<WallTime> not_before_at_head;
  std::vector<std::string> chunks;
  bool body_before_head = false;

  std::string body() {
    std::lock_guard lock(mu);
    std::string all;
    for (const auto& c : chunks) all += c;
    return all;
  }
  ResponseSink sink() {
    ResponseSink s;
    s.head = [this](const FinalHead& h) {
      std::lock_guard lock(mu);
      ++heads;
      status = h.response.status;
      kind = h.kind;
      attempts_at_head = h.outcome.attempts.size();
      not_before_at_head = h.outcome.not_before_wall;
      return true;
    };
    s.body = [this](std::string_view chunk) {
      std::lock_guard lock(mu);
      if (heads == 0) body_before_head = true;
      chunks.emplace_back(chunk);
      return true;
    };
    return s;
  }
};

}  // namespace abide::test
