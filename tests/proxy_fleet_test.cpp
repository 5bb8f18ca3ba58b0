// `abide proxy` end to end: one quota per credential, and a fleet of proxies
// sharing their quotas over Redis.
#include "support/proxy_fixture.h"
#include "support/run.h"

#ifdef ABIDE_CLI_PATH

namespace abide::test {
namespace {


// ---- credentials -----------------------------------------------------------------

// Different credentials never share a quota: with A in a cooldown, B goes
// upstream at once. The same credential shares A's cooldown. (/__echo is
// never limited by the mock: any wait there is the proxy's.)
TEST(ProxyCredentials, SeparateCredentialsDoNotShareACooldownAndTheSameOneDoes) {
  REQUIRE_PROGRAM(python, "python3");
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "2", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "30"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const std::string a_key = "Authorization: Bearer credential-a";
  const auto first = run_client(python, "client.py", {"--url", proxy.url("/a"), "-H", a_key});
  ASSERT_EQ(first.answers.size(), 1u) << describe(first);
  ASSERT_EQ(first.answers[0].status, 200);
  // A's second request meets the limit: A is in a cooldown of up to 2 s.
  const auto limited = run_client(python, "client.py",
                                  {"--url", proxy.url("/a"), "-H", a_key, "-H", "Abide-Max-Wait: 0"});
  ASSERT_EQ(limited.answers.size(), 1u) << describe(limited);
  ASSERT_EQ(limited.answers[0].status, 429) << describe(limited);
  const auto nb = rfc3339_unix(limited.answers[0].not_before);
  ASSERT_TRUE(nb) << limited.answers[0].not_before;
  ASSERT_GT(*nb - unix_now(), 0.5) << "the test needs the cooldown still running";

  ClientRun a_run, b_run;
  std::thread a([&] {
    a_run = run_client(python, "client.py", {"--url", proxy.url("/__echo"), "-H", a_key, "-H", "Abide-Max-Wait: 10"});
  });
  b_run = run_client(python, "client.py",
                     {"--url", proxy.url("/__echo"), "-H", "Authorization: Bearer credential-b", "-H",
                      "Abide-Max-Wait: 10"});
  a.join();
  ASSERT_EQ(b_run.answers.size(), 1u) << describe(b_run);
  ASSERT_EQ(a_run.answers.size(), 1u) << describe(a_run);
  EXPECT_EQ(b_run.answers[0].status, 200);
  EXPECT_LT(number(b_run.answers[0].waited), 0.3) << "B waited for A's cooldown";
  EXPECT_EQ(a_run.answers[0].status, 200);
  // A is held until its permitted time (a small allowance for clock reading).
  EXPECT_GE(number(a_run.answers[0].waited), *nb - a_run.answers[0].start_unix - 0.1)
      << "A did not share its own cooldown: " << describe(a_run);
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0);
  proxy.stop_cleanly();
}

// ---- a fleet over Redis ---------------------------------------------------------------

// Two proxies over one redis-server: a cooldown learned through the first
// holds a request through the second.
TEST(ProxyFleet, TwoProxiesShareACooldownThroughRedis) {
#ifndef ABIDE_TEST_WITH_REDIS
  GTEST_SKIP() << "abide was built without abide::redis";
#else
  REQUIRE_PROGRAM(python, "python3");
  if (redis_server_binary().empty()) GTEST_SKIP() << "no redis-server installed";
  RedisServer redis(RedisServer::Options{true, false, {}});
  if (!redis.start()) GTEST_SKIP() << "redis-server did not start";
  const std::string store = "redis://127.0.0.1:" + std::to_string(redis.port());
  // A window of 5 s: the second request must reach the mock inside it (two
  // Python clients started in turn), on a loaded machine too.
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "5", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy one(with(upstream(mock), {"--store", store, "--max-wait", "30"}));
  Proxy two(with(upstream(mock), {"--store", store, "--max-wait", "30"}));
  ASSERT_GT(one.port(), 0) << one.err_so_far();
  ASSERT_GT(two.port(), 0) << two.err_so_far();
  const auto ok = run_client(python, "client.py", {"--url", one.url("/x")});
  ASSERT_EQ(ok.answers.size(), 1u) << describe(ok);
  ASSERT_EQ(ok.answers[0].status, 200);
  const auto limited = run_client(python, "client.py", {"--url", one.url("/x"), "-H", "Abide-Max-Wait: 0"});
  ASSERT_EQ(limited.answers.size(), 1u) << describe(limited);
  ASSERT_EQ(limited.answers[0].status, 429);
  ASSERT_EQ(mock.requests(), 2);
  // Through the second proxy, which has sent nothing yet.
  const auto held = run_client(python, "client.py", {"--url", two.url("/x"), "-H", "Abide-Max-Wait: 10"});
  ASSERT_EQ(held.answers.size(), 1u) << describe(held);
  const Answer& a = held.answers[0];
  EXPECT_TRUE((a.status == 200 && number(a.waited) > 0) || a.outcome == "deferred") << describe(held);
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0) << mock.stats()["totals"].dump();
  // Held, then sent once after the cooldown (or not at all when deferred): never sent into it.
  EXPECT_LE(mock.requests(), 3);
  one.stop_cleanly();
  two.stop_cleanly();
#endif
}

