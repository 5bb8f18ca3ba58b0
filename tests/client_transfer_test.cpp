// Transfer settings (decompression, a proxy, the HTTP version), the head
// reader and its limits, and errors that last, against scripted servers.
#include "support/client_fixture.h"

namespace abide {
namespace {

using namespace std::chrono_literals;
using test::fast_config;
using test::TestServer;
using test::Easy;
using test::CallersHandle;
using test::SinkLog;

// The head reader's fast path (take_headers moves its lines out, cleaning
// them in place) gives what HeaderList::add() makes of the same lines.
TEST(HeadReader, TakenHeadersAreWhatAddMakesOfTheLines) {
  ManualClock clock;
  const std::vector<std::string_view> lines = {
      "HTTP/1.1 200 OK\r\n",
      "Empty:\r\n",
      "  folded after an empty value \r\n",  // obsolete folding onto ""
      std::string_view("Nul: a\0b\r\n", 10),
      "Cr: a\rb\r\n",
      "Spaced: \t  padded \t \r\n",
      "Multi: one\r\n",
      "\t two\r\n",
      " three \r\n",
      "bad line without a colon\r\n",
      "Bad Name: skipped\r\n",
      "Tail:x\r\n",
      "\r\n",
  };
  curl_detail::HeadReader slow(1 << 20), fast(1 << 20);
  for (std::string_view l : lines) {
    ASSERT_TRUE(slow.line(l, clock.wall(), clock.monotonic()));
    ASSERT_TRUE(fast.line(l, clock.wall(), clock.monotonic()));
  }
  ASSERT_TRUE(fast.complete());
  const HeaderList expected = slow.headers();
  const HeaderList taken = fast.take_headers();
  ASSERT_EQ(taken.lines().size(), expected.lines().size());
  for (std::size_t i = 0; i < taken.lines().size(); ++i) {
    EXPECT_EQ(taken.lines()[i].name, expected.lines()[i].name) << i;
    EXPECT_EQ(taken.lines()[i].value, expected.lines()[i].value) << i;
  }
  EXPECT_EQ(taken.first("Empty"), "folded after an empty value");
  EXPECT_EQ(taken.first("Nul"), "a b");
  EXPECT_EQ(taken.first("Cr"), "a b");
  EXPECT_EQ(taken.first("Spaced"), "padded");
  EXPECT_EQ(taken.first("Multi"), "one two three");
  EXPECT_EQ(taken.first("Tail"), "x");
  EXPECT_FALSE(taken.first("Bad Name").has_value());
}

TEST(HeadReader, TheStatusLineSaysTheHttpVersionAsCurlNumbersIt) {
  ManualClock clock;
  const std::vector<std::pair<std::string_view, int>> cases = {
      {"HTTP/1.0 200 OK\r\n", 10}, {"HTTP/1.1 200 OK\r\n", 11}, {"HTTP/2 200 \r\n", 20},
      {"HTTP/3 200 \r\n", 30},     {"HTTP/9 200 \r\n", 0},      {"HTTP/1.1x 200\r\n", 0},
  };
  for (const auto& [status_line, version] : cases) {
    curl_detail::HeadReader head(1 << 20);
    ASSERT_TRUE(head.line(status_line, clock.wall(), clock.monotonic()));
    EXPECT_EQ(head.http_version(), version) << status_line;
  }
  // After a 1xx head, the final one's.
  curl_detail::HeadReader head(1 << 20);
  for (std::string_view l : {"HTTP/1.1 100 Continue\r\n", "\r\n", "HTTP/2 204 \r\n", "\r\n"})
    ASSERT_TRUE(head.line(l, clock.wall(), clock.monotonic()));
  EXPECT_TRUE(head.complete());
  EXPECT_EQ(head.status(), 204);
  EXPECT_EQ(head.http_version(), 20);
}

// A loopback server that answers each connection with what `reply` makes of
// the bytes received (an HTTP head, or a TLS ClientHello's first read), then
// closes it; an empty reply closes it unanswered. It keeps what it received.
class ScriptedServer {
 public:
  using Reply = std::function<std::string(const std::string& received)>;
  explicit ScriptedServer(Reply reply) : reply_(std::move(reply)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    stopping_ = true;
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  std::string url(const std::string& scheme, const std::string& path) const {
    return scheme + "://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::vector<std::string> received() {
    std::lock_guard lock(mu_);
    return received_;
  }

 private:
  void serve() {
    while (!stopping_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string in;
      char buf[4096];
      // An HTTP head ends with an empty line; anything else (a ClientHello)
      // is answered after its first read.
      for (;;) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 2000) <= 0) break;
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        in.append(buf, static_cast<std::size_t>(n));
        if (!in.starts_with("GET ") && !in.starts_with("POST ")) break;
        if (in.find("\r\n\r\n") != std::string::npos) break;
      }
      {
        std::lock_guard lock(mu_);
        received_.push_back(in);
      }
      const std::string out = reply_(in);
      for (std::size_t at = 0; at < out.size();) {
        const ssize_t n = ::send(c, out.data() + at, out.size() - at, MSG_NOSIGNAL);
        if (n <= 0) break;
        at += static_cast<std::size_t>(n);
      }
      ::shutdown(c, SHUT_WR);
      // Read what is left so the close sends no reset before the peer read it all.
      for (int i = 0; i < 100; ++i) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 20) <= 0 || ::recv(c, buf, sizeof buf, 0) <= 0) break;
      }
      ::close(c);
    }
  }

  Reply reply_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::vector<std::string> received_;
  std::thread thread_;
};

