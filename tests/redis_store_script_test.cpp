// RedisStore against a real redis-server (started on a free loopback port and
// a unix socket in a temporary folder, stopped afterwards; the tests look
// inside it through hiredis): the shared state-machine suite, locations, and
// the script and its constants.
#include "support/quota_store_conformance.h"
#include "support/redis_store_fixture.h"

namespace abide::test {


INSTANTIATE_TEST_SUITE_P(Redis, QuotaStoreConformance,
                         ::testing::Values(StoreParam{"Redis",
                                                      []() -> std::shared_ptr<QuotaStore> {
                                                        if (shared_server == nullptr) return nullptr;
                                                        return std::make_shared<RedisStore>(
                                                            options_for(*shared_server));
                                                      }}),
                         store_param_name);

namespace {
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

}  // namespace
}  // namespace abide::test
