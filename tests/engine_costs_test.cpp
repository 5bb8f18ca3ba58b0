// The engine with costs and bodies: requests to an LLM API reserve their
// tokens and settle them with the answer's usage, and a wait stated only in a
// limited answer's body is obeyed.
#include "support/engine_fixture.h"

namespace abide::engine {
namespace {

using namespace std::chrono_literals;

INSTANTIATE_TEST_SUITE_P(Both, EngineForms, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? std::string("Blocking") : std::string("Driven"); });

// ---- costs: requests to an LLM API reserve their tokens --------------------------------

// Runs requests one after another on one engine (the driven form), each over
// its own script; returns when each was sent.
struct SharedEngine {
  InstantClock clock;
  std::unique_ptr<Engine> engine;
  // burst: a window's tokens may all go at once (no smooth spacing), so
  // that only what is left decides.
  explicit SharedEngine(bool burst = false) {
    Config c = quick_config();
    c.mono = &clock.monotonic();
    c.wall = &clock.wall();
    c.random = std::make_shared<SeededRandom>(7);
    if (burst) {
      PacerConfig pc;
      pc.rules.pacing = Pacing::kBurst;
      c.pacer = std::make_shared<Pacer>(pc, nullptr, clock.monotonic(), clock.wall());
    }
    engine = std::make_unique<Engine>(c);
  }
  RequestOutcome run(const Request& req, const std::vector<Answer>& script, std::vector<MonoTime>& sent) {
    Machine m(*engine, req, [](std::string_view) { return true; });
    std::size_t next = 0;
    for (int guard = 0; guard < 1000; ++guard) {
      const Step step = m.next();
      if (step.kind == Step::Kind::kFinished) break;
      if (step.kind == Step::Kind::kSend) {
        sent.push_back(clock.mono_now());
        if (next >= script.size()) {
          ADD_FAILURE() << "more sends than scripted";
          m.cancel(false);
          continue;
        }
        play(script[next++], m, clock, nullptr);
        continue;
      }
      clock.advance_to(step.until);
    }
    RequestOutcome out = m.take_outcome();
    last = out;
    return out;
  }
  RequestOutcome last;  // the outcome run() returned last
};

Request chat(int max_tokens) {
  Request r;
  r.method = "POST";
  r.url = "https://api.openai.com/v1/chat/completions";
  r.body = R"({"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":)" + std::to_string(max_tokens) +
           "}";
  return r;
}

Answer chat_answer(std::string tokens_left, std::string body) {
  Answer a = status(200,
                    {{"x-ratelimit-limit-tokens", "10000"},
                     {"x-ratelimit-remaining-tokens", std::move(tokens_left)},
                     {"x-ratelimit-reset-tokens", "18s"}},
                    {std::move(body)});
  return a;
}

// The estimate (max_tokens: 3,000 of a 10,000-token quota) is reserved; the
// answer's usage (100) gives the rest back, so a request of 9,000 goes at
// once. Without the usage the 9,000 wait for the window's end.
TEST(EngineCosts, AnAnswersUsageGivesItsUnusedTokensToTheNextRequest) {
  for (const bool with_usage : {true, false}) {
    SharedEngine e;
    std::vector<MonoTime> sent;
    const std::string usage = with_usage ? R"({"usage":{"prompt_tokens":1,"completion_tokens":99,"total_tokens":100}})"
                                          : R"({"choices":[]})";
    ASSERT_TRUE(e.run(chat(3000), {chat_answer("7000", usage)}, sent).done());
    const MonoTime answered = e.clock.mono_now();
    ASSERT_TRUE(e.run(chat(9000), {chat_answer("900", usage)}, sent).done());
    ASSERT_EQ(sent.size(), 2u);
    if (with_usage) {
      EXPECT_EQ(sent[1], answered) << "the given-back tokens were not used";
    } else {
      // 7,000 left of 10,000, full again in 18 s: 9,000 wait for that.
      EXPECT_GE(sent[1] - answered, 17s);
    }
  }
}

// A caller's own cost replaces the estimate.
TEST(EngineCosts, ACallersCostReplacesTheEstimate) {
  SharedEngine e;
  std::vector<MonoTime> sent;
  ASSERT_TRUE(e.run(chat(3000), {chat_answer("7000", "{}")}, sent).done());
  const MonoTime answered = e.clock.mono_now();
  Request small = chat(9000);
  small.costs = {{"tokens", 500}};
  ASSERT_TRUE(e.run(small, {chat_answer("6500", "{}")}, sent).done());
  EXPECT_EQ(sent[1], answered);
  Request large = chat(10);
  large.costs = {{"tokens", 8000}};
  const MonoTime second = e.clock.mono_now();
  ASSERT_TRUE(e.run(large, {chat_answer("9000", "{}")}, sent).done());
  EXPECT_GT(sent[2] - second, 1s) << "8,000 tokens do not fit in the 6,500 left";
  // The attempt says which quota held it, with its counts.
  ASSERT_EQ(e.last.attempts.size(), 1u);
  ASSERT_TRUE(e.last.attempts[0].held);
  EXPECT_EQ(describe(*e.last.attempts[0].held), "tokens: 6,500 of 10,000 left, 8,000 needed");
}

// A request held past its budget by a token quota is deferred, and says
// which quota and by how much, in the outcome and its reason.
TEST(EngineCosts, ADeferralSaysWhichQuotaHeldItBack) {
  SharedEngine e;
  std::vector<MonoTime> sent;
  ASSERT_TRUE(e.run(chat(3000), {chat_answer("1850", "{}")}, sent).done());
  Request req = chat(4099);  // "hi" and 4,099 out: 4,100 tokens
  req.send_by = e.clock.mono_now() + 1s;
  const RequestOutcome out = e.run(req, {}, sent);
  EXPECT_EQ(out.kind, OutcomeKind::kDeferred);
  ASSERT_TRUE(out.held);
  EXPECT_EQ(describe(*out.held), "tokens: 1,850 of 10,000 left, 4,100 needed");
  EXPECT_NE(out.reason.find("(tokens: 1,850 of 10,000 left, 4,100 needed)"), std::string::npos) << out.reason;
}

// A limited answer used nothing of what its send reserved; the retry
// reserves again, and the request completes.
TEST(EngineCosts, ALimitedAnswerGivesItsReservationBack) {
  SharedEngine e(/*burst=*/true);
  std::vector<MonoTime> sent;
  ASSERT_TRUE(e.run(chat(3000), {chat_answer("7000", "{}")}, sent).done());
  // 5,000 of the 7,000 left are reserved; the refusal gives them back, and
  // the server says 6,000 are left: the retry fits.
  Answer limited = status(429, {{"x-ratelimit-limit-tokens", "10000"},
                                {"x-ratelimit-remaining-tokens", "6000"},
                                {"x-ratelimit-reset-tokens", "24s"},
                                {"retry-after-ms", "200"}});
  ASSERT_TRUE(e.run(chat(5000), {limited, chat_answer("1000", "{}")}, sent).done());
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_GE(sent[2] - sent[1], 210ms);
  EXPECT_LT(sent[2] - sent[1], 1s) << "the refused request's tokens were kept as spent";
}


// ---- waits stated in a limited answer's body ---------------------------------------------

const ProfileRegistry& body_hint_profiles() {
  static const ProfileRegistry r = [] {
    ProfileRegistry reg;
    auto a = reg.load_text(R"({"name": "gem", "hosts": ["gemini.test"], "limited_statuses": [429],
                                "body_hints": ["google_retry_info"]})",
                           "gem.json");
    EXPECT_TRUE(a.has_value());
    auto b = reg.load_text(R"({"name": "chat", "hosts": ["chat.test"], "limited_statuses": [429],
                                "body_hints": ["try_again_sentence"]})",
                           "chat.json");
    EXPECT_TRUE(b.has_value());
    return reg;
  }();
  return r;
}

