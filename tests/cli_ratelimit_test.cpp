// `abide parse ratelimit`: the JSON contract of docs/RULES.md, options and exit statuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run.h"

namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

#ifdef ABIDE_CLI_PATH

using abide::test::abide;

const std::string kNow = "2026-01-01T00:00:00Z";

json parse_ok(const abide::test::RunResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

TEST(CliParseRatelimit, CurrentDraftWithRetryAfterAndSkew) {
  const auto r = abide(
      {"parse", "ratelimit", "--now", kNow},
      "HTTP/2 429 \r\n"
      "date: Thu, 01 Jan 2026 00:00:02 GMT\r\n"
      "retry-after: 30\r\n"
      "ratelimit-policy: \"burst\";q=100;w=60, \"daily\";q=1000;qu=\"content-bytes\";w=86400;pk=:QXBwLTk5OQ==:\r\n"
      "ratelimit: \"burst\";r=0;t=30, \"daily\";r=900;t=3600\r\n\r\n");
  const json j = parse_ok(r);
  // The top-level keys, in docs/RULES.md's order (grown by should_retry).
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  std::sort(keys.begin(), keys.end());  // (json sorts them; KeyOrderFollowsDesign checks the order)
  EXPECT_EQ(keys, (std::vector<std::string>{"clock_skew_s", "quota", "retry_after", "should_retry", "warnings"}));
  EXPECT_TRUE(j["should_retry"].is_null());
  ASSERT_EQ(j["quota"].size(), 2u);
  EXPECT_EQ(j["quota"][0], json::parse(R"({"policy":"burst","limit":100,"remaining":0,"window_s":60,"reset_s":30,
      "unit":"requests","partition_key":null,"source":"draft-08","confidence":"high",
      "cost":null,"reset_is_full_refill":false})"));
  EXPECT_EQ(j["quota"][1]["unit"], "content-bytes");
  EXPECT_EQ(j["quota"][1]["partition_key"], "App-999");
  EXPECT_EQ(j["retry_after"], json::parse(R"({"kind":"delay","seconds":30,"unix":null,"source":"retry-after"})"));
  EXPECT_EQ(j["clock_skew_s"], 2);
  EXPECT_EQ(j["warnings"], json::array());
}

TEST(CliParseRatelimit, KeyOrderFollowsDesign) {
  const auto r = abide({"parse", "ratelimit", "--now", kNow},
                       "HTTP/1.1 200 OK\r\nRateLimit: limit=10, remaining=5, reset=3\r\n\r\n");
  ASSERT_EQ(r.exit_code, 0);
  const auto pos = [&](const char* k) { return r.out.find(std::string("\"") + k + "\""); };
  EXPECT_LT(pos("quota"), pos("retry_after"));
  EXPECT_LT(pos("retry_after"), pos("clock_skew_s"));
  EXPECT_LT(pos("clock_skew_s"), pos("warnings"));
  EXPECT_LT(pos("policy"), pos("limit"));
  EXPECT_LT(pos("limit"), pos("remaining"));
  EXPECT_LT(pos("window_s"), pos("reset_s"));
  EXPECT_LT(pos("partition_key"), pos("source"));
  EXPECT_LT(pos("source"), pos("confidence"));
  const json j = json::parse(r.out);
  EXPECT_EQ(j["quota"][0]["source"], "draft-07");
  EXPECT_TRUE(j["quota"][0]["policy"].is_null());
  EXPECT_TRUE(j["quota"][0]["window_s"].is_null());
  EXPECT_TRUE(j["retry_after"].is_null());
  EXPECT_TRUE(j["clock_skew_s"].is_null());
}

TEST(CliParseRatelimit, CostFullRefillAndShouldRetryFieldsAlwaysAppear) {
  // Defaults where the server says nothing of them: null, false, null.
  const json j = parse_ok(abide({"parse", "ratelimit", "--now", kNow},
                                "HTTP/1.1 429 Too Many Requests\r\nRateLimit: \"burst\";r=0;t=30\r\n\r\n"));
  ASSERT_EQ(j["quota"].size(), 1u);
  ASSERT_TRUE(j["quota"][0].contains("cost"));
  EXPECT_TRUE(j["quota"][0]["cost"].is_null());
  ASSERT_TRUE(j["quota"][0].contains("reset_is_full_refill"));
  EXPECT_EQ(j["quota"][0]["reset_is_full_refill"], false);
  ASSERT_TRUE(j.contains("should_retry"));
  EXPECT_TRUE(j["should_retry"].is_null());
  const auto pos = [&](const std::string& out, const char* k) { return out.find(std::string("\"") + k + "\""); };
  const auto r = abide({"parse", "ratelimit", "--now", kNow},
                       "HTTP/1.1 200 OK\r\nRateLimit: limit=10, remaining=5, reset=3\r\n\r\n");
  EXPECT_LT(pos(r.out, "confidence"), pos(r.out, "cost"));
  EXPECT_LT(pos(r.out, "cost"), pos(r.out, "reset_is_full_refill"));
  EXPECT_LT(pos(r.out, "clock_skew_s"), pos(r.out, "should_retry"));
  EXPECT_LT(pos(r.out, "should_retry"), pos(r.out, "warnings"));
}

TEST(CliParseRatelimit, CostFullRefillAndShouldRetryFromTheProfiles) {
  // Linear's X-Complexity is the cost of the query that got the answer.
  const json linear = parse_ok(abide({"parse", "ratelimit", "--now", kNow, "--host", "api.linear.app"},
                                     "HTTP/1.1 200 OK\r\nx-ratelimit-complexity-limit: 1000\r\n"
                                     "x-ratelimit-complexity-remaining: 900\r\n"
                                     "x-ratelimit-complexity-reset: 1767225660000\r\nx-complexity: 42\r\n\r\n"));
  ASSERT_EQ(linear["quota"].size(), 1u) << linear.dump();
  EXPECT_EQ(linear["quota"][0]["cost"], 42);
  EXPECT_EQ(linear["quota"][0]["reset_is_full_refill"], false);
  // OpenAI's resets count to a full refill.
  const json openai = parse_ok(abide({"parse", "ratelimit", "--now", kNow, "--host", "api.openai.com"},
                                     "HTTP/1.1 429 Too Many Requests\r\nx-ratelimit-limit-tokens: 1000\r\n"
                                     "x-ratelimit-remaining-tokens: 0\r\nx-ratelimit-reset-tokens: 6m0s\r\n"
                                     "x-should-retry: true\r\n\r\n"));
  ASSERT_EQ(openai["quota"].size(), 1u) << openai.dump();
  EXPECT_EQ(openai["quota"][0]["reset_is_full_refill"], true);
  EXPECT_TRUE(openai["quota"][0]["cost"].is_null());
  EXPECT_EQ(openai["should_retry"], true);
  // Stripe's verdict.
  const json stripe = parse_ok(abide({"parse", "ratelimit", "--now", kNow, "--host", "api.stripe.com"},
                                     "HTTP/1.1 429 Too Many Requests\r\nStripe-Should-Retry: false\r\n\r\n"));
  EXPECT_EQ(stripe["should_retry"], false);
}

TEST(CliParseRatelimit, RetryAfterDateAndFractions) {
  const json j = parse_ok(
      abide({"parse", "ratelimit", "--now", "2026-01-01T00:00:00.5Z"},
            "HTTP/1.1 503 Service Unavailable\r\nRetry-After: Thu, 01 Jan 2026 00:02:00 GMT\r\n\r\n"));
  EXPECT_EQ(j["retry_after"]["kind"], "date");
  EXPECT_EQ(j["retry_after"]["seconds"], 119.5);
  EXPECT_EQ(j["retry_after"]["unix"], 1767225720);
  EXPECT_EQ(j["retry_after"]["source"], "retry-after");
}

TEST(CliParseRatelimit, HostSelectsTheVendorProfile) {
  const std::string head =
      "HTTP/2 403 \r\nx-ratelimit-limit: 60\r\nx-ratelimit-remaining: 0\r\nx-ratelimit-used: 60\r\n"
      "x-ratelimit-reset: 1767226000\r\nx-ratelimit-resource: core\r\n\r\n";
  const json gh = parse_ok(
      abide({"parse", "ratelimit", "--now", kNow, "--host", "https://api.github.com/repos/x"}, head));
  ASSERT_EQ(gh["quota"].size(), 1u);
  EXPECT_EQ(gh["quota"][0]["source"], "github");
  EXPECT_EQ(gh["quota"][0]["policy"], "core");
  EXPECT_EQ(gh["quota"][0]["reset_s"], 400);

  const json none = parse_ok(abide({"parse", "ratelimit", "--now", kNow}, head));
  EXPECT_TRUE(none["quota"].empty());
  ASSERT_EQ(none["warnings"].size(), 1u);
  EXPECT_THAT(none["warnings"][0].get<std::string>(), HasSubstr("not interpreted"));

  const json named = parse_ok(abide({"parse", "ratelimit", "--now", kNow, "--profile", "github"}, head));
  EXPECT_EQ(named["quota"].size(), 1u);
  const json off = parse_ok(
      abide({"parse", "ratelimit", "--now", kNow, "--host", "api.github.com", "--profile", "none"}, head));
  EXPECT_TRUE(off["quota"].empty());

  const json guessed = parse_ok(abide({"parse", "ratelimit", "--now", kNow, "--heuristic"}, head));
  ASSERT_EQ(guessed["quota"].size(), 1u);
  EXPECT_EQ(guessed["quota"][0]["confidence"], "low");
  EXPECT_EQ(guessed["quota"][0]["source"], "heuristic");
}

TEST(CliParseRatelimit, ReadsAFile) {
  const auto path = std::filesystem::temp_directory_path() / "abide_cli_ratelimit_head.txt";
  std::ofstream(path) << "HTTP/1.1 429 Too Many Requests\nX-Shopify-Shop-Api-Call-Limit: 40/40\nRetry-After: 2.0\n";
  const json j = parse_ok(abide({"parse", "ratelimit", "--now", kNow, "--host", "acme.myshopify.com", path.string()}));
  std::filesystem::remove(path);
  EXPECT_EQ(j["quota"][0]["remaining"], 0);
  EXPECT_EQ(j["quota"][0]["limit"], 40);
  EXPECT_EQ(j["retry_after"]["seconds"], 2);
  ASSERT_EQ(j["warnings"].size(), 1u);
  EXPECT_THAT(j["warnings"][0].get<std::string>(), HasSubstr("rounded up"));
}

TEST(CliParseRatelimit, WarningsIncludeTheHeadReader) {
  const json j = parse_ok(
      abide({"parse", "ratelimit", "--now", kNow},
            "HTTP/1.1 200 OK\r\nno colon here\r\nRateLimit: \"x\";r=1.5\r\nRetry-After: soon\r\n\r\n"));
  ASSERT_EQ(j["warnings"].size(), 3u);
  EXPECT_THAT(j["warnings"][0].get<std::string>(), HasSubstr("line 2"));
  EXPECT_TRUE(j["retry_after"].is_null());
}

TEST(CliParseRatelimit, BinaryPartitionKeyAndInvalidUtf8StayValidJson) {
  const json j = parse_ok(abide({"parse", "ratelimit", "--now", kNow},
                                "HTTP/1.1 200 OK\r\nRateLimit: \"x\";r=1;t=1;pk=:/wA=:\r\nX-RateLimit-\xff: 1\r\n"
                                "Retry-After: caf\xc3\r\n\r\n"));
  EXPECT_EQ(j["quota"][0]["partition_key"], ":/wA=:");
  // Server bytes are shown through abide::printable(): the invalid byte is
  // escaped (it used to be replaced by U+FFFD).
  bool escaped = false;
  for (const auto& w : j["warnings"]) escaped = escaped || w.get<std::string>().find("caf\\xc3") != std::string::npos;
  EXPECT_TRUE(escaped) << j.dump();
}

TEST(CliParseRatelimit, UserProfileFile) {
  const auto dir = std::filesystem::temp_directory_path() / "abide_cli_ratelimit_profiles";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "acme.json") << R"({"name": "acme", "hosts": ["api.acme.test"],
    "quotas": [{"limit": "x-acme-limit", "remaining": "x-acme-left", "reset": {"header": "x-acme-reset", "format": "go_duration"}}]})";
  std::ofstream(dir / "bad.json") << R"({"name": "acme", "quotas": [{"limit": 5}]})";
  const std::string head = "HTTP/1.1 200 OK\r\nX-Acme-Limit: 10\r\nX-Acme-Left: 3\r\nX-Acme-Reset: 1m30s\r\n\r\n";
  const json j = parse_ok(abide({"parse", "ratelimit", "--now", kNow, "--profile-file", (dir / "acme.json").string(),
                                 "--host", "api.acme.test"},
                                head));
  ASSERT_EQ(j["quota"].size(), 1u);
  EXPECT_EQ(j["quota"][0]["reset_s"], 90);
  EXPECT_EQ(j["quota"][0]["source"], "acme");

  const auto bad = abide({"parse", "ratelimit", "--now", kNow, "--profile-file", (dir / "bad.json").string()}, head);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("bad.json: quotas[0].limit: expected a header name"));
  std::filesystem::remove_all(dir);
}

