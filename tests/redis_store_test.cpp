// RedisStore against a real redis-server (started here on a free loopback port
// and a unix socket in a temporary folder, persistence off, stopped afterwards;
// the tests look inside it through hiredis): the shared state-machine suite,
// the script and its constants, sharing between pacers, round trips, expiry,
// prefix, AUTH, outages, and the multi-process proof.
#include "abide/redis_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "abide/pacer.h"
#include "abide/testing/manual_clock.h"
#include "redis/pacer_script.h"
#include "support/quota_store_conformance.h"
#include "support/redis_store_server.h"

namespace abide::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// One server for the tests that do not stop it.
RedisServer* shared_server = nullptr;

class SharedRedis : public ::testing::Environment {
 public:
  void SetUp() override {
    shared_server = new RedisServer();
    if (!shared_server->start()) {
      delete shared_server;
      shared_server = nullptr;
    }
  }
  void TearDown() override {
    delete shared_server;
    shared_server = nullptr;
  }
};
[[maybe_unused]] ::testing::Environment* const kEnv = ::testing::AddGlobalTestEnvironment(new SharedRedis);

#define REQUIRE_REDIS()                                                            \
  do {                                                                             \
    if (shared_server == nullptr) GTEST_SKIP() << "redis-server is not available"; \
  } while (false)

std::atomic<int> prefix_counter{0};

std::string unique_prefix() { return "t" + std::to_string(getpid()) + "-" + std::to_string(prefix_counter++) + ":"; }

RedisStoreOptions options_for(const RedisServer& server, RedisTimeBase base = RedisTimeBase::kClient) {
  RedisStoreOptions o;
  o.endpoint.unix_socket = server.socket_path();
  o.endpoint.prefix = unique_prefix();
  o.time_base = base;
  return o;
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Redis, QuotaStoreConformance,
                         ::testing::Values(StoreParam{"Redis",
                                                      []() -> std::shared_ptr<QuotaStore> {
                                                        if (shared_server == nullptr) return nullptr;
                                                        return std::make_shared<RedisStore>(
                                                            options_for(*shared_server));
                                                      }}),
                         store_param_name);

namespace {

Signals response(const ManualClock& clock, int status = 200) {
  Signals s;
  s.status = status;
  s.received_wall = clock.wall_now();
  s.received_mono = clock.mono_now();
  return s;
}

Signals retry_after(const ManualClock& clock, Duration wait) {
  Signals s = response(clock, 429);
  s.retry_after = RetryHint{RetryHint::Kind::kDelay, wait, std::nullopt, "retry-after"};
  return s;
}

// A Retry-After received now on the system clock.
Signals system_retry_after(Duration wait) {
  Signals s;
  s.status = 429;
  s.received_wall = system_wall_clock().now();
  s.received_mono = system_monotonic_clock().now();
  s.retry_after = RetryHint{RetryHint::Kind::kDelay, wait, std::nullopt, "retry-after"};
  return s;
}

Signals with_policy(Signals s, std::int64_t limit, Duration window) {
  QuotaObservation o;
  o.limit = limit;
  o.window = window;
  s.quota.push_back(o);
  return s;
}

// ---- locations ------------------------------------------------------------------------

TEST(RedisUrl, Forms) {
  auto e = parse_redis_url("redis://127.0.0.1:6380");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, 6380);
  EXPECT_EQ(e->prefix, "abide:");
  EXPECT_TRUE(e->password.empty());

