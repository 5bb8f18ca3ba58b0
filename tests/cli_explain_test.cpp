// Tests for `abide explain`: the contract of docs/RULES.md (options, JSON fields,
// exit statuses), the words for people, and every shipped example head.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/run.h"

namespace abide {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

const std::string kNow = "2026-01-01T00:00:00Z";
const std::string kHeads = std::string(ABIDE_SOURCE_DIR) + "/examples/heads/";

// Runs explain --json --now kNow --seed 1 with the extra arguments; parses stdout.
json explain_json(std::vector<std::string> args, const std::string& input = {}) {
  std::vector<std::string> all{"explain", "--json", "--now", kNow, "--seed", "1"};
  all.insert(all.end(), args.begin(), args.end());
  const auto r = test::abide(all, input);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

json explain_head(const std::string& head, std::vector<std::string> args = {}) {
  return explain_json(std::move(args), head);
}

// ---- the JSON contract -----------------------------------------------------------

TEST(CliExplain, JsonHasEveryContractField) {
  const json j = explain_json({kHeads + "429-retry-after-seconds.http"});
  for (const char* field : {"decision", "delay_s", "not_before", "basis", "server_hint_s", "backoff_s", "jitter_s",
                            "clock_skew_s", "quota", "warnings", "reason"}) {
    EXPECT_TRUE(j.contains(field)) << field;
  }
  EXPECT_EQ(j["decision"], "retry");
  EXPECT_EQ(j["basis"], "retry-after");
  EXPECT_EQ(j["server_hint_s"], 30);
  EXPECT_GE(j["delay_s"].get<double>(), 30.0);
  EXPECT_GE(j["jitter_s"].get<double>(), 0.0);
  EXPECT_EQ(j["clock_skew_s"], 0);
  EXPECT_TRUE(j["quota"].is_array());
  EXPECT_TRUE(j["warnings"].is_array());
  EXPECT_TRUE(j["reason"].is_string());
}

TEST(CliExplain, JsonHasShouldRetryCostAndFullRefillWithDefaults) {
  const json j = explain_json({kHeads + "429-ratelimit-draft08-zero.http"});
  ASSERT_TRUE(j.contains("should_retry"));
  EXPECT_TRUE(j["should_retry"].is_null());
  ASSERT_FALSE(j["quota"].empty());
  for (const auto& q : j["quota"]) {
    ASSERT_TRUE(q.contains("cost")) << q.dump();
    EXPECT_TRUE(q["cost"].is_null()) << q.dump();
    ASSERT_TRUE(q.contains("reset_is_full_refill")) << q.dump();
    EXPECT_EQ(q["reset_is_full_refill"], false) << q.dump();
  }
  // No verdict from the server: no verdict line in the words either.
  const auto r = test::abide({"explain", "--now", kNow, kHeads + "429-ratelimit-draft08-zero.http"});
  EXPECT_THAT(r.out, Not(HasSubstr("retry verdict")));
}

TEST(CliExplain, ServersRetryVerdictInJsonAndWords) {
  const std::string head = "HTTP/1.1 429 Too Many Requests\r\nStripe-Should-Retry: false\r\n\r\n";
  const json j = explain_head(head, {"--host", "api.stripe.com"});
  EXPECT_EQ(j["should_retry"], false);
  const auto no = test::abide({"explain", "--now", kNow, "--host", "api.stripe.com"}, head);
  EXPECT_EQ(no.exit_code, 0) << no.err;
  EXPECT_THAT(no.out, HasSubstr("Server's retry verdict: do not retry (stripe-should-retry)"));
  const auto yes = test::abide({"explain", "--now", kNow, "--host", "api.openai.com"},
                               "HTTP/1.1 429 Too Many Requests\r\nx-should-retry: true\r\n\r\n");
  EXPECT_EQ(yes.exit_code, 0) << yes.err;
  EXPECT_THAT(yes.out, HasSubstr("Server's retry verdict: retry (x-should-retry)"));
  EXPECT_THAT(yes.out, HasSubstr("grants no permission"));
}

TEST(CliExplain, NoJitterGivesExactNumbers) {
  const json j = explain_json({"--jitter", "none", "--attempt", "2", kHeads + "429-retry-after-seconds.http"});
  EXPECT_EQ(j["delay_s"], 30);
  EXPECT_EQ(j["not_before"], "2026-01-01T00:00:30Z");
  EXPECT_EQ(j["backoff_s"], 2);
  EXPECT_EQ(j["jitter_s"], 0);
  EXPECT_EQ(j["reason"], "Retry in 30 s: the server's Retry-After asks for 30 s (local backoff 2 s).");
}

TEST(CliExplain, SameSeedSameJitter) {
  const std::vector<std::string> args{
      "explain", "--json", "--now", kNow, "--seed", "7", kHeads + "429-retry-after-seconds.http"};
  const json a = json::parse(test::abide(args).out);
  const json b = json::parse(test::abide(args).out);
  EXPECT_EQ(a["jitter_s"], b["jitter_s"]);
  EXPECT_EQ(a["not_before"], b["not_before"]);
  EXPECT_NE(a["jitter_s"], explain_json({kHeads + "429-retry-after-seconds.http"})["jitter_s"]);  // seed 1
}

TEST(CliExplain, ReadsStandardInput) {
  const json j = explain_head("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 12\r\n\r\n", {"--jitter", "none"});
  EXPECT_EQ(j["decision"], "retry");
  EXPECT_EQ(j["delay_s"], 12);
  EXPECT_EQ(j["status"], 503);
  EXPECT_EQ(j["clock_skew_s"], nullptr);  // no Date
}

// ---- rules through the CLI ---------------------------------------------------------------

TEST(CliExplain, WorkedExampleIsDeadlineExceededAtTheServersTime) {
  const json j = explain_json({"--deadline", "12", "--attempt", "4", kHeads + "429-retry-after-seconds.http"});
  EXPECT_EQ(j["decision"], "deadline_exceeded");
  EXPECT_EQ(j["not_before"], "2026-01-01T00:00:30Z");
  EXPECT_EQ(j["delay_s"], 30);
  EXPECT_EQ(j["backoff_s"], 4);  // equal jitter (the default): half of the nominal 8 s
}

TEST(CliExplain, HintAboveMaxWaitIsDeferred) {
  const json j = explain_json({"--max-wait", "300", kHeads + "503-retry-after-one-day.http"});
  EXPECT_EQ(j["decision"], "deferred");
  EXPECT_EQ(j["not_before"], "2026-01-02T00:00:00Z");
  EXPECT_EQ(j["delay_s"], 86400);
}

TEST(CliExplain, MalformedRetryAfterIsBackoffWithAWarning) {
  const json j = explain_json({"--jitter", "none", kHeads + "429-retry-after-malformed.http"});
  EXPECT_EQ(j["decision"], "retry");
  EXPECT_EQ(j["basis"], "backoff");
  EXPECT_EQ(j["delay_s"], 1);
  EXPECT_EQ(j["server_hint_s"], nullptr);
  EXPECT_THAT(j["warnings"].dump(), HasSubstr("soon"));
  EXPECT_THAT(j["warnings"].dump(), HasSubstr("malformed"));
}

TEST(CliExplain, MismatchedDayNameWaitsForTheServersTimeInBothModes) {
  // 1 Jan 2026 is a Thursday: the "Fri" is wrong, the hour is not.
  for (const char* value :
       {"Fri, 01 Jan 2026 01:00:00 GMT", "Friday, 01-Jan-26 01:00:00 GMT", "Fri Jan  1 01:00:00 2026"}) {
    const std::string head = std::string("HTTP/1.1 503 Service Unavailable\r\nRetry-After: ") + value + "\r\n\r\n";
    for (const bool strict : {false, true}) {
      const json j = strict ? explain_head(head, {"--jitter", "none", "--strict"})
                            : explain_head(head, {"--jitter", "none"});
      EXPECT_EQ(j["basis"], "retry-after") << value;
      EXPECT_EQ(j["server_hint_s"], 3600) << value;
      EXPECT_EQ(j["not_before"], "2026-01-01T01:00:00Z") << value;
      EXPECT_THAT(j["warnings"].dump(), HasSubstr("day name does not match")) << value;
    }
  }
}

TEST(CliExplain, PastDateIsZeroHintPlusBackoff) {
  const json j = explain_json({"--jitter", "none", "--attempt", "3", kHeads + "503-retry-after-past-date.http"});
  EXPECT_EQ(j["server_hint_s"], 0);
  EXPECT_EQ(j["delay_s"], 4);
  EXPECT_EQ(j["basis"], "backoff");
}

TEST(CliExplain, SkewedDateCountsFromTheServersClock) {
  const json j = explain_json({"--jitter", "none", kHeads + "503-retry-after-date-skew.http"});
  EXPECT_EQ(j["clock_skew_s"], -20);
  EXPECT_EQ(j["server_hint_s"], 30);
  EXPECT_EQ(j["not_before"], "2026-01-01T00:00:30Z");
}

TEST(CliExplain, RateLimitAtZeroBoundsTheWait) {
  const json j = explain_json({"--jitter", "none", kHeads + "429-ratelimit-draft08-zero.http"});
  EXPECT_EQ(j["basis"], "ratelimit");
  EXPECT_EQ(j["delay_s"], 42);
  ASSERT_EQ(j["quota"].size(), 2u);
  EXPECT_EQ(j["quota"][0]["policy"], "burst");
  EXPECT_EQ(j["quota"][0]["remaining"], 0);
}

TEST(CliExplain, QuotaOutlastingRetryAfterWins) {
  const json j = explain_json({"--jitter", "none", kHeads + "429-ratelimit-draft07-outlasts-retry-after.http"});
  EXPECT_EQ(j["basis"], "ratelimit");
  EXPECT_EQ(j["delay_s"], 50);
  EXPECT_EQ(j["retry_after"]["seconds"], 5);
}

TEST(CliExplain, GitHub403ReadsThroughItsProfileOnlyWithTheHost) {
  const json with = explain_json(
      {"--jitter", "none", "--host", "api.github.com", kHeads + "403-github-remaining-0.http"});
  EXPECT_EQ(with["decision"], "retry");
  EXPECT_EQ(with["basis"], "vendor");
  EXPECT_EQ(with["delay_s"], 1800);
  EXPECT_EQ(with["quota"][0]["source"], "github");
  const json by_name = explain_json(
      {"--jitter", "none", "--profile", "github", kHeads + "403-github-remaining-0.http"});
  EXPECT_EQ(by_name["delay_s"], 1800);
  const json without = explain_json({kHeads + "403-github-remaining-0.http"});
  EXPECT_EQ(without["decision"], "not_retryable");
  EXPECT_TRUE(without["quota"].empty());
  EXPECT_THAT(without["warnings"].dump(), HasSubstr("no vendor profile"));
  const json none = explain_json(
      {"--host", "api.github.com", "--profile", "none", kHeads + "403-github-remaining-0.http"});
  EXPECT_EQ(none["decision"], "not_retryable");
}

TEST(CliExplain, PostWithoutIdempotencyKeyIsNotRetryableWithItsTime) {
  const json j = explain_json({"--method", "POST", kHeads + "429-retry-after-seconds.http"});
  EXPECT_EQ(j["decision"], "not_retryable");
  EXPECT_EQ(j["not_before"], "2026-01-01T00:00:30Z");
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("idempotency key"));
  const json keyed = explain_json({"--method", "POST", "--idempotency-key", kHeads + "429-retry-after-seconds.http"});
  EXPECT_EQ(keyed["decision"], "retry");
}

TEST(CliExplain, SuccessIsDoneWithItsQuota) {
  const json j = explain_json({kHeads + "200-quota.http"});
  EXPECT_EQ(j["decision"], "done");
  EXPECT_EQ(j["delay_s"], 0);
  EXPECT_EQ(j["not_before"], nullptr);
  EXPECT_EQ(j["basis"], nullptr);
  EXPECT_EQ(j["quota"][0]["remaining"], 57);
  const json exhausted = explain_json({kHeads + "200-quota-exhausted.http"});
  EXPECT_EQ(exhausted["decision"], "done");
  EXPECT_EQ(exhausted["not_before"], "2026-01-01T00:00:21Z");
}

TEST(CliExplain, NotFoundIsNotRetryable) {
  const json j = explain_json({kHeads + "404-not-found.http"});
  EXPECT_EQ(j["decision"], "not_retryable");
  EXPECT_EQ(j["not_before"], nullptr);
}

TEST(CliExplain, LastAttemptIsExhaustedWithItsTime) {
  const json j = explain_json({"--attempt", "3", "--max-attempts", "3", kHeads + "429-retry-after-seconds.http"});
  EXPECT_EQ(j["decision"], "exhausted");
  EXPECT_EQ(j["not_before"], "2026-01-01T00:00:30Z");
}

TEST(CliExplain, BackoffOptionsShapeTheLocalBackoff) {
  const json j = explain_json({"--jitter", "none", "--backoff-base", "0.5", "--backoff-cap", "3", "--attempt", "4",
                               "--max-attempts", "10", kHeads + "429-retry-after-malformed.http"});
  EXPECT_EQ(j["backoff_s"], 3);  // 0.5 * 8 = 4, capped at 3
  EXPECT_EQ(j["delay_s"], 3);
  const json eq = explain_json({"--jitter", "equal", "--attempt", "3", kHeads + "429-retry-after-malformed.http"});
  EXPECT_EQ(eq["backoff_s"], 2);
  EXPECT_GE(eq["delay_s"].get<double>(), 2.0);
  EXPECT_LE(eq["delay_s"].get<double>(), 4.0);
}

// ---- every shipped example explains, in words and in JSON ------------------------------------

TEST(CliExplain, EveryExampleHeadExplains) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kHeads)) {
    if (entry.path().extension() != ".http") continue;
    const std::string name = entry.path().filename().string();
    const bool invalid = name.rfind("invalid-", 0) == 0;
    const auto text = test::abide({"explain", "--now", kNow, "--seed", "1", entry.path().string()});
    const auto js = test::abide({"explain", "--json", "--now", kNow, "--seed", "1", entry.path().string()});
    if (invalid) {
      EXPECT_EQ(text.exit_code, 1) << name;
      EXPECT_EQ(js.exit_code, 1) << name;
      continue;
    }
    ++n;
    EXPECT_EQ(text.exit_code, 0) << name << text.err;
    EXPECT_EQ(js.exit_code, 0) << name << js.err;
    EXPECT_FALSE(text.out.empty()) << name;
    const json j = json::parse(js.out);
    // The text starts with the decision, in capitals.
    std::string upper = j["decision"].get<std::string>();
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(text.out.rfind(upper, 0), 0u) << name << "\n" << text.out;
  }
  EXPECT_GE(n, 10);
}

