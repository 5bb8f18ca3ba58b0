// `abide proxy`'s counters (proxy_stats.h): requests, answers, attempts,
// waits, quotas and cooldowns, as JSON and as Prometheus text.
#include "support/proxy_rules_fixture.h"

namespace abide::proxy {
namespace {

using namespace std::chrono_literals;
using test::kNow;
using test::outcome_of;

// ---- stats ----

Attempt attempt(Duration paced) {
  Attempt a;
  a.paced = paced;
  return a;
}

TEST(Stats, CountsRequestsAnswersAttemptsWaitsAndOutcomes) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  stats.request_received();
  stats.request_received();
  stats.request_received();
  stats.request_answered("", 400, nullptr);

  RequestOutcome done = outcome_of(OutcomeKind::kDone, "");
  done.attempts = {attempt(100ms), attempt(0s), attempt(0s)};  // one pacer wait, two retry waits
  done.waited = 1500ms;
  stats.request_answered("https://api.x.com", 200, &done);

  RequestOutcome deferred = outcome_of(OutcomeKind::kDeferred, "");
  deferred.waited = 500ms;
  stats.request_answered("https://api.x.com", 429, &deferred);

  RequestOutcome ambiguous = outcome_of(OutcomeKind::kNotRetryable, "");
  ambiguous.ambiguous = true;
  ambiguous.attempts = {attempt(0s)};
  stats.request_answered("https://api.x.com", 502, &ambiguous);
  stats.set_in_flight(7, 3);
  stats.set_loop_connections(1, 4);
  stats.set_loop_connections(0, 5);
  stats.set_loop_connections(64, 9);  // beyond the loops shown

  const nlohmann::ordered_json j = stats.json(kNow);
  EXPECT_EQ(j["requests"], 3);
  EXPECT_EQ(j["answered"], nlohmann::ordered_json({{"200", 1}, {"400", 1}, {"429", 1}, {"502", 1}}));
  EXPECT_EQ(j["attempts"], 4);
  EXPECT_EQ(j["retries"], 2);
  EXPECT_EQ(j["waits"], 3);
  EXPECT_DOUBLE_EQ(j["waited_s"].get<double>(), 2.0);
  EXPECT_EQ(j["outcomes"]["done"], 1);
  EXPECT_EQ(j["outcomes"]["deferred"], 1);
  EXPECT_EQ(j["outcomes"]["not_retryable"], 1);
  EXPECT_EQ(j["outcomes"]["ambiguous"], 1);
  EXPECT_EQ(j["deferrals"], 1);
  EXPECT_EQ(j["held"], 7);
  EXPECT_EQ(j["transfers"], 3);
  EXPECT_EQ(j["connections"], 9);
  EXPECT_EQ(j["loops"], nlohmann::ordered_json::parse(R"([{"connections":5},{"connections":4}])"));
  EXPECT_TRUE(j["cooldowns"].empty());
  // The documented order of the keys.
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"requests", "answered", "attempts", "retries", "waits", "waited_s",
                                            "outcomes", "deferrals", "held", "transfers", "connections", "loops", "cooldowns",
                                            "quota_held"}));
}

