// Profiles chosen and loaded: selection by host or name, vendor headers
// without a profile, malformed and user profile files, and the semantics of
// the values profiles read.
#include "support/profiles_fixture.h"

namespace abide {
namespace {

// ---- selection -------------------------------------------------------------------------

TEST(Selection, ByHostExactOrSuffixIgnoringCaseAndPort) {
  const auto& r = ProfileRegistry::builtin();
  EXPECT_EQ(r.for_host("api.github.com")->name, "github");
  EXPECT_EQ(r.for_host("API.GitHub.com:443")->name, "github");
  EXPECT_EQ(r.for_host("github.com.")->name, "github");
  EXPECT_EQ(r.for_host("uploads.github.com")->name, "github");
  EXPECT_EQ(r.for_host("notgithub.com"), nullptr);
  EXPECT_EQ(r.for_host("github.com.evil.example"), nullptr);
  EXPECT_EQ(r.for_host(""), nullptr);
  EXPECT_EQ(r.for_host("example.com"), nullptr);
  EXPECT_EQ(r.find("GitHub")->name, "github");
  EXPECT_EQ(r.find("nope"), nullptr);
}

TEST(Selection, ExactBeatsSuffixAndLongerSuffixBeatsShorter) {
  ProfileRegistry r;
  ASSERT_TRUE(r.load_text(R"({"name":"wide","hosts":[".example.com"]})", "wide.json"));
  ASSERT_TRUE(r.load_text(R"({"name":"narrow","hosts":[".api.example.com"]})", "narrow.json"));
  ASSERT_TRUE(r.load_text(R"({"name":"exact","hosts":["v2.api.example.com"]})", "exact.json"));
  EXPECT_EQ(r.for_host("www.example.com")->name, "wide");
  EXPECT_EQ(r.for_host("v1.api.example.com")->name, "narrow");
  EXPECT_EQ(r.for_host("v2.api.example.com")->name, "exact");
}

TEST(Selection, ProfileNoneAndUnknownName) {
  const char* head = "HTTP/2 200 \r\nx-ratelimit-remaining: 1\r\nx-ratelimit-reset: 1767229200\r\n\r\n";
  const auto none = see(head, "api.github.com", "none");
  EXPECT_EQ(none.profile, "");
  EXPECT_TRUE(none.quota.empty());
  EXPECT_EQ(none.uninterpreted.size(), 2u);
  const auto unknown = see(head, "", "nope");
  EXPECT_TRUE(warned(unknown, "no profile named \"nope\""));
}

// A host without a profile: vendor headers reported, never used; heuristic only on request.
TEST(NoProfile, VendorHeadersAreReportedNotUsed) {
  const char* head = "HTTP/1.1 429 Too Many Requests\r\nX-RateLimit-Limit: 100\r\nX-RateLimit-Remaining: 0\r\n"
                     "X-RateLimit-Reset: 1767225630\r\nContent-Type: text/plain\r\n\r\n";
  const auto s = see(head, "api.unknown.example");
  EXPECT_TRUE(s.quota.empty());
  EXPECT_FALSE(permitted_wait(s).quota);
  ASSERT_EQ(s.uninterpreted.size(), 3u);
  EXPECT_EQ(s.uninterpreted[0].name, "X-RateLimit-Limit");
  EXPECT_TRUE(warned(s, "not interpreted (no vendor profile)"));
  EXPECT_TRUE(s.limited);

  const auto h = see(head, "api.unknown.example", {}, kNow, /*heuristic=*/true);
  ASSERT_EQ(h.quota.size(), 1u);
  EXPECT_EQ(h.quota[0].confidence, Confidence::kLow);
  EXPECT_EQ(h.quota[0].source, QuotaSource::kHeuristic);
  EXPECT_EQ(h.quota[0].source_name(), "heuristic");
  EXPECT_EQ(h.quota[0].reset, 30s);       // a large number is read as Unix seconds
  EXPECT_FALSE(permitted_wait(h).quota);  // low confidence never blocks
  EXPECT_TRUE(h.uninterpreted.empty());
}

TEST(NoProfile, HeuristicGuessesTheResetFormat) {
  const auto delta = see("HTTP/1.1 200 OK\r\nX-RateLimit-Remaining: 5\r\nX-RateLimit-Reset: 30\r\n\r\n", "h", {}, kNow,
                         true);
  EXPECT_EQ(delta.quota[0].reset, 30s);
  const auto go = see("HTTP/1.1 200 OK\r\nX-RateLimit-Reset: 6m0s\r\n\r\n", "h", {}, kNow, true);
  EXPECT_EQ(go.quota[0].reset, 6min);
  const auto iso = see("HTTP/1.1 200 OK\r\nX-Rate-Limit-Reset: 2026-01-01T00:01:00Z\r\n\r\n", "h", {}, kNow, true);
  EXPECT_EQ(iso.quota[0].reset, 60s);
  // lemlist [3p]: Date.toString() text is not understood, and says so.
  const auto js = see(
      "HTTP/1.1 200 OK\r\nX-RateLimit-Reset: Tue Feb 16 2021 09:02:42 GMT+0100 (Central European Standard Time)\r\n\r\n",
      "h", {}, kNow, true);
  EXPECT_TRUE(js.quota.empty());
  EXPECT_TRUE(warned(js, "not understood"));
  // As for a profile, nothing is read as a wait of decades (2286; 31,000 years).
  const auto far = see("HTTP/1.1 429 \r\nX-RateLimit-Reset: 9999999999\r\nretry-after-ms: 999999999999999\r\n\r\n",
                       "h", {}, kNow, true);
  EXPECT_TRUE(far.quota.empty());
  EXPECT_FALSE(far.retry_after);
  EXPECT_TRUE(warned(far, "\"9999999999\" ignored: more than a year ahead"));
  EXPECT_TRUE(warned(far, "\"999999999999999\" ignored: more than a year ahead"));
}

TEST(VendorHeaderNames, WhatLooksLikeAQuotaHeader) {
  using detail::looks_like_vendor_quota_header;
  EXPECT_TRUE(looks_like_vendor_quota_header("X-RateLimit-Remaining"));
  EXPECT_TRUE(looks_like_vendor_quota_header("x-rate-limit-reset"));
  EXPECT_TRUE(looks_like_vendor_quota_header("anthropic-ratelimit-tokens-reset"));
  EXPECT_TRUE(looks_like_vendor_quota_header("RateLimit-Observed"));
  EXPECT_TRUE(looks_like_vendor_quota_header("retry-after-ms"));
  EXPECT_TRUE(looks_like_vendor_quota_header("Sforce-Limit-Info"));
  EXPECT_FALSE(looks_like_vendor_quota_header("RateLimit"));
  EXPECT_FALSE(looks_like_vendor_quota_header("ratelimit-policy"));
  EXPECT_FALSE(looks_like_vendor_quota_header("RateLimit-Reset"));
  EXPECT_FALSE(looks_like_vendor_quota_header("Retry-After"));
  EXPECT_FALSE(looks_like_vendor_quota_header("Content-Type"));
}


TEST(MalformedProfile, MessageNamesFileAndField) {
  EXPECT_EQ(load_error(R"({"name": "acme", "quotas": [{"reset": {"header": "x-reset", "format": "epoch"}}]})"),
            "mine.json: quotas[0].reset.format: unknown time format \"epoch\" (line 1)");
  EXPECT_EQ(load_error(
                "{\n  \"name\": \"acme\",\n  \"quotas\": [\n    {\"limit\": \"x-limit\", \"remaining\": 5}\n  ]\n}"),
            "mine.json: quotas[0].remaining: expected a header name or an object with \"header\" (line 4)");
  EXPECT_EQ(load_error(R"({"name": "acme", "limited_statuses": [429, "403"]})"),
            "mine.json: limited_statuses[1]: expected an HTTP status (an integer from 100 to 999) (line 1)");
  EXPECT_EQ(load_error(R"({"name": "acme", "hosts": ["api.acme.com"], "quota": []})"),
            "mine.json: quota: unknown field (line 1)");
  EXPECT_EQ(load_error(R"({"hosts": []})"), "mine.json: name: missing (line 1)");
  EXPECT_EQ(load_error(R"({"name": "Acme Corp"})"),
            "mine.json: name: use lower-case letters, digits, '-' and '_' (line 1)");
  EXPECT_THAT(
      load_error(R"({"name": "acme", "quotas": [{"window": {"header": "x-w", "format": "rfc3339"}, "limit": "x-l"}]})"),
      HasSubstr("quotas[0].window.format: a window is a length"));
  EXPECT_THAT(load_error(R"({"name": "acme", "quotas": [{"limit": {"header": "x-l", "format": "used_limit"}}]})"),
              HasSubstr("quotas[0].limit.format: format \"used_limit\" is not allowed here"));
  EXPECT_THAT(load_error(R"({"name": "acme", "quotas": [{"policy": "p"}]})"),
              HasSubstr("quotas[0]: a quota must read"));
  EXPECT_THAT(load_error(R"({"name": "acme", "quotas": [{"limit": "bad name"}]})"),
              HasSubstr("quotas[0].limit: not a valid header name"));
  EXPECT_THAT(load_error(R"({"name": "acme", "retry_delays": [{"header": "x-ms", "format": "minutes"}]})"),
              HasSubstr("retry_delays[0].format: unknown time format"));
  EXPECT_THAT(load_error(R"({"name": "none", "limited_statuses": [429]})"), HasSubstr("reserved"));
  // A claim that lets a POST repeat says where it comes from.
  EXPECT_EQ(load_error(R"({"name": "acme", "limited_unprocessed": ""})"),
            "mine.json: limited_unprocessed: must not be empty (line 1)");
  EXPECT_THAT(load_error(R"({"name": "acme", "limited_unprocessed": true})"),
              HasSubstr("limited_unprocessed: expected string"));
}

TEST(MalformedProfile, CostsAndBodyHints) {
  EXPECT_EQ(load_error(R"({"name": "acme", "limited_statuses": [429], "costs": "gemini"})"),
            "mine.json: costs: unknown cost rule \"gemini\" (expected \"openai\" or \"anthropic\") (line 1)");
  EXPECT_EQ(load_error(R"({"name": "acme", "limited_statuses": [429], "costs": "none"})"),
            "mine.json: costs: unknown cost rule \"none\" (expected \"openai\" or \"anthropic\") (line 1)");
  EXPECT_EQ(load_error(R"({"name": "acme", "costs": ["openai"]})"),
            "mine.json: costs: expected string, found array (line 1)");
  EXPECT_EQ(load_error(R"({"name": "acme", "body_hints": "try_again_sentence"})"),
            "mine.json: body_hints: expected array, found string (line 1)");
  EXPECT_EQ(load_error("{\"name\": \"acme\",\n \"body_hints\": [\"try_again_sentence\", \"retry_info\"]}"),
            "mine.json: body_hints[1]: unknown body hint \"retry_info\" (expected \"google_retry_info\" or "
            "\"try_again_sentence\") (line 2)");
  EXPECT_EQ(load_error(R"({"name": "acme", "body_hints": [1]})"),
            "mine.json: body_hints[0]: expected string, found number (line 1)");
  EXPECT_EQ(load_error(R"({"name": "acme", "body_hints": ["google_retry_info", "google_retry_info"]})"),
            "mine.json: body_hints[1]: \"google_retry_info\" is listed twice (line 1)");
  // A hostile value is shown escaped.
  EXPECT_THAT(load_error("{\"name\": \"acme\", \"costs\": \"\\u001b[2J\"}"), ::testing::Not(HasSubstr("\x1b")));

  const auto p = parse_profile(R"({"name": "llm", "hosts": ["llm.test"], "costs": "anthropic",
      "body_hints": ["try_again_sentence", "google_retry_info"]})");
  ASSERT_TRUE(p) << p.error().what();
  EXPECT_EQ(p->costs, CostRule::kAnthropic);
  EXPECT_EQ(p->body_hints,
            (std::vector<BodyHintKind>{BodyHintKind::kTryAgainSentence, BodyHintKind::kGoogleRetryInfo}));
  EXPECT_EQ(to_string(CostRule::kOpenAI), "openai");
  EXPECT_EQ(to_string(BodyHintKind::kGoogleRetryInfo), "google_retry_info");
  EXPECT_EQ(cost_rule_from_string("anthropic"), CostRule::kAnthropic);
  EXPECT_EQ(body_hint_kind_from_string("Try_Again_Sentence"), std::nullopt);
}

TEST(MalformedProfile, InvalidJsonNamesFileAndLine) {
  EXPECT_EQ(load_error("{\"name\": \"acme\",\n \"hosts\": [\"a.com\",]\n}"),
            "mine.json: invalid JSON: unexpected character ']' at column 20 (line 2)");
  EXPECT_THAT(load_error(R"({"name": "a", "name": "b"})"), HasSubstr("duplicate member \"name\""));
  EXPECT_THAT(load_error(R"({"name": "acme"} trailing)"), HasSubstr("unexpected characters after"));
  EXPECT_THAT(load_error("[1, 2]"), HasSubstr("expected object, found array"));
  EXPECT_THAT(load_error(""), HasSubstr("invalid JSON"));
  EXPECT_THAT(load_error(R"({"name": "acme\u0000"})"), HasSubstr("name"));
  EXPECT_THAT(load_error("{\"name\": \"a\xff\"}"), HasSubstr("invalid UTF-8"));
  EXPECT_THAT(load_error(std::string(100, '[') + std::string(100, ']')), HasSubstr("nesting deeper than 32"));
  EXPECT_THAT(load_error(R"({"name": "acme", "limited_statuses": [01]})"), HasSubstr("leading zero"));
  EXPECT_THAT(load_error(R"({"name": "acme", // comment
  })"),
              HasSubstr("invalid JSON"));
}

