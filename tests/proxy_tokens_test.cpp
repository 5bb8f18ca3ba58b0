// `abide proxy` and language-model token quotas, end to end: real processes
// on 127.0.0.1 (abide mock-server in a token style, abide proxy, redis-server)
// and callers on threads. A fleet of proxies over one store keeps one token
// quota; a caller's Abide-Cost is reserved before sending and never forwarded.
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "servers/redis_server.h"
#include "support/proxy_processes.h"
#include "support/sanitizers.h"

#ifdef ABIDE_CLI_PATH

namespace abide::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// ---- what the tests share ----------------------------------------------------------

// A fresh folder under the temporary directory for one test's files, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "abide-proxy-tokens-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  bool ok() const { return !path_.empty(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// ABIDE_KEY_SECRET for the proxies started while it lives: a fleet keys one
// credential alike only under one secret.
class SharedKeySecret {
 public:
  SharedKeySecret() { ::setenv("ABIDE_KEY_SECRET", "proxy-tokens-test-secret-32bytes", 1); }
  ~SharedKeySecret() { ::unsetenv("ABIDE_KEY_SECRET"); }
  SharedKeySecret(const SharedKeySecret&) = delete;
  SharedKeySecret& operator=(const SharedKeySecret&) = delete;
};

// An OpenAI chat request whose prompt is `chars` bytes of text.
std::string chat_body(std::size_t chars, int max_tokens) {
  return json{{"model", "gpt-test"},
              {"max_tokens", max_tokens},
              {"messages", json::array({json{{"role", "user"}, {"content", std::string(chars, 'x')}}})}}
      .dump();
}

// The upstream option for an OpenAI-shaped mock, read through the openai profile.
std::vector<std::string> openai_upstream(const Mock& m) { return {"--upstream", m.url() + ",profile=openai"}; }

// A client of `port` with room for a caller held for pacing.
httplib::Client caller(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(10s);
  c.set_read_timeout(150s);
  return c;
}

const httplib::Headers kCredential{{"Authorization", "Bearer test-key"}};

// ---- a fleet keeps one token quota ------------------------------------------------------

// The mock's token bucket: kTokenLimit tokens, refilled continuously over
// kWindow. The calls below use about 12,500 tokens in all (charged at admission
// as max(max_tokens, prompt bytes / 4), then settled to prompt + completion),
// so the quota binds for about (12,500 - 3,000) / 1,500 = 6 s; requests
// (100,000 a window) never do.
constexpr const char* kWindow = "2";
constexpr const char* kTokenLimit = "3000";
constexpr int kCallers = 6;         // half through each proxy
constexpr int kCallsPerCaller = 5;  // 30 calls in all

// Call `i`'s prompt (400..2000 bytes) and max_tokens (50..400): varied, deterministic.
std::size_t prompt_chars(int i) { return 400 + static_cast<std::size_t>((i * 577) % 1601); }
int max_tokens_of(int i) { return 50 + (i * 131) % 351; }

