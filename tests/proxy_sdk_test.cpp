// `abide proxy` with the vendors' own SDKs as its callers (issue 27): openai,
// @anthropic-ai/sdk, @octokit/rest with plugin-throttling and plugin-retry,
// stripe (Node, pinned in tests/support/sdk/node), and Debian's python3-stripe,
// python3-github, python3-requests (with and without urllib3's Retry) and
// python3-httpx, against an upstream on 127.0.0.1 that answers as each vendor
// documents (tests/support/sdk/upstream.py) and counts premature requests.
//
// Each scenario checks that every call succeeds, or ends within its budget
// with the SDK's own rate-limit error carrying the permitted time; that no
// call outlasts its budget (no SDK slept on an answer of the proxy); that the
// upstream saw no premature request; that a keyless POST the vendor documents
// as refused when limited is not lost; and that every request, pages
// included, went through the proxy. Windows are short (a few requests per 1-2
// s); a call held back faces a permitted time about 30 s away, so a budget of
// 2 s and margins of seconds tell an SDK that obeys from one that sleeps.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/sdk_harness.h"

#ifdef ABIDE_CLI_PATH

namespace abide::test::sdk {
namespace {

// Time a call may take beyond its budget on a loaded machine (a process
// start, a scheduling delay): far below the ~30 s an SDK sleeping on the
// permitted time would add.
constexpr double kMargin = 3.0;

// ---- the stage: an upstream and the proxy in front of it ---------------------

struct Stage {
  Upstream upstream;
  Proxy proxy;
  Stage(const std::string& style, const std::string& profile, const std::vector<std::string>& upstream_args,
        const std::vector<std::string>& proxy_args = {})
      : upstream(style, upstream_args),
        proxy(upstream.url() + (profile.empty() ? "" : ",profile=" + profile), proxy_args) {}
  bool up() const { return upstream.port() > 0 && proxy.port() > 0; }
  std::string why_not() const { return "upstream:\n" + upstream.err_so_far() + "\nproxy:\n" + proxy.err_so_far(); }
};

#define START(stage) ASSERT_TRUE((stage).up()) << (stage).why_not()

// What the upstream counted, checked: nothing premature, no Abide-* field
// forwarded. The counts come back for the scenario's own checks.
json expect_fair(const Stage& s) {
  const json st = s.upstream.stats();
  EXPECT_TRUE(st.is_object()) << "no /__stats from the upstream";
  if (!st.is_object()) return json::object();
  EXPECT_EQ(st["premature"], 0) << "the upstream got requests before its stated time:\n" << st.dump(1);
  for (const auto& e : st["log"]) EXPECT_TRUE(e["abide_fields"].empty()) << e.dump();
  return st;
}

// The client ran to its end, and every request its SDK made went to the proxy.
void expect_through_proxy(const Calls& c, const Stage& s, std::size_t calls) {
  EXPECT_EQ(c.raw.exit_code, 0) << c.describe();
  EXPECT_EQ(c.calls.size(), calls) << c.describe();
  EXPECT_FALSE(c.requests.empty()) << c.describe();
  for (const auto& r : c.requests)
    EXPECT_EQ(text(r, "url").rfind(s.proxy.url() + "/", 0), 0u) << "around the proxy: " << r.dump();
}

void expect_ok(const json& call, double budget_s, const Calls& c) {
  EXPECT_TRUE(call.value("ok", false)) << call.dump() << "\n" << c.describe();
  EXPECT_LT(call.value("elapsed_s", 1e9), budget_s + kMargin) << call.dump();
}

// Held back: the SDK's own rate-limit error at once, with the permitted time
// (about 30 s away) and the vendor's "do not retry" where it has one.
void expect_held_back(const json& call, const std::string& error_class, int status, double budget_s, const Calls& c) {
  ASSERT_FALSE(call.value("ok", true)) << call.dump() << "\n" << c.describe();
  const json& e = call["error"];
  EXPECT_EQ(text(e, "class"), error_class) << call.dump();
  EXPECT_EQ(e.value("status", 0), status) << call.dump();
  EXPECT_GE(retry_after_s(call), 20) << "the permitted time is lost: " << call.dump();
  EXPECT_LE(retry_after_s(call), 40) << call.dump();
  EXPECT_EQ(text(e, "outcome"), "deferred") << call.dump();
  EXPECT_LT(call.value("elapsed_s", 1e9), budget_s + kMargin) << "slept past its budget: " << call.dump();
}

int count_status(const json& stats, int status) {
  int n = 0;
  for (const auto& e : stats["log"]) n += e["status"] == status ? 1 : 0;
  return n;
}

// ---- fixtures ----------------------------------------------------------------

class NodeSdk : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // npm reads its configuration from the real home; the clients get their own.
    if (!program_on_path("node").empty() || !std::getenv("ABIDE_TEST_NO_NODE")) problem() = install_node_sdks();
    isolate_environment();
  }
  void SetUp() override {
    if (program_on_path("node").empty() && std::getenv("ABIDE_TEST_NO_NODE"))
      GTEST_SKIP() << "node is not on PATH and ABIDE_TEST_NO_NODE is set";
    ASSERT_TRUE(problem().empty()) << problem();
  }
  static std::string& problem() {
    static std::string p;
    return p;
  }
};