TEST(MalformedProfile, LoadFileReportsThePath) {
  const auto dir = std::filesystem::temp_directory_path() / "abide_profiles_test";
  std::filesystem::create_directories(dir);
  const auto bad = dir / "broken.json";
  std::ofstream(bad) << R"({"name": "acme", "quotas": [{"reset": [{"header": "x-r", "format": "fortnights"}]}]})";
  ProfileRegistry r;
  auto loaded = r.load_file(bad);
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().file, bad.string());
  EXPECT_EQ(loaded.error().field, "quotas[0].reset[0].format");
  EXPECT_THAT(loaded.error().what(), HasSubstr("broken.json: quotas[0].reset[0].format: unknown time format"));
  auto missing = r.load_file(dir / "missing.json");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().what(), HasSubstr("missing.json: cannot be read"));
  std::filesystem::remove_all(dir);
}

TEST(UserProfiles, LoadedAtRunTimeAndOverrideBuiltins) {
  ProfileRegistry r = ProfileRegistry::with_builtins();
  const std::size_t before = r.size();
  auto name = r.load_text(R"({
    "name": "acme",
    "hosts": ["api.acme.test"],
    "limited_statuses": [429, 420],
    "quotas": [{"policy": "main", "limit": "x-acme-limit", "remaining": "x-acme-left",
                "reset": {"header": "x-acme-reset", "format": "milliseconds"}, "window_s": 1.5}]
  })",
                          "acme.json");
  ASSERT_TRUE(name);
  EXPECT_EQ(*name, "acme");
  EXPECT_EQ(r.size(), before + 1);
  ASSERT_TRUE(r.load_text(R"({"name": "github", "hosts": ["api.github.com"], "limited_statuses": [418]})", "gh.json"));
  EXPECT_EQ(r.size(), before + 1);
  EXPECT_EQ(r.find("github")->file, "gh.json");

  HeaderList h{{"X-Acme-Limit", "10"}, {"X-Acme-Left", "0"}, {"X-Acme-Reset", "2500"}};
  ObserveOptions o;
  o.host = "api.acme.test";
  o.registry = &r;
  const auto s = observe(420, h, kNow, MonoTime{}, o);
  EXPECT_TRUE(s.limited);
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].reset, 2500ms);
  EXPECT_EQ(s.quota[0].window, 1500ms);
}

