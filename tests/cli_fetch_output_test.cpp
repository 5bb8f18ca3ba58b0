// `abide fetch` end to end, where answers go: -i, -I, -D, -O, -f, -w, -L, -x,
// several URLs, --stats -, --resume, and outputs checked before anything is
// sent. Where curl can produce the same output from the same server, its
// output is the reference.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fetch/body_output.h"
#include "fetch/fetch_redirect.h"
#include "fetch/fetch_write_out.h"
#include "support/fetch_cli.h"
#include "support/run.h"

namespace abide::test {
namespace {

using cli::WriteOutValues;

// --- -w: the expansion ---------------------------------------------------------

std::string expand(const std::string& format, const WriteOutValues& v) {
  return cli::expand_write_out(cli::parse_write_out(format), v).out;
}

TEST(WriteOut, VariablesAsCurlWritesThem) {
  WriteOutValues v;
  v.http_code = 200;
  v.url = "http://h/a";
  v.url_effective = "http://h/b";
  v.method = "GET";
  v.time_total = std::chrono::microseconds(1'234'567);
  v.num_retries = 2;
  v.num_redirects = 1;
  v.size_download = 42;
  v.exitcode = 0;
  v.outcome = "done";
  v.waited = std::chrono::milliseconds(1500);
  v.attempts = 3;
  EXPECT_EQ(expand("%{http_code} %{response_code} %{url} %{url_effective} %{method}", v),
            "200 200 http://h/a http://h/b GET");
  EXPECT_EQ(expand("%{time_total}|%{num_retries}|%{num_redirects}|%{size_download}|%{exitcode}", v),
            "1.234567|2|1|42|0");
  EXPECT_EQ(expand("%{abide_outcome} %{abide_waited} %{abide_attempts} [%{abide_not_before}]", v),
            "done 1.500000 3 []");
  v.not_before = WallTime(std::chrono::seconds(1'700'000'000));
  EXPECT_EQ(expand("%{abide_not_before}", v), "2023-11-14T22:13:20Z");
}

TEST(WriteOut, NoAnswerIsCode000) { EXPECT_EQ(expand("%{http_code} %{http_version}", WriteOutValues{}), "000 0"); }

TEST(WriteOut, HttpVersionAsCurlWritesIt) {
  WriteOutValues v;
  for (const auto& [version, text] :
       std::vector<std::pair<int, std::string>>{{10, "1.0"}, {11, "1.1"}, {20, "2"}, {30, "3"}, {0, "0"}, {12, "0"}}) {
    v.http_version = version;
    EXPECT_EQ(expand("%{http_version}", v), text) << version;
  }
}

TEST(WriteOut, EscapesAndPercentAsCurl) {
  // curl 7.88: \n \r \t are escapes; any other backslash pair stays as it is,
  // and so does '%' before anything but '%' and '{'.
  EXPECT_EQ(expand("a\\nb\\tc\\rd", {}), "a\nb\tc\rd");
  EXPECT_EQ(expand("100%% \\z \\\\n %x", {}), "100% \\z \\\\n %x");
  EXPECT_EQ(expand("end%", {}), "end%");
  EXPECT_EQ(expand("end\\", {}), "end\\");
}

TEST(WriteOut, UnterminatedVariableIsText) {
  EXPECT_EQ(expand("%{http_code", {}), "%{http_code");
  EXPECT_EQ(expand("%header{x", {}), "%header{x");
}

TEST(WriteOut, UnknownVariableIsNothingAndNamedOnce) {
  const auto f = cli::parse_write_out("a%{nope}b%{nope}c%{other}");
  EXPECT_EQ(f.unknown, (std::vector<std::string>{"nope", "other"}));
  EXPECT_EQ(cli::expand_write_out(f, {}).out, "abc");
}

TEST(WriteOut, StderrAndStdoutSwitch) {
  const auto t = cli::expand_write_out(cli::parse_write_out("1%{stderr}2%{stdout}3%{stderr}4"), {});
  EXPECT_EQ(t.out, "13");
  EXPECT_EQ(t.err, "24");
}

TEST(WriteOut, HeaderValuesAreMadePrintable) {
  HeaderList h;
  h.add("Content-Type", "text/plain");
  h.add("X-Evil", "a\x1b[2Jb");
  WriteOutValues v;
  v.headers = &h;
  EXPECT_EQ(expand("%{content_type} %header{content-type} %header{x-evil} [%header{missing}]", v),
            "text/plain text/plain a\\x1b[2Jb []");
}

TEST(WriteOut, FormatFromFile) {
  TempDir dir;
  { std::ofstream(dir / "fmt") << "code=%{http_code}"; }
  auto text = cli::write_out_argument("@" + (dir / "fmt"));
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "code=%{http_code}");
  auto missing = cli::write_out_argument("@" + (dir / "none"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().text.find("No such file or directory"), std::string::npos) << missing.error().text;
  EXPECT_EQ(*cli::write_out_argument("plain"), "plain");
}

// --- -L: where to, and what is sent ---------------------------------------------

TEST(Redirect, FollowedStatuses) {
  for (int s : {301, 302, 303, 307, 308}) EXPECT_TRUE(cli::is_followed_redirect(s)) << s;
  for (int s : {200, 300, 304, 305, 306, 404}) EXPECT_FALSE(cli::is_followed_redirect(s)) << s;
}

TEST(Redirect, LocationResolvedAgainstTheRequestUrl) {
  EXPECT_EQ(*cli::resolve_location("http://h:8/a/b?q=1", "c"), "http://h:8/a/c");
  EXPECT_EQ(*cli::resolve_location("http://h:8/a/b", "/x?y=2"), "http://h:8/x?y=2");
  EXPECT_EQ(*cli::resolve_location("http://h/a", "//other/p"), "http://other/p");
  EXPECT_EQ(*cli::resolve_location("http://h/a", "https://s.example/z"), "https://s.example/z");
  EXPECT_FALSE(cli::resolve_location("http://h/a", "ftp://h/f"));
  EXPECT_FALSE(cli::resolve_location("http://h/a", ""));
  const auto bad = cli::resolve_location("http://h/a", std::string("x\x1b\ny", 4));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().text.find('\x1b'), std::string::npos) << "server bytes are shown printable";
}

Request post_with_credentials() {
  Request r;
  r.method = "POST";
  r.url = "http://h:8/start";
  r.body = "payload";
  return r;
}

HeaderList credential_headers() {
  HeaderList h;
  h.add("Authorization", "Basic dTpw");
  h.add("Cookie", "s=1");
  h.add("Proxy-Authorization", "Basic cA==");
  h.add("X-Other", "kept");
  return h;
}

TEST(Redirect, SeeOtherBecomesGetWithoutBody) {
  const Request next = cli::redirected_request(post_with_credentials(), 303, "http://h:8/see", "http://h:8/start",
                                               credential_headers(), std::nullopt);
  EXPECT_EQ(next.method, "GET");
  EXPECT_TRUE(next.body.empty());
  Request head = post_with_credentials();
  head.method = "HEAD";
  head.body.clear();
  EXPECT_EQ(cli::redirected_request(head, 303, "http://h:8/see", head.url, {}, std::nullopt).method, "HEAD");
}

TEST(Redirect, PostBecomesGetOn301And302ButNot307And308) {
  for (int s : {301, 302}) {
    const Request n = cli::redirected_request(post_with_credentials(), s, "http://h:8/n", "http://h:8/start", {}, {});
    EXPECT_EQ(n.method, "GET") << s;
    EXPECT_TRUE(n.body.empty()) << s;
  }
  for (int s : {307, 308}) {
    const Request n = cli::redirected_request(post_with_credentials(), s, "http://h:8/n", "http://h:8/start", {}, {});
    EXPECT_EQ(n.method, "POST") << s;
    EXPECT_EQ(n.body, "payload") << s;
  }
  Request put = post_with_credentials();
  put.method = "PUT";
  EXPECT_EQ(cli::redirected_request(put, 302, "http://h:8/n", put.url, {}, {}).method, "PUT");
}

TEST(Redirect, CredentialsOnlyToTheFirstOrigin) {
  const auto names = [](const Request& r) {
    std::vector<std::string> v;
    for (const Header& h : r.headers.lines()) v.push_back(h.name);
    return v;
  };
  const std::vector<std::string> all{"Authorization", "Cookie", "Proxy-Authorization", "X-Other"};
  const std::vector<std::string> stripped{"X-Other"};
  const Request p = post_with_credentials();
  const HeaderList h = credential_headers();
  EXPECT_EQ(names(cli::redirected_request(p, 307, "http://h:8/same", "http://h:8/start", h, {})), all);
  EXPECT_EQ(names(cli::redirected_request(p, 307, "http://H:8/case", "http://h:8/start", h, {})), all);
  EXPECT_EQ(names(cli::redirected_request(p, 307, "http://other:8/x", "http://h:8/start", h, {})), stripped);
  EXPECT_EQ(names(cli::redirected_request(p, 307, "http://h:9/x", "http://h:8/start", h, {})), stripped) << "port";
  EXPECT_EQ(names(cli::redirected_request(p, 307, "https://h:8/x", "http://h:8/start", h, {})), stripped) << "scheme";
  // Back on the first origin, they are sent again (curl compares with the first host).
  Request away = p;
  away.url = "http://other/x";
  EXPECT_EQ(names(cli::redirected_request(away, 307, "http://h:8/back", "http://h:8/start", h, {})), all);
}

TEST(Redirect, PermittedTimeAndDeadlineCarryOver) {
  Request p = post_with_credentials();
  p.deadline = MonoTime(std::chrono::seconds(50));
  p.idempotency_key = "k";
  const WallTime at(std::chrono::seconds(1000));
  const Request n = cli::redirected_request(p, 307, "http://h:8/n", p.url, {}, at);
  EXPECT_EQ(n.not_before, at);
  EXPECT_EQ(n.deadline, p.deadline);
  EXPECT_EQ(n.idempotency_key, p.idempotency_key);
}

// --- names and heads -------------------------------------------------------------

TEST(Outputs, RemoteFileNameIsTheLastSegment) {
  EXPECT_EQ(cli::remote_file_name("http://h/dir/file.txt?x=1#f"), "file.txt");
  EXPECT_EQ(cli::remote_file_name("http://h:8/a%20b"), "a%20b");
  EXPECT_FALSE(cli::remote_file_name("http://h/"));
  EXPECT_FALSE(cli::remote_file_name("http://h"));
  EXPECT_FALSE(cli::remote_file_name("http://h/dir/"));
  EXPECT_FALSE(cli::remote_file_name("http://h/.."));
}

TEST(Outputs, HeadTextAsCurlIncludesIt) {
  engine::Response r;
  r.status = 429;
  r.headers.add("Retry-After", "5");
  r.headers.add("X-A", "b");
  EXPECT_EQ(cli::head_text(r), "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\r\nX-A: b\r\n\r\n");
}

TEST(Outputs, AHeadForATerminalHasNoServerByteRaw) {
  engine::Response r;
  r.status = 200;
  r.headers.add("X-Evil", std::string("a\x1b]0;owned\x07"
                                      "b\xff"));
  // A file or a pipe gets the bytes as received, as curl writes them.
  EXPECT_EQ(cli::head_text(r), std::string("HTTP/1.1 200 OK\r\nX-Evil: a\x1b]0;owned\x07"
                                           "b\xff\r\n\r\n"));
  // A terminal gets them escaped.
  EXPECT_EQ(cli::head_text(r, true), "HTTP/1.1 200 OK\r\nX-Evil: a\\x1b]0;owned\\x07b\\xff\r\n\r\n");
}

// --- end to end ---------------------------------------------------------------------

// A cpp-httplib server inside the test, on 127.0.0.1, for answers the mock
// server does not give (errors, redirects, a request line as received).
class TestServer {
 public:
  TestServer() {
    const auto count = [this](const httplib::Request& req) {
      std::lock_guard lock(mu_);
      ++hits_[req.path];
      targets_.push_back(req.target);
    };
    const auto handler = [this, count](const httplib::Request& req, httplib::Response& res) {
      count(req);
      route(req, res);
    };
    server_.Get(".*", handler);
    server_.Post(".*", handler);
    server_.Put(".*", handler);
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ > 0) thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 5000 && port_ > 0 && !server_.is_running(); ++i) std::this_thread::sleep_for(1ms);
  }
  ~TestServer() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  int hits(const std::string& path) {
    std::lock_guard lock(mu_);
    return hits_[path];
  }
  int total_hits() {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const auto& [p, k] : hits_) n += k;
    return n;
  }
  std::vector<std::string> targets() {
    std::lock_guard lock(mu_);
    return targets_;
  }
  void set_ready(const std::string& path) {
    std::lock_guard lock(mu_);
    ready_.push_back(path);
  }
  void set_away(std::string url) {
    std::lock_guard lock(mu_);
    away_ = std::move(url);
  }