class PythonSdk : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    problem() = check_python_sdks();
    isolate_environment();
  }
  void SetUp() override { ASSERT_TRUE(problem().empty()) << problem(); }
  static std::string& problem() {
    static std::string p;
    return p;
  }
};

// ---- openai and @anthropic-ai/sdk ------------------------------------------------

struct Stainless {
  std::string style, script, base_path, error_class;
};
const Stainless kOpenAi{"openai", "openai.mjs", "/v1", "RateLimitError"};
const Stainless kAnthropic{"anthropic", "anthropic.mjs", "", "RateLimitError"};

// JSON and streamed calls, the SDK's default retries: a limited answer
// nobody could foresee is retried by the proxy; the SDK sees only successes.
void default_retries(const Stainless& v) {
  Stage s(v.style, v.style, {"--limit", "3", "--window", "1", "--surprise", "3:1"});
  START(s);
  const auto c = run_node(v.script, {"--base", s.proxy.url() + v.base_path, "--calls", "6", "--parallel", "2", "--mode",
                                     "mixed", "--header", "Abide-Max-Wait: 10"});
  expect_through_proxy(c, s, 6);
  for (const auto& call : c.calls) {
    expect_ok(call, 10, c);
    EXPECT_EQ(text(call, "text"), "Hello from the upstream.") << call.dump();
  }
  EXPECT_EQ(c.requests.size(), 6u) << "the SDK retried:\n" << c.describe();
  const json st = expect_fair(s);
  EXPECT_GE(count_status(st, 429), 1) << st.dump(1);
}

// Retries off, as a caller that must not send twice sets them: every call is
// a keyless POST, and each one limited is retried by the proxy because the
// vendor documents its 429 as a refusal. None is lost.
void retries_off(const Stainless& v) {
  Stage s(v.style, v.style, {"--limit", "3", "--window", "1", "--surprise", "2:1", "--surprise", "5:1"});
  START(s);
  const auto c = run_node(v.script, {"--base", s.proxy.url() + v.base_path, "--calls", "8", "--parallel", "2", "--mode",
                                     "mixed", "--max-retries", "0", "--header", "Abide-Max-Wait: 10"});
  expect_through_proxy(c, s, 8);
  for (const auto& call : c.calls) expect_ok(call, 10, c);
  EXPECT_EQ(c.requests.size(), 8u) << c.describe();
  const json st = expect_fair(s);
  EXPECT_GE(count_status(st, 429), 2) << st.dump(1);
  EXPECT_EQ(count_status(st, 200), 8) << st.dump(1);
}

