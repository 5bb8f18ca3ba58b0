// abide mock-server itself, as `abide mock-server` in a child process, over
// HTTP and raw sockets.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/mock_server_fixture.h"
#include "support/process.h"

namespace abide::mock {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using fixture::chat;
using fixture::message;

// ---- the real server, as `abide mock-server` in a child process --------------

#ifdef ABIDE_CLI_PATH

// `abide mock-server --port 0 ARGS...`, its port read from its first line.
class MockProcess {
 public:
  explicit MockProcess(std::vector<std::string> args) : proc_(argv(std::move(args))) {
    const auto line = proc_.read_line(30s);
    const std::string prefix = "listening on 127.0.0.1:";
    if (line && line->rfind(prefix, 0) == 0) port_ = std::stoi(line->substr(prefix.size()));
  }
  int port() const { return port_; }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(10s);
    c.set_read_timeout(20s);
    c.set_write_timeout(10s);
    return c;
  }

  json stats() const {
    auto c = client();
    const auto r = c.Get("/__stats");
    if (!r || r->status != 200) return json();
    return json::parse(r->body);
  }

  // Stops with SIGTERM and expects a clean exit: 0, and no sanitizer report.
  test::RunResult stop_cleanly(int sig = SIGTERM) {
    auto r = proc_.stop(sig);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("Sanitizer"), std::string::npos) << r.err;
    return r;
  }

 private:
  static std::vector<std::string> argv(std::vector<std::string> args) {
    args.insert(args.begin(), {ABIDE_CLI_PATH, "mock-server", "--port", "0", "--threads", "16"});
    return args;
  }
  test::BackgroundProcess proc_;
  int port_ = -1;
};

httplib::Headers id(const std::string& client) { return {{"X-Client-Id", client}}; }

