// abide::Client against real HTTP servers on 127.0.0.1 (cpp-httplib, and raw
// sockets for servers that misbehave).
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

namespace abide {
namespace {

using namespace std::chrono_literals;
using test::TestServer;

// A quick planner for tests: small backoff, no jitter.
using test::fast_config;

TEST(Client, GetDoneWithHeadersBodyAndOneAttempt) {
  TestServer server;
  server.svr().Get("/hello", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.set_header("X-Test", "yes");
    res.set_content("hello " + req.get_header_value("X-Name"), "text/plain");
  });
  Client client(fast_config());
  Request r;
  r.url = server.url("/hello");
  r.headers.add("X-Name", "abide");
  r.headers.add("Authorization", "Bearer secret");
  const RequestOutcome out = client.fetch(r);
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  ASSERT_TRUE(out.response);
  EXPECT_EQ(out.response->status, 200);
  EXPECT_EQ(out.response->body, "hello abide");
  EXPECT_EQ(out.response->headers.first("x-test").value_or(""), "yes");
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_EQ(out.attempts[0].status, 200);
  EXPECT_TRUE(out.attempts[0].sent);
  EXPECT_EQ(out.attempts[0].plan.decision, Decision::kDone);
  EXPECT_FALSE(out.ambiguous);
  const auto seen = server.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].authorization, "Bearer secret");
  EXPECT_EQ(seen[0].idempotency_key, "");
}

TEST(Client, RetryAfterIsWaitedForBeforeTheRetry) {
  TestServer server;
  server.svr().Get("/limited", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 429;
      res.set_header("Retry-After", "1");
      return;
    }
    res.set_content("ok", "text/plain");
  });
  Client client(fast_config());
  Request r;
  r.url = server.url("/limited");
  const RequestOutcome out = client.fetch(r);
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  ASSERT_EQ(out.attempts.size(), 2u);
  EXPECT_EQ(out.attempts[0].status, 429);
  EXPECT_EQ(out.attempts[0].plan.decision, Decision::kRetry);
  EXPECT_EQ(out.attempts[0].plan.basis, Basis::kRetryAfter);
  EXPECT_GE(out.attempts[0].plan.wait, 1s);
  const auto seen = server.seen();
  ASSERT_EQ(seen.size(), 2u);
  // The server's lower bound held: never earlier than 1 s after it answered.
  EXPECT_GE(seen[1].at - seen[0].at, 1s);
  // The wait counts from receipt; reading and planning the response take part
  // of it (more under sanitizers), so the time actually spent asleep is less.
  EXPECT_GE(out.waited, 500ms);
  EXPECT_LE(out.waited, 1500ms);
}

TEST(Client, PostWithoutIdempotencyKeyIsNotRetried) {
  TestServer server;
  server.svr().Post("/orders", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.status = 503;
    res.set_header("Retry-After", "0");
  });
  Client client(fast_config());
  Request r;
  r.method = "POST";
  r.url = server.url("/orders");
  r.body = "{}";
  const RequestOutcome out = client.fetch(r);
  EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable);
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_EQ(out.attempts[0].plan.reason, Reason::kNotIdempotent);
  EXPECT_FALSE(out.ambiguous);  // the server answered: it was not applied ambiguously
  EXPECT_EQ(server.seen().size(), 1u);
}

TEST(Client, PostWithIdempotencyKeyIsRetriedWithTheSameKey) {
  TestServer server;
  server.svr().Post("/orders", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 503;
      return;
    }
    res.status = 201;
  });
  Client client(fast_config());
  Request r;
  r.method = "POST";
  r.url = server.url("/orders");
  r.body = "{\"item\":1}";
  r.idempotency_key = "order-42";
  const RequestOutcome out = client.fetch(r);
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  EXPECT_EQ(out.response->status, 201);
  const auto seen = server.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].idempotency_key, "order-42");
  EXPECT_EQ(seen[1].idempotency_key, "order-42");
}

// The first answer promises 1000 bytes and the connection closes after 10.
void serve_cut_body(TestServer& server, httplib::Response& res, bool cut) {
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

TEST(Client, GetCutMidBodyIsRetried) {
  TestServer server;
  server.svr().Get("/cut", [&](const httplib::Request& req, httplib::Response& res) {
    serve_cut_body(server, res, server.log(req) == 0);
  });
  Client client(fast_config());
  Request r;
  r.url = server.url("/cut");
  const RequestOutcome out = client.fetch(r);
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  ASSERT_EQ(out.attempts.size(), 2u);
  EXPECT_EQ(out.attempts[0].status, 200);       // the head arrived ...
  EXPECT_FALSE(out.attempts[0].error.empty());  // ... the body did not
  EXPECT_TRUE(out.attempts[0].sent);
  EXPECT_EQ(out.attempts[0].plan.decision, Decision::kRetry);
  EXPECT_EQ(out.response->body.size(), 1000u);
  EXPECT_EQ(server.seen().size(), 2u);
}

TEST(Client, PostCutMidBodyIsAmbiguousAndNotRepeated) {
  TestServer server;
  server.svr().Post("/cut", [&](const httplib::Request& req, httplib::Response& res) {
    serve_cut_body(server, res, server.log(req) == 0);
  });
  Client client(fast_config());
  Request r;
  r.method = "POST";
  r.url = server.url("/cut");
  r.body = "pay";
  const RequestOutcome out = client.fetch(r);
  EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable);
  EXPECT_TRUE(out.ambiguous);
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_EQ(out.attempts[0].plan.reason, Reason::kAmbiguous);
  EXPECT_TRUE(out.attempts[0].sent);
  EXPECT_EQ(server.seen().size(), 1u);
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

TEST(Client, ServerThatNeverAnswersEndsAtTheDeadline) {
  SilentServer silent;
  Client client(fast_config());
  Request r;
  r.url = silent.url();
  r.deadline = system_monotonic_clock().now() + 300ms;
  const RequestOutcome out = client.fetch(r);
  EXPECT_EQ(out.kind, OutcomeKind::kDeadlineExceeded);
  EXPECT_NE(out.reason.find("deadline"), std::string::npos) << out.reason;
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_TRUE(out.attempts[0].sent);
  EXPECT_FALSE(out.ambiguous);  // a GET
}

TEST(Client, RefusedConnectionIsNotSentSoEvenPostIsRepeated) {
  int port = 0;
  {
    TestServer gone;  // a port that was just free, now closed
    port = std::stoi(gone.url("").substr(std::string("http://127.0.0.1:").size()));
  }
  Client client(fast_config());
  Request r;
  r.method = "POST";
  r.url = "http://127.0.0.1:" + std::to_string(port) + "/x";
  const RequestOutcome out = client.fetch(r);
  EXPECT_EQ(out.kind, OutcomeKind::kExhausted) << out.reason;
  EXPECT_EQ(out.attempts.size(), 3u);
  EXPECT_FALSE(out.attempts[0].sent);
  EXPECT_FALSE(out.ambiguous);
}

TEST(Client, StopCancelsARetryWaitPromptly) {
  TestServer server;
  server.svr().Get("/slow", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.status = 503;
    res.set_header("Retry-After", "30");
  });
  std::atomic<bool> waiting{false};
  ClientConfig c = fast_config();
  c.on_event = [&](const ClientEvent& e) {
    if (e.kind == ClientEvent::Kind::kWaitStarted && e.wait_kind == ClientEvent::WaitKind::kRetry) waiting = true;
  };
  Client client(c);
  Request r;
  r.url = server.url("/slow");
  std::stop_source stop;
  const auto t0 = std::chrono::steady_clock::now();
  auto fut = std::async(std::launch::async, [&] { return client.fetch(r, stop.get_token()); });
  for (int i = 0; i < 2000 && !waiting; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(waiting);
  stop.request_stop();
  const RequestOutcome out = fut.get();
  EXPECT_EQ(out.kind, OutcomeKind::kCancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  ASSERT_TRUE(out.not_before_wall);  // the server's time is kept for a resume
  EXPECT_EQ(server.seen().size(), 1u);
}

TEST(Client, StopAbortsATransferInFlight) {
  TestServer server;
  server.svr().Post("/hang", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    server.hold(20s);
    res.set_content("late", "text/plain");
  });
  Client client(fast_config());
  Request r;
  r.method = "POST";
  r.url = server.url("/hang");
  r.body = "x";
  std::stop_source stop;
  const auto t0 = std::chrono::steady_clock::now();
  auto fut = std::async(std::launch::async, [&] { return client.fetch(r, stop.get_token()); });
  for (int i = 0; i < 2000 && server.seen().empty(); ++i) std::this_thread::sleep_for(5ms);
  stop.request_stop();
  const RequestOutcome out = fut.get();
  EXPECT_EQ(out.kind, OutcomeKind::kCancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_TRUE(out.attempts[0].sent);
  EXPECT_TRUE(out.ambiguous);  // a POST that went out may have been applied
}

TEST(Client, InvalidRequestsEndWithoutSending) {
  Client client(fast_config());
  Request bad_url;
  bad_url.url = "ftp://127.0.0.1/file";
  RequestOutcome out = client.fetch(bad_url);
  EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable);
  EXPECT_TRUE(out.attempts.empty());
  EXPECT_NE(out.reason.find("scheme"), std::string::npos) << out.reason;

  TestServer server;
  server.svr().Get("/x", [&](const httplib::Request& req, httplib::Response&) { server.log(req); });
  Request injected;
  injected.url = server.url("/x");
  injected.headers = HeaderList(std::vector<Header>{{"X-A", "1\r\nX-Evil: 2"}});
  out = client.fetch(injected);
  EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable);
  EXPECT_TRUE(server.seen().empty());

  Request method;
  method.method = "GE T";
  method.url = server.url("/x");
  EXPECT_EQ(client.fetch(method).kind, OutcomeKind::kNotRetryable);
  EXPECT_TRUE(server.seen().empty());
}

TEST(Client, BodyOverTheLimitIsNotRetryable) {
  TestServer server;
  server.svr().Get("/big", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.set_content(std::string(5000, 'b'), "text/plain");
  });
  ClientConfig c = fast_config();
  c.max_body_bytes = 100;
  Client client(c);
  Request r;
  r.url = server.url("/big");
  const RequestOutcome out = client.fetch(r);
  EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable);
  EXPECT_NE(out.reason.find("larger than"), std::string::npos) << out.reason;
  EXPECT_EQ(server.seen().size(), 1u);
}

