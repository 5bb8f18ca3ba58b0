// `abide fetch` end to end: the CLI against `abide mock-server` (both child
// processes, on 127.0.0.1 only), read back through --stats and the server's
// /__stats.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "abide/clock.h"
#include "abide/http_date.h"
#include "fetch/fetch_jobs.h"
#include "fetch/fetch_progress.h"
#include "fetch/shown_url.h"
#include "support/fetch_cli.h"
#include "support/process.h"
#include "support/redis_store_server.h"
#include "support/run.h"
#include "support/sanitizers.h"

namespace abide::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

// Windows (of the server's fixed windows) after the first that saw a 429.
int limited_after_first_window(const json& stats) {
  int n = 0;
  for (const auto& w : stats["windows"])
    if (w["index"].get<long>() > 0) n += w["limited"].get<int>();
  return n;
}

// --- every style ---------------------------------------------------------------

struct StyleCase {
  std::string style;
  std::string profile;   // the vendor profile to read it with ("" for none needed)
  bool announces_quota;  // sends quota fields on every answer
};

class FetchStyle : public ::testing::TestWithParam<StyleCase> {};

TEST_P(FetchStyle, ObeysTheServerWithNoPrematureRetries) {
  const StyleCase& c = GetParam();
  TempDir dir;
  Mock mock({"--style", c.style, "--limit", "5", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  constexpr int kRequests = 12;
  std::vector<std::string> args{"--urls",
                                mock.url_file(dir / "urls.txt", kRequests),
                                "--jobs",
                                "4",
                                "-o",
                                "/dev/null",
                                "--stats",
                                dir / "stats.json",
                                "--max-attempts",
                                "20",
                                "-s"};
  if (!c.profile.empty()) args.insert(args.end(), {"--profile", c.profile});
  const RunResult r = run(fetch_argv(args));
  EXPECT_EQ(r.exit_code, 0) << r.err;

  const json stats = read_json(dir / "stats.json");
  ASSERT_TRUE(stats.is_object()) << r.err;
  for (const char* field :
       {"requests", "done", "attempts", "retries", "status_counts", "waited_s", "elapsed_s", "unfinished"})
    EXPECT_TRUE(stats.contains(field)) << field;
  EXPECT_EQ(stats["requests"], kRequests);
  EXPECT_EQ(stats["done"], kRequests);
  EXPECT_TRUE(stats["unfinished"].empty());
  EXPECT_EQ(stats["status_counts"].value("200", 0), kRequests);

  const json server = mock.stats();
  ASSERT_TRUE(server.is_object());
  EXPECT_EQ(server["totals"]["premature"], 0) << server.dump();
  EXPECT_EQ(server["totals"]["accepted"], kRequests);
  // What the client saw is what the server counted.
  EXPECT_EQ(stats["attempts"], server["totals"]["requests"]);
  if (c.announces_quota) {
    EXPECT_EQ(limited_after_first_window(server), 0) << server["windows"].dump();
  }
  std::cout << "[ style " << c.style << " ] " << kRequests << " requests in " << stats["elapsed_s"].get<double>()
            << " s (quota's long-run time " << kRequests * 1.0 / 5 << " s), " << server["totals"]["limited"]
            << " limited, " << server["totals"]["premature"] << " premature\n";
}

INSTANTIATE_TEST_SUITE_P(AllStyles, FetchStyle,
                         ::testing::Values(StyleCase{"draft11", "", true}, StyleCase{"draft-legacy", "", true},
                                           StyleCase{"github", "github", true}, StyleCase{"openai", "openai", true},
                                           StyleCase{"malformed", "", true},
                                           StyleCase{"retry-after-seconds", "", false},
                                           StyleCase{"retry-after-date", "", false}, StyleCase{"none", "", false}),
                         [](const ::testing::TestParamInfo<StyleCase>& p) {
                           std::string n = p.param.style;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// --- idempotency ---------------------------------------------------------------

TEST(Fetch, PostWithoutIdempotencyKeyIsNeverRetried) {
  TempDir dir;
  Mock mock({"--fail-rate", "1", "--limit", "100"});  // every answer a 503
  ASSERT_GT(mock.port(), 0);
  const RunResult r = run(
      fetch_argv({"-X", "POST", "-d", "{\"n\":1}", mock.url("/orders"), "-o", "/dev/null", "--stats",
                  dir / "stats.json", "--max-attempts", "3", "--resume-file", dir / "resume.json"}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const json stats = read_json(dir / "stats.json");
  EXPECT_EQ(stats["attempts"], 1);
  ASSERT_EQ(stats["unfinished"].size(), 1u);
  EXPECT_EQ(stats["unfinished"][0]["outcome"], "not_retryable");
  EXPECT_EQ(mock.stats()["totals"]["requests"], 1);
  EXPECT_FALSE(fs::exists(dir / "resume.json"));  // not_retryable is not resumed
}

TEST(Fetch, PostWithIdempotencyKeyIsRetried) {
  TempDir dir;
  Mock mock({"--fail-rate", "1", "--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  const RunResult r = run(
      fetch_argv({"-d", "{\"n\":1}", "--idempotency-key", "k-1", mock.url("/orders"), "-o", "/dev/null", "--stats",
                  dir / "stats.json", "--max-attempts", "2", "--resume-file", dir / "resume.json", "-s"}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const json stats = read_json(dir / "stats.json");
  EXPECT_EQ(stats["attempts"], 2);
  EXPECT_EQ(stats["unfinished"][0]["outcome"], "exhausted");
  EXPECT_EQ(mock.stats()["totals"]["requests"], 2);
}

TEST(Fetch, PostBatchHittingTheLimitSendsEachRequestOnce) {
  TempDir dir;
  Mock mock({"--limit", "2", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  const RunResult r = run(
      fetch_argv({"-X", "POST", "--urls", mock.url_file(dir / "urls.txt", 6), "--jobs", "3", "-o", "/dev/null",
                  "--stats", dir / "stats.json", "--resume-file", dir / "resume.json", "-s"}));
  const json stats = read_json(dir / "stats.json");
  const json server = mock.stats();
  EXPECT_EQ(server["totals"]["requests"], 6);  // never a second send
  EXPECT_EQ(stats["attempts"], 6);
  EXPECT_EQ(server["totals"]["premature"], 0);
  EXPECT_EQ(r.exit_code, stats["done"] == 6 ? 0 : 1);
  for (const auto& u : stats["unfinished"]) EXPECT_EQ(u["outcome"], "not_retryable") << u.dump();
}

// --- interruption and resume ------------------------------------------------------

TEST(Fetch, SigintWritesTheResumeFileAndResumeFinishes) {
  TempDir dir;
  Mock mock({"--limit", "5", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  constexpr int kRequests = 20;
  const std::string resume = dir / "resume.json";
  BackgroundProcess first(fetch_argv({"--urls", mock.url_file(dir / "urls.txt", kRequests), "--jobs", "4", "-o",
                                      "/dev/null", "--stats", dir / "first.json", "--resume-file", resume}));
  ASSERT_TRUE(first.running());
  // Interrupt once the run is well under way (bounded wait).
  for (int i = 0; i < 200; ++i) {
    const json s = mock.stats();
    if (s.is_object() && s["totals"]["accepted"].get<int>() >= 6) break;
    std::this_thread::sleep_for(50ms);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const RunResult r1 = first.stop(SIGINT, 10s);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r1.exit_code, 130) << r1.err;
  EXPECT_LT(took, 3s);  // waits are cancelled at once, not served out
  EXPECT_NE(r1.err.find("--resume"), std::string::npos) << r1.err;

  const json s1 = read_json(dir / "first.json");
  const json saved = read_json(resume);
  ASSERT_TRUE(saved.is_object());
  EXPECT_EQ(s1["interrupted"], true);
  const int done1 = s1["done"].get<int>();
  const int left = static_cast<int>(saved["requests"].size());
  EXPECT_GT(left, 0);
  EXPECT_EQ(done1 + left, kRequests);  // no request lost

  const RunResult r2 = run(fetch_argv({"--resume", resume, "--jobs", "4", "-o", "/dev/null", "--stats",
                                       dir / "second.json", "--resume-file", resume, "-s"}));
  EXPECT_EQ(r2.exit_code, 0) << r2.err;
  const json s2 = read_json(dir / "second.json");
  EXPECT_EQ(s2["requests"], left);
  EXPECT_EQ(s2["done"], left);
  EXPECT_FALSE(fs::exists(resume));  // nothing left to resume

  const json server = mock.stats();
  EXPECT_EQ(server["totals"]["premature"], 0) << server.dump();
  // Each URL accepted at least once (a request cancelled in flight may have been served too).
  EXPECT_GE(server["totals"]["accepted"].get<int>(), kRequests);
}

// A resumed run starts with the cooldown the server permitted (Pacer::block_until):
// nothing goes to that origin before the saved not_before.
TEST(Fetch, ResumeWaitsForTheSavedPermittedTime) {
  TempDir dir;
  Mock mock({"--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  const abide::WallTime not_before = abide::system_wall_clock().now() + 3s;
  const std::string resume = dir / "resume.json";
  {
    std::ofstream f(resume);
    f << json{{"version", 1},
              {"requests",
               json::array({json{{"url", mock.url("/a")}, {"not_before", abide::format_rfc3339(not_before)}},
                            json{{"url", mock.url("/b")}}})}}
             .dump();
  }
  const RunResult r = run(fetch_argv({"--resume", resume, "-o", "/dev/null", "--stats", dir / "stats.json",
                                      "--resume-file", dir / "next.json", "-s"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Both requests (the second has no time of its own: the cooldown is the origin's) were sent
  // only once the permitted time had come.
  EXPECT_GE(abide::system_wall_clock().now(), not_before);
  const json stats = read_json(dir / "stats.json");
  EXPECT_EQ(stats["done"], 2);
  EXPECT_GE(stats["waited_s"].get<double>(), 2 * 1.0);  // each waited most of the 3 s
  EXPECT_EQ(mock.stats()["totals"]["requests"], 2);
}

// --- Redis-shared quota --------------------------------------------------------------

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

bool can_connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

TEST(Fetch, RedisSharesTheQuotaAcrossTwoProcesses) {
  if (!kRedisBuiltIn) GTEST_SKIP() << "abide was built without abide::redis";
  if (!fs::exists("/usr/bin/redis-server")) GTEST_SKIP() << "no /usr/bin/redis-server";
  const int redis_port = free_port();
  BackgroundProcess redis({"/usr/bin/redis-server", "--port", std::to_string(redis_port), "--bind", "127.0.0.1",
                           "--save", "", "--appendonly", "no", "--loglevel", "warning"});
  ASSERT_TRUE(redis.running());
  bool up = false;
  for (int i = 0; i < 200 && !(up = can_connect(redis_port)); ++i) std::this_thread::sleep_for(25ms);
  ASSERT_TRUE(up) << "redis-server did not start";
  const std::string store = "redis://127.0.0.1:" + std::to_string(redis_port) + "/fetch-test";

  TempDir dir;
  Mock mock({"--limit", "5", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  constexpr int kEach = 10;
  BackgroundProcess a(
      fetch_argv({"--urls", mock.url_file(dir / "a.txt", kEach, 1), "--jobs", "3", "-o", "/dev/null", "--store", store,
                  "--stats", dir / "a.json", "--resume-file", dir / "ra.json", "-s"}));
  BackgroundProcess b(
      fetch_argv({"--urls", mock.url_file(dir / "b.txt", kEach, 101), "--jobs", "3", "-o", "/dev/null", "--store",
                  store, "--stats", dir / "b.json", "--resume-file", dir / "rb.json", "-s"}));
  const RunResult ra = a.wait(60s);
  const RunResult rb = b.wait(60s);
  if (ra.err.find("without Redis support") != std::string::npos) GTEST_SKIP() << ra.err;
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_EQ(read_json(dir / "a.json")["done"], kEach);
  EXPECT_EQ(read_json(dir / "b.json")["done"], kEach);
  const json server = mock.stats();
  EXPECT_EQ(server["totals"]["premature"], 0) << server.dump();
  EXPECT_EQ(server["totals"]["accepted"], 2 * kEach);
  EXPECT_EQ(limited_after_first_window(server), 0) << server["windows"].dump();
  redis.stop(SIGTERM, 10s);
}

// --- deadlines, outputs, usage ---------------------------------------------------------

TEST(Fetch, DeadlineEndsWaitingRequestsWithTheirPermittedTime) {
  TempDir dir;
  Mock mock({"--limit", "1", "--window", "30", "--style", "retry-after-seconds"});
  ASSERT_GT(mock.port(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const RunResult r = run(
      fetch_argv({"--urls", mock.url_file(dir / "urls.txt", 3), "--jobs", "1", "--deadline", "2", "-o", "/dev/null",
                  "--stats", dir / "stats.json", "--resume-file", dir / "resume.json", "-s"}));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 15s);  // not the 30 s window
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const json stats = read_json(dir / "stats.json");
  EXPECT_EQ(stats["done"], 1);
  ASSERT_EQ(stats["unfinished"].size(), 2u);
  for (const auto& u : stats["unfinished"]) {
    EXPECT_EQ(u["outcome"], "deadline_exceeded") << u.dump();
    EXPECT_TRUE(u["not_before"].is_string()) << u.dump();
  }
  EXPECT_EQ(read_json(dir / "resume.json")["requests"].size(), 2u);
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0);
}

TEST(Fetch, SilentServerEndsAtTheDeadline) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::listen(fd, 4);  // never accepted, never answered
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  TempDir dir;
  const RunResult r = run(fetch_argv({"http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/", "--deadline",
                                      "0.5", "--stats", dir / "stats.json", "--resume-file", dir / "resume.json"}));
  ::close(fd);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("deadline"), std::string::npos) << r.err;
  const json stats = read_json(dir / "stats.json");
  ASSERT_EQ(stats["unfinished"].size(), 1u);
  EXPECT_EQ(stats["unfinished"][0]["outcome"], "deadline_exceeded");
}

TEST(Fetch, OutputsOneFileDirectoryAndStdout) {
  TempDir dir;
  Mock mock({"--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  RunResult r = run(fetch_argv({mock.url("/items/7")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"ok\":true"), std::string::npos) << r.out;

  r = run(fetch_argv({mock.url("/items/8"), "-o", dir / "one.json"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(slurp(dir / "one.json").find("/items/8"), std::string::npos);

  r = run(fetch_argv({"--urls", mock.url_file(dir / "urls.txt", 3), "--output-dir", dir / "out", "-s"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(slurp(dir / "out/000001-1").find("/items/1"), std::string::npos);
  EXPECT_NE(slurp(dir / "out/000003-3").find("/items/3"), std::string::npos);

  r = run(fetch_argv({"--urls", dir / "urls.txt", "-o", "/dev/null", "-s"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(Fetch, VerboseRedactsCredentials) {
  Mock mock({"--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  const RunResult r = run(fetch_argv({"-v", "-H", "Authorization: Bearer s3cr3t-token", "-H", "X-Api-Key: abc123key",
                                      "-H", "Cookie: session=zzz999", "-H", "X-Visible: hello",
                                      mock.url("/items/1?api_key=qqq777&page=2"), "-o", "/dev/null"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* secret : {"s3cr3t-token", "abc123key", "zzz999", "qqq777"})
    EXPECT_EQ(r.err.find(secret), std::string::npos) << secret << " leaked:\n" << r.err;
  EXPECT_NE(r.err.find("[redacted]"), std::string::npos);
  EXPECT_NE(r.err.find("X-Visible: hello"), std::string::npos);
  EXPECT_NE(r.err.find("page=2"), std::string::npos);
  EXPECT_NE(r.err.find("done"), std::string::npos);  // the decision is printed
}

TEST(Fetch, UsageErrorsExitTwo) {
  EXPECT_EQ(run(fetch_argv({})).exit_code, 2);
  EXPECT_EQ(run(fetch_argv({"http://127.0.0.1:1/", "--urls", "x"})).exit_code, 2);
  EXPECT_EQ(run(fetch_argv({"-H", "no colon", "http://127.0.0.1:1/"})).exit_code, 2);
  EXPECT_EQ(run(fetch_argv({"--store", "postgres://x", "http://127.0.0.1:1/"})).exit_code, 2);
  EXPECT_EQ(run(fetch_argv({"--profile", "no-such-vendor", "http://127.0.0.1:1/"})).exit_code, 2);
  EXPECT_EQ(run(fetch_argv({"--pacing", "fast", "http://127.0.0.1:1/"})).exit_code, 2);
  EXPECT_EQ(run(fetch_argv({"--jobs", "0", "http://127.0.0.1:1/"})).exit_code, 2);
}

TEST(Fetch, HelpDocumentsResumeAndStats) {
  const RunResult r = run(fetch_argv({"--help"}));
  EXPECT_EQ(r.exit_code, 0);
  for (const char* s : {"--resume-file", "abide-resume.json", "status_counts", "unfinished", "--store"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
}


// --- hardening (issue 9) -----------------------------------------------------------------

// How often `needle` occurs in `text`.
std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

// Reads the fetch's output while it runs until stderr contains `text` or it
// ends; bounded.
bool wait_for_stderr(BackgroundProcess& p, const std::string& text, std::chrono::seconds limit) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (p.err_so_far().find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    p.read_line(50ms);  // collects stderr meanwhile (bodies go to /dev/null)
  }
  return true;
}

// Polls the mock server until it accepted `n` requests; bounded.
// Up to 30 s: it returns as soon as the count is reached, and a machine running
// the sanitizer builds side by side can take seconds to start a fetch.
bool wait_for_accepted(const Mock& mock, int n) {
  for (int i = 0; i < 1200; ++i) {
    const json s = mock.stats();
    if (s.is_object() && s["totals"]["accepted"].get<int>() >= n) return true;
    std::this_thread::sleep_for(25ms);
  }
  return false;
}

TEST(Fetch, RedisKilledMidBatchAndRestartedLosesNoRequest) {
  if (!kRedisBuiltIn) GTEST_SKIP() << "abide was built without abide::redis";
  RedisServer redis(RedisServer::Options{true, false, {}});
  if (!redis.start()) GTEST_SKIP() << "no redis-server";
  TempDir dir;
  Mock mock({"--limit", "5", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  constexpr int kRequests = 20;  // about 4 s at 5 per second: long enough to kill Redis in the middle
  BackgroundProcess fetch(fetch_argv({"--urls", mock.url_file(dir / "urls.txt", kRequests), "--jobs", "4", "-o",
                                      "/dev/null", "--store", redis.tcp_url("kill-test"), "--max-attempts", "20",
                                      "--stats", dir / "stats.json", "--resume-file", dir / "resume.json", "-s"}));
  ASSERT_TRUE(fetch.running());
  ASSERT_TRUE(wait_for_accepted(mock, 4)) << fetch.err_so_far();
  if (fetch.err_so_far().find("without Redis support") != std::string::npos) GTEST_SKIP() << fetch.err_so_far();

  redis.kill_now();
  // The documented fail mode (abide/redis_store.h, kFallback): one line says
  // Redis is down and the run goes on with in-process state.
  const bool noticed = wait_for_stderr(fetch, ": down: ", 20s);
  ASSERT_TRUE(redis.start()) << "redis-server did not restart";
  const RunResult r = fetch.wait(60s);
  EXPECT_TRUE(noticed) << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;

  const json stats = read_json(dir / "stats.json");
  ASSERT_TRUE(stats.is_object()) << r.err;
  EXPECT_EQ(stats["requests"], kRequests);
  EXPECT_EQ(stats["done"], kRequests);  // nothing lost
  EXPECT_TRUE(stats["unfinished"].empty()) << stats["unfinished"].dump();
  EXPECT_FALSE(fs::exists(dir / "resume.json"));
  EXPECT_EQ(mock.stats()["totals"]["accepted"], kRequests);  // and nothing sent twice

  // One outage, reported once (not once per request or per connection).
  EXPECT_EQ(occurrences(r.err, ": down: "), 1u) << r.err;
  EXPECT_EQ(occurrences(r.err, "going on with in-process quota state"), 1u) << r.err;
  EXPECT_LE(occurrences(r.err, ": recovered: "), 1u) << r.err;
  EXPECT_EQ(r.err.find("script_error"), std::string::npos) << r.err;
}

// Values that must never appear in anything `abide fetch` writes.
constexpr const char* kAuthSecret = "auth-5ecret-Zq81";
constexpr const char* kCookieSecret = "cookie-5ecret-Wm27";
constexpr const char* kProxySecret = "proxy-5ecret-Hx64";
constexpr const char* kApiKeySecret = "apikey-5ecret-Pv39";
constexpr const char* kRedisSecret = "redispw-5ecret-Kd52";
constexpr const char* kQuerySecret = "query-5ecret-Jt15";  // a credential in the URL's query

std::vector<std::string> secret_headers() {
  return {"-H", std::string("Authorization: Bearer ") + kAuthSecret,
          "-H", std::string("Cookie: session=") + kCookieSecret,
          "-H", std::string("Proxy-Authorization: Basic ") + kProxySecret,
          "-H", std::string("X-Api-Key: ") + kApiKeySecret};
}

void expect_no_secret(const std::string& text, const std::string& where) {
  for (const char* secret : {kAuthSecret, kCookieSecret, kProxySecret, kApiKeySecret, kRedisSecret, kQuerySecret})
    EXPECT_EQ(text.find(secret), std::string::npos) << secret << " leaked in " << where << ":\n" << text;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Fetch, SecretsAppearInNoOutputInAnyMode) {
  if (!kRedisBuiltIn) GTEST_SKIP() << "abide was built without abide::redis";
  RedisServer redis(RedisServer::Options{true, false, {"--requirepass", kRedisSecret}});
  if (!redis.start()) GTEST_SKIP() << "no redis-server";
  const std::string port = std::to_string(redis.port());
  const std::string store_url = "redis://:" + std::string(kRedisSecret) + "@127.0.0.1:" + port + "/secrets";
  const std::string store_env = "redis://127.0.0.1:" + port + "/secrets";  // password from the environment
  TempDir dir;

  // 1. --verbose, --stats, bodies on stdout, the Redis password in the URL.
  {
    Mock mock({"--limit", "100"});
    ASSERT_GT(mock.port(), 0);
    const RunResult r = run(fetch_argv(
        with(secret_headers(), {"-v", "--store", store_url, "--stats", dir / "verbose.json", "--resume-file",
                                dir / "unused.json", mock.url("/items/1?api_key=" + std::string(kQuerySecret))})));
    if (r.err.find("without Redis support") != std::string::npos) GTEST_SKIP() << r.err;
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("Authorization: [redacted]"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Proxy-Authorization: [redacted]"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(": down: "), std::string::npos) << "the password from the URL did not log in:\n" << r.err;
    expect_no_secret(r.out, "stdout (--verbose)");
    expect_no_secret(r.err, "stderr (--verbose)");
    expect_no_secret(slurp(dir / "verbose.json"), "--stats (--verbose)");
  }

  // 2. A batch interrupted by SIGINT (password from ABIDE_REDIS_PASSWORD): the
  //    resume file holds no header, then --resume with the headers given again.
  {
    ScopedEnv env("ABIDE_REDIS_PASSWORD", kRedisSecret);
    Mock mock({"--limit", "2", "--window", "1"});
    ASSERT_GT(mock.port(), 0);
    constexpr int kRequests = 12;
    const std::string resume = dir / "resume.json";
    BackgroundProcess first(fetch_argv(
        with(secret_headers(), {"--urls", mock.url_file(dir / "urls.txt", kRequests), "--jobs", "2", "-o", "/dev/null",
                                "--store", store_env, "--stats", dir / "first.json", "--resume-file", resume})));
    ASSERT_TRUE(first.running());
    ASSERT_TRUE(wait_for_accepted(mock, 3)) << first.err_so_far();
    const RunResult r1 = first.stop(SIGINT, 10s);
    EXPECT_EQ(r1.exit_code, 130) << r1.err;
    EXPECT_EQ(r1.err.find(": down: "), std::string::npos) << "the password from the environment did not log in:\n"
                                                          << r1.err;
    expect_no_secret(r1.out, "stdout (SIGINT)");
    expect_no_secret(r1.err, "stderr (SIGINT)");
    expect_no_secret(slurp(dir / "first.json"), "--stats (SIGINT)");
    const std::string saved_text = slurp(resume);
    expect_no_secret(saved_text, "the resume file");
    const json saved = read_json(resume);
    ASSERT_TRUE(saved.is_object()) << r1.err;
    const int left = static_cast<int>(saved["requests"].size());
    ASSERT_GT(left, 0);
    for (const auto& e : saved["requests"]) EXPECT_FALSE(e.contains("headers")) << e.dump();

    const RunResult r2 = run(
        fetch_argv(with(secret_headers(), {"--resume", resume, "-v", "--jobs", "2", "-o", "/dev/null", "--store",
                                           store_env, "--stats", dir / "second.json", "--resume-file", resume})));
    EXPECT_EQ(r2.exit_code, 0) << r2.err;
    const json s2 = read_json(dir / "second.json");
    EXPECT_EQ(s2["done"], left);
    // The headers given again went out with every resumed request (shown redacted).
    EXPECT_EQ(occurrences(r2.err, ">   Authorization: [redacted]"), static_cast<std::size_t>(left)) << r2.err;
    EXPECT_EQ(occurrences(r2.err, ">   X-Api-Key: [redacted]"), static_cast<std::size_t>(left)) << r2.err;
    expect_no_secret(r2.out, "stdout (--resume)");
    expect_no_secret(r2.err, "stderr (--resume)");
    expect_no_secret(slurp(dir / "second.json"), "--stats (--resume)");
    EXPECT_EQ(mock.stats()["totals"]["premature"], 0);
  }

  // 3. Error messages: Redis unreachable, a wrong password, a server that is
  //    not there, and usage errors that quote what was given.
  {
    const DeadPort dead;
    ASSERT_GT(dead.port(), 0);
    const std::string dead_port = std::to_string(dead.port());
    RunResult r = run(fetch_argv(
        with(secret_headers(), {"--store", "redis://:" + std::string(kRedisSecret) + "@127.0.0.1:" + dead_port,
                                "--stats", dir / "e1.json", "--resume-file", dir / "e1r.json", "--connect-timeout", "2",
                                "--max-attempts", "1", "http://127.0.0.1:" + dead_port + "/x?token=" + kQuerySecret})));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    // An unusable store is an error at start, said without the password.
    EXPECT_NE(r.err.find("cannot connect to redis"), std::string::npos) << r.err;
    expect_no_secret(r.out, "stdout (unreachable)");
    expect_no_secret(r.err, "stderr (unreachable)");
    expect_no_secret(slurp(dir / "e1.json"), "--stats (unreachable)");

    Mock mock({"--limit", "100"});
    ASSERT_GT(mock.port(), 0);
    r = run(fetch_argv(
        with(secret_headers(), {"--store", "redis://:wrong-" + std::string(kRedisSecret) + "@127.0.0.1:" + port,
                                "--store-fallback", "-o", "/dev/null", mock.url("/items/2")})));
    EXPECT_EQ(r.exit_code, 0) << r.err;  // --store-fallback: the run goes on
    EXPECT_NE(r.err.find("authentication failed"), std::string::npos) << r.err;
    expect_no_secret(r.err, "stderr (wrong password)");

    for (const std::vector<std::string>& bad :
         {std::vector<std::string>{"-H", std::string("Authorization Bearer ") + kAuthSecret},
          std::vector<std::string>{"-H", std::string("X-Api(Key: ") + kApiKeySecret},
          std::vector<std::string>{"--store", "redis://:" + std::string(kRedisSecret) + "@127.0.0.1:notaport"},
          std::vector<std::string>{"--store",
                                   "redis://:" + std::string(kRedisSecret) + "@127.0.0.1:" + port + "/%zz"}}) {
      r = run(fetch_argv(with(bad, {mock.url("/items/3")})));
      EXPECT_EQ(r.exit_code, 2) << bad[1] << "\n" << r.err;
      expect_no_secret(r.out, "stdout (usage error)");
      expect_no_secret(r.err, "stderr (usage error)");
    }
  }
}

// --- credentials in URLs and the resume file's permissions -----------------------------

TEST(Fetch, FragmentAndPercentEncodedCredentialsAreRedacted) {
  const DeadPort dead;
  ASSERT_GT(dead.port(), 0);
  TempDir dir;
  // OAuth's implicit flow puts tokens in the fragment; names may be percent-encoded.
  const std::string url = "http://127.0.0.1:" + std::to_string(dead.port()) +
                          "/cb?%61ccess_token=Pq1secret&api%5Fkey=Pq2secret&API%5fKEY=Pq3secret&page=2"
                          "#access_token=Fr1secret&token_type=bearer&id_token=Fr2secret&state=xyz";
  const RunResult r = run(fetch_argv({"-v", "--max-attempts", "1", "--connect-timeout", "2", "--stats",
                                      dir / "stats.json", "--resume-file", dir / "resume.json", url}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string stats = slurp(dir / "stats.json");
  ASSERT_FALSE(stats.empty());
  for (const char* secret : {"Pq1secret", "Pq2secret", "Pq3secret", "Fr1secret", "Fr2secret"}) {
    EXPECT_EQ(r.err.find(secret), std::string::npos) << secret << " leaked on stderr:\n" << r.err;
    EXPECT_EQ(r.out.find(secret), std::string::npos) << secret << " leaked on stdout";
    EXPECT_EQ(stats.find(secret), std::string::npos) << secret << " leaked in --stats:\n" << stats;
  }
  // What is no credential stays readable, and the names are kept as given.
  for (const char* kept : {"page=2", "state=xyz", "%61ccess_token=[redacted]", "api%5Fkey=[redacted]",
                           "#access_token=[redacted]", "id_token=[redacted]"}) {
    EXPECT_NE(r.err.find(kept), std::string::npos) << kept << "\n" << r.err;
    EXPECT_NE(stats.find(kept), std::string::npos) << kept << "\n" << stats;
  }
  // The resume file keeps the URL as given: it must be able to send it again.
  const json saved = read_json(dir / "resume.json");
  ASSERT_TRUE(saved.is_object());
  ASSERT_EQ(saved["requests"].size(), 1u);
  EXPECT_EQ(saved["requests"][0]["url"], url);
}

TEST(Fetch, AUrlLibcurlCannotParseIsShownAsAPlaceholder) {
  TempDir dir;
  // An unencoded '#' in the password: libcurl reads "user:Pw1" as host and
  // port, and refuses the URL. Nothing of it is shown, not even a guess.
  const std::string url = "http://user:Pw1#Pw2secret@127.0.0.1:1/x?token=Pw3secret";
  const RunResult r = run(fetch_argv(
      {"-v", "--max-attempts", "1", "--stats", dir / "stats.json", "--resume-file", dir / "resume.json", url}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string stats = slurp(dir / "stats.json");
  ASSERT_FALSE(stats.empty());
  for (const char* secret : {"Pw1", "Pw2secret", "Pw3secret"}) {
    EXPECT_EQ(r.err.find(secret), std::string::npos) << secret << " leaked on stderr:\n" << r.err;
    EXPECT_EQ(r.out.find(secret), std::string::npos) << secret << " leaked on stdout";
    EXPECT_EQ(stats.find(secret), std::string::npos) << secret << " leaked in --stats:\n" << stats;
  }
  EXPECT_NE(r.err.find(cli::kUnparsedUrl), std::string::npos) << r.err;
  EXPECT_NE(stats.find(cli::kUnparsedUrl), std::string::npos) << stats;
}

TEST(ShownUrl, ParsedUrlsAreRedacted) {
  EXPECT_EQ(cli::shown_url("https://user:Pw1secret@api.example/x?token=Pw2secret&page=2#id_token=Pw3secret"),
            "https://[redacted]@api.example/x?token=[redacted]&page=2#id_token=[redacted]");
  EXPECT_EQ(cli::shown_url("http://127.0.0.1:8080/items/1"), "http://127.0.0.1:8080/items/1");
}

TEST(ShownUrl, WhatLibcurlRefusesIsAPlaceholder) {
  for (const std::string& url :
       {std::string("http://user:p#Pw1secret@host/"), std::string("http://user:Pw1 secret@host/"),
        std::string("http://host:99999/?token=Pw1secret"), std::string("http://host/\x01?token=Pw1secret"),
        std::string("http://user:Pw1\0secret@host/", 28), std::string("user:Pw1secret@host/path"), std::string()}) {
    const std::string shown = cli::shown_url(url);
    EXPECT_EQ(shown.find("Pw1"), std::string::npos) << shown;
    EXPECT_EQ(shown.find("secret"), std::string::npos) << shown;
  }
  EXPECT_EQ(cli::shown_url("http://user:p#Pw1secret@host/"), cli::kUnparsedUrl);
  EXPECT_EQ(cli::shown_url("http://host/ x"), cli::kUnparsedUrl);
}

TEST(Fetch, StoreSaysWhetherRedisIsBuiltIn) {
  const RunResult help = run(fetch_argv({"--help"}));
  EXPECT_EQ(help.exit_code, 0);
#ifdef ABIDE_TEST_WITH_REDIS
  EXPECT_NE(help.out.find("redis://"), std::string::npos) << help.out;
#else
  EXPECT_EQ(help.out.find("redis://"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("without Redis support"), std::string::npos) << help.out;
  // Refused before anything is sent, and without repeating the URL's password.
  const RunResult r = run(fetch_argv({"--store", "redis://:Rpw1secret@127.0.0.1:1/x", "http://127.0.0.1:1/"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("built without Redis support"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--store memory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Rpw1secret"), std::string::npos) << r.err;
#endif
}

// The permission bits of a file.
unsigned mode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<unsigned>(st.st_mode & 07777) : 0xffffu;
}

// Sets the umask of this process (and so of the children it starts) while it lives.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t m) : old_(::umask(m)) {}
  ~ScopedUmask() { ::umask(old_); }
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

 private:
  mode_t old_;
};

TEST(Fetch, ResumeFileIsOwnerOnlyEvenWhenItExistedWider) {
  const DeadPort dead;
  ASSERT_GT(dead.port(), 0);
  TempDir dir;
  const std::string resume = dir / "resume.json";
  // An older resume file readable by everyone, and a leftover temporary too.
  { std::ofstream(resume) << "{}\n"; }
  { std::ofstream(resume + ".tmp") << "stale\n"; }
  ASSERT_EQ(::chmod(resume.c_str(), 0644), 0);
  ASSERT_EQ(::chmod((resume + ".tmp").c_str(), 0666), 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(dead.port()) + "/x?token=Rz9secret";
  RunResult r;
  {
    // Umask 0: the mode comes from abide, not from a careful environment.
    const ScopedUmask open_umask(0);
    r = run(fetch_argv({"--max-attempts", "1", "--connect-timeout", "2", "--stats", dir / "stats.json", "--resume-file",
                        resume, url}));
  }
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(mode_of(resume), 0600u) << std::oct << mode_of(resume);
  EXPECT_FALSE(fs::exists(resume + ".tmp"));
  const json saved = read_json(resume);
  ASSERT_TRUE(saved.is_object()) << slurp(resume);
  EXPECT_EQ(saved["requests"][0]["url"], url);
  // The stats summary holds no credential: it keeps the usual permissions.
  EXPECT_EQ(mode_of(dir / "stats.json"), 0666u) << std::oct << mode_of(dir / "stats.json");
}

// --- server bytes never reach a terminal raw ----------------------------------------------

// A loopback server that answers every request with the same raw bytes (what
// no HTTP library would let a test write: control bytes, invalid UTF-8).
class RawServer {
 public:
  explicit RawServer(std::string answer) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) return;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~RawServer() {
    stop_ = true;
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  RawServer(const RawServer&) = delete;
  RawServer& operator=(const RawServer&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

 private:
  void serve() {
    while (!stop_) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;  // shut down
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos && request.size() < 65536) {
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        request.append(buf, static_cast<std::size_t>(n));
      }
      std::size_t sent = 0;
      while (sent < answer_.size()) {
        const ssize_t n = ::send(c, answer_.data() + sent, answer_.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<std::size_t>(n);
      }
      ::close(c);
    }
  }
  std::string answer_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A response head with ESC, BEL, DEL, a bare CR and invalid UTF-8 in the
// reason phrase, header values, policy names and vendor headers.
std::string hostile_head() {
  // One literal (GCC 12 warns falsely on a chain of std::string +).
  return "HTTP/1.1 429 Too \x1b[31mMany\x07 \xff\xfe\r\n"
         "Date: Thu, 01 Jan 2026 00:00:00 GMT\r\n"
         "Retry-After: 5\x1b]0;pwned\x07\r\n"
         "X-Evil: \x1b[2J\x1b[H bell\x07 del\x7f bare\rcr \xc3\x28 \xff\r\n"
         "RateLimit-Policy: \"bu\x1brst\";q=10;w=60, \"ok\";q=5;w=\xc3\xa9\r\n"
         "RateLimit: \"burst\";r=0;t=30;x=\x1b\r\n"
         "X-RateLimit-Remaining: 0\x1b[0m\x07\r\n"
         "X-RateLimit-Reset: \xe2\x80\xae"
         "60\r\n"
         "Content-Length: 0\r\n"
         "Connection: close\r\n"
         "\r\n";
}

// No byte below 0x20 except '\n' (and '\t'), no DEL.
void expect_terminal_safe(const std::string& text, const std::string& where) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const bool ok = (c >= 0x20 && c != 0x7f) || c == '\n' || c == '\t';
    if (!ok) {
      ADD_FAILURE() << where << ": byte 0x" << std::hex << unsigned{c} << " at " << std::dec << i << ":\n"
                    << text.substr(i > 80 ? i - 80 : 0, 160);
      return;
    }
  }
}

TEST(Fetch, VerboseShowsTheResponsesWarnings) {
  // A day name that does not match its date (1 Jan 2100 is a Friday): read as
  // the date, and said so.
  RawServer server("HTTP/1.1 503 Service Unavailable\r\nRetry-After: Mon, 01 Jan 2100 00:00:00 GMT\r\n"
                   "Content-Length: 0\r\nConnection: close\r\n\r\n");
  ASSERT_GT(server.port(), 0);
  TempDir dir;
  const RunResult r = run(fetch_argv({"-v", "--max-attempts", "2", "--max-wait", "60", "--resume-file",
                                      dir / "resume.json", "-o", "/dev/null", server.url("/x")}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("] warning: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("day name does not match"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("deferred"), std::string::npos) << r.err;  // the date's wait, not a backoff
}

TEST(Fetch, ServerBytesNeverReachTheTerminalRaw) {
  RawServer server(hostile_head());
  ASSERT_GT(server.port(), 0);
  TempDir dir;
  const RunResult r = run(fetch_argv({"-v", "--max-attempts", "1", "--stats", dir / "stats.json", "--resume-file",
                                      dir / "resume.json", "-o", "/dev/null", server.url("/x")}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("X-Evil: \\x1b[2J"), std::string::npos) << r.err;  // shown, escaped
  expect_terminal_safe(r.out, "fetch -v stdout");
  expect_terminal_safe(r.err, "fetch -v stderr");
  const std::string stats = slurp(dir / "stats.json");
  expect_terminal_safe(stats, "--stats");
  EXPECT_TRUE(json::accept(stats)) << stats;
  const std::string resume = slurp(dir / "resume.json");
  expect_terminal_safe(resume, "resume file");
  EXPECT_TRUE(resume.empty() || json::accept(resume)) << resume;

  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"explain", "--now", "2026-01-01T00:00:00Z"},
        std::vector<std::string>{"explain", "--now", "2026-01-01T00:00:00Z", "--host", "api.github.com"},
        std::vector<std::string>{"explain", "--json", "--now", "2026-01-01T00:00:00Z"},
        std::vector<std::string>{"explain", "--json", "--now", "2026-01-01T00:00:00Z", "--host", "api.github.com"},
        std::vector<std::string>{"parse", "ratelimit", "--now", "2026-01-01T00:00:00Z"},
        std::vector<std::string>{"parse", "ratelimit", "--now", "2026-01-01T00:00:00Z", "--host", "api.github.com"}}) {
    std::vector<std::string> argv{ABIDE_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    const RunResult e = run(argv, hostile_head());
    std::string where;
    for (const auto& a : args) where += a + " ";
    EXPECT_EQ(e.exit_code, 0) << where << e.err;
    expect_terminal_safe(e.out, where + "stdout");
    expect_terminal_safe(e.err, where + "stderr");
    if (where.find("--json") != std::string::npos || args[0] == "parse") {
      EXPECT_TRUE(json::accept(e.out)) << where << e.out;
    }
  }
}


// --- streamed bodies, --max-filesize, pacer keys, --profile-file --------------

// A cpp-httplib server inside the test, on 127.0.0.1, for answers the mock
// server does not give (big or chunked bodies, a 503 then a 200).
class LocalServer {
 public:
  explicit LocalServer(const std::function<void(httplib::Server&)>& routes) {
    routes(server_);
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ > 0) thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 5000 && port_ > 0 && !server_.is_running(); ++i) std::this_thread::sleep_for(1ms);
  }
  ~LocalServer() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
};

// The byte at `offset` of the test bodies: a pattern that shows a lost, doubled
// or reordered chunk.
char pattern_byte(std::uint64_t offset) { return static_cast<char>('a' + (offset / 1000 + offset) % 26); }

// Serves `total` pattern bytes, chunked (no Content-Length), 64 KiB at a time.
void serve_pattern(httplib::Response& res, std::uint64_t total) {
  res.set_chunked_content_provider("application/octet-stream", [total](std::size_t offset, httplib::DataSink& sink) {
    if (offset >= total) {
      sink.done();
      return true;
    }
    std::string chunk(static_cast<std::size_t>(std::min<std::uint64_t>(64 * 1024, total - offset)), '\0');
    for (std::size_t i = 0; i < chunk.size(); ++i) chunk[i] = pattern_byte(offset + i);
    return sink.write(chunk.data(), chunk.size());
  });
}

// True when the file holds exactly `total` pattern bytes.
bool holds_pattern(const std::string& path, std::uint64_t total) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buf(1 << 20);
  std::uint64_t offset = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<std::size_t>(in.gcount());
    for (std::size_t i = 0; i < n; ++i)
      if (buf[i] != pattern_byte(offset + i)) return false;
    offset += n;
  }
  return offset == total;
}

// Runs the CLI with stdout and stderr to files; its exit status and peak
// resident set (ru_maxrss, KiB) from wait4.
struct Measured {
  int exit_code = -1;
  long max_rss_kib = -1;
};
Measured run_measured(const std::vector<std::string>& argv, const std::string& out, const std::string& err) {
  const std::vector<char*> args = exec_argv(argv);
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || e < 0) _exit(126);
    dup2(o, 1);
    dup2(e, 2);
    execv(args[0], args.data());
    _exit(127);
  }
  Measured m;
  int status = 0;
  rusage usage{};
  if (pid > 0 && wait4(pid, &status, 0, &usage) == pid) {
    m.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    m.max_rss_kib = usage.ru_maxrss;
  }
  return m;
}

TEST(FetchStreaming, ALargeBodyStreamsToTheFileWithFlatMemory) {
  // 128 MiB, twice the 64 MiB a kept body may have: reading it whole would
  // both fail the request and take at least that much memory.
  constexpr std::uint64_t kTotal = std::uint64_t{128} << 20;
  LocalServer server([&](httplib::Server& s) {
    s.Get("/big", [&](const httplib::Request&, httplib::Response& res) { serve_pattern(res, kTotal); });
  });
  ASSERT_GT(server.port(), 0);
  TempDir dir;
  const Measured m = run_measured(fetch_argv({"-s", "-o", dir / "big.bin", server.url("/big")}), dir / "out",
                                  dir / "err");
  ASSERT_EQ(m.exit_code, 0) << slurp(dir / "err");
  EXPECT_EQ(fs::file_size(dir / "big.bin"), kTotal);
  EXPECT_TRUE(holds_pattern(dir / "big.bin", kTotal));
  EXPECT_GT(m.max_rss_kib, 0);
#if ABIDE_TEST_SANITIZED
  // A sanitizer keeps freed memory aside (AddressSanitizer's quarantine
  // alone holds up to 256 MB) and adds shadow memory: the bound is the plain
  // build's, where freed buffers are reused.
  RecordProperty("peak_rss_kib_under_sanitizer", static_cast<int>(m.max_rss_kib));
#else
  EXPECT_LT(m.max_rss_kib, 32 * 1024) << "peak RSS " << m.max_rss_kib << " KiB for a " << (kTotal >> 20) << " MiB body";
#endif
}

TEST(FetchStreaming, MaxFilesizeRefusesALargerBodyAndLeavesNoFile) {
  LocalServer server([&](httplib::Server& s) {
    s.Get("/chunked", [&](const httplib::Request&, httplib::Response& res) { serve_pattern(res, 1 << 20); });
    s.Get("/sized", [&](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(5000, 'x'), "text/plain");
    });
  });
  ASSERT_GT(server.port(), 0);
  TempDir dir;
  // Chunked: refused when the count passes the limit; what was written is removed.
  RunResult r = run(fetch_argv({"-o", dir / "c.bin", "--max-filesize", "1000", server.url("/chunked")}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--max-filesize 1000"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "c.bin"));
  // A Content-Length over the limit: refused on the head; in --output-dir no file either.
  r = run(fetch_argv({"--output-dir", dir / "out", "--max-filesize", "4999", server.url("/sized")}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--max-filesize 4999"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(dir / "out"));
  // At the limit: written whole.
  r = run(fetch_argv({"-o", dir / "s.txt", "--max-filesize", "5000", server.url("/sized")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(slurp(dir / "s.txt"), std::string(5000, 'x'));
  // Larger than a kept body may be (64 MiB) is fine with a larger limit.
  r = run(fetch_argv({"-o", dir / "c.bin", "--max-filesize", "2000000", server.url("/chunked")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(holds_pattern(dir / "c.bin", 1 << 20));
}

TEST(FetchStreaming, ARetriedAnswersBodyNeverReachesTheOutput) {
  std::atomic<int> calls{0};
  LocalServer server([&](httplib::Server& s) {
    s.Get("/flaky", [&](const httplib::Request&, httplib::Response& res) {
      if (calls.fetch_add(1) % 2 == 0) {
        res.status = 503;
        res.set_header("Retry-After", "0");
        res.set_content("RETRIED-503-BODY", "text/plain");
      } else {
        res.set_content("final body", "text/plain");
      }
    });
  });
  ASSERT_GT(server.port(), 0);
  TempDir dir;
  RunResult r = run(fetch_argv({"-s", "-o", dir / "f.txt", server.url("/flaky")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(slurp(dir / "f.txt"), "final body");
  r = run(fetch_argv({"-s", server.url("/flaky")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "final body");
  EXPECT_EQ(calls.load(), 4);
}

TEST(FetchStreaming, BatchBodiesInOneOutputNeverInterleave) {
  // Four slow-ish bodies at once into one file: each must land whole.
  LocalServer server([&](httplib::Server& s) {
    s.Get(R"(/letter/([a-z]))", [&](const httplib::Request& req, httplib::Response& res) {
      const char c = req.matches[1].str()[0];
      res.set_chunked_content_provider("text/plain", [c](std::size_t offset, httplib::DataSink& sink) {
        if (offset >= 400 * 1024) {
          sink.done();
          return true;
        }
        std::this_thread::sleep_for(1ms);  // the server's pace, so that the transfers overlap
        const std::string chunk(16 * 1024, c);
        return sink.write(chunk.data(), chunk.size());
      });
    });
  });
  ASSERT_GT(server.port(), 0);
  TempDir dir;
  {
    std::ofstream urls(dir / "urls.txt");
    for (const char* l : {"a", "b", "c", "d"}) urls << server.url(std::string("/letter/") + l) << "\n";
  }
  const RunResult r = run(fetch_argv({"-s", "-j", "4", "--urls", dir / "urls.txt", "-o", dir / "all.txt"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string all = slurp(dir / "all.txt");
  ASSERT_EQ(all.size(), std::size_t{4} * 400 * 1024);
  std::string seen;
  for (std::size_t i = 0; i < all.size(); i += 400 * 1024) {
    EXPECT_EQ(all.find_first_not_of(all[i], i), i + 400 * 1024 == all.size() ? std::string::npos : i + 400 * 1024)
        << "body " << i / (400 * 1024) << " is not whole";
    seen += all[i];
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, "abcd");
}

TEST(FetchStreaming, BatchBodiesAroundTheMemorySpoolSizeLandWhole) {
  // A body that waits for the shared output is held in memory up to 32 KiB,
  // then spilled to a temporary file (or the output taken over): sizes on
  // both sides of that line, many at once, each must land whole and once.
  constexpr std::size_t kSpool = std::size_t{32} << 10;
  const std::vector<std::pair<char, std::size_t>> kinds = {{'a', 100},
                                                           {'b', kSpool},
                                                           {'c', kSpool + 1},
                                                           {'d', 200 << 10}};
  LocalServer server([&](httplib::Server& s) {
    s.Get(R"(/size/([a-d])/(\d+))", [&](const httplib::Request& req, httplib::Response& res) {
      const char c = req.matches[1].str()[0];
      const std::size_t size = std::stoul(req.matches[2].str());
      res.set_chunked_content_provider("text/plain", [c, size](std::size_t offset, httplib::DataSink& sink) {
        if (offset >= size) {
          sink.done();
          return true;
        }
        std::this_thread::sleep_for(1ms);  // the server's pace, so that the transfers overlap
        const std::string chunk(std::min<std::size_t>(8 << 10, size - offset), c);
        return sink.write(chunk.data(), chunk.size());
      });
    });
  });
  ASSERT_GT(server.port(), 0);
  TempDir dir;
  std::map<char, std::size_t> expected_count;
  {
    std::ofstream urls(dir / "urls.txt");
    for (int round = 0; round < 4; ++round) {
      for (const auto& [c, size] : kinds) {
        urls << server.url("/size/" + std::string(1, c) + "/" + std::to_string(size)) << "\n";
        ++expected_count[c];
      }
    }
  }
  const RunResult r = run(fetch_argv({"-s", "-j", "4", "--urls", dir / "urls.txt", "-o", dir / "all.txt"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string all = slurp(dir / "all.txt");
  std::map<char, std::size_t> sizes;
  for (const auto& [c, size] : kinds) sizes[c] = size;
  std::map<char, std::size_t> seen;
  std::size_t at = 0;
  while (at < all.size()) {
    const char c = all[at];
    ASSERT_TRUE(sizes.contains(c)) << "a byte no body has, at " << at;
    const std::size_t end = std::min(all.find_first_not_of(c, at), all.size());
    // Two bodies of one kind may follow each other: the run is a whole number of them.
    ASSERT_EQ((end - at) % sizes[c], 0U) << "a body of '" << c << "' is cut, at " << at;
    seen[c] += (end - at) / sizes[c];
    at = end;
  }
  EXPECT_EQ(seen, expected_count);
}

TEST(FetchPacerKey, DifferentCredentialsGetDifferentKeys) {
  const std::string url = "http://127.0.0.1:8080/items/1";
  const HeaderList a{{"Authorization", "Bearer token-a"}};
  const HeaderList b{{"Authorization", "Bearer token-b"}};
  const HeaderList k{{"X-Api-Key", "token-a"}};
  const std::string key_a = cli::request_pacer_key(url, a, "");
  // Shared keys would make these equal: one credential's 429 would then stop the other's requests.
  EXPECT_NE(key_a, cli::request_pacer_key(url, b, ""));
  EXPECT_NE(key_a, cli::request_pacer_key(url, k, ""));
  EXPECT_EQ(key_a, cli::request_pacer_key("http://127.0.0.1:8080/other", a, ""));
  EXPECT_EQ(key_a.find("token-a"), std::string::npos) << key_a;
  EXPECT_EQ(key_a.rfind("http://127.0.0.1:8080#", 0), 0u) << key_a;
  // No credential: the origin, as the engine keys it by default.
  EXPECT_EQ(cli::request_pacer_key(url, HeaderList{{"Accept", "x"}}, ""), "http://127.0.0.1:8080");
  // --pacer-key: one key for all.
  EXPECT_EQ(cli::request_pacer_key(url, a, "shared"), "shared");
  EXPECT_EQ(cli::request_pacer_key(url, b, "shared"), "shared");
  EXPECT_EQ(cli::request_pacer_key("not a url", a, ""), "");
}

std::string printed_pacer_key(const std::string& err) {
  const auto at = err.find("pacer key ");
  if (at == std::string::npos) return {};
  const auto from = at + std::string("pacer key ").size();
  return err.substr(from, err.find('\n', from) - from);
}

TEST(FetchPacerKey, EachRunIsPacedUnderItsCredentialsKey) {
  Mock mock({"--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  const auto run_with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"-v", "-o", "/dev/null", mock.url("/items/1")};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(fetch_argv(args));
  };
  const RunResult a = run_with({"-H", "Authorization: Bearer secret-aaa"});
  const RunResult b = run_with({"-H", "Authorization: Bearer secret-bbb"});
  const RunResult none = run_with({});
  const RunResult forced = run_with({"-H", "Authorization: Bearer secret-aaa", "--pacer-key", "team-quota"});
  for (const RunResult* r : {&a, &b, &none, &forced}) EXPECT_EQ(r->exit_code, 0) << r->err;
  const std::string key_a = printed_pacer_key(a.err);
  const std::string key_b = printed_pacer_key(b.err);
  EXPECT_NE(key_a, "");
  EXPECT_NE(key_a, key_b);
  EXPECT_EQ(printed_pacer_key(none.err), "http://127.0.0.1:" + std::to_string(mock.port()));
  EXPECT_EQ(printed_pacer_key(forced.err), "team-quota");
  for (const RunResult* r : {&a, &b, &forced}) {
    EXPECT_EQ(r->err.find("secret-aaa"), std::string::npos) << r->err;
    EXPECT_EQ(r->err.find("secret-bbb"), std::string::npos) << r->err;
  }
}

TEST(FetchProfileFile, AProfileFromAFileReadsItsVendorsHeaders) {
  // A 429 whose only wait signal is a made-up vendor's reset field: an hour.
  LocalServer server([&](httplib::Server& s) {
    s.Get("/limited", [&](const httplib::Request&, httplib::Response& res) {
      res.status = 429;
      res.set_header("X-Acme-Limit", "10");
      res.set_header("X-Acme-Left", "0");
      res.set_header("X-Acme-Reset", "1h");
      res.set_content("{}", "application/json");
    });
  });
  ASSERT_GT(server.port(), 0);
  TempDir dir;
  std::ofstream(dir / "acme.json") << R"({"name": "acme", "hosts": ["api.acme.test"],
    "quotas": [{"limit": "x-acme-limit", "remaining": "x-acme-left", "reset": {"header": "x-acme-reset", "format": "go_duration"}}]})";
  // --profile-file takes one value: the URL after it stays the URL.
  RunResult r = run(fetch_argv({"-s", "--max-wait", "5", "--max-attempts", "3", "--stats", dir / "s.json", "--profile",
                                "acme", "--profile-file", dir / "acme.json", server.url("/limited")}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  json stats = read_json(dir / "s.json");
  ASSERT_EQ(stats["unfinished"].size(), 1u) << stats.dump();
  EXPECT_EQ(stats["unfinished"][0]["outcome"], "deferred");
  EXPECT_EQ(stats["attempts"], 1);
  const auto not_before = parse_rfc3339(stats["unfinished"][0]["not_before"].get<std::string>());
  ASSERT_TRUE(not_before.has_value());
  EXPECT_GT(*not_before, system_wall_clock().now() + 50min);
  // Without the profile the same answers are only backed off and retried.
  r = run(fetch_argv({"-s", "--max-wait", "5", "--max-attempts", "2", "--stats", dir / "s.json", "--profile", "none",
                      server.url("/limited")}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  stats = read_json(dir / "s.json");
  EXPECT_EQ(stats["attempts"], 2) << stats.dump();
  // The profile is unknown without its file; a bad file is an error naming it.
  EXPECT_EQ(run(fetch_argv({"--profile", "acme", server.url("/limited")})).exit_code, 2);
  std::ofstream(dir / "bad.json") << R"({"name": "acme", "quotas": [{"limit": 5}]})";
  r = run(fetch_argv({"--profile-file", dir / "bad.json", server.url("/limited")}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bad.json"), std::string::npos) << r.err;
}

}  // namespace

namespace {

// The --stats of a batch of n URLs run with 32 workers, and its peak RSS.
Measured run_batch(const Mock& mock, const TempDir& dir, int n, json& stats) {
  const std::string list = mock.url_file(dir / ("list" + std::to_string(n)), n);
  const std::string stats_file = dir / ("stats" + std::to_string(n) + ".json");
  const Measured m = run_measured(fetch_argv(
                                      {"-s", "-o", "/dev/null", "-j", "32", "--stats", stats_file, "--urls", list}),
                                  dir / "out", dir / "err");
  stats = read_json(stats_file);
  return m;
}

}  // namespace

TEST(FetchBatchMemory, PeakMemoryDoesNotGrowWithTheBatchsLength) {
  // Under a sanitizer the figures measure its shadow memory and quarantine,
  // and 44,000 requests take half a minute: the plain build checks both.
  if (ABIDE_TEST_SANITIZED) GTEST_SKIP() << "memory figures mean nothing under a sanitizer";
  Mock mock({"--limit", "1000000000", "--style", "none"});
  ASSERT_GT(mock.port(), 0);
  TempDir dir;
  json small, large;
  const Measured a = run_batch(mock, dir, 4000, small);
  ASSERT_EQ(a.exit_code, 0) << slurp(dir / "err");
  const Measured b = run_batch(mock, dir, 40000, large);
  ASSERT_EQ(b.exit_code, 0) << slurp(dir / "err");
  EXPECT_EQ(small.value("requests", 0), 4000);
  EXPECT_EQ(large.value("requests", 0), 40000);
  EXPECT_EQ(large.value("done", 0), 40000);
  EXPECT_TRUE(large["unfinished"].empty());
  RecordProperty("peak_rss_kib_4000", static_cast<int>(a.max_rss_kib));
  RecordProperty("peak_rss_kib_40000", static_cast<int>(b.max_rss_kib));
  // Keeping even 200 bytes per finished request would add 7 MB here.
  EXPECT_LT(b.max_rss_kib, a.max_rss_kib + 4 * 1024)
      << "peak RSS " << a.max_rss_kib << " KiB for 4,000 URLs, " << b.max_rss_kib << " KiB for 40,000";
}

TEST(FetchBatchMemory, AStandardInputListIsTakenAsItGoesAndStopsAtABadLine) {
  Mock mock({"--limit", "1000000000", "--style", "none"});
  ASSERT_GT(mock.port(), 0);
  TempDir dir;
  std::string input;
  for (int i = 1; i <= 3; ++i) input += mock.url("/items/" + std::to_string(i)) + "\n";
  input += "# a comment\n";
  input += "\"bad line\" " + mock.url("/items/9") + "\n";
  input += mock.url("/items/4") + "\n";
  const std::string stats_file = dir / "stats.json";
  const RunResult r = run(fetch_argv({"-s", "-S", "-o", "/dev/null", "--stats", stats_file, "--urls", "-"}), input);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("-:5: expected URL, METHOD URL or METHOD URL BODY"), std::string::npos) << r.err;
  const json stats = read_json(stats_file);
  // The lines before the bad one are run; the one after it is not taken.
  EXPECT_EQ(stats.value("requests", 0), 3) << stats.dump();
  EXPECT_EQ(stats.value("done", 0), 3) << stats.dump();
}

TEST(FetchBatchMemory, ARegularListIsCheckedWholeBeforeAnythingIsSent) {
  Mock mock({"--limit", "1000000000", "--style", "none"});
  ASSERT_GT(mock.port(), 0);
  TempDir dir;
  const std::string list = dir / "list";
  {
    std::ofstream out(list);
    out << mock.url("/items/1") << "\n\"bad line\" " << mock.url("/items/2") << "\n";
  }
  const RunResult r = run(fetch_argv({"-s", "-S", "-o", "/dev/null", "--urls", list}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(list + ":2: expected URL"), std::string::npos) << r.err;
  EXPECT_EQ(mock.stats()["totals"].value("requests", -1), 0) << mock.stats().dump();
}

TEST(FetchBatchMemory, TheSummaryKeepsOnlyTheUnfinishedInTheRunsOrder) {
  cli::RunSummary summary;
  const auto job = [](std::size_t i) {
    cli::FetchJob j;
    j.index = i;
    j.url = "http://user:secret@h/" + std::to_string(i);
    j.body = "b" + std::to_string(i);
    return j;
  };
  RequestOutcome done;
  done.kind = OutcomeKind::kDone;
  done.attempts.resize(2);
  done.attempts[0].number = 1;
  done.attempts[0].status = 503;
  done.attempts[1].number = 2;
  done.attempts[1].status = 200;
  RequestOutcome deferred;
  deferred.kind = OutcomeKind::kDeferred;
  deferred.reason = "later";
  RequestOutcome refused;
  refused.kind = OutcomeKind::kNotRetryable;
  // Finished out of order, as workers finish them.
  summary.add(2, job(2), deferred);
  summary.add(0, job(0), done);
  summary.add(1, job(1), refused, true);
  EXPECT_EQ(summary.requests(), 3u);
  EXPECT_EQ(summary.done(), 1u);
  EXPECT_EQ(summary.resumable_left(), 1u);
  const auto unfinished = summary.unfinished();
  ASSERT_EQ(unfinished.size(), 2u);
  EXPECT_EQ(unfinished[0].job.index, 1u);
  EXPECT_TRUE(unfinished[0].http_failed);
  EXPECT_EQ(unfinished[1].job.index, 2u);
  const auto stats = summary.stats(Duration{}, false);
  EXPECT_EQ(stats["attempts"], 2);
  EXPECT_EQ(stats["retries"], 1);
  EXPECT_EQ(stats["status_counts"]["503"], 1);
  EXPECT_EQ(stats["unfinished"].size(), 2u);
  EXPECT_EQ(stats["unfinished"][1]["url"], cli::shown_url(job(2).url));
  const auto resume = summary.resume(WallTime{});
  ASSERT_EQ(resume["requests"].size(), 1u);
  EXPECT_EQ(resume["requests"][0]["body"], "b2");
}

TEST(FetchBatchMemory, AListOfUnknownLengthShowsDoneWithoutATotal) {
  const cli::Progress counted(3, cli::ProgressOptions{});
  EXPECT_TRUE(counted.line().starts_with("[0/3] 0 in flight")) << counted.line();
  const cli::Progress streamed(cli::Progress::kUnknownTotal, cli::ProgressOptions{});
  EXPECT_TRUE(streamed.line().starts_with("[0] 0 in flight")) << streamed.line();
  EXPECT_EQ(streamed.line().find("ETA"), std::string::npos) << streamed.line();
}

}  // namespace abide::test