 private:
  void route(const httplib::Request& req, httplib::Response& res) {
    const std::string& p = req.path;
    std::string away;
    bool ready = false;
    {
      std::lock_guard lock(mu_);
      away = away_;
      ready = std::find(ready_.begin(), ready_.end(), p) != ready_.end();
    }
    if (p == "/ok" || p == "/files/data.txt" || p == "/a" || p == "/b" || p == "/c") {
      res.set_header("X-Thing", "one");
      res.set_content(p == "/ok" ? "ok\n" : "body of " + p + "\n", "text/plain");
    } else if (p == "/text") {
      // Long and repetitive: worth compressing, when asked.
      std::string body = "accept-encoding=" + req.get_header_value("Accept-Encoding") + "\n";
      for (int i = 0; i < 200; ++i) body += "the same line again and again\n";
      res.set_content(body, "text/plain");
    } else if (p == "/404") {
      res.status = 404;
      res.set_content("not here\n", "text/plain");
    } else if (p == "/echo") {
      res.set_content(req.method + " body=" + req.body + " auth=" + req.get_header_value("Authorization") +
                          " cookie=" + req.get_header_value("Cookie") + "\n",
                      "text/plain");
    } else if (p == "/r302" || p == "/r303" || p == "/r307" || p == "/loop" || p == "/ra" || p == "/away" ||
               p == "/ra-away") {
      res.status = p == "/r303" ? 303 : p == "/r307" ? 307 : 302;
      const std::string to = p == "/r302" || p == "/ra"        ? "/ok"
                             : p == "/loop"                    ? "/loop"
                             : p == "/away" || p == "/ra-away" ? away
                                                               : "/echo";
      res.set_header("Location", to);
      if (p == "/ra" || p == "/ra-away") res.set_header("Retry-After", "3600");
      res.set_content("moved\n", "text/plain");
    } else if (p == "/later" || p == "/later2") {
      if (ready) {
        res.set_content(p.substr(1) + "\n", "text/plain");
      } else {
        res.status = 503;
        res.set_header("Retry-After", "3600");
        res.set_content("busy\n", "text/plain");
      }
    } else {
      res.status = 200;
      res.set_content("target " + req.target + "\n", "text/plain");
    }
  }

  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, int> hits_;
  std::vector<std::string> targets_;
  std::vector<std::string> ready_;  // paths that answer at once
  std::string away_;
};

