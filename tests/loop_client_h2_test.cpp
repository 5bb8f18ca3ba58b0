// abide::LoopClient's own HTTP/2 client (https:// to an IP literal) against
// Node's HTTP/2 server over TLS (support/tls_server.h): requests share one
// connection, read as libcurl writes them, and fail as libcurl's fail; a
// server without HTTP/2 gets libcurl, a cancelled stream leaves the
// connection to the others.
#include <abide/loop_client.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/client_config.h"
#include "support/loop_fetch.h"
#include "support/tls_server.h"

namespace abide {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

ClientConfig trusting(const test::TlsServer& server) {
  ClientConfig c = test::fast_config();
  c.ca_file = server.ca_file();
  return c;
}

using test::fetch;
using test::get;

class LoopClientH2 : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(server_.error(), "") << server_.error(); }
  test::TlsServer server_;
};

TEST_F(LoopClientH2, ConcurrentRequestsShareOneConnection) {
  LoopClient client(trusting(server_));
  std::vector<RequestOutcome> outs(20);
  for (std::size_t i = 0; i < outs.size(); ++i)
    client.start(get(server_.url("/version")), [&outs, i](RequestOutcome&& o) { outs[i] = std::move(o); });
  client.run();
  for (const RequestOutcome& out : outs) {
    ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
    EXPECT_EQ(out.response->status, 200);
    EXPECT_EQ(out.response->http_version, 20);
    EXPECT_EQ(out.body, "2.0");
  }
  // Later requests take the same connection.
  ASSERT_EQ(fetch(client, get(server_.url("/version"))).kind, OutcomeKind::kDone);
  const json log = server_.log();
  EXPECT_EQ(log["connections"], 1) << log.dump();
  for (const json& r : log["requests"]) EXPECT_EQ(r["alpn"], "h2");
}

TEST_F(LoopClientH2, TheRequestReadsAsLibcurlWritesIt) {
  ClientConfig c = trusting(server_);
  c.user_agent = "abide-test/1";
  LoopClient client(c);
  Request r = get(server_.url("/headers"));
  r.headers.add("X-Trace", "t-1");
  r.idempotency_key = "key-1";
  const RequestOutcome out = fetch(client, r);
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  const json seen = json::parse(out.body, nullptr, false);
  ASSERT_TRUE(seen.is_object()) << out.body;
  EXPECT_EQ(seen.value("user-agent", ""), "abide-test/1");
  EXPECT_EQ(seen.value("accept", ""), "*/*");
  EXPECT_EQ(seen.value("x-trace", ""), "t-1");
  EXPECT_EQ(seen.value("idempotency-key", ""), "key-1");
  EXPECT_EQ(seen.value(":authority", ""), "127.0.0.1:" + server_.url("").substr(server_.url("").rfind(':') + 1));

  Request post = get(server_.url("/echo"), "POST");
  post.body = std::string(100000, 'e');
  const RequestOutcome echoed = fetch(client, post);
  ASSERT_EQ(echoed.kind, OutcomeKind::kDone) << echoed.reason;
  EXPECT_EQ(echoed.body, post.body);
}

TEST_F(LoopClientH2, AnUnverifiedCertificateEndsTheRequestAtOnce) {
  LoopClient client(test::fast_config());  // the system's CAs
  const RequestOutcome out = fetch(client, get(server_.url("/version")));
  EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  EXPECT_EQ(out.attempts.size(), 1u);
  EXPECT_NE(out.reason.find("SSL certificate problem: self-signed certificate"), std::string::npos) << out.reason;
  EXPECT_NE(out.reason.find("certificate is not accepted"), std::string::npos) << out.reason;
  EXPECT_TRUE(server_.requests("/version").empty());
}

TEST_F(LoopClientH2, WithoutVerificationTheCertificateIsTaken) {
  ClientConfig c = test::fast_config();
  c.verify_tls = false;
  LoopClient client(c);
  const RequestOutcome out = fetch(client, get(server_.url("/version")));
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  EXPECT_EQ(out.body, "2.0");
}

TEST_F(LoopClientH2, HttpOneOnlyTakesHttpOneOverTls) {
  ClientConfig c = trusting(server_);
  c.http_version = HttpVersion::kHttp1_1;
  LoopClient client(c);
  const RequestOutcome out = fetch(client, get(server_.url("/version")));
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  EXPECT_EQ(out.body, "1.1");
}

TEST_F(LoopClientH2, AnAttemptTimeoutEndsTheStreamNotTheConnection) {
  ClientConfig c = trusting(server_);
  c.attempt_timeout = 300ms;
  c.max_attempts = 1;
  LoopClient client(c);
  const RequestOutcome out = fetch(client, get(server_.url("/hold/never?ms=0")));  // answered after 10 s
  ASSERT_FALSE(out.attempts.empty());
  EXPECT_TRUE(out.attempts.back().timed_out) << out.reason;
  EXPECT_NE(out.reason.find("Operation timed out"), std::string::npos) << out.reason;
  const RequestOutcome after = fetch(client, get(server_.url("/version")));
  ASSERT_EQ(after.kind, OutcomeKind::kDone) << after.reason;
  EXPECT_EQ(server_.log()["connections"], 1);
}