// The first line of a request as received.
std::string request_line(const std::string& received) { return received.substr(0, received.find("\r\n")); }

// A gzip member holding `text` in one stored (uncompressed) deflate block:
// a real gzip stream, made without a compressor (RFC 1951 3.2.4, RFC 1952).
std::string gzip_stored(const std::string& text) {
  std::uint32_t crc = 0xffffffffu;
  for (const char ch : text) {
    crc ^= static_cast<unsigned char>(ch);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  crc = ~crc;
  const auto le32 = [](std::uint32_t v) {
    std::string b;
    for (int i = 0; i < 4; ++i) b += static_cast<char>((v >> (8 * i)) & 0xff);
    return b;
  };
  const auto len = static_cast<std::uint16_t>(text.size());
  std::string out("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", 10);
  out += '\x01';  // the last block, stored
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  out += static_cast<char>(~len & 0xff);
  out += static_cast<char>((~len >> 8) & 0xff);
  out += text;
  out += le32(crc);
  out += le32(static_cast<std::uint32_t>(text.size()));
  return out;
}

TEST(ClientConfig, DecompressAsksForACodingAndHandsOnTheDecodedBody) {
  const std::string text = "a body that travelled gzip-encoded, decoded by libcurl";
  std::vector<std::string> accept;
  std::mutex mu;
  TestServer server;
  server.svr().Get("/z", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    {
      std::lock_guard lock(mu);
      accept.push_back(req.get_header_value("Accept-Encoding"));
    }
    res.set_header("Content-Encoding", "gzip");
    res.set_content(gzip_stored(text), "application/octet-stream");
  });
  ClientConfig c = fast_config();
  c.decompress = true;
  Client client(c);
  Request r;
  r.url = server.url("/z");
  const RequestOutcome out = client.fetch(r);
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  EXPECT_EQ(out.body, text);
  EXPECT_EQ(out.response->headers.first("Content-Encoding").value_or(""), "gzip");  // as the server sent it
  EXPECT_EQ(out.body_bytes, text.size());

  // Streamed, the sink and body_bytes see the decoded bytes too.
  SinkLog log;
  const RequestOutcome streamed = client.fetch(r, log.sink());
  ASSERT_EQ(streamed.kind, OutcomeKind::kDone) << streamed.reason;
  EXPECT_EQ(log.body(), text);
  EXPECT_EQ(streamed.body_bytes, text.size());

  // Without it, nothing is asked for and the bytes come as sent.
  Client plain(fast_config());
  const RequestOutcome raw = plain.fetch(r);
  ASSERT_EQ(raw.kind, OutcomeKind::kDone) << raw.reason;
  EXPECT_EQ(raw.body, gzip_stored(text));
  std::lock_guard lock(mu);
  ASSERT_EQ(accept.size(), 3u);
  EXPECT_NE(accept[0].find("gzip"), std::string::npos) << accept[0];
  EXPECT_NE(accept[1].find("gzip"), std::string::npos) << accept[1];
  EXPECT_EQ(accept[2], "");
}

