// RedisStore against a redis-server that goes down, hangs or forgets: the
// fallback, fail-closed, what this process was told outliving it, and defects.
#include "support/redis_store_fixture.h"

namespace abide::test {
namespace {


// ---- outages -------------------------------------------------------------------------------

TEST(RedisStore, DownFallsBackWarnsOnceAndReconnectsWithBackoff) {
  RedisServer server({false, true, {}});
  if (!server.start()) GTEST_SKIP() << "redis-server is not available";
  ManualClock clock;
  RedisStoreOptions o = options_for(server);
  o.reconnect_min = milliseconds{100};
  o.reconnect_max = milliseconds{400};
  Events events;
  o.on_event = events.hook();
  auto store = std::make_shared<RedisStore>(o);
  Pacer p(PacerConfig{}, store, clock.monotonic(), clock.wall());
  const auto k = p.key("api");
  p.record(k, with_policy(response(clock), 10, seconds{1}));
  ASSERT_TRUE(p.acquire(k, clock.mono_now()).ok());
  ASSERT_TRUE(store->up());

  server.kill_now();
  // The in-process store goes on, and it learnt the policy while Redis was up.
  int permits = 0;
  for (int i = 0; i < 20; ++i) {
    clock.advance(milliseconds{10});
    if (p.acquire(k, clock.mono_now()).ok()) ++permits;
  }
  EXPECT_FALSE(store->up());
  EXPECT_GE(permits, 1);
  EXPECT_LE(permits, 2);  // 10 per second, over 0.2 s
  EXPECT_EQ(events.count(RedisEvent::kDown), 1) << events.all();
  EXPECT_GT(store->stats().fallbacks, 0u);
  // Backoff: 100 ms after the first failure one attempt failed (failures = 2),
  // then the wait doubles to 200 ms, then to the 400 ms cap: over the next
  // 400 ms exactly one more attempt.
  EXPECT_EQ(store->stats().failures, 2u);
  for (int i = 0; i < 40; ++i) {
    clock.advance(milliseconds{10});
    p.acquire(k, clock.mono_now());
  }
  EXPECT_EQ(store->stats().failures, 3u) << "retried before the backoff passed";

  ASSERT_TRUE(server.start());
  clock.advance(milliseconds{400});
  EXPECT_TRUE(p.acquire(k, clock.mono_now() + seconds{1}).ok());
  EXPECT_TRUE(store->up());
  EXPECT_EQ(events.count(RedisEvent::kRecovered), 1) << events.all();
  EXPECT_EQ(events.count(RedisEvent::kDown), 1) << events.all();
  EXPECT_EQ(store->stats().reconnects, 1u);
  const auto before = store->stats().round_trips;
  p.record(k, retry_after(clock, seconds{5}));
  EXPECT_GT(store->stats().round_trips, before);
  EXPECT_EQ(server.command({"EXISTS", o.endpoint.prefix + "api"}).integer, 1);
}

TEST(RedisStore, FailClosedWaitsThenReportsUnavailable) {
  RedisServer server({false, true, {}});
  if (!server.start()) GTEST_SKIP() << "redis-server is not available";
  ManualClock clock;
  RedisStoreOptions o = options_for(server);
  o.on_down = RedisDownPolicy::kFailClosed;
  o.reconnect_min = milliseconds{100};
  o.reconnect_max = milliseconds{100};
  Events events;
  o.on_event = events.hook();
  auto store = std::make_shared<RedisStore>(o);
  Pacer p(PacerConfig{}, store, clock.monotonic(), clock.wall());
  const auto k = p.key("api");
  ASSERT_TRUE(p.acquire(k, clock.mono_now()).ok());
  server.kill_now();

  // Sixteen workers with a one-second deadline: each waits, then gives up; nothing piles up.
  constexpr int kWorkers = 16;
  std::atomic<int> alive{kWorkers};
  std::vector<std::future<AcquireResult>> f;
  const MonoTime deadline = clock.mono_now() + seconds{1};
  for (int i = 0; i < kWorkers; ++i) {
    f.push_back(std::async(std::launch::async, [&] {
      AcquireResult r = p.acquire(k, deadline);
      --alive;
      return r;
    }));
  }
  clock.drive(alive, milliseconds{20});
  for (auto& x : f) {
    const AcquireResult r = x.get();
    EXPECT_EQ(r.status, AcquireStatus::kUnavailable);
    ASSERT_TRUE(r.not_before_wall.has_value());
  }
  EXPECT_EQ(events.count(RedisEvent::kDown), 1) << events.all();
  EXPECT_EQ(store->stats().fallbacks, 0u);

  // A worker that may wait gets through once Redis is back.
  auto waiting = std::async(std::launch::async, [&] { return p.acquire(k, clock.mono_now() + seconds{60}); });
  clock.wait_for_sleepers(1);
  ASSERT_TRUE(server.start());
  std::atomic<int> one{1};
  auto driver = std::async(std::launch::async, [&] { clock.drive(one, milliseconds{50}); });
  const AcquireResult r = waiting.get();
  one = 0;
  driver.get();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(events.count(RedisEvent::kRecovered), 1) << events.all();
}

TEST(RedisStore, AHungServerTimesOutInsteadOfBlocking) {
  RedisServer server({false, true, {}});
  if (!server.start()) GTEST_SKIP() << "redis-server is not available";
  RedisStoreOptions o = options_for(server, RedisTimeBase::kServer);
  o.command_timeout = milliseconds{100};
  Events events;
  o.on_event = events.hook();
  auto store = std::make_shared<RedisStore>(o);
  Pacer p(PacerConfig{}, store);
  ASSERT_TRUE(p.acquire("k").ok());
  server.pause();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(p.acquire("k").ok());  // answered by the in-process store after the timeout
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds{5});
  EXPECT_FALSE(store->up());
  EXPECT_EQ(events.count(RedisEvent::kDown), 1) << events.all();
  server.resume();
}

TEST(RedisStore, AKeyOfTheWrongTypeIsReportedNotFatal) {
  REQUIRE_REDIS();
  RedisStoreOptions o = options_for(*shared_server, RedisTimeBase::kServer);
  Events events;
  o.on_event = events.hook();
  auto store = std::make_shared<RedisStore>(o);
  ASSERT_EQ(shared_server->command({"HSET", o.endpoint.prefix + "clobbered", "a", "b"}).type, ':');
  Pacer p(PacerConfig{}, store);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(p.acquire("clobbered").ok());
  EXPECT_EQ(events.count(RedisEvent::kScriptError), 1) << events.all();
  EXPECT_TRUE(store->up());
  EXPECT_TRUE(p.acquire("fine").ok());
}

// ---- what this process was told outlives a Redis that forgets ---------------------------

// A 429 with Retry-After: 30, then Redis loses the key (`lose` flushes it or
// restarts the server empty): an acquire is not granted before the 30 s, and
// the cooldown is written back for the other processes.
void expect_the_cooldown_outlives(RedisServer& server, const std::function<void()>& lose, bool fail_closed) {
  ManualClock clock;
  RedisStoreOptions o = options_for(server);
  if (fail_closed) o.on_down = RedisDownPolicy::kFailClosed;
  Pacer p(PacerConfig{}, std::make_shared<RedisStore>(o), clock.monotonic(), clock.wall());
  const auto k = p.key("api");
  const MonoTime t0 = clock.mono_now();
  p.record(k, retry_after(clock, seconds{30}));
  ASSERT_EQ(server.command({"EXISTS", o.endpoint.prefix + "api"}).integer, 1);
  clock.advance(seconds{4});
  lose();
  ASSERT_EQ(server.command({"EXISTS", o.endpoint.prefix + "api"}).integer, 0);
  const AcquireResult r = p.acquire(k, clock.mono_now());
  ASSERT_EQ(r.status, AcquireStatus::kDeadlineExceeded) << to_string(r.status);
  EXPECT_GE(r.not_before, t0 + seconds{30});
  EXPECT_LE(r.not_before, t0 + seconds{30} + milliseconds{1});
  EXPECT_EQ(r.cause, WaitCause::kCooldown);
  // Written back: another process, which was told nothing, holds too.
  EXPECT_EQ(server.command({"EXISTS", o.endpoint.prefix + "api"}).integer, 1);
  Pacer other(PacerConfig{}, std::make_shared<RedisStore>(o), clock.monotonic(), clock.wall());
  const AcquireResult b = other.acquire(other.key("api"), clock.mono_now());
  EXPECT_FALSE(b.ok());
  EXPECT_GE(b.not_before, t0 + seconds{30});
  // At the permitted time, one goes (the probe).
  clock.advance(t0 + seconds{30} + milliseconds{1} - clock.mono_now());
  const AcquireResult probe = p.acquire(k, clock.mono_now());
  EXPECT_TRUE(probe.ok()) << to_string(probe.status);
  EXPECT_TRUE(probe.probe);
}

TEST(RedisStore, AFlushAllForgetsNoCooldownThisProcessWasTold) {
  for (const bool fail_closed : {false, true}) {
    SCOPED_TRACE(fail_closed ? "fail-closed" : "fallback");
    RedisServer server({false, true, {}});
    if (!server.start()) GTEST_SKIP() << "redis-server is not available";
    expect_the_cooldown_outlives(server, [&] { ASSERT_EQ(server.command({"FLUSHALL"}).text, "OK"); }, fail_closed);
  }
}

TEST(RedisStore, ARestartEmptyForgetsNoCooldownThisProcessWasTold) {
  for (const bool fail_closed : {false, true}) {
    SCOPED_TRACE(fail_closed ? "fail-closed" : "fallback");
    RedisServer server({false, true, {}});
    if (!server.start()) GTEST_SKIP() << "redis-server is not available";
    expect_the_cooldown_outlives(
        server,
        [&] {
          server.stop();
          ASSERT_TRUE(server.start());
        },
        fail_closed);
  }
}

TEST(RedisStore, WhileRedisIsDownTheCooldownThisProcessWasToldHolds) {
  for (const bool fail_closed : {false, true}) {
    SCOPED_TRACE(fail_closed ? "fail-closed" : "fallback");
    RedisServer server({false, true, {}});
    if (!server.start()) GTEST_SKIP() << "redis-server is not available";
    ManualClock clock;
    RedisStoreOptions o = options_for(server);
    if (fail_closed) o.on_down = RedisDownPolicy::kFailClosed;
    Pacer p(PacerConfig{}, std::make_shared<RedisStore>(o), clock.monotonic(), clock.wall());
    const auto k = p.key("api");
    const MonoTime t0 = clock.mono_now();
    p.record(k, retry_after(clock, seconds{30}));
    server.kill_now();
    // Not "unavailable": the server's own time, and its reason.
    const AcquireResult r = p.acquire(k, clock.mono_now());
    EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded) << to_string(r.status);
    EXPECT_GE(r.not_before, t0 + seconds{30});
    EXPECT_EQ(r.cause, WaitCause::kCooldown);
  }
}