// Which announced quota held requests back, on both pages: attempts it paced
// (and for how long), requests it deferred, the last one's counts in words.
TEST(Stats, SayWhichQuotaHeldRequestsBack) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  RequestOutcome done = outcome_of(OutcomeKind::kDone, "");
  Attempt paced = attempt(1500ms);
  paced.held = QuotaHeld{"tokens", 1'850, 40'000, 4'100};
  done.attempts = {paced, attempt(0s)};
  stats.request_answered("https://api.x.com", 200, &done);
  RequestOutcome deferred = outcome_of(OutcomeKind::kDeferred, "");
  deferred.held = QuotaHeld{"tokens", 10, 40'000, 900};
  stats.request_answered("https://api.x.com", 429, &deferred);
  RequestOutcome by_requests = outcome_of(OutcomeKind::kDone, "");
  Attempt one = attempt(250ms);
  one.held = QuotaHeld{"", 0, 500, 1};
  by_requests.attempts = {one};
  stats.request_answered("https://api.x.com", 200, &by_requests);

  const nlohmann::ordered_json j = stats.json(kNow);
  EXPECT_EQ(j["quota_held"]["tokens"]["paced"], 1);
  EXPECT_EQ(j["quota_held"]["tokens"]["deferred"], 1);
  EXPECT_DOUBLE_EQ(j["quota_held"]["tokens"]["waited_s"].get<double>(), 1.5);
  EXPECT_EQ(j["quota_held"]["tokens"]["last"], "tokens: 10 of 40,000 left, 900 needed");
  EXPECT_EQ(j["quota_held"]["requests"]["paced"], 1);
  const std::string text = stats.prometheus(kNow);
  EXPECT_NE(text.find("abide_proxy_quota_held_total{quota=\"tokens\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("abide_proxy_quota_held_seconds_total{quota=\"tokens\"} 1.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("abide_proxy_quota_held_total{quota=\"requests\"} 1\n"), std::string::npos) << text;
}

// A server's units are its own words: a few are kept, the rest are "other".
TEST(Stats, QuotaUnitsAreBounded) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  for (int i = 0; i < 100; ++i) {
    RequestOutcome deferred = outcome_of(OutcomeKind::kDeferred, "");
    deferred.held = QuotaHeld{"unit-" + std::to_string(i) + "\x1b[31m", 0, 10, 20};
    stats.request_answered("https://api.x.com", 429, &deferred);
  }
  const nlohmann::ordered_json j = stats.json(kNow);
  EXPECT_LE(j["quota_held"].size(), 33u);
  EXPECT_EQ(j["quota_held"]["other"]["deferred"], 100 - 32);
  EXPECT_EQ(stats.prometheus(kNow).find('\x1b'), std::string::npos);
}

TEST(Stats, CooldownsShowWhileTheyLast) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  RequestOutcome deferred = outcome_of(OutcomeKind::kDeadlineExceeded, "");
  deferred.not_before_wall = kNow + 30s;
  stats.request_answered("https://api.x.com", 429, &deferred);
  stats.cooldown("https://api.y.com", kNow + 5s);
  stats.cooldown("https://api.y.com", kNow + 2s);  // the later one stays
  stats.cooldown("https://api.z.com", kNow - 1s);  // already over

  const nlohmann::ordered_json j = stats.json(kNow + 10s);
  EXPECT_EQ(j["deferrals"], 1);
  ASSERT_EQ(j["cooldowns"].size(), 1u);
  EXPECT_EQ(j["cooldowns"]["https://api.x.com"]["until"], "2026-12-01T14:03:42.000Z");
  EXPECT_DOUBLE_EQ(j["cooldowns"]["https://api.x.com"]["left_s"].get<double>(), 20.0);
  EXPECT_EQ(stats.json(kNow)["cooldowns"]["https://api.y.com"]["left_s"], 5.0);
  EXPECT_TRUE(stats.json(kNow + 31s)["cooldowns"].empty());
}

TEST(Stats, CooldownsAreBounded) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  for (int i = 0; i < 4096; ++i) stats.cooldown("https://h" + std::to_string(i) + ".com", kNow + 1s + i * 1ms);
  // Full: a later cooldown pushes out the soonest, a sooner one is not kept.
  stats.cooldown("https://late.com", kNow + 1h);
  stats.cooldown("https://early.com", kNow + 1ms);
  nlohmann::ordered_json j = stats.json(kNow);
  EXPECT_EQ(j["cooldowns"].size(), 4096u);
  EXPECT_TRUE(j["cooldowns"].contains("https://late.com"));
  EXPECT_FALSE(j["cooldowns"].contains("https://h0.com"));
  EXPECT_FALSE(j["cooldowns"].contains("https://early.com"));
  // Once some have ended, they are the ones dropped.
  clock.advance(2s + 500ms);
  stats.cooldown("https://next.com", kNow + 2h);
  j = stats.json(kNow + 2500ms);
  EXPECT_TRUE(j["cooldowns"].contains("https://next.com"));
  EXPECT_TRUE(j["cooldowns"].contains("https://h4095.com"));
  EXPECT_TRUE(j["cooldowns"].contains("https://late.com"));
}

TEST(Stats, JsonIsValidWhateverTheOrigin) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  stats.cooldown(std::string("https://\xff\xfe") + '\0' + ".com", kNow + 1s);
  EXPECT_NO_THROW((void)stats.json(kNow).dump());
  EXPECT_NE(stats.json(kNow).dump().find("\\\\xff"), std::string::npos);
}

