// `abide proxy` end to end: real processes on 127.0.0.1 (abide mock-server
// upstream, abide proxy, redis-server) and real callers whose own retries are
// off (Python's http.client, curl, Node's fetch, raw sockets for garbage).
// Waits only where time is the rule (streaming, cooldowns), with wide margins.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/concurrency.h"
#include "support/process.h"
#include "support/proxy_processes.h"
#include "support/redis_store_server.h"
#include "support/run.h"

#ifdef ABIDE_CLI_PATH

namespace abide::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::string kClients = std::string(ABIDE_SOURCE_DIR) + "/tests/support/proxy_clients";

// ---- the programs ------------------------------------------------------------

// A test needs each client it runs: missing is a failure (CI installs them),
// except node when ABIDE_TEST_NO_NODE is set (a machine without it).
#define REQUIRE_PROGRAM(var, name)                                                                     \
  const std::string var##_name = (name);                                                               \
  const std::string var = program_on_path(var##_name);                                                 \
  do {                                                                                                 \
    if (var.empty() && var##_name == "node" && std::getenv("ABIDE_TEST_NO_NODE"))                      \
      GTEST_SKIP() << "node is not on PATH and ABIDE_TEST_NO_NODE is set";                             \
    ASSERT_FALSE(var.empty()) << var##_name << " is not on PATH (a test dependency: scripts/deps.sh)"; \
  } while (0)

// ---- the callers ---------------------------------------------------------------

// One answer, as a client program printed it (client.py / client.mjs / curl).
struct Answer {
  int status = 0;
  std::string outcome, attempts, waited, not_before, retry_after, error, body;
  std::size_t body_len = 0;
  double start_s = 0, head_s = 0, end_s = 0;  // the client's own clock, from its start
  double start_unix = 0;                      // wall clock when the request began
  json chunks;                                // [[t_s, text], ...]
};

std::string field(const json& j, const char* name) {
  return j.contains(name) && j[name].is_string() ? j[name].get<std::string>() : std::string();
}

std::vector<Answer> parse_lines(const std::string& out) {
  std::vector<Answer> answers;
  std::stringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    Answer a;
    a.status = j.value("status", 0);
    a.outcome = field(j, "outcome");
    a.attempts = field(j, "attempts");
    a.waited = field(j, "waited");
    a.not_before = field(j, "not_before");
    a.retry_after = field(j, "retry_after");
    a.error = field(j, "error");
    a.body = field(j, "body");
    a.body_len = j.value("body_len", std::size_t{0});
    a.start_s = j.value("start_s", 0.0);
    a.start_unix = j.value("start_unix", 0.0);
    a.head_s = j.value("head_s", 0.0);
    a.end_s = j.value("end_s", 0.0);
    if (j.contains("chunks")) a.chunks = j["chunks"];
    answers.push_back(std::move(a));
  }
  return answers;
}

struct ClientRun {
  RunResult raw;
  std::vector<Answer> answers;
};

// client.py or client.mjs (`interpreter` is python3 or node) with these options.
ClientRun run_client(const std::string& interpreter, const std::string& script, const std::vector<std::string>& args) {
  ClientRun r;
  r.raw = run(with({interpreter, kClients + "/" + script}, args));
  r.answers = parse_lines(r.raw.out);
  return r;
}

// `curl` (no --retry) fetching each URL in turn on one kept-alive connection;
// one Answer per response head it printed.
ClientRun run_curl(const std::string& curl, const std::vector<std::string>& urls,
                   const std::vector<std::string>& headers) {
  std::vector<std::string> argv{curl, "-sS", "-D", "-", "--max-time", "60"};
  for (const auto& h : headers) argv.insert(argv.end(), {"-H", h});
  for (const auto& u : urls) argv.insert(argv.end(), {u, "-o", "/dev/null"});
  ClientRun r;
  r.raw = run(argv);
  std::stringstream in(r.raw.out);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("HTTP/", 0) == 0) {
      Answer a;
      const auto sp = line.find(' ');
      a.status = sp == std::string::npos ? 0 : std::atoi(line.c_str() + sp + 1);
      r.answers.push_back(a);
      continue;
    }
    if (r.answers.empty()) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    Answer& a = r.answers.back();
    if (name == "abide-outcome") a.outcome = value;
    if (name == "abide-attempts") a.attempts = value;
    if (name == "abide-waited") a.waited = value;
    if (name == "abide-not-before") a.not_before = value;
    if (name == "retry-after") a.retry_after = value;
  }
  return r;
}

std::string describe(const ClientRun& r) { return "stdout:\n" + r.raw.out + "\nstderr:\n" + r.raw.err; }

// ---- raw sockets -------------------------------------------------------------

int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t k = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (k <= 0) return false;
    done += static_cast<std::size_t>(k);
  }
  return true;
}

// Reads until the peer closes, or until a whole answer (head and a
// Content-Length body) is in, or `timeout`.
std::string read_answer(int fd, std::chrono::milliseconds timeout) {
  std::string got;
  const auto end = Clock::now() + timeout;
  for (;;) {
    const auto head_end = got.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      std::string lower = got.substr(0, head_end);
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const auto cl = lower.find("\r\ncontent-length:");
      if (cl != std::string::npos && got.size() >= head_end + 4 + std::strtoull(lower.c_str() + cl + 17, nullptr, 10))
        return got;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (left <= 0) return got;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[8192];
    const ssize_t k = recv(fd, buf, sizeof buf, 0);
    if (k <= 0) return got;
    got.append(buf, static_cast<std::size_t>(k));
  }
}

// An upstream that answers every request with the same bytes, written as
// given (heads no HTTP library would send), then closes the connection.
class RawUpstream {
 public:
  explicit RawUpstream(std::string answer) : answer_(std::move(answer)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(listen_fd_, 8) != 0 || getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        const int fd = accept(listen_fd_, nullptr, nullptr);
        if (fd < 0) return;  // closed by the destructor
        std::string got;
        char buf[4096];
        while (got.find("\r\n\r\n") == std::string::npos) {
          const ssize_t k = recv(fd, buf, sizeof buf, 0);
          if (k <= 0) break;
          got.append(buf, static_cast<std::size_t>(k));
        }
        ++requests_;
        send_all(fd, answer_);
        shutdown(fd, SHUT_WR);
        while (recv(fd, buf, sizeof buf, 0) > 0) {
        }
        close(fd);
      }
    });
  }
  ~RawUpstream() {
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    if (thread_.joinable()) thread_.join();
  }
  RawUpstream(const RawUpstream&) = delete;
  RawUpstream& operator=(const RawUpstream&) = delete;
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }

 private:
  std::string answer_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> requests_{0};
  std::thread thread_;
};

// One exchange on a new connection: `request` sent (as far as the peer
// takes it), the answer read.
std::string raw_exchange(int port, const std::string& request, std::chrono::milliseconds timeout = 20s) {
  const int fd = connect_loopback(port);
  if (fd < 0) return {};
  send_all(fd, request);  // a peer that answers early and closes may refuse the rest
  std::string got = read_answer(fd, timeout);
  close(fd);
  return got;
}

struct RawAnswer {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  std::string header(const std::string& lower_name) const {
    for (const auto& [n, v] : headers)
      if (n == lower_name) return v;
    return {};
  }
  bool has(const std::string& lower_name) const {
    for (const auto& [n, v] : headers)
      if (n == lower_name) return true;
    return false;
  }
};

RawAnswer parse_answer(const std::string& bytes) {
  RawAnswer a;
  const auto head_end = bytes.find("\r\n\r\n");
  if (bytes.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos) return a;
  a.status = std::atoi(bytes.c_str() + 9);
  std::stringstream head(bytes.substr(0, head_end));
  std::string line;
  std::getline(head, line);
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
    a.headers.emplace_back(name, value);
  }
  a.body = bytes.substr(head_end + 4);
  return a;
}

// "2026-12-01T14:03:12.345Z" (RFC 3339 UTC) as Unix seconds; nullopt when not that form.
std::optional<double> rfc3339_unix(const std::string& s) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                  &tm.tm_sec, &consumed) != 6 ||
      consumed != 19)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  double frac = 0;
  std::size_t i = 19;
  if (i < s.size() && s[i] == '.') {
    double scale = 0.1;
    for (++i; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i, scale /= 10)
      frac += (s[i] - '0') * scale;
  }
  if (i + 1 != s.size() || s[i] != 'Z') return std::nullopt;
  return static_cast<double>(timegm(&tm)) + frac;
}

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// Whole non-negative seconds, as Retry-After must be; -1 otherwise.
long long whole_seconds(const std::string& s) {
  if (s.empty() || s.size() > 12) return -1;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
  return std::stoll(s);
}

