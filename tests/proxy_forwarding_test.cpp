// `abide proxy` end to end: garbage from callers and upstreams, what is
// forwarded, its own pages, its logs and its usage errors.
#include "support/proxy_fixture.h"
#include "support/run.h"

#ifdef ABIDE_CLI_PATH

namespace abide::test {
namespace {


// ---- garbage -------------------------------------------------------------------------

// Bad input is answered and never forwarded; the proxy keeps serving.
TEST(ProxyGarbage, BadInputIsAnsweredAndNeverForwarded) {
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-body", "1024"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const int port = proxy.port();

  static const char kJunk[] = "\x16\x03\x01\x02\x00 garbage\0\xff\r\n\r\n";  // a TLS hello's start, NULs
  const auto junk = parse_answer(raw_exchange(port, std::string(kJunk, sizeof kJunk - 1)));
  EXPECT_EQ(junk.status, 400);
  const auto ok = parse_answer(raw_exchange(port, "GET /after HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(ok.status, 200);

  const auto big_head = parse_answer(
      raw_exchange(port, "GET /big HTTP/1.1\r\nHost: p\r\nX-Big: " + std::string(70 * 1024, 'a') +
                             "\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(big_head.status, 431);

  const auto big_body = parse_answer(
      raw_exchange(port, "POST /body HTTP/1.1\r\nHost: p\r\nContent-Length: 2048\r\nConnection: close\r\n\r\n" +
                             std::string(2048, 'b')));
  EXPECT_EQ(big_body.status, 413);

  const auto bad_wait = parse_answer(
      raw_exchange(port, "GET /w HTTP/1.1\r\nHost: p\r\nAbide-Max-Wait: abc\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(bad_wait.status, 400);
  EXPECT_NE(bad_wait.body.find("Abide-Max-Wait"), std::string::npos) << bad_wait.body;

  const auto no_host = parse_answer(raw_exchange(port, "GET /h HTTP/1.1\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(no_host.status, 400);

  const auto still = parse_answer(raw_exchange(port, "GET /last HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(still.status, 200);
  EXPECT_EQ(mock.requests(), 2);  // only the two good requests went upstream
  proxy.stop_cleanly();
}

// ---- forwarding ------------------------------------------------------------------------

// A route's base is a boundary: dot segments, plain or percent-encoded, are
// removed before the route is matched and never sent; one that climbs out of
// its route is a 400, and nothing goes upstream.
TEST(ProxyForwarding, DotSegmentsNeverWalkOutOfARoute) {
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy({"--route", "/api=" + mock.url()});
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto get = [&](const std::string& target) {
    return parse_answer(raw_exchange(proxy.port(), "GET " + target + " HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"));
  };
  for (const char* escape : {"/api/../items", "/api/x/../../items", "/api/%2e%2e/items", "/api/.%2E/items",
                             "/api/..", "/../api/items", "http://p/api/../items"}) {
    const RawAnswer a = get(escape);
    EXPECT_EQ(a.status, 400) << escape;
    EXPECT_NE(a.body.find("climb"), std::string::npos) << escape << ": " << a.body;
  }
  EXPECT_EQ(mock.requests(), 0);
  EXPECT_EQ(get("/api/x/%2E%2E/items?q=1").status, 200);
  EXPECT_EQ(mock.requests(), 1);
  // Sent as matched: the upstream sees the normalized path.
  const RawAnswer echo = get("/api/x/%2E%2E/__echo?q=1");
  EXPECT_EQ(echo.status, 200);
  EXPECT_NE(echo.body.find("/__echo"), std::string::npos) << echo.body;
  EXPECT_EQ(echo.body.find("%2E"), std::string::npos) << echo.body;
  EXPECT_EQ(echo.body.find("/x/"), std::string::npos) << echo.body;
  proxy.stop_cleanly();
}

// Pagination and redirects stay behind the proxy: Link and Location URLs
// that point at the upstream come back pointing at the proxy and its route,
// so a client that follows them never reaches the upstream directly.
TEST(ProxyForwarding, PaginationAndRedirectsComeBackThroughTheProxy) {
  httplib::Server upstream_server;
  const int port = upstream_server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  const std::string base = "http://127.0.0.1:" + std::to_string(port) + "/v3";
  std::atomic<int> served{0};
  upstream_server.Get("/v3/items", [&](const httplib::Request& req, httplib::Response& res) {
    ++served;
    const int page = req.has_param("page") ? std::atoi(req.get_param_value("page").c_str()) : 1;
    if (page < 3) {
      res.set_header("Link", "<" + base + "/items?page=" + std::to_string(page + 1) + ">; rel=\"next\", <" + base +
                                 "/items?page=3>; rel=\"last\"");
    }
    res.set_content("[" + std::to_string(page) + "]", "application/json");
  });
  upstream_server.Get("/v3/old", [&](const httplib::Request&, httplib::Response& res) {
    ++served;
    res.status = 301;
    res.set_header("Location", base + "/items?page=3");
  });
  std::thread serving([&] { upstream_server.listen_after_bind(); });
  for (int i = 0; i < 2000 && !upstream_server.is_running(); ++i) std::this_thread::sleep_for(1ms);
  {
    Proxy proxy({"--route", "/gh=" + base});
    ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
    const std::string mine = "http://127.0.0.1:" + std::to_string(proxy.port()) + "/gh/";
    std::string next = "/gh/items";
    std::vector<std::string> bodies;
    for (int i = 0; i < 5 && !next.empty(); ++i) {
      const RawAnswer a = parse_answer(raw_exchange(
          proxy.port(), "GET " + next + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(proxy.port()) +
                            "\r\nConnection: close\r\n\r\n"));
      ASSERT_EQ(a.status, 200) << next;
      bodies.push_back(a.body);
      const std::string link = a.header("link");
      next.clear();
      if (link.empty()) break;
      EXPECT_EQ(link.find(base), std::string::npos) << link;  // nothing points at the upstream
      const auto open = link.find('<');
      const std::string url = link.substr(open + 1, link.find('>') - open - 1);
      ASSERT_EQ(url.rfind(mine, 0), 0u) << url;
      next = url.substr(mine.size() - 4);  // "/gh/items?page=N"
    }
    EXPECT_EQ(bodies, (std::vector<std::string>{"[1]", "[2]", "[3]"}));
    const RawAnswer moved = parse_answer(raw_exchange(
        proxy.port(), "GET /gh/old HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(proxy.port()) +
                          "\r\nConnection: close\r\n\r\n"));
    EXPECT_EQ(moved.status, 301);
    EXPECT_EQ(moved.header("location"), mine + "items?page=3");
    EXPECT_EQ(served.load(), 4);
    proxy.stop_cleanly();
  }
  upstream_server.stop();
  serving.join();
}

// An upstream head the transport refuses (20,000 field lines) is a 502 of
// the proxy's own, never the upstream's 200 with an error text for a body.
TEST(ProxyHostileUpstream, AHeadTooLargeIsA502) {
  std::string head = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 20000; ++i) head += "X-Field-" + std::to_string(i) + ": v\r\n";
  RawUpstream upstream(head + "Content-Length: 2\r\n\r\nok");
  ASSERT_GT(upstream.port(), 0);
  Proxy proxy({"--upstream", upstream.url(), "--max-attempts", "1"});
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const RawAnswer a =
      parse_answer(raw_exchange(proxy.port(), "GET /x HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(a.status, 502) << a.body;
  EXPECT_EQ(a.header("content-type"), "application/problem+json");
  EXPECT_EQ(a.has("x-field-0"), false);
  proxy.stop_cleanly();
}

// An upstream that reads the request and never answers holds no caller past
// the read timeout: a GET gets 504, a POST (it may have been applied) 502
// ambiguous, and neither is sent again.
TEST(ProxyHostileUpstream, AStalledUpstreamIsCutAtTheReadTimeout) {
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--read-timeout", "1"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto t0 = Clock::now();
  const RawAnswer get = parse_answer(raw_exchange(
      proxy.port(), "GET /__hang?ms=20000 HTTP/1.1\r\nHost: p\r\nAbide-Max-Wait: 0.5\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(get.status, 504) << get.body;
  EXPECT_EQ(get.header("abide-attempts"), "1");
  const RawAnswer post = parse_answer(raw_exchange(
      proxy.port(), "POST /__hang?ms=20000 HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"));
  EXPECT_EQ(post.status, 502) << post.body;
  EXPECT_EQ(post.header("abide-outcome"), "ambiguous");
  EXPECT_EQ(post.header("abide-attempts"), "1");
  EXPECT_LT(Clock::now() - t0, 10s);
  proxy.stop_cleanly();
}

// A caller that stops reading its answer holds nothing past the send
// timeout: its request ends and its transfer with it, even though the
// kernel takes a byte now and then.
TEST(ProxyHostileCaller, ACallerThatStopsReadingIsDroppedAtTheSendTimeout) {
  RawUpstream upstream("HTTP/1.1 200 OK\r\nContent-Length: 33554432\r\n\r\n" + std::string(32 << 20, 'x'));
  ASSERT_GT(upstream.port(), 0);
  Proxy proxy({"--upstream", upstream.url(), "--send-timeout", "1"});
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(proxy.port()));
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_TRUE(send_all(fd, "GET /big HTTP/1.1\r\nHost: p\r\n\r\n"));
  // Read a little now and then: never enough to take a piece of the answer in a second.
  json s;
  for (int i = 0; i < 80; ++i) {
    char buf[256];
    (void)recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    std::this_thread::sleep_for(100ms);
    s = proxy.stats();
    if (i > 10 && s.is_object() && s["held"] == 0 && s["transfers"] == 0) break;
  }
  EXPECT_EQ(s["held"], 0) << s.dump();
  EXPECT_EQ(s["transfers"], 0) << s.dump();
  close(fd);
  proxy.stop_cleanly();
}

// Content-Length beside chunked (RFC 9112 6.3): the encoding wins, and the
// caller gets the whole body, not one cut at the stated length.
TEST(ProxyHostileUpstream, ContentLengthBesideChunkedIsNotTheLength) {
  RawUpstream upstream("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "a\r\n0123456789\r\n6\r\nabcdef\r\n0\r\n\r\n");
  ASSERT_GT(upstream.port(), 0);
  Proxy proxy({"--upstream", upstream.url()});
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const std::string raw = raw_exchange(proxy.port(), "GET /x HTTP/1.0\r\nHost: p\r\n\r\n");
  const RawAnswer a = parse_answer(raw);
  EXPECT_EQ(a.status, 200) << raw;
  EXPECT_FALSE(a.has("content-length")) << raw;
  EXPECT_EQ(a.body, "0123456789abcdef");  // HTTP/1.0: the body runs to the close
  proxy.stop_cleanly();
}

// What goes upstream, as the upstream saw it: no hop-by-hop field and no
// Abide-* field, the upstream's Host, the body and query intact, the route's
// prefix stripped.
TEST(ProxyForwarding, HopByHopAndAbideFieldsStayAndTheRestGoesUpstream) {
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy({"--route", "/api=" + mock.url()});
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const std::string body = "{\"hello\": \"world\"}";
  const auto raw = raw_exchange(proxy.port(), "POST /api/__echo?x=1&y=a%20b HTTP/1.1\r\n"
                                              "Host: 127.0.0.1:" +
                                                  std::to_string(proxy.port()) +
                                                  "\r\n"
                                                  "Connection: x-foo, close\r\n"
                                                  "X-Foo: named-by-connection\r\n"
                                                  "Keep-Alive: timeout=5\r\n"
                                                  "TE: trailers\r\n"
                                                  "Upgrade: h2c\r\n"
                                                  "Proxy-Authorization: Basic cHJveHk6c2VjcmV0\r\n"
                                                  "Abide-Max-Wait: 5\r\n"
                                                  "Abide-Anything: 1\r\n"
                                                  "X-Kept: yes\r\n"
                                                  "Authorization: Bearer passes-through\r\n"
                                                  "Content-Type: application/json\r\n"
                                                  "Content-Length: " +
                                                  std::to_string(body.size()) + "\r\n\r\n" + body);
  const RawAnswer a = parse_answer(raw);
  ASSERT_EQ(a.status, 200) << raw;
  std::string json_body = a.body;
  if (a.header("transfer-encoding") == "chunked") {  // de-chunk (small bodies: simple is enough)
    std::string out;
    std::size_t pos = 0;
    while (pos < json_body.size()) {
      const auto eol = json_body.find("\r\n", pos);
      if (eol == std::string::npos) break;
      const auto n = std::strtoul(json_body.c_str() + pos, nullptr, 16);
      if (n == 0) break;
      out += json_body.substr(eol + 2, n);
      pos = eol + 2 + n + 2;
    }
    json_body = out;
  }
  const json e = json::parse(json_body, nullptr, false);
  ASSERT_TRUE(e.is_object()) << raw;
  EXPECT_EQ(e["method"], "POST");
  EXPECT_EQ(e["path"], "/__echo");
  EXPECT_EQ(e["query"], "x=1&y=a%20b");
  EXPECT_EQ(e["body"], body);
  std::map<std::string, std::string> seen;
  for (const auto& h : e["headers"]) {
    std::string n = h[0].get<std::string>();
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_FALSE(seen.count(n) && n == "host") << "two Host fields";
    seen[n] = h[1].get<std::string>();
  }
  for (const char* gone : {"connection", "x-foo", "keep-alive", "te", "upgrade", "proxy-authorization",
                           "abide-max-wait", "abide-anything"})
    EXPECT_FALSE(seen.count(gone)) << gone << " was forwarded: " << e["headers"].dump();
  EXPECT_EQ(seen["host"], "127.0.0.1:" + std::to_string(mock.port()));
  EXPECT_EQ(seen["x-kept"], "yes");
  EXPECT_EQ(seen["authorization"], "Bearer passes-through");
  EXPECT_EQ(seen["content-type"], "application/json");
  EXPECT_EQ(a.header("abide-outcome"), "done");
  EXPECT_FALSE(a.header("abide-attempts").empty());
  EXPECT_FALSE(a.header("abide-waited").empty());
  // Nothing the caller did not send: no User-Agent, Accept or Content-Type
  // of the transport's own (libcurl adds each by default).
  for (const char* added : {"user-agent", "accept"}) EXPECT_FALSE(seen.count(added)) << added << ": " << e["headers"].dump();

  const auto bare = raw_exchange(proxy.port(), "PUT /api/__echo HTTP/1.1\r\nHost: p\r\nConnection: close\r\n"
                                               "Content-Length: 3\r\n\r\nabc");
  const RawAnswer b = parse_answer(bare);
  ASSERT_EQ(b.status, 200) << bare;
  const auto start = b.body.find('{');
  const json be = json::parse(b.body.substr(start == std::string::npos ? 0 : start, b.body.rfind('}') + 1 - start),
                              nullptr, false);
  ASSERT_TRUE(be.is_object()) << bare;
  EXPECT_EQ(be["body"], "abc");
  for (const auto& h : be["headers"]) {
    std::string n = h[0].get<std::string>();
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_TRUE(n != "content-type" && n != "accept" && n != "user-agent") << be["headers"].dump();
  }
  proxy.stop_cleanly();
}

// ---- its own pages ---------------------------------------------------------------------

// The proxy's stats as soon as they count `done` answers (bounded): a caller
// can read its answer a moment before the proxy has recorded it.
json stats_once_done(const Proxy& proxy, int done) {
  json s;
  for (int i = 0; i < 250; ++i) {
    s = proxy.stats();
    if (s.is_object() && s["outcomes"].value("done", 0) >= done) break;
    std::this_thread::sleep_for(20ms);
  }
  return s;
}

TEST(ProxyPages, StatsIsJsonWithTheCountsAndMetricsIsPrometheusText) {
  REQUIRE_PROGRAM(python, "python3");
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(upstream(mock));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto r = run_client(python, "client.py", {"--url", proxy.url("/p"), "--count", "3", "--keep-alive"});
  ASSERT_EQ(r.answers.size(), 3u) << describe(r);
  for (const auto& a : r.answers) ASSERT_EQ(a.status, 200) << describe(r);
  const json s = stats_once_done(proxy, 3);
  ASSERT_TRUE(s.is_object());
  EXPECT_GE(s["requests"].get<int>(), 3) << s.dump();
  EXPECT_EQ(s["answered"].value("200", 0), 3) << s.dump();
  EXPECT_EQ(s["attempts"].get<int>(), 3) << s.dump();
  EXPECT_EQ(s["outcomes"].value("done", 0), 3) << s.dump();
  EXPECT_EQ(s["held"], 0) << s.dump();
  EXPECT_EQ(s["transfers"], 0) << s.dump();
  auto c = proxy.client();
  const auto stats = c.Get("/__abide/stats");
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->status, 200);
  EXPECT_NE(stats->get_header_value("Content-Type").find("json"), std::string::npos);
  const auto metrics = c.Get("/__abide/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  EXPECT_NE(metrics->body.find("abide_proxy_requests_total"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("# TYPE abide_proxy_requests_total counter"), std::string::npos) << metrics->body;
  EXPECT_EQ(mock.requests(), 3);  // the pages are the proxy's own: never forwarded
  proxy.stop_cleanly();
}

// A caller that closes its connection the moment its answer is complete
// (Connection: close, as curl and Python's urllib do) got that answer: the
// request counts as done, not cancelled.
TEST(ProxyPages, AnAnswerReadInFullCountsAsDoneWhenTheCallerClosesAtOnce) {
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(upstream(mock));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(
        parse_answer(raw_exchange(proxy.port(), "GET /p HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n")).status,
        200);
  const json s = stats_once_done(proxy, 3);
  EXPECT_EQ(s["outcomes"].value("done", 0), 3) << s.dump();
  EXPECT_EQ(s["outcomes"].value("cancelled", 0), 0) << s.dump();
  proxy.stop_cleanly();
}

// ---- logs ---------------------------------------------------------------------------

TEST(ProxyLogs, VerboseNeverLogsACredential) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "1", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--verbose", "--max-wait", "10"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  for (int i = 0; i < 2; ++i)  // the second meets the limit: a wait and a retry are logged too
    EXPECT_EQ(parse_answer(raw_exchange(proxy.port(),
                                        "GET /v?token=s3cr3t-token HTTP/1.1\r\nHost: p\r\n"
                                        "Authorization: Bearer s3cr3t-token\r\nX-Api-Key: s3cr3t-token\r\n"
                                        "Connection: close\r\n\r\n"))
                  .status,
              200);
  const auto r = proxy.stop_cleanly();
  EXPECT_FALSE(r.err.empty()) << "--verbose logged nothing";
  EXPECT_EQ(r.err.find("s3cr3t-token"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("s3cr3t-token"), std::string::npos) << r.out;
}

// ---- usage -----------------------------------------------------------------------------

TEST(ProxyUsage, NoUpstreamOrABadRouteIsAUsageError) {
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"proxy", "--port", "0"},
                                              {"proxy", "--route", "no-slash=http://127.0.0.1:1"},
                                              {"proxy", "--route", "/a"},
                                              {"proxy", "--route", "/a=ftp://127.0.0.1/"},
                                              {"proxy", "--upstream", "not a url"},
                                              {"proxy", "--upstream", "http://127.0.0.1:1,profile=nosuch"},
                                              {"proxy", "--route", "/a=http://127.0.0.1:1,profile=Bad"}}) {
    const auto r = abide(bad);
    EXPECT_EQ(r.exit_code, 2) << bad.back() << ": " << r.err;
    EXPECT_EQ(r.out.find("listening"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace abide::test

#endif  // ABIDE_CLI_PATH