// --profile-file takes one value: the FILE after it is the head, not a second profile.
TEST(CliParseRatelimit, ProfileFileTakesOneValueAndTheHeadFileFollows) {
  const auto dir = std::filesystem::temp_directory_path() / "abide_cli_ratelimit_profile_file";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "acme.json") << R"({"name": "acme", "hosts": ["api.acme.test"],
    "quotas": [{"limit": "x-acme-limit", "remaining": "x-acme-left", "reset": {"header": "x-acme-reset", "format": "go_duration"}}]})";
  std::ofstream(dir / "beta.json") << R"({"name": "beta", "quotas": [{"remaining": "x-beta-left"}]})";
  std::ofstream(dir / "head.http")
      << "HTTP/1.1 200 OK\r\nX-Acme-Limit: 10\r\nX-Acme-Left: 3\r\nX-Acme-Reset: 1m30s\r\n\r\n";
  const std::string acme = (dir / "acme.json").string();
  const std::string head = (dir / "head.http").string();
  // No standard input: the head can only come from head.http.
  const json j = parse_ok(
      abide({"parse", "ratelimit", "--now", kNow, "--host", "api.acme.test", "--profile-file", acme, head}));
  ASSERT_EQ(j["quota"].size(), 1u) << j.dump();
  EXPECT_EQ(j["quota"][0]["source"], "acme");
  EXPECT_EQ(j["quota"][0]["remaining"], 3);
  // The flag repeats for more files.
  const json two = parse_ok(abide({"parse", "ratelimit", "--now", kNow, "--host", "api.acme.test", "--profile-file",
                                   (dir / "beta.json").string(), "--profile-file", acme, head}));
  EXPECT_EQ(two["quota"][0]["source"], "acme");
  std::filesystem::remove_all(dir);
}

