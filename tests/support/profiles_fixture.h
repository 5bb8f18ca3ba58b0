// What the tests of vendor profiles (tests/profiles_*_test.cpp) share: a
// response head read through observe() with a profile, the quota of a policy,
// a warning's presence, and the error a malformed profile gives.
#pragma once

#include "abide/profiles.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abide/headers.h"
#include "abide/signals.h"
#include "profile_values.h"
#include "profiles_internal.h"

namespace abide {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

inline const WallTime kNow{std::chrono::seconds{1767225600}};  // 2026-01-01T00:00:00Z

inline Signals see(std::string_view head_text, std::string_view host, std::string_view profile = {}, WallTime now = kNow,
            bool heuristic = false) {
  auto head = parse_response_head(head_text);
  EXPECT_TRUE(head) << head.error().message;
  if (!head) return {};
  ObserveOptions o;
  o.host = host;
  o.profile = profile;
  o.heuristic = heuristic;
  return observe(head->status, head->headers, now, MonoTime{}, o);
}

inline const QuotaObservation* policy(const Signals& s, std::string_view name) {
  for (const auto& q : s.quota) {
    if (q.policy == name) return &q;
  }
  return nullptr;
}

inline bool warned(const Signals& s, std::string_view text) {
  for (const auto& w : s.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

inline std::string load_error(std::string_view text, std::string_view file = "mine.json") {
  ProfileRegistry r;
  auto loaded = r.load_text(text, file);
  EXPECT_FALSE(loaded);
  return loaded ? std::string() : loaded.error().what();
}

}  // namespace abide