RunResult curl(std::vector<std::string> args) {
  args.insert(args.begin(), {"/usr/bin/curl", "-s", "--noproxy", "*"});
  return run(args);
}

// The lines of a head, without the Date line (it may differ from one answer to the next).
std::vector<std::string> head_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find("\r\n", at);
    if (end == std::string::npos) break;
    std::string line = text.substr(at, end - at);
    at = end + 2;
    if (line.empty()) break;
    if (line.rfind("Date:", 0) == 0) continue;
    lines.push_back(std::move(line));
  }
  return lines;
}

TEST(FetchOutput, HelpRuns) {
  const RunResult r = run(fetch_argv({"--help"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(FetchOutput, IncludeWritesTheHeadBeforeTheBodyAsCurl) {
  TestServer s;
  const RunResult a = run(fetch_argv({"-s", "-i", s.url("/ok")}));
  const RunResult c = curl({"-i", s.url("/ok")});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(a.out, c.out);
  EXPECT_TRUE(a.out.starts_with("HTTP/1.1 200 OK\r\n")) << a.out;
  EXPECT_TRUE(a.out.ends_with("\r\n\r\nok\n")) << a.out;
}

TEST(FetchOutput, IncludeOnTheMockServerHasCurlsStatusAndFieldNames) {
  // The mock's quota fields change from one answer to the next: the status
  // line and the field names are what both can produce alike.
  Mock mock({"--style", "draft11", "--limit", "100"});
  ASSERT_GT(mock.port(), 0);
  const RunResult a = run(fetch_argv({"-s", "-i", mock.url("/items/1")}));
  const RunResult c = curl({"-i", mock.url("/items/1")});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto names = [](const std::vector<std::string>& lines) {
    std::vector<std::string> v;
    for (const auto& l : lines) v.push_back(l.substr(0, l.find(':')));
    return v;
  };
  const auto al = head_lines(a.out), cl = head_lines(c.out);
  ASSERT_FALSE(al.empty());
  EXPECT_EQ(al.front(), cl.front());
  EXPECT_EQ(names(al), names(cl));
}

TEST(FetchOutput, HeadWritesTheHeadAsCurlDashI) {
  TestServer s;
  const RunResult a = run(fetch_argv({"-s", "-I", s.url("/ok")}));
  const RunResult c = curl({"-I", s.url("/ok")});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, c.out);
  EXPECT_TRUE(a.out.ends_with("\r\n\r\n")) << a.out;
  EXPECT_EQ(a.out.find("ok\n"), std::string::npos);
}

TEST(FetchOutput, DumpHeaderWritesHeadsToAFileAsCurl) {
  TestServer s;
  TempDir dir;
  const RunResult a = run(fetch_argv({"-s", "-D", dir / "a.txt", "-o", dir / "a.body", s.url("/ok")}));
  const RunResult c = curl({"-D", dir / "c.txt", "-o", dir / "c.body", s.url("/ok")});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(slurp(dir / "a.txt"), slurp(dir / "c.txt"));
  EXPECT_EQ(slurp(dir / "a.body"), "ok\n");
  EXPECT_EQ(a.out, "");
  // "-" is stdout, before the body.
  const RunResult d = run(fetch_argv({"-s", "-D", "-", s.url("/ok")}));
  const RunResult cd = curl({"-D", "-", s.url("/ok")});
  EXPECT_EQ(d.out, cd.out);
}

TEST(FetchOutput, RemoteNameWritesTheLastSegmentInTheWorkingFolder) {
  TestServer s;
  TempDir dir;
  std::filesystem::create_directories(dir / "work");
  const auto here = std::filesystem::current_path();
  std::filesystem::current_path(dir / "work");
  const RunResult a = run(fetch_argv({"-s", "-O", s.url("/files/data.txt?v=1")}));
  std::filesystem::current_path(here);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(slurp(dir / "work/data.txt"), "body of /files/data.txt\n");
  EXPECT_EQ(a.out, "");
  // With --output-dir, there (as curl's --output-dir).
  const RunResult b = run(fetch_argv({"-s", "-O", "--output-dir", dir / "out", s.url("/files/data.txt")}));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(slurp(dir / "out/data.txt"), "body of /files/data.txt\n");
}

TEST(FetchOutput, RemoteNameWithoutASegmentFailsBeforeSending) {
  TestServer s;
  TempDir dir;
  const RunResult a = run(fetch_argv({"-O", "--output-dir", dir / "o", s.url("/")}));
  EXPECT_EQ(a.exit_code, 1) << a.err;
  EXPECT_NE(a.err.find("-O"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("has no file name"), std::string::npos) << a.err;
  EXPECT_EQ(s.total_hits(), 0);
  // curl refuses it too.
  EXPECT_NE(curl({"-O", "--output-dir", dir / "o", s.url("/")}).exit_code, 0);
}

TEST(FetchOutput, FailWritesNoBodyForAnHttpError) {
  TestServer s;
  const RunResult a = run(fetch_argv({"-f", s.url("/404")}));
  const RunResult c = curl({"-f", s.url("/404")});
  EXPECT_EQ(a.exit_code, 1) << "abide's exit status rule, not curl's 22";
  EXPECT_EQ(c.exit_code, 22);
  EXPECT_EQ(a.out, c.out);
  EXPECT_EQ(a.out, "");
  EXPECT_NE(a.err.find("The requested URL returned error: 404"), std::string::npos) << a.err;
  EXPECT_EQ(std::count(a.err.begin(), a.err.end(), '\n'), 1) << "said once: " << a.err;
  // With -i the head is still written, as curl's.
  const RunResult ai = run(fetch_argv({"-s", "-f", "-i", s.url("/404")}));
  const RunResult ci = curl({"-f", "-i", s.url("/404")});
  EXPECT_EQ(head_lines(ai.out), head_lines(ci.out));
  EXPECT_EQ(ai.out.find("not here"), std::string::npos);
}

TEST(FetchOutput, FailLeavesNoOutputFileAsCurl) {
  TestServer s;
  TempDir dir;
  const RunResult a = run(fetch_argv({"-s", "-f", "-o", dir / "a.out", s.url("/404")}));
  const RunResult c = curl({"-f", "-o", dir / "c.out", s.url("/404")});
  EXPECT_EQ(a.exit_code, 1);
  EXPECT_FALSE(std::filesystem::exists(dir / "c.out"));
  EXPECT_FALSE(std::filesystem::exists(dir / "a.out"));
}

TEST(FetchOutput, NoAnswerLeavesNoNewOutputFileAsCurl) {
  // curl creates -o FILE at the first byte: a refused connection leaves none.
  const std::string dead = "http://127.0.0.1:1/x";
  TempDir dir;
  const RunResult a = run(fetch_argv({"-s", "--max-attempts", "1", "-o", dir / "a.out", dead}));
  const RunResult c = curl({"-o", dir / "c.out", dead});
  EXPECT_EQ(a.exit_code, 1);
  EXPECT_NE(c.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(dir / "c.out"));
  EXPECT_FALSE(std::filesystem::exists(dir / "a.out"));
}

TEST(FetchOutput, NoAnswerNeverRemovesAnExistingOutputFile) {
  const std::string dead = "http://127.0.0.1:1/x";
  TempDir dir;
  const std::string path = dir / "there.out";
  { std::ofstream(path) << "before"; }
  const RunResult a = run(fetch_argv({"-s", "--max-attempts", "1", "-o", path, dead}));
  EXPECT_EQ(a.exit_code, 1);
  // As curl, which opens the file at the first byte: what it held is kept.
  EXPECT_EQ(slurp(path), "before");
  const std::string curls = dir / "curls.out";
  { std::ofstream(curls) << "before"; }
  EXPECT_NE(curl({"-o", curls, dead}).exit_code, 0);
  EXPECT_EQ(slurp(curls), "before");
}

TEST(FetchOutput, AnExistingOutputFileIsReplacedOnlyByAnAnswerAsCurl) {
  TestServer s;
  TempDir dir;
  const std::string a_path = dir / "a.out", c_path = dir / "c.out";
  const std::string longer = "a longer text than the answer, that must not show through it\n";
  for (const std::string& p : {a_path, c_path}) std::ofstream(p) << longer;
  // -f and an error: nothing is written, and the file stays as it was.
  EXPECT_EQ(run(fetch_argv({"-s", "-f", "-o", a_path, s.url("/404")})).exit_code, 1);
  EXPECT_NE(curl({"-f", "-o", c_path, s.url("/404")}).exit_code, 0);
  EXPECT_EQ(slurp(a_path), longer);
  EXPECT_EQ(slurp(c_path), longer);
  // An answer: the file holds it and nothing else.
  EXPECT_EQ(run(fetch_argv({"-s", "-o", a_path, s.url("/ok")})).exit_code, 0);
  EXPECT_EQ(curl({"-o", c_path, s.url("/ok")}).exit_code, 0);
  EXPECT_EQ(slurp(a_path), "ok\n");
  EXPECT_EQ(slurp(a_path), slurp(c_path));
}

TEST(FetchOutput, AnEmptyAnswerStillCreatesTheOutputFileAsCurl) {
  TestServer s;
  TempDir dir;
  const RunResult a = run(fetch_argv({"-s", "-o", dir / "a.out", s.url("/__reset")}));
  const RunResult c = curl({"-o", dir / "c.out", s.url("/__reset")});
  EXPECT_EQ(std::filesystem::exists(dir / "a.out"), std::filesystem::exists(dir / "c.out"));
}

TEST(FetchOutput, CompressedAsksForACodingAndWritesTheDecodedBody) {
  TestServer s;
  const RunResult a = run(fetch_argv({"-s", "--compressed", s.url("/text")}));
  const RunResult c = curl({"--compressed", s.url("/text")});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, c.out);
  EXPECT_NE(a.out.find("gzip"), std::string::npos) << a.out.substr(0, 80);
  const RunResult plain = run(fetch_argv({"-s", s.url("/text")}));
  EXPECT_TRUE(plain.out.starts_with("accept-encoding=\n")) << plain.out.substr(0, 80);
}

TEST(FetchOutput, FailMessageFollowsSilentAndShowError) {
  TestServer s;
  const RunResult quiet = run(fetch_argv({"-s", "-f", s.url("/404")}));
  EXPECT_EQ(quiet.exit_code, 1);
  EXPECT_EQ(quiet.err, "");
  const RunResult shown = run(fetch_argv({"-s", "-S", "-f", s.url("/404")}));
  EXPECT_EQ(shown.exit_code, 1);
  EXPECT_NE(shown.err.find("The requested URL returned error: 404"), std::string::npos) << shown.err;
}

TEST(FetchOutput, ShowErrorSaysATransportErrorEvenWhenSilent) {
  const std::string dead = "http://127.0.0.1:1/x";
  TempDir dir;  // the resume file of the unfinished request
  const RunResult quiet = run(fetch_argv({"-s", "--max-attempts", "1", "--resume-file", dir / "r.json", dead}));
  EXPECT_EQ(quiet.exit_code, 1);
  EXPECT_EQ(quiet.err, "");
  const RunResult shown = run(fetch_argv({"-sS", "--max-attempts", "1", "--resume-file", dir / "r.json", dead}));
  EXPECT_EQ(shown.exit_code, 1);
  EXPECT_NE(shown.err.find(dead), std::string::npos) << shown.err;
}

TEST(FetchOutput, FailWithBodyWritesTheBodyAndFails) {
  TestServer s;
  const RunResult a = run(fetch_argv({"-s", "--fail-with-body", s.url("/404")}));
  const RunResult c = curl({"--fail-with-body", s.url("/404")});
  EXPECT_EQ(a.exit_code, 1);
  EXPECT_EQ(a.out, c.out);
  EXPECT_EQ(a.out, "not here\n");
}

TEST(FetchOutput, WriteOutMatchesCurl) {
  TestServer s;
  const std::string fmt =
      "%{http_code} %{url_effective} %{size_download} %{method} %{num_redirects} %{http_version} %%\\n";
  const RunResult a = run(fetch_argv({"-s", "-o", "/dev/null", "-L", "-w", fmt, s.url("/r302")}));
  const RunResult c = curl({"-o", "/dev/null", "-L", "-w", fmt, s.url("/r302")});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, c.out);
  EXPECT_EQ(a.out, "200 " + s.url("/ok") + " 3 GET 1 1.1 %\n");
}

TEST(FetchOutput, WriteOutAbideVariables) {
  TestServer s;
  TempDir dir;
  const RunResult a = run(fetch_argv({"-s", "-o", "/dev/null", "-w",
                                      "%{abide_outcome} %{abide_attempts} %{num_retries} %{exitcode} "
                                      "[%{abide_not_before}]\\n",
                                      s.url("/ok")}));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, "done 1 0 0 []\n");
  // A hint beyond --max-wait: deferred, with the permitted time.
  const RunResult d = run(fetch_argv({"-s", "--max-wait", "5", "--resume-file", dir / "r.json", "-w",
                                      "%{abide_outcome} %{http_code} %{abide_not_before}", s.url("/later")}));
  EXPECT_EQ(d.exit_code, 1);
  EXPECT_TRUE(d.out.starts_with("deferred 503 20")) << d.out;
  EXPECT_TRUE(d.out.ends_with("Z")) << d.out;
}

TEST(FetchOutput, WriteOutStreamsFileAndUnknownVariables) {
  TestServer s;
  TempDir dir;
  { std::ofstream(dir / "fmt") << "out=%{http_code}%{stderr}err=%{http_code}%{nope}"; }
  const RunResult a = run(fetch_argv({"-o", "/dev/null", "-w", "@" + (dir / "fmt"), s.url("/ok")}));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, "out=200");
  EXPECT_NE(a.err.find("err=200"), std::string::npos) << a.err;
  // As curl: the unknown name is said, and written as nothing.
  EXPECT_NE(a.err.find("unknown --write-out variable: 'nope'"), std::string::npos) << a.err;
  const RunResult c = curl({"-o", "/dev/null", "-w", "@" + (dir / "fmt"), s.url("/ok")});
  EXPECT_EQ(a.out, c.out);
  // A format file that cannot be read: nothing is sent.
  const RunResult m = run(fetch_argv({"-w", "@" + (dir / "none"), s.url("/ok")}));
  EXPECT_EQ(m.exit_code, 1);
  EXPECT_NE(m.err.find("No such file or directory"), std::string::npos) << m.err;
  EXPECT_EQ(s.hits("/ok"), 2) << "abide's first run and curl's, and no more";
}

