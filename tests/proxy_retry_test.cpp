// `abide proxy` end to end: every style paced and retried within the
// caller's budget and never early, deferral, and idempotency; real processes
// on 127.0.0.1 and real callers whose own retries are off.
#include "support/proxy_fixture.h"
#include "support/run.h"

#ifdef ABIDE_CLI_PATH

namespace abide::test {
namespace {


// ---- every style: paced and retried within the budget, never early ----------

struct StyleCase {
  std::string style;
  std::string profile;  // the vendor profile its fields need ("" for none)
  std::string client;   // python, curl or node
};

// How gtest (and ctest's test list) names a case: by its style.
void PrintTo(const StyleCase& c, std::ostream* os) { *os << c.style << " via " << c.client; }

class ProxyStyle : public ::testing::TestWithParam<StyleCase> {};

// Several callers through one proxy against a small window: every request
// ends 200 within its Abide-Max-Wait, and the server saw no premature retry.
TEST_P(ProxyStyle, EveryCallerGets200WithinItsBudgetAndNoRequestIsEarly) {
  const StyleCase& c = GetParam();
  REQUIRE_PROGRAM(program, c.client == "python" ? std::string("python3") : c.client);
  Mock mock({"--style", c.style, "--limit", "5", "--window", "1", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  std::vector<std::string> args = with(upstream(mock), {"--max-wait", "30", "--max-attempts", "20"});
  if (!c.profile.empty()) args.insert(args.end(), {"--profile", c.profile});
  Proxy proxy(args);
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();

  constexpr int kRequests = 15;
  constexpr double kBudget = 20;
  const std::string budget = "Abide-Max-Wait: 20";
  std::vector<Answer> answers;
  std::string detail;
  if (c.client == "curl") {
    // Three curl processes at once, five requests each on a kept-alive connection.
    std::vector<ClientRun> runs(3);
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t)
      threads.emplace_back([&, t] {
        std::vector<std::string> urls;
        for (int i = 0; i < kRequests / 3; ++i) urls.push_back(proxy.url("/items/" + std::to_string(t * 10 + i)));
        runs[static_cast<std::size_t>(t)] = run_curl(program, urls, {budget});
      });
    for (auto& th : threads) th.join();
    for (const auto& r : runs) {
      EXPECT_EQ(r.raw.exit_code, 0) << describe(r);
      answers.insert(answers.end(), r.answers.begin(), r.answers.end());
      detail += describe(r);
    }
  } else {
    const auto r = run_client(program, c.client == "node" ? "client.mjs" : "client.py",
                              {"--url", proxy.url("/items/1"), "-H", budget, "--count", std::to_string(kRequests),
                               "--parallel", "4", "--keep-alive"});
    EXPECT_EQ(r.raw.exit_code, 0) << describe(r);
    answers = r.answers;
    detail = describe(r);
  }
  ASSERT_EQ(answers.size(), static_cast<std::size_t>(kRequests)) << detail;
  for (const auto& a : answers) {
    EXPECT_EQ(a.status, 200) << detail;
    EXPECT_EQ(a.outcome, "done") << detail;
    EXPECT_FALSE(a.attempts.empty()) << detail;
    EXPECT_GE(number(a.waited), 0) << detail;
    EXPECT_LE(number(a.waited), kBudget) << detail;
  }
  const json server = mock.stats();
  ASSERT_TRUE(server.is_object());
  EXPECT_EQ(server["totals"]["premature"], 0) << server["totals"].dump();
  EXPECT_EQ(server["totals"]["accepted"], kRequests) << server["totals"].dump();
  proxy.stop_cleanly();
}

INSTANTIATE_TEST_SUITE_P(Styles, ProxyStyle,
                         ::testing::Values(StyleCase{"draft11", "", "python"}, StyleCase{"draft-legacy", "", "python"},
                                           StyleCase{"github", "github", "python"},
                                           StyleCase{"openai", "openai", "node"},
                                           StyleCase{"retry-after-seconds", "", "curl"},
                                           StyleCase{"retry-after-date", "", "python"},
                                           StyleCase{"malformed", "", "python"}, StyleCase{"draft12", "", "python"}),
                         [](const ::testing::TestParamInfo<StyleCase>& p) {
                           std::string n = p.param.style;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// No hint at all: the proxy's own backoff, still all 200 and none early
// (nothing stated, so nothing can be premature; the count shows no storm).
TEST(ProxyStyleNone, BacksOffWithoutHintsUntilEveryCallerGets200) {
  REQUIRE_PROGRAM(python, "python3");
  Mock mock({"--style", "none", "--limit", "4", "--window", "1", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "30", "--max-attempts", "20"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  constexpr int kRequests = 8;
  const auto r = run_client(python, "client.py",
                            {"--url", proxy.url("/n"), "-H", "Abide-Max-Wait: 25", "--count", std::to_string(kRequests),
                             "--parallel", "4", "--keep-alive"});
  ASSERT_EQ(r.answers.size(), static_cast<std::size_t>(kRequests)) << describe(r);
  for (const auto& a : r.answers) {
    EXPECT_EQ(a.status, 200) << describe(r);
    EXPECT_EQ(a.outcome, "done") << describe(r);
  }
  const json server = mock.stats();
  EXPECT_EQ(server["totals"]["premature"], 0);
  EXPECT_EQ(server["totals"]["accepted"], kRequests);
  // Backoff, not a busy loop: far fewer limited answers than a retry-at-once client would cause.
  EXPECT_LT(server["totals"]["limited"].get<int>(), 40) << server["totals"].dump();
  proxy.stop_cleanly();
}

// An upstream on a host no profile names, whose answers carry one vendor's
// distinctive quota fields: named once on stderr with the flags that read
// them; with --profile auto, read with that profile (paced on them, and
// answered in its dialect).
TEST(ProxyProfiles, FieldsOfAVendorOnAnyHostAreNamedOnceOrAdopted) {
  REQUIRE_PROGRAM(python, "python3");
  for (const bool adopt : {false, true}) {
    Mock mock({"--style", "openai", "--limit", "4", "--window", "2"});
    ASSERT_GT(mock.port(), 0);
    std::vector<std::string> args = upstream(mock);
    if (adopt) args = with(args, {"--profile", "auto"});
    Proxy proxy(args);
    ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
    const auto r = run_client(python, "client.py",
                              {"--url", proxy.url("/v1/models"), "-H", "Abide-Max-Wait: 20", "--count", "8"});
    ASSERT_EQ(r.answers.size(), 8u) << describe(r);
    const RunResult stopped = proxy.stop_cleanly();
    const std::string said = "carry the openai profile's quota fields (x-ratelimit-";
    const std::size_t first = stopped.err.find(said);
    ASSERT_NE(first, std::string::npos) << stopped.err;
    EXPECT_EQ(stopped.err.find(said, first + 1), std::string::npos) << "said more than once:\n" << stopped.err;
    if (!adopt) {
      EXPECT_NE(stopped.err.find("give --profile openai, or --upstream URL,profile=openai, or --profile auto"),
                std::string::npos)
          << stopped.err;
      continue;
    }
    EXPECT_NE(stopped.err.find("read with it from now on (--profile auto)"), std::string::npos) << stopped.err;
    for (const auto& a : r.answers) EXPECT_EQ(a.status, 200) << describe(r);
    EXPECT_EQ(mock.stats()["totals"]["premature"], 0) << mock.stats()["totals"].dump();
  }
}

// ---- deferral -----------------------------------------------------------------

// A server wait longer than the caller's Abide-Max-Wait: answered at once
// with the server's 429, the outcome, a Retry-After not shorter than the
// server's wait and the permitted time; the proxy does not retry for it, and
// a later caller within the cooldown is answered without a request upstream.
TEST(ProxyDeferral, AWaitBeyondTheCallersBudgetIsAnsweredAtOnceWithThePermittedTime) {
  REQUIRE_PROGRAM(python, "python3");
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "30", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "60"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const double t0 = unix_now();  // the mock's window starts at the next request: ends at t0 + 30 or later
  const auto first = run_client(python, "client.py", {"--url", proxy.url("/a")});
  ASSERT_EQ(first.answers.size(), 1u) << describe(first);
  EXPECT_EQ(first.answers[0].status, 200);

  const auto second = run_client(python, "client.py", {"--url", proxy.url("/a"), "-H", "Abide-Max-Wait: 5"});
  ASSERT_EQ(second.answers.size(), 1u) << describe(second);
  const Answer& a = second.answers[0];
  EXPECT_EQ(a.status, 429) << describe(second);
  EXPECT_EQ(a.outcome, "deferred");  // the budget is the longest acceptable wait, not a deadline
  EXPECT_LT(a.head_s - a.start_s, 4.0) << "held instead of answered at once";
  // The server's wait ends at t0 + 30 at the earliest; asked after the first
  // request, it is still ~30 s away. Retry-After never says less than what remains.
  const long long ra = whole_seconds(a.retry_after);
  EXPECT_GE(static_cast<double>(ra), t0 + 30 - unix_now() - 1) << a.retry_after;
  EXPECT_LE(ra, 31) << a.retry_after;
  const auto nb = rfc3339_unix(a.not_before);
  ASSERT_TRUE(nb) << a.not_before;
  EXPECT_GE(*nb, t0 + 29) << a.not_before;
  EXPECT_LE(*nb, unix_now() + 31) << a.not_before;
  EXPECT_EQ(a.attempts, "1");
  EXPECT_EQ(mock.requests(), 2);

  // Another caller within the cooldown: nothing goes upstream.
  const auto third = run_client(python, "client.py", {"--url", proxy.url("/b"), "-H", "Abide-Max-Wait: 2"});
  ASSERT_EQ(third.answers.size(), 1u) << describe(third);
  EXPECT_EQ(third.answers[0].status, 429);
  EXPECT_EQ(third.answers[0].outcome, "deferred");
  EXPECT_GE(whole_seconds(third.answers[0].retry_after), 20) << third.answers[0].retry_after;
  EXPECT_TRUE(rfc3339_unix(third.answers[0].not_before)) << third.answers[0].not_before;
  std::this_thread::sleep_for(300ms);  // a retry the proxy might wrongly still send would show now
  EXPECT_EQ(mock.requests(), 2);
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0);
  proxy.stop_cleanly();
}

// ---- idempotency ------------------------------------------------------------

// A POST without Idempotency-Key is sent once: its 429 comes back as
// not_retryable. With a key, it is retried to 200 after the wait.
// Callers held back get answers their SDKs obey: "do not retry" in the
// upstream's dialect (x-should-retry without a profile), and once the key was
// limited, the upstream's own limited answer (status, content type, JSON
// body) with fresh times, never a status of one answer with a body of another.
TEST(ProxyDeferral, HeldBackCallersGetTheUpstreamsLimitedAnswerAndNoRetry) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "30", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(upstream(mock));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto get = [&](const std::string& target, const std::string& budget) {
    return parse_answer(raw_exchange(proxy.port(), "GET " + target + " HTTP/1.1\r\nHost: p\r\nAbide-Max-Wait: " + budget +
                                                       "\r\nConnection: close\r\n\r\n"));
  };
  EXPECT_EQ(get("/a", "1").status, 200);
  const RawAnswer limited = get("/b", "1");  // the upstream's 429, streamed as it came
  ASSERT_EQ(limited.status, 429) << limited.body;
  EXPECT_EQ(limited.header("x-should-retry"), "false");
  EXPECT_EQ(limited.header("abide-outcome"), "deferred");
  EXPECT_NE(limited.body.find("rate_limited"), std::string::npos) << limited.body;
  ASSERT_EQ(mock.requests(), 2);

  const RawAnswer again = get("/c", "1");  // nothing sent: the same answer, with its own times
  EXPECT_EQ(mock.requests(), 2);
  EXPECT_EQ(again.status, 429);
  EXPECT_EQ(again.header("content-type"), limited.header("content-type"));
  EXPECT_EQ(again.body, limited.body);
  EXPECT_EQ(again.header("x-should-retry"), "false");
  EXPECT_EQ(again.header("abide-attempts"), "0");
  EXPECT_EQ(again.header("abide-outcome"), "deferred");
  EXPECT_GE(whole_seconds(again.header("retry-after")), 25) << again.header("retry-after");
  EXPECT_TRUE(rfc3339_unix(again.header("abide-not-before"))) << again.header("abide-not-before");
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0);
  proxy.stop_cleanly();
}

// A key never limited gets a problem+json body of the proxy's own, with the
// permitted time where the SDKs look for a message.
TEST(ProxyDeferral, WithoutALimitedAnswerTheBodyIsProblemJson) {
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "30", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(upstream(mock));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto get = [&](const std::string& auth) {
    return parse_answer(raw_exchange(proxy.port(), "GET /x HTTP/1.1\r\nHost: p\r\nAuthorization: " + auth +
                                                       "\r\nAbide-Max-Wait: 0\r\nConnection: close\r\n\r\n"));
  };
  EXPECT_EQ(get("Bearer one").status, 200);
  // The HEAD of a limited answer keeps no body: its key has none to give again.
  const RawAnswer head = parse_answer(raw_exchange(
      proxy.port(), "HEAD /x HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer one\r\nAbide-Max-Wait: 0\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(head.status, 429);
  const RawAnswer a = get("Bearer one");
  EXPECT_EQ(a.status, 429);
  EXPECT_EQ(a.header("content-type"), "application/problem+json");
  const json j = json::parse(a.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << a.body;
  EXPECT_EQ(j["status"], 429);
  EXPECT_EQ(j["outcome"], "deferred");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("permitted at 20"), std::string::npos) << a.body;
  EXPECT_EQ(a.header("x-should-retry"), "false");
  proxy.stop_cleanly();
}

TEST(ProxyIdempotency, PostIsSentOnceWithoutAKeyAndRetriedWithOne) {
  REQUIRE_PROGRAM(python, "python3");
  // A window long enough that each POST (a Python start away) still meets it.
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "6", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "30"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto get = run_client(python, "client.py", {"--url", proxy.url("/orders")});
  ASSERT_EQ(get.answers.size(), 1u) << describe(get);
  ASSERT_EQ(get.answers[0].status, 200);

  const auto post = run_client(python, "client.py",
                               {"--url", proxy.url("/orders"), "--method", "POST", "--data", "{\"n\":1}", "-H",
                                "Content-Type: application/json", "-H", "Abide-Max-Wait: 20"});
  ASSERT_EQ(post.answers.size(), 1u) << describe(post);
  EXPECT_EQ(post.answers[0].status, 429);
  EXPECT_EQ(post.answers[0].outcome, "not_retryable");
  EXPECT_EQ(post.answers[0].attempts, "1");
  EXPECT_GE(whole_seconds(post.answers[0].retry_after), 0) << post.answers[0].retry_after;
  EXPECT_EQ(mock.requests(), 2);  // the GET and the one POST

  const auto keyed = run_client(python, "client.py",
                                {"--url", proxy.url("/orders"), "--method", "POST", "--data", "{\"n\":2}", "-H",
                                 "Idempotency-Key: order-2", "-H", "Abide-Max-Wait: 20"});
  ASSERT_EQ(keyed.answers.size(), 1u) << describe(keyed);
  EXPECT_EQ(keyed.answers[0].status, 200) << describe(keyed);
  EXPECT_EQ(keyed.answers[0].outcome, "done");
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0);
  proxy.stop_cleanly();
}

// OpenAI documents its 429 as a refusal of a request it did not process
// (the profile cites it): a keyless POST it limited is sent again within the
// caller's budget, after the permitted time, instead of being lost.
TEST(ProxyIdempotency, AKeylessPostARefusalLeftUnprocessedIsSentAgain) {
  REQUIRE_PROGRAM(python, "python3");
  // Quota fields only on the 429, as a gateway in front of it may send them.
  // A window long enough that the POST (a second Python start away, more on a
  // loaded machine) still meets the spent quota.
  Mock mock({"--style", "retry-after-seconds", "--limit", "1", "--window", "6", "--align", "first"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "30", "--profile", "openai"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto first = run_client(python, "client.py", {"--url", proxy.url("/v1/chat/completions")});
  ASSERT_EQ(first.answers.size(), 1u) << describe(first);
  ASSERT_EQ(first.answers[0].status, 200);
  const auto post = run_client(python, "client.py",
                               {"--url", proxy.url("/v1/chat/completions"), "--method", "POST", "--data",
                                "{\"model\":\"m\"}", "-H", "Content-Type: application/json", "-H", "Abide-Max-Wait: 20"});
  ASSERT_EQ(post.answers.size(), 1u) << describe(post);
  EXPECT_EQ(post.answers[0].status, 200) << describe(post);
  EXPECT_EQ(post.answers[0].outcome, "done");
  EXPECT_EQ(post.answers[0].attempts, "2");
  EXPECT_EQ(mock.stats()["totals"]["premature"], 0);
  proxy.stop_cleanly();
}

// A POST the upstream read and then dropped without answering may have been
// applied: 502 ambiguous, sent once.
TEST(ProxyIdempotency, PostWithoutAnAnswerIsAmbiguousAndNotRepeated) {
  REQUIRE_PROGRAM(python, "python3");
  Mock mock({"--limit", "100", "--window", "1"});
  ASSERT_GT(mock.port(), 0);
  Proxy proxy(with(upstream(mock), {"--max-wait", "10", "-v"}));
  ASSERT_GT(proxy.port(), 0) << proxy.err_so_far();
  const auto r = run_client(python, "client.py",
                            {"--url", proxy.url("/__hang?ms=100"), "--method", "POST", "--data", "x", "-H",
                             "Abide-Max-Wait: 10"});
  ASSERT_EQ(r.answers.size(), 1u) << describe(r);
  EXPECT_EQ(r.answers[0].status, 502) << describe(r);
  EXPECT_EQ(r.answers[0].outcome, "ambiguous");
  EXPECT_EQ(r.answers[0].attempts, "1");
  proxy.stop_cleanly();
}

}  // namespace
}  // namespace abide::test

#endif  // ABIDE_CLI_PATH
