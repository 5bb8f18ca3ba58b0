// `abide proxy` end to end: streaming, callers that hang up, SIGTERM and a
// full queue. Waits only where time is the rule, with wide margins.
#include "support/proxy_fixture.h"
#include "support/run.h"

#ifdef ABIDE_CLI_PATH

namespace abide::test {
namespace {


// ---- streaming ------------------------------------------------------------------

// An event stream reaches the caller event by event, not at its end.
TEST(ProxyStreaming, ServerSentEventsArriveAsTheyAreSent) {
  REQUIRE_PROGRAM(python, "python3");
  REQUIRE_PROGRAM(node, "node");
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(upstream(mock));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  for (const auto& [interpreter, script] :
       {std::pair{python, std::string("client.py")}, std::pair{node, std::string("client.mjs")}}) {
    SCOPED_TRACE(script);
    const auto r = run_client(interpreter, script, {"--url", proxy.url("/__stream?chunks=4&gap_ms=300"), "--chunks"});
    ASSERT_EQ(r.answers.size(), 1u) << describe(r);
    const Answer& a = r.answers[0];
    EXPECT_EQ(a.status, 200);
    EXPECT_EQ(a.outcome, "done");
    ASSERT_TRUE(a.chunks.is_array() && !a.chunks.empty()) << describe(r);
    std::string body;
    for (const auto& c : a.chunks) body += c[1].get<std::string>();
    EXPECT_EQ(body, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\n");
    const double first = a.chunks.front()[0].get<double>();
    const double last = a.chunks.back()[0].get<double>();
    EXPECT_NE(a.chunks.front()[1].get<std::string>().find("data: 0"), std::string::npos);
    // The stream takes 900 ms after its head (three gaps); a buffered body
    // would arrive all at once at its end.
    EXPECT_LT(first - a.head_s, 0.9) << describe(r);
    EXPECT_GE(last - first, 0.5) << describe(r);
  }
  proxy.stop_cleanly();
}

// ---- caller hang-up ----------------------------------------------------------------

// A caller held in a cooldown (its request met a 429 upstream) that then hangs
// up; returns when it has. The mock then has seen 2 requests.
void hang_up_during_a_cooldown(const Mock& mock, const Proxy& proxy, Clock::time_point& told) {
  const auto ok = parse_answer(raw_exchange(proxy.port(), "GET /a HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"));
  ASSERT_EQ(ok.status, 200);
  const int fd = connect_loopback(proxy.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "GET /a HTTP/1.1\r\nHost: p\r\nAbide-Max-Wait: 20\r\n\r\n"));
  ASSERT_TRUE(mock.wait_for_requests(2));  // its 429: the proxy now waits for it
  told = Clock::now();
  std::this_thread::sleep_for(200ms);
  close(fd);
}

// A caller that hangs up during a cooldown is cancelled: the proxy sends
// nothing more upstream for it.
TEST(ProxyHangup, ACallerThatHangsUpDuringACooldownIsNotRetried) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "2", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "30"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  Clock::time_point told;
  ASSERT_NO_FATAL_FAILURE(hang_up_during_a_cooldown(mock, proxy, told));
  // Past the server's wait (2 s at most) and a margin: a retry would have gone by now.
  std::this_thread::sleep_until(told + 3500ms);
  EXPECT_EQ(mock.requests(), 2);
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0);
  proxy.stop_cleanly();
}

// ... and /__abide/stats counts it cancelled.
TEST(ProxyHangup, AHangUpIsCountedCancelledInStats) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "2", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "30"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  Clock::time_point told;
  ASSERT_NO_FATAL_FAILURE(hang_up_during_a_cooldown(mock, proxy, told));
  json s;
  for (int i = 0; i < 250; ++i) {  // noticed within the wait, or at its end at the latest (bounded)
    s = proxy.stats();
    if (s.is_object() && s["outcomes"].value("cancelled", 0) > 0) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(s.is_object());
  EXPECT_EQ(s["outcomes"].value("cancelled", 0), 1) << s.dump();
  EXPECT_EQ(s["held"], 0) << s.dump();
  proxy.stop_cleanly();
}

