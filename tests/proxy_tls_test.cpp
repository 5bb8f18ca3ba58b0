// `abide proxy` in front of an https upstream: --cacert FILE (a private CA)
// and -k/--insecure, against a real TLS server on 127.0.0.1
// (tests/support/tls_server.h: Node's HTTP/2 secure server with a
// certificate made for the test, which is its own CA).
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstddef>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/proxy_processes.h"
#include "support/run.h"
#include "support/temp_dir.h"
#include "support/tls_server.h"

#ifdef ABIDE_CLI_PATH

namespace abide::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// Each test has its own server (and so its own certificate and port).
class ProxyTls : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.error().empty()) << server_.error(); }

  // The proxy's options that send every path to the TLS server, then `more`.
  std::vector<std::string> to_server(const std::vector<std::string>& more) const {
    return with({"--upstream", server_.url("")}, more);
  }

  TlsServer server_;
  TempDir dir_;
};

// Every byte value, then pseudo-random ones: enough for many HTTP/2 DATA
// frames and TLS records on the way in, and chunks on the way out.
std::string awkward_bytes(std::size_t n) {
  std::string bytes;
  bytes.reserve(n);
  for (int b = 0; b < 256; ++b) bytes.push_back(static_cast<char>(b));
  std::mt19937 gen(29);
  while (bytes.size() < n) bytes.push_back(static_cast<char>(gen() & 0xff));
  return bytes;
}

// With the server's CA the proxy reaches it, over HTTP/2 as ALPN chose (the
// server saw "h2"), and hands on its answers whole.
TEST_F(ProxyTls, WithCacertTheHttpsUpstreamAnswersOverHttp2) {
  const std::string bytes = awkward_bytes(256 * 1024);
  server_.put_file("blob.bin", bytes);
  Proxy proxy(to_server({"--cacert", server_.ca_file()}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  auto c = proxy.client();

  const auto version = c.Get("/version");
  ASSERT_TRUE(version) << httplib::to_string(version.error());
  EXPECT_EQ(version->status, 200) << version->body;
  EXPECT_EQ(version->body, "2.0");
  EXPECT_EQ(version->get_header_value("Abide-Outcome"), "done");
  EXPECT_EQ(version->get_header_value("Abide-Attempts"), "1");
  const std::vector<json> seen = server_.requests("/version");
  ASSERT_EQ(seen.size(), 1u) << server_.log().dump();
  EXPECT_EQ(seen[0]["version"], "2.0") << seen[0].dump();
  EXPECT_EQ(seen[0]["alpn"], "h2") << seen[0].dump();

  const auto blob = c.Get("/files/blob.bin");
  ASSERT_TRUE(blob) << httplib::to_string(blob.error());
  EXPECT_EQ(blob->status, 200);
  EXPECT_EQ(blob->body.size(), bytes.size());
  EXPECT_TRUE(blob->body == bytes) << "the body differs from what the server sent";
  EXPECT_TRUE(server_.log()["tls_errors"].empty()) << server_.log().dump();
  proxy.stop_cleanly();
}

// --upstream-buffer-size: transfers that end while others share their
// HTTP/2 connection keep libcurl's buffer past their end; each one's next
// request still goes out (on a handle whose buffer is the size asked) and
// every answer comes back whole.
TEST_F(ProxyTls, ASmallUpstreamBufferServesStreamsSharingAConnection) {
  const std::string bytes = awkward_bytes(64 * 1024);
  server_.put_file("blob.bin", bytes);
  Proxy proxy(to_server({"--cacert", server_.ca_file(), "--upstream-buffer-size", "1024", "--max-upstream-connections",
                         "1", "--loops", "1"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  constexpr std::size_t kCallers = 6;
  constexpr int kRounds = 3;
  std::vector<std::vector<std::string>> failures(kCallers);
  std::vector<std::thread> callers;
  for (std::size_t i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] {
      auto c = proxy.client();
      for (int round = 0; round < kRounds; ++round) {
        const auto r = c.Get("/files/blob.bin");
        if (!r) failures[i].push_back(httplib::to_string(r.error()));
        else if (r->status != 200) failures[i].push_back(std::to_string(r->status) + " " + r->body);
        else if (r->body != bytes) failures[i].push_back("a body that differs from the server's");
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (std::size_t i = 0; i < kCallers; ++i) {
    EXPECT_TRUE(failures[i].empty()) << "caller " << i << ": " << failures[i][0];
  }
  EXPECT_EQ(server_.requests("/files/blob.bin").size(), kCallers * kRounds);
  EXPECT_EQ(server_.log()["connections"], 1) << server_.log().dump();
  proxy.stop_cleanly();
}

// Without it the system's CAs refuse the certificate: the caller gets a 502
// whose problem detail says so in libcurl's words, at once, after one
// handshake (a refused certificate would be refused again) and no request.
TEST_F(ProxyTls, WithoutCacertTheCallerGets502NamingTheCertificate) {
  Proxy proxy(to_server({}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  auto c = proxy.client();
  const auto r = c.Get("/version");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 502) << r->body;
  EXPECT_EQ(r->get_header_value("Abide-Attempts"), "1");
  const json problem = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(problem.is_object()) << r->body;
  const std::string detail = problem.value("detail", "");
  EXPECT_NE(detail.find("SSL certificate problem"), std::string::npos) << detail;
  EXPECT_NE(detail.find("certificate is not accepted"), std::string::npos) << detail;

  const json log = server_.log();
  ASSERT_TRUE(log.is_object());
  EXPECT_EQ(log["connections"], 1) << log.dump();
  EXPECT_TRUE(log["requests"].empty()) << log.dump();
  proxy.stop_cleanly();
}

// -k: the same server without its CA, with a warning at start.
TEST_F(ProxyTls, InsecureReachesTheUpstreamWithoutItsCertificate) {
  for (const std::string flag : {"-k", "--insecure"}) {
    SCOPED_TRACE(flag);
    Proxy proxy(to_server({flag}));
    ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
    auto c = proxy.client();
    const auto r = c.Get("/version");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->body, "2.0");
    const RunResult stopped = proxy.stop_cleanly();
    EXPECT_NE(stopped.err.find("warning: -k: upstreams' TLS certificates are not verified"), std::string::npos)
        << stopped.err;
  }
  EXPECT_EQ(server_.requests("/version").size(), 2u);
}

// A --cacert that cannot be used stops the proxy before it listens, as the
// other usage errors do (exit 2), naming the file and what is wrong with it.
TEST_F(ProxyTls, ACacertThatCannotBeUsedIsAUsageErrorNamingTheFile) {
  const std::string missing = dir_ / "no-such-ca.pem";
  const std::string empty = dir_ / "not-a-ca.pem";
  std::ofstream(empty) << "not a certificate\n";
  struct Case {
    std::string file, says;
  };
  for (const Case& k : {Case{missing, "cannot read " + missing}, Case{empty, empty + " holds no PEM certificate"},
                        Case{dir_ / "", "cannot read"}}) {
    SCOPED_TRACE(k.file);
    Proxy proxy(to_server({"--cacert", k.file}));
    EXPECT_EQ(proxy.port(), -1) << proxy.first_line();
    const RunResult r = proxy.stop();
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("abide proxy: --cacert: " + k.says), std::string::npos) << r.err;
  }
  EXPECT_EQ(server_.log()["connections"], 0);
}

}  // namespace
}  // namespace abide::test

#endif  // ABIDE_CLI_PATH
