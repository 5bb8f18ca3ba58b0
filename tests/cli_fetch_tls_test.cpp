// abide fetch over TLS: -k/--insecure and --http1.1/--http2 against a real
// TLS server on 127.0.0.1 (tests/support/tls_server.h: Node's HTTP/2 secure
// server with a self-signed certificate made for the test), with curl's own
// behaviour on the same server as the reference where the two can be compared.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "support/fetch_cli.h"
#include "support/run.h"
#include "support/tls_server.h"

namespace abide::test {
namespace {

using ::testing::HasSubstr;

// Each test has its own server (and so its own certificate and port).
class FetchTls : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.error().empty()) << server_.error(); }

  // curl, which the tests compare abide with: a test dependency like node.
  std::string curl_path() const {
    const std::string path = program_on_path("curl");
    EXPECT_FALSE(path.empty()) << "curl is not on PATH: the TLS tests need it (scripts/deps.sh test installs it)";
    return path;
  }

  TlsServer server_;
  TempDir dir_;
};

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// Bytes a text-mode or length-confused transfer would damage: every byte
// value (NUL, CR, LF among them) first, then pseudo-random ones, enough to
// span many HTTP/2 DATA frames and TLS records.
std::string awkward_bytes(std::size_t n) {
  std::string bytes;
  bytes.reserve(n);
  for (int b = 0; b < 256; ++b) bytes.push_back(static_cast<char>(b));
  std::mt19937 gen(16);
  while (bytes.size() < n) bytes.push_back(static_cast<char>(gen() & 0xff));
  return bytes;
}

// ---- the certificate --------------------------------------------------------------

// A certificate that does not verify is a lasting error: the request ends at
// once as not_retryable, with libcurl's words for it (curl's own message),
// nothing in -o, and the server sees a single connection and no request.
TEST_F(FetchTls, WithoutInsecureASelfSignedCertificateIsRefusedOnceAsCurlSaysIt) {
  const std::string url = server_.url("/version");
  const std::string out = dir_ / "out", stats = dir_ / "stats.json";
  const RunResult r = run(
      fetch_argv({url, "-o", out, "--stats", stats, "-w", "%{num_retries} %{abide_outcome} %{abide_attempts}"}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "0 not_retryable 1");
  // One connection (its handshake refused by abide), no request: no retry reached the server.
  const json log = server_.log();
  ASSERT_TRUE(log.is_object());
  EXPECT_EQ(log["connections"], 1) << log.dump();
  EXPECT_TRUE(log["requests"].empty()) << log.dump();

  // curl says "curl: (60) SSL certificate problem: self-signed certificate".
  const RunResult c = run({curl_path(), "-sS", "--noproxy", "*", url, "-o", dir_ / "curl_out"});
  EXPECT_EQ(c.exit_code, 60) << c.err;
  const std::string tag = "curl: (60) ";
  const auto from = c.err.find(tag);
  ASSERT_NE(from, std::string::npos) << c.err;
  const std::string problem = c.err.substr(from + tag.size(), c.err.find('\n', from) - from - tag.size());
  ASSERT_THAT(problem, HasSubstr("certificate problem"));
  EXPECT_EQ(count(r.err, problem), 1u) << "said once, in curl's words: " << r.err;
  // curl creates -o FILE at the first byte: a refused handshake leaves none.
  EXPECT_FALSE(std::filesystem::exists(dir_ / "curl_out"));
  EXPECT_FALSE(std::filesystem::exists(out));

  const json s = read_json(stats);
  ASSERT_TRUE(s.is_object()) << slurp(stats);
  EXPECT_EQ(s["requests"], 1);
  EXPECT_EQ(s["done"], 0);
  EXPECT_EQ(s["attempts"], 1);
  EXPECT_EQ(s["retries"], 0);
  ASSERT_EQ(s["unfinished"].size(), 1u) << s.dump();
  EXPECT_EQ(s["unfinished"][0]["outcome"], "not_retryable");
  EXPECT_EQ(s["unfinished"][0]["url"], url);

  // Nothing arrived, so nothing was written (curl leaves no file at all).
  std::error_code ec;
  EXPECT_TRUE(!fs::exists(out, ec) || fs::file_size(out, ec) == 0) << slurp(out);
  EXPECT_FALSE(fs::exists(dir_ / "curl_out", ec));
}

// -s is as quiet as curl's -s about it; -S says it again.
TEST_F(FetchTls, SilentSaysNothingAboutTheRefusedCertificateUnlessShowError) {
  const std::string url = server_.url("/version");
  const RunResult quiet = run(fetch_argv({"-s", url}));
  const RunResult curl_quiet = run({curl_path(), "-s", "--noproxy", "*", url});
  EXPECT_EQ(quiet.exit_code, 1);
  EXPECT_EQ(curl_quiet.exit_code, 60);
  EXPECT_EQ(quiet.err, curl_quiet.err);
  EXPECT_EQ(quiet.err, "");
  EXPECT_EQ(quiet.out, "");

  const RunResult shown = run(fetch_argv({"-sS", url}));
  EXPECT_EQ(shown.exit_code, 1);
  EXPECT_THAT(shown.err, HasSubstr("SSL certificate problem"));
  EXPECT_THAT(shown.err, HasSubstr("not_retryable"));
}

// -k: the same server's answer, every byte of it, over each HTTP version.
TEST_F(FetchTls, InsecureFetchesTheBodyIntact) {
  const std::string bytes = awkward_bytes(300 * 1024);
  server_.put_file("blob.bin", bytes);
  int run_no = 0;
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"-k"}, {"--insecure", "--http1.1"}, {"-k", "--http2"}}) {
    SCOPED_TRACE(flags.back());
    // Files of their own: a run that wrote nothing cannot pass on an earlier one's.
    const std::string n = std::to_string(++run_no);
    const std::string out = dir_ / ("blob" + n + ".out"), stats = dir_ / ("stats" + n + ".json");
    std::vector<std::string> args = flags;
    args.insert(args.end(), {server_.url("/files/blob.bin"), "-o", out, "--stats", stats, "-w", "%{size_download}"});
    const RunResult r = run(fetch_argv(args));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, std::to_string(bytes.size()));
    const std::string got = slurp(out);
    EXPECT_EQ(got.size(), bytes.size());
    EXPECT_TRUE(got == bytes) << "the body differs from what the server sent";
    const json s = read_json(stats);
    EXPECT_EQ(s["done"], 1) << s.dump();
    EXPECT_EQ(s["attempts"], 1) << s.dump();
  }
  EXPECT_EQ(server_.requests("/files/blob.bin").size(), 3u);
}