// ---- defects ------------------------------------------------------------------------------

TEST(RedisStore, AReservationIsNotConfirmedWhenRedisCannotBeAsked) {
  for (const bool fail_closed : {false, true}) {
    SCOPED_TRACE(fail_closed ? "fail-closed" : "fallback");
    RedisServer server({false, true, {}});
    if (!server.start()) GTEST_SKIP() << "redis-server is not available";
    ManualClock clock;
    RedisStoreOptions o = options_for(server);
    if (fail_closed) o.on_down = RedisDownPolicy::kFailClosed;
    RedisStore store(o);
    auto h = store.open("api");
    const StoreGrant g = h->acquire({clock.mono_now(), seconds{1}}, PacingRules{});
    ASSERT_EQ(g.kind, StoreGrant::Kind::kGranted);
    EXPECT_TRUE(h->still_valid(g.epoch, clock.mono_now()));
    server.kill_now();
    // A cooldown may have started in another process: cannot tell is not "valid".
    EXPECT_FALSE(h->still_valid(g.epoch, clock.mono_now()));
  }
}

// Waits are whole microseconds on the script's side: a cooldown recorded at
// an instant inside a microsecond still ends no earlier than stated, and a
// maximum wait is rounded so that a wait is accepted exactly when it ends
// within it.
TEST(RedisStore, MicrosecondsNeverEndAWaitEarlyNorAcceptOneBeyondMaxWait) {
  REQUIRE_REDIS();
  ManualClock clock;
  clock.advance(std::chrono::nanoseconds{900});  // inside a microsecond
  RedisStore store(options_for(*shared_server));
  const PacingRules rules;
  auto h = store.open("us");
  const MonoTime told = clock.mono_now();
  StoreRecord rec;
  rec.now = told;
  rec.cooldown = milliseconds{10};
  h->record(rec, rules);
  // Asked at the start of a later microsecond: the wait still ends at or after told + 10 ms.
  clock.advance(std::chrono::nanoseconds{100});
  const MonoTime asked = clock.mono_now();
  const StoreGrant g = h->acquire({asked, -Duration{1}}, rules);
  EXPECT_GE(asked + g.wait, told + milliseconds{10}) << g.wait.count();
  // max_wait: just enough is accepted, a nanosecond less is not.
  const StoreGrant short_by_one = h->acquire({asked, g.wait - std::chrono::nanoseconds{1}}, rules);
  EXPECT_EQ(short_by_one.kind, StoreGrant::Kind::kTooLate);
  const StoreGrant enough = h->acquire({asked, g.wait + std::chrono::nanoseconds{999}}, rules);
  EXPECT_EQ(enough.kind, StoreGrant::Kind::kProbe);
  EXPECT_EQ(enough.wait, g.wait);
}

}  // namespace
}  // namespace abide::test