// A proxy on Redis told a 429 with Retry-After: 30, then Redis forgets (`lose`:
// FLUSHALL, or a restart with nothing saved): callers within the 30 s are
// answered deferred with the permitted time, and nothing more reaches the
// upstream before it.
void expect_the_proxy_remembers(RedisServer& redis, const std::function<void()>& lose) {
  REQUIRE_PROGRAM(python, "python3");
  const std::string store = "redis://127.0.0.1:" + std::to_string(redis.port());
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "30", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--store", store, "--max-wait", "60"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const double t0 = unix_now();  // the mock's window starts at the first request: ends at t0 + 30 or later
  const auto ok = run_client(python, "client.py", {"--url", proxy.url("/x")});
  ASSERT_EQ(ok.answers.size(), 1u) << describe(ok);
  ASSERT_EQ(ok.answers[0].status, 200);
  const auto limited = run_client(python, "client.py", {"--url", proxy.url("/x"), "-H", "Abide-Max-Wait: 0"});
  ASSERT_EQ(limited.answers.size(), 1u) << describe(limited);
  ASSERT_EQ(limited.answers[0].status, 429) << describe(limited);
  ASSERT_EQ(mock.requests(), 2) << describe(limited);

  lose();
  for (int i = 0; i < 3; ++i) {
    const auto held = run_client(python, "client.py", {"--url", proxy.url("/x"), "-H", "Abide-Max-Wait: 1"});
    ASSERT_EQ(held.answers.size(), 1u) << describe(held);
    const Answer& a = held.answers[0];
    EXPECT_EQ(a.status, 429) << describe(held);
    EXPECT_EQ(a.outcome, "deferred") << describe(held);
    const auto nb = rfc3339_unix(a.not_before);
    ASSERT_TRUE(nb) << a.not_before;
    EXPECT_GE(*nb, t0 + 29) << a.not_before;
  }
  std::this_thread::sleep_for(300ms);  // a request the proxy might wrongly still send would show now
  EXPECT_EQ(mock.requests(), 2);
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0) << mock.stats()["totals"].dump();
  proxy.stop_cleanly();
}

TEST(ProxyFleet, AFlushedRedisForgetsNoCooldownTheProxyWasTold) {
#ifndef ABIDE_TEST_WITH_REDIS
  GTEST_SKIP() << "abide was built without abide::redis";
#else
  if (redis_server_binary().empty()) GTEST_SKIP() << "no redis-server installed";
  RedisServer redis(RedisServer::Options{true, false, {}});
  if (!redis.start()) GTEST_SKIP() << "redis-server did not start";
  expect_the_proxy_remembers(redis, [&] {
#if ABIDE_TEST_HAVE_HIREDIS
    ASSERT_EQ(redis.command({"FLUSHALL"}).text, "OK");
#else
    GTEST_SKIP() << "no hiredis to flush Redis with";
#endif
  });
#endif
}

TEST(ProxyFleet, ARedisRestartedEmptyForgetsNoCooldownTheProxyWasTold) {
#ifndef ABIDE_TEST_WITH_REDIS
  GTEST_SKIP() << "abide was built without abide::redis";
#else
  if (redis_server_binary().empty()) GTEST_SKIP() << "no redis-server installed";
  RedisServer redis(RedisServer::Options{true, false, {}});
  if (!redis.start()) GTEST_SKIP() << "redis-server did not start";
  expect_the_proxy_remembers(redis, [&] {
    redis.stop();
    ASSERT_TRUE(redis.start());
  });
#endif
}

}  // namespace
}  // namespace abide::test

#endif  // ABIDE_CLI_PATH