TEST(FetchOutput, UnknownWriteOutVariableIsSaidEvenWhenSilentAsCurl) {
  TestServer s;
  const RunResult a = run(fetch_argv({"-s", "-o", "/dev/null", "-w", "x%{nope}y", s.url("/ok")}));
  const RunResult c = curl({"-o", "/dev/null", "-w", "x%{nope}y", s.url("/ok")});
  EXPECT_EQ(a.out, c.out);
  EXPECT_NE(c.err.find("unknown --write-out variable: 'nope'"), std::string::npos) << c.err;
  EXPECT_NE(a.err.find("unknown --write-out variable: 'nope'"), std::string::npos) << a.err;
}

TEST(FetchOutput, BatchOutputsNeverInterleave) {
  // Concurrent requests to stdout: each body is followed by its own -w text,
  // whole, whatever order they finish in.
  TestServer s;
  TempDir dir;
  const std::vector<std::string> paths{"/a", "/b", "/c", "/a", "/b", "/c", "/a", "/b", "/c", "/a", "/b", "/c"};
  {
    std::ofstream list(dir / "urls.txt");
    for (const auto& p : paths) list << s.url(p) << "\n";
  }
  const RunResult a = run(
      fetch_argv({"-s", "-j", "4", "-i", "-w", "[%{url_effective}]\\n", "--urls", dir / "urls.txt"}));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  std::size_t at = 0, seen = 0;
  while (at < a.out.size()) {
    const std::size_t body = a.out.find("\r\n\r\n", at);
    ASSERT_NE(body, std::string::npos) << a.out.substr(at);
    ASSERT_TRUE(a.out.compare(at, 17, "HTTP/1.1 200 OK\r\n") == 0) << a.out.substr(at);
    const std::size_t line_end = a.out.find('\n', body + 4);
    ASSERT_NE(line_end, std::string::npos);
    const std::string line = a.out.substr(body + 4, line_end - body - 4);  // "body of /X"
    ASSERT_TRUE(line.starts_with("body of /")) << line;
    const std::string path = line.substr(8);
    const std::string tail = "[" + s.url(path) + "]\n";
    ASSERT_EQ(a.out.compare(line_end + 1, tail.size(), tail), 0) << a.out.substr(line_end + 1, 80);
    at = line_end + 1 + tail.size();
    ++seen;
  }
  EXPECT_EQ(seen, paths.size());
}