TEST(Client, NotBeforeAfterTheDeadlineSendsNothing) {
  TestServer server;
  server.svr().Get("/x", [&](const httplib::Request& req, httplib::Response&) { server.log(req); });
  Client client(fast_config());
  Request r;
  r.url = server.url("/x");
  r.not_before = system_wall_clock().now() + 60s;
  r.deadline = system_monotonic_clock().now() + 1s;
  const RequestOutcome out = client.fetch(r);
  EXPECT_EQ(out.kind, OutcomeKind::kDeadlineExceeded);
  EXPECT_TRUE(out.not_before_wall);
  EXPECT_TRUE(server.seen().empty());
}

TEST(Client, EventsTellTheStoryInOrder) {
  TestServer server;
  server.svr().Get("/e", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 503;
      return;
    }
    res.set_content("ok", "text/plain");
  });
  std::mutex mu;
  std::vector<ClientEvent::Kind> kinds;
  ClientConfig c = fast_config();
  c.on_event = [&](const ClientEvent& e) {
    std::lock_guard lock(mu);
    kinds.push_back(e.kind);
  };
  Client client(c);
  Request r;
  r.url = server.url("/e");
  ASSERT_EQ(client.fetch(r).kind, OutcomeKind::kDone);
  using K = ClientEvent::Kind;
  const std::vector<K> want{K::kWaitStarted,    K::kWaitEnded,        K::kAttemptStarted, K::kResponseObserved,
                            K::kDecision,       K::kWaitStarted,      K::kWaitEnded,  // the retry wait
                            K::kWaitStarted,    K::kWaitEnded,                        // the pacer
                            K::kAttemptStarted, K::kResponseObserved, K::kDecision,       K::kFinished};
  EXPECT_EQ(kinds, want);
}

TEST(Client, BatchSharesConnectionsAndEndsEveryRequest) {
  TestServer server;
  std::atomic<int> n{0};
  server.svr().Get(R"(/item/(\d+))", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    if (n.fetch_add(1) % 5 == 4) {  // every fifth answer: come back shortly
      res.status = 503;
      return;
    }
    res.set_content(req.matches[1].str(), "text/plain");
  });
  Client client(fast_config());
  std::vector<Request> batch(24);
  for (std::size_t i = 0; i < batch.size(); ++i) batch[i].url = server.url("/item/" + std::to_string(i));
  std::atomic<std::size_t> callbacks{0};
  BatchOptions opts;
  opts.jobs = 3;
  opts.on_done = [&](std::size_t, const RequestOutcome&) { callbacks.fetch_add(1); };
  const auto outcomes = client.fetch_all(batch, opts);
  ASSERT_EQ(outcomes.size(), batch.size());
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    ASSERT_EQ(outcomes[i].kind, OutcomeKind::kDone) << i << ": " << outcomes[i].reason;
    EXPECT_EQ(outcomes[i].response->body, std::to_string(i));
  }
  EXPECT_EQ(callbacks.load(), batch.size());
  std::set<int> ports;
  for (const auto& s : server.seen()) ports.insert(s.remote_port);
  EXPECT_LE(ports.size(), 3u);  // one connection per worker, reused
}

TEST(Client, StoppedBatchEndsEveryRequestAsCancelled) {
  TestServer server;
  server.svr().Get(R"(/w/(\d+))", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.status = 429;
    res.set_header("Retry-After", "30");
  });
  Client client(fast_config());
  std::vector<Request> batch(10);
  for (std::size_t i = 0; i < batch.size(); ++i) batch[i].url = server.url("/w/" + std::to_string(i));
  std::stop_source stop;
  auto fut = std::async(std::launch::async, [&] {
    BatchOptions o;
    o.jobs = 4;
    return client.fetch_all(batch, o, stop.get_token());
  });
  for (int i = 0; i < 2000 && server.seen().empty(); ++i) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(100ms);
  stop.request_stop();
  const auto outcomes = fut.get();
  ASSERT_EQ(outcomes.size(), batch.size());
  for (const auto& o : outcomes) EXPECT_EQ(o.kind, OutcomeKind::kCancelled) << o.reason;
  EXPECT_LE(server.seen().size(), 4u);  // one cooldown held the others back
}

TEST(Client, ManualClockDrivesTheWaits) {
  TestServer server;
  server.svr().Get("/m", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 429;
      res.set_header("Retry-After", "3600");
      return;
    }
    res.set_content("ok", "text/plain");
  });
  ManualClock clock;
  ClientConfig c = fast_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  Client client(c);
  Request r;
  r.url = server.url("/m");
  auto fut = std::async(std::launch::async, [&] { return client.fetch(r); });
  // An hour passes in a few steps of the manual clock, none on the real one.
  for (int i = 0; i < 20000 && fut.wait_for(1ms) != std::future_status::ready; ++i) {
    if (clock.sleepers() > 0) clock.advance(10min);
  }
  ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
  const RequestOutcome out = fut.get();
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  EXPECT_EQ(out.attempts.size(), 2u);
  EXPECT_GE(out.waited, 3600s);
}

TEST(Client, OriginOf) {
  EXPECT_EQ(Client::origin_of("https://API.Example.com/v1?x=1").value_or(""), "https://api.example.com");
  EXPECT_EQ(Client::origin_of("http://127.0.0.1:8080/").value_or(""), "http://127.0.0.1:8080");
  EXPECT_EQ(Client::origin_of("https://h:443/").value_or(""), "https://h");
  EXPECT_FALSE(Client::origin_of("file:///etc/passwd"));
  EXPECT_FALSE(Client::origin_of("not a url"));
}


// The wall clock jumps an hour forward, then two back, then one forward while a
// retry wait runs: the wait runs on the monotonic clock alone, so the retry is
// sent exactly when the monotonic clock reaches the end of the wait, no earlier
// and no later (docs/RULES.md rule 3). Once for each form of Retry-After: a delay,
// and a date (turned into an interval at receipt, never looked at again).
void wall_clock_jumps_leave_the_wait_unchanged(bool date_form) {
  ManualClock clock;
  const MonoTime t0 = clock.mono_now();
  TestServer server;
  server.svr().Get("/jump", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 429;
      const WallTime now = clock.wall_now();
      // The server's clock agrees with ours (no skew to lengthen the wait).
      res.set_header("Date", format_imf_fixdate(now));
      res.set_header("Retry-After", date_form ? format_imf_fixdate(now + 60s) : std::string("60"));
      return;
    }
    res.set_content("ok", "text/plain");
  });
  ClientConfig c = fast_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  std::mutex mu;
  std::vector<Duration> retry_waits_planned;
  c.on_event = [&](const ClientEvent& e) {
    if (e.kind == ClientEvent::Kind::kWaitStarted && e.wait_kind == ClientEvent::WaitKind::kRetry) {
      std::lock_guard lock(mu);
      retry_waits_planned.push_back(e.wait);
    }
  };
  Client client(c);
  Request r;
  r.url = server.url("/jump");
  auto fut = std::async(std::launch::async, [&] { return client.fetch(r); });

  clock.wait_for_sleepers(1);  // the retry wait has begun
  EXPECT_EQ(server.seen().size(), 1u);
  clock.jump_wall(1h);
  clock.advance_monotonic(20s);
  clock.jump_wall(-2h);
  clock.advance_monotonic(20s);
  clock.jump_wall(1h);
  clock.advance_monotonic(19s);
  EXPECT_EQ(server.seen().size(), 1u);  // 59 s of the 60 s: still waiting
  clock.advance_monotonic(1s);          // exactly the end of the wait; never further

  ASSERT_EQ(fut.wait_for(10s), std::future_status::ready) << "the retry was not sent at the end of the wait";
  const RequestOutcome out = fut.get();
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  ASSERT_EQ(out.attempts.size(), 2u);
  EXPECT_EQ(out.attempts[0].status, 429);
  EXPECT_EQ(out.attempts[1].started_mono - t0, 60s);
  EXPECT_EQ(out.waited, 60s);
  std::lock_guard lock(mu);
  EXPECT_EQ(retry_waits_planned, std::vector<Duration>{Duration{60s}});
}

TEST(Client, WallClockJumpsDuringADelayWaitChangeNothing) { wall_clock_jumps_leave_the_wait_unchanged(false); }

TEST(Client, WallClockJumpsDuringADateWaitChangeNothing) { wall_clock_jumps_leave_the_wait_unchanged(true); }

// The client learns each origin's server clock from the Dates it receives and
// reads a date-form Retry-After against it (ServerClock). `offsets`: the clocks
// of the servers behind the origin, relative to ours, answering in turn; 41
// answers 290 ms apart, then a 503 whose Retry-After is 3 s after its Date.
// Returns the planned server hint and the answering server's true wait.
std::pair<Duration, Duration> learned_date_wait(const std::vector<Duration>& offsets, Duration* date_alone) {
  ManualClock clock;
  clock.advance(810ms);  // the 503's server reads x.3 s: up to 0.7 s to gain, or to lose
  TestServer server;
  std::atomic<bool> limit{false};
  std::mutex mu;
  Duration true_wait{};
  server.svr().Get("/t", [&](const httplib::Request& req, httplib::Response& res) {
    const std::size_t n = server.log(req);
    const WallTime server_now = clock.wall_now() + offsets[n % offsets.size()];
    const WallTime date = std::chrono::floor<std::chrono::seconds>(server_now);
    res.set_header("Date", format_imf_fixdate(date));
    if (limit) {
      res.status = 503;
      res.set_header("Retry-After", format_imf_fixdate(date + 3s));
      std::lock_guard lock(mu);
      true_wait = date + 3s - server_now;
      *date_alone = std::max(date + 3s - date, date + 3s - clock.wall_now());
      return;
    }
    res.set_content("ok", "text/plain");
  });
  ClientConfig c = fast_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  c.max_attempts = 1;  // report the plan, do not wait for it
  Client client(c);
  Request r;
  r.url = server.url("/t");
  for (int i = 0; i < 41; ++i) {
    EXPECT_EQ(client.fetch(r).kind, OutcomeKind::kDone);
    clock.advance(290ms);
  }
  limit = true;
  const RequestOutcome out = client.fetch(r);
  EXPECT_EQ(out.kind, OutcomeKind::kExhausted) << out.reason;
  std::lock_guard lock(mu);
  if (out.attempts.size() != 1 || !out.attempts[0].plan.server_hint) return {Duration::zero(), true_wait};
  return {*out.attempts[0].plan.server_hint, true_wait};
}