// Another program spent the quota for 30 s: with a budget of 2 s, each call
// ends at once with the SDK's RateLimitError carrying the permitted time, and
// the SDK's two retries stay unused (x-should-retry: false).
void beyond_budget(const Stainless& v, const std::vector<std::string>& budget_args, double budget_s) {
  Stage s(v.style, v.style, {"--limit", "3", "--window", "1", "--surprise", "2:30"});
  START(s);
  const auto c = run_node(v.script, with({"--base", s.proxy.url() + v.base_path, "--calls", "4", "--mode", "mixed"},
                                         budget_args));
  expect_through_proxy(c, s, 4);
  ASSERT_EQ(c.calls.size(), 4u);
  expect_ok(c.calls[0], budget_s, c);
  for (std::size_t i = 1; i < c.calls.size(); ++i) {
    expect_held_back(c.calls[i], v.error_class, 429, budget_s, c);
    EXPECT_EQ(text(c.calls[i]["error"], "should_retry"), "false") << c.calls[i].dump();
    if (v.style == "openai") {
      EXPECT_GE(std::atof(text(c.calls[i]["error"], "retry_after_ms").c_str()), 20000) << c.calls[i].dump();
    }
  }
  EXPECT_EQ(c.requests.size(), 4u) << "the SDK retried:\n" << c.describe();
  const json st = expect_fair(s);
  EXPECT_EQ(st["requests"], 2) << st.dump(1);
}

TEST_F(NodeSdk, OpenAiJsonAndStreamsWithDefaultRetries) { default_retries(kOpenAi); }
TEST_F(NodeSdk, OpenAiWithRetriesOffLosesNoCall) { retries_off(kOpenAi); }
TEST_F(NodeSdk, OpenAiBeyondBudgetRaisesRateLimitErrorAtOnce) {
  beyond_budget(kOpenAi, {"--header", "Abide-Max-Wait: 2"}, 2);
}
TEST_F(NodeSdk, AnthropicJsonAndStreamsWithDefaultRetries) { default_retries(kAnthropic); }
TEST_F(NodeSdk, AnthropicWithRetriesOffLosesNoCall) { retries_off(kAnthropic); }
// The budget here is the SDK's own timeout of 4 s, which it states in
// X-Stainless-Timeout: the proxy holds it at most half of that.
TEST_F(NodeSdk, AnthropicBeyondItsTimeoutRaisesRateLimitErrorAtOnce) {
  beyond_budget(kAnthropic, {"--timeout-ms", "4000"}, 2);
}

// ---- @octokit/rest with plugin-throttling and plugin-retry -------------------------