// ---- SIGTERM -------------------------------------------------------------------------

// SIGTERM while a caller is held in a cooldown: it gets 503 with Retry-After
// and its permitted time, and the proxy exits 0.
TEST(ProxyStop, SigtermAnswersAHeldCaller503WithItsPermittedTime) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "20", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "60", "--grace", "2"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  ASSERT_EQ(parse_answer(raw_exchange(proxy.port(), "GET /s HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n")).status,
            200);
  const int fd = connect_loopback(proxy.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "GET /s HTTP/1.1\r\nHost: p\r\nAbide-Max-Wait: 60\r\nConnection: close\r\n\r\n"));
  ASSERT_TRUE(mock.wait_for_requests(2));
  std::this_thread::sleep_for(200ms);  // into its wait
  const double before = unix_now();
  const auto r = proxy.stop(SIGTERM);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const RawAnswer a = parse_answer(read_answer(fd, 10s));
  close(fd);
  EXPECT_EQ(a.status, 503);
  // Not before the permitted time: the server's 20 s window has most of its time left.
  EXPECT_GE(whole_seconds(a.header("retry-after")), 10) << a.header("retry-after");
  const auto nb = rfc3339_unix(a.header("abide-not-before"));
  ASSERT_TRUE(nb) << a.header("abide-not-before");
  EXPECT_GE(*nb, before + 10);  // the server's 20 s window is far from over
  EXPECT_EQ(mock.requests(), 2);
}

// A POST the upstream has in full when the grace ends may have been applied:
// 502 ambiguous, never "deferred" (which invites a second charge).
TEST(ProxyStop, APostInFlightPastTheGraceIsAmbiguous) {
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--grace", "0.3"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const int fd = connect_loopback(proxy.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "POST /__hang?ms=5000 HTTP/1.1\r\nHost: p\r\nContent-Type: application/json\r\n"
                           "Content-Length: 9\r\nConnection: close\r\n\r\n{\"n\": 1}\n"));
  std::this_thread::sleep_for(500ms);  // the upstream has it (/__hang is not counted among requests)
  const auto r = proxy.stop(SIGTERM);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const RawAnswer a = parse_answer(read_answer(fd, 10s));
  close(fd);
  EXPECT_EQ(a.status, 502) << a.body;
  EXPECT_EQ(a.header("abide-outcome"), "ambiguous");
  EXPECT_EQ(a.header("x-should-retry"), "false");
}

// ---- a full queue ------------------------------------------------------------------

// More callers than --jobs transfers and --queue waiting places: the one too
// many is answered 503 with Retry-After at once; the others are served.
TEST(ProxyQueue, ACallerBeyondJobsAndQueueGets503WithRetryAfter) {
  REQUIRE_PROGRAM(python, "python3");
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--jobs", "1", "--queue", "1"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  // Each transfer lasts 1.5 s: all three callers arrive while the first runs.
  const auto r = run_client(python, "client.py",
                            {"--url", proxy.url("/__stream?chunks=2&gap_ms=1500"), "--count", "3", "--parallel", "3"});
  ASSERT_EQ(r.answers.size(), 3u) << describe(r);
  int ok = 0, full = 0;
  for (const auto& a : r.answers) {
    if (a.status == 200) ++ok;
    if (a.status == 503) {
      ++full;
      EXPECT_GE(whole_seconds(a.retry_after), 1) << describe(r);
      EXPECT_LT(a.head_s - a.start_s, 1.4) << "held instead of refused: " << describe(r);
    }
  }
  EXPECT_EQ(ok, 2) << describe(r);
  EXPECT_EQ(full, 1) << describe(r);
  proxy.stop_cleanly();
}