TEST(Client, ASingleServersLearnedClockTightensADateWait) {
  Duration date_alone{};
  const auto [hint, truth] = learned_date_wait({-400ms}, &date_alone);
  EXPECT_GE(hint, truth);
  EXPECT_LE(hint, truth + 20ms);
  EXPECT_GT(date_alone - hint, 250ms);  // what the Date alone would have cost
}

TEST(Client, TwoServersBehindOneOriginNeverMakeADateWaitEarly) {
  // Our clock and one 0.4 s behind it, in turn; the 503 comes from the slower one.
  Duration date_alone{};
  const auto [hint, truth] = learned_date_wait({0ms, -400ms}, &date_alone);
  EXPECT_GE(hint, truth);
  EXPECT_EQ(hint, date_alone);  // the origin's floor is no longer used
}

// ---- A caller's own easy handle (Client::perform) ----

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

std::size_t append_to_string(char* data, std::size_t size, std::size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

TEST(OwnHandle, CallersHeaderAndUserAgentGoOutOnEveryAttempt) {
  TestServer server;
  server.svr().Get("/own", [&](const httplib::Request& req, httplib::Response& res) {
    const std::size_t n = server.log(req);
    if (n < 2) {
      res.status = n == 0 ? 503 : 429;
      res.set_header("Retry-After", "0");
      return;
    }
    res.set_content("third time", "text/plain");
  });
  CallersHandle h;
  Client client(fast_config());
  Request r;
  r.url = server.url("/own");
  const RequestOutcome out = client.perform(h.easy.get(), r);
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  ASSERT_EQ(out.attempts.size(), 3u);
  EXPECT_EQ(out.attempts[0].status, 503);
  EXPECT_EQ(out.attempts[1].status, 429);
  EXPECT_EQ(out.response->status, 200);
  EXPECT_EQ(out.response->body, "third time");  // no write callback of its own: kept in the outcome
  const auto seen = server.seen();
  ASSERT_EQ(seen.size(), 3u);
  for (const auto& s : seen) {
    EXPECT_EQ(s.caller, "mine");
    EXPECT_EQ(s.user_agent, "caller-agent/1");
  }
}

TEST(OwnHandle, RetryAfterIsObeyedWithNoEarlyRequest) {
  ManualClock clock;
  const MonoTime t0 = clock.mono_now();
  TestServer server;
  server.svr().Get("/wait", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 429;
      res.set_header("Date", format_imf_fixdate(clock.wall_now()));
      res.set_header("Retry-After", "60");
      return;
    }
    res.set_content("ok", "text/plain");
  });
  ClientConfig c = fast_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  Client client(c);
  CallersHandle h;
  Request r;
  r.url = server.url("/wait");
  auto fut = std::async(std::launch::async, [&] { return client.perform(h.easy.get(), r); });
  clock.wait_for_sleepers(1);  // the retry wait has begun
  clock.advance_monotonic(59s);
  EXPECT_EQ(server.seen().size(), 1u);  // one second short: nothing sent
  clock.advance_monotonic(1s);
  ASSERT_EQ(fut.wait_for(10s), std::future_status::ready) << "the retry was not sent at the end of the wait";
  const RequestOutcome out = fut.get();
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  ASSERT_EQ(out.attempts.size(), 2u);
  EXPECT_EQ(out.attempts[0].plan.basis, Basis::kRetryAfter);
  EXPECT_EQ(out.attempts[1].started_mono - t0, 60s);
  EXPECT_EQ(out.waited, 60s);
  const auto seen = server.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].caller, "mine");
}

TEST(OwnHandle, CallersCallbacksGetTheFinalAnswerAndAreSetBackAfterwards) {
  TestServer server;
  server.svr().Get("/cb", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 503;
      res.set_content("not this one", "text/plain");
      return;
    }
    res.set_header("X-Final", "yes");
    res.set_content("final", "text/plain");
  });
  CallersHandle h;
  std::string body;
  std::string head;
  curl_easy_setopt(h.easy.get(), CURLOPT_WRITEFUNCTION, &append_to_string);
  curl_easy_setopt(h.easy.get(), CURLOPT_WRITEDATA, static_cast<void*>(&body));
  curl_easy_setopt(h.easy.get(), CURLOPT_HEADERFUNCTION, &append_to_string);
  curl_easy_setopt(h.easy.get(), CURLOPT_HEADERDATA, static_cast<void*>(&head));
  HandleCallbacks mine;
  mine.write = &append_to_string;
  mine.write_data = &body;
  mine.header = &append_to_string;
  mine.header_data = &head;

  Client client(fast_config());
  Request r;
  r.url = server.url("/cb");
  const RequestOutcome out = client.perform(h.easy.get(), r, mine);
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  EXPECT_EQ(out.attempts.size(), 2u);
  // The final answer streamed to the caller's callbacks; the retried one did not.
  EXPECT_EQ(body, "final");
  EXPECT_EQ(out.body_bytes, 5u);
  EXPECT_TRUE(out.response->body.empty());
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_NE(head.find("X-Final: yes"), std::string::npos) << head;
  EXPECT_EQ(head.find("503"), std::string::npos) << head;

  // The handle has the caller's callbacks again (and keeps the URL).
  body.clear();
  head.clear();
  ASSERT_EQ(curl_easy_perform(h.easy.get()), CURLE_OK);
  EXPECT_EQ(body, "final");
  EXPECT_NE(head.find("X-Final: yes"), std::string::npos) << head;
  EXPECT_EQ(server.seen().size(), 3u);
}

// ---- A limited answer whose body is read for its wait (Gemini's retryDelay) ----

// What the caller's callbacks saw, in order: "H" for a head line, "B" for body.
struct CallbackLog {
  std::vector<std::pair<char, std::string>> seen;
  std::string heads() const {
    std::string all;
    for (const auto& [what, text] : seen)
      if (what == 'H') all += text;
    return all;
  }
  std::string body() const {
    std::string all;
    for (const auto& [what, text] : seen)
      if (what == 'B') all += text;
    return all;
  }
};
std::size_t log_head(char* data, std::size_t size, std::size_t n, void* user) {
  static_cast<CallbackLog*>(user)->seen.emplace_back('H', std::string(data, size * n));
  return size * n;
}
std::size_t log_body(char* data, std::size_t size, std::size_t n, void* user) {
  static_cast<CallbackLog*>(user)->seen.emplace_back('B', std::string(data, size * n));
  return size * n;
}
HandleCallbacks logging_to(CallbackLog& log) {
  HandleCallbacks cb;
  cb.write = &log_body;
  cb.write_data = &log;
  cb.header = &log_head;
  cb.header_data = &log;
  return cb;
}

std::string retry_info(std::string_view delay) {
  return R"({"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[)"
         R"({"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":")" +
         std::string(delay) + R"("}]}})";
}

ClientConfig gemini_config() {
  ClientConfig c = fast_config();
  c.profile = "gemini";  // the test server is not Google's host
  return c;
}

// Retried: the 429's head and body are not the caller's; only the 200 is.
TEST(OwnHandle, ABodyReadForItsWaitIsNotTheCallersWhenTheAnswerIsRetried) {
  TestServer server;
  server.svr().Post("/gen", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 429;
      res.set_header("X-Limited", "yes");
      res.set_content(retry_info("0.2s"), "application/json");
      return;
    }
    res.set_header("X-Final", "yes");
    res.set_content("generated", "text/plain");
  });
  CallersHandle h;
  CallbackLog log;
  curl_easy_setopt(h.easy.get(), CURLOPT_POSTFIELDS, "{}");
  Client client(gemini_config());
  Request r;
  r.method = "POST";
  r.url = server.url("/gen");
  r.idempotency_key = "k1";
  const RequestOutcome out = client.perform(h.easy.get(), r, logging_to(log));
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  ASSERT_EQ(out.attempts.size(), 2u);
  EXPECT_NE(out.attempts[0].reason.find("retryDelay"), std::string::npos) << out.attempts[0].reason;
  EXPECT_GE(out.attempts[1].started_mono - out.attempts[0].started_mono, 200ms);
  EXPECT_EQ(log.heads().rfind("HTTP/1.1 200", 0), 0u) << log.heads();
  EXPECT_EQ(log.heads().find("429"), std::string::npos) << log.heads();
  EXPECT_EQ(log.heads().find("X-Limited"), std::string::npos) << log.heads();
  EXPECT_EQ(log.body(), "generated");
  ASSERT_FALSE(log.seen.empty());
  EXPECT_EQ(log.seen.back().first, 'B');
}

// The answer ends the request (its wait is past the deadline): its head goes
// to the header callback once, whole, before any of its body.
TEST(OwnHandle, ABodyReadForItsWaitReachesTheCallerAfterItsHeadWhenFinal) {
  const std::string limited = retry_info("52s");  // outlives the server's threads
  TestServer server;
  server.svr().Get("/gen", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.status = 429;
    res.set_header("X-Limited", "yes");
    res.set_content(limited, "application/json");
  });
  CallersHandle h;
  CallbackLog log;
  Client client(gemini_config());
  Request r;
  r.url = server.url("/gen");
  r.deadline = system_monotonic_clock().now() + 5s;
  const RequestOutcome out = client.perform(h.easy.get(), r, logging_to(log));
  EXPECT_EQ(out.kind, OutcomeKind::kDeadlineExceeded) << out.reason;
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_EQ(server.seen().size(), 1u);
  const std::string heads = log.heads();
  EXPECT_EQ(heads.rfind("HTTP/1.1 429", 0), 0u) << heads;
  EXPECT_EQ(heads.find("HTTP/1.1 429", 1), std::string::npos) << "the head was given twice: " << heads;
  EXPECT_NE(heads.find("X-Limited: yes"), std::string::npos) << heads;
  EXPECT_EQ(log.body(), limited);
  // Every head line comes before the first body byte.
  bool body_begun = false;
  for (const auto& [what, text] : log.seen) {
    if (what == 'B') body_begun = true;
    EXPECT_FALSE(body_begun && what == 'H') << "a head line after the body: " << text;
  }
  ASSERT_TRUE(out.not_before_mono);
  EXPECT_GE(*out.not_before_mono - out.attempts[0].started_mono, 52s);
}

