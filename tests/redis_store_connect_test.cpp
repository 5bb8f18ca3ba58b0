// RedisStore against a real redis-server: AUTH, and the check at start.
#include "support/redis_store_fixture.h"

namespace abide::test {
namespace {


// ---- AUTH ---------------------------------------------------------------------------------

TEST(RedisStore, AuthWithAPassword) {
  RedisServer server({true, true, {"--requirepass", "hunter2-secret"}});
  if (!server.start()) GTEST_SKIP() << "redis-server is not available";
  auto url = parse_redis_url(server.tcp_url("pw:"));
  ASSERT_TRUE(url);
  url->password = "hunter2-secret";
  RedisStoreOptions o;
  o.endpoint = *url;
  Events events;
  o.on_event = events.hook();
  auto store = std::make_shared<RedisStore>(o);
  Pacer p(PacerConfig{}, store);
  p.record("k", system_retry_after(seconds{30}));
  EXPECT_FALSE(p.acquire("k", system_monotonic_clock().now()).ok());
  EXPECT_TRUE(store->up());
  EXPECT_EQ(server.command({"EXISTS", "pw:k"}, {"AUTH", "hunter2-secret"}).integer, 1);

  // The wrong password: down, reported once, without the password.
  o.endpoint.password = "wrong-secret-words";
  Events bad;
  o.on_event = bad.hook();
  auto wrong = std::make_shared<RedisStore>(o);
  Pacer q(PacerConfig{}, wrong);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(q.acquire("k").ok());  // the in-process store answers
  EXPECT_FALSE(wrong->up());
  EXPECT_EQ(bad.count(RedisEvent::kDown), 1) << bad.all();
  EXPECT_EQ(bad.all().find("secret"), std::string::npos) << bad.all();
  EXPECT_NE(bad.all().find("authentication failed"), std::string::npos) << bad.all();
}

TEST(RedisStore, AuthAsAnAclUserFromAUrl) {
  RedisServer server(
      {true, false, {"--user", "alice", "on", ">wonder%land", "~*", "&*", "+@all", "--user", "default", "off"}});
  if (!server.start()) GTEST_SKIP() << "redis-server is not available";
  const auto url = parse_redis_url("redis://alice:wonder%25land@127.0.0.1:" + std::to_string(server.port()) + "/acl:");
  ASSERT_TRUE(url);
  RedisStoreOptions o;
  o.endpoint = *url;
  auto store = std::make_shared<RedisStore>(o);
  Pacer p(PacerConfig{}, store);
  p.record("k", system_retry_after(seconds{30}));
  EXPECT_TRUE(store->up());
  EXPECT_EQ(store->stats().fallbacks, 0u);
  EXPECT_EQ(server.command({"EXISTS", "acl:k"}, {"AUTH", "alice", "wonder%land"}).integer, 1);
}

// ---- the check at start --------------------------------------------------------------------

TEST(RedisStore, CheckPassesLoadsTheScriptAndLeavesAConnection) {
  REQUIRE_REDIS();
  Events events;
  RedisStoreOptions o = options_for(*shared_server);
  o.on_event = events.hook();
  auto store = std::make_shared<RedisStore>(o);
  const auto problem = store->check(system_monotonic_clock().now());
  EXPECT_FALSE(problem) << problem->message;
  EXPECT_TRUE(store->up());
  EXPECT_EQ(store->stats().round_trips, 3u);  // PING, SCRIPT LOAD, then the read-only check
  EXPECT_EQ(store->stats().failures, 0u);
  EXPECT_EQ(shared_server->command({"EXISTS", o.endpoint.prefix}).integer, 0);  // it wrote nothing
  // The first operation is then one round trip: the script is loaded.
  Pacer p(PacerConfig{}, store);
  EXPECT_TRUE(p.acquire("k").ok());
  EXPECT_EQ(store->stats().round_trips, 4u);
  EXPECT_EQ(events.seen.size(), 0u) << events.all();
}

TEST(RedisStore, CheckNamesAWrongPasswordAndAMissingOneWithoutEvents) {
  RedisServer server({true, false, {"--requirepass", "hunter2-secret"}});
  if (!server.start()) GTEST_SKIP() << "redis-server is not available";
  auto url = parse_redis_url(server.tcp_url("pw:"));
  ASSERT_TRUE(url);
  for (const std::string password : {"wrong-secret-words", ""}) {
    SCOPED_TRACE(password.empty() ? "no password" : "a wrong password");
    RedisStoreOptions o;
    o.endpoint = *url;
    o.endpoint.password = password;
    Events events;
    o.on_event = events.hook();
    auto store = std::make_shared<RedisStore>(o);
    const auto problem = store->check(system_monotonic_clock().now());
    ASSERT_TRUE(problem);
    EXPECT_EQ(problem->problem, RedisProblem::kAuthentication);
    EXPECT_EQ(to_string(problem->problem), "authentication");
    EXPECT_NE(problem->message.find(server.tcp_url()), std::string::npos) << problem->message;
    EXPECT_NE(problem->message.find(password.empty() ? "requires a password and none was given"
                                                     : "refused the credentials"),
              std::string::npos)
        << problem->message;
    EXPECT_EQ(problem->message.find("secret"), std::string::npos) << problem->message;
    // Down from now on, as after an outage, but the caller reports it: no event.
    EXPECT_FALSE(store->up());
    Pacer p(PacerConfig{}, store);
    EXPECT_TRUE(p.acquire("k").ok());  // the in-process store answers
    EXPECT_GT(store->stats().fallbacks, 0u);
    EXPECT_EQ(events.count(RedisEvent::kDown), 0) << events.all();
  }
  RedisStoreOptions good;
  good.endpoint = *url;
  good.endpoint.password = "hunter2-secret";
  const auto ok = std::make_shared<RedisStore>(good)->check(system_monotonic_clock().now());
  EXPECT_FALSE(ok) << ok->message;
}

TEST(RedisStore, AMissingPasswordIsAnOutageNotAScriptError) {
  // Without check(): Redis answers the script's load with a protocol error
  // (not NOAUTH) when the client has not logged in. That is the server
  // refusing everyone, not this script.
  RedisServer server({true, false, {"--requirepass", "hunter2-secret"}});
  if (!server.start()) GTEST_SKIP() << "redis-server is not available";
  auto url = parse_redis_url(server.tcp_url("nopw:"));
  ASSERT_TRUE(url);
  RedisStoreOptions o;
  o.endpoint = *url;
  Events events;
  o.on_event = events.hook();
  auto store = std::make_shared<RedisStore>(o);
  Pacer p(PacerConfig{}, store);
  EXPECT_TRUE(p.acquire("k").ok());
  EXPECT_FALSE(store->up());
  EXPECT_EQ(events.count(RedisEvent::kDown), 1) << events.all();
  EXPECT_EQ(events.count(RedisEvent::kScriptError), 0) << events.all();
}

TEST(RedisStore, CheckNamesAPortOrSocketWhereNothingListens) {
  const DeadPort dead;
  ASSERT_GT(dead.port(), 0);
  RedisStoreOptions o;
  o.endpoint.port = static_cast<std::uint16_t>(dead.port());
  auto problem = std::make_shared<RedisStore>(o)->check(system_monotonic_clock().now());
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->problem, RedisProblem::kUnreachable);
  EXPECT_NE(problem->message.find("cannot connect to redis redis://127.0.0.1:" + std::to_string(dead.port())),
            std::string::npos)
      << problem->message;