// ---- value semantics -------------------------------------------------------------------------

TEST(GoDuration, ParsesGoStrings) {
  EXPECT_EQ(parse_go_duration("1s"), 1s);
  EXPECT_EQ(parse_go_duration("6m0s"), 6min);
  EXPECT_EQ(parse_go_duration("20ms"), 20ms);
  EXPECT_EQ(parse_go_duration("12ms"), 12ms);
  EXPECT_EQ(parse_go_duration("1h2m3.5s"), 1h + 2min + 3500ms);
  EXPECT_EQ(parse_go_duration("1.5h"), 90min);
  EXPECT_EQ(parse_go_duration("300us"), 300us);
  EXPECT_EQ(parse_go_duration("300\xC2\xB5s"), 300us);
  EXPECT_EQ(parse_go_duration("300\xCE\xBCs"), 300us);
  EXPECT_EQ(parse_go_duration("7ns"), 7ns);
  EXPECT_EQ(parse_go_duration("0"), 0s);
  EXPECT_EQ(parse_go_duration(".5s"), 500ms);
  EXPECT_EQ(parse_go_duration("5.s"), 5s);
  EXPECT_EQ(parse_go_duration("0.0000000001s"), 1ns);  // rounds up, never down
  EXPECT_EQ(parse_go_duration("99999999999h"), kMaxDuration);
  for (const char* bad : {"", "1", "s", "-1s", "+1s", "1x", "1s ", " 1s", "1..5s", ".s", "1m-2s", "1S"}) {
    EXPECT_FALSE(parse_go_duration(bad)) << bad;
  }
}