// A limited answer with nothing in its body still gives the caller its head
// (the body was awaited for a wait, and none came).
TEST(OwnHandle, ALimitedAnswerWithAnEmptyBodyStillGivesItsHead) {
  TestServer server;
  server.svr().Get("/gen", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.status = 429;
    res.set_header("X-Limited", "yes");
    // Chunked and empty: the body is read for a wait until it ends.
    res.set_chunked_content_provider("application/json", [](std::size_t, httplib::DataSink& sink) {
      sink.done();
      return true;
    });
  });
  CallersHandle h;
  CallbackLog log;
  ClientConfig c = gemini_config();
  c.max_attempts = 1;
  Client client(c);
  Request r;
  r.url = server.url("/gen");
  const RequestOutcome out = client.perform(h.easy.get(), r, logging_to(log));
  EXPECT_NE(out.kind, OutcomeKind::kDone) << out.reason;
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_EQ(out.attempts[0].status, 429);
  EXPECT_EQ(log.heads().rfind("HTTP/1.1 429", 0), 0u) << log.heads();
  EXPECT_NE(log.heads().find("X-Limited: yes"), std::string::npos) << log.heads();
  for (const auto& [what, text] : log.seen) EXPECT_EQ(what, 'H') << "the write callback was called with nothing";
}

TEST(OwnHandle, OptionThatFailsBeforeSendingIsNotSentSoEvenPostIsRepeated) {
  int closed_port = 0;
  {
    TestServer gone;  // a port that was just free, now closed
    closed_port = std::stoi(gone.url("").substr(std::string("http://127.0.0.1:").size()));
  }
  TestServer server;
  server.svr().Post("/p", [&](const httplib::Request& req, httplib::Response&) { server.log(req); });
  CallersHandle h;
  const std::string proxy = "http://127.0.0.1:" + std::to_string(closed_port);
  curl_easy_setopt(h.easy.get(), CURLOPT_PROXY, proxy.c_str());  // nobody listens there
  curl_easy_setopt(h.easy.get(), CURLOPT_POSTFIELDS, "pay");
  Client client(fast_config());
  Request r;
  r.method = "POST";
  r.url = server.url("/p");
  const RequestOutcome out = client.perform(h.easy.get(), r);
  EXPECT_EQ(out.kind, OutcomeKind::kExhausted) << out.reason;
  ASSERT_EQ(out.attempts.size(), 3u);
  for (const Attempt& a : out.attempts) {
    EXPECT_FALSE(a.sent);
    EXPECT_FALSE(a.error.empty());
  }
  EXPECT_FALSE(out.ambiguous);
  EXPECT_TRUE(server.seen().empty());
}

TEST(OwnHandle, OptionThatFailsAfterSendingMakesAPostAmbiguous) {
  SilentServer silent;
  CallersHandle h;
  curl_easy_setopt(h.easy.get(), CURLOPT_TIMEOUT_MS, 300L);  // the caller's own timeout
  curl_easy_setopt(h.easy.get(), CURLOPT_POSTFIELDS, "pay");
  Client client(fast_config());
  Request r;
  r.method = "POST";
  r.url = silent.url();
  const RequestOutcome out = client.perform(h.easy.get(), r);
  EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_TRUE(out.attempts[0].sent);
  EXPECT_NE(out.attempts[0].error.find("imeout"), std::string::npos) << out.attempts[0].error;
  EXPECT_TRUE(out.ambiguous);
}

TEST(OwnHandle, AHandleSendingAnotherMethodIsNotRepeated) {
  TestServer server;
  server.svr().Post("/m", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.status = 503;
  });
  CallersHandle h;
  curl_easy_setopt(h.easy.get(), CURLOPT_POSTFIELDS, "x");  // a POST ...
  Client client(fast_config());
  Request r;  // ... stated as a GET
  r.url = server.url("/m");
  const RequestOutcome out = client.perform(h.easy.get(), r);
  EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  EXPECT_NE(out.reason.find("POST"), std::string::npos) << out.reason;
  EXPECT_EQ(server.seen().size(), 1u);
}

TEST(OwnHandle, RequestHeadersOrBodyAreRefusedWithoutSending) {
  TestServer server;
  server.svr().Get("/x", [&](const httplib::Request& req, httplib::Response&) { server.log(req); });
  CallersHandle h;
  Client client(fast_config());
  Request with_header;
  with_header.url = server.url("/x");
  with_header.headers.add("X-A", "1");
  RequestOutcome out = client.perform(h.easy.get(), with_header);
  EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable);
  EXPECT_NE(out.reason.find("CURLOPT_HTTPHEADER"), std::string::npos) << out.reason;
  Request with_body;
  with_body.method = "POST";
  with_body.url = server.url("/x");
  with_body.body = "b";
  EXPECT_EQ(client.perform(h.easy.get(), with_body).kind, OutcomeKind::kNotRetryable);
  Request bad_url;
  bad_url.url = "ftp://127.0.0.1/file";
  EXPECT_EQ(client.perform(h.easy.get(), bad_url).kind, OutcomeKind::kNotRetryable);
  EXPECT_EQ(client.perform(nullptr, Request{}).kind, OutcomeKind::kNotRetryable);
  EXPECT_TRUE(server.seen().empty());
}

TEST(OwnHandle, TheRequestsDeadlineEndsATransferTheHandleWouldWaitOn) {
  SilentServer silent;
  CallersHandle h;  // its own timeout is 20 s
  Client client(fast_config());
  Request r;
  r.url = silent.url();
  r.deadline = system_monotonic_clock().now() + 300ms;
  const auto t0 = std::chrono::steady_clock::now();
  const RequestOutcome out = client.perform(h.easy.get(), r);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  EXPECT_EQ(out.kind, OutcomeKind::kDeadlineExceeded) << out.reason;
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_TRUE(out.attempts[0].sent);
  EXPECT_FALSE(out.ambiguous);  // a GET
}

TEST(OwnHandle, StopAbortsATransferOnTheHandle) {
  TestServer server;
  server.svr().Get("/hang", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    server.hold(20s);
    res.set_content("late", "text/plain");
  });
  CallersHandle h;
  Client client(fast_config());
  Request r;
  r.url = server.url("/hang");
  std::stop_source stop;
  const auto t0 = std::chrono::steady_clock::now();
  auto fut = std::async(std::launch::async, [&] { return client.perform(h.easy.get(), r, {}, stop.get_token()); });
  for (int i = 0; i < 2000 && server.seen().empty(); ++i) std::this_thread::sleep_for(5ms);
  stop.request_stop();
  const RequestOutcome out = fut.get();
  EXPECT_EQ(out.kind, OutcomeKind::kCancelled) << out.reason;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_TRUE(out.attempts[0].sent);
}

// ---- Streaming the final answer (Client::fetch with a ResponseSink) ----

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

TEST(ClientStream, EachChunkReachesTheSinkAsItArrives) {
  // What the server's threads use is declared before the server, which joins
  // them when it goes (ThreadSanitizer cannot see the order over loopback).
  std::promise<void> first_seen;
  std::shared_future<void> first_seen_f = first_seen.get_future().share();
  std::atomic<bool> server_gave_up{false};
  TestServer server;
  server.svr().Get("/sse", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.set_chunked_content_provider("text/event-stream", [&](std::size_t offset, httplib::DataSink& sink) {
      if (offset == 0) return sink.write("data: one\n\n", 11);
      // The rest only once the client has handed the first chunk on: a client
      // that waited for the whole body would wait here until the timeout.
      if (first_seen_f.wait_for(20s) != std::future_status::ready) server_gave_up = true;
      sink.write("data: two\n\n", 11);
      sink.done();
      return true;
    });
  });
  Client client(fast_config());
  Request r;
  r.url = server.url("/sse");
  SinkLog log;
  ResponseSink sink = log.sink();
  bool signalled = false;
  sink.body = [&, inner = sink.body](std::string_view chunk) {
    const bool ok = inner(chunk);
    if (!signalled && log.body().find("data: one") != std::string::npos) {
      signalled = true;
      first_seen.set_value();
    }
    return ok;
  };
  auto fut = std::async(std::launch::async, [&] { return client.fetch(r, sink); });
  ASSERT_EQ(fut.wait_for(60s), std::future_status::ready) << "the streamed fetch never ended";
  const RequestOutcome out = fut.get();
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  EXPECT_FALSE(server_gave_up) << "the first chunk did not reach the sink before the body ended";
  EXPECT_TRUE(signalled);
  EXPECT_EQ(log.body(), "data: one\n\ndata: two\n\n");
  {
    std::lock_guard lock(log.mu);
    ASSERT_GE(log.chunks.size(), 2u);
    EXPECT_EQ(log.chunks[0], "data: one\n\n");  // alone: it was handed on before the rest existed
    EXPECT_EQ(log.heads, 1);
    EXPECT_EQ(log.status, 200);
    EXPECT_FALSE(log.body_before_head);
  }
  ASSERT_TRUE(out.response);
  EXPECT_TRUE(out.response->body.empty());  // the body went to the sink, not into the outcome
  EXPECT_EQ(out.body_bytes, 22u);
}

TEST(ClientStream, ARetriedAnswerNeverReachesTheSink) {
  TestServer server;
  server.svr().Get("/r", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 503;
      res.set_header("Retry-After", "0");
      res.set_content("not this one", "text/plain");
      return;
    }
    res.set_header("X-Final", "yes");
    res.set_content("final", "text/plain");
  });
  Client client(fast_config());
  Request r;
  r.url = server.url("/r");
  SinkLog log;
  const RequestOutcome out = client.fetch(r, log.sink());
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  ASSERT_EQ(out.attempts.size(), 2u);
  EXPECT_EQ(out.attempts[0].status, 503);
  EXPECT_EQ(out.attempts[0].plan.decision, Decision::kRetry);
  EXPECT_EQ(log.body(), "final");
  std::lock_guard lock(log.mu);
  EXPECT_EQ(log.heads, 1);
  EXPECT_EQ(log.status, 200);
  EXPECT_EQ(log.kind, OutcomeKind::kDone);
  EXPECT_EQ(log.attempts_at_head, 2u);  // the 503's attempt and this one
  EXPECT_EQ(server.seen().size(), 2u);
}