  RedisStoreOptions u;
  u.endpoint.unix_socket = "/nonexistent-abide-dir/redis.sock";
  problem = std::make_shared<RedisStore>(u)->check(system_monotonic_clock().now());
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->problem, RedisProblem::kUnreachable);
  EXPECT_NE(problem->message.find("unix:/nonexistent-abide-dir/redis.sock"), std::string::npos) << problem->message;
}

TEST(RedisStore, CheckNamesAServerThatAcceptsButNeverAnswers) {
  RedisServer server({false, true, {}});
  if (!server.start()) GTEST_SKIP() << "redis-server is not available";
  RedisStoreOptions o = options_for(server);
  o.command_timeout = milliseconds{100};
  Events events;
  o.on_event = events.hook();
  auto store = std::make_shared<RedisStore>(o);
  server.pause();  // the kernel still accepts the connection
  const auto problem = store->check(system_monotonic_clock().now());
  server.resume();
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->problem, RedisProblem::kUnreachable);
  EXPECT_NE(problem->message.find("unix:" + server.socket_path() + " did not answer"), std::string::npos)
      << problem->message;
  EXPECT_FALSE(store->up());
  EXPECT_EQ(events.count(RedisEvent::kDown), 0) << events.all();
}

TEST(RedisStore, CheckNamesAPrefixTheAclForbids) {
  RedisServer server(
      {true,
       false,
       {"--user", "carol", "on", ">c-secret-pw", "~allowed:*", "&*", "+@all", "--user", "default", "off"}});
  if (!server.start()) GTEST_SKIP() << "redis-server is not available";
  for (const auto& [prefix, usable] : {std::pair<std::string, bool>{"other:", false}, {"allowed:", true}}) {
    SCOPED_TRACE(prefix);
    const auto url = parse_redis_url("redis://carol:c-secret-pw@127.0.0.1:" + std::to_string(server.port()) + "/" +
                                     prefix);
    ASSERT_TRUE(url);
    RedisStoreOptions o;
    o.endpoint = *url;
    auto store = std::make_shared<RedisStore>(o);
    const auto problem = store->check(system_monotonic_clock().now());
    EXPECT_EQ(problem.has_value(), !usable);
    if (!problem) continue;
    EXPECT_EQ(problem->problem, RedisProblem::kPermission);
    EXPECT_NE(problem->message.find("prefix \"other:\" (NOPERM)"), std::string::npos) << problem->message;
    EXPECT_EQ(problem->message.find("secret"), std::string::npos) << problem->message;
    EXPECT_FALSE(store->up());
  }
}