TEST(DecimalDuration, ExactToTheNanosecond) {
  EXPECT_EQ(parse_decimal_duration("64.57", 1s), 64570ms);
  EXPECT_EQ(parse_decimal_duration("1470173023.123", 1s), std::chrono::milliseconds{1470173023123});
  EXPECT_EQ(parse_decimal_duration("1500", 1ms), 1500ms);
  EXPECT_EQ(parse_decimal_duration("0.5", 1ms), 500us);
  EXPECT_EQ(parse_decimal_duration("0.1234567891", 1s), 123456790ns);
  EXPECT_EQ(parse_decimal_duration("99999999999999999999999", 1s), kMaxDuration);
  for (const char* bad : {"", ".", "1.", ".5", "-1", "+1", "1e3", "1,5", "0x10", " 1"}) {
    EXPECT_FALSE(parse_decimal_duration(bad, 1s)) << bad;
  }
}

TEST(TimeValue, EveryFormat) {
  const auto v = [](std::string_view text, TimeFormat f, std::optional<WallTime> date = std::nullopt) {
    auto t = parse_time_value(text, f, kNow, date);
    return t ? std::optional<Duration>(t->from_receipt) : std::nullopt;
  };
  EXPECT_EQ(v("1767225630", TimeFormat::kUnixSeconds), 30s);
  EXPECT_FALSE(v("1767225630.5", TimeFormat::kUnixSeconds));
  EXPECT_EQ(v("1767225630.5", TimeFormat::kUnixSecondsFraction), 30500ms);
  EXPECT_EQ(v("1767225000", TimeFormat::kUnixSeconds), 0s);  // in the past
  EXPECT_EQ(v("30", TimeFormat::kDeltaSeconds), 30s);
  EXPECT_FALSE(v("-30", TimeFormat::kDeltaSeconds));
  EXPECT_FALSE(v("1.5", TimeFormat::kDeltaSeconds));
  EXPECT_EQ(v("1.5", TimeFormat::kFloatSeconds), 1500ms);
  EXPECT_EQ(v("600000", TimeFormat::kMilliseconds), 600s);  // Prisjakt [3p]
  EXPECT_EQ(v("6m0s", TimeFormat::kGoDuration), 6min);
  EXPECT_EQ(v("2026-01-01T00:00:30Z", TimeFormat::kRfc3339), 30s);
  EXPECT_EQ(v("2026-01-01T01:00:30+01:00", TimeFormat::kRfc3339), 30s);
  EXPECT_EQ(v("2026-01-01T00:01Z", TimeFormat::kRfc3339), 60s);
  EXPECT_FALSE(v("2026-01-01T00Z", TimeFormat::kRfc3339));
  EXPECT_EQ(v("Thu, 01 Jan 2026 00:00:30 GMT", TimeFormat::kHttpDate), 30s);
  // Skew: the server's clock is 10 s behind ours, so its reset instant is 10 s further away.
  EXPECT_EQ(v("1767225630", TimeFormat::kUnixSeconds, kNow - 10s), 40s);
  EXPECT_EQ(v("1767225630", TimeFormat::kUnixSeconds, kNow + 10s), 30s);
  // A delta ignores Date.
  EXPECT_EQ(v("30", TimeFormat::kDeltaSeconds, kNow - 10s), 30s);
}

