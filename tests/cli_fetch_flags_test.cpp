// `abide fetch` end to end, curl's request flags: what goes to the server (compared with curl's own requests where curl is on the machine), and the flags refused with a hint.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "fetch/fetch_form.h"
#include "fetch/fetch_jobs.h"
#include "fetch/fetch_options.h"
#include "fetch/fetch_request.h"
#include "support/fetch_cli.h"
#include "support/run.h"

namespace abide::test {
namespace {

// --- helpers ---------------------------------------------------------------------

bool have_curl() { return ::access("/usr/bin/curl", X_OK) == 0; }

RunResult curl(std::vector<std::string> args, const std::string& input = {}) {
  args.insert(args.begin(), {"/usr/bin/curl", "-s", "--noproxy", "*"});
  return run(args, input);
}

// What /__echo says it received.
struct Seen {
  std::string method, path, query, body;
  std::map<std::string, std::string> headers;  // lower-case names
  bool ok = false;

  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string("<none>") : it->second;
  }
};

Seen seen(const json& j) {
  Seen s;
  if (!j.is_object() || !j.contains("method")) return s;
  s.ok = true;
  s.method = j["method"];
  s.path = j["path"];
  s.query = j["query"];
  s.body = j["body"];
  for (const auto& h : j["headers"]) {
    std::string name = h[0];
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    s.headers[name] = h[1];
  }
  return s;
}

Seen seen(const std::string& out) { return seen(json::parse(out, nullptr, false)); }

// Several /__echo answers written one after another.
std::vector<Seen> seen_all(const std::string& out) {
  std::vector<Seen> all;
  std::size_t start = 0;
  while (start < out.size()) {
    auto end = out.find("\n}\n", start);
    if (end == std::string::npos) break;
    all.push_back(seen(out.substr(start, end + 3 - start)));
    start = end + 3;
  }
  return all;
}

// The parts of a request that curl's flags decide; User-Agent only when both set it.
void expect_same_request(const Seen& abide, const Seen& reference) {
  ASSERT_TRUE(abide.ok);
  ASSERT_TRUE(reference.ok);
  EXPECT_EQ(abide.method, reference.method);
  EXPECT_EQ(abide.path, reference.path);
  EXPECT_EQ(abide.query, reference.query);
  EXPECT_EQ(abide.body, reference.body);
  for (const char* name : {"content-type", "content-length", "authorization", "referer", "accept"})
    EXPECT_EQ(abide.header(name), reference.header(name)) << name;
}

// A mock server for the echo, shared by the tests of this file.
class FetchFlags : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { mock_ = new Mock({}); }
  static void TearDownTestSuite() {
    delete mock_;
    mock_ = nullptr;
  }
  static std::string echo(const std::string& rest = "") { return mock_->url("/__echo" + rest); }

  // The request abide sends and the one curl sends with the same flags.
  static void compare_with_curl(const std::vector<std::string>& flags, const std::string& url,
                                const std::string& input = {}) {
    if (!have_curl()) GTEST_SKIP() << "curl is not installed";
    std::vector<std::string> a{"-s"};
    a.insert(a.end(), flags.begin(), flags.end());
    a.push_back(url);
    const RunResult ours = run(fetch_argv(a), input);
    ASSERT_EQ(ours.exit_code, 0) << ours.err;
    std::vector<std::string> c = flags;
    c.push_back(url);
    const RunResult theirs = curl(c, input);
    ASSERT_EQ(theirs.exit_code, 0) << theirs.err;
    expect_same_request(seen(ours.out), seen(theirs.out));
  }

  static Mock* mock_;
};
Mock* FetchFlags::mock_ = nullptr;

std::string write_file(const TempDir& dir, const std::string& name, const std::string& content) {
  std::ofstream(dir / name, std::ios::binary) << content;
  return dir / name;
}