TEST(RedisStore, AfterAFailedCheckTheStoreReconnectsWithBackoffAndSaysSo) {
  RedisServer server({false, true, {}});  // its socket path is known before it starts
  ManualClock clock;
  RedisStoreOptions o = options_for(server);
  o.reconnect_min = milliseconds{100};
  o.reconnect_max = milliseconds{100};
  Events events;
  o.on_event = events.hook();
  auto store = std::make_shared<RedisStore>(o);
  const auto problem = store->check(clock.mono_now());
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->problem, RedisProblem::kUnreachable);
  if (!server.start()) GTEST_SKIP() << "redis-server is not available";
  Pacer p(PacerConfig{}, store, clock.monotonic(), clock.wall());
  const auto k = p.key("api");
  ASSERT_TRUE(p.acquire(k, clock.mono_now()).ok());
  EXPECT_FALSE(store->up()) << "tried again before the backoff passed";
  EXPECT_EQ(store->stats().failures, 1u);
  clock.advance(milliseconds{100});
  ASSERT_TRUE(p.acquire(k, clock.mono_now()).ok());
  EXPECT_TRUE(store->up());
  EXPECT_EQ(events.count(RedisEvent::kRecovered), 1) << events.all();
  EXPECT_EQ(events.count(RedisEvent::kDown), 0) << events.all();
}

TEST(RedisStore, AfterAFailedCheckAFailClosedStoreReportsUnavailable) {
  const DeadPort dead;
  ASSERT_GT(dead.port(), 0);
  ManualClock clock;
  RedisStoreOptions o;
  o.endpoint.port = static_cast<std::uint16_t>(dead.port());
  o.on_down = RedisDownPolicy::kFailClosed;
  o.time_base = RedisTimeBase::kClient;
  auto store = std::make_shared<RedisStore>(o);
  ASSERT_TRUE(store->check(clock.mono_now()));
  Pacer p(PacerConfig{}, store, clock.monotonic(), clock.wall());
  // No time to wait: unavailable at once, never a permit from nowhere.
  const AcquireResult r = p.acquire(p.key("api"), clock.mono_now());
  EXPECT_EQ(r.status, AcquireStatus::kUnavailable);
  EXPECT_EQ(store->stats().fallbacks, 0u);
}

}  // namespace
}  // namespace abide::test
