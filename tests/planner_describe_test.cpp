// abide/planner.h, the words: what describe() says, word for word, and the
// same words from its cheap implementation.
#include "support/planner_fixture.h"

namespace abide {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using test::kWall;
using test::kMono;
using test::ConstRandom;
using test::response;
using test::with_delay;
using test::quota;
using test::config;
using test::decide;
using test::Generated;
using test::generate;

// ---- words --------------------------------------------------------------------------------------

TEST(Planner, DescribeSaysWhatWonWithNumbers) {
  const Signals s = with_delay(429, 30s);
  PlanInput in(s);
  in.attempt = 2;
  const Planner planner(config());
  ConstRandom rng(0.5);
  EXPECT_EQ(planner.describe(planner.decide(in, rng), in),
            "Retry in 30 s: the server's Retry-After asks for 30 s (local backoff 2 s).");
  in.deadline = kMono + 12s;
  EXPECT_THAT(planner.describe(planner.decide(in, rng), in), HasSubstr("after the deadline (12 s left)"));
  in.method = "POST";
  EXPECT_THAT(planner.describe(planner.decide(in, rng), in), HasSubstr("POST is not idempotent"));
}

// A limited answer the vendor documents as a refusal of a request it did not
// process lets a POST without a key repeat, within the rest of the rules: not
// against the server's "do not retry", not past the deadline.
TEST(Planner, AnUnprocessedRefusalLetsAPostRepeat) {
  Signals s = with_delay(429, 2s);
  s.unprocessed = true;
  PlanInput in(s);
  in.method = "POST";
  const Plan p = decide(config(), in);
  EXPECT_EQ(p.decision, Decision::kRetry);
  EXPECT_TRUE(p.notes.has(PlanNote::kRefusedUnprocessed));
  EXPECT_EQ(p.wait, 2s);
  const Signals plain = with_delay(429, 2s);
  PlanInput keyless(plain);
  keyless.method = "POST";
  const Plan kept = decide(config(), keyless);
  EXPECT_EQ(kept.decision, Decision::kNotRetryable);
  EXPECT_FALSE(kept.notes.has(PlanNote::kRefusedUnprocessed));
  Signals no = with_delay(429, 2s);
  no.unprocessed = true;
  no.should_retry = false;
  PlanInput told(no);
  told.method = "POST";
  const Plan verdict = decide(config(), told);
  EXPECT_EQ(verdict.decision, Decision::kNotRetryable);
  EXPECT_EQ(verdict.reason, Reason::kServerSaysNoRetry);
  // A transport failure after sending is still ambiguous: no signals, no refusal.
  PlanInput lost(TransportError{true, kWall, kMono});
  lost.method = "POST";
  const Plan l = decide(config(), lost);
  EXPECT_EQ(l.decision, Decision::kNotRetryable);
  EXPECT_TRUE(l.ambiguous);
}

// ---- the words stay the words (issue 14: describe() made cheap) ----------------------------

// describe() over many generated plans, every Reason and basis among them,
// with the server's verdict, policy names (with bytes to escape) and full
// refills mixed in. The digest is of the sentences the plain implementation
// (one std::string per piece, joined by concatenation) gave for these very
// inputs: a change of a single byte of any sentence changes it. A deliberate
// change of words updates it, and says so.
std::uint64_t fnv1a(std::uint64_t h, std::string_view s) {
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

TEST(Planner, DescribeGivesTheSameWordsAsThePlainImplementation) {
  std::mt19937_64 g(20261201);
  Generated x;
  std::uint64_t digest = 14695981039346656037ULL;
  std::set<Reason> reasons;
  std::set<Basis> bases;
  for (int i = 0; i < 20000; ++i) {
    generate(g, x);
    if (g() % 4 == 0) {
      x.signals.should_retry = g() % 2 == 0;
      x.signals.should_retry_source = g() % 3 == 0 ? "" : "x-should-retry";
    }
    for (QuotaObservation& q : x.signals.quota) {
      if (g() % 3 == 0) q.policy = g() % 2 ? "per\x1b[31mminute" : "";
      q.reset_is_full_refill = g() % 4 == 0;
    }
    // generate() copied the signals' address into the input; the copy moved.
    if (x.input.outcome.signals != nullptr) x.input.outcome = Outcome(x.signals);
    SeededRandom rng(g());
    const Planner planner(x.config);
    const Plan p = planner.decide(x.input, rng);
    reasons.insert(p.reason);
    bases.insert(p.basis);
    digest = fnv1a(digest, planner.describe(p, x.input));
    digest = fnv1a(digest, "\n");
  }
  EXPECT_EQ(reasons.size(), 10u);  // all but kBudgetExhausted (no budget here), checked below
  EXPECT_EQ(bases.size(), 5u);
  EXPECT_EQ(digest, 0x208f1cce4b571a3cULL) << std::hex << digest;
}

// One sentence of each kind, word for word.
TEST(Planner, DescribeSentencesWordForWord) {
  const Planner planner(config());
  ConstRandom rng(0.5);
  const auto words = [&](const PlanInput& in) { return planner.describe(planner.decide(in, rng), in); };
  std::vector<std::string> got;
  {
    const Signals s = response(200);
    got.push_back(words(PlanInput(s)));
  }
  {
    const Signals s = with_delay(200, 30s);
    got.push_back(words(PlanInput(s)));
  }
  {
    const Signals s = with_delay(304, 2500ms);
    got.push_back(words(PlanInput(s)));
  }
  {
    const Signals s = with_delay(404, 30s);
    got.push_back(words(PlanInput(s)));
  }
  {
    Signals s = with_delay(503, 5s);
    s.should_retry = true;
    s.should_retry_source = "x-should-retry";
    PlanInput in(s);
    in.method = "PATCH";
    got.push_back(words(in));
  }
  {
    Signals s = response(503);
    s.should_retry = false;
    got.push_back(words(PlanInput(s)));
  }
  {
    PlanInput in(TransportError{true, kWall, kMono});
    in.method = "POST";
    got.push_back(words(in));
  }
  {
    Signals s = response(429);
    s.quota.push_back(quota(0, 42s));
    PlanInput in(s);
    in.attempt = 5;
    got.push_back(words(in));
  }
  {
    Signals s = response(429);
    QuotaObservation q = quota(0, 3600s, "github");
    q.reset_is_full_refill = true;
    s.quota.push_back(q);
    PlannerConfig c = config();
    c.max_wait = 60s;
    const Planner p(c);
    PlanInput in(s);
    got.push_back(p.describe(p.decide(in, rng), in));
  }
  {
    Signals s = with_delay(429, 3600s);
    s.quota.push_back(quota(0, 7200s));
    PlannerConfig c = config();
    c.max_wait = 60s;
    const Planner p(c);
    PlanInput in(s);
    got.push_back(p.describe(p.decide(in, rng), in));
  }
  {
    const Signals s = with_delay(503, 90s);
    PlanInput in(s);
    in.deadline = kMono + 10s;
    got.push_back(words(in));
    in.deadline = kMono - 1s;
    got.push_back(words(in));
  }
  {
    const Signals s = response(500);
    PlanInput in(s);
    in.attempt = 3;
    PlannerConfig c = config(Jitter::kFull);
    const Planner p(c);
    got.push_back(p.describe(p.decide(in, rng), in));
  }
  {
    const Signals s = with_delay(429, 1500ms);
    PlanInput in(s);
    const Planner p(config(Jitter::kEqual, 1s));
    got.push_back(p.describe(p.decide(in, rng), in));
  }
  {
    PlannerConfig c = config();
    c.budget = std::make_shared<RetryBudget>(1.0, 0.001);
    (void)c.budget->try_spend();  // now empty
    const Planner p(c);
    const Signals s = response(503);
    const PlanInput in(s);
    got.push_back(p.describe(p.decide(in, rng), in));
  }
  const std::vector<std::string> want = {
      R"(The request succeeded (status 200); nothing to retry.)",
      R"(The request succeeded (status 200); nothing to retry, but the server permits the next request only in 30 s (the server's Retry-After asks for 30 s).)",
      R"(The response (status 304) is not a failure; nothing to retry, and the server asks for 2.5 s before the next request.)",
      R"(The status 404 is not retryable; the server would permit a new request in 30 s.)",
      R"(PATCH is not idempotent and the request carried no idempotency key, so it is not repeated automatically; a retry would be permitted in 5 s (the server's x-should-retry says it may be retried, which grants no such permission).)",
      R"(The server says not to retry (retry verdict: false), so the status 503 is not repeated; a new request would be permitted in 1 s.)",
      R"(The connection failed after the POST request was sent, so it may have been applied: reconcile before repeating (a retry would be permitted in 1 s).)",
      R"(Attempt 5 of 5 was the last; a retry would be permitted in 42 s (the RateLimit quota "default" is exhausted for 42 s).)",
      R"(Retry in 36 s: the vendor quota "default" (github) is exhausted; its reset counts to a full refill, and the next request's units refill in 36 s (local backoff 1 s).)",
      R"(Deferred: the RateLimit quota "default" is exhausted for 7200 s, longer than the acceptable 60 s; come back in 7200 s.)",
      R"(The earliest permitted retry is in 90 s (the server's Retry-After asks for 90 s), after the deadline (10 s left); it is not cut short.)",
      R"(The earliest permitted retry is in 90 s (the server's Retry-After asks for 90 s), after the deadline that had already passed; it is not cut short.)",
      R"(Retry in 2 s: the local backoff for attempt 3 is 4 s nominal with full jitter.)",
      R"(Retry in 1.75 s: the server's Retry-After asks for 1.5 s (local backoff 0.5 s), plus 0.25 s of jitter.)",
      R"(The client's retry budget is empty (too many recent retries), so this one is not retried; a retry would be permitted in 1 s.)"};
  EXPECT_EQ(got, want);
}

}  // namespace
// The sentence of most attempts is a constant with static storage, so an
// engine keeps it without allocating: the same words as describe(), for every
// 2xx without a server hint, and nothing for any sentence that must be made.
TEST(Describe, ConstantSentenceIsDescribesWordsForA2xxWithoutAHint) {
  const Planner planner(config());
  SeededRandom rng(1);
  for (const int code : {200, 201, 204, 299}) {
    const Signals s = response(code);
    const PlanInput in(s);
    const Plan p = planner.decide(in, rng);
    const std::string_view fixed = Planner::constant_sentence(p);
    EXPECT_EQ(fixed, planner.describe(p, in)) << code;
    EXPECT_EQ(fixed.data()[fixed.size()], '\0') << code;
    EXPECT_EQ(Planner::constant_sentence(p).data(), fixed.data()) << code;  // the same storage each time
  }
  const auto constant_for = [&](const Signals& s) {
    return Planner::constant_sentence(planner.decide(PlanInput(s), rng));
  };
  EXPECT_TRUE(constant_for(with_delay(200, std::chrono::seconds{30})).empty());  // a hint: the sentence says it
  EXPECT_TRUE(constant_for(response(304)).empty());
  EXPECT_TRUE(constant_for(response(404)).empty());
  EXPECT_TRUE(constant_for(response(503)).empty());
  EXPECT_TRUE(Planner::constant_sentence(planner.decide(PlanInput(TransportError{}), rng)).empty());
  Plan odd;  // a hand-made "succeeded" outside 2xx is described, not looked up
  odd.reason = Reason::kSucceeded;
  odd.status = 404;
  EXPECT_TRUE(Planner::constant_sentence(odd).empty());
  EXPECT_EQ(planner.describe(odd, PlanInput(TransportError{})),
            "The request succeeded (status 404); nothing to retry.");
}

}  // namespace abide
