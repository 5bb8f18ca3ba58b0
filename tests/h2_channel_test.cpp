// The own HTTP/2 client on a real socket (src/h2/channel.*): TLS with ALPN
// to Node's HTTP/2 server (support/tls_server.h), certificates verified,
// streams multiplexed on one connection, a slow reader's backpressure, and
// a server that hangs up.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "h2/channel.h"
#include "support/h2_peer.h"
#include "support/tls_server.h"

namespace abide {
namespace {

using namespace std::chrono_literals;
using test::StreamLog;
using Clock = std::chrono::steady_clock;

// A non-blocking socket connecting to 127.0.0.1:port; `err` as connect() left errno.
int connect_to(int port, int& err) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  err = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 ? 0 : errno;
  return fd;
}

int port_of(const std::string& url) { return std::stoi(url.substr(url.rfind(':') + 1)); }

// A channel and the loop that drives it, as an owner's event loop would.
struct Driven {
  explicit Driven(h2::Session::Settings settings = {}) : channel(settings) {}

  void start(int port, std::shared_ptr<const h2::TlsContext> tls, std::string_view host = "127.0.0.1") {
    int err = 0;
    const int fd = connect_to(port, err);
    want = channel.start(fd, err, std::move(tls), host);
  }
  std::int32_t open(StreamLog& log, std::string_view path, std::string_view authority,
                    std::span<const h2::Field> fields = {}, std::string_view method = "GET",
                    std::string_view body = {}) {
    const std::int32_t id = log.open(channel.session(), {method, "https", authority, path, fields}, body);
    want = channel.flush();
    return id;
  }
  // Runs until done() or `limit`; false on the limit.
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds limit = 10s) {
    const auto until = Clock::now() + limit;
    std::vector<char> scratch(16 * 1024);
    while (!done()) {
      if (want == h2::Channel::Want::kClosed) return done();
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      if (left <= 0ms) return false;
      pollfd p{channel.fd(), static_cast<short>(POLLIN | (want == h2::Channel::Want::kReadWrite ? POLLOUT : 0)), 0};
      if (::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 50))) > 0)
        want = channel.on_ready(scratch);
      else
        want = channel.flush();  // consumed windows go out
    }
    return true;
  }
  // Runs for `d` whatever happens (to show that something does not).
  void run_for(std::chrono::milliseconds d) {
    (void)run_until([] { return false; }, d);
  }

  h2::Channel channel;
  h2::Channel::Want want = h2::Channel::Want::kClosed;
};

std::shared_ptr<const h2::TlsContext> context(h2::TlsOptions options) {
  std::string error;
  auto made = h2::TlsContext::make(options, error);
  EXPECT_NE(made, nullptr) << error;
  return made;
}

class H2Channel : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(server_.error(), "") << server_.error(); }
  int port() const { return port_of(server_.url("")); }
  std::shared_ptr<const h2::TlsContext> trusting() { return context({.verify = true, .ca_file = server_.ca_file()}); }
  test::TlsServer server_;
};

TEST_F(H2Channel, SpeaksHttp2OverTlsAgreedByAlpn) {
  Driven d;
  d.start(port(), trusting());
  StreamLog a;
  ASSERT_EQ(d.open(a, "/version", "127.0.0.1"), 1);
  ASSERT_TRUE(d.run_until([&] { return a.end.has_value(); }));
  EXPECT_TRUE(d.channel.ready());
  EXPECT_TRUE(a.end->complete) << a.end->why;
  EXPECT_EQ(a.heads, std::vector<int>{200});
  EXPECT_EQ(a.body, "2.0");
  const auto seen = server_.requests("/version");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0]["alpn"], "h2");
}

