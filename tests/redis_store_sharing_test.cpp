// RedisStore against a real redis-server: the learned policy through Redis,
// state shared between pacers, threads and processes, round trips, expiry and
// the prefix, and the multi-process proof.
#include "support/fixed_window_sim.h"
#include "support/redis_store_fixture.h"

namespace abide::test {
namespace {


// ---- behaviour against a server ----------------------------------------------------------

// ---- the learned policy through Redis ------------------------------------------------

SimOptions retry_after_only(int requests) {
  SimOptions o;
  o.requests = requests;
  o.limit = 20;
  o.announce_policy = false;
  o.announce_remaining = false;
  o.latency = milliseconds{5};
  return o;
}

// Two processes (two stores) on one Redis key: the first learns the window
// from its limited answers; the second, later, spends its windows without one.
TEST(RedisStore, AFleetLearnsOnce) {
  REQUIRE_REDIS();
  const RedisStoreOptions o = options_for(*shared_server);
  RedisStore first(o);
  RedisStore second(o);
  const MonoTime t0{std::chrono::hours{1000}};
  auto k1 = first.open("api");
  const SimResult learning = simulate(*k1, retry_after_only(120), t0);
  EXPECT_EQ(learning.accepted, 120);
  EXPECT_GT(learning.limited, 0);
  // Twenty seconds on (in step with the server's 2 s windows), the other process.
  auto k2 = second.open("api");
  const SimResult learned = simulate(*k2, retry_after_only(120), t0 + seconds{20});
  EXPECT_EQ(learned.accepted, 120);
  EXPECT_EQ(learned.premature, 0);
  // Its first window keeps the learned limit: at most the window's probe is
  // limited (its learned windows, rolled on from the first process's, may sit
  // a little early), where a key nobody learned loses every request in flight.
  ASSERT_FALSE(learned.limited_by_window.empty());
  EXPECT_LE(learned.limited_by_window[0], 1);
  auto fresh = second.open("other");
  const SimResult unlearned = simulate(*fresh, retry_after_only(120), t0 + seconds{20});
  ASSERT_FALSE(unlearned.limited_by_window.empty());
  EXPECT_GT(unlearned.limited_by_window[0], learned.limited_by_window[0]);
  EXPECT_LT(learned.limited, unlearned.limited);
  EXPECT_EQ(first.stats().fallbacks + second.stats().fallbacks, 0u);
}

// The learned state is a fixed handful of numbers: a long run leaves it no larger.
TEST(RedisStore, TheLearnedStateStaysBounded) {
  REQUIRE_REDIS();
  const RedisStoreOptions o = options_for(*shared_server);
  RedisStore store(o);
  auto k = store.open("api");
  const std::string key = o.endpoint.prefix + "api";
  const auto fields = [&] {
    return shared_server->command({"EVAL", "return #cmsgpack.unpack(redis.call('GET', KEYS[1])).L", "1", key}).integer;
  };
  const MonoTime t0{std::chrono::hours{1000}};
  (void)simulate(*k, retry_after_only(120), t0);
  const long long after_short = shared_server->command({"STRLEN", key}).integer;
  const long long learned_fields = fields();
  SimOptions bare = retry_after_only(1200);
  bare.retry_after = false;
  (void)simulate(*k, bare, t0 + std::chrono::minutes{2});
  const long long after_long = shared_server->command({"STRLEN", key}).integer;
  EXPECT_EQ(fields(), learned_fields);
  EXPECT_GT(learned_fields, 0);
  EXPECT_LE(after_short, 400);
  EXPECT_LE(after_long, 400);
  EXPECT_LE(after_long, after_short + 16);  // number encodings may grow a little, nothing else
}

// Learning costs a round trip only where an answer teaches: each acquire is
// one script call, each record one, and a record whose answer teaches the
// learner (pacing/learner.h: teaches()) one more, to publish what it taught.
TEST(RedisStore, LearningAddsARoundTripOnlyToAnswersThatTeach) {
  REQUIRE_REDIS();
  RedisStore store(options_for(*shared_server));
  auto k = store.open("api");
  const PacingRules rules;
  MonoTime now{std::chrono::hours{1000}};
  (void)k->acquire({now, kMaxDuration}, rules);  // loads the script
  int published = 0;
  for (int i = 0; i < 30; ++i) {
    auto before = store.stats().round_trips;
    (void)k->acquire({now, kMaxDuration}, rules);
    EXPECT_EQ(store.stats().round_trips - before, 1u) << i;
    StoreRecord r;
    r.now = now;
    r.limited = i % 10 == 9;
    if (i % 20 == 9) r.cooldown = seconds{1};
    before = store.stats().round_trips;
    (void)k->record(r, rules);
    const auto trips = store.stats().round_trips - before;
    // Before the first limited answer nothing teaches: a server that never
    // limits costs one call per record. Later, the limited answers teach, and
    // the accepted ones that end a bare 429's search or confirm a length.
    EXPECT_LE(trips, i < 9 ? 1u : 2u) << i;
    published += trips == 2u ? 1 : 0;
    now += milliseconds{100};
  }
  EXPECT_GT(published, 0);
  EXPECT_TRUE(k->learned(now).has_value());
  EXPECT_EQ(store.stats().fallbacks, 0u);
}

TEST(RedisStore, AfterAScriptFlushTheScriptIsLoadedAgainAndTheCallRetriedOnce) {
  REQUIRE_REDIS();
  ManualClock clock;
  RedisStoreOptions o = options_for(*shared_server);
  Events events;
  o.on_event = events.hook();
  auto store = std::make_shared<RedisStore>(o);
  Pacer p(PacerConfig{}, store, clock.monotonic(), clock.wall());
  const auto k = p.key("flushed");
  ASSERT_TRUE(p.acquire(k, clock.mono_now()).ok());
  const MonoTime t0 = clock.mono_now();
  p.record(k, retry_after(clock, seconds{30}));

  const std::string digest = shared_server->command({"SCRIPT", "LOAD", std::string(redis_detail::pacer_script())}).text;
  ASSERT_EQ(shared_server->command({"SCRIPT", "FLUSH"}).type, '+');
  ASSERT_EQ(shared_server->command({"SCRIPT", "EXISTS", digest}).elements, std::vector<std::string>{"0"});

  const auto flushed = store->stats().round_trips;
  const AcquireResult r = p.acquire(k, clock.mono_now());
  EXPECT_EQ(store->stats().round_trips - flushed, 3u);  // EVALSHA (NOSCRIPT), SCRIPT LOAD, EVALSHA
  // Redis answered, from the state it kept across the flush.
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(r.not_before, t0 + seconds{30});
  EXPECT_EQ(store->stats().fallbacks, 0u);
  EXPECT_TRUE(store->up());
  EXPECT_EQ(events.count(RedisEvent::kScriptError), 0) << events.all();
  EXPECT_EQ(shared_server->command({"SCRIPT", "EXISTS", digest}).elements, std::vector<std::string>{"1"});

  const auto reloaded = store->stats().round_trips;
  (void)p.acquire(k, clock.mono_now());
  EXPECT_EQ(store->stats().round_trips - reloaded, 1u);
}

TEST(RedisStore, StateIsSharedUnderThePrefixAndExpires) {
  REQUIRE_REDIS();
  ManualClock clock;
  RedisStoreOptions o = options_for(*shared_server);
  const std::string prefix = o.endpoint.prefix;
  Pacer a(PacerConfig{}, std::make_shared<RedisStore>(o), clock.monotonic(), clock.wall());
  Pacer b(PacerConfig{}, std::make_shared<RedisStore>(o), clock.monotonic(), clock.wall());
  const MonoTime t0 = clock.mono_now();
  a.record("api", retry_after(clock, seconds{2}));
  const AcquireResult r = b.acquire("api", clock.mono_now());
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(r.not_before, t0 + seconds{2});
  const RespReply keys = shared_server->command({"KEYS", prefix + "*"});
  ASSERT_EQ(keys.elements.size(), 1u);
  EXPECT_EQ(keys.elements[0], prefix + "api");
  const RespReply ttl = shared_server->command({"PTTL", prefix + "api"});
  EXPECT_GT(ttl.integer, 2000);  // the cooldown, plus a second of grace
  EXPECT_LE(ttl.integer, 3000);
}

TEST(RedisStore, ACooldownInOneProcessReachesAWaiterInAnother) {
  REQUIRE_REDIS();
  ManualClock clock;
  const RedisStoreOptions o = options_for(*shared_server);
  Pacer a(PacerConfig{}, std::make_shared<RedisStore>(o), clock.monotonic(), clock.wall());
  Pacer b(PacerConfig{}, std::make_shared<RedisStore>(o), clock.monotonic(), clock.wall());
  a.record("api", with_policy(response(clock), 1, seconds{1}));
  ASSERT_TRUE(b.acquire("api").ok());
  auto waiter = std::async(std::launch::async, [&] { return b.acquire("api"); });  // reserved 1.05 s ahead
  clock.wait_for_sleepers(1);
  const MonoTime t0 = clock.mono_now();
  a.record("api", retry_after(clock, seconds{10}));
  std::atomic<int> alive{1};
  auto driver = std::async(std::launch::async, [&] { clock.drive(alive, milliseconds{50}); });
  const AcquireResult r = waiter.get();
  alive = 0;
  driver.get();
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.probe);
  EXPECT_GE(r.not_before, t0 + seconds{10});
}

TEST(RedisStore, AProbeAnsweredInOneProcessReleasesWaitersInAnother) {
  REQUIRE_REDIS();
  ManualClock clock;
  const RedisStoreOptions o = options_for(*shared_server);
  Pacer a(PacerConfig{}, std::make_shared<RedisStore>(o), clock.monotonic(), clock.wall());
  Pacer b(PacerConfig{}, std::make_shared<RedisStore>(o), clock.monotonic(), clock.wall());
  a.record("api", retry_after(clock, seconds{1}));
  clock.advance(seconds{1});
  const AcquireResult probe = a.acquire("api");
  ASSERT_TRUE(probe.probe);
  std::vector<std::future<AcquireResult>> waiters;
  for (std::size_t i = 0; i < 3; ++i) {
    waiters.push_back(std::async(std::launch::async, [&] { return b.acquire("api"); }));
    clock.wait_for_sleepers(i + 1);
  }
  clock.advance(milliseconds{500});
  clock.wait_for_sleepers(3);
  for (auto& w : waiters) EXPECT_EQ(w.wait_for(seconds{0}), std::future_status::timeout);
  const MonoTime answered = clock.mono_now();
  a.record("api", response(clock));
  std::atomic<int> alive{3};
  auto driver = std::async(std::launch::async, [&] { clock.drive(alive, milliseconds{5}); });
  std::vector<AcquireResult> results;
  for (auto& w : waiters) {
    results.push_back(w.get());
    --alive;
  }
  driver.get();
  for (const auto& r : results) {
    EXPECT_TRUE(r.ok());
    EXPECT_GE(r.not_before, answered);
    EXPECT_LT(r.not_before, answered + milliseconds{200});  // polled every 50 ms, then spread
  }
}

TEST(RedisStore, SixteenThreadsOnOneKeyNeverExceedTheQuota) {
  REQUIRE_REDIS();
  ManualClock clock;
  RedisStoreOptions o = options_for(*shared_server);
  o.connections = 4;
  Pacer p(PacerConfig{}, std::make_shared<RedisStore>(o), clock.monotonic(), clock.wall());
  const auto k = p.key("hot");
  p.record(k, with_policy(response(clock), 20, seconds{1}));
  constexpr int kThreads = 16;
  constexpr int kEach = 5;
  std::atomic<int> alive{kThreads};
  std::mutex mu;
  std::vector<MonoTime> sends;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        if (!p.acquire(k).ok()) break;
        std::lock_guard lock(mu);
        sends.push_back(clock.mono_now());
      }
      --alive;
    });
  }
  clock.drive(alive, milliseconds{5});
  for (auto& t : threads) t.join();
  ASSERT_EQ(sends.size(), std::size_t{kThreads * kEach});
  std::sort(sends.begin(), sends.end());
  for (std::size_t i = 20; i < sends.size(); ++i) {
    EXPECT_GE(sends[i] - sends[i - 20], seconds{1}) << i;
  }
}