// A full queue on a key known to be in a cooldown: the caller turned away is
// told the key's permitted time, not "in a second".
TEST(ProxyQueue, AFullQueueAnswersWithTheKeysKnownPermittedTime) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "20", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--jobs", "1", "--queue", "0"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto get = [&](const std::string& budget) {
    return parse_answer(raw_exchange(proxy.port(), "GET /q HTTP/1.1\r\nHost: p\r\nAbide-Max-Wait: " + budget +
                                                       "\r\nConnection: close\r\n\r\n"));
  };
  ASSERT_EQ(get("1").status, 200);
  ASSERT_EQ(get("1").status, 429);  // told: 20 s
  // One caller held for the cooldown fills the one place.
  const int held = connect_loopback(proxy.port());
  ASSERT_GE(held, 0);
  ASSERT_TRUE(send_all(held, "GET /q HTTP/1.1\r\nHost: p\r\nAbide-Max-Wait: 60\r\nConnection: close\r\n\r\n"));
  // Until the proxy holds it (a loaded machine may take a while to read it).
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (proxy.stats().value("held", 0) < 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(proxy.stats().value("held", 0), 1) << proxy.stats().dump();
  const RawAnswer full = get("60");
  EXPECT_EQ(full.status, 503);
  EXPECT_EQ(full.header("abide-outcome"), "deferred");
  EXPECT_GE(whole_seconds(full.header("retry-after")), 15) << full.header("retry-after");
  EXPECT_EQ(full.header("x-should-retry"), "false");
  close(held);
  proxy.stop_cleanly();
}