TEST_F(H2Channel, ManyStreamsShareOneConnection) {
  std::string file(20000, '\0');
  for (std::size_t i = 0; i < file.size(); ++i) file[i] = static_cast<char>(i * 7 % 251);
  server_.put_file("f.bin", file);
  Driven d;
  d.start(port(), trusting());
  std::vector<StreamLog> logs(60);
  for (auto& log : logs) ASSERT_GT(d.open(log, "/files/f.bin", "127.0.0.1"), 0);
  ASSERT_TRUE(d.run_until([&] {
    return std::all_of(logs.begin(), logs.end(), [](const StreamLog& l) { return l.end.has_value(); });
  }));
  for (const auto& log : logs) {
    EXPECT_TRUE(log.end->complete) << log.end->why;
    EXPECT_EQ(log.body, file);
  }
  EXPECT_EQ(server_.log()["connections"], 1);
  EXPECT_EQ(server_.requests("/files/f.bin").size(), logs.size());
}

TEST_F(H2Channel, ARequestBodyAndFieldsArriveAsSent) {
  Driven d;
  d.start(port(), trusting());
  std::string body(150 * 1024, 'p');
  for (std::size_t i = 0; i < body.size(); i += 97) body[i] = 'q';
  StreamLog echo, headers;
  const std::vector<h2::Field> fields = {{"X-Trace-Id", "abc"}, {"Connection", "keep-alive"}};
  d.open(echo, "/echo", "127.0.0.1", {}, "POST", body);
  d.open(headers, "/headers", "127.0.0.1", fields);
  ASSERT_TRUE(d.run_until([&] { return echo.end && headers.end; }));
  EXPECT_TRUE(echo.end->complete) << echo.end->why;
  EXPECT_EQ(echo.body, body);
  ASSERT_TRUE(headers.end->complete) << headers.end->why;
  const auto seen = nlohmann::json::parse(headers.body, nullptr, false);
  ASSERT_TRUE(seen.is_object()) << headers.body;
  EXPECT_EQ(seen.value("x-trace-id", ""), "abc");
  EXPECT_FALSE(seen.contains("connection"));
  EXPECT_EQ(seen.value(":authority", ""), "127.0.0.1");
}

TEST_F(H2Channel, AnUnknownCertificateFailsTheHandshake) {
  Driven d;
  d.start(port(), context({.verify = true, .ca_file = ""}));  // the system's CAs: not this server's
  StreamLog a;
  d.open(a, "/version", "127.0.0.1");
  ASSERT_TRUE(d.run_until([&] { return a.end.has_value(); }));
  EXPECT_FALSE(a.end->complete);
  EXPECT_NE(a.end->why.find("SSL certificate problem: self-signed certificate"), std::string::npos) << a.end->why;
  EXPECT_TRUE(d.channel.closed());
  EXPECT_TRUE(server_.requests("/version").empty());
}

TEST_F(H2Channel, TheCertificateMustNameTheHost) {
  Driven d;
  d.start(port(), trusting(), "api.example.com");  // the certificate names 127.0.0.1 and localhost
  StreamLog a;
  d.open(a, "/version", "api.example.com");
  ASSERT_TRUE(d.run_until([&] { return a.end.has_value(); }));
  EXPECT_FALSE(a.end->complete);
  EXPECT_NE(a.end->why.find("SSL certificate problem: hostname mismatch"), std::string::npos) << a.end->why;
  EXPECT_TRUE(server_.requests("/version").empty());

  Driven named;
  named.start(port(), trusting(), "localhost");
  StreamLog b;
  named.open(b, "/version", "localhost");
  ASSERT_TRUE(named.run_until([&] { return b.end.has_value(); }));
  EXPECT_TRUE(b.end->complete) << b.end->why;
}

TEST_F(H2Channel, WithoutVerificationAnyCertificateIsTaken) {
  Driven d;
  d.start(port(), context({.verify = false, .ca_file = ""}));
  StreamLog a;
  d.open(a, "/version", "127.0.0.1");
  ASSERT_TRUE(d.run_until([&] { return a.end.has_value(); }));
  EXPECT_TRUE(a.end->complete) << a.end->why;
}

TEST_F(H2Channel, AMissingCaFileIsAClearError) {
  std::string error;
  EXPECT_EQ(h2::TlsContext::make({.verify = true, .ca_file = "/nonexistent/ca.pem"}, error), nullptr);
  EXPECT_NE(error.find("/nonexistent/ca.pem"), std::string::npos) << error;
}