TEST(ClientConfig, ProxyGetsTheRequestInAbsoluteForm) {
  TestServer origin;  // never reached: the proxy answers
  origin.svr().Get("/x", [&](const httplib::Request& req, httplib::Response&) { origin.log(req); });
  ScriptedServer proxy([](const std::string&) {
    return std::string("HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nvia proxy");
  });
  ClientConfig c = fast_config();
  c.proxy = "http://127.0.0.1:" + std::to_string(proxy.port());
  Client client(c);
  Request r;
  r.url = origin.url("/x");
  const RequestOutcome out = client.fetch(r);
  ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  EXPECT_EQ(out.body, "via proxy");
  const auto got = proxy.received();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(request_line(got[0]), "GET " + r.url + " HTTP/1.1");
  EXPECT_TRUE(origin.seen().empty());
}

TEST(ClientConfig, HttpVersionIsSentAsConfigured) {
  ScriptedServer server([](const std::string&) {
    return std::string("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
  });
  for (const HttpVersion v : {HttpVersion::kHttp1_1, HttpVersion::kHttp2}) {
    ClientConfig c = fast_config();
    c.http_version = v;
    Client client(c);
    Request r;
    r.url = server.url("http", "/v");
    const RequestOutcome out = client.fetch(r);
    ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  }
  const auto got = server.received();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(request_line(got[0]), "GET /v HTTP/1.1");
  // kHttp2 is HTTP/2 over TLS only: on cleartext, plain HTTP/1.1, no h2c upgrade.
  EXPECT_EQ(request_line(got[1]), "GET /v HTTP/1.1");
  EXPECT_EQ(got[1].find("h2c"), std::string::npos) << got[1];
}

TEST(ClientConfig, HttpVersionOneOneIsWhatAServerSees) {
  std::string version;
  std::mutex mu;
  TestServer server;
  server.svr().Get("/v", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu);
    version = req.version;
    res.set_content("ok", "text/plain");
  });
  ClientConfig c = fast_config();
  c.http_version = HttpVersion::kHttp1_1;
  Client client(c);
  Request r;
  r.url = server.url("/v");
  ASSERT_EQ(client.fetch(r).kind, OutcomeKind::kDone);
  std::lock_guard lock(mu);
  EXPECT_EQ(version, "HTTP/1.1");
}

// A 429 with Retry-After: 30, then one header line of `line_bytes`.
std::string limited_with_a_long_line(std::size_t line_bytes) {
  return "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 30\r\nX-Long: " + std::string(line_bytes, 'a') +
         "\r\nContent-Length: 0\r\n\r\n";
}

// A 200 whose head is `lines` lines of about 1 KB.
std::string ok_with_a_long_head(std::size_t lines) {
  std::string head = "HTTP/1.1 200 OK\r\n";
  for (std::size_t i = 0; i < lines; ++i) head += "X-H" + std::to_string(i) + ": " + std::string(1000, 'b') + "\r\n";
  return head + "Content-Length: 2\r\n\r\nok";
}