// A retried answer's body reaches nobody: a short one is dropped as it comes
// and the retry goes on the same connection; a long one is cut (a new one).
void retried_body_of(std::size_t size, bool same_connection) {
  const std::string dropped(size, 'd');
  TestServer server;
  server.svr().Get("/r", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 503;
      res.set_header("Retry-After", "0");
      res.set_content(dropped, "text/plain");
      return;
    }
    res.set_content("final", "text/plain");
  });
  Client client(fast_config());
  Request r;
  r.url = server.url("/r");
  SinkLog log;
  const RequestOutcome out = client.fetch(r, log.sink());
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  EXPECT_EQ(out.attempts.size(), 2u);
  EXPECT_EQ(log.body(), "final");
  EXPECT_EQ(out.body_bytes, 5u);
  const auto seen = server.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].remote_port == seen[1].remote_port, same_connection) << size;
}

TEST(ClientStream, AShortRetriedBodyIsDroppedOnItsConnection) { retried_body_of(1000, true); }

TEST(ClientStream, ALongRetriedBodyIsCutNotRead) { retried_body_of(std::size_t{8} << 20, false); }

TEST(ClientStream, ADeferredAnswerStreamsWithItsPermittedTime) {
  TestServer server;
  server.svr().Get("/d", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.status = 429;
    res.set_header("Retry-After", "3600");
    res.set_content("{\"error\":\"slow down\"}", "application/json");
  });
  ClientConfig c = fast_config();
  c.planner.max_wait = 60s;  // below the hint: the request ends deferred
  Client client(c);
  Request r;
  r.url = server.url("/d");
  SinkLog log;
  const RequestOutcome out = client.fetch(r, log.sink());
  EXPECT_EQ(out.kind, OutcomeKind::kDeferred) << out.reason;
  ASSERT_TRUE(out.not_before_wall);
  EXPECT_EQ(log.body(), "{\"error\":\"slow down\"}");
  std::lock_guard lock(log.mu);
  EXPECT_EQ(log.heads, 1);
  EXPECT_EQ(log.status, 429);
  EXPECT_EQ(log.kind, OutcomeKind::kDeferred);
  ASSERT_TRUE(log.not_before_at_head);
  EXPECT_EQ(*log.not_before_at_head, *out.not_before_wall);
  EXPECT_EQ(log.attempts_at_head, 1u);
  EXPECT_EQ(server.seen().size(), 1u);
}

TEST(ClientStream, ABodyOverMaxBodyBytesStreamsWhole) {
  const std::string big(300000, 'z');
  TestServer server;
  server.svr().Get("/big", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.set_content(big, "application/octet-stream");
  });
  ClientConfig c = fast_config();
  c.max_body_bytes = 1000;
  Client client(c);
  Request r;
  r.url = server.url("/big");
  SinkLog log;
  const RequestOutcome out = client.fetch(r, log.sink());
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  EXPECT_EQ(out.body_bytes, big.size());
  EXPECT_EQ(log.body(), big);
  // The kept form still holds its limit.
  EXPECT_EQ(client.fetch(r).kind, OutcomeKind::kNotRetryable);
}

TEST(ClientStream, ASinkThatRefusesTheBodyStopsTheTransfer) {
  std::promise<std::size_t> broke;  // how much the server wrote before the client went away
  TestServer server;
  server.svr().Get("/endless", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.set_chunked_content_provider("application/octet-stream",
                                     [&, chunk = std::string(16384, 'e')](std::size_t offset, httplib::DataSink& sink) {
                                       // About 1.6 GB unless the client stops reading.
                                       if (offset < (std::size_t{100000} << 14) &&
                                           sink.write(chunk.data(), chunk.size()))
                                         return true;
                                       broke.set_value(offset);
                                       return false;
                                     });
  });
  Client client(fast_config());
  Request r;
  r.url = server.url("/endless");
  std::atomic<int> calls{0};
  ResponseSink sink;
  sink.body = [&](std::string_view) {
    ++calls;
    return false;
  };
  const RequestOutcome out = client.fetch(r, sink);
  EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  EXPECT_EQ(calls.load(), 1);
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_FALSE(out.ambiguous);  // a GET
  auto written = broke.get_future();
  ASSERT_EQ(written.wait_for(30s), std::future_status::ready) << "the transfer went on";
  EXPECT_LT(written.get(), std::size_t{100000} << 14);  // the connection closed long before the end
  EXPECT_EQ(server.seen().size(), 1u);
}

// A caller that has the whole answer may go away at once (the proxy's caller
// closes, its stop fires): the transfer had ended, so the request is done.
TEST(ClientStream, AStopOnceTheWholeBodyIsInLeavesTheRequestDone) {
  TestServer server;
  server.svr().Get("/whole", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.set_content("complete", "text/plain");
  });
  Client client(fast_config());
  Request r;
  r.url = server.url("/whole");
  std::stop_source stop;
  std::string body;
  ResponseSink sink;
  sink.body = [&](std::string_view chunk) {
    body.append(chunk);
    if (body.size() == 8) stop.request_stop();
    return true;
  };
  const RequestOutcome out = client.fetch(r, sink, stop.get_token());
  EXPECT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  EXPECT_EQ(body, "complete");
  EXPECT_EQ(out.body_bytes, 8u);
}

TEST(ClientStream, AHeadRefusedEndsTheRequestWithoutItsBody) {
  TestServer server;
  server.svr().Get("/h", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.set_content("body", "text/plain");
  });
  Client client(fast_config());
  Request r;
  r.url = server.url("/h");
  int heads = 0;
  int bodies = 0;
  ResponseSink sink;
  sink.head = [&](const FinalHead&) {
    ++heads;
    return false;
  };
  sink.body = [&](std::string_view) {
    ++bodies;
    return true;
  };
  const RequestOutcome out = client.fetch(r, sink);
  EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  EXPECT_EQ(heads, 1);
  EXPECT_EQ(bodies, 0);
  EXPECT_EQ(server.seen().size(), 1u);
}

TEST(ClientStream, ABodyBrokenBeforeItsFirstByteIsRetriedUnseen) {
  TestServer server;
  server.svr().Get("/b", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.set_header("X-Attempt", "first");
      // The head promises 1000 bytes; the connection closes before any.
      res.set_content_provider(1000, "text/plain", [](std::size_t, std::size_t, httplib::DataSink&) { return false; });
      return;
    }
    res.set_header("X-Attempt", "second");
    res.set_content("whole", "text/plain");
  });
  Client client(fast_config());
  Request r;
  r.url = server.url("/b");
  std::vector<std::string> heads_seen;
  std::string body;
  ResponseSink sink;
  sink.head = [&](const FinalHead& h) {
    heads_seen.emplace_back(h.response.headers.first("x-attempt").value_or(""));
    return true;
  };
  sink.body = [&](std::string_view chunk) {
    body.append(chunk);
    return true;
  };
  const RequestOutcome out = client.fetch(r, sink);
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  ASSERT_EQ(out.attempts.size(), 2u);
  EXPECT_EQ(out.attempts[0].status, 200);       // the head arrived ...
  EXPECT_FALSE(out.attempts[0].error.empty());  // ... its body did not
  EXPECT_EQ(out.attempts[0].plan.decision, Decision::kRetry);
  EXPECT_EQ(heads_seen, std::vector<std::string>{"second"});
  EXPECT_EQ(body, "whole");
}

TEST(ClientStream, ABodyBrokenAfterBytesReachedTheSinkIsNotFetchedAgain) {
  TestServer server;
  server.svr().Get("/cut", [&](const httplib::Request& req, httplib::Response& res) {
    serve_cut_body(server, res, server.log(req) == 0);
  });
  Client client(fast_config());
  Request r;
  r.url = server.url("/cut");
  SinkLog log;
  const RequestOutcome out = client.fetch(r, log.sink());
  EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  EXPECT_NE(out.reason.find("broke off"), std::string::npos) << out.reason;
  EXPECT_EQ(log.body(), "0123456789");
  EXPECT_EQ(server.seen().size(), 1u);
}

TEST(ClientStream, EmptyBodiesAndHeadRequestsGiveTheHeadAtCompletion) {
  TestServer server;
  server.svr().Get("/empty", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.status = 204;
  });
  server.svr().Get("/page", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.set_content("a page", "text/html");
  });
  Client client(fast_config());
  for (const char* method : {"GET", "HEAD"}) {
    Request r;
    r.method = method;
    r.url = server.url(std::string(method) == "GET" ? "/empty" : "/page");
    SinkLog log;
    const RequestOutcome out = client.fetch(r, log.sink());
    ASSERT_EQ(out.kind, OutcomeKind::kDone) << method << ": " << out.reason;
    EXPECT_EQ(out.body_bytes, 0u) << method;
    std::lock_guard lock(log.mu);
    EXPECT_EQ(log.heads, 1) << method;
    EXPECT_EQ(log.status, std::string(method) == "GET" ? 204 : 200) << method;
    EXPECT_TRUE(log.chunks.empty()) << method;
  }
}

// ---- At most max_transfers at once ----

TEST(TransferSlots, AtMostTheLimitAndInArrivalOrder) {
  curl_detail::TransferSlots slots(2);
  ASSERT_EQ(slots.acquire({}, std::nullopt), curl_detail::TransferSlots::Result::kAcquired);
  ASSERT_EQ(slots.acquire({}, std::nullopt), curl_detail::TransferSlots::Result::kAcquired);
  EXPECT_EQ(slots.active(), 2u);
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([&, i] {
      ASSERT_EQ(slots.acquire({}, std::nullopt), curl_detail::TransferSlots::Result::kAcquired);
      {
        std::lock_guard lock(mu);
        order.push_back(i);
      }
      slots.release();
    });
    // Each is queued before the next arrives.
    for (int spin = 0; spin < 100000 && slots.waiting() != static_cast<std::size_t>(i + 1); ++spin)
      std::this_thread::yield();
    ASSERT_EQ(slots.waiting(), static_cast<std::size_t>(i + 1));
  }
  EXPECT_EQ(slots.active(), 2u);  // nobody got in beyond the limit
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(order.empty());
  }
  slots.release();  // one slot, handed down the line in order
  for (auto& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(slots.active(), 1u);
  EXPECT_EQ(slots.waiting(), 0u);
  slots.release();
  EXPECT_EQ(slots.active(), 0u);
}