// ---- words for people --------------------------------------------------------------------------

TEST(CliExplain, TextSaysDecisionWinnerSignalsIgnoredAndSkew) {
  const auto r = test::abide({"explain", "--now", kNow, "--seed", "1", kHeads + "429-retry-after-and-ratelimit.http"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("RETRY in 30.", 0), 0u) << r.out;
  EXPECT_THAT(r.out, HasSubstr("Which signal won: Retry-After (30 s)"));
  EXPECT_THAT(r.out, HasSubstr("Quota \"daily\": 870 of 1000 requests left"));
  EXPECT_THAT(r.out, HasSubstr("overridden by Retry-After"));
  EXPECT_THAT(r.out, HasSubstr("Clock skew: none"));
}

TEST(CliExplain, TextNamesIgnoredVendorHeadersWithoutAProfile) {
  const auto r = test::abide({"explain", "--now", kNow, "--seed", "1", kHeads + "429-vendor-headers-no-profile.http"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("X-RateLimit-Remaining: 0 -> ignored: no profile for this host"));
  EXPECT_THAT(r.out, HasSubstr("Which signal won: the local backoff"));
}

TEST(CliExplain, TextReportsMalformedAndSkew) {
  auto r = test::abide({"explain", "--now", kNow, kHeads + "429-retry-after-malformed.http"});
  EXPECT_THAT(r.out, HasSubstr("Retry-After: malformed, ignored"));
  EXPECT_THAT(r.out, HasSubstr("\"soon\""));
  r = test::abide({"explain", "--now", kNow, kHeads + "503-retry-after-date-skew.http"});
  EXPECT_THAT(r.out, HasSubstr("20 s behind the local clock"));
}

TEST(CliExplain, HostileHeadIsShownSafely) {
  const std::string head = "HTTP/1.1 429 x\r\nRetry-After: \x01\x02" + std::string(5000, 'x') + "\r\n\r\n";
  const auto r = test::abide({"explain", "--now", kNow}, head);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("\x01")));
  const auto j = test::abide({"explain", "--json", "--now", kNow}, "HTTP/1.1 429 x\r\nRetry-After: \xff\xfe\r\n\r\n");
  EXPECT_EQ(j.exit_code, 0);
  EXPECT_TRUE(json::accept(j.out)) << j.out;
}

