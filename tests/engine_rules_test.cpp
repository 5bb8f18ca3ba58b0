// The engine's rules, each in both forms (the driven state machine and the
// blocking run), on a scripted transport and clocks that only move when told:
// nothing here sleeps.
#include "support/engine_fixture.h"
#include "support/pacer_fixture.h"

namespace abide::engine {
namespace {

using namespace std::chrono_literals;

INSTANTIATE_TEST_SUITE_P(Both, EngineForms, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? std::string("Blocking") : std::string("Driven"); });

TEST_P(EngineForms, DoneStreamsTheBodyInChunks) {
  const Result r = run_form(blocking(), get(), {ok({"hel", "lo ", "world"})});
  ASSERT_EQ(r.out.kind, OutcomeKind::kDone) << r.out.reason;
  ASSERT_EQ(r.out.attempts.size(), 1u);
  EXPECT_EQ(r.out.attempts[0].number, 1);
  EXPECT_EQ(r.out.attempts[0].status, 200);
  EXPECT_EQ(r.body, (std::vector<std::string>{"hel", "lo ", "world"}));
  EXPECT_EQ(r.out.body_bytes, 11u);
  ASSERT_TRUE(r.out.response);
  EXPECT_EQ(r.out.response->status, 200);
  EXPECT_FALSE(r.out.not_before_mono);
  EXPECT_EQ(r.out.waited, 0ns);
}

TEST_P(EngineForms, RetryAfterIsObeyedExactlyAndTheRetriedBodyIsDropped) {
  const Result r = run_form(blocking(), get(), {status(503, {{"Retry-After", "7"}}, {"busy", "page"}), ok({"a", "b"})});
  ASSERT_EQ(r.out.kind, OutcomeKind::kDone) << r.out.reason;
  ASSERT_EQ(r.sent.size(), 2u);
  ASSERT_EQ(r.out.attempts.size(), 2u);
  EXPECT_EQ(r.out.attempts[0].plan.decision, Decision::kRetry);
  EXPECT_EQ(r.out.attempts[0].plan.basis, Basis::kRetryAfter);
  // Received 10 ms after the first send; the retry goes exactly 7 s later.
  EXPECT_EQ(r.sent[1].at - r.sent[0].at, 10ms + 7s);
  EXPECT_EQ(r.out.waited, 7s);
  EXPECT_EQ(r.body, (std::vector<std::string>{"a", "b"}));  // "busy page" never reached the sink
  EXPECT_EQ(r.out.body_bytes, 2u);
}

TEST_P(EngineForms, MalformedRetryAfterIsNotZero) {
  Config c = quick_config();
  c.planner.backoff = BackoffPolicy(2s, 60s, Jitter::kNone);
  const Result r = run_form(blocking(), get(), {status(429, {{"Retry-After", "soon"}}), ok()}, c);
  ASSERT_EQ(r.out.kind, OutcomeKind::kDone) << r.out.reason;
  ASSERT_EQ(r.sent.size(), 2u);
  EXPECT_TRUE(r.out.attempts[0].plan.notes.has(PlanNote::kRetryAfterMalformed));
  EXPECT_EQ(r.out.attempts[0].plan.basis, Basis::kBackoff);
  EXPECT_GE(r.sent[1].at - r.sent[0].at, 10ms + 2s);  // the backoff, never "retry now"
}

TEST_P(EngineForms, PostWithoutIdempotencyKeyIsNotRepeated) {
  Request req = get();
  req.method = "POST";
  req.body = "pay";
  const Result r = run_form(blocking(), req, {status(503, {{"Retry-After", "1"}})});
  EXPECT_EQ(r.out.kind, OutcomeKind::kNotRetryable);
  EXPECT_EQ(r.sent.size(), 1u);
  EXPECT_EQ(r.out.attempts[0].plan.reason, Reason::kNotIdempotent);
  // The answer that ended the request is the caller's, body and all.
  EXPECT_EQ(r.body, (std::vector<std::string>{"error page"}));
}

TEST_P(EngineForms, PostWithIdempotencyKeyIsRepeated) {
  Request req = get();
  req.method = "POST";
  req.idempotency_key = "k-1";
  const Result r = run_form(blocking(), req, {status(503, {{"Retry-After", "1"}}), ok()});
  EXPECT_EQ(r.out.kind, OutcomeKind::kDone) << r.out.reason;
  EXPECT_EQ(r.sent.size(), 2u);
}

TEST_P(EngineForms, AnIdempotencyKeyFieldCountsOnlyWithAValue) {
  Request empty = get();
  empty.method = "POST";
  empty.headers = HeaderList{{"Idempotency-Key", ""}};
  const Result once = run_form(blocking(), empty, {status(503, {{"Retry-After", "1"}}), ok()});
  EXPECT_EQ(once.out.kind, OutcomeKind::kNotRetryable);
  EXPECT_EQ(once.sent.size(), 1u);
  Request keyed = empty;
  keyed.headers = HeaderList{{"Idempotency-Key", ""}, {"Idempotency-Key", "k-2"}};
  const Result twice = run_form(blocking(), keyed, {status(503, {{"Retry-After", "1"}}), ok()});
  EXPECT_EQ(twice.out.kind, OutcomeKind::kDone) << twice.out.reason;
  EXPECT_EQ(twice.sent.size(), 2u);
}

TEST_P(EngineForms, PostWhoseConnectionFailsAfterSendingIsAmbiguous) {
  Request req = get();
  req.method = "POST";
  Answer lost;
  lost.error = "connection reset";
  lost.sent = true;
  const Result r = run_form(blocking(), req, {lost});
  EXPECT_EQ(r.out.kind, OutcomeKind::kNotRetryable);
  EXPECT_TRUE(r.out.ambiguous);
  EXPECT_EQ(r.sent.size(), 1u);
  EXPECT_EQ(r.out.attempts[0].error, "connection reset");
  EXPECT_TRUE(r.out.attempts[0].sent);
}

TEST_P(EngineForms, PostRefusedBeforeSendingIsRepeated) {
  Request req = get();
  req.method = "POST";
  Answer refused;
  refused.error = "connection refused";
  refused.sent = false;
  const Result r = run_form(blocking(), req, {refused, ok()});
  EXPECT_EQ(r.out.kind, OutcomeKind::kDone) << r.out.reason;
  EXPECT_FALSE(r.out.ambiguous);
  EXPECT_EQ(r.sent.size(), 2u);
}

TEST_P(EngineForms, HintEndingAfterTheDeadlineIsDeadlineExceeded) {
  InstantClock probe_clock;  // the clocks start at the same instants in every run
  Request req = get();
  req.deadline = probe_clock.mono_now() + 30s;
  const Result r = run_form(blocking(), req, {status(503, {{"Retry-After", "60"}})});
  EXPECT_EQ(r.out.kind, OutcomeKind::kDeadlineExceeded) << r.out.reason;
  EXPECT_EQ(r.sent.size(), 1u);
  ASSERT_TRUE(r.out.not_before_mono);
  EXPECT_EQ(*r.out.not_before_mono, r.sent[0].at + 10ms + 60s);  // the permitted time, not the deadline
  EXPECT_EQ(r.out.waited, 0ns);
}

// send_by is the longest acceptable wait (rule 5): a hint past it is
// deferred; a deadline before it is still a deadline.
TEST_P(EngineForms, HintEndingAfterSendByIsDeferred) {
  InstantClock probe_clock;
  Request req = get();
  req.send_by = probe_clock.mono_now() + 30s;
  const Result r = run_form(blocking(), req, {status(503, {{"Retry-After", "60"}})});
  EXPECT_EQ(r.out.kind, OutcomeKind::kDeferred) << r.out.reason;
  EXPECT_NE(r.out.reason.find("after the longest acceptable wait"), std::string::npos) << r.out.reason;
  EXPECT_EQ(r.sent.size(), 1u);
  ASSERT_TRUE(r.out.not_before_mono);
  EXPECT_EQ(*r.out.not_before_mono, r.sent[0].at + 10ms + 60s);

  req.deadline = probe_clock.mono_now() + 20s;
  const Result d = run_form(blocking(), req, {status(503, {{"Retry-After", "60"}})});
  EXPECT_EQ(d.out.kind, OutcomeKind::kDeadlineExceeded) << d.out.reason;
  EXPECT_NE(d.out.reason.find("after the deadline"), std::string::npos) << d.out.reason;
}

// A pacer over a store that takes `latency` of the run's clock to answer (a
// Redis round trip on a loaded machine).
std::function<void(InstantClock&, Config&)> slow_store(Duration latency) {
  return [latency](InstantClock& clock, Config& c) {
    auto store = std::make_shared<test::SlowStore>(clock.manual(), latency, true);
    c.pacer = std::make_shared<Pacer>(c.pacer_config, store, clock.monotonic(), clock.wall());
  };
}

// send_by bounds a wait, and a store's time to answer is none: a slot that
// is due when the pacer is asked goes, however long the answer took (the
// proxy's Abide-Max-Wait: 0 behind a slow Redis). A deadline stays hard.
TEST_P(EngineForms, ASendByThatPassesWhileTheStoreAnswersStillSends) {
  InstantClock probe_clock;
  Request req = get();
  req.send_by = probe_clock.mono_now() + 10ms;
  const Result r = run_form(blocking(), req, {ok()}, quick_config(), {}, slow_store(50ms));
  EXPECT_EQ(r.out.kind, OutcomeKind::kDone) << r.out.reason;
  EXPECT_EQ(r.sent.size(), 1u);

  req.send_by.reset();
  req.deadline = probe_clock.mono_now() + 10ms;
  const Result d = run_form(blocking(), req, {ok()}, quick_config(), {}, slow_store(50ms));
  EXPECT_EQ(d.out.kind, OutcomeKind::kDeadlineExceeded) << d.out.reason;
  EXPECT_TRUE(d.sent.empty());
}

// A send_by that passed before the pacer was asked (the time a request spent
// arriving is no wait either): a due slot goes, a held one is deferred.
TEST_P(EngineForms, ASendByAlreadyPassedSendsOnlyADueSlot) {
  InstantClock probe_clock;
  Request req = get();
  req.send_by = probe_clock.mono_now() - 5ms;
  const Result r = run_form(blocking(), req, {ok()});
  EXPECT_EQ(r.out.kind, OutcomeKind::kDone) << r.out.reason;
  EXPECT_EQ(r.sent.size(), 1u);

  // The first answer holds the key for 60 s: the retry is not waited for.
  const Result held = run_form(blocking(), req, {status(429, {{"Retry-After", "60"}}), ok()});
  EXPECT_EQ(held.out.kind, OutcomeKind::kDeferred) << held.out.reason;
  EXPECT_EQ(held.sent.size(), 1u);
}

TEST_P(EngineForms, HintBeyondMaxWaitIsDeferredWithItsTime) {
  Config c = quick_config();
  c.planner.max_wait = 10s;
  const Result r = run_form(blocking(), get(), {status(429, {{"Retry-After", "3600"}})}, c);
  EXPECT_EQ(r.out.kind, OutcomeKind::kDeferred) << r.out.reason;
  EXPECT_EQ(r.sent.size(), 1u);
  ASSERT_TRUE(r.out.not_before_mono);
  EXPECT_EQ(*r.out.not_before_mono, r.sent[0].at + 10ms + 3600s);  // never cut to the maximum
  EXPECT_EQ(r.body, (std::vector<std::string>{"error page"}));
}

TEST_P(EngineForms, CancellationDuringARetryWaitEndsPromptly) {
  const Result r = run_form(blocking(), get(), {status(503, {{"Retry-After", "120"}}), ok()}, quick_config(),
                            [](InstantClock& clock, std::stop_source& stop) {
                              clock.on_sleep = [&stop] { stop.request_stop(); };
                            });
  EXPECT_EQ(r.out.kind, OutcomeKind::kCancelled) << r.out.reason;
  EXPECT_EQ(r.sent.size(), 1u);
  EXPECT_EQ(r.out.waited, 0ns);        // nothing of the 120 s was spent
  ASSERT_TRUE(r.out.not_before_mono);  // still says when a retry is permitted
  EXPECT_EQ(*r.out.not_before_mono, r.sent[0].at + 10ms + 120s);
}

TEST_P(EngineForms, CancellationInFlightOfAPostIsAmbiguous) {
  Request req = get();
  req.method = "POST";
  Answer a;
  a.cancel_in_flight = true;
  const Result r = run_form(blocking(), req, {a});
  EXPECT_EQ(r.out.kind, OutcomeKind::kCancelled) << r.out.reason;
  EXPECT_TRUE(r.out.ambiguous);
  EXPECT_EQ(r.out.attempts.size(), 1u);
}

TEST_P(EngineForms, ServersNoRetryVerdictEndsTheRetries) {
  Request req = get("https://api.stripe.com/v1/charges");
  const Result r = run_form(blocking(), req, {status(429, {{"Stripe-Should-Retry", "false"}, {"Retry-After", "2"}})});
  EXPECT_EQ(r.out.kind, OutcomeKind::kNotRetryable) << r.out.reason;
  EXPECT_EQ(r.sent.size(), 1u);
  EXPECT_EQ(r.out.attempts[0].plan.reason, Reason::kServerSaysNoRetry);
  ASSERT_TRUE(r.out.not_before_mono);  // the permitted time is still reported
}

TEST_P(EngineForms, OpenAIFullRefillWaitsTheRetryDelayNotTheRefill) {
  Request req = get("https://api.openai.com/v1/chat/completions");
  const Result r = run_form(blocking(), req,
                            {status(429, {{"x-ratelimit-limit-requests", "500"},
                                          {"x-ratelimit-remaining-requests", "499"},
                                          {"x-ratelimit-reset-requests", "120ms"},
                                          {"x-ratelimit-limit-tokens", "30000"},
                                          {"x-ratelimit-remaining-tokens", "0"},
                                          {"x-ratelimit-reset-tokens", "6m0s"},
                                          {"retry-after-ms", "1500"}}),
                             ok()});
  ASSERT_EQ(r.out.kind, OutcomeKind::kDone) << r.out.reason;
  ASSERT_EQ(r.sent.size(), 2u);
  EXPECT_EQ(r.out.attempts[0].plan.wait, 1500ms);
  EXPECT_GE(r.sent[1].at - r.sent[0].at, 10ms + 1500ms);  // never before the server's delay ...
  EXPECT_LT(r.sent[1].at - r.sent[0].at, 10ms + 1600ms);  // ... and not the 360 s refill
  EXPECT_LT(r.out.waited, 2s);
}

TEST_P(EngineForms, GetWhoseBodyBreaksBeforeAnyByteIsRetried) {
  Answer cut = ok({});
  cut.body_error = "connection closed mid-body";
  const Result r = run_form(blocking(), get(), {cut, ok({"whole"})});
  ASSERT_EQ(r.out.kind, OutcomeKind::kDone) << r.out.reason;
  ASSERT_EQ(r.out.attempts.size(), 2u);
  EXPECT_EQ(r.out.attempts[0].status, 200);
  EXPECT_EQ(r.out.attempts[0].plan.decision, Decision::kRetry);
  EXPECT_EQ(r.body, (std::vector<std::string>{"whole"}));
}

TEST_P(EngineForms, BodyBrokenAfterBytesReachedTheSinkIsNotFetchedAgain) {
  Answer cut = ok({"part"});
  cut.body_error = "connection closed mid-body";
  const Result r = run_form(blocking(), get(), {cut});
  EXPECT_EQ(r.out.kind, OutcomeKind::kNotRetryable) << r.out.reason;
  EXPECT_EQ(r.sent.size(), 1u);
  EXPECT_EQ(r.out.body_bytes, 4u);
  EXPECT_FALSE(r.out.attempts[0].error.empty());
}

// Each attempt carries the planner's sentence for it (a transport error's
// with the error in front), its warnings, status and error; the outcome's
// reason is the last attempt's. Word for word: making these cheap to build
// (issue 14) must not change one of them.
TEST_P(EngineForms, AttemptsCarryTheirReasonsWordForWord) {
  Answer reset;
  reset.error = "connection reset";
  Answer cut = ok({});
  cut.body_error = "closed mid-body";
  const Result r = run_form(blocking(), get(),
                            {status(503, {{"Retry-After", "7"}, {"RateLimit", "garbage;;"}}), reset, cut, ok({"x"})});
  ASSERT_EQ(r.out.kind, OutcomeKind::kDone) << r.out.reason;
  ASSERT_EQ(r.out.attempts.size(), 4u);
  std::vector<std::string> reasons;
  for (const Attempt& a : r.out.attempts) reasons.push_back(a.reason);
  const std::vector<std::string> want = {
      "Retry in 7 s: the server's Retry-After asks for 7 s (local backoff 0.02 s).",
      "connection reset. Retry in 0.04 s: the local backoff for attempt 2 is 0.04 s nominal with no jitter.",
      "closed mid-body. Retry in 0.08 s: the local backoff for attempt 3 is 0.08 s nominal with no jitter.",
      "The request succeeded (status 200); nothing to retry.",
  };
  EXPECT_EQ(reasons, want);
  EXPECT_EQ(r.out.attempts[0].warnings,
            (std::vector<std::string>{"RateLimit ignored: neither a draft-08 list (invalid key at byte 8 (RFC 9651)) "
                                      "nor a draft-07 dictionary (invalid key at byte 8 (RFC 9651))"}));
  EXPECT_EQ(r.out.reason, r.out.attempts.back().reason);
  EXPECT_EQ(r.out.attempts[0].status, 503);
  EXPECT_EQ(r.out.attempts[1].status, 0);
  EXPECT_EQ(r.out.attempts[1].error, "connection reset");
  EXPECT_EQ(r.out.attempts[2].status, 200);
  EXPECT_EQ(r.out.attempts[2].error, "closed mid-body");
  for (std::size_t i = 0; i < r.out.attempts.size(); ++i)
    EXPECT_EQ(r.out.attempts[i].number, static_cast<std::int64_t>(i + 1));
  for (std::size_t i = 1; i < r.out.attempts.size(); ++i) EXPECT_TRUE(r.out.attempts[i].warnings.empty()) << i;
}

// The sentence of a success without a hint is the planner's constant, word
// for word the sentence describe() makes; the outcome's reason is the last
// attempt's.
TEST_P(EngineForms, ASuccessSentenceIsThePlannersConstant) {
  const Result r = run_form(blocking(), get(), {ok({"x"})});
  ASSERT_EQ(r.out.kind, OutcomeKind::kDone) << r.out.reason;
  ASSERT_EQ(r.out.attempts.size(), 1u);
  const Attempt& a = r.out.attempts.back();
  const std::string_view fixed = Planner::constant_sentence(a.plan);
  ASSERT_FALSE(fixed.empty());
  EXPECT_EQ(a.reason, fixed);
  EXPECT_EQ(r.out.reason, a.reason);
  EXPECT_EQ(a.reason, Planner().describe(a.plan, PlanInput(TransportError{})));
  EXPECT_EQ(r.out.reason, "The request succeeded (status 200); nothing to retry.");
}

Answer oversized(int code, std::vector<Header> headers = {}) {
  Answer a = status(code, std::move(headers));
  a.head_too_large = true;
  return a;
}

TEST_P(EngineForms, AnOversizedHeadEndsTheRequestAtOnceWithAClearError) {
  const Result r = run_form(blocking(), get(), {oversized(200)});
  ASSERT_EQ(r.out.kind, OutcomeKind::kNotRetryable);
  EXPECT_EQ(r.sent.size(), 1u);  // the same head would come again: not retried
  EXPECT_EQ(r.out.reason, "the response head is over 1 MiB; the same head would come again");
  EXPECT_EQ(r.out.attempts[0].error, "response head is over 1 MiB");
  EXPECT_TRUE(r.body.empty());
  EXPECT_FALSE(r.out.not_before_mono);
}

TEST_P(EngineForms, AnOversizedHeadsRetryAfterStillHoldsTheOriginAndGivesItsTime) {
  const Result r = run_form(blocking(), get(), {oversized(429, {{"Retry-After", "30"}})});
  ASSERT_EQ(r.out.kind, OutcomeKind::kNotRetryable);
  EXPECT_EQ(r.sent.size(), 1u);
  EXPECT_EQ(r.out.attempts[0].plan.basis, Basis::kRetryAfter);
  ASSERT_TRUE(r.out.not_before_mono);
  EXPECT_EQ(*r.out.not_before_mono, r.t0 + 10ms + 30s);  // received 10 ms after the send
  EXPECT_EQ(r.out.waited, 0ns);  // nothing was waited for
}

TEST_P(EngineForms, AnOversizedHeadWhoseHintIsTooLongIsDeferredAsAnyAnswer) {
  Config c = quick_config();
  c.planner.max_wait = 10s;
  const Result r = run_form(blocking(), get(), {oversized(503, {{"Retry-After", "3600"}})}, c);
  EXPECT_EQ(r.out.kind, OutcomeKind::kDeferred);
  ASSERT_TRUE(r.out.not_before_mono);
  EXPECT_EQ(*r.out.not_before_mono, r.t0 + 10ms + 3600s);
}

TEST_P(EngineForms, AttemptsRunOutAsExhausted) {
  Config c = quick_config();
  c.max_attempts = 3;
  const Result r = run_form(blocking(), get(), {status(500), status(500), status(500)}, c);
  EXPECT_EQ(r.out.kind, OutcomeKind::kExhausted) << r.out.reason;
  EXPECT_EQ(r.sent.size(), 3u);
  EXPECT_EQ(r.out.attempts.size(), 3u);
}

// Runs two requests one after the other on one engine with `config`: the
// first gets `first_answer`; returns the second's outcome (it sends nothing).
RequestOutcome second_after(bool blocking, const Answer& first_answer, Config c) {
  InstantClock clock;
  std::stop_source stop;
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  c.max_attempts = 1;
  Engine engine(c);
  const Request req = get();
  ScriptTransport t({first_answer}, clock, stop);
  RequestOutcome unused = engine.run(req, t, {});
  if (blocking) return engine.run(req, t, {});
  Machine run(engine, req);
  for (Step s = run.next(); s.kind != Step::Kind::kFinished; s = run.next()) {
    if (s.kind == Step::Kind::kSend) t.perform(req, s, run, {});
    else clock.advance_to(s.until);
  }
  return run.take_outcome();
}

TEST_P(EngineForms, ADeferralByTheServersCooldownSaysSoNotTheQuota) {
  Config c = quick_config();
  c.planner.max_wait = 10s;
  c.pacer_config.max_wait = 10s;
  const RequestOutcome o = second_after(blocking(), status(429, {{"Retry-After", "60"}}), c);
  EXPECT_EQ(o.kind, OutcomeKind::kDeferred);
  EXPECT_EQ(o.reason, "the pacer holds the send for a cooldown the server asked for, past the maximum acceptable wait");
  EXPECT_EQ(o.reason.find("quota"), std::string::npos);
}

TEST_P(EngineForms, ADeferralByAnAnnouncedQuotaNamesTheQuota) {
  Config c = quick_config();
  c.planner.max_wait = 10s;
  c.pacer_config.max_wait = 10s;
  // 200 with nothing left for 60 s: done, and the next send waits for the reset.
  const RequestOutcome o = second_after(
      blocking(), status(200, {{"RateLimit-Policy", "\"d\";q=10;w=60"}, {"RateLimit", "\"d\";r=0;t=60"}}), c);
  EXPECT_EQ(o.kind, OutcomeKind::kDeferred);
  EXPECT_EQ(o.reason, "the pacer holds the send for the quota the server announced, past the maximum acceptable wait");
}

TEST_P(EngineForms, ADeadlineByTheServersCooldownSaysSo) {
  Config c = quick_config();
  Request req = get();
  const RequestOutcome o = [&] {
    InstantClock clock;
    std::stop_source stop;
    c.mono = &clock.monotonic();
    c.wall = &clock.wall();
    c.max_attempts = 1;
    Engine engine(c);
    ScriptTransport t({status(503, {{"Retry-After", "60"}})}, clock, stop);
    RequestOutcome unused = engine.run(req, t, {});
    req.deadline = clock.mono_now() + 5s;
    return engine.run(req, t, {});
  }();
  EXPECT_EQ(o.kind, OutcomeKind::kDeadlineExceeded);
  EXPECT_EQ(o.reason, "the pacer holds the send for a cooldown the server asked for, past the deadline");
}

TEST_P(EngineForms, PacerCooldownFromAnotherRequestHoldsTheSend) {
  // Two requests on one engine, one after the other: the first answer's
  // Retry-After blocks the origin's key, so the second waits for it in the pacer.
  InstantClock clock;
  std::stop_source stop;
  Config c = quick_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  c.max_attempts = 1;
  Engine engine(c);
  const Request req = get();
  const std::vector<Answer> script{status(429, {{"Retry-After", "5"}}), ok()};
  ScriptTransport t(script, clock, stop);
  RequestOutcome first;
  RequestOutcome second;
  if (blocking()) {
    first = engine.run(req, t, {});
    second = engine.run(req, t, {});
  } else {
    for (RequestOutcome* out : {&first, &second}) {
      Machine run(engine, req);
      for (Step s = run.next(); s.kind != Step::Kind::kFinished; s = run.next()) {
        if (s.kind == Step::Kind::kSend) {
          t.perform(req, s, run, {});
        } else {
          EXPECT_EQ(s.wait_kind, Event::WaitKind::kPacer);
          clock.advance_to(s.until);
        }
      }
      *out = run.take_outcome();
    }
  }
  EXPECT_EQ(first.kind, OutcomeKind::kExhausted);
  if (!blocking()) {
    EXPECT_EQ(clock.sleeps, 0) << "the driven form slept";
  }
  ASSERT_EQ(second.kind, OutcomeKind::kDone) << second.reason;
  ASSERT_EQ(t.sent.size(), 2u);
  EXPECT_GE(t.sent[1].at - t.sent[0].at, 10ms + 5s);  // not one moment before the cooldown's end
  EXPECT_EQ(second.attempts[0].paced, second.waited);
  EXPECT_GE(second.waited, 5s);
}

TEST_P(EngineForms, AProbeWithoutAnswerIsReleasedForTheNextRequest) {
  // A cooldown ends; the next request is the pacer's probe and fails before
  // any head arrives: the engine hands the probe back, so the request after
  // it is sent at once instead of after the probe timeout (10 s).
  InstantClock clock;
  std::stop_source stop;
  Config c = quick_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  c.max_attempts = 1;
  Engine engine(c);
  const Request req = get();
  Answer refused;
  refused.error = "connection refused";
  refused.sent = false;
  const std::vector<Answer> script{status(429, {{"Retry-After", "5"}}), refused, ok()};
  ScriptTransport t(script, clock, stop);
  std::vector<RequestOutcome> outs;
  std::vector<bool> probes;
  for (int i = 0; i < 3; ++i) {
    if (blocking()) {
      outs.push_back(engine.run(req, t, {}));
      continue;
    }
    Machine m(engine, req);
    for (Step s = m.next(); s.kind != Step::Kind::kFinished; s = m.next()) {
      if (s.kind == Step::Kind::kSend) {
        probes.push_back(s.probe);
        t.perform(req, s, m, {});
      } else {
        clock.advance_to(s.until);
      }
    }
    outs.push_back(m.take_outcome());
  }
  ASSERT_EQ(t.sent.size(), 3u);
  EXPECT_EQ(outs[1].attempts.at(0).error, "connection refused");
  EXPECT_EQ(outs[2].kind, OutcomeKind::kDone) << outs[2].reason;
  EXPECT_EQ(t.sent[2].at, t.sent[1].at + 10ms);  // right after the failed probe, not 10 s on
  if (!blocking()) {
    EXPECT_EQ(probes, (std::vector<bool>{false, true, true}));
  }
}

TEST_P(EngineForms, NotBeforeAfterTheDeadlineSendsNothing) {
  InstantClock probe_clock;
  Request req = get();
  req.not_before = probe_clock.wall_now() + 60s;
  req.deadline = probe_clock.mono_now() + 10s;
  const Result r = run_form(blocking(), req, {});
  EXPECT_EQ(r.out.kind, OutcomeKind::kDeadlineExceeded) << r.out.reason;
  EXPECT_TRUE(r.sent.empty());
}

TEST_P(EngineForms, NotBeforeIsWaitedForFirst) {
  InstantClock probe_clock;
  Request req = get();
  req.not_before = probe_clock.wall_now() + 3s;
  const Result r = run_form(blocking(), req, {ok()});
  EXPECT_EQ(r.out.kind, OutcomeKind::kDone) << r.out.reason;
  ASSERT_EQ(r.sent.size(), 1u);
  EXPECT_EQ(r.sent[0].at - r.t0, 3s);
}

TEST_P(EngineForms, InvalidRequestsEndWithoutSending) {
  Request bad_url = get("ftp://example.com/x");
  EXPECT_EQ(run_form(blocking(), bad_url, {}).out.kind, OutcomeKind::kNotRetryable);
  Request bad_method = get();
  bad_method.method = "GE T";
  const Result r = run_form(blocking(), bad_method, {});
  EXPECT_EQ(r.out.kind, OutcomeKind::kNotRetryable);
  EXPECT_TRUE(r.sent.empty());
  EXPECT_EQ(r.out.reason.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace abide::engine
