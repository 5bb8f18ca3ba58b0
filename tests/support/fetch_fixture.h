// What the end-to-end tests of `abide fetch` (tests/fetch_*_test.cpp) include:
// the CLI and `abide mock-server` as child processes, redis-server, and the
// fetch library's own parts.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "abide/clock.h"
#include "abide/http_date.h"
#include "fetch/fetch_jobs.h"
#include "fetch/fetch_progress.h"
#include "fetch/shown_url.h"
#include "servers/redis_server.h"
#include "support/fetch_cli.h"
#include "support/process.h"
#include "support/run.h"
#include "support/sanitizers.h"

namespace abide::test {

using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

}  // namespace abide::test