void check_a_long_line_keeps_its_retry_after(bool own_handle) {
  ScriptedServer server([](const std::string&) { return limited_with_a_long_line(200'000); });
  Client client(fast_config());
  Request r;
  r.url = server.url("http", "/long");
  const WallTime before = system_wall_clock().now();
  RequestOutcome out;
  if (own_handle) {
    Easy easy(curl_easy_init());
    out = client.perform(easy.get(), r);
  } else {
    out = client.fetch(r);
  }
  const WallTime after = system_wall_clock().now();
  ASSERT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  EXPECT_EQ(out.reason,
            "the response head has a line longer than libcurl's 100 KiB limit; the same head would come again");
  ASSERT_EQ(out.attempts.size(), 1u);  // not retried: the same head would come again
  EXPECT_EQ(out.attempts[0].status, 429);
  EXPECT_EQ(out.attempts[0].plan.basis, Basis::kRetryAfter);
  EXPECT_EQ(server.received().size(), 1u);
  // The Retry-After read before the long line holds: 30 s from receipt.
  ASSERT_TRUE(out.not_before_wall);
  EXPECT_GE(*out.not_before_wall, before + 30s);
  EXPECT_LE(*out.not_before_wall, after + 30s);
  EXPECT_LT(out.waited, 1s);  // the 30 s are not waited for here
  // ... and the origin is held by it: the next request waits for it.
  Request next = r;
  next.deadline = system_monotonic_clock().now() + 1s;
  const RequestOutcome held = client.fetch(next);
  EXPECT_EQ(held.kind, OutcomeKind::kDeadlineExceeded) << held.reason;
  EXPECT_EQ(server.received().size(), 1u);
}

TEST(ClientHead, ALineOverLibcurlsLimitEndsAtOnceAndKeepsItsRetryAfter) {
  check_a_long_line_keeps_its_retry_after(false);
}

TEST(OwnHandle, ALineOverLibcurlsLimitEndsAtOnceAndKeepsItsRetryAfter) {
  check_a_long_line_keeps_its_retry_after(true);
}

TEST(ClientHead, AHeadOverMaxHeaderBytesIsOneClearError) {
  ScriptedServer server([](const std::string&) { return ok_with_a_long_head(2000); });  // 2 MB
  ClientConfig c = fast_config();
  Client client(c);
  Request r;
  r.url = server.url("http", "/big");
  const RequestOutcome out = client.fetch(r);
  ASSERT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  EXPECT_EQ(out.reason, "the response head is larger than " + std::to_string(c.max_header_bytes) +
                            " bytes; the same head would come again");
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_EQ(out.attempts[0].status, 200);
  EXPECT_EQ(server.received().size(), 1u);
  EXPECT_TRUE(out.body.empty());

  // A smaller limit is the one that holds.
  ClientConfig small = fast_config();
  small.max_header_bytes = 10'000;
  Client strict(small);
  const RequestOutcome cut = strict.fetch(r);
  ASSERT_EQ(cut.kind, OutcomeKind::kNotRetryable) << cut.reason;
  EXPECT_NE(cut.reason.find("larger than 10000 bytes"), std::string::npos) << cut.reason;
  EXPECT_EQ(server.received().size(), 2u);

  // A head under the limit passes.
  ScriptedServer fine([](const std::string&) { return ok_with_a_long_head(200); });  // 200 KB
  r.url = fine.url("http", "/fine");
  const RequestOutcome ok = client.fetch(r);
  ASSERT_EQ(ok.kind, OutcomeKind::kDone) << ok.reason;
  EXPECT_EQ(ok.body, "ok");
}

TEST(ClientHead, AMaxHeaderBytesOverLibcurlsOwnTotalMeetsLibcurlsFirst) {
  ScriptedServer server([](const std::string&) { return ok_with_a_long_head(2000); });  // 2 MB
  ClientConfig c = fast_config();
  c.max_header_bytes = std::size_t{1} << 20;  // above libcurl's 300 KiB, below the head
  Client client(c);
  Request r;
  r.url = server.url("http", "/big");
  const RequestOutcome out = client.fetch(r);
  ASSERT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_EQ(server.received().size(), 1u);
  // libcurl 8.3 and later (and patched 7.88 builds, as Debian's) stop at
  // 300 KiB of heads; an older one reads on to this client's own limit.
  const bool libcurl_bounds_heads = curl_version_info(CURLVERSION_NOW)->version_num >= 0x080300 ||
                                    out.reason.find("libcurl") != std::string::npos;
  if (libcurl_bounds_heads) {
    EXPECT_NE(out.reason.find("the response head is larger than libcurl's limit (Too large response headers"),
              std::string::npos)
        << out.reason;
  } else {
    EXPECT_NE(out.reason.find("larger than 1048576 bytes"), std::string::npos) << out.reason;
  }
}

TEST(OwnHandle, AHeadOverMaxHeaderBytesIsOneClearError) {
  ScriptedServer server([](const std::string&) { return ok_with_a_long_head(200); });
  ClientConfig c = fast_config();
  c.max_header_bytes = 10'000;
  Client client(c);
  Easy easy(curl_easy_init());
  Request r;
  r.url = server.url("http", "/big");
  const RequestOutcome out = client.perform(easy.get(), r);
  ASSERT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  EXPECT_NE(out.reason.find("larger than 10000 bytes"), std::string::npos) << out.reason;
  EXPECT_EQ(server.received().size(), 1u);
}

TEST(ClientErrors, AMalformedUrlEndsAtOnceUnsent) {
  Client client(fast_config());
  for (const char* url : {"http://127.0.0.1:99999/", "http://[::1/", "http://127.0.0.1:80a/"}) {
    Request r;
    r.url = url;
    const RequestOutcome out = client.fetch(r);
    EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable) << url << ": " << out.reason;
    EXPECT_TRUE(out.attempts.empty()) << url;
    EXPECT_NE(out.reason.find("invalid URL"), std::string::npos) << out.reason;
  }
}

TEST(ClientErrors, AProxyUrlLibcurlCannotReadEndsAtOnceUnsent) {
  TestServer server;
  server.svr().Get("/x", [&](const httplib::Request& req, httplib::Response&) { server.log(req); });
  for (const char* proxy : {"http://127.0.0.1:99999", "gopher://127.0.0.1:1"}) {
    ClientConfig c = fast_config();
    c.proxy = proxy;
    Client client(c);
    Request r;
    r.method = "POST";  // not sent: it could be repeated, but nothing would differ
    r.url = server.url("/x");
    const RequestOutcome out = client.fetch(r);
    EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable) << proxy << ": " << out.reason;
    ASSERT_EQ(out.attempts.size(), 1u) << proxy;
    EXPECT_FALSE(out.attempts[0].sent);
    EXPECT_FALSE(out.ambiguous);
    EXPECT_NE(out.reason.find("proxy"), std::string::npos) << out.reason;
  }
  EXPECT_TRUE(server.seen().empty());
}

TEST(OwnHandle, ASchemeTheHandleWillNotSpeakEndsAtOnceUnsent) {
  TestServer server;
  server.svr().Get("/x", [&](const httplib::Request& req, httplib::Response&) { server.log(req); });
  CallersHandle h;
  curl_easy_setopt(h.easy.get(), CURLOPT_PROTOCOLS_STR, "https");
  Client client(fast_config());
  Request r;
  r.url = server.url("/x");
  const RequestOutcome out = client.perform(h.easy.get(), r);
  EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable) << out.reason;
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_FALSE(out.attempts[0].sent);
  EXPECT_NE(out.reason.find("scheme"), std::string::npos) << out.reason;
  EXPECT_TRUE(server.seen().empty());
}