TEST(FetchFlagsHelp, HelpRuns) {
  const RunResult r = run(fetch_argv({"--help"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// --- bodies: -d, --data-binary, --data-raw, --data-urlencode, --json ------------

TEST_F(FetchFlags, DataPartsJoinWithAmpersandAsCurl) {
  compare_with_curl({"-d", "a=1", "-d", "b=2&c=3"}, echo());
  const Seen s = seen(run(fetch_argv({"-s", "-d", "a=1", "-d", "b=2", echo()})).out);
  EXPECT_EQ(s.body, "a=1&b=2");
  EXPECT_EQ(s.method, "POST");
  EXPECT_EQ(s.header("content-type"), "application/x-www-form-urlencoded");
}

TEST_F(FetchFlags, DataFileLosesCrAndLfAsCurl) {
  TempDir dir;
  const std::string f = write_file(dir, "d.txt", "a=1\r\nb=2\n\nc=3");
  compare_with_curl({"-d", "@" + f}, echo());
  EXPECT_EQ(seen(run(fetch_argv({"-s", "-d", "@" + f, echo()})).out).body, "a=1b=2c=3");
}

TEST_F(FetchFlags, DataFromStandardInputAsCurl) {
  compare_with_curl({"-d", "@-"}, echo(), "x=1\ny=2\n");
  EXPECT_EQ(seen(run(fetch_argv({"-s", "-d", "@-", echo()}), "x=1\ny=2\n").out).body, "x=1y=2");
}

TEST_F(FetchFlags, DataBinaryFileIsSentAsItIsAsCurl) {
  TempDir dir;
  const std::string f = write_file(dir, "b.txt", "line 1\r\nline 2\n");
  compare_with_curl({"--data-binary", "@" + f, "--data-binary", "tail"}, echo());
  EXPECT_EQ(seen(run(fetch_argv({"-s", "--data-binary", "@" + f, echo()})).out).body, "line 1\r\nline 2\n");
}

TEST_F(FetchFlags, DataRawHasNoFileMeaningAsCurl) {
  compare_with_curl({"--data-raw", "@not-a-file", "--data-raw", "x"}, echo());
  EXPECT_EQ(seen(run(fetch_argv({"-s", "--data-raw", "@not-a-file", echo()})).out).body, "@not-a-file");
}

TEST_F(FetchFlags, DataUrlencodeFiveFormsAsCurl) {
  TempDir dir;
  const std::string f = write_file(dir, "u.txt", "l1 x\r\nl2+&\n");
  compare_with_curl({"--data-urlencode", "plain text&", "--data-urlencode", "=x y", "--data-urlencode", "n=v w~*'()!%",
                     "--data-urlencode", "@" + f, "--data-urlencode", "f@" + f},
                    echo());
  EXPECT_EQ(seen(run(fetch_argv({"-s", "--data-urlencode", "n=a b&c", echo()})).out).body, "n=a+b%26c");
}

TEST_F(FetchFlags, DataFileThatCannotBeReadIsSaidOnceAndNothingSent) {
  Mock m({});
  const RunResult r = run(fetch_argv({"-s", "-d", "@/nonexistent/abide-body", m.url("/items/1")}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot read /nonexistent/abide-body: No such file or directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("abide: "), std::string::npos) << "said twice: " << r.err;
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
}

// A folder given as a body file is refused with the reason, not an
// exception's text, and nothing is sent.
TEST_F(FetchFlags, DataFromAFolderIsRefusedAndNothingSent) {
  Mock m({});
  TempDir dir;
  const std::string folder = dir / "folder";
  ASSERT_TRUE(std::filesystem::create_directory(folder));
  const RunResult r = run(fetch_argv({"-s", "-d", "@" + folder, m.url("/items/1")}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot read " + folder + ": Is a directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("underflow"), std::string::npos) << r.err;
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
}

TEST_F(FetchFlags, ContentTypeFromHeaderWinsAsCurl) {
  compare_with_curl({"-H", "Content-Type: text/plain", "-d", "hello"}, echo());
}

TEST_F(FetchFlags, MethodFromXWithDataAsCurl) { compare_with_curl({"-X", "PUT", "-d", "a=1"}, echo()); }

TEST_F(FetchFlags, JsonJoinsWithoutSeparatorAndSetsTypesAsCurl) {
  TempDir dir;
  const std::string f = write_file(dir, "j.json", "{\"b\": [1,\n2]}\n");
  compare_with_curl({"--json", "{\"a\":1}", "--json", "@" + f}, echo());
  const Seen s = seen(run(fetch_argv({"-s", "--json", "[1]", "--json", "[2]", echo()})).out);
  EXPECT_EQ(s.body, "[1][2]");
  EXPECT_EQ(s.method, "POST");
  EXPECT_EQ(s.header("content-type"), "application/json");
  EXPECT_EQ(s.header("accept"), "application/json");
}

TEST_F(FetchFlags, JsonTypesFromHeaderWinAsCurl) {
  compare_with_curl({"-H", "Content-Type: application/vnd.api+json", "-H", "Accept: text/plain", "--json", "{}"},
                    echo());
}

// --- -G, -I ------------------------------------------------------------------------

TEST_F(FetchFlags, GetPutsTheDataIntoTheQueryAsCurl) {
  compare_with_curl({"-G", "-d", "a=1", "--data-urlencode", "q=x y"}, echo());
  compare_with_curl({"-G", "-d", "a=1"}, echo("?z=2"));
  compare_with_curl({"-G", "-d", "a=1"}, echo("?"));
  const Seen s = seen(run(fetch_argv({"-s", "-G", "-d", "a=1", echo("?z=2")})).out);
  EXPECT_EQ(s.method, "GET");
  EXPECT_EQ(s.query, "z=2&a=1");
  EXPECT_EQ(s.body, "");
  EXPECT_EQ(s.header("content-type"), "<none>");
}

TEST(FetchFlagsUnits, QueryGoesBeforeTheFragment) {
  EXPECT_EQ(cli::with_query("http://h/p#f", "a=1"), "http://h/p?a=1#f");
  EXPECT_EQ(cli::with_query("http://h/p?z=1#f", "a=1"), "http://h/p?z=1&a=1#f");
  EXPECT_EQ(cli::with_query("http://h/p?z=1&", "a=1"), "http://h/p?z=1&a=1");
  EXPECT_EQ(cli::with_query("http://h/p?", "a=1"), "http://h/p?a=1");
}

cli::FetchOptions options_for(const std::string& url) {
  cli::FetchOptions o;
  o.urls = {url};
  return o;
}

TEST(FetchFlagsUnits, HeadIsHeadAndGetHeadPutsTheDataInTheQuery) {
  cli::FetchOptions o = options_for("http://h/p");
  o.head = true;
  auto plan = cli::plan_requests(o);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->jobs.at(0).method, "HEAD");
  o.get = true;
  o.data = {"a=1"};
  o.has_data = true;
  plan = cli::plan_requests(o);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->jobs.at(0).method, "HEAD");
  EXPECT_EQ(plan->jobs.at(0).url, "http://h/p?a=1");
  EXPECT_EQ(plan->jobs.at(0).body, "");
}

TEST_F(FetchFlags, HeadSendsHead) {
  // HEAD's answer has no body to echo: the mock's record shows the method.
  TempDir dir;
  Mock m({"--record", dir / "rec.jsonl"});
  const RunResult r = run(fetch_argv({"-s", "-I", "-o", "/dev/null", m.url("/items/1")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  m.stats();  // flushes the record
  EXPECT_NE(slurp(dir / "rec.jsonl").find("\"HEAD\""), std::string::npos) << slurp(dir / "rec.jsonl");
}

// --- conflicts, as curl refuses them -------------------------------------------------

TEST_F(FetchFlags, ContradictoryBodyFlagsAreRefusedBeforeSending) {
  Mock m({});
  const std::vector<std::vector<std::string>> cases{
      {"-F", "a=1", "-d", "b=2"},    {"-I", "-d", "a=1"}, {"-G", "-F", "a=1"},
      {"--json", "{}", "-d", "a=1"}, {"-I", "-F", "a=1"},
  };
  for (const auto& flags : cases) {
    std::vector<std::string> a = flags;
    a.push_back(m.url("/items/1"));
    const RunResult r = run(fetch_argv(a));
    EXPECT_EQ(r.exit_code, 2) << flags[0] << " " << flags[2];
    EXPECT_NE(r.err.find("cannot be combined"), std::string::npos) << r.err;
  }
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
}

TEST_F(FetchFlags, StandardInputIsReadOnce) {
  Mock m({});
  const RunResult r = run(fetch_argv({"-d", "@-", "--urls", "-"}), m.url("/items/1") + "\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("standard input is already read by -d"), std::string::npos) << r.err;
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
}

// --- -F ------------------------------------------------------------------------------

// A server that keeps the bytes of one request as they came (httplib would
// take a multipart body apart), and answers 200.
class RawServer {
 public:
  RawServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd_, 4) != 0) return;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~RawServer() { ::close(fd_); }

  // Accepts one connection, reads one request with a Content-Length body.
  std::string take_one() {
    const int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) return {};
    std::string in;
    char buf[4096];
    std::size_t need = std::string::npos;
    while (need == std::string::npos || in.size() < need) {
      const ssize_t n = ::read(c, buf, sizeof buf);
      if (n <= 0) break;
      in.append(buf, static_cast<std::size_t>(n));
      const auto end = in.find("\r\n\r\n");
      if (need == std::string::npos && end != std::string::npos) {
        std::string head = in.substr(0, end);
        std::transform(head.begin(), head.end(), head.begin(), [](unsigned char ch) { return std::tolower(ch); });
        const auto cl = head.find("content-length:");
        need = end + 4 + (cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 15)));
      }
    }
    static constexpr char kAnswer[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    static_cast<void>(::write(c, kAnswer, sizeof kAnswer - 1));
    ::close(c);
    return in;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/form"; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// The body of a raw request with its boundary replaced by "BOUNDARY", and its Content-Type.
std::pair<std::string, std::string> normalized_form(const std::string& request) {
  std::string lower = request;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  const auto ct = lower.find("\r\ncontent-type: ");
  const auto ct_end = request.find("\r\n", ct + 2);
  std::string type = request.substr(ct + 16, ct_end - ct - 16);
  const auto b = type.find("boundary=");
  const std::string boundary = type.substr(b + 9);
  type = type.substr(0, b + 9) + "BOUNDARY";
  std::string body = request.substr(request.find("\r\n\r\n") + 4);
  for (auto at = body.find(boundary); at != std::string::npos; at = body.find(boundary, at))
    body.replace(at, boundary.size(), "BOUNDARY");
  return {type, body};
}

TEST(FetchFlagsForm, MultipartBodyAsCurlsBoundaryAside) {
  if (!have_curl()) GTEST_SKIP() << "curl is not installed";
  TempDir dir;
  const std::string txt = write_file(dir, "notes.txt", "line 1\r\nline 2\n");
  const std::string bin = write_file(dir, "blob.dat", std::string("\x00\x01\xff", 3));
  const std::string val = write_file(dir, "value.txt", "from a file");
  const std::vector<std::string> flags{"-F", "name=Ada Lovelace",
                                       "-F", "notes=@" + txt,
                                       "-F", "blob=@" + bin + ";type=image/x-test",
                                       "-F", "v=<" + val,
                                       "-F", "renamed=@" + txt + ";filename=other.txt"};
  RawServer server;
  std::string ours_raw;
  std::thread t([&] { ours_raw = server.take_one(); });
  std::vector<std::string> a{"-s"};
  a.insert(a.end(), flags.begin(), flags.end());
  a.push_back(server.url());
  const RunResult ours = run(fetch_argv(a));
  t.join();
  EXPECT_EQ(ours.exit_code, 0) << ours.err;
  std::string theirs_raw;
  std::thread t2([&] { theirs_raw = server.take_one(); });
  std::vector<std::string> c = flags;
  c.push_back(server.url());
  const RunResult theirs = curl(c);
  t2.join();
  EXPECT_EQ(theirs.exit_code, 0) << theirs.err;
  EXPECT_TRUE(ours_raw.starts_with("POST /form ")) << ours_raw;
  EXPECT_EQ(normalized_form(ours_raw), normalized_form(theirs_raw));
  // curl's boundary and abide's are as long: so are the bodies.
  EXPECT_EQ(ours_raw.size() - ours_raw.find("\r\n\r\n"), theirs_raw.size() - theirs_raw.find("\r\n\r\n"));
}

TEST(FetchFlagsUnits, BoundaryOccursInNoPart) {
  cli::InputFiles files;
  auto a = cli::parse_form_part("a=1", files);
  ASSERT_TRUE(a);
  auto first = cli::multipart_body({*a});
  ASSERT_TRUE(first);
  // A part holding the boundary the same form would get: another one is taken.
  auto b = cli::parse_form_part("a=x" + first->boundary + "y", files);
  ASSERT_TRUE(b);
  auto second = cli::multipart_body({*b});
  ASSERT_TRUE(second);
  EXPECT_NE(second->boundary, first->boundary);
  EXPECT_EQ(b->value.find(second->boundary), std::string::npos);
  EXPECT_LE(second->boundary.size(), 70u);  // RFC 2046
}

TEST(FetchFlagsUnits, FormPartsParsedAsCurl) {
  TempDir dir;
  const std::string f = write_file(dir, "p.json", "{}");
  cli::InputFiles files;
  auto file = cli::parse_form_part("up=@" + f, files);
  ASSERT_TRUE(file);
  EXPECT_EQ(file->filename, "p.json");
  EXPECT_EQ(file->type, "application/octet-stream");
  EXPECT_EQ(file->value, "{}");
  auto content = cli::parse_form_part("c=<" + f + ";type=application/json", files);
  ASSERT_TRUE(content);
  EXPECT_FALSE(content->filename);
  EXPECT_EQ(content->type, "application/json");
  auto semi = cli::parse_form_part("s=a;b", files);
  ASSERT_TRUE(semi);
  EXPECT_EQ(semi->value, "a;b");
  auto bad = cli::parse_form_part("novalue", files);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().exit_code, 2);
  auto missing = cli::parse_form_part("m=@/nonexistent/abide-part", files);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().exit_code, 1);
}

// --- -u, -A, -e --------------------------------------------------------------------------

TEST_F(FetchFlags, UserSendsBasicCredentialsAsCurl) {
  compare_with_curl({"-u", "alice:s3cr:et"}, echo());
  compare_with_curl({"-u", "bob:"}, echo());
  EXPECT_EQ(seen(run(fetch_argv({"-s", "-u", "Aladdin:open sesame", echo()})).out).header("authorization"),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
}

TEST_F(FetchFlags, UserWithoutPasswordIsRefusedNotPrompted) {
  Mock m({});
  const RunResult r = run(fetch_argv({"-u", "alice", m.url("/items/1")}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("USER:PASSWORD"), std::string::npos) << r.err;
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
}

TEST_F(FetchFlags, UserAgentAndRefererAsCurl) {
  if (!have_curl()) GTEST_SKIP() << "curl is not installed";
  const std::vector<std::string> flags{"-A", "tester/1.0 (x)", "-e", "http://from.example/page"};
  std::vector<std::string> a{"-s"};
  a.insert(a.end(), flags.begin(), flags.end());
  a.push_back(echo());
  std::vector<std::string> c = flags;
  c.push_back(echo());
  const Seen ours = seen(run(fetch_argv(a)).out);
  const Seen theirs = seen(curl(c).out);
  expect_same_request(ours, theirs);
  EXPECT_EQ(ours.header("user-agent"), theirs.header("user-agent"));
  EXPECT_EQ(ours.header("user-agent"), "tester/1.0 (x)");
  EXPECT_EQ(ours.header("referer"), "http://from.example/page");
}

TEST_F(FetchFlags, HeaderWinsOverUserAgentFlag) {
  const Seen s = seen(run(fetch_argv({"-s", "-A", "flag/1", "-H", "User-Agent: header/2", echo()})).out);
  EXPECT_EQ(s.header("user-agent"), "header/2");
}

TEST_F(FetchFlags, RefererAutoIsRefused) {
  Mock m({});
  const RunResult r = run(fetch_argv({"-e", "http://a/;auto", m.url("/items/1")}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(";auto"), std::string::npos) << r.err;
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
}

// --- URLs --------------------------------------------------------------------------------

TEST_F(FetchFlags, SeveralUrlsAreFetchedInOrder) {
  const RunResult r = run(fetch_argv({"-s", "-m", "30", "-j", "1", echo("?n=1"), echo("?n=2"), echo("?n=3")}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto all = seen_all(r.out);
  ASSERT_EQ(all.size(), 3u) << r.out;
  EXPECT_EQ(all[0].query, "n=1");
  EXPECT_EQ(all[1].query, "n=2");
  EXPECT_EQ(all[2].query, "n=3");
}

TEST_F(FetchFlags, UrlWithoutSchemeMeansHttpAsCurl) {
  const std::string bare = "127.0.0.1:" + std::to_string(mock_->port()) + "/__echo";
  compare_with_curl({}, bare);
  const RunResult r = run(fetch_argv({"-s", bare + "?k=v"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(seen(r.out).path, "/__echo");
  EXPECT_EQ(seen(r.out).query, "k=v");
}

TEST(FetchFlagsUnits, WhatCurlTakesAsAScheme) {
  EXPECT_EQ(cli::with_default_scheme("127.0.0.1:8080/x"), "http://127.0.0.1:8080/x");
  EXPECT_EQ(cli::with_default_scheme("localhost:8080"), "http://localhost:8080");
  EXPECT_EQ(cli::with_default_scheme("example.com/a?b=http://c"), "http://example.com/a?b=http://c");
  EXPECT_EQ(cli::with_default_scheme("mailto:x@y"), "http://mailto:x@y");
  EXPECT_EQ(cli::with_default_scheme("https://h/"), "https://h/");
  EXPECT_EQ(cli::with_default_scheme("HTTP://h/"), "HTTP://h/");
  // A scheme abide cannot fetch stays one (and is refused when sent), not http://ftp://...
  EXPECT_EQ(cli::with_default_scheme("ftp://h/f"), "ftp://h/f");
  EXPECT_EQ(cli::with_default_scheme("svn+ssh://h/"), "svn+ssh://h/");
  EXPECT_EQ(cli::with_default_scheme("1http://h/"), "http://1http://h/");
}

// --- --retry -----------------------------------------------------------------------------

TEST_F(FetchFlags, RetryIsMaxAttemptsPlusOne) {
  // limit 1: the second request of the window is limited, and retried at most N times.
  Mock m({"--style", "retry-after-seconds", "--limit", "1", "--window", "600"});
  TempDir dir;
  const RunResult r = run(fetch_argv({"-s", "--retry", "0", "--stats", dir / "s.json", "-j", "1", "-o", "/dev/null",
                                      m.url("/items/1"), m.url("/items/2")}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const json stats = read_json(dir / "s.json");
  EXPECT_EQ(stats["attempts"], 2) << stats.dump();  // one each: --retry 0 is --max-attempts 1
  EXPECT_EQ(stats["retries"], 0);
}

TEST_F(FetchFlags, RetryAndMaxAttemptsTogetherIsAUsageError) {
  Mock m({});
  const RunResult r = run(fetch_argv({"--retry", "2", "--max-attempts", "3", m.url("/items/1")}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--retry"), std::string::npos) << r.err;
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
}

// --- the default --max-wait ---------------------------------------------------------------

TEST_F(FetchFlags, DefaultMaxWaitDefersADayLongHintAtOnce) {
  // The second request is told to wait about a day: without --max-wait it
  // ends deferred (recorded with its time), not asleep.
  Mock m({"--style", "retry-after-seconds", "--limit", "1", "--window", "86400"});
  TempDir dir;
  const RunResult r = run(fetch_argv({"-s", "-j", "1", "-o", "/dev/null", "--resume-file", dir / "resume.json",
                                      m.url("/items/1"), m.url("/items/2")}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const json resume = read_json(dir / "resume.json");
  ASSERT_EQ(resume["requests"].size(), 1u) << resume.dump();
  EXPECT_EQ(resume["requests"][0]["outcome"], "deferred");
  EXPECT_TRUE(resume["requests"][0]["not_before"].is_string());
  EXPECT_EQ(m.stats()["totals"]["requests"], 2);
  const RunResult help = run(fetch_argv({"--help"}));
  EXPECT_NE(help.out.find("--max-wait defaults to 900 s"), std::string::npos);
}

TEST_F(FetchFlags, GivenMaxWaitStillRules) {
  Mock m({"--style", "retry-after-seconds", "--limit", "1", "--window", "86400"});
  TempDir dir;
  const RunResult r = run(fetch_argv({"-s", "-j", "1", "-o", "/dev/null", "--max-wait", "0", "--resume-file",
                                      dir / "resume.json", m.url("/items/1"), m.url("/items/2")}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(read_json(dir / "resume.json")["requests"][0]["outcome"], "deferred");
}

// --- --urls lines with a method and a body ---------------------------------------------------

TEST_F(FetchFlags, UrlLinesCarryMethodAndBody) {
  TempDir dir;
  write_file(dir, "body.json", "{\"k\": 1}\r\n");
  const std::string list = write_file(dir, "urls.txt",
                                      "# requests\n" + echo("?n=1") + "\n" + "POST " + echo("?n=2") + " @body.json\n" +
                                          "  PUT\t" + echo("?n=3") + " a literal body  \n" + "DELETE " + echo("?n=4") +
                                          "\n");
  // Run from another folder: body.json is found beside the list.
  const RunResult r = run(fetch_argv({"-s", "-j", "1", "-d", "x=1", "--urls", list}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto all = seen_all(r.out);
  ASSERT_EQ(all.size(), 4u) << r.out;
  EXPECT_EQ(all[0].method, "POST");  // a bare URL: -d of the command line
  EXPECT_EQ(all[0].body, "x=1");
  EXPECT_EQ(all[1].method, "POST");
  EXPECT_EQ(all[1].body, "{\"k\": 1}\r\n");
  EXPECT_EQ(all[2].method, "PUT");
  EXPECT_EQ(all[2].body, "a literal body");
  EXPECT_EQ(all[3].method, "DELETE");
  EXPECT_EQ(all[3].body, "");
  const RunResult help = run(fetch_argv({"--help"}));
  EXPECT_NE(help.out.find("METHOD URL @FILE"), std::string::npos);
}

TEST_F(FetchFlags, UrlLineErrorsNameFileAndLine) {
  Mock m({});
  TempDir dir;
  const std::string missing = write_file(dir, "a.txt",
                                         m.url("/items/1") + "\n\nPOST " + m.url("/items/2") + " @nope.json\n");
  RunResult r = run(fetch_argv({"--urls", missing}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(missing + ":3: cannot read"), std::string::npos) << r.err;
  const std::string two_urls = write_file(dir, "b.txt", m.url("/items/1") + " " + m.url("/items/2") + "\n");
  r = run(fetch_argv({"--urls", two_urls}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(two_urls + ":1: expected URL, METHOD URL or METHOD URL BODY"), std::string::npos) << r.err;
  r = run(fetch_argv({"--urls", dir / "none.txt"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot read " + dir / "none.txt" + ": No such file or directory"), std::string::npos);
  EXPECT_EQ(r.err.find("abide: "), std::string::npos) << "said twice: " << r.err;
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
}

TEST(FetchFlagsUnits, UrlLinesParsed) {
  TempDir dir;
  const std::string list = write_file(dir, "l.txt", "http://h/1\nGET h:80/2\r\nPATCH http://h/3 {\"a\": 1}\n# c\n\n");
  auto lines = cli::read_url_list(list);
  ASSERT_TRUE(lines) << lines.error();
  ASSERT_EQ(lines->size(), 3u);
  EXPECT_FALSE((*lines)[0].method);
  EXPECT_EQ((*lines)[1].method, "GET");
  EXPECT_EQ((*lines)[1].url, "h:80/2");
  EXPECT_FALSE((*lines)[1].body);
  EXPECT_EQ((*lines)[2].body, "{\"a\": 1}");
  EXPECT_EQ((*lines)[2].line, 3u);
}

TEST(FetchFlagsUnits, UrlListBodiesAreBounded) {
  TempDir dir;
  write_file(dir, "b.txt", std::string(600, 'x'));
  const std::string list = write_file(dir, "l.txt", "POST http://h/1 @b.txt\nPOST http://h/2 @b.txt\n");
  ASSERT_TRUE(cli::read_url_list(list, 1200));
  auto over = cli::read_url_list(list, 1000);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error(), list + ":2: the bodies of the list add up to more than 1000 bytes");
}

// --- flags abide does not have ------------------------------------------------------------------

TEST_F(FetchFlags, UnsupportedFlagsAreNamedWithAHintAndNothingIsSent) {
  Mock m({});
  struct Case {
    std::vector<std::string> args;
    std::string flag;
    std::string hint;
  };
  const std::vector<Case> cases{
      {{"-b", "k=v"}, "-b", "use -H 'Cookie: NAME=VALUE'"},
      {{"--cookie", "k=v"}, "--cookie", "use -H 'Cookie: NAME=VALUE'"},
      {{"--cookie=k=v"}, "--cookie", "use -H 'Cookie: NAME=VALUE'"},
      {{"-T", "file"}, "-T", "use -X PUT --data-binary @FILE"},
      {{"--upload-file", "file"}, "--upload-file", "use -X PUT --data-binary @FILE"},
      {{"-C", "-"}, "-C", "Range"},
      {{"--limit-rate", "10k"}, "--limit-rate", "--pacing"},
      {{"-Z"}, "-Z", "use --urls FILE -j N"},
      {{"--parallel"}, "--parallel", "use --urls FILE -j N"},
      {{"--cacert", "ca.pem"}, "--cacert", "CA certificates"},
      {{"--cert", "c.pem"}, "--cert", "client certificates"},
      {{"-c", "jar"}, "-c", "no cookies"},
      {{"--cookie-jar", "jar"}, "--cookie-jar", "no cookies"},
      {{"--negotiate"}, "--negotiate", "-H 'Authorization: ...'"},
      {{"-#"}, "-#", "progress line"},
      {{"--create-dirs"}, "--create-dirs", "mkdir -p"},
      {{"-z", "yesterday"}, "-z", "If-Modified-Since"},
      {{"--frobnicate"}, "--frobnicate", "not a fetch option; see abide fetch --help"},
      {{"-sb", "k=v"}, "-b", "Cookie"},
      {{"--data-ascii", "a=1"}, "--data-ascii", "use -d"},
      {{"-j", "4", "-c", "jar"}, "-c", "no cookies"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> a = c.args;
    a.push_back(m.url("/items/1"));
    a.push_back("-w");
    a.push_back("%{http_code}");
    const RunResult r = run(fetch_argv(a));
    EXPECT_EQ(r.exit_code, 2) << c.flag;
    EXPECT_NE(r.err.find("abide fetch: " + c.flag + ":"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.hint), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("not expected"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("http://"), std::string::npos) << "blames the URL: " << r.err;
  }
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
}

TEST_F(FetchFlags, FlagWithoutItsValueIsNamed) {
  Mock m({});
  for (const std::string flag : {"-w", "-d", "-H", "-o", "-u"}) {
    const RunResult r = run(fetch_argv({m.url("/items/1"), flag}));
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_NE(r.err.find("required"), std::string::npos) << flag << ": " << r.err;
    EXPECT_EQ(r.err.find("http://"), std::string::npos) << "blames the URL: " << r.err;
  }
  EXPECT_EQ(m.stats()["totals"]["requests"], 0);
}

// --- pieces ----------------------------------------------------------------------------------

TEST(FetchFlagsUnits, Base64AsRfc4648) {
  EXPECT_EQ(cli::base64(""), "");
  EXPECT_EQ(cli::base64("f"), "Zg==");
  EXPECT_EQ(cli::base64("fo"), "Zm8=");
  EXPECT_EQ(cli::base64("foo"), "Zm9v");
  EXPECT_EQ(cli::base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(cli::base64(std::string("\xff\x00\xfe", 3)), "/wD+");
}

TEST(FetchFlagsUnits, UrlEscapeAsCurlsDataUrlencode) {
  EXPECT_EQ(cli::url_escape("aZ09-._~"), "aZ09-._~");
  EXPECT_EQ(cli::url_escape("a b&c=d/é"), "a+b%26c%3Dd%2F%C3%A9");
  EXPECT_EQ(cli::url_escape(std::string("\0\n", 2)), "%00%0A");
}

}  // namespace
}  // namespace abide::test