// ---- the multi-process proof ---------------------------------------------------------------

// Starts `n` processes that each pace one key ("fleet", 10 requests per second,
// learnt from a response) for `run_for`, and returns every send time.
std::vector<std::int64_t> run_fleet(int n, const RedisServer* redis, const std::string& prefix, Duration run_for) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const MonoTime start = system_monotonic_clock().now() + milliseconds{300};
  std::vector<pid_t> children;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      std::shared_ptr<QuotaStore> store;
      if (redis != nullptr) {
        RedisStoreOptions o;
        o.endpoint.unix_socket = redis->socket_path();
        o.endpoint.prefix = prefix;
        o.time_base = RedisTimeBase::kServer;
        store = std::make_shared<RedisStore>(o);
      }
      PacerConfig c;
      c.rules.safety_margin = 0.2;  // room for a process that wakes late on a busy machine
      Pacer p(c, store);
      const auto k = p.key("fleet");
      Signals s;
      s.received_mono = system_monotonic_clock().now();
      QuotaObservation q;
      q.limit = 10;
      q.window = seconds{1};
      s.quota.push_back(q);
      p.record(k, s);
      system_monotonic_clock().sleep_until(start, {});
      const MonoTime end = start + run_for;
      for (;;) {
        if (!p.acquire(k, end).ok()) break;
        const std::int64_t t = system_monotonic_clock().now().time_since_epoch().count();
        if (write(fds[1], &t, sizeof t) != sizeof t) break;
      }
      close(fds[1]);
      _exit(0);
    }
    children.push_back(pid);
  }
  close(fds[1]);
  std::vector<std::int64_t> sends;
  std::int64_t t = 0;
  while (read(fds[0], &t, sizeof t) == static_cast<ssize_t>(sizeof t)) sends.push_back(t);
  close(fds[0]);
  for (const pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
  }
  std::sort(sends.begin(), sends.end());
  return sends;
}