Config hinted_config() {
  Config c = quick_config();
  c.registry = &body_hint_profiles();
  return c;
}

const std::string kRetryInfo =
    R"({"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED",)"
    R"("details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"52s"}]}})";

// Gemini states the wait only in the body: no retry before it, and the
// retried answer's body never reaches the caller.
TEST_P(EngineForms, AWaitStatedOnlyInTheBodyIsObeyed) {
  const Result r =
      run_form(blocking(), get("https://gemini.test/v1beta/models/m:generateContent"),
               {status(429, {}, {kRetryInfo.substr(0, 40), kRetryInfo.substr(40)}), ok({"fine"})}, hinted_config());
  ASSERT_EQ(r.out.kind, OutcomeKind::kDone) << r.out.reason;
  ASSERT_EQ(r.sent.size(), 2u);
  EXPECT_GE(r.sent[1].at - r.sent[0].at, 10ms + 52s);
  EXPECT_LT(r.sent[1].at - r.sent[0].at, 10ms + 53s);
  EXPECT_EQ(r.body, (std::vector<std::string>{"fine"}));
  EXPECT_NE(r.out.attempts[0].reason.find("retryDelay"), std::string::npos) << r.out.attempts[0].reason;
}

// When that answer ends the request (its wait is past the deadline), its
// body is the caller's, whole, and the permitted time is the body's.
TEST_P(EngineForms, ABodyReadForItsWaitReachesTheCallerWhenItIsFinal) {
  Request req = get("https://gemini.test/v1beta/models/m:generateContent");
  InstantClock probe;
  req.deadline = probe.mono_now() + 5s;
  const Result r = run_form(blocking(), req, {status(429, {}, {kRetryInfo})}, hinted_config());
  EXPECT_EQ(r.out.kind, OutcomeKind::kDeadlineExceeded) << r.out.reason;
  EXPECT_EQ(r.body, (std::vector<std::string>{kRetryInfo}));
  ASSERT_TRUE(r.out.not_before_mono);
  EXPECT_GE(*r.out.not_before_mono - r.t0, 52s);
}

// A sentence in an error message is the last resort: it never shortens a
// header's wait, and stands in for none.
TEST_P(EngineForms, ATryAgainSentenceNeverShortensAHeadersWait) {
  const std::string sentence = R"({"error":{"message":"Rate limit reached. Please try again in 1.5s."}})";
  const Result longer = run_form(blocking(), get("https://chat.test/v1/x"),
                                 {status(429, {{"Retry-After", "5"}}, {sentence}), ok()}, hinted_config());
  ASSERT_EQ(longer.sent.size(), 2u);
  EXPECT_GE(longer.sent[1].at - longer.sent[0].at, 10ms + 5s);
  const Result alone =
      run_form(blocking(), get("https://chat.test/v1/x"), {status(429, {}, {sentence}), ok()}, hinted_config());
  ASSERT_EQ(alone.sent.size(), 2u);
  EXPECT_GE(alone.sent[1].at - alone.sent[0].at, 10ms + 1500ms);
  EXPECT_LT(alone.sent[1].at - alone.sent[0].at, 10ms + 2s);
}

}  // namespace
}  // namespace abide::engine