  e = parse_redis_url("redis://:s3cret@cache.internal/myapp:");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "cache.internal");
  EXPECT_EQ(e->port, 6379);
  EXPECT_EQ(e->user, "");
  EXPECT_EQ(e->password, "s3cret");
  EXPECT_EQ(e->prefix, "myapp:");

  e = parse_redis_url("REDIS://alice:p%40ss%3Aword@[::1]:7000/x%2Fy");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->user, "alice");
  EXPECT_EQ(e->password, "p@ss:word");
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->port, 7000);
  EXPECT_EQ(e->prefix, "x/y");
  EXPECT_EQ(e->describe(), "redis://[::1]:7000");

  e = parse_redis_url("unix:///tmp/r.sock?prefix=p%3A");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->unix_socket, "/tmp/r.sock");
  EXPECT_EQ(e->prefix, "p:");
  EXPECT_EQ(e->describe(), "unix:/tmp/r.sock");

  e = parse_redis_url("unix://bob:pw@/tmp/r.sock");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->user, "bob");
  EXPECT_EQ(e->password, "pw");
  EXPECT_EQ(e->unix_socket, "/tmp/r.sock");

  e = parse_redis_url("unix:/tmp/a.sock");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->unix_socket, "/tmp/a.sock");
  e = parse_redis_url("/var/run/redis.sock");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->unix_socket, "/var/run/redis.sock");

  e = parse_redis_url("redis://bob@h");  // a user without a password
  ASSERT_TRUE(e);
  EXPECT_EQ(e->user, "bob");
  EXPECT_TRUE(e->password.empty());
}

TEST(RedisUrl, ASocketInsideARedisUrl) {
  // redis://unix:/path is the socket, with or without credentials; its
  // prefix goes in ?prefix= (a /PREFIX would be part of the path).
  auto e = parse_redis_url("redis://unix:/tmp/r.sock");
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->unix_socket, "/tmp/r.sock");
  EXPECT_EQ(e->prefix, "abide:");
  EXPECT_TRUE(e->password.empty());
  EXPECT_EQ(e->describe(), "unix:/tmp/r.sock");

  e = parse_redis_url("redis://:pw%40rd@unix:/tmp/r.sock?prefix=app%3A");
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->unix_socket, "/tmp/r.sock");
  EXPECT_EQ(e->user, "");
  EXPECT_EQ(e->password, "pw@rd");
  EXPECT_EQ(e->prefix, "app:");

  e = parse_redis_url("REDIS://bob:pw@UNIX:/var/run/redis/redis.sock");
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->user, "bob");
  EXPECT_EQ(e->unix_socket, "/var/run/redis/redis.sock");

  e = parse_redis_url("redis://unix:/tmp/r.sock/app");  // all of it is the path
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->unix_socket, "/tmp/r.sock/app");
  EXPECT_EQ(e->prefix, "abide:");

  // A host named unix with a port, or without a port and a path, stays a host.
  e = parse_redis_url("redis://unix:6380/app");
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->host, "unix");
  EXPECT_EQ(e->port, 6380);
  EXPECT_TRUE(e->unix_socket.empty());
  e = parse_redis_url("redis://unix/app");
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->host, "unix");
  EXPECT_EQ(e->prefix, "app");

  for (const auto& [url, message] : std::vector<std::pair<std::string, std::string>>{
           {"redis://unix:/", "missing unix socket path"},
           {"redis://:secretpw@unix:/" + std::string(200, 's'), "unix socket path longer than 107 bytes"},
           {"redis://:secretpw@unix:/tmp/r.sock?db=1", "unknown parameter \"db\""}}) {
    const auto bad = parse_redis_url(url);
    ASSERT_FALSE(bad) << url;
    EXPECT_NE(bad.error().find(message), std::string::npos) << bad.error();
    EXPECT_EQ(bad.error().find("secretpw"), std::string::npos) << bad.error();
  }
}

TEST(RedisUrl, Rejects) {
  for (const char* bad : {"", "http://x", "rediss://h", "redis://", "redis://:pw@", "redis://h:0", "redis://h:99999",
                          "redis://h:12ab", "redis://h/%zz", "redis://h/%4", "unix://host/tmp/x", "unix://",
                          "redis://h?foo=1", "redis://h\r\n:1", "redis://[::1", "redis://a b"}) {
    EXPECT_FALSE(parse_redis_url(bad)) << bad;
  }
}

