// `abide fetch` end to end against `abide mock-server` (both child processes,
// on 127.0.0.1 only): every style obeyed without premature retries,
// idempotency, interruption and resume, and a quota shared over Redis.
#include "support/fetch_fixture.h"
#include "support/run.h"

namespace abide::test {
namespace {


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

}  // namespace
}  // namespace abide::test