double number(const std::string& s) { return s.empty() ? -1 : std::strtod(s.c_str(), nullptr); }


// ---- every style: paced and retried within the budget, never early ----------

struct StyleCase {
  std::string style;
  std::string profile;  // the vendor profile its fields need ("" for none)
  std::string client;   // python, curl or node
};

// How gtest (and ctest's test list) names a case: by its style.
void PrintTo(const StyleCase& c, std::ostream* os) { *os << c.style << " via " << c.client; }

class ProxyStyle : public ::testing::TestWithParam<StyleCase> {};

// Several callers through one proxy against a small window: every request
// ends 200 within its Abide-Max-Wait, and the server saw no premature retry.
TEST_P(ProxyStyle, EveryCallerGets200WithinItsBudgetAndNoRequestIsEarly) {
  const StyleCase& c = GetParam();
  REQUIRE_PROGRAM(program, c.client == "python" ? std::string("python3") : c.client);
  Mock mock({"--style", c.style, "--limit", "5", "--window", "1", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  std::vector<std::string> args = with(upstream(mock), {"--max-wait", "30", "--max-attempts", "20"});
  if (!c.profile.empty()) args.insert(args.end(), {"--profile", c.profile});
  Proxy proxy(args);
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();

  constexpr int kRequests = 15;
  constexpr double kBudget = 20;
  const std::string budget = "Abide-Max-Wait: 20";
  std::vector<Answer> answers;
  std::string detail;
  if (c.client == "curl") {
    // Three curl processes at once, five requests each on a kept-alive connection.
    std::vector<ClientRun> runs(3);
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t)
      threads.emplace_back([&, t] {
        std::vector<std::string> urls;
        for (int i = 0; i < kRequests / 3; ++i) urls.push_back(proxy.url("/items/" + std::to_string(t * 10 + i)));
        runs[static_cast<std::size_t>(t)] = run_curl(program, urls, {budget});
      });
    for (auto& th : threads) th.join();
    for (const auto& r : runs) {
      EXPECT_EQ(r.raw.exit_code, 0) << describe(r);
      answers.insert(answers.end(), r.answers.begin(), r.answers.end());
      detail += describe(r);
    }
  } else {
    const auto r = run_client(program, c.client == "node" ? "client.mjs" : "client.py",
                              {"--url", proxy.url("/items/1"), "-H", budget, "--count", std::to_string(kRequests),
                               "--parallel", "4", "--keep-alive"});
    EXPECT_EQ(r.raw.exit_code, 0) << describe(r);
    answers = r.answers;
    detail = describe(r);
  }
  ASSERT_EQ(answers.size(), static_cast<std::size_t>(kRequests)) << detail;
  for (const auto& a : answers) {
    EXPECT_EQ(a.status, 200) << detail;
    EXPECT_EQ(a.outcome, "done") << detail;
    EXPECT_FALSE(a.attempts.empty()) << detail;
    EXPECT_GE(number(a.waited), 0) << detail;
    EXPECT_LE(number(a.waited), kBudget) << detail;
  }
  const json server = mock.stats();
  ASSERT_TRUE(server.is_object());
  EXPECT_EQ(server["totals"]["premature"], 0) << server["totals"].dump();
  EXPECT_EQ(server["totals"]["accepted"], kRequests) << server["totals"].dump();
  proxy.stop_cleanly();
}

INSTANTIATE_TEST_SUITE_P(Styles, ProxyStyle,
                         ::testing::Values(StyleCase{"draft11", "", "python"}, StyleCase{"draft-legacy", "", "python"},
                                           StyleCase{"github", "github", "python"},
                                           StyleCase{"openai", "openai", "node"},
                                           StyleCase{"retry-after-seconds", "", "curl"},
                                           StyleCase{"retry-after-date", "", "python"},
                                           StyleCase{"malformed", "", "python"}, StyleCase{"draft12", "", "python"}),
                         [](const ::testing::TestParamInfo<StyleCase>& p) {
                           std::string n = p.param.style;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// No hint at all: the proxy's own backoff, still all 200 and none early
// (nothing stated, so nothing can be premature; the count shows no storm).
TEST(ProxyStyleNone, BacksOffWithoutHintsUntilEveryCallerGets200) {
  REQUIRE_PROGRAM(python, "python3");
  Mock mock({"--style", "none", "--limit", "4", "--window", "1", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "30", "--max-attempts", "20"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  constexpr int kRequests = 8;
  const auto r = run_client(python, "client.py",
                            {"--url", proxy.url("/n"), "-H", "Abide-Max-Wait: 25", "--count", std::to_string(kRequests),
                             "--parallel", "4", "--keep-alive"});
  ASSERT_EQ(r.answers.size(), static_cast<std::size_t>(kRequests)) << describe(r);
  for (const auto& a : r.answers) {
    EXPECT_EQ(a.status, 200) << describe(r);
    EXPECT_EQ(a.outcome, "done") << describe(r);
  }
  const json server = mock.stats();
  EXPECT_EQ(server["totals"]["premature"], 0);
  EXPECT_EQ(server["totals"]["accepted"], kRequests);
  // Backoff, not a busy loop: far fewer limited answers than a retry-at-once client would cause.
  EXPECT_LT(server["totals"]["limited"].get<int>(), 40) << server["totals"].dump();
  proxy.stop_cleanly();
}

// An upstream on a host no profile names, whose answers carry one vendor's
// distinctive quota fields: named once on stderr with the flags that read
// them; with --profile auto, read with that profile (paced on them, and
// answered in its dialect).
TEST(ProxyProfiles, FieldsOfAVendorOnAnyHostAreNamedOnceOrAdopted) {
  REQUIRE_PROGRAM(python, "python3");
  for (const bool adopt : {false, true}) {
    Mock mock({"--style", "openai", "--limit", "4", "--window", "2"});
    ASSERT_GT(mock.port(), 0);
    std::vector<std::string> args = upstream(mock);
    if (adopt) args = with(args, {"--profile", "auto"});
    Proxy proxy(args);
    ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
    const auto r = run_client(python, "client.py",
                              {"--url", proxy.url("/v1/models"), "-H", "Abide-Max-Wait: 20", "--count", "8"});
    ASSERT_EQ(r.answers.size(), 8u) << describe(r);
    const RunResult stopped = proxy.stop_cleanly();
    const std::string said = "carry the openai profile's quota fields (x-ratelimit-";
    const std::size_t first = stopped.err.find(said);
    ASSERT_NE(first, std::string::npos) << stopped.err;
    EXPECT_EQ(stopped.err.find(said, first + 1), std::string::npos) << "said more than once:\n" << stopped.err;
    if (!adopt) {
      EXPECT_NE(stopped.err.find("give --profile openai, or --upstream URL,profile=openai, or --profile auto"),
                std::string::npos)
          << stopped.err;
      continue;
    }
    EXPECT_NE(stopped.err.find("read with it from now on (--profile auto)"), std::string::npos) << stopped.err;
    for (const auto& a : r.answers) EXPECT_EQ(a.status, 200) << describe(r);
    EXPECT_EQ(mock.stats()["totals"]["premature"], 0) << mock.stats()["totals"].dump();
  }
}

// ---- deferral -----------------------------------------------------------------

// A server wait longer than the caller's Abide-Max-Wait: answered at once
// with the server's 429, the outcome, a Retry-After not shorter than the
// server's wait and the permitted time; the proxy does not retry for it, and
// a later caller within the cooldown is answered without a request upstream.
TEST(ProxyDeferral, AWaitBeyondTheCallersBudgetIsAnsweredAtOnceWithThePermittedTime) {
  REQUIRE_PROGRAM(python, "python3");
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "30", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "60"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const double t0 = unix_now();  // the mock's window starts at the next request: ends at t0 + 30 or later
  const auto first = run_client(python, "client.py", {"--url", proxy.url("/a")});
  ASSERT_EQ(first.answers.size(), 1u) << describe(first);
  EXPECT_EQ(first.answers[0].status, 200);

  const auto second = run_client(python, "client.py", {"--url", proxy.url("/a"), "-H", "Abide-Max-Wait: 5"});
  ASSERT_EQ(second.answers.size(), 1u) << describe(second);
  const Answer& a = second.answers[0];
  EXPECT_EQ(a.status, 429) << describe(second);
  EXPECT_EQ(a.outcome, "deferred");  // the budget is the longest acceptable wait, not a deadline
  EXPECT_LT(a.head_s - a.start_s, 4.0) << "held instead of answered at once";
  // The server's wait ends at t0 + 30 at the earliest; asked after the first
  // request, it is still ~30 s away. Retry-After never says less than what remains.
  const long long ra = whole_seconds(a.retry_after);
  EXPECT_GE(static_cast<double>(ra), t0 + 30 - unix_now() - 1) << a.retry_after;
  EXPECT_LE(ra, 31) << a.retry_after;
  const auto nb = rfc3339_unix(a.not_before);
  ASSERT_TRUE(nb) << a.not_before;
  EXPECT_GE(*nb, t0 + 29) << a.not_before;
  EXPECT_LE(*nb, unix_now() + 31) << a.not_before;
  EXPECT_EQ(a.attempts, "1");
  EXPECT_EQ(mock.requests(), 2);

  // Another caller within the cooldown: nothing goes upstream.
  const auto third = run_client(python, "client.py", {"--url", proxy.url("/b"), "-H", "Abide-Max-Wait: 2"});
  ASSERT_EQ(third.answers.size(), 1u) << describe(third);
  EXPECT_EQ(third.answers[0].status, 429);
  EXPECT_EQ(third.answers[0].outcome, "deferred");
  EXPECT_GE(whole_seconds(third.answers[0].retry_after), 20) << third.answers[0].retry_after;
  EXPECT_TRUE(rfc3339_unix(third.answers[0].not_before)) << third.answers[0].not_before;
  std::this_thread::sleep_for(300ms);  // a retry the proxy might wrongly still send would show now
  EXPECT_EQ(mock.requests(), 2);
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0);
  proxy.stop_cleanly();
}

// ---- idempotency ------------------------------------------------------------

// A POST without Idempotency-Key is sent once: its 429 comes back as
// not_retryable. With a key, it is retried to 200 after the wait.
// Callers held back get answers their SDKs obey: "do not retry" in the
// upstream's dialect (x-should-retry without a profile), and once the key was
// limited, the upstream's own limited answer (status, content type, JSON
// body) with fresh times, never a status of one answer with a body of another.
TEST(ProxyDeferral, HeldBackCallersGetTheUpstreamsLimitedAnswerAndNoRetry) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "30", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(upstream(mock));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto get = [&](const std::string& target, const std::string& budget) {
    return parse_answer(raw_exchange(proxy.port(), "GET " + target + " HTTP/1.1\r\nHost: p\r\nAbide-Max-Wait: " + budget +
                                                       "\r\nConnection: close\r\n\r\n"));
  };
  EXPECT_EQ(get("/a", "1").status, 200);
  const RawAnswer limited = get("/b", "1");  // the upstream's 429, streamed as it came
  ASSERT_EQ(limited.status, 429) << limited.body;
  EXPECT_EQ(limited.header("x-should-retry"), "false");
  EXPECT_EQ(limited.header("abide-outcome"), "deferred");
  EXPECT_NE(limited.body.find("rate_limited"), std::string::npos) << limited.body;
  ASSERT_EQ(mock.requests(), 2);

  const RawAnswer again = get("/c", "1");  // nothing sent: the same answer, with its own times
  EXPECT_EQ(mock.requests(), 2);
  EXPECT_EQ(again.status, 429);
  EXPECT_EQ(again.header("content-type"), limited.header("content-type"));
  EXPECT_EQ(again.body, limited.body);
  EXPECT_EQ(again.header("x-should-retry"), "false");
  EXPECT_EQ(again.header("abide-attempts"), "0");
  EXPECT_EQ(again.header("abide-outcome"), "deferred");
  EXPECT_GE(whole_seconds(again.header("retry-after")), 25) << again.header("retry-after");
  EXPECT_TRUE(rfc3339_unix(again.header("abide-not-before"))) << again.header("abide-not-before");
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0);
  proxy.stop_cleanly();
}

// A key never limited gets a problem+json body of the proxy's own, with the
// permitted time where the SDKs look for a message.
TEST(ProxyDeferral, WithoutALimitedAnswerTheBodyIsProblemJson) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "30", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(upstream(mock));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto get = [&](const std::string& auth) {
    return parse_answer(raw_exchange(proxy.port(), "GET /x HTTP/1.1\r\nHost: p\r\nAuthorization: " + auth +
                                                       "\r\nAbide-Max-Wait: 0\r\nConnection: close\r\n\r\n"));
  };
  EXPECT_EQ(get("Bearer one").status, 200);
  // The HEAD of a limited answer keeps no body: its key has none to give again.
  const RawAnswer head = parse_answer(raw_exchange(
      proxy.port(), "HEAD /x HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer one\r\nAbide-Max-Wait: 0\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(head.status, 429);
  const RawAnswer a = get("Bearer one");
  EXPECT_EQ(a.status, 429);
  EXPECT_EQ(a.header("content-type"), "application/problem+json");
  const json j = json::parse(a.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << a.body;
  EXPECT_EQ(j["status"], 429);
  EXPECT_EQ(j["outcome"], "deferred");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("permitted at 20"), std::string::npos) << a.body;
  EXPECT_EQ(a.header("x-should-retry"), "false");
  proxy.stop_cleanly();
}

TEST(ProxyIdempotency, PostIsSentOnceWithoutAKeyAndRetriedWithOne) {
  REQUIRE_PROGRAM(python, "python3");
  // A window long enough that each POST (a Python start away) still meets it.
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "6", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "30"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto get = run_client(python, "client.py", {"--url", proxy.url("/orders")});
  ASSERT_EQ(get.answers.size(), 1u) << describe(get);
  ASSERT_EQ(get.answers[0].status, 200);

  const auto post = run_client(python, "client.py",
                               {"--url", proxy.url("/orders"), "--method", "POST", "--data", "{\"n\":1}", "-H",
                                "Content-Type: application/json", "-H", "Abide-Max-Wait: 20"});
  ASSERT_EQ(post.answers.size(), 1u) << describe(post);
  EXPECT_EQ(post.answers[0].status, 429);
  EXPECT_EQ(post.answers[0].outcome, "not_retryable");
  EXPECT_EQ(post.answers[0].attempts, "1");
  EXPECT_GE(whole_seconds(post.answers[0].retry_after), 0) << post.answers[0].retry_after;
  EXPECT_EQ(mock.requests(), 2);  // the GET and the one POST

  const auto keyed = run_client(python, "client.py",
                                {"--url", proxy.url("/orders"), "--method", "POST", "--data", "{\"n\":2}", "-H",
                                 "Idempotency-Key: order-2", "-H", "Abide-Max-Wait: 20"});
  ASSERT_EQ(keyed.answers.size(), 1u) << describe(keyed);
  EXPECT_EQ(keyed.answers[0].status, 200) << describe(keyed);
  EXPECT_EQ(keyed.answers[0].outcome, "done");
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0);
  proxy.stop_cleanly();
}

// OpenAI documents its 429 as a refusal of a request it did not process
// (the profile cites it): a keyless POST it limited is sent again within the
// caller's budget, after the permitted time, instead of being lost.
TEST(ProxyIdempotency, AKeylessPostARefusalLeftUnprocessedIsSentAgain) {
  REQUIRE_PROGRAM(python, "python3");
  // Quota fields only on the 429, as a gateway in front of it may send them.
  // A window long enough that the POST (a second Python start away, more on a
  // loaded machine) still meets the spent quota.
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "6", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "30", "--profile", "openai"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto first = run_client(python, "client.py", {"--url", proxy.url("/v1/chat/completions")});
  ASSERT_EQ(first.answers.size(), 1u) << describe(first);
  ASSERT_EQ(first.answers[0].status, 200);
  const auto post = run_client(python, "client.py",
                               {"--url", proxy.url("/v1/chat/completions"), "--method", "POST", "--data",
                                "{\"model\":\"m\"}", "-H", "Content-Type: application/json", "-H", "Abide-Max-Wait: 20"});
  ASSERT_EQ(post.answers.size(), 1u) << describe(post);
  EXPECT_EQ(post.answers[0].status, 200) << describe(post);
  EXPECT_EQ(post.answers[0].outcome, "done");
  EXPECT_EQ(post.answers[0].attempts, "2");
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0);
  proxy.stop_cleanly();
}

// A POST the upstream read and then dropped without answering may have been
// applied: 502 ambiguous, sent once.
TEST(ProxyIdempotency, PostWithoutAnAnswerIsAmbiguousAndNotRepeated) {
  REQUIRE_PROGRAM(python, "python3");
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "10", "-v"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto r = run_client(python, "client.py",
                            {"--url", proxy.url("/__hang?ms=100"), "--method", "POST", "--data", "x", "-H",
                             "Abide-Max-Wait: 10"});
  ASSERT_EQ(r.answers.size(), 1u) << describe(r);
  EXPECT_EQ(r.answers[0].status, 502) << describe(r);
  EXPECT_EQ(r.answers[0].outcome, "ambiguous");
  EXPECT_EQ(r.answers[0].attempts, "1");
  proxy.stop_cleanly();
}

// ---- streaming ------------------------------------------------------------------

// An event stream reaches the caller event by event, not at its end.
TEST(ProxyStreaming, ServerSentEventsArriveAsTheyAreSent) {
  REQUIRE_PROGRAM(python, "python3");
  REQUIRE_PROGRAM(node, "node");
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(upstream(mock));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  for (const auto& [interpreter, script] :
       {std::pair{python, std::string("client.py")}, std::pair{node, std::string("client.mjs")}}) {
    SCOPED_TRACE(script);
    const auto r = run_client(interpreter, script, {"--url", proxy.url("/__stream?chunks=4&gap_ms=300"), "--chunks"});
    ASSERT_EQ(r.answers.size(), 1u) << describe(r);
    const Answer& a = r.answers[0];
    EXPECT_EQ(a.status, 200);
    EXPECT_EQ(a.outcome, "done");
    ASSERT_TRUE(a.chunks.is_array() && !a.chunks.empty()) << describe(r);
    std::string body;
    for (const auto& c : a.chunks) body += c[1].get<std::string>();
    EXPECT_EQ(body, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\n");
    const double first = a.chunks.front()[0].get<double>();
    const double last = a.chunks.back()[0].get<double>();
    EXPECT_NE(a.chunks.front()[1].get<std::string>().find("data: 0"), std::string::npos);
    // The stream takes 900 ms after its head (three gaps); a buffered body
    // would arrive all at once at its end.
    EXPECT_LT(first - a.head_s, 0.9) << describe(r);
    EXPECT_GE(last - first, 0.5) << describe(r);
  }
  proxy.stop_cleanly();
}

// ---- caller hang-up ----------------------------------------------------------------

// A caller held in a cooldown (its request met a 429 upstream) that then hangs
// up; returns when it has. The mock then has seen 2 requests.
void hang_up_during_a_cooldown(const Mock& mock, const Proxy& proxy, Clock::time_point& told) {
  const auto ok = parse_answer(raw_exchange(proxy.port(), "GET /a HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"));
  ASSERT_EQ(ok.status, 200);
  const int fd = connect_loopback(proxy.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "GET /a HTTP/1.1\r\nHost: p\r\nAbide-Max-Wait: 20\r\n\r\n"));
  ASSERT_TRUE(mock.wait_for_requests(2));  // its 429: the proxy now waits for it
  told = Clock::now();
  std::this_thread::sleep_for(200ms);
  close(fd);
}

// A caller that hangs up during a cooldown is cancelled: the proxy sends
// nothing more upstream for it.
TEST(ProxyHangup, ACallerThatHangsUpDuringACooldownIsNotRetried) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "2", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "30"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  Clock::time_point told;
  ASSERT_NO_FATAL_FAILURE(hang_up_during_a_cooldown(mock, proxy, told));
  // Past the server's wait (2 s at most) and a margin: a retry would have gone by now.
  std::this_thread::sleep_until(told + 3500ms);
  EXPECT_EQ(mock.requests(), 2);
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0);
  proxy.stop_cleanly();
}

