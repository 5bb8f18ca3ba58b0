// `abide fetch` end to end: streamed bodies, --max-filesize, pacer keys,
// --profile-file, and a batch's memory.
#include "support/fetch_fixture.h"
#include "support/run.h"

namespace abide::test {
namespace {


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