// The most sends in any interval [t, t + 1 s).
std::size_t max_per_second(const std::vector<std::int64_t>& sends) {
  std::size_t best = 0, lo = 0;
  for (std::size_t hi = 0; hi < sends.size(); ++hi) {
    while (sends[hi] - sends[lo] >= 1'000'000'000) ++lo;
    best = std::max(best, hi - lo + 1);
  }
  return best;
}

TEST(RedisStore, FourProcessesThroughOneRedisStayWithinTheQuotaWhereSeparateStoresOvershoot) {
  REQUIRE_REDIS();
  const auto shared = run_fleet(4, shared_server, unique_prefix(), milliseconds{1800});
  const auto separate = run_fleet(4, nullptr, {}, milliseconds{1800});
  const std::size_t shared_max = max_per_second(shared);
  const std::size_t separate_max = max_per_second(separate);
  RecordProperty("shared_sends", static_cast<int>(shared.size()));
  RecordProperty("shared_max_per_second", static_cast<int>(shared_max));
  RecordProperty("separate_max_per_second", static_cast<int>(separate_max));
  std::printf("quota 10/s: 4 processes through one redis: %zu sends, at most %zu in any second; "
              "with separate memory stores: %zu sends, at most %zu in any second\n",
              shared.size(), shared_max, separate.size(), separate_max);
  EXPECT_GE(shared.size(), 10u);
  EXPECT_LE(shared_max, 10u);
  EXPECT_GT(separate_max, 20u);
}

}  // namespace
}  // namespace abide::test