// ... and /__abide/stats counts it cancelled.
TEST(ProxyHangup, AHangUpIsCountedCancelledInStats) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "2", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "30"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  Clock::time_point told;
  ASSERT_NO_FATAL_FAILURE(hang_up_during_a_cooldown(mock, proxy, told));
  json s;
  for (int i = 0; i < 250; ++i) {  // noticed within the wait, or at its end at the latest (bounded)
    s = proxy.stats();
    if (s.is_object() && s["outcomes"].value("cancelled", 0) > 0) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(s.is_object());
  EXPECT_EQ(s["outcomes"].value("cancelled", 0), 1) << s.dump();
  EXPECT_EQ(s["held"], 0) << s.dump();
  proxy.stop_cleanly();
}

// ---- credentials -----------------------------------------------------------------

// Different credentials never share a quota: with A in a cooldown, B goes
// upstream at once. The same credential shares A's cooldown. (/__echo is
// never limited by the mock: any wait there is the proxy's.)
TEST(ProxyCredentials, SeparateCredentialsDoNotShareACooldownAndTheSameOneDoes) {
  REQUIRE_PROGRAM(python, "python3");
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "2", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "30"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const std::string a_key = "Authorization: Bearer credential-a";
  const auto first = run_client(python, "client.py", {"--url", proxy.url("/a"), "-H", a_key});
  ASSERT_EQ(first.answers.size(), 1u) << describe(first);
  ASSERT_EQ(first.answers[0].status, 200);
  // A's second request meets the limit: A is in a cooldown of up to 2 s.
  const auto limited = run_client(python, "client.py",
                                  {"--url", proxy.url("/a"), "-H", a_key, "-H", "Abide-Max-Wait: 0"});
  ASSERT_EQ(limited.answers.size(), 1u) << describe(limited);
  ASSERT_EQ(limited.answers[0].status, 429) << describe(limited);
  const auto nb = rfc3339_unix(limited.answers[0].not_before);
  ASSERT_TRUE(nb) << limited.answers[0].not_before;
  ASSERT_GT(*nb - unix_now(), 0.5) << "the test needs the cooldown still running";

  ClientRun a_run, b_run;
  std::thread a([&] {
    a_run = run_client(python, "client.py", {"--url", proxy.url("/__echo"), "-H", a_key, "-H", "Abide-Max-Wait: 10"});
  });
  b_run = run_client(python, "client.py",
                     {"--url", proxy.url("/__echo"), "-H", "Authorization: Bearer credential-b", "-H",
                      "Abide-Max-Wait: 10"});
  a.join();
  ASSERT_EQ(b_run.answers.size(), 1u) << describe(b_run);
  ASSERT_EQ(a_run.answers.size(), 1u) << describe(a_run);
  EXPECT_EQ(b_run.answers[0].status, 200);
  EXPECT_LT(number(b_run.answers[0].waited), 0.3) << "B waited for A's cooldown";
  EXPECT_EQ(a_run.answers[0].status, 200);
  // A is held until its permitted time (a small allowance for clock reading).
  EXPECT_GE(number(a_run.answers[0].waited), *nb - a_run.answers[0].start_unix - 0.1)
      << "A did not share its own cooldown: " << describe(a_run);
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0);
  proxy.stop_cleanly();
}

