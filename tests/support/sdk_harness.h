// Test support for tests/proxy_sdk_test.cpp: a vendor-shaped upstream
// (tests/support/sdk/upstream.py), `abide proxy` in front of it, and the
// vendors' SDKs as its callers (Node clients installed into the build tree,
// Debian's Python packages), every process on 127.0.0.1.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/run.h"

#ifdef ABIDE_CLI_PATH

namespace abide::test::sdk {

using nlohmann::json;
using namespace std::chrono_literals;

inline const std::string kDir = std::string(ABIDE_SOURCE_DIR) + "/tests/support/sdk";
// Debian's interpreter, whose packages CI installs (scripts/deps.sh test).
inline const std::string kDebianPython = "/usr/bin/python3";

inline std::vector<std::string> with(std::vector<std::string> head, const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// A background process whose first stdout line is "listening on ADDR:PORT".
class Listening {
 public:
  explicit Listening(const std::vector<std::string>& args) : proc_(args) {
    const auto line = proc_.read_line(30s);
    if (line && line->rfind("listening on ", 0) == 0) port_ = std::atoi(line->c_str() + line->rfind(':') + 1);
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string err_so_far() const { return proc_.err_so_far(); }
  RunResult stop() { return proc_.stop(SIGTERM, 20s); }

 private:
  BackgroundProcess proc_;
  int port_ = -1;
};

// upstream.py in one vendor's style, with its options.
class Upstream : public Listening {
 public:
  Upstream(const std::string& style, const std::vector<std::string>& args)
      : Listening(with({kDebianPython, kDir + "/upstream.py", "--style", style}, args)) {}

  // Its counts and one entry per API request (see upstream.py).
  json stats() const {
    httplib::Client c("127.0.0.1", port());
    c.set_read_timeout(10s);
    const auto r = c.Get("/__stats");
    return r && r->status == 200 ? json::parse(r->body, nullptr, false) : json();
  }
};

// `abide proxy` in front of one upstream (URL[,profile=NAME]), in memory.
class Proxy : public Listening {
 public:
  explicit Proxy(const std::string& upstream, const std::vector<std::string>& args = {})
      : Listening(with({ABIDE_CLI_PATH, "proxy", "--port", "0", "--store", "memory", "--upstream", upstream}, args)) {}
};

// What a client program printed: one JSON object per call, then a summary
// with every request the SDK made.
struct Calls {
  RunResult raw;
  std::vector<json> calls;
  json requests = json::array();

  std::string describe() const { return "client stdout:\n" + raw.out + "\nclient stderr:\n" + raw.err; }
};

inline Calls parse_calls(RunResult raw) {
  Calls c;
  std::stringstream in(raw.out);
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    if (j.value("summary", false)) c.requests = j["requests"];
    else c.calls.push_back(std::move(j));
  }
  std::sort(c.calls.begin(), c.calls.end(), [](const json& a, const json& b) { return a["i"] < b["i"]; });
  c.raw = std::move(raw);
  return c;
}

// Where the Node SDKs are installed: beside this test program, in the build tree.
inline std::string node_dir() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "sdk-node").string();
}

inline Calls run_node(const std::string& script, const std::vector<std::string>& args) {
  return parse_calls(run(with({program_on_path("node"), node_dir() + "/" + script}, args)));
}

inline Calls run_python(const std::string& script, const std::vector<std::string>& args) {
  return parse_calls(run(with({kDebianPython, kDir + "/python/" + script}, args)));
}

// The clients' environment: a home of their own (in this process's state
// folder, removed at exit), no proxy but this one, no vendor settings from
// the machine, no bytecode written into the source tree.
inline void isolate_environment() {
  const char* state = std::getenv("XDG_STATE_HOME");
  const std::filesystem::path home = std::filesystem::path(state != nullptr ? state : "/tmp") / "home";
  std::error_code ec;
  std::filesystem::create_directories(home, ec);
  ::setenv("HOME", home.c_str(), 1);
  for (const char* xdg : {"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"}) ::setenv(xdg, (home / xdg).c_str(), 1);
  for (const char* v :
       {"http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "OPENAI_API_KEY",
        "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "GITHUB_TOKEN",
        "GH_TOKEN", "STRIPE_API_KEY", "PYTHONPATH", "NODE_OPTIONS", "NODE_PATH"})
    ::unsetenv(v);
  ::setenv("NO_PROXY", "127.0.0.1,localhost", 1);
  ::setenv("no_proxy", "127.0.0.1,localhost", 1);
  ::setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
}

// The Node SDKs, installed on first use (install_node.py: `npm ci` of the
// pinned lock file, with npm's own configuration); "" when ready, else why not.
// Node 18 is enough: octokit and stripe declare 20, but every call made here
// runs on Debian 12's Node 18.20 and npm 9.2 (checked); openai 7 needs 22.
inline std::string install_node_sdks() {
  const std::string node = program_on_path("node");
  if (node.empty()) return "node is not on PATH (a test dependency: scripts/deps.sh test)";
  const RunResult v = run({node, "--version"});
  const int major = std::atoi(v.out.c_str() + (v.out.rfind('v', 0) == 0 ? 1 : 0));
  if (major < 18) return "the pinned SDKs need Node.js 18 or later; this is " + v.out;
  const RunResult r = run({kDebianPython, kDir + "/install_node.py", node_dir()});
  if (r.exit_code != 0) return "installing the Node SDKs failed:\n" + r.out + r.err;
  return {};
}

// Debian's Python SDKs import; "" when they do, else why not.
inline std::string check_python_sdks() {
  const RunResult r = run({kDebianPython, "-c",
                           "import sys; sys.path.insert(0, '/usr/lib/python3/dist-packages'); "
                           "import stripe, github, requests, httpx, urllib3"});
  if (r.exit_code == 0) return {};
  return "Debian's Python SDKs do not import (python3-stripe python3-github python3-requests python3-httpx: "
         "scripts/deps.sh test):\n" +
         r.err;
}

// ---- what the calls say ------------------------------------------------------

inline std::string text(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

// A Retry-After of delay-seconds, or -1.
inline double retry_after_s(const json& call) {
  if (!call.contains("error")) return -1;
  const std::string v = text(call["error"], "retry_after");
  return v.empty() ? -1 : std::atof(v.c_str());
}

}  // namespace abide::test::sdk

#endif  // ABIDE_CLI_PATH
