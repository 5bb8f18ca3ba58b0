// Test support for `abide proxy` end to end: the proxy as a background
// process on 127.0.0.1 (beside the mock-server of support/cli_processes.h).
// Shared by the proxy test modules.
#pragma once

#ifdef ABIDE_CLI_PATH

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/cli_processes.h"
#include "support/run.h"

namespace abide::test {

// `abide proxy --port 0` with these options.
class Proxy : public Listening {
 public:
  explicit Proxy(const std::vector<std::string>& args)
      : Listening(with({ABIDE_CLI_PATH, "proxy", "--port", "0"}, args)) {}

  // Its /__abide/stats JSON (null when it does not answer).
  nlohmann::json stats() const {
    auto c = client();
    const auto r = c.Get("/__abide/stats");
    if (!r || r->status != 200) return nlohmann::json();
    return nlohmann::json::parse(r->body, nullptr, false);
  }

  // SIGTERM, then a clean exit: 0, and no sanitizer report.
  RunResult stop_cleanly() {
    auto r = stop(SIGTERM);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("Sanitizer"), std::string::npos) << r.err;
    return r;
  }
};

// The proxy option that sends every path to `m`.
inline std::vector<std::string> upstream(const Mock& m) { return {"--upstream", m.url()}; }

}  // namespace abide::test

#endif  // ABIDE_CLI_PATH