// Two proxies on `store` in front of one openai-tokens mock, kCallers threads
// of calls: every call ends 200, no request was early, and past the first
// answers the quota was never overrun (a limited answer is an overrun: the
// mock refuses whenever its token bucket would go short).
void expect_the_fleet_keeps_the_quota(const std::string& store) {
  Mock mock({"--style", "openai-tokens", "--limit", "100000", "--window", kWindow, "--token-limit", kTokenLimit,
             "--limited-status", "429", "--seed", "1"});
  ASSERT_GT(mock.port(), 0) << mock.err_so_far();
  const SharedKeySecret secret;
  const std::vector<std::string> options = with(openai_upstream(mock), {"--max-wait", "120", "--store", store});
  Proxy one(options);
  Proxy two(options);
  ASSERT_GT(one.port(), 0) << one.err_so_far();
  ASSERT_GT(two.port(), 0) << two.err_so_far();

  std::vector<int> status(kCallers * kCallsPerCaller, 0);
  std::vector<std::string> outcome(status.size());
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kCallers; ++t) {
    threads.emplace_back([&, t] {
      auto c = caller(t % 2 == 0 ? one.port() : two.port());
      for (int k = 0; k < kCallsPerCaller; ++k) {
        const int i = t * kCallsPerCaller + k;
        const auto r = c.Post("/v1/chat/completions", kCredential, chat_body(prompt_chars(i), max_tokens_of(i)),
                              "application/json");
        status[static_cast<std::size_t>(i)] = r ? r->status : -1;
        if (r) outcome[static_cast<std::size_t>(i)] = r->get_header_value("Abide-Outcome");
      }
    });
  }
  for (auto& th : threads) th.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  for (std::size_t i = 0; i < status.size(); ++i)
    EXPECT_EQ(status[i], 200) << "call " << i << " (Abide-Outcome " << outcome[i] << ")";
  const json stats = mock.stats();
  ASSERT_TRUE(stats.is_object());
  const json& totals = stats["totals"];
  const long long limited = totals["limited"].get<long long>();
  const long long charged = totals["tokens"]["charged"].get<long long>();
  const long long admitted = totals["tokens"]["admitted"].get<long long>();
  std::printf("[ fleet    ] store %s: %.2f s, %lld requests, %lld limited, tokens admitted %lld, charged %lld\n",
              store.substr(0, store.find(':')).c_str(), elapsed, totals["requests"].get<long long>(), limited, admitted,
              charged);
  ::testing::Test::RecordProperty("elapsed_ms", static_cast<int>(elapsed * 1000));
  ::testing::Test::RecordProperty("limited", static_cast<int>(limited));
  ::testing::Test::RecordProperty("tokens_charged", static_cast<int>(charged));
  EXPECT_EQ(totals["premature"], 0) << totals.dump();
  // After the first answers, never more tokens than the quota in a window: a
  // limited answer is an attempt to overrun it. Counted in the plain build;
  // a sanitizer's build runs the same traffic for its memory and threads, at
  // a pace of its own.
  if (!ABIDE_TEST_SANITIZED) {
    EXPECT_LE(limited, 2) << totals.dump();
  }
  EXPECT_EQ(totals["accepted"], static_cast<long long>(status.size())) << totals.dump();
  one.stop_cleanly();
  two.stop_cleanly();
}

TEST(ProxyTokenFleet, TwoProxiesOnRedisKeepTheTokenQuota) {
#ifndef ABIDE_TEST_WITH_REDIS
  GTEST_SKIP() << "abide was built without abide::redis";
#else
  if (redis_server_binary().empty()) GTEST_SKIP() << "no redis-server installed";
  RedisServer redis(RedisServer::Options{true, false, {}});
  if (!redis.start()) GTEST_SKIP() << "redis-server did not start";
  expect_the_fleet_keeps_the_quota("redis://127.0.0.1:" + std::to_string(redis.port()));
#endif
}

TEST(ProxyTokenFleet, TwoProxiesOnOneFileStoreKeepTheTokenQuota) {
  const TempDir dir;
  ASSERT_TRUE(dir.ok());
  expect_the_fleet_keeps_the_quota("file:" + dir / "quota.db");
}

// ---- Abide-Cost ----------------------------------------------------------------------------

// A caller's Abide-Cost is the proxy's alone: a good one is answered and never
// reaches the upstream; a malformed one is a 400 naming the field, and nothing
// is sent.
// A chat request with these Abide-Cost lines is answered 400, naming the field.
void expect_refused(httplib::Client& c, const std::vector<std::string>& lines) {
  httplib::Headers h = kCredential;
  std::string shown;
  for (const std::string& l : lines) {
    h.emplace("Abide-Cost", l);
    shown += (shown.empty() ? "" : " | ") + l;
  }
  const auto r = c.Post("/v1/chat/completions", h, chat_body(400, 100), "application/json");
  ASSERT_TRUE(r) << shown;
  EXPECT_EQ(r->status, 400) << shown << ": " << r->body;
  EXPECT_NE(r->body.find("Abide-Cost"), std::string::npos) << shown << ": " << r->body;
}

