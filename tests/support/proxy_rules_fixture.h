// What the tests of `abide proxy`'s rules (tests/proxy_*_test.cpp without
// sockets) share: a fixed now, routes from their specs, upstream answers and
// outcomes, and the fields of a head by name.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "abide/testing/manual_clock.h"
#include "key_secret.h"
#include "proxy/proxy_rules.h"
#include "proxy/proxy_server.h"
#include "proxy/proxy_stats.h"
#include "state_dir.h"

namespace abide::proxy::test {

// 2026-12-01T14:03:12Z
const WallTime kNow{std::chrono::seconds{1796133792}};

inline std::vector<std::string> names(const HeaderList& h) {
  std::vector<std::string> out;
  for (const Header& line : h.lines()) out.push_back(line.name);
  return out;
}

inline std::string field(const HeaderList& h, std::string_view name) {
  return std::string(h.first(name).value_or("<none>"));
}

struct Final {
  engine::Response response;
  engine::RequestOutcome outcome;
  FinalHead head(OutcomeKind kind) const { return FinalHead{response, kind, outcome}; }
};

inline Route route(std::string_view spec) {
  auto r = spec.front() == '/' ? parse_route(spec) : parse_upstream(spec);
  EXPECT_TRUE(r.has_value()) << spec;
  return r.has_value() ? *r : Route{};
}

inline RequestOutcome outcome_of(OutcomeKind kind, std::string reason) {
  RequestOutcome o;
  o.kind = kind;
  o.reason = std::move(reason);
  return o;
}

}  // namespace abide::proxy::test