// The step each format states a time in: the true instant lies within one
// step before the stated one when the server rounds up.
TEST(TimeValue, ResolutionOfEveryFormat) {
  const auto step = [](std::string_view text, TimeFormat f) {
    auto t = parse_time_value(text, f, kNow, std::nullopt);
    return t ? std::optional<Duration>(t->resolution) : std::nullopt;
  };
  EXPECT_EQ(step("1767225630", TimeFormat::kUnixSeconds), 1s);
  EXPECT_EQ(step("1767225630", TimeFormat::kUnixSecondsFraction), 1s);
  EXPECT_EQ(step("1767225630.123", TimeFormat::kUnixSecondsFraction), 1ms);  // Discord
  EXPECT_EQ(step("30", TimeFormat::kDeltaSeconds), 1s);
  EXPECT_EQ(step("64.57", TimeFormat::kFloatSeconds), 10ms);
  EXPECT_EQ(step("1500", TimeFormat::kMilliseconds), 1ms);
  EXPECT_EQ(step("1500.5", TimeFormat::kMilliseconds), 100us);
  EXPECT_EQ(step("6m0s", TimeFormat::kGoDuration), 1s);  // OpenAI
  EXPECT_EQ(step("20ms", TimeFormat::kGoDuration), 1ms);
  EXPECT_EQ(step("1.5s", TimeFormat::kGoDuration), 100ms);
  EXPECT_EQ(step("1h", TimeFormat::kGoDuration), 1h);
  EXPECT_EQ(step("3\xC2\xB5s", TimeFormat::kGoDuration), 1us);
  EXPECT_EQ(step("2026-01-01T00:00:30Z", TimeFormat::kRfc3339), 1s);  // Anthropic
  EXPECT_EQ(step("2026-01-01T00:00:30.25Z", TimeFormat::kRfc3339), 10ms);
  EXPECT_EQ(step("2026-01-01T01:00:30+01:00", TimeFormat::kRfc3339), 1s);
  EXPECT_EQ(step("2026-01-01T00:01Z", TimeFormat::kRfc3339), 1min);  // Atlassian
  EXPECT_EQ(step("Thu, 01 Jan 2026 00:00:30 GMT", TimeFormat::kHttpDate), 1s);
}