// ---- exit statuses ---------------------------------------------------------------------------------

TEST(CliExplain, MalformedInputIsRejectedWithWhere) {
  const auto r = test::abide({"explain", "--now", kNow, kHeads + "invalid-not-a-head.http"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("invalid-not-a-head.http:1:"));
  EXPECT_EQ(test::abide({"explain"}, "").exit_code, 1);
  EXPECT_EQ(test::abide({"explain", "/nonexistent/head.http"}).exit_code, 1);
}

TEST(CliExplain, DecisionsThatStopStillExitZero) {
  EXPECT_EQ(test::abide({"explain", "--method", "POST", kHeads + "429-retry-after-seconds.http"}).exit_code, 0);
  EXPECT_EQ(test::abide({"explain", "--max-wait", "1", kHeads + "503-retry-after-one-day.http"}).exit_code, 0);
  EXPECT_EQ(test::abide({"explain", kHeads + "404-not-found.http"}).exit_code, 0);
}

TEST(CliExplain, UsageErrorsExitTwo) {
  const std::string head = kHeads + "429-retry-after-seconds.http";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--attempt", "0"},
           {"--attempt", "x"},
           {"--max-attempts", "-1"},
           {"--jitter", "sometimes"},
           {"--deadline", "soon"},
           {"--deadline", "nan"},
           {"--backoff-base", "-1"},
           {"--backoff-cap", "inf"},
           {"--max-wait", "-5"},
           {"--now", "yesterday"},
           {"--profile", "no-such-vendor"},
           {"--no-such-option"},
       }) {
    std::vector<std::string> all{"explain"};
    all.insert(all.end(), args.begin(), args.end());
    all.push_back(head);
    EXPECT_EQ(test::abide(all).exit_code, 2) << args[0] << " " << (args.size() > 1 ? args[1] : "");
  }
}