// Robust reading is the default, as in explain and fetch; --strict opts out.
TEST(CliParseRatelimit, RobustByDefaultStrictOnRequest) {
  const std::string head = "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1.5\r\n\r\n";
  const json robust = parse_ok(abide({"parse", "ratelimit", "--now", kNow}, head));
  EXPECT_EQ(robust["retry_after"]["seconds"], 2);
  EXPECT_THAT(robust["warnings"].dump(), HasSubstr("read rounded up"));
  const json strict = parse_ok(abide({"parse", "ratelimit", "--now", kNow, "--strict"}, head));
  EXPECT_TRUE(strict["retry_after"].is_null());
  EXPECT_THAT(strict["warnings"].dump(), HasSubstr("rejected"));
}

TEST(CliParseRatelimit, ExitStatuses) {
  const auto malformed = abide({"parse", "ratelimit", "--now", kNow}, "Retry-After: 5\r\n\r\n");
  EXPECT_EQ(malformed.exit_code, 1);
  EXPECT_THAT(malformed.err, HasSubstr("<stdin>:1: malformed status line"));

  const auto empty = abide({"parse", "ratelimit", "--now", kNow}, "");
  EXPECT_EQ(empty.exit_code, 1);

  const auto missing = abide({"parse", "ratelimit", "--now", kNow, "/nonexistent/head.txt"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("cannot read"));

  const auto unknown = abide({"parse", "ratelimit", "--now", kNow, "--profile", "nope"}, "HTTP/1.1 200 OK\r\n\r\n");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("no profile named \"nope\""));
  EXPECT_THAT(unknown.err, HasSubstr("github"));

  const auto bad_now = abide({"parse", "ratelimit", "--now", "yesterday"}, "HTTP/1.1 200 OK\r\n\r\n");
  EXPECT_EQ(bad_now.exit_code, 2);

  const auto bad_flag = abide({"parse", "ratelimit", "--frobnicate"}, "HTTP/1.1 200 OK\r\n\r\n");
  EXPECT_EQ(bad_flag.exit_code, 2);
}

TEST(CliParseRatelimit, DefaultNowIsTheCurrentTime) {
  const json j = parse_ok(abide({"parse", "ratelimit"}, "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\r\n\r\n"));
  EXPECT_EQ(j["retry_after"]["seconds"], 5);
}

#else
TEST(CliParseRatelimit, Skipped) { GTEST_SKIP() << "the CLI is not built"; }
#endif

}  // namespace