TEST(FetchOutput, LocationFollowsRedirectsAsCurl) {
  TestServer s;
  const RunResult a = run(fetch_argv({"-s", "-L", "-i", s.url("/r302")}));
  const RunResult c = curl({"-L", "-i", s.url("/r302")});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, c.out);
  EXPECT_TRUE(a.out.ends_with("ok\n"));
  EXPECT_EQ(a.out.find("moved"), std::string::npos) << "a followed redirect's body is not written";
}

TEST(FetchOutput, WithoutLocationARedirectIsTheAnswer) {
  TestServer s;
  const RunResult a = run(fetch_argv({"-s", s.url("/r302")}));
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, "moved\n");
  EXPECT_EQ(s.hits("/ok"), 0);
}

TEST(FetchOutput, SeeOtherTurnsAPostIntoAGet) {
  TestServer s;
  const RunResult a = run(fetch_argv({"-s", "-L", "-d", "x=1", s.url("/r303")}));
  const RunResult c = curl({"-L", "-d", "x=1", s.url("/r303")});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, "GET body= auth= cookie=\n");
  EXPECT_EQ(a.out, c.out);
  const RunResult k = run(fetch_argv({"-s", "-L", "-d", "x=1", "--idempotency-key", "k", s.url("/r307")}));
  EXPECT_EQ(k.out, "POST body=x=1 auth= cookie=\n") << k.err;
}