// --profile-file takes one value: the FILE after it is the head, not a second profile.
TEST(CliExplain, ProfileFileTakesOneValueAndTheHeadFileFollows) {
  const auto dir = std::filesystem::temp_directory_path() / "abide_cli_explain_profile_file";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "acme.json") << R"({"name": "acme", "hosts": ["api.acme.test"],
    "quotas": [{"limit": "x-acme-limit", "remaining": "x-acme-left", "reset": {"header": "x-acme-reset", "format": "go_duration"}}]})";
  std::ofstream(dir / "beta.json") << R"({"name": "beta", "quotas": [{"remaining": "x-beta-left"}]})";
  std::ofstream(dir / "head.http") << "HTTP/1.1 429 Too Many Requests\r\nX-Acme-Limit: 10\r\nX-Acme-Left: 0\r\n"
                                      "X-Acme-Reset: 1m30s\r\n\r\n";
  const std::string acme = (dir / "acme.json").string();
  const std::string head = (dir / "head.http").string();
  // No standard input: the head can only come from head.http.
  const json j = explain_json({"--jitter", "none", "--host", "api.acme.test", "--profile-file", acme, head});
  ASSERT_EQ(j["quota"].size(), 1u) << j.dump();
  EXPECT_EQ(j["quota"][0]["source"], "acme");
  EXPECT_EQ(j["basis"], "vendor");
  EXPECT_EQ(j["delay_s"], 90);
  // The flag repeats for more files.
  const json two = explain_json({"--jitter", "none", "--host", "api.acme.test", "--profile-file",
                                 (dir / "beta.json").string(), "--profile-file", acme, head});
  EXPECT_EQ(two["quota"][0]["source"], "acme");
  const auto r = test::abide(
      {"explain", "--profile", "beta", "--profile-file", (dir / "beta.json").string(), "--profile-file", acme, head});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::filesystem::remove_all(dir);
}

