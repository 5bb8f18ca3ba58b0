// `abide fetch` and `abide proxy` on the file store, end to end: consecutive
// runs, processes started together and a proxy killed and started again all
// remember what the server said; `abide state` shows and forgets it; files
// that cannot be used are refused by name. Real processes and servers on
// 127.0.0.1 only; every state folder is a temporary one.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/fetch_cli.h"
#include "support/run.h"

namespace abide::test {
namespace {

using namespace std::chrono_literals;

json totals(const Mock& mock) { return mock.stats()["totals"]; }

RunResult abide_run(std::vector<std::string> args) {
  args.insert(args.begin(), ABIDE_CLI_PATH);
  return run(args);
}

unsigned mode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<unsigned>(st.st_mode & 0777) : 0xffffu;
}

// A server allowing 3 requests per 30 s window, whose 429 says Retry-After.
std::vector<std::string> spent_quickly() { return {"--style", "retry-after-seconds", "--limit", "3", "--window", "30"}; }

// Six runs in a row, one URL each (a shell loop, cron, CI steps): the fourth
// is limited, and the later ones send nothing before the permitted time.
TEST(FileStore, ConsecutiveFetchesRememberTheCooldown) {
  TempDir dir;
  Mock mock(spent_quickly());
  ASSERT_GT(mock.port(), 0);
  const std::string store = "file:" + dir / "quota.db";
  std::vector<RunResult> runs;
  for (int i = 1; i <= 6; ++i) {
    runs.push_back(run(fetch_argv({"--store", store, "--max-wait", "2", "-o", "/dev/null", "--resume-file",
                                   dir / "resume.json", mock.url("/items/" + std::to_string(i))})));
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(runs[static_cast<std::size_t>(i)].exit_code, 0) << runs[0].err;
  for (int i = 3; i < 6; ++i) {
    const RunResult& r = runs[static_cast<std::size_t>(i)];
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("deferred"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("permitted at 20"), std::string::npos) << r.err;
  }
  // The fifth run says where the wait comes from.
  EXPECT_NE(runs[4].err.find("remembered in " + dir / "quota.db"), std::string::npos) << runs[4].err;
  const json t = totals(mock);
  EXPECT_EQ(t["requests"], 4) << t.dump();
  EXPECT_EQ(t["premature"], 0) << t.dump();

  // The same with memory: each run forgets, and sends early.
  Mock forgetful(spent_quickly());
  for (int i = 1; i <= 5; ++i) {
    (void)run(fetch_argv({"--store", "memory", "--max-wait", "2", "-o", "/dev/null", "--resume-file",
                          dir / "resume2.json", forgetful.url("/items/" + std::to_string(i))}));
  }
  EXPECT_GT(totals(forgetful)["premature"].get<int>(), 0) << "the memory store was expected to forget";
}

// With no --store, fetch keeps its state in the state directory, and `abide
// state` shows it and forgets it on request.
TEST(FileStore, TheDefaultStoreLivesInTheStateDirectory) {
  TempDir dir;
  const ScopedEnv store("ABIDE_STORE", "");
  const ScopedEnv home("XDG_STATE_HOME", dir / "state");
  Mock mock(spent_quickly());
  ASSERT_GT(mock.port(), 0);
  for (int i = 1; i <= 4; ++i) {
    (void)run(fetch_argv({"--max-wait", "2", "-o", "/dev/null", "--resume-file", dir / "resume.json",
                          mock.url("/items/" + std::to_string(i))}));
  }
  const std::string db = dir / "state/abide/quota.db";
  ASSERT_TRUE(std::filesystem::exists(db));
  EXPECT_EQ(mode_of(db), 0600u);
  EXPECT_EQ(mode_of(dir / "state/abide"), 0700u);

  const RunResult shown = abide_run({"state"});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("1 key remembered in " + db), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find(mock.url("")), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("cooldown until 20"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("the server's Retry-After"), std::string::npos) << shown.out;

  const RunResult as_json = abide_run({"state", "--json"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  const json j = json::parse(as_json.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << as_json.out;
  EXPECT_EQ(j["store"], db);
  ASSERT_EQ(j["keys"].size(), 1u) << as_json.out;
  EXPECT_EQ(j["keys"][0]["key"], mock.url(""));
  EXPECT_EQ(j["keys"][0]["cooldown_cause"], "retry-after");

  const RunResult unknown = abide_run({"state", "--forget", "https://nowhere.example"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("is not in " + db), std::string::npos) << unknown.err;

  const RunResult forgot = abide_run({"state", "--forget", mock.url("")});
  EXPECT_EQ(forgot.exit_code, 0) << forgot.err;
  EXPECT_NE(forgot.out.find("forgot " + mock.url("")), std::string::npos) << forgot.out;
  EXPECT_NE(abide_run({"state"}).out.find("nothing remembered in " + db), std::string::npos);
  const std::size_t before = totals(mock)["requests"].get<std::size_t>();
  (void)run(fetch_argv({"--max-wait", "2", "-o", "/dev/null", "--resume-file", dir / "resume.json",
                        mock.url("/items/9")}));
  EXPECT_EQ(totals(mock)["requests"].get<std::size_t>(), before + 1);  // forgotten: sent at once
}

TEST(FileStore, StateWithoutAFileCreatesNothing) {
  TempDir dir;
  const ScopedEnv home("XDG_STATE_HOME", dir / "state");
  const RunResult r = abide_run({"state", "--store", "file"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("nothing remembered: " + dir / "state/abide/quota.db" + " does not exist"), std::string::npos)
      << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "state"));
  EXPECT_EQ(abide_run({"state", "--store", "memory"}).exit_code, 2);
}

// Eight processes started at once on one file: after the first answers,
// never more than the announced quota in a window, and nothing early.
TEST(FileStore, EightProcessesShareOneQuota) {
  TempDir dir;
  const ScopedEnv store("ABIDE_STORE", "");
  const ScopedEnv home("XDG_STATE_HOME", dir / "state");
  Mock mock({"--limit", "6", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  constexpr int kProcesses = 8;
  constexpr int kEach = 4;
  std::vector<std::unique_ptr<BackgroundProcess>> procs;
  for (int p = 0; p < kProcesses; ++p) {
    const std::string n = std::to_string(p);
    procs.push_back(std::make_unique<BackgroundProcess>(
        fetch_argv({"--urls", mock.url_file(dir / ("urls" + n), kEach, 100 * p), "--jobs", "2", "-o", "/dev/null",
                    "--stats", dir / ("stats" + n), "--resume-file", dir / ("resume" + n), "-s"})));
  }
  int done = 0;
  for (auto& p : procs) {
    const RunResult r = p->wait(120s);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    done += read_json(dir / ("stats" + std::to_string(&p - procs.data()))).value("done", 0);
  }
  EXPECT_EQ(done, kProcesses * kEach);
  const json server = mock.stats();
  EXPECT_EQ(server["totals"]["premature"], 0) << server["totals"].dump();
  int limited_later = 0;
  for (const auto& w : server["windows"]) {
    if (w["index"].get<long>() > 0) limited_later += w["limited"].get<int>();
  }
  EXPECT_EQ(limited_later, 0) << server["windows"].dump();
}

// The proxy's answer to a caller whose budget (Abide-Max-Wait) the wait outruns.
bool held_back(const httplib::Response& r) {
  const std::string outcome = r.get_header_value("Abide-Outcome");
  return outcome == "deferred";
}

// The proxy killed (SIGKILL) during a cooldown and started again on its port:
// the next request does not go upstream before the permitted time.
TEST(FileStore, AProxyKilledAndStartedAgainRemembers) {
  if (abide_run({"proxy", "--help"}).exit_code != 0) GTEST_SKIP() << "no abide proxy in this build";
  TempDir dir;
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "30"});
  ASSERT_GT(mock.port(), 0);
  const std::string store = "file:" + dir / "quota.db";
  auto start = [&](const std::string& port) {
    auto p = std::make_unique<BackgroundProcess>(std::vector<std::string>{
        ABIDE_CLI_PATH, "proxy", "--upstream", mock.url(""), "--port", port, "--store", store});
    const auto line = p->read_line(10s);
    int bound = 0;
    if (line && line->starts_with("listening on 127.0.0.1:")) bound = std::atoi(line->c_str() + line->rfind(':') + 1);
    return std::make_pair(std::move(p), bound);
  };
  auto [first, port] = start("0");
  ASSERT_GT(port, 0) << first->err_so_far();
  {
    httplib::Client caller("127.0.0.1", port);
    caller.set_read_timeout(30s);
    auto ok = caller.Get("/items/1", {{"Abide-Max-Wait", "1"}});
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200);
    auto limited = caller.Get("/items/2", {{"Abide-Max-Wait", "1"}});
    ASSERT_TRUE(limited);
    EXPECT_TRUE(held_back(*limited)) << limited->status;
  }
  ::kill(first->pid(), SIGKILL);
  (void)first->wait(10s);
  ASSERT_EQ(totals(mock)["requests"], 2);

  auto [second, again] = start(std::to_string(port));
  ASSERT_EQ(again, port) << second->err_so_far();
  httplib::Client caller("127.0.0.1", port);
  caller.set_read_timeout(30s);
  auto held = caller.Get("/items/3", {{"Abide-Max-Wait", "1"}});
  ASSERT_TRUE(held);
  EXPECT_TRUE(held_back(*held)) << held->status << " " << held->body;
  EXPECT_FALSE(held->get_header_value("Abide-Not-Before").empty());
  const json t = totals(mock);
  EXPECT_EQ(t["requests"], 2) << t.dump();  // nothing went upstream
  EXPECT_EQ(t["premature"], 0) << t.dump();
  second->stop(SIGTERM, 10s);
}

// ---- stores that cannot be used ---------------------------------------------

TEST(FileStore, AFileThatIsNotAbidesIsAnErrorAndNothingIsSent) {
  TempDir dir;
  Mock mock({"--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  const std::string notes = dir / "notes.txt";
  std::ofstream(notes) << "my notes, not a database\n" << std::string(1000, '.');
  const RunResult r = run(fetch_argv({"--store", "file:" + notes, "-o", "/dev/null", mock.url("/items/1")}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(notes + " is not abide's quota store"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Nothing was sent"), std::string::npos) << r.err;
  EXPECT_EQ(totals(mock)["requests"], 0);

  // --store-fallback: one line, and the run goes on in memory.
  const RunResult f =
      run(fetch_argv({"--store", "file:" + notes, "--store-fallback", "-o", "/dev/null", mock.url("/items/1")}));
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_NE(f.err.find("going on with in-process quota state (--store-fallback)"), std::string::npos) << f.err;
  EXPECT_EQ(totals(mock)["requests"], 1);
  std::ifstream in(notes);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "my notes, not a database");  // untouched
}

TEST(FileStore, ABadStoreValueIsAUsageErrorNamingWhereItCameFrom) {
  const RunResult empty = run(fetch_argv({"--store", "file:", "http://127.0.0.1:1/"}));
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find("wants a path after the colon"), std::string::npos) << empty.err;
  const ScopedEnv bad("ABIDE_STORE", "nonsense");
  const RunResult env = run(fetch_argv({"http://127.0.0.1:1/"}));
  EXPECT_EQ(env.exit_code, 2);
  EXPECT_NE(env.err.find("ABIDE_STORE (the default --store): "), std::string::npos) << env.err;
}

}  // namespace
}  // namespace abide::test