// A TLS alert record (RFC 8446 6): fatal, with its description.
std::string tls_alert(int description) {
  return std::string{'\x15', '\x03', '\x01', '\x00', '\x02', '\x02', static_cast<char>(description)};
}

TEST(ClientErrors, ATlsVersionOrCipherMismatchEndsAtOnce) {
  for (const int alert : {70, 40}) {  // protocol_version, handshake_failure
    ScriptedServer server([alert](const std::string&) { return tls_alert(alert); });
    Client client(fast_config());
    Request r;
    r.url = server.url("https", "/");
    const RequestOutcome out = client.fetch(r);
    EXPECT_EQ(out.kind, OutcomeKind::kNotRetryable) << alert << ": " << out.reason;
    ASSERT_EQ(out.attempts.size(), 1u) << alert;
    EXPECT_FALSE(out.attempts[0].sent);
    EXPECT_NE(out.reason.find("TLS version or cipher"), std::string::npos) << out.reason;
    EXPECT_EQ(server.received().size(), 1u);
  }
}

TEST(ClientErrors, ATlsHandshakeCutShortIsRetried) {
  ScriptedServer server([](const std::string&) { return std::string(); });  // closes after the ClientHello
  Client client(fast_config());
  Request r;
  r.url = server.url("https", "/");
  const RequestOutcome out = client.fetch(r);
  EXPECT_EQ(out.kind, OutcomeKind::kExhausted) << out.reason;
  EXPECT_EQ(out.attempts.size(), 3u);
  EXPECT_EQ(server.received().size(), 3u);
}

TEST(ClientErrors, ARefusedConnectionIsStillRetried) {
  int port = 0;
  {
    TestServer gone;  // a port that was just free, now closed
    port = std::stoi(gone.url("").substr(std::string("http://127.0.0.1:").size()));
  }
  Client client(fast_config());
  Request r;
  r.url = "http://127.0.0.1:" + std::to_string(port) + "/x";
  const RequestOutcome out = client.fetch(r);
  EXPECT_EQ(out.kind, OutcomeKind::kExhausted) << out.reason;
  EXPECT_EQ(out.attempts.size(), 3u);
}

}  // namespace
}  // namespace abide