TEST(Stats, ConnectionThreadsRecordIntoOne) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  RequestOutcome done = outcome_of(OutcomeKind::kDone, "");
  done.attempts = {attempt(0s)};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) {
        stats.request_received();
        stats.request_answered("https://api.x.com", 200, &done);
        stats.cooldown("https://h" + std::to_string(t) + ".com", kNow + 1s);
        if (i % 100 == 0) (void)stats.prometheus(kNow);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const nlohmann::ordered_json j = stats.json(kNow);
  EXPECT_EQ(j["requests"], 4000);
  EXPECT_EQ(j["answered"]["200"], 4000);
  EXPECT_EQ(j["attempts"], 4000);
  EXPECT_EQ(j["outcomes"]["done"], 4000);
  EXPECT_EQ(j["cooldowns"].size(), 4u);
}

TEST(Stats, PrometheusText) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  stats.request_received();
  RequestOutcome done = outcome_of(OutcomeKind::kDone, "");
  done.attempts = {attempt(0s), attempt(0s)};
  done.waited = 1500ms;
  stats.request_answered("https://api.x.com", 200, &done);
  stats.cooldown("https://api.x.com", kNow + 3s);
  stats.cooldown("https://gone.com", kNow + 1s);
  stats.set_in_flight(2, 1);
  stats.set_loop_connections(0, 3);
  stats.set_loop_connections(1, 2);
  const std::string text = stats.prometheus(kNow + 1s);
  for (std::string_view want :
       {"# HELP abide_proxy_requests_total ", "# TYPE abide_proxy_requests_total counter\n",
        "\nabide_proxy_requests_total 1\n", "abide_proxy_answers_total{status=\"200\"} 1\n",
        "abide_proxy_attempts_total 2\n", "abide_proxy_retries_total 1\n", "abide_proxy_waits_total 1\n",
        "abide_proxy_waited_seconds_total 1.5\n", "abide_proxy_outcomes_total{outcome=\"done\"} 1\n",
        "abide_proxy_deferrals_total 0\n", "# TYPE abide_proxy_held gauge\n", "abide_proxy_held 2\n",
        "abide_proxy_transfers 1\n", "# TYPE abide_proxy_connections gauge\n",
        "abide_proxy_connections{loop=\"0\"} 3\n", "abide_proxy_connections{loop=\"1\"} 2\n",
        "# TYPE abide_proxy_cooldown_seconds gauge\n",
        "abide_proxy_cooldown_seconds{upstream=\"https://api.x.com\"} 2\n"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  EXPECT_EQ(text.find("gone.com"), std::string::npos);  // its cooldown is over
  // Every sample line belongs to a family declared before it.
  std::size_t helps = 0;
  std::size_t types = 0;
  for (std::size_t pos = 0; (pos = text.find("# HELP ", pos)) != std::string::npos; ++pos) ++helps;
  for (std::size_t pos = 0; (pos = text.find("# TYPE ", pos)) != std::string::npos; ++pos) ++types;
  EXPECT_EQ(helps, 14u);
  EXPECT_EQ(types, 14u);
}

TEST(Stats, PrometheusEscapesLabelValues) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  stats.cooldown("https://a\"b\\c\nd", kNow + 1s);
  const std::string text = stats.prometheus(kNow);
  // The quote is escaped; backslash and line feed reached the label already
  // made printable ("\\" and "\x0a"), and their backslashes are escaped again.
  EXPECT_NE(text.find("abide_proxy_cooldown_seconds{upstream=\"https://a\\\"b\\\\\\\\c\\\\x0ad\"} 1\n"),
            std::string::npos)
      << text;
  for (std::size_t pos = 0; (pos = text.find('\n', pos)) != std::string::npos; ++pos) {
    const std::size_t next = text.find('\n', pos + 1);
    if (next == std::string::npos) break;
    const std::string line = text.substr(pos + 1, next - pos - 1);
    EXPECT_TRUE(line.rfind("# ", 0) == 0 || line.rfind("abide_proxy_", 0) == 0) << line;
  }
}

}  // namespace
}  // namespace abide::proxy
