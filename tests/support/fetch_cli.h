// Test support for `abide fetch` end to end: the CLI and `abide mock-server`
// as child processes on 127.0.0.1 only, and the files they leave.
#pragma once

#include <httplib.h>
#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/temp_dir.h"

namespace abide::test {

using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

// `abide fetch --store redis://` exists only in a CLI built with abide::redis.
#ifdef ABIDE_TEST_WITH_REDIS
inline constexpr bool kRedisBuiltIn = true;
#else
inline constexpr bool kRedisBuiltIn = false;
#endif

inline const bool kNoProxy = [] {
  for (const char* v : {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"})
    unsetenv(v);
  return true;
}();

// Sets an environment variable for one scope: the processes started while it
// lives inherit it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) { setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline json read_json(const std::string& path) {
  json j = json::parse(slurp(path), nullptr, false);
  return j.is_discarded() ? json() : j;
}

// `abide mock-server --port 0 ...` in the background.
class Mock {
 public:
  explicit Mock(const std::vector<std::string>& args) : proc_(argv(args)) {
    if (auto line = proc_.read_line(10s)) {
      const auto colon = line->rfind(':');
      if (line->starts_with("listening on 127.0.0.1:") && colon != std::string::npos)
        port_ = std::atoi(line->c_str() + colon + 1);
    }
  }
  ~Mock() { proc_.stop(SIGTERM, 10s); }

  int port() const { return port_; }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

  json stats() const {
    httplib::Client c("127.0.0.1", port_);
    auto res = c.Get("/__stats");
    if (!res || res->status != 200) return json();
    return json::parse(res->body, nullptr, false);
  }

  // Writes n URLs /items/<first..first+n-1> to a file.
  std::string url_file(const std::string& path, int n, int first = 1) const {
    std::ofstream out(path);
    out << "# a batch\n";
    for (int i = first; i < first + n; ++i) out << url("/items/" + std::to_string(i)) << "\n";
    return path;
  }

 private:
  static std::vector<std::string> argv(const std::vector<std::string>& args) {
    std::vector<std::string> v{ABIDE_CLI_PATH, "mock-server", "--port", "0", "--quiet"};
    v.insert(v.end(), args.begin(), args.end());
    return v;
  }
  BackgroundProcess proc_;
  int port_ = 0;
};

inline std::vector<std::string> fetch_argv(std::vector<std::string> args) {
  args.insert(args.begin(), {ABIDE_CLI_PATH, "fetch"});
  return args;
}

}  // namespace abide::test
