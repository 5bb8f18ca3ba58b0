// abide::Client::perform: a caller's own easy handle, its headers, callbacks
// and options, sent and retried by the client.
#include "support/client_fixture.h"

namespace abide {
namespace {

using namespace std::chrono_literals;
using test::fast_config;
using test::TestServer;
using test::SilentServer;
using test::CallersHandle;

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
  EXPECT_EQ(out.body, "third time");  // no write callback of its own: kept in the outcome
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
  EXPECT_TRUE(out.body.empty());
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

}  // namespace
}  // namespace abide
