// abide::LoopClient's own HTTP/1.1 client (cleartext to an IP literal)
// against a scripted server on 127.0.0.1 that answers each request with
// bytes of the test's choosing: framing, kept connections, a server that
// closed a kept one, and answers no client may take.
#include <abide/loop_client.h>
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/client_config.h"
#include "support/loop_fetch.h"

namespace abide {
namespace {

using namespace std::chrono_literals;

// Listens on 127.0.0.1; each connection is served on its own thread by
// `answer`, called with the connection's number (from 0) and each request's
// head as read; it returns the bytes to write back, and whether to close the
// connection after writing them ("" and close: hang up without an answer).
// An `early` reply is written before the request's body is read, and the body
// is never read (the server refuses it at its head).
class ScriptedServer {
 public:
  struct Reply {
    std::string bytes;
    bool close = false;
    bool early = false;
  };
  using Answer = std::function<Reply(int connection, const std::string& head)>;

  explicit ScriptedServer(Answer answer) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~ScriptedServer() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    acceptor_.join();
    ::close(fd_);
    std::lock_guard lock(mu_);
    for (int c : open_) ::shutdown(c, SHUT_RDWR);
    for (auto& t : served_) t.join();
    for (int c : open_) ::close(c);
  }

  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  int connections() const { return connections_.load(); }
  // Request heads read, over every connection.
  std::vector<std::string> heads() const {
    std::lock_guard lock(mu_);
    return heads_;
  }

 private:
  void accept_loop() {
    while (!stopping_) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      const int n = connections_++;
      std::lock_guard lock(mu_);
      open_.push_back(c);
      served_.emplace_back([this, c, n] { serve(c, n); });
    }
  }
  void serve(int c, int n) {
    std::string in;
    char buf[4096];
    for (;;) {
      std::size_t end;
      while ((end = in.find("\r\n\r\n")) == std::string::npos) {
        const ssize_t got = ::recv(c, buf, sizeof buf, 0);
        if (got <= 0) return;
        in.append(buf, static_cast<std::size_t>(got));
      }
      std::string head = in.substr(0, end + 4);
      in.erase(0, end + 4);
      {
        std::lock_guard lock(mu_);
        heads_.push_back(head);
      }
      const Reply r = answer_(n, head);
      // A body the head announces (the tests send small ones).
      if (const auto cl = head.find("Content-Length: "); cl != std::string::npos && !r.early) {
        const std::size_t want = std::stoul(head.substr(cl + 16));
        while (in.size() < want) {
          const ssize_t got = ::recv(c, buf, sizeof buf, 0);
          if (got <= 0) return;
          in.append(buf, static_cast<std::size_t>(got));
        }
        in.erase(0, want);
      }
      std::size_t at = 0;
      while (at < r.bytes.size()) {
        const ssize_t put = ::send(c, r.bytes.data() + at, r.bytes.size() - at, MSG_NOSIGNAL);
        if (put <= 0) return;
        at += static_cast<std::size_t>(put);
      }
      if (r.close) {
        ::shutdown(c, SHUT_RDWR);
        return;
      }
      if (r.early) {  // the body stays unread: the connection serves nothing more
        while (!stopping_) std::this_thread::sleep_for(10ms);
        return;
      }
    }
  }

  Answer answer_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::vector<int> open_;
  std::vector<std::thread> served_;
  std::vector<std::string> heads_;
};

using test::fetch;
using test::get;