// Robust reading is the default, as in parse ratelimit and fetch; --strict opts out.
TEST(CliExplain, RobustByDefaultStrictOnRequest) {
  const std::string head = "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1.5\r\n\r\n";
  const json robust = explain_head(head, {"--jitter", "none"});
  EXPECT_EQ(robust["basis"], "retry-after");
  EXPECT_EQ(robust["server_hint_s"], 2);
  EXPECT_THAT(robust["warnings"].dump(), HasSubstr("read rounded up"));
  const json strict = explain_head(head, {"--jitter", "none", "--strict"});
  EXPECT_EQ(strict["basis"], "backoff");
  EXPECT_TRUE(strict["retry_after"].is_null());
  EXPECT_THAT(strict["warnings"].dump(), HasSubstr("rejected"));
}

TEST(CliExplain, NegativeDeadlineMeansAlreadyPassed) {
  const json j = explain_json({"--deadline", "-1", kHeads + "429-retry-after-seconds.http"});
  EXPECT_EQ(j["decision"], "deadline_exceeded");
}

TEST(CliExplain, HugeNumbersSaturate) {
  const json j = explain_json({"--backoff-base", "1e300", "--backoff-cap", "1e300", "--jitter", "none", "--deadline",
                               "1e300", kHeads + "429-retry-after-malformed.http"});
  EXPECT_EQ(j["decision"], "retry");
  EXPECT_GT(j["delay_s"].get<double>(), 9e9);
}

