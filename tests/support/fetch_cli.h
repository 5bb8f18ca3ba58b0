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

#include "support/cli_processes.h"
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

inline std::vector<std::string> fetch_argv(std::vector<std::string> args) {
  args.insert(args.begin(), {ABIDE_CLI_PATH, "fetch"});
  return args;
}

}  // namespace abide::test