TEST_F(LoopClientH2, ACancelledRequestLeavesTheConnectionToTheOthers) {
  LoopClient client(trusting(server_));
  RequestOutcome held, quick;
  const auto id = client.start(get(server_.url("/hold/cancelled?ms=0")), [&](RequestOutcome&& o) { held = std::move(o); });
  client.start(get(server_.url("/version")), [&](RequestOutcome&& o) {
    quick = std::move(o);
    client.cancel(id);
  });
  client.run();
  EXPECT_EQ(quick.kind, OutcomeKind::kDone) << quick.reason;
  EXPECT_EQ(held.kind, OutcomeKind::kCancelled) << held.reason;
  EXPECT_EQ(fetch(client, get(server_.url("/version"))).kind, OutcomeKind::kDone);
  EXPECT_EQ(server_.log()["connections"], 1);
}

TEST_F(LoopClientH2, AStreamedAnswerArrivesWholeThroughPauses) {
  std::string big(3 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31 % 253);
  server_.put_file("big.bin", big);
  LoopClient client(trusting(server_));
  std::string got;
  int pauses = 0;
  RequestOutcome out;
  LoopClient::Id id = 0;
  ResponseSink sink;
  sink.body = [&](std::string_view chunk) {
    got += chunk;
    // Every so often the reader falls behind: paused, resumed from the loop's timer.
    if (got.size() / (256 * 1024) > static_cast<std::size_t>(pauses)) {
      ++pauses;
      client.pause(id);
      client.resume(id);
    }
    return true;
  };
  id = client.start(get(server_.url("/files/big.bin")), [&](RequestOutcome&& o) { out = std::move(o); }, sink);
  client.run();
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  EXPECT_GT(pauses, 5);
  EXPECT_TRUE(got == big);
}

// Streams that fill the origin's connections make the client set up the
// next connection at once, so that a later request finds one ready instead
// of waiting for a handshake.
TEST(LoopClientH2Spare, AFullConnectionHasTheNextOneReady) {
  test::TlsServer server(/*http1_only=*/false, /*max_streams=*/2);
  ASSERT_EQ(server.error(), "") << server.error();
  server.put_file("big.bin", std::string(2 << 20, 'b'));
  LoopClient client(trusting(server));
  // Two answers that stay open: their readers pause at the first bytes.
  std::vector<LoopClient::Id> ids;
  int heard = 0;
  for (int i = 0; i < 2; ++i) {
    ResponseSink sink;
    sink.body = [&client, &ids, &heard, i](std::string_view) {
      ++heard;
      client.pause(ids[static_cast<std::size_t>(i)]);
      return true;
    };
    ids.push_back(0);
    ids.back() = client.start(get(server.url("/files/big.bin")), [](RequestOutcome&&) {}, sink);
  }
  const auto turn_until = [&](const std::function<bool()>& done) {
    for (auto until = std::chrono::steady_clock::now() + 5s; !done() && std::chrono::steady_clock::now() < until;) {
      pollfd p{client.fd(), POLLIN, 0};
      static_cast<void>(::poll(&p, 1, 10));
      client.process();
    }
    return done();
  };
  ASSERT_TRUE(turn_until([&] { return heard >= 2; }));
  // The first connection holds its 2 streams; the second is there before any request needs it.
  ASSERT_TRUE(turn_until([&] { return server.log()["connections"] == 2; })) << server.log().dump();
  RequestOutcome later;
  client.start(get(server.url("/version")), [&](RequestOutcome&& o) { later = std::move(o); });
  ASSERT_TRUE(turn_until([&] { return later.kind == OutcomeKind::kDone && !later.attempts.empty(); })) << later.reason;
  EXPECT_EQ(later.body, "2.0");
  EXPECT_EQ(server.log()["connections"], 2);  // the one made ready took it
  for (const auto id : ids) client.cancel(id);
  client.process();
}

// A server that does not speak HTTP/2 gets the request from libcurl, over
// HTTP/1.1, the request none the wiser; later ones go to libcurl at once.
TEST(LoopClientH2Fallback, AServerWithoutHttp2GetsLibcurl) {
  test::TlsServer server(/*http1_only=*/true);
  ASSERT_EQ(server.error(), "") << server.error();
  LoopClient client(trusting(server));
  for (int i = 0; i < 3; ++i) {
    const RequestOutcome out = fetch(client, get(server.url("/version")));
    ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
    EXPECT_EQ(out.body, "1.1");
    EXPECT_EQ(out.attempts.size(), 1u);
  }
  // One connection refused HTTP/2; libcurl keeps its own.
  EXPECT_EQ(server.log()["connections"], 2) << server.log().dump();
}

}  // namespace
}  // namespace abide