TEST(LoopClientPlain, ConsecutiveRequestsShareOneKeptConnection) {
  ScriptedServer server([](int, const std::string&) {
    return ScriptedServer::Reply{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"};
  });
  LoopClient client(test::fast_config());
  for (int i = 0; i < 5; ++i) {
    const RequestOutcome out = fetch(client, get(server.url("/k")));
    ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
    EXPECT_EQ(out.response->status, 200);
    EXPECT_EQ(out.body, "ok");
  }
  EXPECT_EQ(server.connections(), 1);
}

TEST(LoopClientPlain, TheRequestReadsAsLibcurlWritesIt) {
  ScriptedServer server([](int, const std::string&) {
    return ScriptedServer::Reply{"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"};
  });
  ClientConfig c = test::fast_config();
  c.user_agent = "abide-test/1";
  LoopClient client(c);
  Request r = get(server.url("/p?q=1#frag"), "POST");
  r.body = "a=1";
  r.headers.add("X-Empty", "");
  r.idempotency_key = "key-1";
  const RequestOutcome out = fetch(client, r);
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  const auto heads = server.heads();
  ASSERT_EQ(heads.size(), 1u);
  const std::string& h = heads[0];
  EXPECT_TRUE(h.starts_with("POST /p?q=1 HTTP/1.1\r\nHost: 127.0.0.1:")) << h;
  EXPECT_NE(h.find("\r\nUser-Agent: abide-test/1\r\n"), std::string::npos) << h;
  EXPECT_NE(h.find("\r\nAccept: */*\r\n"), std::string::npos) << h;
  EXPECT_NE(h.find("\r\nX-Empty:\r\n"), std::string::npos) << h;
  EXPECT_NE(h.find("\r\nIdempotency-Key: key-1\r\n"), std::string::npos) << h;
  EXPECT_NE(h.find("\r\nContent-Length: 3\r\n"), std::string::npos) << h;
  EXPECT_NE(h.find("\r\nContent-Type: application/x-www-form-urlencoded\r\n"), std::string::npos) << h;
}

// A path libcurl would change (dot segments) goes through libcurl, which
// sends what it always sent.
TEST(LoopClientPlain, ARequestLibcurlWouldRewriteGoesThroughLibcurl) {
  ScriptedServer server([](int, const std::string&) {
    return ScriptedServer::Reply{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"};
  });
  LoopClient client(test::fast_config());
  const RequestOutcome out = fetch(client, get(server.url("/a/../b")));
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  ASSERT_EQ(server.heads().size(), 1u);
  EXPECT_TRUE(server.heads()[0].starts_with("GET /b HTTP/1.1\r\n")) << server.heads()[0];
}

TEST(LoopClientPlain, ChunkedAndCloseDelimitedAnswersArriveWhole) {
  ScriptedServer server([](int, const std::string& head) {
    if (head.starts_with("GET /chunked")) {
      return ScriptedServer::Reply{
          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n6\r\n world\r\n0\r\nT: 1\r\n\r\n"};
    }
    return ScriptedServer::Reply{"HTTP/1.0 200 OK\r\n\r\nuntil the close", true};
  });
  LoopClient client(test::fast_config());
  RequestOutcome a = fetch(client, get(server.url("/chunked")));
  ASSERT_EQ(a.kind, OutcomeKind::kDone) << a.reason;
  EXPECT_EQ(a.body, "hello world");
  RequestOutcome b = fetch(client, get(server.url("/close")));
  ASSERT_EQ(b.kind, OutcomeKind::kDone) << b.reason;
  EXPECT_EQ(b.body, "until the close");
  // The chunked answer's connection carried the second request; that one closed.
  EXPECT_EQ(server.connections(), 1);
  RequestOutcome c = fetch(client, get(server.url("/chunked")));
  ASSERT_EQ(c.kind, OutcomeKind::kDone) << c.reason;
  EXPECT_EQ(server.connections(), 2);
}

TEST(LoopClientPlain, InterimAnswersAreSkippedAndAHeadAnswerHasNoBody) {
  ScriptedServer server([](int, const std::string& head) {
    if (head.starts_with("HEAD")) return ScriptedServer::Reply{"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"};
    return ScriptedServer::Reply{"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"};
  });
  LoopClient client(test::fast_config());
  RequestOutcome head = fetch(client, get(server.url("/h"), "HEAD"));
  ASSERT_EQ(head.kind, OutcomeKind::kDone) << head.reason;
  EXPECT_EQ(head.body, "");
  RequestOutcome hinted = fetch(client, get(server.url("/g")));
  ASSERT_EQ(hinted.kind, OutcomeKind::kDone) << hinted.reason;
  EXPECT_EQ(hinted.response->status, 200);
  EXPECT_EQ(hinted.body, "x");
  EXPECT_EQ(server.connections(), 1);
}

// A kept connection that the server closes instead of answering: a GET goes
// again on a fresh one; a POST without an idempotency key is never repeated.
TEST(LoopClientPlain, AClosedKeptConnectionRepeatsAGetButNeverAPost) {
  std::atomic<int> answered{0};
  ScriptedServer server([&](int connection, const std::string&) {
    // The first connection answers once, then hangs up on the next request.
    if (connection == 0 && answered++ > 0) return ScriptedServer::Reply{"", true};
    return ScriptedServer::Reply{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"};
  });
  ClientConfig c = test::fast_config();
  c.max_attempts = 1;  // only the transparent resend may send it twice
  LoopClient client(c);
  ASSERT_EQ(fetch(client, get(server.url("/1"))).kind, OutcomeKind::kDone);
  const RequestOutcome again = fetch(client, get(server.url("/2")));
  ASSERT_EQ(again.kind, OutcomeKind::kDone) << again.reason;
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(server.heads().size(), 3u);

  ScriptedServer posts([&](int connection, const std::string&) {
    if (connection == 0 && answered++ > 1) return ScriptedServer::Reply{"", true};
    return ScriptedServer::Reply{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"};
  });
  answered = 1;
  ASSERT_EQ(fetch(client, get(posts.url("/1"))).kind, OutcomeKind::kDone);
  const RequestOutcome post = fetch(client, get(posts.url("/pay"), "POST"));
  EXPECT_NE(post.kind, OutcomeKind::kDone);
  EXPECT_TRUE(post.ambiguous) << post.reason;
  EXPECT_EQ(posts.heads().size(), 2u);  // the POST reached the server once
}

TEST(LoopClientPlain, AnswersNoClientMayTakeFailWithTheirReason) {
  ScriptedServer server([](int, const std::string& head) {
    if (head.starts_with("GET /two-lengths")) {
      return ScriptedServer::Reply{"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", true};
    }
    if (head.starts_with("GET /short")) return ScriptedServer::Reply{"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", true};
    if (head.starts_with("GET /bad-chunk")) {
      return ScriptedServer::Reply{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", true};
    }
    if (head.starts_with("GET /big-head")) {
      return ScriptedServer::Reply{"HTTP/1.1 200 OK\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n", true};
    }
    if (head.starts_with("GET /not-http")) return ScriptedServer::Reply{"SSH-2.0-OpenSSH\r\n\r\n", true};
    return ScriptedServer::Reply{"", true};  // nothing at all
  });
  ClientConfig c = test::fast_config();
  c.max_attempts = 1;
  c.max_header_bytes = 4096;
  LoopClient client(c);
  const auto reason = [&](const std::string& path) {
    const RequestOutcome out = fetch(client, get(server.url(path)));
    EXPECT_NE(out.kind, OutcomeKind::kDone) << path;
    EXPECT_EQ(out.body, "") << path;
    return out.reason;
  };
  EXPECT_NE(reason("/two-lengths").find("Content-Length"), std::string::npos);
  EXPECT_NE(reason("/short").find("6 bytes remaining"), std::string::npos);
  EXPECT_NE(reason("/bad-chunk").find("chunk"), std::string::npos);
  EXPECT_NE(reason("/big-head").find("response head is larger than 4096 bytes"), std::string::npos);
  EXPECT_NE(reason("/not-http").find("HTTP/1.x"), std::string::npos);
  EXPECT_NE(reason("/nothing").find("Server returned nothing"), std::string::npos);
}

// A server may answer a request at its head (413, 401) and never read its
// body: the answer is what the request got, read while the body is still
// being written, and the rest of the body is not sent (as curl: "HTTP error
// before end of send, stop sending"). The connection is not kept: the next
// request opens another. The body is larger than the socket buffers hold.
// A POST of a body larger than the socket buffers hold, with a read timeout
// far longer than the answer takes: without the answer read early, the
// request would wait for it.
RequestOutcome post_a_large_body(LoopClient& client, const ScriptedServer& server) {
  Request post = get(server.url("/upload"), "POST");
  post.body = std::string(std::size_t{64} << 20, 'b');
  return fetch(client, std::move(post));
}

ClientConfig long_read_timeout() {
  ClientConfig c = test::fast_config();
  c.read_timeout = 60s;
  return c;
}

TEST(LoopClientPlain, AnAnswerBeforeTheBodyWasReadEndsTheUpload) {
  ScriptedServer server([](int, const std::string& head) {
    if (head.starts_with("POST")) {
      return ScriptedServer::Reply{"HTTP/1.1 413 Content Too Large\r\nContent-Length: 8\r\n\r\ntoo long", false, true};
    }
    return ScriptedServer::Reply{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"};
  });
  LoopClient client(long_read_timeout());
  const RequestOutcome out = post_a_large_body(client, server);
  ASSERT_TRUE(out.response) << out.reason;
  EXPECT_EQ(out.response->status, 413) << out.reason;
  EXPECT_EQ(out.body, "too long");
  const RequestOutcome next = fetch(client, get(server.url("/after")));
  ASSERT_EQ(next.kind, OutcomeKind::kDone) << next.reason;
  EXPECT_EQ(next.body, "ok");
  EXPECT_EQ(server.connections(), 2);
}

// The same answer, and then the server closes: the answer is what the
// request got, not the failure to send the rest.
TEST(LoopClientPlain, AnAnswerAndACloseBeforeTheBodyWasReadIsTheAnswer) {
  ScriptedServer server([](int, const std::string&) {
    return ScriptedServer::Reply{"HTTP/1.1 401 Unauthorized\r\nContent-Length: 6\r\n\r\nwho?\r\n", true, true};
  });
  LoopClient client(long_read_timeout());
  const RequestOutcome out = post_a_large_body(client, server);
  ASSERT_TRUE(out.response) << out.reason;
  EXPECT_EQ(out.response->status, 401) << out.reason;
  EXPECT_EQ(out.body, "who?\r\n");
}

// A refused connection sent nothing: even a POST is tried again.
TEST(LoopClientPlain, ARefusedConnectionSentNothingSoAPostIsRetried) {
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(probe, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(probe);  // a port nobody listens on
  LoopClient client(test::fast_config());
  const RequestOutcome out = fetch(client, get("http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/", "POST"));
  EXPECT_EQ(out.kind, OutcomeKind::kExhausted) << out.reason;
  EXPECT_FALSE(out.ambiguous);
  EXPECT_EQ(out.attempts.size(), 3u);
  EXPECT_NE(out.reason.find("Couldn't connect"), std::string::npos) << out.reason;
}

}  // namespace
}  // namespace abide