// ---- --history: what a run of answers taught ------------------------------------

// A head received `second` seconds after 2026-01-01T00:00:00Z.
std::string dated_head(int status, int second, const std::string& extra = {}) {
  char date[64];
  std::snprintf(date, sizeof date, "Thu, 01 Jan 2026 00:00:%02d GMT", second);
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nDate: " + date + "\r\n" + extra + "\r\n";
}

// Windows of 20 per 2 s: twenty answers accepted at the window's start, then a
// 429 whose Retry-After ends the window.
std::string quota_history(int windows) {
  std::string text;
  for (int w = 0; w < windows; ++w) {
    for (int i = 0; i < 20; ++i) text += dated_head(200, 2 * w);
    text += dated_head(429, 2 * w + 1, "Retry-After: 1\r\n");
  }
  return text;
}

TEST(CliExplain, HistorySaysWhatTheAnswersTaught) {
  const auto words = test::abide({"explain", "--history", "--seed", "1"}, quota_history(3));
  ASSERT_EQ(words.exit_code, 0) << words.err;
  EXPECT_THAT(words.out, HasSubstr("Learned from 63 answers: about 20 per 2 s, from 3 windows\n"));
  // The last answer is the one explained, received at its Date.
  EXPECT_THAT(words.out, HasSubstr("Retry-After"));

  const auto r = test::abide({"explain", "--history", "--json", "--jitter", "none", "--backoff-base", "0"},
                             quota_history(3));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["decision"], "retry");
  EXPECT_EQ(j["server_hint_s"], 1);
  EXPECT_EQ(j["not_before"], "2026-01-01T00:00:06Z");
  const json& l = j["learned"];
  EXPECT_EQ(l["count"], 20);
  EXPECT_EQ(l["window_s"], 2.0);
  EXPECT_EQ(l["window_measured"], true);
  EXPECT_EQ(l["windows"], 3);
  EXPECT_EQ(l["from"], "retry-after");
  EXPECT_EQ(l["answers"], 63);
  EXPECT_EQ(l["text"], "about 20 per 2 s, from 3 windows");
}

TEST(CliExplain, HistoryWithoutALimitOrWithAnAnnouncedQuotaLearnsNothing) {
  std::string plain;
  for (int i = 0; i < 5; ++i) plain += dated_head(200, i);
  const json quiet = explain_head(plain, {"--history"});
  EXPECT_TRUE(quiet["learned"].is_null());
  EXPECT_EQ(quiet["decision"], "done");

  // The server announces its quota: its word, not a learned one.
  std::string announced = quota_history(1);
  announced += dated_head(429, 3, "Retry-After: 1\r\nRateLimit-Policy: \"d\";q=20;w=2\r\nRateLimit: \"d\";r=0;t=1\r\n");
  const auto words = test::abide({"explain", "--history"}, announced);
  ASSERT_EQ(words.exit_code, 0) << words.err;
  EXPECT_THAT(words.out, HasSubstr("Learned from 22 answers: nothing"));
}

TEST(CliExplain, HistoryNeedsEveryAnswersDate) {
  const std::string text = dated_head(200, 0) + "HTTP/1.1 200 OK\r\nServer: x\r\n\r\n" + dated_head(429, 1);
  const auto r = test::abide({"explain", "--history"}, text);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("<stdin>:4: --history needs every answer's Date"));
  EXPECT_TRUE(r.out.empty());

  const auto back = test::abide({"explain", "--history"}, dated_head(200, 5) + dated_head(200, 1));
  EXPECT_EQ(back.exit_code, 1);
  EXPECT_THAT(back.err, HasSubstr("<stdin>:4: a Date before the first answer's"));
}

