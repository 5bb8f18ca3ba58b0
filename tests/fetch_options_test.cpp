// `abide fetch` end to end: deadlines, outputs and usage errors.
#include "support/fetch_fixture.h"
#include "support/run.h"

namespace abide::test {
namespace {

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

}  // namespace
}  // namespace abide::test
