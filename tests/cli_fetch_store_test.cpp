// `abide fetch` end to end, --store at start: a Redis that cannot be used is a configuration error unless --store-fallback; --fail-closed; redis://unix:.
// And the secret of the quota keys (key_secret.h): where it is kept, when it is needed, its refusals.
// Every abide started here keeps its state under a temporary XDG_STATE_HOME, never in the real home.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "servers/redis_server.h"
#include "support/fetch_cli.h"
#include "support/run.h"

namespace abide::test {
namespace {

constexpr const char* kPassword = "store-5ecret-Jw73";

// Sets (or unsets) a variable until the end of a scope, then restores what was there.
class RestoredEnv {
 public:
  RestoredEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~RestoredEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  RestoredEnv(const RestoredEnv&) = delete;
  RestoredEnv& operator=(const RestoredEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The whole run's state home: a temporary directory, so that an abide keyed
// for a Redis store makes its secret there and not in the real home.
class TemporaryStateHome : public ::testing::Environment {
 public:
  void SetUp() override {
    dir_.emplace();
    xdg_.emplace("XDG_STATE_HOME", (*dir_ / "state").c_str());
    secret_.emplace("ABIDE_KEY_SECRET", nullptr);
    secret_file_.emplace("ABIDE_KEY_SECRET_FILE", nullptr);
  }
  void TearDown() override {
    secret_file_.reset();
    secret_.reset();
    xdg_.reset();
    dir_.reset();
  }

 private:
  std::optional<TempDir> dir_;
  std::optional<RestoredEnv> xdg_, secret_, secret_file_;
};

[[maybe_unused]] ::testing::Environment* const kStateHome =
    ::testing::AddGlobalTestEnvironment(new TemporaryStateHome);

unsigned mode_of(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? static_cast<unsigned>(st.st_mode & 07777) : 0xffffu;
}

TEST(FetchStore, HelpRuns) {
  const RunResult r = run(fetch_argv({"--help"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

#define REQUIRE_REDIS_CLI()                                                            \
  do {                                                                                 \
    if (!kRedisBuiltIn) GTEST_SKIP() << "abide was built without abide::redis";        \
    if (redis_server_binary().empty()) GTEST_SKIP() << "no redis-server is installed"; \
  } while (false)

std::size_t lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

std::uint64_t requests(const Mock& mock) {
  const json s = mock.stats();
  return s.is_object() ? s["totals"]["requests"].get<std::uint64_t>() : 999;
}

std::string tcp_store(const RedisServer& redis, const std::string& password, const std::string& prefix = "cli") {
  return "redis://" + (password.empty() ? std::string() : ":" + password + "@") +
         "127.0.0.1:" + std::to_string(redis.port()) + "/" + prefix;
}

// --- a Redis that cannot be used is a configuration error -------------------------------

TEST(FetchStore, AWrongOrMissingPasswordIsAnErrorAtStartAndNothingIsSent) {
  REQUIRE_REDIS_CLI();
  RedisServer redis({true, false, {"--requirepass", kPassword}});
  ASSERT_TRUE(redis.start());
  Mock mock({"--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  TempDir dir;
  struct Case {
    std::string store;
    std::string says;
  };
  for (const Case& c : {Case{tcp_store(redis, "wrong-" + std::string(kPassword)), "refused the credentials"},
                        Case{tcp_store(redis, ""), "requires a password and none was given"}}) {
    SCOPED_TRACE(c.says);
    const RunResult r = run(
        fetch_argv({"--store", c.store, "-o", dir / "body", "--stats", dir / "stats.json", mock.url("/items/1")}));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;  // one clear message
    EXPECT_NE(r.err.find("--store: redis redis://127.0.0.1:" + std::to_string(redis.port()) + " " + c.says),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("ABIDE_REDIS_PASSWORD"), std::string::npos) << r.err;  // where the password goes
    EXPECT_NE(r.err.find("--store-fallback"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("5ecret"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  EXPECT_EQ(requests(mock), 0u);

  // The right password, from the environment: the same run goes through.
  ScopedEnv env("ABIDE_REDIS_PASSWORD", kPassword);
  const RunResult ok = run(fetch_argv({"--store", tcp_store(redis, ""), "-o", dir / "body", mock.url("/items/1")}));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(ok.err.empty()) << ok.err;
  EXPECT_EQ(requests(mock), 1u);
}

TEST(FetchStore, APortOrSocketWhereNothingListensIsAnErrorAtStart) {
  if (!kRedisBuiltIn) GTEST_SKIP() << "abide was built without abide::redis";
  const DeadPort dead;
  ASSERT_GT(dead.port(), 0);
  Mock mock({"--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  TempDir dir;
  const std::string port = std::to_string(dead.port());
  for (const auto& [store, says] : std::vector<std::pair<std::string, std::string>>{
           {"redis://:" + std::string(kPassword) + "@127.0.0.1:" + port,
            "cannot connect to redis redis://127.0.0.1:" + port + " (Connection refused)"},
           {"unix:" + (dir / "no.sock"), "cannot connect to redis unix:" + (dir / "no.sock")},
           {"redis://:" + std::string(kPassword) + "@unix:" + (dir / "no.sock"),
            "cannot connect to redis unix:" + (dir / "no.sock")}}) {
    SCOPED_TRACE(store);
    for (const char* fail_closed : {"", "--fail-closed"}) {  // waiting for Redis is no reason to start without it
      std::vector<std::string> args{"--store", store, "-o", dir / "body", mock.url("/items/1")};
      if (*fail_closed != '\0') args.insert(args.begin(), fail_closed);
      const RunResult r = run(fetch_argv(args));
      EXPECT_EQ(r.exit_code, 1) << r.err;
      EXPECT_EQ(lines(r.err), 1u) << r.err;
      EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("Nothing was sent"), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("5ecret"), std::string::npos) << r.err;
    }
  }
  EXPECT_EQ(requests(mock), 0u);
}

TEST(FetchStore, APrefixTheRedisUserMayNotUseIsAnErrorAtStart) {
  REQUIRE_REDIS_CLI();
  RedisServer redis(
      {true,
       false,
       {"--user", "app", "on", std::string(">") + kPassword, "~app:*", "&*", "+@all", "--user", "default", "off"}});
  ASSERT_TRUE(redis.start());
  Mock mock({"--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  const std::string base = "redis://app:" + std::string(kPassword) + "@127.0.0.1:" + std::to_string(redis.port());
  RunResult r = run(fetch_argv({"--store", base + "/other:", "-o", "/dev/null", mock.url("/items/1")}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("may not run the pacer's script on keys under the prefix \"other:\""), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("5ecret"), std::string::npos) << r.err;
  EXPECT_EQ(requests(mock), 0u);
  r = run(fetch_argv({"--store", base + "/app:", "-o", "/dev/null", mock.url("/items/1")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(requests(mock), 1u);
}

TEST(FetchStore, ALocationThatDoesNotParseIsAUsageError) {
  if (!kRedisBuiltIn) GTEST_SKIP() << "abide was built without abide::redis";
  for (const auto& [store, says] :
       std::vector<std::pair<std::string, std::string>>{{"bogus", "unsupported Redis location"},
                                                        {"redis://:" + std::string(kPassword) + "@h:99999",
                                                         "bad Redis port"},
                                                        {"redis://unix:/", "missing unix socket path"}}) {
    const RunResult r = run(fetch_argv({"--store", store, "http://127.0.0.1:1/x"}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("5ecret"), std::string::npos) << r.err;
  }
}

// --- --store-fallback ------------------------------------------------------------------------

TEST(FetchStore, StoreFallbackGoesOnWithOneLine) {
  REQUIRE_REDIS_CLI();
  RedisServer redis({true, false, {"--requirepass", kPassword}});
  ASSERT_TRUE(redis.start());
  const DeadPort dead;
  ASSERT_GT(dead.port(), 0);
  Mock mock({"--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  TempDir dir;
  for (const std::string& store :
       {"redis://127.0.0.1:" + std::to_string(dead.port()), tcp_store(redis, "wrong-" + std::string(kPassword))}) {
    SCOPED_TRACE(store);
    const RunResult r = run(fetch_argv({"--store", store, "--store-fallback", "-o", dir / "body", "--stats",
                                        dir / "stats.json", mock.url("/items/1"), mock.url("/items/2")}));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;  // one line, not one per request
    EXPECT_NE(r.err.find("abide fetch: --store: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("going on with in-process quota state (--store-fallback)"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("5ecret"), std::string::npos) << r.err;
    EXPECT_EQ(read_json(dir / "stats.json")["done"], 2) << r.err;
  }
  EXPECT_EQ(requests(mock), 4u);
}

// --- redis://unix: and the other socket forms ------------------------------------------------

TEST(FetchStore, AUnixSocketWorksInEveryDocumentedForm) {
  REQUIRE_REDIS_CLI();
  RedisServer redis({false, true, {"--requirepass", kPassword}});  // no TCP port at all
  ASSERT_TRUE(redis.start());
  Mock mock({"--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  const std::string sock = redis.socket_path();
  struct Case {
    std::string store;
    bool password_from_env;
    std::string prefix;  // where the state must land
  };
  const std::string pw = kPassword;
  int n = 0;
  for (const Case& c : {Case{"redis://:" + pw + "@unix:" + sock + "?prefix=f1:", false, "f1:"},
                        Case{"redis://unix:" + sock + "?prefix=f2:", true, "f2:"},
                        Case{"unix://:" + pw + "@" + sock + "?prefix=f3:", false, "f3:"},
                        Case{"unix:" + sock + "?prefix=f4:", true, "f4:"}, Case{"unix:" + sock, true, "abide:"}}) {
    SCOPED_TRACE(c.store);
    std::optional<ScopedEnv> env;
    if (c.password_from_env) env.emplace("ABIDE_REDIS_PASSWORD", pw);
    const std::string path = "/items/" + std::to_string(++n);
    const RunResult r = run(fetch_argv({"--store", c.store, "-o", "/dev/null", mock.url(path)}));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(r.err.empty()) << r.err;  // no outage, no fallback
#if ABIDE_TEST_HAVE_HIREDIS
    // The pacer's state went to Redis, under the prefix.
    const RespReply keys = redis.command({"KEYS", c.prefix + "*"}, {"AUTH", pw});
    EXPECT_FALSE(keys.elements.empty()) << "nothing under " << c.prefix;
#endif
  }
  EXPECT_EQ(requests(mock), 5u);
}

// --- --fail-closed ---------------------------------------------------------------------------

bool wait_for_limited(const Mock& mock, int n) {
  for (int i = 0; i < 800; ++i) {
    const json s = mock.stats();
    if (s.is_object() && s["totals"]["limited"].get<int>() >= n) return true;
    std::this_thread::sleep_for(25ms);
  }
  return false;
}

// What the run left unfinished, as its --stats says.
json only_unfinished(const std::string& stats_file) {
  const json stats = read_json(stats_file);
  if (!stats.is_object() || stats["unfinished"].size() != 1) return json();
  return stats["unfinished"][0];
}

TEST(FetchStore, FailClosedWithRedisStoppedMidRunDefersNamingTheStore) {
  REQUIRE_REDIS_CLI();
  RedisServer redis({true, false, {}});
  ASSERT_TRUE(redis.start());
  Mock mock({"--limit", "1", "--window", "2"});
  ASSERT_GT(mock.port(), 0);
  // The window's one request, spent: fetch's request gets 429 and a Retry-After.
  httplib::Client(mock.url("")).Get("/items/0");
  TempDir dir;
  BackgroundProcess fetch(
      fetch_argv({"--store", tcp_store(redis, "", "fc"), "--fail-closed", "--max-wait", "3", "-o", dir / "body",
                  "--stats", dir / "stats.json", "--resume-file", dir / "resume.json", mock.url("/items/1")}));
  ASSERT_TRUE(fetch.running());
  ASSERT_TRUE(wait_for_limited(mock, 1)) << fetch.err_so_far();
  redis.kill_now();  // while fetch waits out the Retry-After
  const RunResult r = fetch.wait(30s);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("requests wait for it (--fail-closed)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("in-process"), std::string::npos) << r.err;
  const json left = only_unfinished(dir / "stats.json");
  ASSERT_TRUE(left.is_object()) << slurp(dir / "stats.json");
  EXPECT_EQ(left["outcome"], "deferred");
  EXPECT_NE(left["reason"].get<std::string>().find("store"), std::string::npos) << left.dump();
  EXPECT_TRUE(left["not_before"].is_string()) << left.dump();
  // Within its --max-wait: the pacer gives up once Redis cannot be back in time.
  EXPECT_LE(read_json(dir / "stats.json")["waited_s"].get<double>(), 2.0 + 3.0 + 0.5);
  // Nothing went out without the shared state: one request from fetch, the 429.
  EXPECT_EQ(requests(mock), 2u);
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0);
}

TEST(FetchStore, FailClosedWithFallbackStartsWithoutRedisAndDefersEveryRequest) {
  if (!kRedisBuiltIn) GTEST_SKIP() << "abide was built without abide::redis";
  const DeadPort dead;
  ASSERT_GT(dead.port(), 0);
  Mock mock({"--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  TempDir dir;
  const RunResult r = run(fetch_argv({"--store", "redis://127.0.0.1:" + std::to_string(dead.port()), "--fail-closed",
                                      "--store-fallback", "--max-wait", "1", "-o", dir / "body", "--stats",
                                      dir / "stats.json", "--resume-file", dir / "resume.json", mock.url("/items/1")}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("requests wait for it (--fail-closed), each at most its maximum wait (--store-fallback)"),
            std::string::npos)
      << r.err;
  const json left = only_unfinished(dir / "stats.json");
  ASSERT_TRUE(left.is_object()) << slurp(dir / "stats.json");
  EXPECT_EQ(left["outcome"], "deferred");
  EXPECT_NE(left["reason"].get<std::string>().find("store"), std::string::npos) << left.dump();
  EXPECT_LE(read_json(dir / "stats.json")["waited_s"].get<double>(), 1.5);
  EXPECT_EQ(requests(mock), 0u);                 // never sent without the shared state
  EXPECT_TRUE(fs::exists(dir / "resume.json"));  // to run again once Redis is there
}

// --- abide proxy: the same check and the same two flags ---------------------------------------

TEST(FetchStore, ProxyChecksItsStoreBeforeListening) {
  if (!kRedisBuiltIn) GTEST_SKIP() << "abide was built without abide::redis";
  const RunResult help = abide({"proxy", "--help"});
  if (help.exit_code != 0) GTEST_SKIP() << "no abide proxy in this build";
  for (const char* text :
       {"--store-fallback", "--fail-closed", "Redis is checked once at", "redis://[[USER]:PASSWORD@]unix:/PATH"}) {
    EXPECT_NE(help.out.find(text), std::string::npos) << text << "\n" << help.out;
  }
  const DeadPort dead;
  ASSERT_GT(dead.port(), 0);
  const std::string store = "redis://:" + std::string(kPassword) + "@127.0.0.1:" + std::to_string(dead.port());
  const RunResult r = abide({"proxy", "--upstream", "http://127.0.0.1:1", "--port", "0", "--store", store});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;  // it never listened
  EXPECT_NE(r.err.find("abide proxy: --store: cannot connect to redis redis://127.0.0.1:"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("5ecret"), std::string::npos) << r.err;

  BackgroundProcess proxy({ABIDE_CLI_PATH, "proxy", "--upstream", "http://127.0.0.1:1", "--port", "0", "--store", store,
                           "--store-fallback"});
  const auto line = proxy.read_line(10s);
  ASSERT_TRUE(line.has_value()) << proxy.err_so_far();
  EXPECT_TRUE(line->starts_with("listening on ")) << *line;
  const RunResult stopped = proxy.stop(SIGTERM, 10s);
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_NE(stopped.err.find("abide proxy: --store: "), std::string::npos) << stopped.err;
  EXPECT_NE(stopped.err.find("(--store-fallback)"), std::string::npos) << stopped.err;
  EXPECT_EQ(stopped.err.find("5ecret"), std::string::npos) << stopped.err;
}

TEST(FetchStore, ProxyFailClosedHoldsARequestForRedisThenAnswersDeferred) {
  if (!kRedisBuiltIn) GTEST_SKIP() << "abide was built without abide::redis";
  if (abide({"proxy", "--help"}).exit_code != 0) GTEST_SKIP() << "no abide proxy in this build";
  const DeadPort dead;
  ASSERT_GT(dead.port(), 0);
  Mock mock({"--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  BackgroundProcess proxy({ABIDE_CLI_PATH, "proxy", "--upstream", mock.url(""), "--port", "0", "--store",
                           "redis://127.0.0.1:" + std::to_string(dead.port()), "--store-fallback", "--fail-closed"});
  const auto line = proxy.read_line(10s);
  ASSERT_TRUE(line.has_value() && line->starts_with("listening on 127.0.0.1:")) << proxy.err_so_far();
  httplib::Client caller("127.0.0.1", std::atoi(line->c_str() + line->rfind(':') + 1));
  caller.set_read_timeout(30s);
  const auto res = caller.Get("/items/1", {{"Abide-Max-Wait", "1"}});
  ASSERT_TRUE(res) << proxy.err_so_far();
  EXPECT_EQ(res->get_header_value("Abide-Outcome"), "deferred") << res->status << " " << res->body;
  EXPECT_NE(res->body.find("store"), std::string::npos) << res->body;
  EXPECT_EQ(requests(mock), 0u);  // not sent without the shared state
  const RunResult stopped = proxy.stop(SIGTERM, 10s);
  EXPECT_NE(stopped.err.find("requests wait for it (--fail-closed)"), std::string::npos) << stopped.err;
}

// --- the secret of the quota keys -----------------------------------------------------------

constexpr const char* kToken = "X-Api-Key: 4711";
constexpr const char* kWarning =
    "warning: credentialed requests share quota only with processes of this machine";

TEST(FetchStore, KeySecretMemoryStoreNeedsNoFile) {
  TempDir home;
  const RestoredEnv xdg("XDG_STATE_HOME", (home / "state").c_str());
  Mock mock({"--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  const RunResult r = run(fetch_argv({"-H", kToken, "-o", "/dev/null", mock.url("/items/1")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_FALSE(std::filesystem::exists(home / "state")) << "--store memory wrote state";
}

TEST(FetchStore, KeySecretRedisWithACredentialWarnsOnceAndHidesTheToken) {
  REQUIRE_REDIS_CLI();
  RedisServer redis({true, false, {}});
  ASSERT_TRUE(redis.start());
  Mock mock({"--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  TempDir home;
  const RestoredEnv xdg("XDG_STATE_HOME", (home / "state").c_str());
  const std::string file = home / "state/abide/key-secret";

  // Without a credential: the origin's key, shared by all, and no secret needed.
  RunResult r = run(fetch_argv({"--store", tcp_store(redis, "", "k"), "-o", "/dev/null", mock.url("/items/0")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_FALSE(std::filesystem::exists(home / "state"));

  // With one: this machine's secret, made 0600 in a 0700 directory, and one line that says what it means.
  for (int run_no = 0; run_no < 2; ++run_no) {
    r = run(fetch_argv({"-H", kToken, "--store", tcp_store(redis, "", "k"), "-o", "/dev/null",
                        mock.url("/items/" + std::to_string(run_no + 1)), mock.url("/items/9")}));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("abide fetch: " + std::string(kWarning)), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("ABIDE_KEY_SECRET"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("4711"), std::string::npos) << r.err;
  }
  EXPECT_EQ(mode_of(home / "state/abide"), 0700u);
  EXPECT_EQ(mode_of(file), 0600u);
  EXPECT_EQ(std::filesystem::file_size(file), 32u);
#if ABIDE_TEST_HAVE_HIREDIS
  // What a reader of key names sees: the origin, and a hash that needs the secret.
  const RespReply keys = redis.command({"KEYS", "*"});
  ASSERT_TRUE(keys.ok);
  std::size_t credentialed = 0;
  for (const std::string& key : keys.elements) {
    EXPECT_EQ(key.find("4711"), std::string::npos) << key;
    if (key.find('#') != std::string::npos) ++credentialed;
  }
  EXPECT_GT(credentialed, 0u) << keys.elements.size() << " keys";
#endif

  // A fleet's secret from the environment: no warning, nothing written.
  TempDir other;
  const RestoredEnv xdg2("XDG_STATE_HOME", (other / "state").c_str());
  const RestoredEnv given("ABIDE_KEY_SECRET", "fleet-secret-0123456789");
  r = run(fetch_argv({"-H", kToken, "--store", tcp_store(redis, "", "k"), "-o", "/dev/null", mock.url("/items/3")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_FALSE(std::filesystem::exists(other / "state"));
}

TEST(FetchStore, KeySecretThatCannotBeUsedIsAnErrorAndNothingIsSent) {
  Mock mock({"--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  {
    const RestoredEnv given("ABIDE_KEY_SECRET", "tooshort-73");
    const RunResult r = run(fetch_argv({"-H", kToken, "-o", "/dev/null", mock.url("/items/1")}));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("ABIDE_KEY_SECRET is too short"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("tooshort-73"), std::string::npos) << r.err;
  }
  if (kRedisBuiltIn && !redis_server_binary().empty()) {
    RedisServer redis({true, false, {}});
    ASSERT_TRUE(redis.start());
    TempDir home;
    const RestoredEnv xdg("XDG_STATE_HOME", (home / "state").c_str());
    std::filesystem::create_directories(home / "state/abide");
    const std::string file = home / "state/abide/key-secret";
    std::ofstream(file) << std::string(32, 'x');
    ::chmod(file.c_str(), 0644);
    const RunResult r = run(fetch_argv({"-H", kToken, "--store", tcp_store(redis, ""), "-o", home / "body",
                                        mock.url("/items/1")}));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("0644"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(home / "body")) << "an output was opened";
    EXPECT_EQ(r.err.find("xxxx"), std::string::npos) << r.err;

    if (abide({"proxy", "--help"}).exit_code == 0) {
      const RunResult p = abide({"proxy", "--upstream", mock.url(""), "--port", "0", "--store", tcp_store(redis, "")});
      EXPECT_EQ(p.exit_code, 1) << p.err;
      EXPECT_TRUE(p.out.empty()) << p.out;  // it never listened
      EXPECT_NE(p.err.find("abide proxy: the key secret " + file), std::string::npos) << p.err;
    }
  }
  EXPECT_EQ(requests(mock), 0u);
}

TEST(FetchStore, KeySecretProxyOnRedisWarnsOnceAtStart) {
  REQUIRE_REDIS_CLI();
  if (abide({"proxy", "--help"}).exit_code != 0) GTEST_SKIP() << "no abide proxy in this build";
  const RunResult help = abide({"proxy", "--help"});
  EXPECT_NE(help.out.find("ABIDE_KEY_SECRET"), std::string::npos) << help.out;
  EXPECT_NE(run(fetch_argv({"--help"})).out.find("ABIDE_KEY_SECRET_FILE"), std::string::npos);
  RedisServer redis({true, false, {}});
  ASSERT_TRUE(redis.start());
  TempDir home;
  const RestoredEnv xdg("XDG_STATE_HOME", (home / "state").c_str());
  BackgroundProcess proxy({ABIDE_CLI_PATH, "proxy", "--upstream", "http://127.0.0.1:1", "--port", "0", "--store",
                           tcp_store(redis, "")});
  const auto line = proxy.read_line(10s);
  ASSERT_TRUE(line.has_value() && line->starts_with("listening on ")) << proxy.err_so_far();
  const RunResult stopped = proxy.stop(SIGTERM, 10s);
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_EQ(lines(stopped.err), 1u) << stopped.err;
  EXPECT_NE(stopped.err.find("abide proxy: " + std::string(kWarning)), std::string::npos) << stopped.err;
  EXPECT_EQ(mode_of(home / "state/abide/key-secret"), 0600u);
}

}  // namespace
}  // namespace abide::test
