// Streaming the final answer (Client::fetch with a ResponseSink): what the
// sink sees of retried, deferred, refused and broken answers.
#include "support/client_fixture.h"

namespace abide {
namespace {

using namespace std::chrono_literals;
using test::fast_config;
using test::TestServer;
using test::serve_cut_body;
using test::SinkLog;

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
  EXPECT_TRUE(out.body.empty());  // the body went to the sink, not into the outcome
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

}  // namespace
}  // namespace abide