TEST(FetchOutput, CredentialsAreNotSentToAnotherHost) {
  TestServer first, other;
  first.set_away(other.url("/echo"));  // another port: another origin
  const std::vector<std::string> creds{"-H", "Authorization: Bearer secret", "-H", "Cookie: s=1"};
  std::vector<std::string> args{"-s", "-L"};
  args.insert(args.end(), creds.begin(), creds.end());
  args.push_back(first.url("/away"));
  const RunResult a = run(fetch_argv(args));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, "GET body= auth= cookie=\n");
  // The same origin gets them.
  args.back() = first.url("/r303");
  const RunResult same = run(fetch_argv(args));
  EXPECT_EQ(same.out, "GET body= auth=Bearer secret cookie=s=1\n") << same.err;
}

TEST(FetchOutput, TooManyRedirectsFails) {
  TestServer s;
  const RunResult a = run(fetch_argv({"-L", "--max-redirs", "3", s.url("/loop")}));
  EXPECT_EQ(a.exit_code, 1);
  EXPECT_NE(a.err.find("Maximum (3) redirects followed"), std::string::npos) << a.err;
  EXPECT_EQ(s.hits("/loop"), 4);
  EXPECT_EQ(a.out, "");
  EXPECT_EQ(curl({"-L", "--max-redirs", "3", s.url("/loop")}).exit_code, 47);
}