// ---- a fleet over Redis ---------------------------------------------------------------

// Two proxies over one redis-server: a cooldown learned through the first
// holds a request through the second.
TEST(ProxyFleet, TwoProxiesShareACooldownThroughRedis) {
#ifndef ABIDE_TEST_WITH_REDIS
  GTEST_SKIP() << "abide was built without abide::redis";
#else
  REQUIRE_PROGRAM(python, "python3");
  if (redis_server_binary().empty()) GTEST_SKIP() << "no redis-server installed";
  RedisServer redis(RedisServer::Options{true, false, {}});
  if (!redis.start()) GTEST_SKIP() << "redis-server did not start";
  const std::string store = "redis://127.0.0.1:" + std::to_string(redis.port());
  // A window of 5 s: the second request must reach the mock inside it (two
  // Python clients started in turn), on a loaded machine too.
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "5", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy one(with(upstream(mock), {"--store", store, "--max-wait", "30"}));
  Proxy two(with(upstream(mock), {"--store", store, "--max-wait", "30"}));
  ASSERT_GT(one.port(), 0) << one.err_so_far();
  ASSERT_GT(two.port(), 0) << two.err_so_far();
  const auto ok = run_client(python, "client.py", {"--url", one.url("/x")});
  ASSERT_EQ(ok.answers.size(), 1u) << describe(ok);
  ASSERT_EQ(ok.answers[0].status, 200);
  const auto limited = run_client(python, "client.py", {"--url", one.url("/x"), "-H", "Abide-Max-Wait: 0"});
  ASSERT_EQ(limited.answers.size(), 1u) << describe(limited);
  ASSERT_EQ(limited.answers[0].status, 429);
  ASSERT_EQ(mock.requests(), 2);
  // Through the second proxy, which has sent nothing yet.
  const auto held = run_client(python, "client.py", {"--url", two.url("/x"), "-H", "Abide-Max-Wait: 10"});
  ASSERT_EQ(held.answers.size(), 1u) << describe(held);
  const Answer& a = held.answers[0];
  EXPECT_TRUE((a.status == 200 && number(a.waited) > 0) || a.outcome == "deferred") << describe(held);
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0) << mock.stats()["totals"].dump();
  // Held, then sent once after the cooldown (or not at all when deferred): never sent into it.
  EXPECT_LE(mock.requests(), 3);
  one.stop_cleanly();
  two.stop_cleanly();