TEST(TransferSlots, AWaitEndsAtAStopOrItsBound) {
  curl_detail::TransferSlots slots(1);
  ASSERT_EQ(slots.acquire({}, std::nullopt), curl_detail::TransferSlots::Result::kAcquired);
  EXPECT_EQ(slots.acquire({}, std::chrono::steady_clock::now()), curl_detail::TransferSlots::Result::kTimedOut);
  std::stop_source stop;
  auto fut = std::async(std::launch::async, [&] { return slots.acquire(stop.get_token(), std::nullopt); });
  for (int spin = 0; spin < 100000 && slots.waiting() != 1; ++spin) std::this_thread::yield();
  ASSERT_EQ(slots.waiting(), 1u);
  stop.request_stop();
  ASSERT_EQ(fut.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(fut.get(), curl_detail::TransferSlots::Result::kCancelled);
  EXPECT_EQ(slots.waiting(), 0u);
  slots.release();
  EXPECT_EQ(slots.active(), 0u);
  // No limit: never a wait.
  curl_detail::TransferSlots none(0);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(none.acquire({}, std::nullopt), curl_detail::TransferSlots::Result::kAcquired);
}

// The head reader's fast path (take_headers moves its lines out, cleaning
// them in place) gives what HeaderList::add() makes of the same lines.
TEST(HeadReader, TakenHeadersAreWhatAddMakesOfTheLines) {
  ManualClock clock;
  const std::vector<std::string_view> lines = {
      "HTTP/1.1 200 OK\r\n",
      "Empty:\r\n",
      "  folded after an empty value \r\n",  // obsolete folding onto ""
      std::string_view("Nul: a\0b\r\n", 10),
      "Cr: a\rb\r\n",
      "Spaced: \t  padded \t \r\n",
      "Multi: one\r\n",
      "\t two\r\n",
      " three \r\n",
      "bad line without a colon\r\n",
      "Bad Name: skipped\r\n",
      "Tail:x\r\n",
      "\r\n",
  };
  curl_detail::HeadReader slow(1 << 20), fast(1 << 20);
  for (std::string_view l : lines) {
    ASSERT_TRUE(slow.line(l, clock.wall(), clock.monotonic()));
    ASSERT_TRUE(fast.line(l, clock.wall(), clock.monotonic()));
  }
  ASSERT_TRUE(fast.complete());
  const HeaderList expected = slow.headers();
  const HeaderList taken = fast.take_headers();
  ASSERT_EQ(taken.lines().size(), expected.lines().size());
  for (std::size_t i = 0; i < taken.lines().size(); ++i) {
    EXPECT_EQ(taken.lines()[i].name, expected.lines()[i].name) << i;
    EXPECT_EQ(taken.lines()[i].value, expected.lines()[i].value) << i;
  }
  EXPECT_EQ(taken.first("Empty"), "folded after an empty value");
  EXPECT_EQ(taken.first("Nul"), "a b");
  EXPECT_EQ(taken.first("Cr"), "a b");
  EXPECT_EQ(taken.first("Spaced"), "padded");
  EXPECT_EQ(taken.first("Multi"), "one two three");
  EXPECT_EQ(taken.first("Tail"), "x");
  EXPECT_FALSE(taken.first("Bad Name").has_value());
}

TEST(HeadReader, TheStatusLineSaysTheHttpVersionAsCurlNumbersIt) {
  ManualClock clock;
  const std::vector<std::pair<std::string_view, int>> cases = {
      {"HTTP/1.0 200 OK\r\n", 10}, {"HTTP/1.1 200 OK\r\n", 11}, {"HTTP/2 200 \r\n", 20},
      {"HTTP/3 200 \r\n", 30},     {"HTTP/9 200 \r\n", 0},      {"HTTP/1.1x 200\r\n", 0},
  };
  for (const auto& [status_line, version] : cases) {
    curl_detail::HeadReader head(1 << 20);
    ASSERT_TRUE(head.line(status_line, clock.wall(), clock.monotonic()));
    EXPECT_EQ(head.http_version(), version) << status_line;
  }
  // After a 1xx head, the final one's.
  curl_detail::HeadReader head(1 << 20);
  for (std::string_view l : {"HTTP/1.1 100 Continue\r\n", "\r\n", "HTTP/2 204 \r\n", "\r\n"})
    ASSERT_TRUE(head.line(l, clock.wall(), clock.monotonic()));
  EXPECT_TRUE(head.complete());
  EXPECT_EQ(head.status(), 204);
  EXPECT_EQ(head.http_version(), 20);
}

TEST(Client, MaxTransfersBoundsConcurrentRequests) {
  constexpr std::size_t kFetches = 6;
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0;
  int most_inside = 0;
  int meetings = 0;         // times a transfer arrived with another one inside
  std::size_t served = 0;   // answered
  std::size_t started = 0;  // attempts the engine let go (kAttemptStarted)
  bool timed_out = false;
  TestServer server;
  server.svr().Get(R"(/c/(\d+))", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    std::unique_lock lock(mu);
    const int met_before = meetings;
    if (++inside >= 2) ++meetings;
    most_inside = std::max(most_inside, inside);
    cv.notify_all();
    // Wait until every attempt was let go by the engine (a client without the
    // bound would then send them all at once) and another transfer was inside
    // with this one (or none is left to come).
    const auto go = [&] {
      return started == kFetches && (meetings > met_before || served + static_cast<std::size_t>(inside) == kFetches);
    };
    if (!cv.wait_for(lock, 20s, go)) timed_out = true;
    // The first two, with every attempt let go: a third transfer has a while
    // to show up here (a client without the bound sends it at once); with the
    // bound it never comes, so this waits out the while, never longer.
    if (met_before == 0 && inside == 2) cv.wait_for(lock, 300ms, [&] { return inside > 2; });
    --inside;
    ++served;
    cv.notify_all();
    res.set_content(req.matches[1].str(), "text/plain");
  });
  ClientConfig c = fast_config();
  c.max_transfers = 2;
  c.on_event = [&](const ClientEvent& e) {
    if (e.kind != ClientEvent::Kind::kAttemptStarted) return;
    std::lock_guard lock(mu);
    ++started;
    cv.notify_all();
  };
  Client client(c);
  std::vector<Request> requests(kFetches);
  std::vector<std::future<RequestOutcome>> futures;
  for (std::size_t i = 0; i < kFetches; ++i) {
    requests[i].url = server.url("/c/" + std::to_string(i));
    futures.push_back(std::async(std::launch::async, [&, i] { return client.fetch(requests[i]); }));
  }
  for (std::size_t i = 0; i < kFetches; ++i) {
    ASSERT_EQ(futures[i].wait_for(60s), std::future_status::ready) << i;
    const RequestOutcome out = futures[i].get();
    ASSERT_EQ(out.kind, OutcomeKind::kDone) << i << ": " << out.reason;
    EXPECT_EQ(out.response->body, std::to_string(i));
  }
  std::lock_guard lock(mu);
  EXPECT_EQ(most_inside, 2);
  EXPECT_FALSE(timed_out);
  EXPECT_EQ(server.seen().size(), kFetches);
}

TEST(Client, MaxTransfersBoundsABatchToo) {
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0;
  int most_inside = 0;
  bool first = true;
  TestServer server;
  server.svr().Get(R"(/b/(\d+))", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    std::unique_lock lock(mu);
    most_inside = std::max(most_inside, ++inside);
    cv.notify_all();
    // The first one gives a second transfer a while to show up (three
    // workers would send at once without the bound); it never comes.
    if (std::exchange(first, false)) cv.wait_for(lock, 300ms, [&] { return inside > 1; });
    --inside;
    res.set_content(req.matches[1].str(), "text/plain");
  });
  ClientConfig c = fast_config();
  c.max_transfers = 1;
  Client client(c);
  std::vector<Request> batch(3);
  for (std::size_t i = 0; i < batch.size(); ++i) batch[i].url = server.url("/b/" + std::to_string(i));
  BatchOptions opts;
  opts.jobs = 3;
  const auto outcomes = client.fetch_all(batch, opts);
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    ASSERT_EQ(outcomes[i].kind, OutcomeKind::kDone) << i << ": " << outcomes[i].reason;
    EXPECT_EQ(outcomes[i].response->body, std::to_string(i));
  }
  std::lock_guard lock(mu);
  EXPECT_EQ(most_inside, 1);
}

// One transfer is held by the server; a second request, over fetch or over a
// caller's handle, waits for the slot and is cancelled there: nothing is sent.
void cancelled_while_waiting_for_a_transfer(bool own_handle) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  TestServer server;
  server.svr().Get("/held", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    std::unique_lock lock(mu);
    cv.wait_for(lock, 30s, [&] { return release; });
    res.set_content("held", "text/plain");
  });
  server.svr().Get("/waits", [&](const httplib::Request& req, httplib::Response&) { server.log(req); });
  ClientConfig c = fast_config();
  c.max_transfers = 1;
  Request held;
  held.url = server.url("/held");
  Request waits;
  waits.url = server.url("/waits");
  std::atomic<bool> waits_started{false};
  c.on_event = [&](const ClientEvent& e) {
    if (e.kind == ClientEvent::Kind::kAttemptStarted && e.request == &waits) waits_started = true;
  };
  Client client(c);
  auto first = std::async(std::launch::async, [&] { return client.fetch(held); });
  for (int i = 0; i < 2000 && server.seen().empty(); ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(server.seen().size(), 1u);
  std::stop_source stop;
  CallersHandle h;
  auto second = std::async(std::launch::async, [&] {
    return own_handle ? client.perform(h.easy.get(), waits, {}, stop.get_token())
                      : client.fetch(waits, stop.get_token());
  });
  for (int i = 0; i < 2000 && !waits_started; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(waits_started);
  stop.request_stop();
  // The held transfer still runs: only a cancellable wait lets this end.
  const bool ended = second.wait_for(20s) == std::future_status::ready;
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  ASSERT_TRUE(ended) << "the wait for a transfer slot was not cancelled";
  const RequestOutcome out = second.get();
  EXPECT_EQ(out.kind, OutcomeKind::kCancelled) << out.reason;
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_FALSE(out.attempts[0].sent);
  EXPECT_FALSE(out.ambiguous);
  const RequestOutcome first_out = first.get();
  EXPECT_EQ(first_out.kind, OutcomeKind::kDone) << first_out.reason;
  const auto seen = server.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].path, "/held");
}