TEST(FetchOutput, ARedirectsRetryAfterHoldsBackTheNextRequest) {
  // Retry-After on a 3xx is the wait before the redirected request (RFC 9110
  // 10.2.3): an hour, beyond --max-wait, defers it, with its permitted time.
  TestServer s;
  TempDir dir;
  const RunResult a = run(fetch_argv({"-s", "-L", "--max-wait", "5", "--resume-file", dir / "r.json", "-w",
                                      "%{abide_outcome} %{abide_not_before}", s.url("/ra")}));
  EXPECT_EQ(a.exit_code, 1);
  EXPECT_TRUE(a.out.starts_with("deferred 20")) << a.out << a.err;
  EXPECT_EQ(s.hits("/ok"), 0) << "the redirected request was sent before its time";
  const json r = read_json(dir / "r.json");
  ASSERT_EQ(r["requests"].size(), 1u) << r.dump();
  EXPECT_FALSE(r["requests"][0]["not_before"].is_null());
}

TEST(FetchOutput, ARedirectsRetryAfterHoldsBackARequestToAnotherOrigin) {
  // Another origin is another pacer key: only the redirect's own permitted
  // time, carried to the next request, holds it back.
  TestServer first, other;
  TempDir dir;
  first.set_away(other.url("/ok"));
  const RunResult a = run(fetch_argv({"-s", "-L", "--max-wait", "5", "--resume-file", dir / "r.json", "-w",
                                      "%{abide_outcome} %{abide_not_before}", first.url("/ra-away")}));
  EXPECT_EQ(a.exit_code, 1);
  EXPECT_TRUE(a.out.starts_with("deferred 20")) << a.out << a.err;
  EXPECT_EQ(other.total_hits(), 0) << "the redirected request was sent before its time";
}

TEST(FetchOutput, ProxyToAClosedPortIsAConnectionError) {
  TestServer s;
  TempDir dir;
  const RunResult a = run(fetch_argv(
      {"-sS", "--max-attempts", "1", "--resume-file", dir / "r.json", "-x", "http://127.0.0.1:1", s.url("/ok")}));
  EXPECT_EQ(a.exit_code, 1);
  EXPECT_EQ(s.total_hits(), 0);
  EXPECT_NE(a.err.find("onnect"), std::string::npos) << a.err;
}

TEST(FetchOutput, ProxySeesAnAbsoluteFormRequest) {
  TestServer proxy;
  const RunResult a = run(
      fetch_argv({"-s", "-x", "127.0.0.1:" + std::to_string(proxy.port()), "http://example.invalid/through?x=1"}));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto t = proxy.targets();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0], "http://example.invalid/through?x=1");
}

TEST(FetchOutput, SeveralUrlsWriteInArgumentOrderAsCurl) {
  TestServer s;
  const std::vector<std::string> urls{s.url("/c"), s.url("/a"), s.url("/b"), s.url("/a")};
  std::vector<std::string> args{"-s", "-w", "[%{url_effective}]\\n"};
  args.insert(args.end(), urls.begin(), urls.end());
  const RunResult a = run(fetch_argv(args));
  std::vector<std::string> cargs{"-w", "[%{url_effective}]\\n"};
  cargs.insert(cargs.end(), urls.begin(), urls.end());
  const RunResult c = curl(cargs);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, c.out);
}

