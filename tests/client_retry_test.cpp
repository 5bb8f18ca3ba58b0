// abide::Client against real HTTP servers on 127.0.0.1: one request and a
// batch, their retries and waits (Retry-After, a learned server clock, wall
// clock jumps), stops and deadlines, and the events that tell it.
#include "support/client_fixture.h"

namespace abide {
namespace {

using namespace std::chrono_literals;
using test::fast_config;
using test::TestServer;
using test::serve_cut_body;
using test::SilentServer;

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
  EXPECT_EQ(out.body, "hello abide");
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
  EXPECT_EQ(out.body.size(), 1000u);
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
    EXPECT_EQ(outcomes[i].body, std::to_string(i));
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

}  // namespace
}  // namespace abide