// ---- the HTTP version ---------------------------------------------------------------

// What the server saw: its request's HTTP version ("2.0", "1.1") and ALPN protocol.
struct Seen {
  std::string version, alpn;
};

Seen last_seen(const TlsServer& server, const std::string& target) {
  const auto seen = server.requests(target);
  if (seen.empty()) return {"<no request>", "<no request>"};
  return {seen.back().value("version", ""), seen.back().value("alpn", "")};
}

TEST_F(FetchTls, Http2NegotiatesHttp2ByAlpn) {
  const RunResult r = run(fetch_argv({"-k", "--http2", server_.url("/version")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "2.0");  // the server's answer: the version it saw
  const Seen seen = last_seen(server_, "/version");
  EXPECT_EQ(seen.version, "2.0");
  EXPECT_EQ(seen.alpn, "h2");
}

TEST_F(FetchTls, Http11StaysOnHttp11WhereTheServerOffersHttp2) {
  const RunResult r = run(fetch_argv({"-k", "--http1.1", server_.url("/version")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1.1");
  const Seen seen = last_seen(server_, "/version");
  EXPECT_EQ(seen.version, "1.1");
  EXPECT_EQ(seen.alpn, "http/1.1");
}

// With neither flag, abide speaks what curl speaks to the same server.
TEST_F(FetchTls, WithoutAVersionFlagTheVersionIsCurls) {
  const RunResult c = run({curl_path(), "-sk", "--noproxy", "*", server_.url("/version?curl")});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const RunResult r = run(fetch_argv({"-k", server_.url("/version?abide")}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, c.out);
  const Seen by_curl = last_seen(server_, "/version?curl"), by_abide = last_seen(server_, "/version?abide");
  EXPECT_EQ(by_abide.version, by_curl.version);
  EXPECT_EQ(by_abide.alpn, by_curl.alpn);
}

// The head -i wrote before the body, without its Date line (it may differ
// from one answer to the next), and what follows the body.
struct Included {
  std::string head, rest;
};

Included included(const std::string& out) {
  const auto end = out.find("\r\n\r\n");
  if (end == std::string::npos) return {"<no head>", out};
  std::string head;
  std::size_t at = 0;
  while (at < end + 2) {
    const auto eol = out.find("\r\n", at);
    const std::string line = out.substr(at, eol + 2 - at);
    at = eol + 2;
    if (line.size() >= 5 && (line.compare(0, 5, "date:") == 0 || line.compare(0, 5, "Date:") == 0)) continue;
    head += line;
  }
  return {head, out.substr(end + 4)};
}

// -i writes the status line of the version the answer came in ("HTTP/2 200"
// has no reason phrase) and -w %{http_version} names it, as curl does.
TEST_F(FetchTls, IncludeAndWriteOutSayTheHttpVersionAsCurl) {
  for (const std::string& flag : {std::string("--http2"), std::string("--http1.1")}) {
    SCOPED_TRACE(flag);
    const std::string url = server_.url("/version");
    const RunResult r = run(fetch_argv({"-sk", flag, "-i", "-w", "|%{http_version}", url}));
    const RunResult c = run({curl_path(), "-sk", "--noproxy", "*", flag, "-i", "-w", "|%{http_version}", url});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(c.exit_code, 0) << c.err;
    const Included a = included(r.out), b = included(c.out);
    EXPECT_EQ(a.head, b.head);
    EXPECT_EQ(a.rest, b.rest);
    EXPECT_EQ(a.rest, flag == "--http2" ? "2.0|2" : "1.1|1.1");
    EXPECT_TRUE(a.head.starts_with(flag == "--http2" ? "HTTP/2 200 \r\n" : "HTTP/1.1 200 OK\r\n")) << a.head;
  }
  // No answer: "0", as curl.
  const RunResult none = run(fetch_argv({"-s", "--max-attempts", "1", "-w", "%{http_version}", "http://127.0.0.1:1/"}));
  EXPECT_EQ(none.out, "0");
}

// ---- the rules over TLS and HTTP/2 -----------------------------------------------------

// The two attempts of one request, as the server saw them.
std::vector<json> two_attempts(const TlsServer& server, const std::string& target) {
  auto seen = server.requests(target);
  EXPECT_EQ(seen.size(), 2u) << server.log().dump();
  for (const json& r : seen) EXPECT_EQ(r.value("version", ""), "2.0") << r.dump();
  return seen;
}

// A 429 with Retry-After: 2 over h2: the retry comes no earlier than two
// seconds after the server began to answer (before the client had the answer,
// from which they count), and only the final body is written. Two, not one:
// fetch's own first backoff is at most a second, so a hint ignored cannot pass.
TEST_F(FetchTls, RetryAfterIsObeyedOverHttp2) {
  const std::string target = "/once/429/ra?ra=2";
  const RunResult r = run(fetch_argv({"-k", "--http2", server_.url(target), "-w", "\n%{num_retries} %{http_code}"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "final body for ra\n\n1 200");
  const auto seen = two_attempts(server_, target);
  ASSERT_EQ(seen.size(), 2u);
  const double waited_ms = seen[1]["arrived_ms"].get<double>() - seen[0]["answered_ms"].get<double>();
  EXPECT_GE(waited_ms, 2000.0) << "the retry came early";
}

// A 503 that is retried: its body never reaches -o, the final answer's alone does.
TEST_F(FetchTls, ARetriedAnswersBodyIsNotWrittenOverHttp2) {
  const std::string target = "/once/503/body?ra=1";
  const std::string out = dir_ / "out", stats = dir_ / "stats.json";
  const RunResult r = run(fetch_argv({"-k", "--http2", server_.url(target), "-o", out, "--stats", stats}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(slurp(out), "final body for body\n");
  const json s = read_json(stats);
  EXPECT_EQ(s["retries"], 1) << s.dump();
  EXPECT_EQ(s["status_counts"]["503"], 1) << s.dump();
  EXPECT_EQ(s["status_counts"]["200"], 1) << s.dump();
  two_attempts(server_, target);
}

// ---- batches over HTTP/2 ---------------------------------------------------------------

// A --urls file of these URLs, in this order.
std::string url_list(const std::string& path, const std::vector<std::string>& urls) {
  std::ofstream out(path);
  for (const std::string& u : urls) out << u << "\n";
  return path;
}

// Several workers at once, each on its own TLS connection: every answer whole, every one h2.
TEST_F(FetchTls, AnHttp2BatchArrivesIntact) {
  const std::string bytes = awkward_bytes(64 * 1024);
  server_.put_file("part.bin", bytes);
  std::vector<std::string> urls;
  for (int i = 1; i <= 24; ++i) urls.push_back(server_.url("/files/part.bin?i=" + std::to_string(i)));
  const std::string dir = dir_ / "parts", stats = dir_ / "stats.json";
  const RunResult r = run(fetch_argv({"-k", "--http2", "-j", "6", "--urls", url_list(dir_ / "urls.txt", urls),
                                      "--output-dir", dir, "--stats", stats}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_json(stats)["done"], 24) << slurp(stats);
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    ++files;
    EXPECT_TRUE(slurp(entry.path().string()) == bytes) << entry.path() << " differs from what the server sent";
  }
  EXPECT_EQ(files, 24u);
  const json log = server_.log();
  ASSERT_EQ(log["requests"].size(), 24u) << log.dump();
  for (const json& req : log["requests"]) EXPECT_EQ(req.value("version", ""), "2.0") << req.dump();
}

// A batch's transfers to an HTTP/2 origin share a connection, as curl
// --parallel's do: the first sets it up, the others wait for it and join it,
// instead of each opening its own before any knows the origin multiplexes.
TEST_F(FetchTls, AnHttp2BatchSharesOneConnection) {
  server_.put_file("small.txt", "small");
  std::vector<std::string> urls;
  for (int i = 1; i <= 24; ++i) urls.push_back(server_.url("/files/small.txt?i=" + std::to_string(i)));
  const std::string dir = dir_ / "parts", stats = dir_ / "stats.json";
  const RunResult r = run(fetch_argv({"-k", "-j", "12", "--urls", url_list(dir_ / "urls.txt", urls), "--output-dir",
                                      dir, "--stats", stats}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_json(stats)["done"], 24) << slurp(stats);
  const json log = server_.log();
  EXPECT_EQ(log["requests"].size(), 24u) << log.dump();
  EXPECT_EQ(log["connections"], 1) << log.dump();
}

// A 429 with Retry-After: 1 to one request of a batch holds back the whole
// origin. Two workers: one gets the 429, the other is held by the server until
// 300 ms after it, and then takes the rest of the batch, which must wait out
// the second that counts from the 429's receipt (later than the server's
// answer): no request may arrive sooner. A cooldown kept per request would let
// them in at about 300 ms.
TEST_F(FetchTls, ARetryAfterInAnHttp2BatchHoldsBackTheOrigin) {
  // The refusal waits until the hold has arrived (with=hold): a client slow
  // to open its second connection (a sanitizer build) sends both at once all the same.
  const std::string gate = "/once/429/gate?ra=1&with=hold", hold = "/hold/gate?ms=300";
  std::vector<std::string> urls{server_.url(gate), server_.url(hold)};
  for (int i = 1; i <= 5; ++i) urls.push_back(server_.url("/version?i=" + std::to_string(i)));
  const std::string stats = dir_ / "stats.json";
  const RunResult r = run(fetch_argv({"-k", "--http2", "-j", "2", "--urls", url_list(dir_ / "urls.txt", urls),
                                      "--output-dir", dir_ / "out", "--stats", stats}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_json(stats)["done"], 7) << slurp(stats);
  EXPECT_EQ(slurp(dir_ / "out/000001-gate"), "final body for gate\n");

  const json log = server_.log();
  ASSERT_EQ(log["requests"].size(), 8u) << log.dump();
  const auto gated = server_.requests(gate);
  const auto held = server_.requests(hold);
  ASSERT_EQ(gated.size(), 2u) << log.dump();
  ASSERT_EQ(held.size(), 1u) << log.dump();
  const double refused_at = gated[0]["answered_ms"].get<double>();
  // The hold went out beside the gate (a batch of one thread may send it a
  // few milliseconds after the 429, before reading it) and was answered
  // 300 ms later, into the cooldown.
  ASSERT_LT(held[0]["arrived_ms"].get<double>(), refused_at + 100.0) << log.dump();
  ASSERT_GE(held[0]["answered_ms"].get<double>(), refused_at + 200.0) << log.dump();
  EXPECT_GE(gated[1]["arrived_ms"].get<double>(), refused_at + 1000.0) << log.dump();
  for (const json& req : log["requests"]) {
    EXPECT_EQ(req.value("version", ""), "2.0") << req.dump();
    if (req.value("path", "").starts_with("/version")) {
      EXPECT_GE(req["arrived_ms"].get<double>(), refused_at + 1000.0) << "sent during the cooldown: " << req.dump();
    }
  }
}

}  // namespace
}  // namespace abide::test