// An instant read against a server Date a fraction of a second behind the
// receipt: the longer reading is used (never early), and the step widens by
// how far apart the two are, up to a second, so that the value less its step
// still bounds the true time from below.
TEST(TimeValue, AStepWidensByHowFarItsReadingsDiffer) {
  const auto t = parse_time_value("1767225630", TimeFormat::kUnixSeconds, kNow, kNow - 800ms);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->from_receipt, 30800ms);
  EXPECT_EQ(t->resolution, 1800ms);
  const auto far = parse_time_value("1767225630", TimeFormat::kUnixSeconds, kNow, kNow - 5s);
  ASSERT_TRUE(far);
  EXPECT_EQ(far->from_receipt, 35s);
  EXPECT_EQ(far->resolution, 2s);
  const auto same = parse_time_value("1767225630.123", TimeFormat::kUnixSecondsFraction, kNow, kNow);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->resolution, 1ms);
}

TEST(Counts, IntegerNumberUsedLimitMembers) {
  EXPECT_EQ(parse_count("4999", CountFormat::kInteger), 4999);
  EXPECT_FALSE(parse_count("596.0", CountFormat::kInteger));
  EXPECT_EQ(parse_count("596.9", CountFormat::kNumber), 596);
  EXPECT_EQ(parse_count("4.2", CountFormat::kNumber, /*round_up=*/true), 5);
  EXPECT_EQ(parse_count("4.0", CountFormat::kNumber, true), 4);
  EXPECT_FALSE(parse_count("-1", CountFormat::kInteger));
  EXPECT_FALSE(parse_count("", CountFormat::kNumber));
  EXPECT_FALSE(parse_count("9999999999999999999", CountFormat::kInteger));

  auto ul = parse_used_limit("32/40");
  ASSERT_TRUE(ul);
  EXPECT_EQ(ul->used, 32);
  EXPECT_EQ(ul->limit, 40);
  ul = parse_used_limit("17/250(appName=sample-connected-app)");
  ASSERT_TRUE(ul);
  EXPECT_EQ(ul->detail, "appName=sample-connected-app");
  EXPECT_FALSE(parse_used_limit("32"));
  EXPECT_FALSE(parse_used_limit("a/40"));
  EXPECT_FALSE(parse_used_limit("1/2(x"));

  EXPECT_EQ(find_member("api-usage=25/5000; per-app-api-usage=17/250(appName=x)", "per-app-api-usage"),
            "17/250(appName=x)");
  EXPECT_EQ(find_member("total=100; remaining=99; resets=41", "resets"), "41");
  EXPECT_FALSE(find_member("total=100", "remaining"));
}

TEST(MalformedVendorValues, IgnoredWithWarningRestRead) {
  const auto s = see("HTTP/2 200 \r\nx-ratelimit-limit: lots\r\nx-ratelimit-remaining: 10\r\n"
                     "x-ratelimit-reset: tomorrow\r\nx-ratelimit-resource: core\r\n\r\n",
                     "api.github.com");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_FALSE(s.quota[0].limit);
  EXPECT_EQ(s.quota[0].remaining, 10);
  EXPECT_FALSE(s.quota[0].reset);
  EXPECT_TRUE(warned(s, "github: x-ratelimit-limit \"lots\" ignored"));
  EXPECT_TRUE(warned(s, "x-ratelimit-reset \"tomorrow\" ignored: not unix_seconds"));
}

TEST(MalformedVendorValues, RepeatedDifferentValuesUseTheFirst) {
  const auto s = see("HTTP/2 200 \r\nx-ratelimit-remaining: 10\r\nx-ratelimit-remaining: 3\r\n\r\n", "api.github.com");
  ASSERT_EQ(s.quota.size(), 1u);
  EXPECT_EQ(s.quota[0].remaining, 10);
  EXPECT_TRUE(warned(s, "several different values"));
}

}  // namespace
}  // namespace abide
