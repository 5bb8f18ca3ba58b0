// Test support: a real TLS server on 127.0.0.1 for `abide fetch` (Node's
// http2 secure server, tests/support/tls_server.mjs), with a throwaway
// self-signed certificate that the openssl CLI makes in a temporary folder.
// Node and openssl are test dependencies (scripts/deps.sh): when one is
// missing, error() says so and the test fails on it.
#pragma once

#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/run.h"
#include "support/temp_dir.h"

namespace abide::test {

using nlohmann::json;
using namespace std::chrono_literals;

class TlsServer {
 public:
  // `http1_only`: HTTP/1.1 over TLS, and no ALPN (a server without HTTP/2).
  // `max_streams`: the HTTP/2 streams a connection may have open (0: Node's default).
  explicit TlsServer(bool http1_only = false, int max_streams = 0) {
    const std::string node = program_on_path("node");
    const std::string openssl = program_on_path("openssl");
    if (node.empty() || openssl.empty()) {
      error_ = (node.empty() ? "node" : "openssl") +
               std::string(" is not on PATH: the TLS tests need it (scripts/deps.sh test installs it)");
      return;
    }
    // EC P-256: made in milliseconds, where RSA keys take a visible moment.
    const RunResult made = run({openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                "-keyout", dir_ / "key.pem", "-out", dir_ / "cert.pem", "-subj", "/CN=localhost",
                                "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-days", "1", "-nodes"});
    if (made.exit_code != 0) {
      error_ = "openssl could not make a certificate: " + made.err;
      return;
    }
    fs::create_directory(dir_ / "root");
    std::vector<std::string> args{node, std::string(ABIDE_SOURCE_DIR) + "/tests/support/tls_server.mjs", "--cert",
                                  dir_ / "cert.pem", "--key", dir_ / "key.pem", "--root", dir_ / "root"};
    if (http1_only) args.push_back("--http1-only");
    if (max_streams > 0) {
      args.push_back("--max-streams");
      args.push_back(std::to_string(max_streams));
    }
    proc_ = std::make_unique<BackgroundProcess>(std::move(args));
    // "listening on 127.0.0.1:TLS_PORT control 127.0.0.1:CONTROL_PORT"
    const auto line = proc_->read_line(20s);
    if (line) {
      std::istringstream words(*line);
      std::string listening, on, tls, control, plain;
      words >> listening >> on >> tls >> control >> plain;
      const auto port_of = [](const std::string& addr) {
        const auto colon = addr.rfind(':');
        return addr.starts_with("127.0.0.1:") ? std::atoi(addr.c_str() + colon + 1) : 0;
      };
      if (listening == "listening" && control == "control") {
        port_ = port_of(tls);
        control_port_ = port_of(plain);
      }
    }
    if (port_ <= 0 || control_port_ <= 0)
      error_ = "the TLS server did not start: " + (line ? *line : std::string("no output")) + " " + proc_->err_so_far();
  }
  ~TlsServer() {
    if (proc_) proc_->stop(SIGTERM, 10s);
  }
  TlsServer(const TlsServer&) = delete;
  TlsServer& operator=(const TlsServer&) = delete;

  // Empty when the server runs; otherwise why it does not.
  const std::string& error() const { return error_; }

  std::string url(const std::string& target) const { return "https://127.0.0.1:" + std::to_string(port_) + target; }

  // The server's self-signed certificate (PEM): the CA a client trusts to verify it.
  std::string ca_file() const { return dir_ / "cert.pem"; }

  // Serves `bytes` at /files/NAME.
  void put_file(const std::string& name, const std::string& bytes) const {
    std::ofstream(dir_ / ("root/" + name), std::ios::binary) << bytes;
  }

  // What the TLS port saw (tls_server.mjs, "/log"), read over the plain control port.
  json log() const {
    httplib::Client c("127.0.0.1", control_port_);
    c.set_connection_timeout(5s);
    c.set_read_timeout(5s);
    const auto res = c.Get("/log");
    if (!res || res->status != 200) return json();
    return json::parse(res->body, nullptr, false);
  }

  // The requests of log() whose path is `target`, in order of arrival.
  std::vector<json> requests(const std::string& target) const {
    std::vector<json> seen;
    const json l = log();
    if (!l.is_object()) return seen;
    for (const json& r : l["requests"])
      if (r.value("path", "") == target) seen.push_back(r);
    return seen;
  }

 private:
  TempDir dir_;
  std::unique_ptr<BackgroundProcess> proc_;
  int port_ = 0;
  int control_port_ = 0;
  std::string error_;
};

}  // namespace abide::test