TEST_F(H2Channel, ASlowReaderHoldsItsStreamNotTheConnection) {
  std::string big(1 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 13 % 256);
  server_.put_file("big.bin", big);
  Driven d({.stream_window = 32 * 1024, .max_head_bytes = 65536, .max_streams = 100});
  d.start(port(), trusting());
  StreamLog slow, quick;
  slow.consume_at_once = false;
  d.open(slow, "/files/big.bin", "127.0.0.1");
  d.open(quick, "/files/big.bin", "127.0.0.1");
  ASSERT_TRUE(d.run_until([&] { return quick.end.has_value(); }));
  d.run_for(200ms);
  EXPECT_TRUE(quick.end->complete) << quick.end->why;
  EXPECT_EQ(quick.body.size(), big.size());
  EXPECT_LE(slow.body.size(), 32u * 1024);  // its window and no more, however long it waits
  EXPECT_FALSE(slow.end.has_value());

  slow.consume_at_once = true;
  slow.consume_all();
  ASSERT_TRUE(d.run_until([&] { return slow.end.has_value(); }));
  EXPECT_TRUE(slow.end->complete) << slow.end->why;
  EXPECT_TRUE(slow.body == big);
}

TEST_F(H2Channel, ACancelledStreamLeavesTheConnectionInUse) {
  Driven d;
  d.start(port(), trusting());
  StreamLog held, after;
  const std::int32_t id = d.open(held, "/hold/nobody?ms=0", "127.0.0.1");  // answered after 10 s
  ASSERT_TRUE(d.run_until([&] { return !server_.requests("/hold/nobody?ms=0").empty(); }));
  d.channel.session().cancel(id);
  d.want = d.channel.flush();
  d.open(after, "/version", "127.0.0.1");
  ASSERT_TRUE(d.run_until([&] { return after.end.has_value() && d.channel.session().open_streams() == 0; }));
  EXPECT_TRUE(after.end->complete);
  EXPECT_FALSE(held.end.has_value());
  EXPECT_TRUE(held.heads.empty());
  EXPECT_EQ(server_.log()["connections"], 1);
}

// Cleartext HTTP/2 to a server that takes the connection and hangs up.
TEST(H2ChannelCleartext, AServerThatHangsUpEndsEveryStream) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::thread server([listener] {
    const int c = ::accept(listener, nullptr, nullptr);
    char buf[256];
    (void)::recv(c, buf, sizeof buf, 0);  // the preface arrived: the requests are on their way
    ::close(c);
  });
  Driven d;
  d.start(ntohs(addr.sin_port), nullptr);
  StreamLog a, b;
  d.open(a, "/a", "127.0.0.1");
  d.open(b, "/b", "127.0.0.1");
  const bool ended = d.run_until([&] { return a.end && b.end; });
  server.join();
  ::close(listener);
  ASSERT_TRUE(ended);
  EXPECT_FALSE(a.end->complete);
  EXPECT_FALSE(b.end->complete);
  EXPECT_FALSE(a.end->refused);  // the server may have acted on it
  EXPECT_EQ(a.end->why, "the server closed the connection");
  EXPECT_TRUE(d.channel.closed());
}

TEST(H2ChannelCleartext, ARefusedConnectionEndsItsStreams) {
  // A port nothing listens on: bound, never listened.
  const int holder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(holder, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(holder, reinterpret_cast<sockaddr*>(&addr), &len);
  Driven d;
  d.start(ntohs(addr.sin_port), nullptr);
  StreamLog a;
  d.open(a, "/a", "127.0.0.1");
  ASSERT_TRUE(d.run_until([&] { return a.end.has_value(); }));
  ::close(holder);
  EXPECT_FALSE(a.end->complete);
  EXPECT_NE(a.end->why.find("connect"), std::string::npos) << a.end->why;
}

}  // namespace
}  // namespace abide