#endif
}

// A proxy on Redis told a 429 with Retry-After: 30, then Redis forgets (`lose`:
// FLUSHALL, or a restart with nothing saved): callers within the 30 s are
// answered deferred with the permitted time, and nothing more reaches the
// upstream before it.
void expect_the_proxy_remembers(RedisServer& redis, const std::function<void()>& lose) {
  REQUIRE_PROGRAM(python, "python3");
  const std::string store = "redis://127.0.0.1:" + std::to_string(redis.port());
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "30", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--store", store, "--max-wait", "60"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const double t0 = unix_now();  // the mock's window starts at the first request: ends at t0 + 30 or later
  const auto ok = run_client(python, "client.py", {"--url", proxy.url("/x")});
  ASSERT_EQ(ok.answers.size(), 1u) << describe(ok);
  ASSERT_EQ(ok.answers[0].status, 200);
  const auto limited = run_client(python, "client.py", {"--url", proxy.url("/x"), "-H", "Abide-Max-Wait: 0"});
  ASSERT_EQ(limited.answers.size(), 1u) << describe(limited);
  ASSERT_EQ(limited.answers[0].status, 429) << describe(limited);
  ASSERT_EQ(mock.requests(), 2);

  lose();
  for (int i = 0; i < 3; ++i) {
    const auto held = run_client(python, "client.py", {"--url", proxy.url("/x"), "-H", "Abide-Max-Wait: 1"});
    ASSERT_EQ(held.answers.size(), 1u) << describe(held);
    const Answer& a = held.answers[0];
    EXPECT_EQ(a.status, 429) << describe(held);
    EXPECT_EQ(a.outcome, "deferred") << describe(held);
    const auto nb = rfc3339_unix(a.not_before);
    ASSERT_TRUE(nb) << a.not_before;
    EXPECT_GE(*nb, t0 + 29) << a.not_before;
  }
  std::this_thread::sleep_for(300ms);  // a request the proxy might wrongly still send would show now
  EXPECT_EQ(mock.requests(), 2);
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0) << mock.stats()["totals"].dump();
  proxy.stop_cleanly();
}

TEST(ProxyFleet, AFlushedRedisForgetsNoCooldownTheProxyWasTold) {
#ifndef ABIDE_TEST_WITH_REDIS
  GTEST_SKIP() << "abide was built without abide::redis";
#else
  if (redis_server_binary().empty()) GTEST_SKIP() << "no redis-server installed";
  RedisServer redis(RedisServer::Options{true, false, {}});
  if (!redis.start()) GTEST_SKIP() << "redis-server did not start";
  expect_the_proxy_remembers(redis, [&] {
#if ABIDE_TEST_HAVE_HIREDIS
    ASSERT_EQ(redis.command({"FLUSHALL"}).text, "OK");
#else
    GTEST_SKIP() << "no hiredis to flush Redis with";
#endif
  });
#endif
}

TEST(ProxyFleet, ARedisRestartedEmptyForgetsNoCooldownTheProxyWasTold) {
#ifndef ABIDE_TEST_WITH_REDIS
  GTEST_SKIP() << "abide was built without abide::redis";
#else
  if (redis_server_binary().empty()) GTEST_SKIP() << "no redis-server installed";
  RedisServer redis(RedisServer::Options{true, false, {}});
  if (!redis.start()) GTEST_SKIP() << "redis-server did not start";
  expect_the_proxy_remembers(redis, [&] {
    redis.stop();
    ASSERT_TRUE(redis.start());
  });
#endif
}

// ---- SIGTERM -------------------------------------------------------------------------

// SIGTERM while a caller is held in a cooldown: it gets 503 with Retry-After
// and its permitted time, and the proxy exits 0.
TEST(ProxyStop, SigtermAnswersAHeldCaller503WithItsPermittedTime) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "20", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "60", "--grace", "2"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  ASSERT_EQ(parse_answer(raw_exchange(proxy.port(), "GET /s HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n")).status,
            200);
  const int fd = connect_loopback(proxy.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "GET /s HTTP/1.1\r\nHost: p\r\nAbide-Max-Wait: 60\r\nConnection: close\r\n\r\n"));
  ASSERT_TRUE(mock.wait_for_requests(2));
  std::this_thread::sleep_for(200ms);  // into its wait
  const double before = unix_now();
  const auto r = proxy.stop(SIGTERM);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const RawAnswer a = parse_answer(read_answer(fd, 10s));
  close(fd);
  EXPECT_EQ(a.status, 503);
  // Not before the permitted time: the server's 20 s window has most of its time left.
  EXPECT_GE(whole_seconds(a.header("retry-after")), 10) << a.header("retry-after");
  const auto nb = rfc3339_unix(a.header("abide-not-before"));
  ASSERT_TRUE(nb) << a.header("abide-not-before");
  EXPECT_GE(*nb, before + 10);  // the server's 20 s window is far from over
  EXPECT_EQ(mock.requests(), 2);
}

// A POST the upstream has in full when the grace ends may have been applied:
// 502 ambiguous, never "deferred" (which invites a second charge).
TEST(ProxyStop, APostInFlightPastTheGraceIsAmbiguous) {
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--grace", "0.3"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const int fd = connect_loopback(proxy.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "POST /__hang?ms=5000 HTTP/1.1\r\nHost: p\r\nContent-Type: application/json\r\n"
                           "Content-Length: 9\r\nConnection: close\r\n\r\n{\"n\": 1}\n"));
  std::this_thread::sleep_for(500ms);  // the upstream has it (/__hang is not counted among requests)
  const auto r = proxy.stop(SIGTERM);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const RawAnswer a = parse_answer(read_answer(fd, 10s));
  close(fd);
  EXPECT_EQ(a.status, 502) << a.body;
  EXPECT_EQ(a.header("abide-outcome"), "ambiguous");
  EXPECT_EQ(a.header("x-should-retry"), "false");
}

// ---- a full queue ------------------------------------------------------------------

// More callers than --jobs transfers and --queue waiting places: the one too
// many is answered 503 with Retry-After at once; the others are served.
TEST(ProxyQueue, ACallerBeyondJobsAndQueueGets503WithRetryAfter) {
  REQUIRE_PROGRAM(python, "python3");
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--jobs", "1", "--queue", "1"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  // Each transfer lasts 1.5 s: all three callers arrive while the first runs.
  const auto r = run_client(python, "client.py",
                            {"--url", proxy.url("/__stream?chunks=2&gap_ms=1500"), "--count", "3", "--parallel", "3"});
  ASSERT_EQ(r.answers.size(), 3u) << describe(r);
  int ok = 0, full = 0;
  for (const auto& a : r.answers) {
    if (a.status == 200) ++ok;
    if (a.status == 503) {
      ++full;
      EXPECT_GE(whole_seconds(a.retry_after), 1) << describe(r);
      EXPECT_LT(a.head_s - a.start_s, 1.4) << "held instead of refused: " << describe(r);
    }
  }
  EXPECT_EQ(ok, 2) << describe(r);
  EXPECT_EQ(full, 1) << describe(r);
  proxy.stop_cleanly();
}

