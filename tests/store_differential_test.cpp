// The stores side by side: seeded random traces (acquires with every kind of
// wait bound, records of every kind of answer, abandoned probes, checks of a
// reservation, several keys, times with sub-microsecond parts, clock steps)
// run through MemoryStore, the file store and RedisStore (a real
// redis-server on loopback), which must answer alike: the same kind of grant,
// the same record outcomes and reservation checks, the same waits and wait
// causes. Every store counts in the kernel's whole microseconds, rounded the
// one way pacing/units.h gives, so the waits must be equal to the
// nanosecond: a difference of one microsecond is a difference of rule. A
// mismatch prints the seed and the operation to replay.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "abide/quota_store.h"
#if ABIDE_TEST_WITH_REDIS
#include "abide/redis_store.h"
#include "servers/redis_server.h"
#endif
#if ABIDE_TEST_WITH_SQLITE
#include "abide/sqlite_store.h"
#endif

namespace abide::test {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kKeys = 3;
constexpr int kOpsPerTrace = 120;

// One trace's operations, drawn from a seed.
class Trace {
 public:
  explicit Trace(std::uint64_t seed) : rng_(seed) {}

  int pick(int n) { return static_cast<int>(rng_() % static_cast<std::uint64_t>(n)); }
  bool chance(int percent) { return pick(100) < percent; }
  // A time step: mostly small, with sub-microsecond parts; sometimes a jump.
  Duration step() {
    switch (pick(10)) {
      case 0: return Duration::zero();
      case 1: return Duration{pick(999) + 1};  // under a microsecond
      case 2: return seconds{pick(90)};        // a clock step past most windows
      default: return microseconds{pick(400'000)} + Duration{pick(1000)};
    }
  }
  Duration max_wait() {
    switch (pick(5)) {
      case 0: return Duration{-1};  // only report
      case 1: return Duration::zero();
      case 2: return milliseconds{pick(3000)} + Duration{pick(1000)};
      default: return kMaxDuration;
    }
  }
  StoreRecord answer(MonoTime now) {
    StoreRecord r;
    r.now = now;
    r.age = chance(20) ? microseconds{pick(50'000)} : Duration::zero();
    r.spread_seed = static_cast<double>(pick(1000)) / 1000.0;
    r.limited = chance(30);
    if (chance(35)) r.cooldown = milliseconds{pick(5000)} + (chance(50) ? Duration{pick(1000)} : Duration::zero());
    if (r.cooldown && chance(30)) {
      r.cooldown_cause = WaitCause::kQuota;
      r.cooldown_floor = milliseconds{pick(2000)};
    }
    const int policies = chance(50) ? pick(3) : 0;
    for (int i = 0; i < policies; ++i) {
      PolicyUpdate u;
      u.id = i == 0 ? "default" : "p" + std::to_string(i);
      // The first policy counts requests; the others count tokens.
      const int scale = i == 0 ? 1 : 1000;
      if (i > 0) u.unit = i == 1 ? "tokens" : "input-tokens";
      if (chance(70)) {
        u.limit = (pick(40) + 1) * scale;
        u.window = seconds{pick(10) + 1};
      }
      if (chance(70)) {
        // Tokens: often plenty, so that what a usage gives back shows.
        u.remaining = i > 0 && chance(50) ? 60 * scale : (pick(45) - 2) * scale + (i > 0 ? pick(scale) : 0);
        u.reset = milliseconds{pick(10'000)};
        u.reset_resolution = chance(50) ? seconds{1} : Duration::zero();
      }
      r.policies.push_back(u);
    }
    return r;
  }

 private:
  std::mt19937_64 rng_;
};

std::string describe_grant(const StoreGrant& g) {
  std::ostringstream s;
  s << "kind " << static_cast<int>(g.kind) << " wait " << g.wait.count() << " ns cause " << describe(g.cause);
  if (g.held) s << " held by " << describe(*g.held);
  return s.str();
}

// What a send needs of the quotas other than requests, or what its answer
// used: often tokens, sometimes input tokens too, sometimes nothing.
std::vector<UnitCost> draw_costs(Trace& t) {
  std::vector<UnitCost> c;
  if (t.chance(60)) c.push_back({"tokens", t.pick(6000)});
  if (t.chance(30)) c.push_back({"input-tokens", t.pick(3000)});
  return c;
}

// Runs one trace through every store and compares each answer with the
// first store's (memory).
struct Contender {
  Contender(std::string n, std::shared_ptr<QuotaStore> s) : name(std::move(n)), store(std::move(s)) {}
  std::string name;
  std::shared_ptr<QuotaStore> store;
  std::vector<std::shared_ptr<QuotaStore::Handle>> keys;
  std::vector<std::uint64_t> epochs;
};

void run_trace(std::uint64_t seed, std::vector<Contender>& stores, const std::string& prefix) {
  Trace t(seed);
  PacingRules rules;
  rules.pacing = t.chance(50) ? Pacing::kSmooth : Pacing::kBurst;
  rules.probe_after_cooldown = t.chance(70);
  for (Contender& c : stores) {
    c.keys.clear();
    c.epochs.assign(kKeys, 0);
    for (int k = 0; k < kKeys; ++k) c.keys.push_back(c.store->open(prefix + std::to_string(seed) + "-" + std::to_string(k)));
  }
  MonoTime now{std::chrono::hours{1000} + Duration{t.pick(1'000'000)}};
  for (int op = 0; op < kOpsPerTrace; ++op) {
    now += t.step();
    const int key = t.pick(kKeys);
    const std::string where = "seed " + std::to_string(seed) + " op " + std::to_string(op) + " key " +
                              std::to_string(key) + " at " + std::to_string(now.time_since_epoch().count());
    switch (t.pick(10)) {
      case 0:
      case 1:
      case 2:
      case 3: {
        const Duration max_wait = t.max_wait();
        const std::vector<UnitCost> costs = draw_costs(t);
        const StoreAcquire a{now, max_wait, costs};
        std::vector<StoreGrant> grants;
        for (Contender& c : stores) grants.push_back(c.keys[static_cast<std::size_t>(key)]->acquire(a, rules));
        for (std::size_t i = 1; i < stores.size(); ++i) {
          ASSERT_EQ(grants[i].kind, grants[0].kind) << where << ": " << stores[i].name << " "
                                                    << describe_grant(grants[i]) << ", memory " << describe_grant(grants[0]);
          ASSERT_EQ(grants[i].wait, grants[0].wait)
              << where << ": " << stores[i].name << " " << describe_grant(grants[i]) << ", memory "
              << describe_grant(grants[0]);
          ASSERT_EQ(grants[i].cause, grants[0].cause)
              << where << ": " << stores[i].name << " " << describe_grant(grants[i]) << ", memory "
              << describe_grant(grants[0]);
          ASSERT_EQ(grants[i].held, grants[0].held)
              << where << ": " << stores[i].name << " " << describe_grant(grants[i]) << ", memory "
              << describe_grant(grants[0]);
        }
        for (std::size_t i = 0; i < stores.size(); ++i) stores[i].epochs[static_cast<std::size_t>(key)] = grants[i].epoch;
        break;
      }
      case 4:
      case 5:
      case 6:
      case 7: {
        StoreRecord r = t.answer(now);
        r.reserved = draw_costs(t);
        if (t.chance(50)) r.used = draw_costs(t);
        std::vector<RecordOutcome> outs;
        for (Contender& c : stores) outs.push_back(c.keys[static_cast<std::size_t>(key)]->record(r, rules));
        for (std::size_t i = 1; i < stores.size(); ++i) {
          ASSERT_EQ(outs[i].blocked, outs[0].blocked) << where << ": " << stores[i].name << " record blocked";
          ASSERT_EQ(outs[i].released, outs[0].released) << where << ": " << stores[i].name << " record released";
        }
        break;
      }
      case 8: {
        if (t.chance(50)) {
          for (Contender& c : stores) c.keys[static_cast<std::size_t>(key)]->abandon_probe(now);
        } else {
          StoreSettle x{now, milliseconds{t.pick(3000)}, draw_costs(t), draw_costs(t)};
          for (Contender& c : stores) c.keys[static_cast<std::size_t>(key)]->settle(x, rules);
        }
        break;
      }
      default: {
        std::vector<bool> valid;
        for (Contender& c : stores) {
          valid.push_back(c.keys[static_cast<std::size_t>(key)]->still_valid(c.epochs[static_cast<std::size_t>(key)], now));
        }
        for (std::size_t i = 1; i < stores.size(); ++i) {
          ASSERT_EQ(valid[i], valid[0]) << where << ": " << stores[i].name << " still_valid";
        }
        break;
      }
    }
  }
}

std::string scratch_file() {
  static int n = 0;
  return (std::filesystem::temp_directory_path() /
          ("abide-differential-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".db"))
      .string();
}

void remove_file(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
}

#if ABIDE_TEST_WITH_SQLITE
// A file store of its own per trace (as a process of its own would open it):
// fewer writes than its periodic prune, which drops the rows whose state no
// longer matters, where memory keeps them and answers alike only as far as
// expiry() says (a long-idle key forgets that its next send was to probe).
TEST(StoreDifferential, TheFileStoreAnswersAsMemoryDoes) {
  for (std::uint64_t seed = 1; seed <= 200 && !HasFatalFailure(); ++seed) {
    const std::string path = scratch_file();
    {
      SqliteStoreOptions o;
      o.path = path;
      o.boot_id = "differential";
      auto file = SqliteStore::open_file(o);
      ASSERT_TRUE(file.has_value()) << file.error().message;
      std::vector<Contender> stores{{"memory", std::make_shared<MemoryStore>()}, {"file", *file}};
      run_trace(seed, stores, "f");
    }
    remove_file(path);
  }
}
#endif

// Costs, step by step: sends that reserve tokens, answers that settle them
// by their usage, a tokens window and a requests window side by side. Each
// store must grant alike at every step.
void run_costs(std::vector<Contender>& stores, const std::string& name) {
  PacingRules rules;
  rules.safety_margin = 0.0;
  const MonoTime t0{std::chrono::hours{1000}};
  for (Contender& c : stores) c.keys = {c.store->open(name)};
  const auto answer = [&](MonoTime now, std::int64_t tokens_left, std::vector<UnitCost> reserved,
                          std::vector<UnitCost> used) {
    StoreRecord r;
    r.now = now;
    const Duration reset = seconds{60} - (now - t0);
    const PolicyUpdate req{"requests", 100, std::nullopt, 90, reset, Duration::zero(), ""};
    const PolicyUpdate tok{"tokens", 40'000, std::nullopt, tokens_left, reset, Duration::zero(), "tokens"};
    r.policies = {req, tok};
    r.reserved = std::move(reserved);
    r.used = std::move(used);
    for (Contender& c : stores) (void)c.keys[0]->record(r, rules);
  };
  const auto ask = [&](MonoTime now, std::int64_t tokens, const std::string& where) {
    const std::vector<UnitCost> costs{{"tokens", tokens}};
    std::vector<StoreGrant> g;
    for (Contender& c : stores) g.push_back(c.keys[0]->acquire({now, kMaxDuration, costs}, rules));
    for (std::size_t i = 1; i < stores.size(); ++i) {
      ASSERT_EQ(g[i].kind, g[0].kind) << where << ": " << stores[i].name;
      ASSERT_EQ(g[i].wait, g[0].wait) << where << ": " << stores[i].name << " " << describe_grant(g[i]) << ", memory "
                                      << describe_grant(g[0]);
    }
  };
  ask(t0, 5'000, "blind");
  ask(t0, 7'000, "blind");
  answer(t0 + milliseconds{300}, 35'000, {{"tokens", 5'000}}, {});
  ask(t0 + milliseconds{400}, 4'000, "after the first answer");
  answer(t0 + milliseconds{900}, 30'000, {{"tokens", 7'000}}, {{"tokens", 1'200}});
  for (int i = 0; i < 6; ++i) ask(t0 + seconds{1 + i}, 3'000 + 500 * i, "paced " + std::to_string(i));
  answer(t0 + seconds{8}, 20'000, {{"tokens", 4'000}}, {{"tokens", 9'000}});
  for (int i = 0; i < 6; ++i) ask(t0 + seconds{9 + i}, 2'000 * (i + 1), "after an overrun " + std::to_string(i));
  // Usages that come at the end of the body: settled after the head.
  answer(t0 + seconds{16}, 15'000, {{"tokens", 3'000}}, {});
  const StoreSettle late{t0 + seconds{18}, seconds{2}, {{"tokens", 3'000}}, {{"tokens", 400}}};
  for (Contender& c : stores) c.keys[0]->settle(late, rules);
  for (int i = 0; i < 4; ++i) ask(t0 + seconds{19 + i}, 2'500, "after a settle " + std::to_string(i));
}

#if ABIDE_TEST_WITH_SQLITE
TEST(StoreDifferential, TheFileStoreSettlesCostsAsMemoryDoes) {
  const std::string path = scratch_file();
  {
    SqliteStoreOptions o;
    o.path = path;
    o.boot_id = "differential";
    auto file = SqliteStore::open_file(o);
    ASSERT_TRUE(file.has_value()) << file.error().message;
    std::vector<Contender> stores{{"memory", std::make_shared<MemoryStore>()}, {"file", *file}};
    run_costs(stores, "costs");
  }
  remove_file(path);
}
#endif

#if ABIDE_TEST_WITH_REDIS
// A RedisStore on `server` that counts on the caller's clock, as memory does.
std::shared_ptr<RedisStore> redis_on(const RedisServer& server, std::string prefix) {
  RedisStoreOptions o;
  o.endpoint.unix_socket = server.socket_path();
  o.endpoint.prefix = std::move(prefix);
  o.time_base = RedisTimeBase::kClient;
  return std::make_shared<RedisStore>(o);
}

TEST(StoreDifferential, RedisSettlesCostsAsMemoryDoes) {
  RedisServer server;
  if (!server.start()) GTEST_SKIP() << "redis-server is not available";
  auto redis = redis_on(server, "differential-costs:");
  std::vector<Contender> stores{{"memory", std::make_shared<MemoryStore>()}, {"redis", redis}};
  run_costs(stores, "costs");
  EXPECT_EQ(redis->stats().fallbacks, 0u);
}

TEST(StoreDifferential, RedisAnswersAsMemoryDoes) {
  RedisServer server;
  if (!server.start()) GTEST_SKIP() << "redis-server is not available";
  auto redis = redis_on(server, "differential:");
  std::vector<Contender> stores{{"memory", std::make_shared<MemoryStore>()}, {"redis", redis}};
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    run_trace(seed, stores, "r");
    if (HasFatalFailure()) break;
  }
  EXPECT_EQ(redis->stats().fallbacks, 0u);
}
#endif

}  // namespace
}  // namespace abide::test