// Under a low descriptor limit (prlimit: 100), more idle keep-alive callers
// than it leaves room for: each new caller takes an idle one's place, and a
// fresh caller is always answered.
TEST(ProxyConnections, IdleCallersAreReclaimedSoAFreshOneIsAnswered) {
  REQUIRE_PROGRAM(prlimit, "prlimit");
  Mock mock({"--limit", "1000", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Listening proxy({prlimit, "--nofile=100:100", ABIDE_CLI_PATH, "proxy", "--port", "0", "--upstream", mock.url(),
                   "--jobs", "2"});
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  std::vector<int> idle;
  for (int i = 0; i < 60; ++i) {
    const int fd = connect_loopback(proxy.port());
    if (fd >= 0) idle.push_back(fd);
  }
  std::this_thread::sleep_for(300ms);
  for (int i = 0; i < 3; ++i) {
    const RawAnswer a =
        parse_answer(raw_exchange(proxy.port(), "GET /fresh HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n", 10s));
    EXPECT_EQ(a.status, 200) << i;
  }
  // Some of the idle ones were closed for them: they read the end.
  int closed = 0;
  for (const int fd : idle) {
    pollfd p{fd, POLLIN, 0};
    char b;
    if (poll(&p, 1, 0) > 0 && recv(fd, &b, 1, MSG_DONTWAIT) == 0) ++closed;
    close(fd);
  }
  EXPECT_GT(closed, 0);
  const auto r = proxy.stop(SIGTERM);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// Callers that arrive in a burst are spread over the loops (one loop would
// otherwise take most of them at a wake-up, and do their work alone); the
// stats page shows each loop's connections.
TEST(ProxyConnections, ABurstOfCallersIsSpreadOverTheLoops) {
  Mock mock({"--limit", "1000", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--loops", "2"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  constexpr int kCallers = 200;
  std::vector<int> idle;
  for (int i = 0; i < kCallers; ++i) {
    const int fd = connect_loopback(proxy.port());
    if (fd >= 0) idle.push_back(fd);
  }
  ASSERT_EQ(idle.size(), static_cast<std::size_t>(kCallers));
  // The page's own connection is one more.
  json stats;
  for (int i = 0; i < 200; ++i) {
    const RawAnswer a = parse_answer(raw_exchange(proxy.port(), "GET /__abide/stats HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"));
    ASSERT_EQ(a.status, 200);
    stats = json::parse(a.body);
    if (stats["connections"] == kCallers + 1) break;
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(stats["connections"], kCallers + 1) << stats.dump();
  ASSERT_EQ(stats["loops"].size(), 2u) << stats.dump();
  // A loop stops taking callers at the average and a sixteenth (plus 2):
  // 100 + 6 here, and the burst may carry it a few past.
  for (const auto& loop : stats["loops"]) {
    EXPECT_GE(loop["connections"].get<int>(), 85) << stats.dump();
    EXPECT_LE(loop["connections"].get<int>(), 116) << stats.dump();
  }
  const RawAnswer metrics = parse_answer(raw_exchange(proxy.port(), "GET /__abide/metrics HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"));
  EXPECT_NE(metrics.body.find("abide_proxy_connections{loop=\"1\"}"), std::string::npos) << metrics.body;
  for (const int fd : idle) close(fd);
  proxy.stop_cleanly();
}

// --max-upstream-connections bounds the proxy's connections to an upstream
// (nginx's max_conns): callers beyond it wait for one, and every one is
// answered.
TEST(ProxyConnections, UpstreamConnectionsAreBoundedAndEveryCallerAnswered) {
  test::Concurrency concurrency;  // before the server: its handlers use it until the server stops
  httplib::Server upstream_server;
  const int port = upstream_server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  upstream_server.Get(R"(/items/(\d+))", [&](const httplib::Request& req, httplib::Response& res) {
    {
      const auto inside = concurrency.enter();
      std::this_thread::sleep_for(50ms);
    }
    res.set_content("item " + req.matches[1].str(), "text/plain");
  });
  std::thread serving([&] { upstream_server.listen_after_bind(); });
  for (int i = 0; i < 2000 && !upstream_server.is_running(); ++i) std::this_thread::sleep_for(1ms);
  {
    Proxy proxy({"--upstream", "http://127.0.0.1:" + std::to_string(port), "--max-upstream-connections", "1"});
    ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
    std::vector<RawAnswer> answers(4);
    std::vector<std::thread> callers;
    for (std::size_t i = 0; i < answers.size(); ++i)
      callers.emplace_back([&, i] {
        answers[i] = parse_answer(raw_exchange(
            proxy.port(), "GET /items/" + std::to_string(i) + " HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n",
            10s));
      });
    for (auto& c : callers) c.join();
    for (std::size_t i = 0; i < answers.size(); ++i) {
      EXPECT_EQ(answers[i].status, 200) << i;
      EXPECT_EQ(answers[i].body, "item " + std::to_string(i));
    }
    EXPECT_EQ(concurrency.most(), 1) << "more than one connection to the upstream at once";
    proxy.stop_cleanly();
  }
  upstream_server.stop();
  serving.join();
}

// Bodies in memory are bounded over every caller (--body-memory): a body a
// trickling caller holds leaves the rest for others, a body that would pass
// the bound is answered 503 with Retry-After unread, and the memory comes
// back when a request is done.
TEST(ProxyConnections, RequestBodiesInMemoryAreBoundedOverEveryCaller) {
  Mock mock({"--limit", "1000", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--body-memory", "1000"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const int slow = connect_loopback(proxy.port());
  ASSERT_GE(slow, 0);
  ASSERT_TRUE(send_all(slow, "POST /__echo HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                             "320\r\n" + std::string(800, 'a') + "\r\n"));
  std::this_thread::sleep_for(300ms);
  const auto post = [&](std::size_t n) {
    return parse_answer(raw_exchange(proxy.port(), "POST /__echo HTTP/1.1\r\nHost: p\r\nContent-Length: " +
                                                       std::to_string(n) + "\r\nConnection: close\r\n\r\n" +
                                                       std::string(n, 'b')));
  };
  EXPECT_EQ(post(150).status, 200);  // fits beside the 800
  const RawAnswer over = post(500);
  EXPECT_EQ(over.status, 503);
  EXPECT_EQ(whole_seconds(over.header("retry-after")), 1);
  ASSERT_TRUE(send_all(slow, "0\r\n\r\n"));
  const RawAnswer done = parse_answer(read_answer(slow, 10s));
  close(slow);
  EXPECT_EQ(done.status, 200);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(post(900).status, 200);  // the 800 came back
  proxy.stop_cleanly();
}

}  // namespace
}  // namespace abide::test

#endif  // ABIDE_CLI_PATH