TEST(MockServerCli, ServesEveryMethodOnAnyPathAndControlPathsDoNotCount) {
  MockProcess m({"--style", "draft11", "--limit", "100", "--window", "1"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  auto get = c.Get("/v1/items?x=1");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 200);
  EXPECT_NE(get->body.find("\"ok\":true"), std::string::npos);
  EXPECT_TRUE(get->has_header("RateLimit"));
  EXPECT_TRUE(get->has_header("Date"));
  auto head = c.Head("/a");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  EXPECT_EQ(c.Post("/b", "{\"k\":1}", "application/json")->status, 200);
  EXPECT_EQ(c.Put("/c", "x", "text/plain")->status, 200);
  EXPECT_EQ(c.Patch("/d", "x", "text/plain")->status, 200);
  EXPECT_EQ(c.Delete("/e")->status, 200);
  EXPECT_EQ(c.Post("/__stats", "", "text/plain")->status, 405);
  EXPECT_EQ(c.Get("/__reset")->status, 405);
  const json s = m.stats();
  EXPECT_EQ(s["totals"]["requests"], 6);
  EXPECT_EQ(s["totals"]["accepted"], 6);
  EXPECT_TRUE(s["clients"].contains("127.0.0.1"));
  EXPECT_EQ(c.Post("/__reset", "", "text/plain")->status, 200);
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
  m.stop_cleanly();
}

// curl's `-X POST` sends no body and no Content-Length: the reset still works.
TEST(MockServerCli, ResetWorksWithCurlsBodilessPost) {
  if (!std::filesystem::exists("/usr/bin/curl")) GTEST_SKIP() << "no curl binary";
  MockProcess m({"--style", "draft11", "--limit", "100", "--window", "60"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  ASSERT_EQ(c.Get("/x")->status, 200);
  ASSERT_EQ(m.stats()["totals"]["requests"], 1);
  const std::string url = "http://127.0.0.1:" + std::to_string(m.port()) + "/__reset";
  std::FILE* p = ::popen(("/usr/bin/curl -sS -o /dev/null -w '%{http_code}' -X POST " + url).c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[64] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, p);
  EXPECT_EQ(::pclose(p), 0);
  EXPECT_EQ(std::string(buf, n), "200");
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
  // Still a POST only, and the connection after a bodiless reset still works.
  EXPECT_EQ(c.Get("/__reset")->status, 405);
  EXPECT_EQ(c.Get("/y")->status, 200);
  m.stop_cleanly();
}

TEST(MockServerCli, EveryStyleSendsItsFieldsAndItsWaitSignal) {
  struct Case {
    std::string style;
    std::string status;
    std::vector<std::string> on_every;    // fields on the accepted answer
    std::vector<std::string> on_limited;  // fields added when limited
  };
  const std::vector<Case> cases{
      {"draft11", "429", {"RateLimit", "RateLimit-Policy"}, {"Retry-After"}},
      {"draft11", "503", {"RateLimit", "RateLimit-Policy"}, {"Retry-After"}},
      {"draft-legacy",
       "429",
       {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy"},
       {"Retry-After"}},
      {"github", "403", {"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-used", "x-ratelimit-reset"}, {}},
      {"openai",
       "429",
       {"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"},
       {"retry-after-ms"}},
      {"retry-after-seconds", "429", {}, {"Retry-After"}},
      {"retry-after-date", "429", {}, {"Retry-After"}},
      {"malformed", "429", {"RateLimit"}, {"Retry-After"}},
      {"draft12", "429", {"RateLimit", "RateLimit-Policy", "RateLimit-Partition"}, {}},
      {"none", "429", {}, {}},
      {"gemini", "429", {}, {}},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.style + " " + k.status);
    MockProcess m({"--style", k.style, "--limited-status", k.status, "--limit", "1", "--window", "1"});
    ASSERT_GT(m.port(), 0);
    auto c = m.client();
    const auto ok = c.Get("/");
    const auto limited = c.Get("/");
    ASSERT_TRUE(ok && limited);
    EXPECT_EQ(ok->status, 200);
    EXPECT_EQ(limited->status, std::stoi(k.status));
    for (const auto& h : k.on_every) {
      EXPECT_TRUE(ok->has_header(h)) << h;
      EXPECT_TRUE(limited->has_header(h)) << h;
    }
    for (const auto& h : k.on_limited) {
      EXPECT_FALSE(ok->has_header(h)) << h;
      EXPECT_TRUE(limited->has_header(h)) << h;
    }
    if (k.style == "retry-after-seconds" || k.style == "draft11") {
      EXPECT_EQ(limited->get_header_value("Retry-After"), "1");
    }
    if (k.style == "retry-after-date") {
      EXPECT_TRUE(parse_retry_after(limited->get_header_value("Retry-After"), system_wall_clock().now()));
    }
    if (k.style == "github") {
      EXPECT_EQ(limited->get_header_value("x-ratelimit-remaining"), "0");
    }
    if (k.style == "draft12") {
      EXPECT_FALSE(limited->has_header("Retry-After"));
      EXPECT_EQ(limited->get_header_value("RateLimit"), "\"default\";a=0;w=1;c=0");
    }
    if (k.style == "gemini") {
      EXPECT_FALSE(limited->has_header("Retry-After"));
      EXPECT_NE(limited->body.find("RESOURCE_EXHAUSTED"), std::string::npos) << limited->body;
    }
    if (k.style == "none" || k.style == "retry-after-seconds" || k.style == "retry-after-date" || k.style == "gemini") {
      for (const auto& [name, value] : ok->headers) {
        std::string lower = name;
        for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        EXPECT_EQ(lower.find("ratelimit"), std::string::npos) << name;
      }
    }
    m.stop_cleanly();
  }
}

TEST(MockServerCli, CountsAnEarlyRetryAndNotAnOnTimeOne) {
  MockProcess m({"--style", "retry-after-seconds", "--limit", "1", "--window", "1"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  c.set_keep_alive(true);  // the early retry goes on the connection that got the answer
  ASSERT_EQ(c.Get("/", id("early"))->status, 200);
  ASSERT_EQ(c.Get("/", id("early"))->status, 429);
  const auto again = c.Get("/", id("early"));  // at once: premature
  ASSERT_TRUE(again);
  ASSERT_EQ(again->status, 429);
  const auto received = std::chrono::steady_clock::now();
  const int wait_s = std::stoi(again->get_header_value("Retry-After"));
  std::this_thread::sleep_until(received + std::chrono::seconds(wait_s) + 20ms);
  const auto on_time = c.Get("/", id("early"));
  ASSERT_TRUE(on_time);
  EXPECT_EQ(on_time->status, 200);
  c.stop();
  const json s = m.stats();
  EXPECT_EQ(s["clients"]["early"]["premature"], 1);
  EXPECT_EQ(s["clients"]["early"]["limited"], 2);
  EXPECT_EQ(s["clients"]["early"]["accepted"], 2);
  EXPECT_EQ(s["totals"]["premature"], 1);
  m.stop_cleanly();
}

TEST(MockServerCli, InFlightAllowanceOnNewConnections) {
  MockProcess m({"--style", "retry-after-seconds", "--limit", "1", "--window", "1", "--grace", "500"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();  // no keep-alive: each request on a new connection
  ASSERT_EQ(c.Get("/", id("g"))->status, 200);
  ASSERT_EQ(c.Get("/", id("g"))->status, 429);
  ASSERT_EQ(c.Get("/", id("g"))->status, 429);  // within the allowance: not counted
  std::this_thread::sleep_for(600ms);
  ASSERT_TRUE(c.Get("/", id("g")));  // past it, before the stated second
  const json s = m.stats();
  EXPECT_EQ(s["clients"]["g"]["premature"], 1);
  m.stop_cleanly();
}

TEST(MockServerCli, ClientIdsAreSeparate) {
  MockProcess m({"--style", "draft11", "--limit", "1", "--window", "1"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  c.set_keep_alive(true);
  auto d = m.client();
  d.set_keep_alive(true);
  EXPECT_EQ(c.Get("/", id("a"))->status, 200);
  EXPECT_EQ(c.Get("/", id("a"))->status, 429);
  EXPECT_EQ(d.Get("/", id("b"))->status, 429);  // shared quota; b was not told before
  EXPECT_EQ(c.Get("/", id("a"))->status, 429);  // a retries at once
  EXPECT_EQ(d.Get("/")->status, 429);           // no id: the peer address
  c.stop();
  d.stop();
  const json s = m.stats();
  EXPECT_EQ(s["clients"]["a"]["requests"], 3);
  EXPECT_EQ(s["clients"]["a"]["premature"], 1);
  EXPECT_EQ(s["clients"]["b"]["requests"], 1);
  EXPECT_EQ(s["clients"]["b"]["premature"], 0);
  EXPECT_EQ(s["clients"]["127.0.0.1"]["requests"], 1);
  EXPECT_EQ(s["totals"]["requests"], 5);
  m.stop_cleanly();
}

TEST(MockServerCli, FailRateWithASeedIsReproducible) {
  const auto statuses = [](MockProcess& m, int n) {
    auto c = m.client();
    std::vector<int> out;
    for (int i = 0; i < n; ++i) {
      const auto r = c.Get("/");
      out.push_back(r ? r->status : -1);
    }
    return out;
  };
  std::vector<int> first;
  {
    MockProcess m({"--fail-rate", "0.5", "--seed", "7", "--limit", "1000", "--window", "1"});
    ASSERT_GT(m.port(), 0);
    first = statuses(m, 30);
    m.client().Post("/__reset", "", "text/plain");
    EXPECT_EQ(statuses(m, 30), first);
    EXPECT_EQ(m.stats()["totals"]["failed"], std::count(first.begin(), first.end(), 503));
    m.stop_cleanly();
  }
  EXPECT_GT(std::count(first.begin(), first.end(), 503), 0);
  EXPECT_GT(std::count(first.begin(), first.end(), 200), 0);
  MockProcess again({"--fail-rate", "0.5", "--seed", "7", "--limit", "1000", "--window", "1"});
  ASSERT_GT(again.port(), 0);
  EXPECT_EQ(statuses(again, 30), first);
  again.stop_cleanly();
}

TEST(MockServerCli, LatencyDelaysEveryApiAnswer) {
  MockProcess m({"--latency", "300"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  const auto start = std::chrono::steady_clock::now();
  const auto r = c.Get("/slow");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
  m.stop_cleanly();
}

// Sends `request` on a new loopback connection and reads until the server
// closes it (or `timeout`): what came back, and whether it closed in time.
struct RawExchange {
  std::string received;
  bool closed = false;
};
RawExchange raw_exchange(int port, const std::string& request, std::chrono::milliseconds timeout) {
  RawExchange r;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return r;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return r;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[4096];
    const ssize_t k = recv(fd, buf, sizeof buf, 0);
    if (k <= 0) {
      r.closed = true;
      break;
    }
    r.received.append(buf, static_cast<std::size_t>(k));
  }
  close(fd);
  return r;
}

TEST(MockServerCli, EchoAnswersTheRequestAsReceivedAndIsNotCounted) {
  MockProcess m({"--limit", "1", "--window", "600"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  const auto r = c.Post("/__echo?a=1&b=x%2Fy", {{"X-Foo", "bar"}, {"Authorization", "Bearer t"}}, "the body",
                        "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const json e = json::parse(r->body);
  EXPECT_EQ(e["method"], "POST");
  EXPECT_EQ(e["path"], "/__echo");
  EXPECT_EQ(e["query"], "a=1&b=x%2Fy");
  EXPECT_EQ(e["body"], "the body");
  std::map<std::string, std::string> fields;
  for (const auto& h : e["headers"]) {
    ASSERT_EQ(h.size(), 2u);
    fields[h[0].get<std::string>()] = h[1].get<std::string>();
  }
  EXPECT_EQ(fields["X-Foo"], "bar");
  EXPECT_EQ(fields["Authorization"], "Bearer t");
  EXPECT_EQ(fields["Content-Type"], "text/plain");
  EXPECT_FALSE(fields.count("REMOTE_ADDR"));  // httplib's own, not received
  for (const char* method : {"GET", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    const auto x = raw_exchange(m.port(),
                                std::string(method) +
                                    " /__echo HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                                10s);
    ASSERT_NE(x.received.find("\r\n\r\n"), std::string::npos) << method;
    EXPECT_EQ(x.received.rfind("HTTP/1.1 200", 0), 0u) << method << ": " << x.received;
    const json j = json::parse(x.received.substr(x.received.find("\r\n\r\n") + 4), nullptr, false);
    EXPECT_EQ(j.value("method", ""), method);
  }
  // Control paths leave the quota alone: the one API request allowed is still there.
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
  EXPECT_EQ(c.Get("/api")->status, 200);
  m.stop_cleanly();
}

TEST(MockServerCli, StreamSendsEachEventAsItsOwnChunkAfterTheGap) {
  MockProcess m({"--limit", "1", "--window", "600"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::string>> arrivals;
  const auto start = std::chrono::steady_clock::now();
  const auto r = c.Get("/__stream?chunks=4&gap_ms=150", [&](const char* data, std::size_t n) {
    arrivals.emplace_back(std::chrono::steady_clock::now(), std::string(data, n));
    return true;
  });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_EQ(r->get_header_value("Transfer-Encoding"), "chunked");
  std::string body;
  for (const auto& [t, d] : arrivals) body += d;
  EXPECT_EQ(body, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\n");
  ASSERT_GE(arrivals.size(), 2u);
  // Three gaps of 150 ms lie between the first event and the last: the
  // first is not held back until the end. (The first may reach the client
  // later after it was sent than the last does, so the span seen can fall a
  // little short of 450 ms: a body held back whole would show almost none.)
  EXPECT_EQ(arrivals.front().second.rfind("data: 0", 0), 0u);
  EXPECT_GE(arrivals.back().first - arrivals.front().first, 300ms);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 450ms);
  const auto empty = c.Get("/__stream?chunks=0");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->status, 200);
  EXPECT_EQ(empty->body, "");
  for (const char* bad : {"/__stream?chunks=1001", "/__stream?gap_ms=10001", "/__stream?chunks=abc",
                          "/__stream?chunks=-1", "/__stream?gap_ms=", "/__stream?chunks=99999999999999999999"}) {
    const auto b = c.Get(bad);
    ASSERT_TRUE(b) << bad;
    EXPECT_EQ(b->status, 400) << bad;
  }
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
  m.stop_cleanly();
}

TEST(MockServerCli, HangReadsTheRequestThenClosesWithoutAnAnswer) {
  MockProcess m({"--limit", "1", "--window", "600"});
  ASSERT_GT(m.port(), 0);
  const auto start = std::chrono::steady_clock::now();
  const auto x = raw_exchange(m.port(), "POST /__hang?ms=200 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc", 20s);
  EXPECT_TRUE(x.closed);
  EXPECT_EQ(x.received, "");  // not one byte of answer
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  // On a kept-alive connection after an answered request: the first is
  // answered, then the connection closes with nothing for the second.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(m.port()));
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string first = "GET /__echo HTTP/1.1\r\nHost: h\r\n\r\n";
  ASSERT_EQ(send(fd, first.data(), first.size(), MSG_NOSIGNAL), static_cast<ssize_t>(first.size()));
  std::string got;
  while (got.find("\n}\n") == std::string::npos) {  // the echo's JSON ends its body
    pollfd p{fd, POLLIN, 0};
    ASSERT_GT(poll(&p, 1, 10000), 0) << got;
    char buf[4096];
    const ssize_t k = recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(k, 0) << got;
    got.append(buf, static_cast<std::size_t>(k));
  }
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  const std::string second = "GET /__hang?ms=0 HTTP/1.1\r\nHost: h\r\n\r\n";
  ASSERT_EQ(send(fd, second.data(), second.size(), MSG_NOSIGNAL), static_cast<ssize_t>(second.size()));
  pollfd p{fd, POLLIN, 0};
  ASSERT_GT(poll(&p, 1, 10000), 0);
  char buf[64];
  EXPECT_EQ(recv(fd, buf, sizeof buf, 0), 0);  // closed, not one byte of answer
  close(fd);
  const auto bad = m.client().Get("/__hang?ms=600001");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
  m.stop_cleanly();
}

TEST(MockServerCli, StopEndsAHangAndAStreamAtOnce) {
  MockProcess m({});
  ASSERT_GT(m.port(), 0);
  RawExchange hang, stream;
  std::thread h([&] { hang = raw_exchange(m.port(), "GET /__hang?ms=600000 HTTP/1.1\r\nHost: h\r\n\r\n", 30s); });
  std::thread s([&] {
    stream = raw_exchange(m.port(), "GET /__stream?chunks=1000&gap_ms=10000 HTTP/1.1\r\nHost: h\r\n\r\n", 30s);
  });
  // Both held in the server before it is told to stop: the stream's first event came.
  for (int i = 0; i < 200 && m.stats().is_null(); ++i) std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(300ms);
  const auto start = std::chrono::steady_clock::now();
  m.stop_cleanly();
  h.join();
  s.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);  // not the hour the requests asked for
  EXPECT_TRUE(hang.closed);
  EXPECT_EQ(hang.received, "");
  EXPECT_TRUE(stream.closed);
  EXPECT_NE(stream.received.find("data: 0"), std::string::npos) << stream.received;
}

TEST(MockServerCli, ConcurrentClientsAreCountedExactly) {
  const auto record = std::filesystem::temp_directory_path() / ("abide_mock_record_" + std::to_string(getpid()));
  // One long window: every request falls in it whatever the machine's speed.
  MockProcess m({"--limit", "100", "--window", "600", "--record", record.string()});
  ASSERT_GT(m.port(), 0);
  constexpr int kThreads = 8, kEach = 40;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0}, limited{0}, other{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto c = m.client();
      c.set_keep_alive(t % 2 == 0);
      for (int i = 0; i < kEach; ++i) {
        const auto r = c.Get("/w", id("w" + std::to_string(t)));
        (r && r->status == 200 ? ok : r && r->status == 429 ? limited : other).fetch_add(1);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 100);
  EXPECT_EQ(limited.load(), kThreads * kEach - 100);
  EXPECT_EQ(other.load(), 0);
  const json s = m.stats();
  EXPECT_EQ(s["totals"]["requests"], kThreads * kEach);
  EXPECT_EQ(s["totals"]["accepted"], 100);
  int sum = 0;
  for (const auto& [name, cj] : s["clients"].items()) {
    EXPECT_EQ(cj["requests"], kEach) << name;
    sum += cj["accepted"].get<int>();
  }
  EXPECT_EQ(sum, 100);
  ASSERT_EQ(s["windows"].size(), 1u);
  EXPECT_EQ(s["windows"][0]["accepted"], 100);
  m.stop_cleanly();
  std::ifstream in(record);
  int lines = 0, accepted = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    const json r = json::parse(line);
    if (r["status"] == 200) ++accepted;
    // A limited answer's record states its permitted time P (after the answer); others have none.
    if (r["outcome"] == "limited") {
      ASSERT_TRUE(r.contains("permitted")) << line;
      EXPECT_GT(r["permitted"].get<double>(), r["t"].get<double>()) << line;
    } else {
      EXPECT_FALSE(r.contains("permitted")) << line;
    }
  }
  EXPECT_EQ(lines, kThreads * kEach);
  EXPECT_EQ(accepted, 100);
  std::filesystem::remove(record);
}

// The token styles over HTTP: the body reaches the limiter, bounded; a stream
// is sent as text/event-stream; the stats count the tokens.
TEST(MockServerCli, TokenStylesReadTheBodyOverHttp) {
  MockProcess m({"--style", "openai-tokens", "--limit", "100", "--window", "60", "--token-limit", "1000"});
  ASSERT_GT(m.port(), 0);
  auto c = m.client();
  const auto ok = c.Post("/v1/chat/completions", chat(400, {{"max_tokens", 50}}), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->get_header_value("x-ratelimit-remaining-tokens"), "900");
  EXPECT_EQ(json::parse(ok->body)["usage"]["prompt_tokens"], 100);
  const auto stream = c.Post("/v1/chat/completions", chat(4, {{"max_tokens", 8}, {"stream", true}}),
                             "application/json");
  ASSERT_TRUE(stream);
  EXPECT_EQ(stream->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_NE(stream->body.find("data: [DONE]"), std::string::npos);
  const auto bad = c.Post("/v1/chat/completions", "{\"messages\":", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["type"], "invalid_request_error");
  const auto large = c.Post("/v1/chat/completions", std::string(kMaxBodyBytes + 1, ' '), "application/json");
  ASSERT_TRUE(large);
  EXPECT_EQ(large->status, 413);
  const auto limited = c.Post("/v1/chat/completions", chat(4, {{"max_tokens", 950}}), "application/json");
  ASSERT_TRUE(limited);
  EXPECT_EQ(limited->status, 429);
  EXPECT_TRUE(limited->has_header("retry-after-ms"));
  EXPECT_TRUE(limited->has_header("retry-after"));
  const json s = m.stats();
  EXPECT_EQ(s["totals"]["requests"], 3);
  EXPECT_EQ(s["totals"]["invalid"], 1);  // the 413 never reached the limiter: the server refused it first
  EXPECT_EQ(s["totals"]["tokens"]["admitted"], 100 + 8);
  m.stop_cleanly();

  MockProcess a({"--style", "anthropic-tokens", "--limit", "10", "--window", "60", "--token-limit", "500",
                 "--output-token-limit", "300"});
  ASSERT_GT(a.port(), 0);
  auto ac = a.client();
  const auto msg = ac.Post("/v1/messages", message(0, 40, {{"max_tokens", 100}}), "application/json");
  ASSERT_TRUE(msg);
  EXPECT_EQ(msg->status, 200);
  EXPECT_EQ(msg->get_header_value("anthropic-ratelimit-input-tokens-remaining"), "490");
  EXPECT_EQ(msg->get_header_value("anthropic-ratelimit-output-tokens-remaining"), "200");
  EXPECT_EQ(json::parse(msg->body)["usage"]["input_tokens"], 10);
  const auto missing = ac.Post("/v1/messages", message(0, 40), "application/json");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 400);
  EXPECT_EQ(json::parse(missing->body)["error"]["type"], "invalid_request_error");
  a.stop_cleanly();
}

TEST(MockServerCli, RefusesAnythingButLoopback) {
  for (const char* addr : {"0.0.0.0", "192.168.1.1", "10.0.0.1", "::1", "::", "example.com"}) {
    const auto r = test::abide({"mock-server", "--bind", addr, "--port", "0"});
    EXPECT_EQ(r.exit_code, 2) << addr;
    EXPECT_NE(r.err.find("loopback"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("listening"), std::string::npos);
  }
}

TEST(MockServerCli, UsageErrors) {
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--style", "bogus"},
                                              {"--limited-status", "500"},
                                              {"--window", "0"},
                                              {"--limit", "0"},
                                              {"--fail-rate", "2"},
                                              {"--port", "70000"},
                                              {"--align", "noon"},
                                              {"--token-limit", "0"},
                                              {"--style", "anthropic-tokens", "--output-token-limit", "0"},
                                              {"--style", "draft11", "--token-limit", "5"},
                                              {"--style", "openai-tokens", "--output-token-limit", "5"},
                                              {"--style", "gemini", "--limited-status", "503"}}) {
    std::vector<std::string> args{"mock-server"};
    args.insert(args.end(), bad.begin(), bad.end());
    const auto r = test::abide(args);
    EXPECT_EQ(r.exit_code, 2) << bad[0] << " " << bad[1] << ": " << r.err;
  }
}

TEST(MockServerCli, StopsOnSigintAndAfterItsDuration) {
  {
    MockProcess m({});
    ASSERT_GT(m.port(), 0);
    const auto r = m.stop_cleanly(SIGINT);
    EXPECT_NE(r.err.find("stopped (SIGINT)"), std::string::npos) << r.err;
  }
  const auto stats_file = std::filesystem::temp_directory_path() / ("abide_mock_stats_" + std::to_string(getpid()));
  const auto r = test::abide(
      {"mock-server", "--port", "0", "--duration", "0.3", "--quiet", "--stats-file", stats_file.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("listening on 127.0.0.1:", 0), 0u) << r.out;
  EXPECT_EQ(r.err.find("abide"), std::string::npos) << r.err;  // --quiet
  std::ifstream in(stats_file);
  const json s = json::parse(in, nullptr, false);
  ASSERT_FALSE(s.is_discarded());
  EXPECT_EQ(s["totals"]["requests"], 0);
  std::filesystem::remove(stats_file);
}

TEST(MockServerCli, HelpDefinesPrematureAndTheStatsShape) {
  const auto r = test::abide({"mock-server", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Premature request"), std::string::npos);
  EXPECT_NE(r.out.find("strictly earlier"), std::string::npos);
  EXPECT_NE(r.out.find("/__stats"), std::string::npos);
}

#endif  // ABIDE_CLI_PATH

}  // namespace
}  // namespace abide::mock