TEST(ProxyCost, AbideCostIsNeverForwardedAndABadOneIs400) {
  Mock mock({"--style", "openai-tokens"});
  ASSERT_GT(mock.port(), 0) << mock.err_so_far();
  Proxy proxy(openai_upstream(mock));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  auto c = caller(proxy.port());

  // What the upstream received, as its /__echo saw it.
  {
    httplib::Headers h = kCredential;
    h.emplace("Abide-Cost", "tokens=1200");
    h.emplace("X-Kept", "yes");
    const auto r = c.Post("/__echo", h, chat_body(40, 100), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json e = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.is_object()) << r->body;
    std::map<std::string, std::string> seen;
    for (const auto& f : e["headers"]) {
      std::string n = f[0].get<std::string>();
      for (char& ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      seen[n] = f[1].get<std::string>();
    }
    EXPECT_FALSE(seen.count("abide-cost")) << e["headers"].dump();
    EXPECT_EQ(seen["x-kept"], "yes") << e["headers"].dump();
    EXPECT_EQ(seen["authorization"], "Bearer test-key") << e["headers"].dump();
  }
  // A priced request with a stated cost is sent and answered.
  {
    httplib::Headers h = kCredential;
    h.emplace("Abide-Cost", "tokens=1200");
    const auto r = c.Post("/v1/chat/completions", h, chat_body(400, 100), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Abide-Outcome"), "done");
  }
  ASSERT_EQ(mock.requests(), 1);

  for (const char* bad : {"tokens=abc", "tokens=-5", "=3", "tokens=", "tokens", "Tokens=5", "tokens=1.5",
                          "tokens=1, tokens=2", "tokens=1,,input-tokens=2", "tokens=99999999999999999999"}) {
    expect_refused(c, {bad});
  }
  // Several lines are one list: a unit given twice across them is as malformed.
  expect_refused(c, {"tokens=1", "tokens=2"});
  std::this_thread::sleep_for(200ms);  // a request the proxy might wrongly still send would show now
  EXPECT_EQ(mock.requests(), 1) << mock.stats()["totals"].dump();
  proxy.stop_cleanly();
}

// A stated cost is reserved before sending: once the proxy knows the token
// quota and little of it is left, a request stating more than is left is held
// (with Abide-Max-Wait: 0, answered deferred at once) and never sent into a 429.
// Its path (/v1/custom) is one the openai profile does not price, so the
// stated cost is the proxy's only reason to hold it: a proxy ignoring
// Abide-Cost would send it, and the mock (which charges max(max_tokens,
// prompt) on any path) would refuse it, 429.
TEST(ProxyCost, AStatedCostIsReservedBeforeSending) {
  // 1,000 tokens refilled over 100 s: 10 a second, so "little left" lasts.
  Mock mock({"--style", "openai-tokens", "--limit", "1000", "--window", "100", "--token-limit", "1000", "--seed", "1"});
  ASSERT_GT(mock.port(), 0) << mock.err_so_far();
  Proxy proxy(with(openai_upstream(mock), {"--max-wait", "30"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  auto c = caller(proxy.port());

  // Charged 600 at admission, settled to 1 + [150, 600] (its completion): at
  // most 849 left, and 900 more take at least 5 s to come back.
  const auto first = c.Post("/v1/chat/completions", kCredential, chat_body(4, 600), "application/json");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200) << first->body;
  ASSERT_FALSE(first->get_header_value("x-ratelimit-remaining-tokens").empty()) << "the proxy was told no quota";
  ASSERT_EQ(mock.requests(), 1);

  httplib::Headers big = kCredential;
  big.emplace("Abide-Cost", "tokens=900");
  big.emplace("Abide-Max-Wait", "0");
  const auto held = c.Post("/v1/custom", big, chat_body(4, 900), "application/json");
  ASSERT_TRUE(held);
  EXPECT_EQ(held->get_header_value("Abide-Outcome"), "deferred") << held->status << " " << held->body;
  EXPECT_FALSE(held->get_header_value("Abide-Not-Before").empty());
  EXPECT_EQ(mock.requests(), 1) << "sent although the stated cost was not there: " << mock.stats()["totals"].dump();

  // The hold was for the amount, not a blanket stop: a small stated cost goes.
  httplib::Headers small = kCredential;
  small.emplace("Abide-Cost", "tokens=100");
  const auto sent = c.Post("/v1/custom", small, chat_body(4, 100), "application/json");
  ASSERT_TRUE(sent);
  EXPECT_EQ(sent->status, 200) << sent->body;
  EXPECT_EQ(sent->get_header_value("Abide-Outcome"), "done");

  const json totals = mock.stats()["totals"];
  EXPECT_EQ(totals["requests"], 2) << totals.dump();
  EXPECT_EQ(totals["limited"], 0) << totals.dump();
  EXPECT_EQ(totals["premature"], 0) << totals.dump();
  proxy.stop_cleanly();
}

}  // namespace
}  // namespace abide::test

#endif  // ABIDE_CLI_PATH
