// `abide fetch` end to end, hardened: a store that dies mid-batch, secrets
// in no output, credentials in URLs, the resume file's permissions, and
// server bytes that never reach a terminal raw.
#include "support/fetch_fixture.h"
#include "support/run.h"

namespace abide::test {
namespace {


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

}  // namespace
}  // namespace abide::test