TEST(FetchOutput, StatsDashGoesToStdoutAfterTheBodies) {
  TestServer s;
  const RunResult a = run(fetch_argv({"-s", "--stats", "-", s.url("/a"), s.url("/b")}));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const std::string bodies = "body of /a\nbody of /b\n";
  ASSERT_TRUE(a.out.starts_with(bodies)) << a.out;
  const json j = json::parse(a.out.substr(bodies.size()), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << a.out;
  EXPECT_EQ(j["requests"], 2);
  EXPECT_EQ(j["done"], 2);
}

TEST(FetchOutput, UnwritableOutputsFailBeforeAnythingIsSent) {
  TestServer s;
  TempDir dir;
  { std::ofstream(dir / "plain") << "x"; }
  const std::string missing = dir / "no/such/dir/f";
  struct Case {
    std::vector<std::string> args;
    std::string named;  // what the message names
  };
  const std::vector<Case> cases{
      {{"-o", missing}, "-o"},
      {{"--stats", missing}, "--stats"},
      {{"-D", missing}, "-D"},
      {{"--output-dir", dir / "plain/sub"}, "--output-dir"},
      {{"-O", "--output-dir", dir / "plain"}, "--output-dir"},
      {{"--stats", dir / ""}, "--stats"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    args.push_back(s.url("/ok"));
    const RunResult a = run(fetch_argv(args));
    EXPECT_EQ(a.exit_code, 1) << c.named << ": " << a.err;
    EXPECT_EQ(std::count(a.err.begin(), a.err.end(), '\n'), 1) << "one message: " << a.err;
    EXPECT_NE(a.err.find(c.named + " "), std::string::npos) << a.err;
    EXPECT_TRUE(a.err.find("No such file or directory") != std::string::npos ||
                a.err.find("Not a directory") != std::string::npos || a.err.find("Is a directory") != std::string::npos)
        << a.err;
    EXPECT_EQ(a.err.find("basic_"), std::string::npos) << a.err;
  }
  EXPECT_EQ(s.total_hits(), 0);
}

// Clears every permitted time in a resume file: as if the hour had passed.
void permit_now(const std::string& resume) {
  json r = read_json(resume);
  for (auto& e : r["requests"]) e["not_before"] = nullptr;
  std::ofstream(resume) << r.dump();
}

TEST(FetchOutput, AWriteThatFailsIsSaidOnceWithItsReason) {
  TestServer s;
  for (const std::vector<std::string>& out :
       {std::vector<std::string>{"-o", "/dev/full"}, std::vector<std::string>{"-D", "/dev/full", "-o", "/dev/null"}}) {
    std::vector<std::string> args{"--max-attempts", "1"};
    args.insert(args.end(), out.begin(), out.end());
    args.push_back(s.url("/text"));
    const RunResult a = run(fetch_argv(args));
    EXPECT_EQ(a.exit_code, 1) << out[0];
    EXPECT_NE(a.err.find("cannot write " + out[0] + " file /dev/full: No space left on device"), std::string::npos)
        << a.err;
    EXPECT_EQ(std::count(a.err.begin(), a.err.end(), '\n'), 1) << "said once: " << a.err;
  }
}

TEST(FetchOutput, ResumeRewritesItsFileWithWhatIsLeft) {
  TestServer s;
  TempDir dir;
  const std::string list = dir / "urls.txt";
  { std::ofstream(list) << s.url("/ok") << "\n" << s.url("/later") << "\n" << s.url("/later2") << "\n"; }
  const std::string resume = dir / "resume.json";
  const RunResult first = run(
      fetch_argv({"-s", "-j", "1", "--max-wait", "5", "--urls", list, "--resume-file", resume}));
  EXPECT_EQ(first.exit_code, 1) << first.err;
  json r = read_json(resume);
  ASSERT_EQ(r["requests"].size(), 2u) << r.dump();

  // First resume: /later is ready now, /later2 is not. FILE itself is
  // rewritten with what is left (no --resume-file given).
  permit_now(resume);
  s.set_ready("/later");
  const RunResult second = run(fetch_argv({"-s", "-j", "1", "--max-wait", "5", "--resume", resume}));
  EXPECT_EQ(second.exit_code, 1) << second.err;
  EXPECT_EQ(second.out, "later\n");
  r = read_json(resume);
  ASSERT_EQ(r["requests"].size(), 1u) << r.dump();
  EXPECT_EQ(r["requests"][0]["url"], s.url("/later2"));

  // Second resume: the finished /later is not sent again; nothing is left,
  // so the file is removed.
  permit_now(resume);
  s.set_ready("/later2");
  const RunResult third = run(fetch_argv({"-s", "--resume", resume}));
  EXPECT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(third.out, "later2\n");
  EXPECT_EQ(s.hits("/ok"), 1);
  EXPECT_EQ(s.hits("/later"), 2);
  // One at a time (-j 1), in order: the first run's 503 held /later2 back
  // (the origin's cooldown), so it was sent in the last two runs only.
  EXPECT_EQ(s.hits("/later2"), 2);
  EXPECT_FALSE(std::filesystem::exists(resume)) << "nothing is left: the file is removed";
}

}  // namespace
}  // namespace abide::test