TEST(Client, AFetchWaitingForATransferIsCancelledUnsent) { cancelled_while_waiting_for_a_transfer(false); }

TEST(OwnHandle, AHandleWaitingForATransferIsCancelledUnsent) { cancelled_while_waiting_for_a_transfer(true); }

TEST(Client, AWaitForATransferEndsAtTheDeadline) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  TestServer server;
  server.svr().Get("/held", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    std::unique_lock lock(mu);
    cv.wait_for(lock, 30s, [&] { return release; });
    res.set_content("held", "text/plain");
  });
  ClientConfig c = fast_config();
  c.max_transfers = 1;
  Client client(c);
  Request held;
  held.url = server.url("/held");
  auto first = std::async(std::launch::async, [&] { return client.fetch(held); });
  for (int i = 0; i < 2000 && server.seen().empty(); ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(server.seen().size(), 1u);
  Request late = held;
  late.deadline = system_monotonic_clock().now() + 200ms;
  const RequestOutcome out = client.fetch(late);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  EXPECT_EQ(out.kind, OutcomeKind::kDeadlineExceeded) << out.reason;
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_FALSE(out.attempts[0].sent);
  EXPECT_EQ(first.get().kind, OutcomeKind::kDone);
  EXPECT_EQ(server.seen().size(), 1u);
}


TEST(Client, EveryEventCarriesTheIndexTheCallerGave) {
  TestServer server;
  server.svr().Get("/i", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 503;
      res.set_header("Retry-After", "0");
      return;
    }
    res.set_content("ok", "text/plain");
  });
  std::mutex mu;
  std::vector<std::size_t> indexes;
  ClientConfig c = fast_config();
  c.on_event = [&](const ClientEvent& e) {
    std::lock_guard lock(mu);
    indexes.push_back(e.index);
  };
  Client client(c);
  Request r;
  r.url = server.url("/i");
  SinkLog log;
  ASSERT_EQ(client.fetch(r, log.sink(), {}, 7).kind, OutcomeKind::kDone);  // a retry, then the answer
  ASSERT_EQ(client.fetch(r, {}, 3).kind, OutcomeKind::kDone);
  Request bad;
  bad.url = "ftp://127.0.0.1/";  // ended before the engine: its one event too
  ASSERT_EQ(client.fetch(bad, log.sink(), {}, 9).kind, OutcomeKind::kNotRetryable);
  std::lock_guard lock(mu);
  const auto first_three = std::find(indexes.begin(), indexes.end(), 3u);
  ASSERT_NE(first_three, indexes.end());
  ASSERT_GT(first_three - indexes.begin(), 5);  // two attempts' events
  EXPECT_TRUE(std::all_of(indexes.begin(), first_three, [](std::size_t i) { return i == 7; }));
  ASSERT_EQ(indexes.back(), 9u);
  EXPECT_TRUE(std::all_of(first_three, indexes.end() - 1, [](std::size_t i) { return i == 3; }));
}

// ---- Transfer settings, head limits and errors that last ----

// A loopback server that answers each connection with what `reply` makes of
// the bytes received (an HTTP head, or a TLS ClientHello's first read), then
// closes it; an empty reply closes it unanswered. It keeps what it received.
class ScriptedServer {
 public:
  using Reply = std::function<std::string(const std::string& received)>;
  explicit ScriptedServer(Reply reply) : reply_(std::move(reply)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    stopping_ = true;
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  std::string url(const std::string& scheme, const std::string& path) const {
    return scheme + "://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::vector<std::string> received() {
    std::lock_guard lock(mu_);
    return received_;
  }

 private:
  void serve() {
    while (!stopping_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string in;
      char buf[4096];
      // An HTTP head ends with an empty line; anything else (a ClientHello)
      // is answered after its first read.
      for (;;) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 2000) <= 0) break;
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        in.append(buf, static_cast<std::size_t>(n));
        if (!in.starts_with("GET ") && !in.starts_with("POST ")) break;
        if (in.find("\r\n\r\n") != std::string::npos) break;
      }
      {
        std::lock_guard lock(mu_);
        received_.push_back(in);
      }
      const std::string out = reply_(in);
      for (std::size_t at = 0; at < out.size();) {
        const ssize_t n = ::send(c, out.data() + at, out.size() - at, MSG_NOSIGNAL);
        if (n <= 0) break;
        at += static_cast<std::size_t>(n);
      }
      ::shutdown(c, SHUT_WR);
      // Read what is left so the close sends no reset before the peer read it all.
      for (int i = 0; i < 100; ++i) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 20) <= 0 || ::recv(c, buf, sizeof buf, 0) <= 0) break;
      }
      ::close(c);
    }
  }

  Reply reply_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::vector<std::string> received_;
  std::thread thread_;
};

// The first line of a request as received.
std::string request_line(const std::string& received) { return received.substr(0, received.find("\r\n")); }

// A gzip member holding `text` in one stored (uncompressed) deflate block:
// a real gzip stream, made without a compressor (RFC 1951 3.2.4, RFC 1952).
std::string gzip_stored(const std::string& text) {
  std::uint32_t crc = 0xffffffffu;
  for (const char ch : text) {
    crc ^= static_cast<unsigned char>(ch);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  crc = ~crc;
  const auto le32 = [](std::uint32_t v) {
    std::string b;
    for (int i = 0; i < 4; ++i) b += static_cast<char>((v >> (8 * i)) & 0xff);
    return b;
  };
  const auto len = static_cast<std::uint16_t>(text.size());
  std::string out("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", 10);
  out += '\x01';  // the last block, stored
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  out += static_cast<char>(~len & 0xff);
  out += static_cast<char>((~len >> 8) & 0xff);
  out += text;
  out += le32(crc);
  out += le32(static_cast<std::uint32_t>(text.size()));
  return out;
}

TEST(ClientConfig, DecompressAsksForACodingAndHandsOnTheDecodedBody) {
  const std::string text = "a body that travelled gzip-encoded, decoded by libcurl";
  std::vector<std::string> accept;
  std::mutex mu;
  TestServer server;
  server.svr().Get("/z", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    {
      std::lock_guard lock(mu);
      accept.push_back(req.get_header_value("Accept-Encoding"));
    }
    res.set_header("Content-Encoding", "gzip");
    res.set_content(gzip_stored(text), "application/octet-stream");
  });
  ClientConfig c = fast_config();
  c.decompress = true;
  Client client(c);
  Request r;
  r.url = server.url("/z");
  const RequestOutcome out = client.fetch(r);
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  EXPECT_EQ(out.response->body, text);
  EXPECT_EQ(out.response->headers.first("Content-Encoding").value_or(""), "gzip");  // as the server sent it
  EXPECT_EQ(out.body_bytes, text.size());

  // Streamed, the sink and body_bytes see the decoded bytes too.
  SinkLog log;
  const RequestOutcome streamed = client.fetch(r, log.sink());
  ASSERT_EQ(streamed.kind, OutcomeKind::kDone) << streamed.reason;
  EXPECT_EQ(log.body(), text);
  EXPECT_EQ(streamed.body_bytes, text.size());

  // Without it, nothing is asked for and the bytes come as sent.
  Client plain(fast_config());
  const RequestOutcome raw = plain.fetch(r);
  ASSERT_EQ(raw.kind, OutcomeKind::kDone) << raw.reason;
  EXPECT_EQ(raw.response->body, gzip_stored(text));
  std::lock_guard lock(mu);
  ASSERT_EQ(accept.size(), 3u);
  EXPECT_NE(accept[0].find("gzip"), std::string::npos) << accept[0];
  EXPECT_NE(accept[1].find("gzip"), std::string::npos) << accept[1];
  EXPECT_EQ(accept[2], "");
}

TEST(ClientConfig, ProxyGetsTheRequestInAbsoluteForm) {
  TestServer origin;  // never reached: the proxy answers
  origin.svr().Get("/x", [&](const httplib::Request& req, httplib::Response&) { origin.log(req); });
  ScriptedServer proxy([](const std::string&) {
    return std::string("HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nvia proxy");
  });
  ClientConfig c = fast_config();
  c.proxy = "http://127.0.0.1:" + std::to_string(proxy.port());
  Client client(c);
  Request r;
  r.url = origin.url("/x");
  const RequestOutcome out = client.fetch(r);
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  EXPECT_EQ(out.response->body, "via proxy");
  const auto got = proxy.received();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(request_line(got[0]), "GET " + r.url + " HTTP/1.1");
  EXPECT_TRUE(origin.seen().empty());
}

TEST(ClientConfig, HttpVersionIsSentAsConfigured) {
  ScriptedServer server([](const std::string&) {
    return std::string("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
  });
  for (const HttpVersion v : {HttpVersion::kHttp1_1, HttpVersion::kHttp2}) {
    ClientConfig c = fast_config();
    c.http_version = v;
    Client client(c);
    Request r;
    r.url = server.url("http", "/v");
    const RequestOutcome out = client.fetch(r);
    ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  }
  const auto got = server.received();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(request_line(got[0]), "GET /v HTTP/1.1");
  // kHttp2 is HTTP/2 over TLS only: on cleartext, plain HTTP/1.1, no h2c upgrade.
  EXPECT_EQ(request_line(got[1]), "GET /v HTTP/1.1");
  EXPECT_EQ(got[1].find("h2c"), std::string::npos) << got[1];
}

TEST(ClientConfig, HttpVersionOneOneIsWhatAServerSees) {
  std::string version;
  std::mutex mu;
  TestServer server;
  server.svr().Get("/v", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu);
    version = req.version;
    res.set_content("ok", "text/plain");
  });
  ClientConfig c = fast_config();
  c.http_version = HttpVersion::kHttp1_1;
  Client client(c);
  Request r;
  r.url = server.url("/v");
  ASSERT_EQ(client.fetch(r).kind, OutcomeKind::kDone);
  std::lock_guard lock(mu);
  EXPECT_EQ(version, "HTTP/1.1");
}