// Without --history only the last head counts, as before.
TEST(CliExplain, WithoutHistorySeveralHeadsExplainTheLast) {
  const json j = explain_head(quota_history(2));
  EXPECT_FALSE(j.contains("learned"));
  EXPECT_EQ(j["status"], 429);
}

// ---- LLM token quotas and body waits --------------------------------------------------

const std::string kTokensHead =
    "HTTP/1.1 200 OK\r\nx-ratelimit-limit-tokens: 40000\r\nx-ratelimit-remaining-tokens: 1850\r\n"
    "x-ratelimit-reset-tokens: 12s\r\nx-ratelimit-limit-requests: 500\r\nx-ratelimit-remaining-requests: 499\r\n"
    "x-ratelimit-reset-requests: 120ms\r\n\r\n";

// --cost: the next request's needs against the quotas the answer states:
// which quota holds it, with its counts; one that fits may go now.
TEST(CliExplain, CostSaysWhichQuotaHoldsTheNextRequest) {
  const json held = explain_head(kTokensHead, {"--profile", "openai", "--cost", "tokens=4100"});
  ASSERT_TRUE(held.contains("next")) << held.dump();
  EXPECT_EQ(held["next"]["now"], false);
  EXPECT_GT(held["next"]["wait_s"].get<double>(), 0.0);
  EXPECT_EQ(held["next"]["held_by"]["unit"], "tokens");
  EXPECT_EQ(held["next"]["held_by"]["remaining"], 1850);
  EXPECT_EQ(held["next"]["held_by"]["limit"], 40000);
  EXPECT_EQ(held["next"]["held_by"]["needed"], 4100);
  EXPECT_EQ(held["next"]["held_by"]["text"], "tokens: 1,850 of 40,000 left, 4,100 needed");
  const json fits = explain_head(kTokensHead, {"--profile", "openai", "--cost", "tokens=100"});
  EXPECT_EQ(fits["next"]["now"], true);
  EXPECT_TRUE(fits["next"]["held_by"].is_null());
  const auto words = test::abide({"explain", "--now", kNow, "--profile", "openai", "--cost", "tokens=4100"}, kTokensHead);
  EXPECT_EQ(words.exit_code, 0) << words.err;
  EXPECT_THAT(words.out, HasSubstr("Next request (tokens=4100): held "));
  EXPECT_THAT(words.out, HasSubstr("tokens: 1,850 of 40,000 left, 4,100 needed"));
  // Without --cost nothing is said of a next request.
  EXPECT_FALSE(explain_head(kTokensHead, {"--profile", "openai"}).contains("next"));
}

TEST(CliExplain, ABadCostIsAUsageError) {
  for (const std::string bad : {"tokens=-1", "tokens", "=5", "tokens=1e3", "Tokens=5"}) {
    const auto r = test::abide({"explain", "--cost", bad}, kTokensHead);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_THAT(r.err, HasSubstr("--cost")) << bad;
  }
}

// A Gemini 429 states its wait only in the body (google.rpc.RetryInfo):
// explain reads the body after the head and names it as the wait's source.
TEST(CliExplain, AWaitStatedInTheBodyIsNamedAsItsSource) {
  const std::string answer =
      "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n\r\n"
      R"({"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[)"
      R"({"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"52s"}]}})";
  const json j = explain_head(answer, {"--profile", "gemini"});
  EXPECT_EQ(j["decision"], "retry");
  EXPECT_EQ(j["server_hint_s"], 52);
  EXPECT_GE(j["delay_s"].get<double>(), 52.0);
  EXPECT_EQ(j["retry_after"]["source"], "body: error.details[].retryDelay \"52s\"");
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("the answer's body"));
  // The next request is held for the same 52 s, by the server's word.
  const json next = explain_head(answer, {"--profile", "gemini", "--cost", "tokens=10"});
  EXPECT_GE(next["next"]["wait_s"].get<double>(), 52.0);
  // Without a profile that reads bodies, the body is not consulted.
  const json none = explain_head(answer, {"--profile", "none"});
  EXPECT_NE(none["server_hint_s"], 52);
}

}  // namespace
}  // namespace abide