// A full queue on a key known to be in a cooldown: the caller turned away is
// told the key's permitted time, not "in a second".
TEST(ProxyQueue, AFullQueueAnswersWithTheKeysKnownPermittedTime) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "20", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--jobs", "1", "--queue", "0"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto get = [&](const std::string& budget) {
    return parse_answer(raw_exchange(proxy.port(), "GET /q HTTP/1.1\r\nHost: p\r\nAbide-Max-Wait: " + budget +
                                                       "\r\nConnection: close\r\n\r\n"));
  };
  ASSERT_EQ(get("1").status, 200);
  ASSERT_EQ(get("1").status, 429);  // told: 20 s
  // One caller held for the cooldown fills the one place.
  const int held = connect_loopback(proxy.port());
  ASSERT_GE(held, 0);
  ASSERT_TRUE(send_all(held, "GET /q HTTP/1.1\r\nHost: p\r\nAbide-Max-Wait: 60\r\nConnection: close\r\n\r\n"));
  // Until the proxy holds it (a loaded machine may take a while to read it).
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (proxy.stats().value("held", 0) < 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(proxy.stats().value("held", 0), 1) << proxy.stats().dump();
  const RawAnswer full = get("60");
  EXPECT_EQ(full.status, 503);
  EXPECT_EQ(full.header("abide-outcome"), "deferred");
  EXPECT_GE(whole_seconds(full.header("retry-after")), 15) << full.header("retry-after");
  EXPECT_EQ(full.header("x-should-retry"), "false");
  close(held);
  proxy.stop_cleanly();
}