TEST(RedisUrl, EachRejectionSaysWhatIsWrong) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty Redis location"},
      {"http://x", "expected redis://HOST[:PORT][/PREFIX], unix:///PATH or /PATH"},
      {"rediss://h", "TLS) is not supported"},
      {"redis://", "missing Redis host"},
      {"redis://:pw@", "missing Redis host"},
      {"redis://h:0", "bad Redis port \"0\": expected a number from 1 to 65535"},
      {"redis://h:99999", "bad Redis port \"99999\""},
      {"redis://h:12ab", "bad Redis port \"12ab\""},
      {"redis://::1", "an IPv6 Redis host goes in brackets"},
      {"redis://[::1", "unclosed '[' in the Redis host"},
      {"redis://[::1]x", "unexpected \"x\" after the Redis host [::1]"},
      {"redis://h/%zz", "bad percent-encoding in the Redis key prefix"},
      {"redis://h/%4", "bad percent-encoding in the Redis key prefix"},
      {"redis://u:p%2@h", "bad percent-encoding in the Redis user or password"},
      {"redis://h?foo=1", "unknown parameter \"foo\" in the Redis location (there is only prefix=)"},
      {"redis://h?prefix", "?prefix needs a value"},
      {"redis://h?prefix=%g0", "bad percent-encoding in the Redis key prefix"},
      {"redis://h\r\n:1", "control character at byte 9 of the Redis location"},
      {"redis://a b", "space at byte 9 of the Redis location"},
      {"unix://", "missing unix socket path"},
      {"unix:relative.sock", "the unix socket path must be absolute: \"relative.sock\""},
      {"unix://host/tmp/x", "a unix socket location names no host, found \"host\""},
  };
  for (const auto& [url, message] : cases) {
    const auto e = parse_redis_url(url);
    ASSERT_FALSE(e) << url;
    EXPECT_NE(e.error().find(message), std::string::npos) << url << " gave: " << e.error();
  }
  const std::string long_path = "/" + std::string(200, 's');
  for (const std::string& url : {long_path, "unix://" + long_path}) {
    const auto e = parse_redis_url(url);
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().find("unix socket path longer than 107 bytes"), std::string::npos) << e.error();
    EXPECT_LT(e.error().size(), 200u);  // the path is quoted shortened
  }
  const auto e = parse_redis_url("redis://" + std::string(5000, 'h'));
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error(), "Redis location longer than 4096 bytes");
  // An empty port is the default one, as in any URL.
  const auto d = parse_redis_url("redis://h:");
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->port, 6379);
}

TEST(RedisUrl, MessagesNeverRepeatCredentials) {
  for (const char* bad : {"redis://u:topsecret@h:badport", "redis://u:topsecret@h?x=1", "redis://u:top%zzsecret@h"}) {
    const auto e = parse_redis_url(bad);
    ASSERT_FALSE(e) << bad;
    EXPECT_EQ(e.error().find("topsecret"), std::string::npos);
    EXPECT_EQ(e.error().find("secret"), std::string::npos);
  }
  const auto e = parse_redis_url("redis://alice:topsecret@h:1/p");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->describe().find("topsecret"), std::string::npos);
  EXPECT_EQ(e->describe().find("alice"), std::string::npos);
}

// ---- behaviour against a server ----------------------------------------------------------

struct Events {
  std::mutex mu;
  std::vector<std::pair<RedisEvent, std::string>> seen;
  std::function<void(RedisEvent, std::string_view)> hook() {
    return [this](RedisEvent e, std::string_view m) {
      std::lock_guard lock(mu);
      seen.emplace_back(e, std::string(m));
    };
  }
  int count(RedisEvent e) {
    std::lock_guard lock(mu);
    return static_cast<int>(std::count_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == e; }));
  }
  std::string all() {
    std::lock_guard lock(mu);
    std::string s;
    for (const auto& [e, m] : seen) s += std::string(to_string(e)) + ": " + m + "\n";
    return s;
  }
};

// ---- the script -------------------------------------------------------------------------