// A 429 with Retry-After: 30, then one header line of `line_bytes`.
std::string limited_with_a_long_line(std::size_t line_bytes) {
  return "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 30\r\nX-Long: " + std::string(line_bytes, 'a') +
         "\r\nContent-Length: 0\r\n\r\n";
}

// A 200 whose head is `lines` lines of about 1 KB.
std::string ok_with_a_long_head(std::size_t lines) {
  std::string head = "HTTP/1.1 200 OK\r\n";
  for (std::size_t i = 0; i < lines; ++i) head += "X-H" + std::to_string(i) + ": " + std::string(1000, 'b') + "\r\n";
  return head + "Content-Length: 2\r\n\r\nok";
}

void check_a_long_line_keeps_its_retry_after(bool own_handle) {
  ScriptedServer server([](const std::string&) { return limited_with_a_long_line(200'000); });
  Client client(fast_config());
  Request r;
  r.url = server.url("http", "/long");
  const WallTime before = system_wall_clock().now();
  RequestOutcome out;
  if (own_handle) {
    Easy easy(curl_easy_init());
    out = client.perform(easy.get(), r);
  } else {
    out = client.fetch(r);
  }
  const WallTime after = system_wall_clock().now();
  ASSERT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  EXPECT_EQ(out.reason,
            "the response head has a line longer than libcurl's 100 KiB limit; the same head would come again");
  ASSERT_EQ(out.attempts.size(), 1u);  // not retried: the same head would come again
  EXPECT_EQ(out.attempts[0].status, 429);
  EXPECT_EQ(out.attempts[0].plan.basis, Basis::kRetryAfter);
  EXPECT_EQ(server.received().size(), 1u);
  // The Retry-After read before the long line holds: 30 s from receipt.
  ASSERT_TRUE(out.not_before_wall);
  EXPECT_GE(*out.not_before_wall, before + 30s);
  EXPECT_LE(*out.not_before_wall, after + 30s);
  EXPECT_LT(out.waited, 1s);  // the 30 s are not waited for here
  // ... and the origin is held by it: the next request waits for it.
  Request next = r;
  next.deadline = system_monotonic_clock().now() + 1s;
  const RequestOutcome held = client.fetch(next);
  EXPECT_EQ(held.kind, OutcomeKind::kDeadlineExceeded) << held.reason;
  EXPECT_EQ(server.received().size(), 1u);
}

TEST(ClientHead, ALineOverLibcurlsLimitEndsAtOnceAndKeepsItsRetryAfter) {
  check_a_long_line_keeps_its_retry_after(false);
}

TEST(OwnHandle, ALineOverLibcurlsLimitEndsAtOnceAndKeepsItsRetryAfter) {
  check_a_long_line_keeps_its_retry_after(true);
}

TEST(ClientHead, AHeadOverMaxHeaderBytesIsOneClearError) {
  ScriptedServer server([](const std::string&) { return ok_with_a_long_head(2000); });  // 2 MB
  ClientConfig c = fast_config();
  Client client(c);
  Request r;
  r.url = server.url("http", "/big");
  const RequestOutcome out = client.fetch(r);
  ASSERT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  EXPECT_EQ(out.reason, "the response head is larger than " + std::to_string(c.max_header_bytes) +
                            " bytes; the same head would come again");
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_EQ(out.attempts[0].status, 200);
  EXPECT_EQ(server.received().size(), 1u);
  EXPECT_TRUE(out.response->body.empty());

  // A smaller limit is the one that holds.
  ClientConfig small = fast_config();
  small.max_header_bytes = 10'000;
  Client strict(small);
  const RequestOutcome cut = strict.fetch(r);
  ASSERT_EQ(cut.kind, OutcomeKind::kNotRetryable) << cut.reason;
  EXPECT_NE(cut.reason.find("larger than 10000 bytes"), std::string::npos) << cut.reason;
  EXPECT_EQ(server.received().size(), 2u);

  // A head under the limit passes.
  ScriptedServer fine([](const std::string&) { return ok_with_a_long_head(200); });  // 200 KB
  r.url = fine.url("http", "/fine");
  const RequestOutcome ok = client.fetch(r);
  ASSERT_EQ(ok.kind, OutcomeKind::kDone) << ok.reason;
  EXPECT_EQ(ok.response->body, "ok");
}

TEST(ClientHead, AMaxHeaderBytesOverLibcurlsOwnTotalMeetsLibcurlsFirst) {
  ScriptedServer server([](const std::string&) { return ok_with_a_long_head(2000); });  // 2 MB
  ClientConfig c = fast_config();
  c.max_header_bytes = std::size_t{1} << 20;  // above libcurl's 300 KiB, below the head
  Client client(c);
  Request r;
  r.url = server.url("http", "/big");
  const RequestOutcome out = client.fetch(r);
  ASSERT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_EQ(server.received().size(), 1u);
  // libcurl 8.3 and later (and patched 7.88 builds, as Debian's) stop at
  // 300 KiB of heads; an older one reads on to this client's own limit.
  const bool libcurl_bounds_heads = curl_version_info(CURLVERSION_NOW)->version_num >= 0x080300 ||
                                    out.reason.find("libcurl") != std::string::npos;
  if (libcurl_bounds_heads) {
    EXPECT_NE(out.reason.find("the response head is larger than libcurl's limit (Too large response headers"),
              std::string::npos)
        << out.reason;
  } else {
    EXPECT_NE(out.reason.find("larger than 1048576 bytes"), std::string::npos) << out.reason;
  }
}

TEST(OwnHandle, AHeadOverMaxHeaderBytesIsOneClearError) {
  ScriptedServer server([](const std::string&) { return ok_with_a_long_head(200); });
  ClientConfig c = fast_config();
  c.max_header_bytes = 10'000;
  Client client(c);
  Easy easy(curl_easy_init());
  Request r;
  r.url = server.url("http", "/big");
  const RequestOutcome out = client.perform(easy.get(), r);
  ASSERT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  EXPECT_NE(out.reason.find("larger than 10000 bytes"), std::string::npos) << out.reason;
  EXPECT_EQ(server.received().size(), 1u);
}

TEST(ClientErrors, AMalformedUrlEndsAtOnceUnsent) {
  Client client(fast_config());
  for (const char* url : {"http://127.0.0.1:99999/", "http://[::1/", "http://127.0.0.1:80a/"}) {
    Request r;
    r.url = url;
    const RequestOutcome out = client.fetch(r);
    EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable) << url << ": " << out.reason;
    EXPECT_TRUE(out.attempts.empty()) << url;
    EXPECT_NE(out.reason.find("invalid URL"), std::string::npos) << out.reason;
  }
}

TEST(ClientErrors, AProxyUrlLibcurlCannotReadEndsAtOnceUnsent) {
  TestServer server;
  server.svr().Get("/x", [&](const httplib::Request& req, httplib::Response&) { server.log(req); });
  for (const char* proxy : {"http://127.0.0.1:99999", "gopher://127.0.0.1:1"}) {
    ClientConfig c = fast_config();
    c.proxy = proxy;
    Client client(c);
    Request r;
    r.method = "POST";  // not sent: it could be repeated, but nothing would differ
    r.url = server.url("/x");
    const RequestOutcome out = client.fetch(r);
    EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable) << proxy << ": " << out.reason;
    ASSERT_EQ(out.attempts.size(), 1u) << proxy;
    EXPECT_FALSE(out.attempts[0].sent);
    EXPECT_FALSE(out.ambiguous);
    EXPECT_NE(out.reason.find("proxy"), std::string::npos) << out.reason;
  }
  EXPECT_TRUE(server.seen().empty());
}

TEST(OwnHandle, ASchemeTheHandleWillNotSpeakEndsAtOnceUnsent) {
  TestServer server;
  server.svr().Get("/x", [&](const httplib::Request& req, httplib::Response&) { server.log(req); });
  CallersHandle h;
  curl_easy_setopt(h.easy.get(), CURLOPT_PROTOCOLS_STR, "https");
  Client client(fast_config());
  Request r;
  r.url = server.url("/x");
  const RequestOutcome out = client.perform(h.easy.get(), r);
  EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_FALSE(out.attempts[0].sent);
  EXPECT_NE(out.reason.find("scheme"), std::string::npos) << out.reason;
  EXPECT_TRUE(server.seen().empty());
}

// A TLS alert record (RFC 8446 6): fatal, with its description.
std::string tls_alert(int description) {
  return std::string{'\x15', '\x03', '\x01', '\x00', '\x02', '\x02', static_cast<char>(description)};
}

TEST(ClientErrors, ATlsVersionOrCipherMismatchEndsAtOnce) {
  for (const int alert : {70, 40}) {  // protocol_version, handshake_failure
    ScriptedServer server([alert](const std::string&) { return tls_alert(alert); });
    Client client(fast_config());
    Request r;
    r.url = server.url("https", "/");
    const RequestOutcome out = client.fetch(r);
    EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable) << alert << ": " << out.reason;
    ASSERT_EQ(out.attempts.size(), 1u) << alert;
    EXPECT_FALSE(out.attempts[0].sent);
    EXPECT_NE(out.reason.find("TLS version or cipher"), std::string::npos) << out.reason;
    EXPECT_EQ(server.received().size(), 1u);
  }
}

TEST(ClientErrors, ATlsHandshakeCutShortIsRetried) {
  ScriptedServer server([](const std::string&) { return std::string(); });  // closes after the ClientHello
  Client client(fast_config());
  Request r;
  r.url = server.url("https", "/");
  const RequestOutcome out = client.fetch(r);
  EXPECT_EQ(out.kind, OutcomeKind::kExhausted) << out.reason;
  EXPECT_EQ(out.attempts.size(), 3u);
  EXPECT_EQ(server.received().size(), 3u);
}

TEST(ClientErrors, ARefusedConnectionIsStillRetried) {
  int port = 0;
  {
    TestServer gone;  // a port that was just free, now closed
    port = std::stoi(gone.url("").substr(std::string("http://127.0.0.1:").size()));
  }
  Client client(fast_config());
  Request r;
  r.url = "http://127.0.0.1:" + std::to_string(port) + "/x";
  const RequestOutcome out = client.fetch(r);
  EXPECT_EQ(out.kind, OutcomeKind::kExhausted) << out.reason;
  EXPECT_EQ(out.attempts.size(), 3u);
}

}  // namespace
}  // namespace abide