// Under a low descriptor limit (prlimit: 100), more idle keep-alive callers
// than it leaves room for: each new caller takes an idle one's place, and a
// fresh caller is always answered.
TEST(ProxyConnections, IdleCallersAreReclaimedSoAFreshOneIsAnswered) {
  REQUIRE_PROGRAM(prlimit, "prlimit");
  Mock mock({"--limit", "1000", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Listening proxy({prlimit, "--nofile=100:100", ABIDE_CLI_PATH, "proxy", "--port", "0", "--upstream", mock.url(),
                   "--jobs", "2"});
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  std::vector<int> idle;
  for (int i = 0; i < 60; ++i) {
    const int fd = connect_loopback(proxy.port());
    if (fd >= 0) idle.push_back(fd);
  }
  std::this_thread::sleep_for(300ms);
  for (int i = 0; i < 3; ++i) {
    const RawAnswer a =
        parse_answer(raw_exchange(proxy.port(), "GET /fresh HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n", 10s));
    EXPECT_EQ(a.status, 200) << i;
  }
  // Some of the idle ones were closed for them: they read the end.
  int closed = 0;
  for (const int fd : idle) {
    pollfd p{fd, POLLIN, 0};
    char b;
    if (poll(&p, 1, 0) > 0 && recv(fd, &b, 1, MSG_DONTWAIT) == 0) ++closed;
    close(fd);
  }
  EXPECT_GT(closed, 0);
  const auto r = proxy.stop(SIGTERM);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// --max-upstream-connections bounds the proxy's connections to an upstream
// (nginx's max_conns): callers beyond it wait for one, and every one is
// answered.
TEST(ProxyConnections, UpstreamConnectionsAreBoundedAndEveryCallerAnswered) {
  test::Concurrency concurrency;  // before the server: its handlers use it until the server stops
  httplib::Server upstream_server;
  const int port = upstream_server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  upstream_server.Get(R"(/items/(\d+))", [&](const httplib::Request& req, httplib::Response& res) {
    {
      const auto inside = concurrency.enter();
      std::this_thread::sleep_for(50ms);
    }
    res.set_content("item " + req.matches[1].str(), "text/plain");
  });
  std::thread serving([&] { upstream_server.listen_after_bind(); });
  for (int i = 0; i < 2000 && !upstream_server.is_running(); ++i) std::this_thread::sleep_for(1ms);
  {
    Proxy proxy({"--upstream", "http://127.0.0.1:" + std::to_string(port), "--max-upstream-connections", "1"});
    ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
    std::vector<RawAnswer> answers(4);
    std::vector<std::thread> callers;
    for (std::size_t i = 0; i < answers.size(); ++i)
      callers.emplace_back([&, i] {
        answers[i] = parse_answer(raw_exchange(
            proxy.port(), "GET /items/" + std::to_string(i) + " HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n",
            10s));
      });
    for (auto& c : callers) c.join();
    for (std::size_t i = 0; i < answers.size(); ++i) {
      EXPECT_EQ(answers[i].status, 200) << i;
      EXPECT_EQ(answers[i].body, "item " + std::to_string(i));
    }
    EXPECT_EQ(concurrency.most(), 1) << "more than one connection to the upstream at once";
    proxy.stop_cleanly();
  }
  upstream_server.stop();
  serving.join();
}

// Bodies in memory are bounded over every caller (--body-memory): a body a
// trickling caller holds leaves the rest for others, a body that would pass
// the bound is answered 503 with Retry-After unread, and the memory comes
// back when a request is done.
TEST(ProxyConnections, RequestBodiesInMemoryAreBoundedOverEveryCaller) {
  Mock mock({"--limit", "1000", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--body-memory", "1000"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const int slow = connect_loopback(proxy.port());
  ASSERT_GE(slow, 0);
  ASSERT_TRUE(send_all(slow, "POST /__echo HTTP/1.1\r\nHost: p\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                             "320\r\n" + std::string(800, 'a') + "\r\n"));
  std::this_thread::sleep_for(300ms);
  const auto post = [&](std::size_t n) {
    return parse_answer(raw_exchange(proxy.port(), "POST /__echo HTTP/1.1\r\nHost: p\r\nContent-Length: " +
                                                       std::to_string(n) + "\r\nConnection: close\r\n\r\n" +
                                                       std::string(n, 'b')));
  };
  EXPECT_EQ(post(150).status, 200);  // fits beside the 800
  const RawAnswer over = post(500);
  EXPECT_EQ(over.status, 503);
  EXPECT_EQ(whole_seconds(over.header("retry-after")), 1);
  ASSERT_TRUE(send_all(slow, "0\r\n\r\n"));
  const RawAnswer done = parse_answer(read_answer(slow, 10s));
  close(slow);
  EXPECT_EQ(done.status, 200);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(post(900).status, 200);  // the 800 came back
  proxy.stop_cleanly();
}

// ---- garbage -------------------------------------------------------------------------

// Bad input is answered and never forwarded; the proxy keeps serving.
TEST(ProxyGarbage, BadInputIsAnsweredAndNeverForwarded) {
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-body", "1024"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const int port = proxy.port();

  static const char kJunk[] = "\x16\x03\x01\x02\x00 garbage\0\xff\r\n\r\n";  // a TLS hello's start, NULs
  const auto junk = parse_answer(raw_exchange(port, std::string(kJunk, sizeof kJunk - 1)));
  EXPECT_EQ(junk.status, 400);
  const auto ok = parse_answer(raw_exchange(port, "GET /after HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(ok.status, 200);

  const auto big_head = parse_answer(
      raw_exchange(port, "GET /big HTTP/1.1\r\nHost: p\r\nX-Big: " + std::string(70 * 1024, 'a') +
                             "\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(big_head.status, 431);

  const auto big_body = parse_answer(
      raw_exchange(port, "POST /body HTTP/1.1\r\nHost: p\r\nContent-Length: 2048\r\nConnection: close\r\n\r\n" +
                             std::string(2048, 'b')));
  EXPECT_EQ(big_body.status, 413);

  const auto bad_wait = parse_answer(
      raw_exchange(port, "GET /w HTTP/1.1\r\nHost: p\r\nAbide-Max-Wait: abc\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(bad_wait.status, 400);
  EXPECT_NE(bad_wait.body.find("Abide-Max-Wait"), std::string::npos) << bad_wait.body;

  const auto no_host = parse_answer(raw_exchange(port, "GET /h HTTP/1.1\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(no_host.status, 400);

  const auto still = parse_answer(raw_exchange(port, "GET /last HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(still.status, 200);
  EXPECT_EQ(mock.requests(), 2);  // only the two good requests went upstream
  proxy.stop_cleanly();
}

// ---- forwarding ------------------------------------------------------------------------

// A route's base is a boundary: dot segments, plain or percent-encoded, are
// removed before the route is matched and never sent; one that climbs out of
// its route is a 400, and nothing goes upstream.
TEST(ProxyForwarding, DotSegmentsNeverWalkOutOfARoute) {
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy({"--route", "/api=" + mock.url()});
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto get = [&](const std::string& target) {
    return parse_answer(raw_exchange(proxy.port(), "GET " + target + " HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"));
  };
  for (const char* escape : {"/api/../items", "/api/x/../../items", "/api/%2e%2e/items", "/api/.%2E/items",
                             "/api/..", "/../api/items", "http://p/api/../items"}) {
    const RawAnswer a = get(escape);
    EXPECT_EQ(a.status, 400) << escape;
    EXPECT_NE(a.body.find("climb"), std::string::npos) << escape << ": " << a.body;
  }
  EXPECT_EQ(mock.requests(), 0);
  EXPECT_EQ(get("/api/x/%2E%2E/items?q=1").status, 200);
  EXPECT_EQ(mock.requests(), 1);
  // Sent as matched: the upstream sees the normalized path.
  const RawAnswer echo = get("/api/x/%2E%2E/__echo?q=1");
  EXPECT_EQ(echo.status, 200);
  EXPECT_NE(echo.body.find("/__echo"), std::string::npos) << echo.body;
  EXPECT_EQ(echo.body.find("%2E"), std::string::npos) << echo.body;
  EXPECT_EQ(echo.body.find("/x/"), std::string::npos) << echo.body;
  proxy.stop_cleanly();
}

// Pagination and redirects stay behind the proxy: Link and Location URLs
// that point at the upstream come back pointing at the proxy and its route,
// so a client that follows them never reaches the upstream directly.
TEST(ProxyForwarding, PaginationAndRedirectsComeBackThroughTheProxy) {
  httplib::Server upstream_server;
  const int port = upstream_server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  const std::string base = "http://127.0.0.1:" + std::to_string(port) + "/v3";
  std::atomic<int> served{0};
  upstream_server.Get("/v3/items", [&](const httplib::Request& req, httplib::Response& res) {
    ++served;
    const int page = req.has_param("page") ? std::atoi(req.get_param_value("page").c_str()) : 1;
    if (page < 3) {
      res.set_header("Link", "<" + base + "/items?page=" + std::to_string(page + 1) + ">; rel=\"next\", <" + base +
                                 "/items?page=3>; rel=\"last\"");
    }
    res.set_content("[" + std::to_string(page) + "]", "application/json");
  });
  upstream_server.Get("/v3/old", [&](const httplib::Request&, httplib::Response& res) {
    ++served;
    res.status = 301;
    res.set_header("Location", base + "/items?page=3");
  });
  std::thread serving([&] { upstream_server.listen_after_bind(); });
  for (int i = 0; i < 2000 && !upstream_server.is_running(); ++i) std::this_thread::sleep_for(1ms);
  {
    Proxy proxy({"--route", "/gh=" + base});
    ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
    const std::string mine = "http://127.0.0.1:" + std::to_string(proxy.port()) + "/gh/";
    std::string next = "/gh/items";
    std::vector<std::string> bodies;
    for (int i = 0; i < 5 && !next.empty(); ++i) {
      const RawAnswer a = parse_answer(raw_exchange(
          proxy.port(), "GET " + next + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(proxy.port()) +
                            "\r\nConnection: close\r\n\r\n"));
      ASSERT_EQ(a.status, 200) << next;
      bodies.push_back(a.body);
      const std::string link = a.header("link");
      next.clear();
      if (link.empty()) break;
      EXPECT_EQ(link.find(base), std::string::npos) << link;  // nothing points at the upstream
      const auto open = link.find('<');
      const std::string url = link.substr(open + 1, link.find('>') - open - 1);
      ASSERT_EQ(url.rfind(mine, 0), 0u) << url;
      next = url.substr(mine.size() - 4);  // "/gh/items?page=N"
    }
    EXPECT_EQ(bodies, (std::vector<std::string>{"[1]", "[2]", "[3]"}));
    const RawAnswer moved = parse_answer(raw_exchange(
        proxy.port(), "GET /gh/old HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(proxy.port()) +
                          "\r\nConnection: close\r\n\r\n"));
    EXPECT_EQ(moved.status, 301);
    EXPECT_EQ(moved.header("location"), mine + "items?page=3");
    EXPECT_EQ(served.load(), 4);
    proxy.stop_cleanly();
  }
  upstream_server.stop();
  serving.join();
}

// An upstream head the transport refuses (20,000 field lines) is a 502 of
// the proxy's own, never the upstream's 200 with an error text for a body.
TEST(ProxyHostileUpstream, AHeadTooLargeIsA502) {
  std::string head = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 20000; ++i) head += "X-Field-" + std::to_string(i) + ": v\r\n";
  RawUpstream upstream(head + "Content-Length: 2\r\n\r\nok");
  ASSERT_GT(upstream.port(), 0);
  Proxy proxy({"--upstream", upstream.url(), "--max-attempts", "1"});
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const RawAnswer a =
      parse_answer(raw_exchange(proxy.port(), "GET /x HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(a.status, 502) << a.body;
  EXPECT_EQ(a.header("content-type"), "application/problem+json");
  EXPECT_EQ(a.has("x-field-0"), false);
  proxy.stop_cleanly();
}

// An upstream that reads the request and never answers holds no caller past
// the read timeout: a GET gets 504, a POST (it may have been applied) 502
// ambiguous, and neither is sent again.
TEST(ProxyHostileUpstream, AStalledUpstreamIsCutAtTheReadTimeout) {
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--read-timeout", "1"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto t0 = Clock::now();
  const RawAnswer get = parse_answer(raw_exchange(
      proxy.port(), "GET /__hang?ms=20000 HTTP/1.1\r\nHost: p\r\nAbide-Max-Wait: 0.5\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(get.status, 504) << get.body;
  EXPECT_EQ(get.header("abide-attempts"), "1");
  const RawAnswer post = parse_answer(raw_exchange(
      proxy.port(), "POST /__hang?ms=20000 HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"));
  EXPECT_EQ(post.status, 502) << post.body;
  EXPECT_EQ(post.header("abide-outcome"), "ambiguous");
  EXPECT_EQ(post.header("abide-attempts"), "1");
  EXPECT_LT(Clock::now() - t0, 10s);
  proxy.stop_cleanly();
}

// A caller that stops reading its answer holds nothing past the send
// timeout: its request ends and its transfer with it, even though the
// kernel takes a byte now and then.
TEST(ProxyHostileCaller, ACallerThatStopsReadingIsDroppedAtTheSendTimeout) {
  RawUpstream upstream("HTTP/1.1 200 OK\r\nContent-Length: 33554432\r\n\r\n" + std::string(32 << 20, 'x'));
  ASSERT_GT(upstream.port(), 0);
  Proxy proxy({"--upstream", upstream.url(), "--send-timeout", "1"});
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(proxy.port()));
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_TRUE(send_all(fd, "GET /big HTTP/1.1\r\nHost: p\r\n\r\n"));
  // Read a little now and then: never enough to take a piece of the answer in a second.
  json s;
  for (int i = 0; i < 80; ++i) {
    char buf[256];
    (void)recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    std::this_thread::sleep_for(100ms);
    s = proxy.stats();
    if (i > 10 && s.is_object() && s["held"] == 0 && s["transfers"] == 0) break;
  }
  EXPECT_EQ(s["held"], 0) << s.dump();
  EXPECT_EQ(s["transfers"], 0) << s.dump();
  close(fd);
  proxy.stop_cleanly();
}

// Content-Length beside chunked (RFC 9112 6.3): the encoding wins, and the
// caller gets the whole body, not one cut at the stated length.
TEST(ProxyHostileUpstream, ContentLengthBesideChunkedIsNotTheLength) {
  RawUpstream upstream("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "a\r\n0123456789\r\n6\r\nabcdef\r\n0\r\n\r\n");
  ASSERT_GT(upstream.port(), 0);
  Proxy proxy({"--upstream", upstream.url()});
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const std::string raw = raw_exchange(proxy.port(), "GET /x HTTP/1.0\r\nHost: p\r\n\r\n");
  const RawAnswer a = parse_answer(raw);
  EXPECT_EQ(a.status, 200) << raw;
  EXPECT_FALSE(a.has("content-length")) << raw;
  EXPECT_EQ(a.body, "0123456789abcdef");  // HTTP/1.0: the body runs to the close
  proxy.stop_cleanly();
}

// What goes upstream, as the upstream saw it: no hop-by-hop field and no
// Abide-* field, the upstream's Host, the body and query intact, the route's
// prefix stripped.
TEST(ProxyForwarding, HopByHopAndAbideFieldsStayAndTheRestGoesUpstream) {
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy({"--route", "/api=" + mock.url()});
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const std::string body = "{\"hello\": \"world\"}";
  const auto raw = raw_exchange(proxy.port(), "POST /api/__echo?x=1&y=a%20b HTTP/1.1\r\n"
                                              "Host: 127.0.0.1:" +
                                                  std::to_string(proxy.port()) +
                                                  "\r\n"
                                                  "Connection: x-foo, close\r\n"
                                                  "X-Foo: named-by-connection\r\n"
                                                  "Keep-Alive: timeout=5\r\n"
                                                  "TE: trailers\r\n"
                                                  "Upgrade: h2c\r\n"
                                                  "Proxy-Authorization: Basic cHJveHk6c2VjcmV0\r\n"
                                                  "Abide-Max-Wait: 5\r\n"
                                                  "Abide-Anything: 1\r\n"
                                                  "X-Kept: yes\r\n"
                                                  "Authorization: Bearer passes-through\r\n"
                                                  "Content-Type: application/json\r\n"
                                                  "Content-Length: " +
                                                  std::to_string(body.size()) + "\r\n\r\n" + body);
  const RawAnswer a = parse_answer(raw);
  ASSERT_EQ(a.status, 200) << raw;
  std::string json_body = a.body;
  if (a.header("transfer-encoding") == "chunked") {  // de-chunk (small bodies: simple is enough)
    std::string out;
    std::size_t pos = 0;
    while (pos < json_body.size()) {
      const auto eol = json_body.find("\r\n", pos);
      if (eol == std::string::npos) break;
      const auto n = std::strtoul(json_body.c_str() + pos, nullptr, 16);
      if (n == 0) break;
      out += json_body.substr(eol + 2, n);
      pos = eol + 2 + n + 2;
    }
    json_body = out;
  }
  const json e = json::parse(json_body, nullptr, false);
  ASSERT_TRUE(e.is_object()) << raw;
  EXPECT_EQ(e["method"], "POST");
  EXPECT_EQ(e["path"], "/__echo");
  EXPECT_EQ(e["query"], "x=1&y=a%20b");
  EXPECT_EQ(e["body"], body);
  std::map<std::string, std::string> seen;
  for (const auto& h : e["headers"]) {
    std::string n = h[0].get<std::string>();
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_FALSE(seen.count(n) && n == "host") << "two Host fields";
    seen[n] = h[1].get<std::string>();
  }
  for (const char* gone : {"connection", "x-foo", "keep-alive", "te", "upgrade", "proxy-authorization",
                           "abide-max-wait", "abide-anything"})
    EXPECT_FALSE(seen.count(gone)) << gone << " was forwarded: " << e["headers"].dump();
  EXPECT_EQ(seen["host"], "127.0.0.1:" + std::to_string(mock.port()));
  EXPECT_EQ(seen["x-kept"], "yes");
  EXPECT_EQ(seen["authorization"], "Bearer passes-through");
  EXPECT_EQ(seen["content-type"], "application/json");
  EXPECT_EQ(a.header("abide-outcome"), "done");
  EXPECT_FALSE(a.header("abide-attempts").empty());
  EXPECT_FALSE(a.header("abide-waited").empty());
  // Nothing the caller did not send: no User-Agent, Accept or Content-Type
  // of the transport's own (libcurl adds each by default).
  for (const char* added : {"user-agent", "accept"}) EXPECT_FALSE(seen.count(added)) << added << ": " << e["headers"].dump();

  const auto bare = raw_exchange(proxy.port(), "PUT /api/__echo HTTP/1.1\r\nHost: p\r\nConnection: close\r\n"
                                               "Content-Length: 3\r\n\r\nabc");
  const RawAnswer b = parse_answer(bare);
  ASSERT_EQ(b.status, 200) << bare;
  const auto start = b.body.find('{');
  const json be = json::parse(b.body.substr(start == std::string::npos ? 0 : start, b.body.rfind('}') + 1 - start),
                              nullptr, false);
  ASSERT_TRUE(be.is_object()) << bare;
  EXPECT_EQ(be["body"], "abc");
  for (const auto& h : be["headers"]) {
    std::string n = h[0].get<std::string>();
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_TRUE(n != "content-type" && n != "accept" && n != "user-agent") << be["headers"].dump();
  }
  proxy.stop_cleanly();
}

// ---- its own pages ---------------------------------------------------------------------

// The proxy's stats as soon as they count `done` answers (bounded): a caller
// can read its answer a moment before the proxy has recorded it.
json stats_once_done(const Proxy& proxy, int done) {
  json s;
  for (int i = 0; i < 250; ++i) {
    s = proxy.stats();
    if (s.is_object() && s["outcomes"].value("done", 0) >= done) break;
    std::this_thread::sleep_for(20ms);
  }
  return s;
}

TEST(ProxyPages, StatsIsJsonWithTheCountsAndMetricsIsPrometheusText) {
  REQUIRE_PROGRAM(python, "python3");
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(upstream(mock));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto r = run_client(python, "client.py", {"--url", proxy.url("/p"), "--count", "3", "--keep-alive"});
  ASSERT_EQ(r.answers.size(), 3u) << describe(r);
  for (const auto& a : r.answers) ASSERT_EQ(a.status, 200) << describe(r);
  const json s = stats_once_done(proxy, 3);
  ASSERT_TRUE(s.is_object());
  EXPECT_GE(s["requests"].get<int>(), 3) << s.dump();
  EXPECT_EQ(s["answered"].value("200", 0), 3) << s.dump();
  EXPECT_EQ(s["attempts"].get<int>(), 3) << s.dump();
  EXPECT_EQ(s["outcomes"].value("done", 0), 3) << s.dump();
  EXPECT_EQ(s["held"], 0) << s.dump();
  EXPECT_EQ(s["transfers"], 0) << s.dump();
  auto c = proxy.client();
  const auto stats = c.Get("/__abide/stats");
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->status, 200);
  EXPECT_NE(stats->get_header_value("Content-Type").find("json"), std::string::npos);
  const auto metrics = c.Get("/__abide/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  EXPECT_NE(metrics->body.find("abide_proxy_requests_total"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("# TYPE abide_proxy_requests_total counter"), std::string::npos) << metrics->body;
  EXPECT_EQ(mock.requests(), 3);  // the pages are the proxy's own: never forwarded
  proxy.stop_cleanly();
}

// A caller that closes its connection the moment its answer is complete
// (Connection: close, as curl and Python's urllib do) got that answer: the
// request counts as done, not cancelled.
TEST(ProxyPages, AnAnswerReadInFullCountsAsDoneWhenTheCallerClosesAtOnce) {
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(upstream(mock));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(
        parse_answer(raw_exchange(proxy.port(), "GET /p HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n")).status,
        200);
  const json s = stats_once_done(proxy, 3);
  EXPECT_EQ(s["outcomes"].value("done", 0), 3) << s.dump();
  EXPECT_EQ(s["outcomes"].value("cancelled", 0), 0) << s.dump();
  proxy.stop_cleanly();
}

// ---- logs ---------------------------------------------------------------------------

TEST(ProxyLogs, VerboseNeverLogsACredential) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "1", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--verbose", "--max-wait", "10"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  for (int i = 0; i < 2; ++i)  // the second meets the limit: a wait and a retry are logged too
    EXPECT_EQ(parse_answer(raw_exchange(proxy.port(),
                                        "GET /v?token=s3cr3t-token HTTP/1.1\r\nHost: p\r\n"
                                        "Authorization: Bearer s3cr3t-token\r\nX-Api-Key: s3cr3t-token\r\n"
                                        "Connection: close\r\n\r\n"))
                  .status,
              200);
  const auto r = proxy.stop_cleanly();
  EXPECT_FALSE(r.err.empty()) << "--verbose logged nothing";
  EXPECT_EQ(r.err.find("s3cr3t-token"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("s3cr3t-token"), std::string::npos) << r.out;
}

// ---- usage -----------------------------------------------------------------------------

TEST(ProxyUsage, NoUpstreamOrABadRouteIsAUsageError) {
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"proxy", "--port", "0"},
                                              {"proxy", "--route", "no-slash=http://127.0.0.1:1"},
                                              {"proxy", "--route", "/a"},
                                              {"proxy", "--route", "/a=ftp://127.0.0.1/"},
                                              {"proxy", "--upstream", "not a url"},
                                              {"proxy", "--upstream", "http://127.0.0.1:1,profile=nosuch"},
                                              {"proxy", "--route", "/a=http://127.0.0.1:1,profile=Bad"}}) {
    const auto r = abide(bad);
    EXPECT_EQ(r.exit_code, 2) << bad.back() << ": " << r.err;
    EXPECT_EQ(r.out.find("listening"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace abide::test

#endif  // ABIDE_CLI_PATH
