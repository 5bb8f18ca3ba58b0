// What the tests of `abide mock-server` (tests/mock_*_test.cpp) share: a
// start time, limiter options and requests, the fields of an answer, and the
// request bodies of the token styles.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "abide/ratelimit.h"
#include "abide/retry_after.h"
#include "abide/signals.h"
#include "abide/testing/manual_clock.h"
#include "mock_bucket.h"
#include "mock_server_core.h"
#include "mock_token_quota.h"
#include "mock_vendor.h"

namespace abide::mock::fixture {

using namespace std::chrono_literals;
using nlohmann::json;

// 2026-01-01T00:00:00.250Z: a quarter second into a whole second, so that the
// rounding of every stated wait shows.
inline const WallTime kT0 = WallTime{1767225600s} + 250ms;

inline std::optional<std::string> header(const Answer& a, std::string_view name) {
  for (const auto& [n, v] : a.headers)
    if (n == name) return v;
  return std::nullopt;
}

inline std::vector<std::string> header_names(const Answer& a) {
  std::vector<std::string> names;
  for (const auto& [n, v] : a.headers) names.push_back(n);
  return names;
}

inline LimiterOptions options(Style style, std::uint32_t limit, Duration window) {
  LimiterOptions o;
  o.style = style;
  o.limit = limit;
  o.window = window;
  return o;
}

inline Answer get(Limiter& l, std::string_view client = "c", std::string_view conn = "127.0.0.1:1000") {
  return l.handle({"GET", "/items/1", client, conn, ""});
}

// A chat completion whose one message is `bytes` bytes of text, with `extra` merged in.
inline std::string chat(std::size_t bytes, json extra = json::object()) {
  json body{{"model", "gpt-test"},
            {"messages", json::array({{{"role", "user"}, {"content", std::string(bytes, 'a')}}})}};
  body.update(extra);
  return body.dump();
}

// An embedding of `bytes` bytes: its charge is the estimate alone (its max_tokens is 0).
inline std::string embedding(std::size_t bytes) {
  return json{{"model", "e"}, {"input", std::string(bytes, 'e')}}.dump();
}

// An Anthropic message: `system_bytes` of system prompt, `bytes` of user text.
inline std::string message(std::size_t system_bytes, std::size_t bytes, json extra = json::object()) {
  json body{{"model", "claude-test"},
            {"system", std::string(system_bytes, 's')},
            {"messages",
             json::array({{{"role", "user"},
                           {"content", json::array({{{"type", "text"}, {"text", std::string(bytes, 'm')}}})}}})}};
  body.update(extra);
  return body.dump();
}

}  // namespace abide::mock::fixture