// GET, POST and every page of a list, paced through a quota of 4 requests per
// 2 s; the upstream's Link points at its own address, and the SDK still asks
// the proxy for every page.
TEST_F(NodeSdk, OctokitGetPostAndPaginateThroughTheProxy) {
  Stage s("github", "github", {"--limit", "4", "--window", "2", "--items", "10"});
  START(s);
  const auto c = run_node("octokit.mjs", {"--base", s.proxy.url(), "--steps", "get,post,paginate,get,post",
                                          "--per-page", "2", "--budget", "10", "--header", "Abide-Max-Wait: 10"});
  expect_through_proxy(c, s, 5);
  for (const auto& call : c.calls) {
    expect_ok(call, 10, c);
    EXPECT_TRUE(call["limit_calls"].empty()) << "onRateLimit was called: " << call.dump();
  }
  ASSERT_EQ(c.calls.size(), 5u);
  EXPECT_EQ(c.calls[2]["items"], 10) << c.calls[2].dump();
  EXPECT_EQ(c.calls[2]["numbers"], json({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  const json st = expect_fair(s);
  // Five pages, each asked once, and nothing reached the upstream but what the SDK sent the proxy.
  EXPECT_EQ(st["requests"], c.requests.size()) << st.dump(1) << c.describe();
  int pages = 0;
  for (const auto& r : c.requests) pages += text(r, "url").find("/issues?") != std::string::npos ? 1 : 0;
  EXPECT_EQ(pages, 5) << c.describe();
}

// The quota spent by another program for the rest of a 30 s window: octokit's
// onRateLimit gets the permitted time, declines to wait past the budget, and
// the call ends at once with octokit's RequestError of GitHub's status.
void octokit_beyond_budget(int status, const std::vector<std::string>& client_args) {
  Stage s("github", "github",
          {"--limit", "10", "--window", "30", "--surprise", "2:0", "--limited-status", std::to_string(status)});
  START(s);
  const auto c = run_node("octokit.mjs", with({"--base", s.proxy.url(), "--steps", "get,get,post,paginate", "--budget",
                                               "2", "--header", "Abide-Max-Wait: 2"},
                                              client_args));
  expect_through_proxy(c, s, 4);
  ASSERT_EQ(c.calls.size(), 4u);
  expect_ok(c.calls[0], 2, c);
  for (std::size_t i = 1; i < c.calls.size(); ++i) {
    expect_held_back(c.calls[i], "RequestError", status, 2, c);
    const json& limits = c.calls[i]["limit_calls"];
    ASSERT_EQ(limits.size(), 1u) << c.calls[i].dump();
    EXPECT_EQ(limits[0]["kind"], "primary");
    EXPECT_GE(limits[0]["retry_after"].get<double>(), 20) << c.calls[i].dump();
  }
  EXPECT_EQ(c.requests.size(), 4u) << "the SDK retried:\n" << c.describe();
  const json st = expect_fair(s);
  EXPECT_EQ(st["requests"], 2) << st.dump(1);
}

TEST_F(NodeSdk, OctokitBeyondBudgetCallsOnRateLimitWithThePermittedTime) { octokit_beyond_budget(403, {}); }
// GitHub may answer 429 too; plugin-retry would retry any 429 three times, a
// second apart, unless 429 is among its doNotRetry (README.md, "Client timeouts").
TEST_F(NodeSdk, OctokitBeyondBudgetWith429) { octokit_beyond_budget(429, {"--no-retry-429"}); }

// ---- stripe (Node) and python3-stripe ----------------------------------------------

// Stripe states no quota: the first limited answer teaches it. Its SDKs send
// an Idempotency-Key with every POST, so the proxy retries a limited one
// within the budget.
TEST_F(NodeSdk, StripePostsWithinBudget) {
  Stage s("stripe", "stripe", {"--limit", "2", "--window", "1"});
  START(s);
  const auto c = run_node("stripe.mjs", {"--base", s.proxy.url(), "--calls", "6", "--parallel", "2", "--header",
                                         "Abide-Max-Wait: 10"});
  expect_through_proxy(c, s, 6);
  for (const auto& call : c.calls) expect_ok(call, 10, c);
  EXPECT_EQ(c.requests.size(), 6u) << "the SDK retried:\n" << c.describe();
  const json st = expect_fair(s);
  EXPECT_EQ(count_status(st, 200), 6) << st.dump(1);
  for (const auto& e : st["log"]) EXPECT_TRUE(e["idempotency_key"].get<bool>()) << e.dump();
}

// Three Stripe POSTs with a budget of 2 s, the second and third limited
// upstream: the first is done; each other one ends at once with the SDK's
// own rate-limit error (`error_class`), Stripe-Should-Retry: false, and no
// retry by the SDK (it does retry on Stripe-Should-Retry: true).
void expect_stripe_held_back(const Calls& c, const Stage& s, const std::string& error_class) {
  expect_through_proxy(c, s, 3);
  ASSERT_EQ(c.calls.size(), 3u);
  expect_ok(c.calls[0], 2, c);
  for (std::size_t i = 1; i < c.calls.size(); ++i) {
    expect_held_back(c.calls[i], error_class, 429, 2, c);
    EXPECT_EQ(text(c.calls[i]["error"], "should_retry"), "false") << c.calls[i].dump();
  }
  EXPECT_EQ(c.requests.size(), 3u) << "the SDK retried:\n" << c.describe();
  EXPECT_EQ(expect_fair(s)["requests"], 2);
}

TEST_F(NodeSdk, StripeBeyondBudgetRaisesStripeRateLimitErrorAtOnce) {
  Stage s("stripe", "stripe", {"--limit", "5", "--window", "30", "--surprise", "2:0"});
  START(s);
  const auto c = run_node("stripe.mjs", {"--base", s.proxy.url(), "--calls", "3", "--header", "Abide-Max-Wait: 2"});
  expect_stripe_held_back(c, s, "StripeRateLimitError");
}

TEST_F(PythonSdk, StripePostsWithinBudget) {
  Stage s("stripe", "stripe", {"--limit", "2", "--window", "1"}, {"--max-wait", "10"});
  START(s);
  const auto c = run_python("stripe_client.py", {"--base", s.proxy.url(), "--calls", "5", "--parallel", "2"});
  expect_through_proxy(c, s, 5);
  for (const auto& call : c.calls) expect_ok(call, 10, c);
  EXPECT_EQ(c.requests.size(), 5u) << c.describe();
  const json st = expect_fair(s);
  EXPECT_EQ(count_status(st, 200), 5) << st.dump(1);
}

// With the SDK's retries on (it would sleep Retry-After, up to 60 s), the
// proxy's Stripe-Should-Retry: false ends each call at once.
TEST_F(PythonSdk, StripeBeyondBudgetRaisesRateLimitErrorAtOnce) {
  Stage s("stripe", "stripe", {"--limit", "5", "--window", "30", "--surprise", "2:0"}, {"--max-wait", "2"});
  START(s);
  const auto c = run_python("stripe_client.py", {"--base", s.proxy.url(), "--calls", "3", "--max-retries", "2"});
  expect_stripe_held_back(c, s, "RateLimitError");
}

// ---- python3-github (PyGithub) -------------------------------------------------------

// PyGithub refuses a page whose Link leaves its base URL's host: every list
// works only because the proxy points the Link back at itself.
TEST_F(PythonSdk, PyGithubGetAndListsThroughTheProxy) {
  Stage s("github", "github", {"--limit", "3", "--window", "1", "--items", "9"}, {"--max-wait", "10"});
  START(s);
  const auto c = run_python("github_client.py",
                            {"--base", s.proxy.url(), "--steps", "get,list,user,list", "--per-page", "2"});
  expect_through_proxy(c, s, 4);
  for (const auto& call : c.calls) expect_ok(call, 10, c);
  ASSERT_EQ(c.calls.size(), 4u);
  for (const std::size_t i : {1u, 3u}) EXPECT_EQ(c.calls[i]["numbers"], json({1, 2, 3, 4, 5, 6, 7, 8, 9}));
  const json st = expect_fair(s);
  EXPECT_EQ(st["requests"], c.requests.size()) << st.dump(1) << c.describe();
}

// Its timeout is 15 s: a proxy with --max-wait 2 answers first, and PyGithub
// raises its RateLimitExceededException with the permitted time.
TEST_F(PythonSdk, PyGithubBeyondBudgetRaisesRateLimitExceeded) {
  Stage s("github", "github", {"--limit", "5", "--window", "30", "--surprise", "2:0"}, {"--max-wait", "2"});
  START(s);
  const auto c = run_python("github_client.py", {"--base", s.proxy.url(), "--steps", "get,get,list,user"});
  expect_through_proxy(c, s, 4);
  ASSERT_EQ(c.calls.size(), 4u);
  expect_ok(c.calls[0], 2, c);
  for (std::size_t i = 1; i < c.calls.size(); ++i)
    expect_held_back(c.calls[i], "RateLimitExceededException", 403, 2, c);
  EXPECT_EQ(c.requests.size(), 4u) << c.describe();
  EXPECT_EQ(expect_fair(s)["requests"], 2);
}

// ---- python3-requests and python3-httpx (no profile: IETF RateLimit fields) ---------

void plain_within_budget(const std::string& lib) {
  Stage s("ietf", "", {"--limit", "3", "--window", "1", "--surprise", "4:0"}, {"--max-wait", "10"});
  START(s);
  const auto c = run_python("http_client.py",
                            {"--lib", lib, "--base", s.proxy.url(), "--calls", "8", "--parallel", "2"});
  expect_through_proxy(c, s, 8);
  for (const auto& call : c.calls) expect_ok(call, 10, c);
  EXPECT_EQ(c.requests.size(), 8u) << "the client retried:\n" << c.describe();
  const json st = expect_fair(s);
  EXPECT_GE(count_status(st, 429), 1) << st.dump(1);
}

TEST_F(PythonSdk, RequestsWithinBudget) { plain_within_budget("requests"); }
// urllib3's Retry would sleep on a 429's Retry-After: the proxy retried
// within the budget, so it never sees one.
TEST_F(PythonSdk, RequestsWithUrllib3RetryWithinBudget) { plain_within_budget("retry"); }

// A Retry for connection errors and 5xx, with respect_retry_after_header off
// (else urllib3 retries any 429 with Retry-After, whatever status_forcelist
// says, and sleeps until the permitted time): the 429 reaches the caller.
TEST_F(PythonSdk, RequestsWithUrllib3RetryBeyondBudgetGets429AtOnce) {
  Stage s("ietf", "", {"--limit", "5", "--window", "30", "--surprise", "2:0"}, {"--max-wait", "2"});
  START(s);
  const auto c = run_python("http_client.py", {"--lib", "retry-no-wait", "--base", s.proxy.url(), "--calls", "3"});
  expect_through_proxy(c, s, 3);
  ASSERT_EQ(c.calls.size(), 3u);
  expect_ok(c.calls[0], 2, c);
  for (std::size_t i = 1; i < c.calls.size(); ++i) expect_held_back(c.calls[i], "StatusError", 429, 2, c);
  EXPECT_EQ(c.requests.size(), 3u) << c.describe();
  EXPECT_EQ(expect_fair(s)["requests"], 2);
}

// httpx gives up after 5 s: callers send Abide-Max-Wait below it, and every
// call ends with an answer, none with a timeout.
TEST_F(PythonSdk, HttpxWithinItsTimeout) {
  Stage s("ietf", "", {"--limit", "3", "--window", "1", "--surprise", "4:0"});
  START(s);
  const auto c = run_python("http_client.py", {"--lib", "httpx", "--base", s.proxy.url(), "--calls", "8", "--parallel",
                                               "2", "-H", "Abide-Max-Wait: 3"});
  expect_through_proxy(c, s, 8);
  for (const auto& call : c.calls) {
    EXPECT_LT(call.value("elapsed_s", 1e9), 3 + kMargin) << call.dump();
    if (!call.value("ok", false)) {  // a wait past 3 s: the permitted time, at once
      EXPECT_EQ(call["error"].value("status", 0), 429) << call.dump();
      EXPECT_GT(retry_after_s(call), 0) << call.dump();
    }
  }
  EXPECT_EQ(c.requests.size(), 8u) << c.describe();
  expect_fair(s);
}

TEST_F(PythonSdk, HttpxBeyondBudgetGets429AtOnce) {
  Stage s("ietf", "", {"--limit", "5", "--window", "30", "--surprise", "2:0"});
  START(s);
  const auto c = run_python("http_client.py",
                            {"--lib", "httpx", "--base", s.proxy.url(), "--calls", "3", "-H", "Abide-Max-Wait: 3"});
  expect_through_proxy(c, s, 3);
  ASSERT_EQ(c.calls.size(), 3u);
  expect_ok(c.calls[0], 3, c);
  for (std::size_t i = 1; i < c.calls.size(); ++i) expect_held_back(c.calls[i], "StatusError", 429, 3, c);
  EXPECT_EQ(expect_fair(s)["requests"], 2);
}

}  // namespace
}  // namespace abide::test::sdk

#endif  // ABIDE_CLI_PATH