std::string read_source(const std::string& relative) {
  std::ifstream in(std::string(ABIDE_SOURCE_DIR) + "/" + relative, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(RedisScript, TheScriptTakesEveryConstantFromTheCppList) {
  const std::string source = read_source("src/redis/pacer.lua");
  ASSERT_FALSE(source.empty());
  const std::string_view embedded = redis_detail::pacer_script();
  std::set<std::string> names;
  for (const auto& c : redis_detail::kScriptConstants) {
    const std::string name(c.name);
    EXPECT_TRUE(names.insert(name).second) << "twice in kScriptConstants: " << name;
    // The template names the constant; the embedded text carries the C++ value.
    EXPECT_NE(source.find("local " + name + " = @" + name + "@\n"), std::string::npos) << name;
    EXPECT_NE(embedded.find("local " + name + " = " + std::to_string(c.value) + "\n"), std::string::npos) << name;
  }
  const std::regex placeholder("@([A-Za-z_][A-Za-z0-9_]*)@");
  for (auto it = std::sregex_iterator(source.begin(), source.end(), placeholder); it != std::sregex_iterator(); ++it) {
    EXPECT_EQ(names.count((*it)[1].str()), 1u) << "not in kScriptConstants: " << (*it)[0].str();
  }
  EXPECT_EQ(embedded.find('@'), std::string_view::npos);
  // Apart from the filled-in values, the embedded text is pacer.lua itself.
  EXPECT_EQ(std::count(embedded.begin(), embedded.end(), '\n'), std::count(source.begin(), source.end(), '\n'));
}

// Runs the script by hand, as the store does, with times from the caller.
class ScriptByHand : public ::testing::Test {
 protected:
  void SetUp() override {
    if (shared_server == nullptr) GTEST_SKIP() << "redis-server is not available";
    const RespReply loaded = shared_server->command({"SCRIPT", "LOAD", std::string(redis_detail::pacer_script())});
    ASSERT_EQ(loaded.type, '$') << loaded.text;
    digest = loaded.text;
    key = unique_prefix() + "by-hand";
  }

  RespReply call(std::int64_t op, const std::vector<std::string>& args) {
    std::vector<std::string> argv{"EVALSHA", digest, "1", key, std::to_string(op)};
    argv.insert(argv.end(), args.begin(), args.end());
    return shared_server->command(argv);
  }
  // ARGV: now, max_wait, smooth, margin, probe timeout, spread, costs (none).
  long long acquire(std::int64_t max_wait) {
    const RespReply r = call(redis_detail::kOpAcquire,
                             {std::to_string(now), std::to_string(max_wait), "1", "0", "10000000", "0", "0"});
    EXPECT_EQ(r.type, '*') << r.text;
    return r.elements.empty() ? -1 : std::stoll(r.elements[0]);
  }
  RespReply record(const std::string& cooldown, const std::vector<std::vector<std::string>>& policies = {},
                   bool limited = false) {
    std::vector<std::string> args{std::to_string(now), "0", cooldown, "0.5", "1", "1000000", limited ? "1" : "0",
                                  "",                  "10000000", std::to_string(policies.size())};
    for (const auto& p : policies) args.insert(args.end(), p.begin(), p.end());
    args.insert(args.end(), {"0", "0"});  // nothing reserved, nothing used
    return call(redis_detail::kOpRecord, args);
  }
  long long policies_kept() {
    return shared_server->command({"EVAL", "return #cmsgpack.unpack(redis.call('GET', KEYS[1])).pol", "1", key})
        .integer;
  }

  std::string digest;
  std::string key;
  std::int64_t now = 5'000'000'000;
};

TEST_F(ScriptByHand, AnswersWithTheGrantKindsOfTheCppList) {
  EXPECT_EQ(acquire(0), redis_detail::kGrantGranted);
  ASSERT_EQ(record("10000000").type, '*');  // a 10 s cooldown, one probe after it
  EXPECT_EQ(acquire(0), redis_detail::kGrantTooLate);
  EXPECT_EQ(acquire(20'000'000), redis_detail::kGrantProbe);
  EXPECT_EQ(acquire(20'000'000), redis_detail::kGrantAwaitProbe);
  const RespReply check = call(redis_detail::kOpCheck, {"1"});  // one cooldown: epoch 1
  ASSERT_EQ(check.elements.size(), 1u);
  EXPECT_EQ(check.elements[0], "1");
  ASSERT_EQ(call(redis_detail::kOpAbandon, {std::to_string(now)}).type, '*');
  EXPECT_EQ(acquire(20'000'000), redis_detail::kGrantProbe);  // abandoned: the next one probes
}

TEST_F(ScriptByHand, KeepsTheLimitsOfTheCppList) {
  std::vector<std::vector<std::string>> many;
  for (std::size_t i = 0; i < 2 * redis_detail::kMaxPolicies; ++i) {
    many.push_back({"p" + std::to_string(i), "10", "1000000", "", "", "0", ""});
  }
  ASSERT_EQ(record("", many).type, '*');
  EXPECT_EQ(policies_kept(), static_cast<long long>(redis_detail::kMaxPolicies));
  EXPECT_EQ(redis_detail::kMaxPolicies, QuotaStore::kMaxPolicies);

  key += "-ids";
  const std::string id(redis_detail::kMaxIdBytes, 'i');
  ASSERT_EQ(record("", {{id + "tail", "10", "1000000", "", "", "0", ""}}).type, '*');
  ASSERT_EQ(record("", {{id, "10", "1000000", "", "", "0", ""}}).type, '*');
  EXPECT_EQ(policies_kept(), 1);  // ids are cut to MAX_ID_BYTES, as the store cuts them
}

TEST_F(ScriptByHand, RefusesArgumentsThatDoNotFitTheLayout) {
  // The layout of the C++ list fits; one argument more or less does not.
  EXPECT_EQ(call(redis_detail::kOpCheck, {"0"}).type, '*');
  EXPECT_EQ(call(redis_detail::kOpCheck, {"0", "extra"}).type, '-');
  EXPECT_EQ(call(redis_detail::kOpAbandon, {}).type, '-');
  std::vector<std::string> acquire_args(redis_detail::kAcquireFixedArgs - 1, "0");
  EXPECT_EQ(call(redis_detail::kOpAcquire, acquire_args).type, '*');
  acquire_args.back() = "1";  // one cost announced, none sent
  EXPECT_EQ(call(redis_detail::kOpAcquire, acquire_args).type, '-');
  acquire_args.insert(acquire_args.end(), {"tokens", "5"});
  EXPECT_EQ(call(redis_detail::kOpAcquire, acquire_args).type, '*');
  acquire_args.resize(redis_detail::kAcquireFixedArgs - 2);
  EXPECT_EQ(call(redis_detail::kOpAcquire, acquire_args).type, '-');
  EXPECT_EQ(record("", {{"p", "10", "1000000", "", "", "0", ""}}).type, '*');
  const RespReply short_policy = record("", {{"p", "10", "1000000", "", "", "0"}});
  EXPECT_EQ(short_policy.type, '-');
  EXPECT_NE(short_policy.text.find("abide pacer"), std::string::npos) << short_policy.text;
  EXPECT_EQ(call(redis_detail::kOpSettle, {"", "0", "0", "1", "tokens", "5"}).type, '*');
  EXPECT_EQ(call(redis_detail::kOpSettle, {"", "0", "0"}).type, '-');  // no used costs
  EXPECT_EQ(call(redis_detail::kOpSettle, {"", "0", "1", "tokens", "0"}).type, '-');
  const RespReply unknown = call(99, {"0"});
  EXPECT_EQ(unknown.type, '-');
  EXPECT_NE(unknown.text.find("unknown operation"), std::string::npos) << unknown.text;
}

// A record whose answer teaches returns the lesson: {blocked, released, 1,
// now, received, limited, cooldown, the learned policy's fields}. Accepted
// answers before it are only counted (mode 0, the count in L_ACCEPTED).
TEST_F(ScriptByHand, ARecordThatTeachesReturnsItsLesson) {
  ASSERT_EQ(acquire(0), redis_detail::kGrantGranted);
  EXPECT_EQ(record("").elements.size(), 2u);  // accepted: counted, nothing to learn
  EXPECT_EQ(record("").elements.size(), 2u);
  const RespReply taught = record("2000000", {}, true);
  ASSERT_EQ(taught.elements.size(), 7 + redis_detail::kLearnedFields) << taught.text;
  EXPECT_EQ(taught.elements[2], "1");
  EXPECT_EQ(taught.elements[3], std::to_string(now));
  EXPECT_EQ(taught.elements[5], "1");        // limited
  EXPECT_EQ(taught.elements[6], "2000000");  // the cooldown it stated
  EXPECT_EQ(taught.elements[7], "0");        // nothing learned yet ...
  EXPECT_EQ(taught.elements[7 + 7], "2");    // ... from two accepted answers
  // The script itself learned nothing: that is the learner's, in C++.
  EXPECT_EQ(call(redis_detail::kOpLearned, {}).elements, std::vector<std::string>{"0"});
}

// OP_PUBLISH is a compare-and-set on the key's learned policy.
TEST_F(ScriptByHand, APublishKeepsThePolicyOnlyWhenTheKeyStillHasTheOneItLearnedFrom) {
  ASSERT_EQ(record("").elements.size(), 2u);
  const RespReply taught = record("2000000", {}, true);
  ASSERT_EQ(taught.elements.size(), 7 + redis_detail::kLearnedFields) << taught.text;
  const std::vector<std::string> from(taught.elements.begin() + 7, taught.elements.end());
  std::vector<std::string> to(redis_detail::kLearnedFields, "0");
  to[0] = "1";   // from Retry-After
  to[1] = "1";   // one per window
  to[3] = "2000000";
  to[4] = std::to_string(now + 2'000'000);
  to[15] = "1";
  const auto publish = [&](const std::vector<std::string>& expected) {
    std::vector<std::string> args{std::to_string(now)};
    args.insert(args.end(), expected.begin(), expected.end());
    args.insert(args.end(), to.begin(), to.end());
    return call(redis_detail::kOpPublish, args);
  };
  std::vector<std::string> stale = from;
  stale[7] = "5";  // another process counted more since
  const RespReply refused = publish(stale);
  ASSERT_EQ(refused.elements.size(), 1 + redis_detail::kLearnedFields) << refused.text;
  EXPECT_EQ(refused.elements[0], "2");
  EXPECT_EQ(std::vector<std::string>(refused.elements.begin() + 1, refused.elements.end()), from);
  EXPECT_EQ(call(redis_detail::kOpLearned, {}).elements, std::vector<std::string>{"0"});

  EXPECT_EQ(publish(from).elements, std::vector<std::string>{"1"});
  const RespReply shown = call(redis_detail::kOpLearned, {});
  ASSERT_EQ(shown.elements.size(), 6u);
  EXPECT_EQ(shown.elements[1], "1");
  EXPECT_EQ(shown.elements[2], "2000000");

  // Once the server announces a quota, a lesson is void.
  ASSERT_EQ(record("", {{"p", "10", "1000000", "", "", "0", ""}}).type, '*');
  EXPECT_EQ(publish(to).elements, std::vector<std::string>{"0"});
  EXPECT_EQ(call(redis_detail::kOpLearned, {}).elements, std::vector<std::string>{"0"});
  std::vector<std::string> short_args(redis_detail::kPublishArgs - 2, "0");
  EXPECT_EQ(call(redis_detail::kOpPublish, short_args).type, '-');
}

TEST(RedisStore, OneRoundTripPerAcquireAfterTheScriptIsLoaded) {
  REQUIRE_REDIS();
  auto store = std::make_shared<RedisStore>(options_for(*shared_server, RedisTimeBase::kServer));
  Pacer p(PacerConfig{}, store);
  const auto k = p.key("rt");
  ASSERT_TRUE(p.acquire(k).ok());
  EXPECT_EQ(store->stats().round_trips, 2u);  // SCRIPT LOAD, then EVALSHA
  const auto before = store->stats().round_trips;
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(p.acquire(k).ok());
  EXPECT_EQ(store->stats().round_trips - before, 20u);
  EXPECT_TRUE(store->up());
  EXPECT_EQ(store->stats().fallbacks, 0u);
}

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
