// The engine's rules, each in both forms (the driven state machine and the
// blocking run), on a scripted transport and clocks that only move when told:
// nothing here sleeps.
#include "abide/engine.h"
#include "abide/testing/manual_clock.h"

#include <gtest/gtest.h>

#include <type_traits>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace abide::engine {
namespace {

using namespace std::chrono_literals;

// A clock whose sleeps end at once: sleeping moves both clocks to the end of
// the sleep (so the blocking form runs as fast as the driven one). A hook may
// cancel a chosen sleep.
class InstantClock {
 public:
  const WallClock& wall() const noexcept { return manual_.wall(); }
  const MonotonicClock& monotonic() const noexcept { return mono_; }
  ManualClock& manual() noexcept { return manual_; }
  MonoTime mono_now() const { return manual_.mono_now(); }
  WallTime wall_now() const { return manual_.wall_now(); }
  void advance_to(MonoTime t) {
    const MonoTime now = manual_.mono_now();
    if (t > now) manual_.advance(t - now);
  }
  // Called at the start of each sleep; it may request a stop.
  std::function<void()> on_sleep;
  // How often anything slept on this clock (the driven form never does).
  mutable int sleeps = 0;

 private:
  class Mono final : public MonotonicClock {
   public:
    explicit Mono(InstantClock& c) : c_(c) {}
    MonoTime now() const noexcept override { return c_.manual_.mono_now(); }
    WaitResult sleep_until(MonoTime deadline, std::stop_token stop) const override {
      ++c_.sleeps;
      if (c_.on_sleep) c_.on_sleep();
      if (stop.stop_requested()) return WaitResult::kCancelled;
      c_.advance_to(deadline);
      return WaitResult::kReached;
    }

   private:
    InstantClock& c_;
  };
  ManualClock manual_;
  Mono mono_{*this};
};

// One scripted answer of the transport.
struct Answer {
  Duration latency = 10ms;  // from send to the head (or the error)
  int status = 200;
  std::vector<Header> headers;
  std::vector<std::string> chunks;  // the body, as it arrives
  std::string error;                // non-empty: no head, a transport error
  bool sent = true;                 // with error: was the request sent
  std::string body_error;           // non-empty: the body breaks off after the chunks
  bool cancel_in_flight = false;    // the caller cancels during this transfer
  bool head_too_large = false;      // the head passes the transport's limit after `headers`
};

// What the transport saw of each send.
struct Sent {
  MonoTime at{};
  std::int64_t attempt = 0;
};

// Plays one answer into a run (the same for both forms).
void play(const Answer& a, Machine& run, InstantClock& clock, std::stop_source* stop) {
  clock.advance_to(clock.mono_now() + a.latency);
  if (a.cancel_in_flight) {
    if (stop != nullptr) {
      stop->request_stop();
      run.failed("aborted by the caller", a.sent);
    } else {
      run.cancel(a.sent);
    }
    return;
  }
  if (!a.error.empty()) {
    run.failed(a.error, a.sent);
    return;
  }
  HeaderList h;
  for (const Header& x : a.headers) h.add(x.name, x.value);
  if (a.head_too_large) {
    run.head_too_large(a.status, std::move(h), clock.wall_now(), clock.mono_now(), "response head is over 1 MiB");
    return;
  }
  if (run.head(a.status, std::move(h), clock.wall_now(), clock.mono_now())) {
    for (const std::string& c : a.chunks) {
      if (!run.body(c)) return;
    }
  }
  if (!a.body_error.empty()) {
    run.failed(a.body_error, true);
    return;
  }
  run.complete();
}

class ScriptTransport final : public Transport {
 public:
  ScriptTransport(std::vector<Answer> script, InstantClock& clock, std::stop_source& stop)
      : script_(std::move(script)), clock_(clock), stop_(stop) {}
  void perform(const Request&, const Step& step, Machine& run, std::stop_token) override {
    sent.push_back({clock_.mono_now(), step.attempt});
    ASSERT_LT(next_, script_.size()) << "more sends than scripted";
    play(script_[next_++], run, clock_, &stop_);
  }
  std::vector<Sent> sent;

 private:
  std::vector<Answer> script_;
  std::size_t next_ = 0;
  InstantClock& clock_;
  std::stop_source& stop_;
};

// Everything one run produced.
struct Result {
  RequestOutcome out;
  std::vector<Sent> sent;
  std::vector<std::string> events;  // kind, attempt, wait kind and length, time
  std::vector<std::string> body;    // chunks at the sink
  MonoTime t0{};
};

std::string describe(const Event& e, MonoTime t0) {
  std::string s = std::to_string(static_cast<int>(e.kind)) + " #" + std::to_string(e.attempt) + " at " +
                  std::to_string((e.at - t0).count());
  if (e.kind == Event::Kind::kWaitStarted || e.kind == Event::Kind::kWaitEnded)
    s += " wait" + std::to_string(static_cast<int>(e.wait_kind)) + "=" + std::to_string(e.wait.count()) +
         (e.cancelled ? " cancelled" : "");
  if (e.plan != nullptr) s += " " + std::string(to_string(e.plan->decision));
  return s;
}

Config quick_config() {
  Config c;
  c.planner.backoff = BackoffPolicy(20ms, 100ms, Jitter::kNone);
  c.max_attempts = 5;
  return c;
}

// Runs `req` over `script` in one form. The driven form waits by moving the
// clock to the time next() names; the blocking one sleeps on the instant clock.
Result run_form(bool blocking, const Request& req, const std::vector<Answer>& script, Config config = quick_config(),
                std::function<void(InstantClock&, std::stop_source&)> setup = {}) {
  InstantClock clock;
  std::stop_source stop;
  if (setup) setup(clock, stop);
  Result res;
  res.t0 = clock.mono_now();
  config.mono = &clock.monotonic();
  config.wall = &clock.wall();
  config.random = std::make_shared<SeededRandom>(7);  // each run draws the same jitter
  config.on_event = [&](const Event& e) { res.events.push_back(describe(e, res.t0)); };
  Engine engine(config);
  BodySink sink = [&](std::string_view c) {
    res.body.emplace_back(c);
    return true;
  };
  if (blocking) {
    ScriptTransport t(script, clock, stop);
    res.out = engine.run(req, t, sink, stop.get_token());
    res.sent = t.sent;
    return res;
  }
  Machine run(engine, req, sink);
  std::size_t next = 0;
  for (int guard = 0; guard < 10000; ++guard) {
    const Step step = run.next();
    if (step.kind == Step::Kind::kFinished) break;
    if (step.kind == Step::Kind::kSend) {
      res.sent.push_back({clock.mono_now(), step.attempt});
      if (next >= script.size()) {
        ADD_FAILURE() << "more sends than scripted";
        run.cancel(false);
        continue;
      }
      play(script[next++], run, clock, nullptr);
      continue;
    }
    EXPECT_FALSE(step.reason.empty());
    // The wait: the hook may cancel it, as a stop would the blocking form's.
    if (clock.on_sleep) clock.on_sleep();
    if (stop.stop_requested()) {
      run.cancel(false);
      continue;
    }
    clock.advance_to(step.until);
  }
  EXPECT_TRUE(run.finished());
  EXPECT_EQ(clock.sleeps, 0) << "the driven form slept";
  res.out = run.take_outcome();
  return res;
}

Request get(std::string url = "https://api.example.com/v1/items") {
  Request r;
  r.url = std::move(url);
  return r;
}

Answer ok(std::vector<std::string> chunks = {"hello"}) {
  Answer a;
  a.chunks = std::move(chunks);
  return a;
}

Answer status(int code, std::vector<Header> headers = {}, std::vector<std::string> chunks = {"error page"}) {
  Answer a;
  a.status = code;
  a.headers = std::move(headers);
  a.chunks = std::move(chunks);
  return a;
}

class EngineForms : public ::testing::TestWithParam<bool> {
 protected:
  bool blocking() const { return GetParam(); }
};

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

// ---- the driven form waits in the pacer's line ------------------------------------------

// An engine on the instant clock whose origin key is spaced by a policy of 2
// per 10 s (slots 5.25 s apart), its first slot taken.
struct SpacedEngine {
  InstantClock clock;
  Config config = [this] {
    Config c = quick_config();
    c.mono = &clock.monotonic();
    c.wall = &clock.wall();
    c.max_attempts = 1;
    return c;
  }();
  Engine engine{config};
  Request req = get();
  MonoTime t0 = clock.mono_now();
  static constexpr Duration kSpacing = 5250ms;

  SpacedEngine() {
    Signals s;
    s.status = 200;
    s.received_wall = clock.wall_now();
    s.received_mono = clock.mono_now();
    QuotaObservation o;
    o.limit = 2;
    o.window = 10s;
    s.quota.push_back(o);
    const Pacer::Key k = engine.pacer().key(pacer_key("https://api.example.com"));
    engine.pacer().record(k, s);
    EXPECT_TRUE(engine.pacer().acquire(k).ok());
  }
};

TEST(EngineDriven, MachinesOnOneKeyAreServedInArrivalOrder) {
  SpacedEngine e;
  Machine a(e.engine, e.req);
  Machine b(e.engine, e.req);
  const Step sa = a.next();
  const Step sb = b.next();
  ASSERT_EQ(sa.kind, Step::Kind::kWait);
  ASSERT_EQ(sb.kind, Step::Kind::kWait);
  EXPECT_EQ(sa.wait_kind, Event::WaitKind::kPacer);
  EXPECT_EQ(sa.until, e.t0 + SpacedEngine::kSpacing);
  EXPECT_EQ(sb.until, e.t0 + 2 * SpacedEngine::kSpacing);
  // At a's time, b asks first: a's slot is a's.
  e.clock.advance_to(sa.until);
  EXPECT_EQ(b.next().kind, Step::Kind::kWait);
  const Step go = a.next();
  ASSERT_EQ(go.kind, Step::Kind::kSend);
  a.cancel(false);
  e.clock.advance_to(sb.until);
  EXPECT_EQ(b.next().kind, Step::Kind::kSend);
  b.cancel(false);
  EXPECT_EQ(e.clock.sleeps, 0);
}

TEST(EngineDriven, SendByBoundsTheSendButNotTheTransfer) {
  ManualClock clock;
  Config c = quick_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  Engine engine(c);
  Request by = get();
  by.send_by = clock.monotonic().now() + 5s;
  Machine a(engine, by);
  const Step sa = a.next();
  ASSERT_EQ(sa.kind, Step::Kind::kSend);
  EXPECT_FALSE(sa.deadline);  // a long answer may run past send_by
  a.cancel(false);
  Request dl = by;
  dl.send_by.reset();
  dl.deadline = clock.monotonic().now() + 5s;
  Machine b(engine, dl);
  const Step sb = b.next();
  ASSERT_EQ(sb.kind, Step::Kind::kSend);
  EXPECT_EQ(sb.deadline, dl.deadline);  // a deadline cuts the transfer
  b.cancel(false);
}

TEST(EngineDriven, ACancelledMachineGivesItsSlotBack) {
  SpacedEngine e;
  std::optional<Machine> a(std::in_place, e.engine, e.req);
  Machine b(e.engine, e.req);
  EXPECT_EQ(a->next().until, e.t0 + SpacedEngine::kSpacing);
  EXPECT_EQ(b.next().until, e.t0 + 2 * SpacedEngine::kSpacing);
  a->cancel();
  EXPECT_EQ(a->outcome().kind, OutcomeKind::kCancelled);
  Machine c(e.engine, e.req);
  EXPECT_EQ(c.next().until, e.t0 + SpacedEngine::kSpacing);  // a's slot, not a third one
  // A machine destroyed while it waits gives its slot back too.
  Machine d(e.engine, e.req);
  EXPECT_EQ(d.next().until, e.t0 + 3 * SpacedEngine::kSpacing);
  a.reset();
  {
    Machine gone(e.engine, e.req);
    EXPECT_EQ(gone.next().until, e.t0 + 4 * SpacedEngine::kSpacing);
  }
  Machine f(e.engine, e.req);
  EXPECT_EQ(f.next().until, e.t0 + 4 * SpacedEngine::kSpacing);
}

TEST(EngineDriven, AWaiterForTheProbeIsNotifiedWhenItsAnswerIsRecorded) {
  InstantClock clock;
  Config c = quick_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  c.max_attempts = 1;
  Engine engine(c);
  const Request req = get();
  // A cooldown of 5 s on the origin: the first request after it is the probe.
  {
    Machine m(engine, req);
    ASSERT_EQ(m.next().kind, Step::Kind::kSend);
    HeaderList h;
    h.add("Retry-After", "5");
    EXPECT_TRUE(m.head(429, h, clock.wall_now(), clock.mono_now()));
    m.complete();
  }
  Machine probe(engine, req);
  Machine waiter(engine, req);
  int notified = 0;
  waiter.set_notify([&] { ++notified; });
  const Step sp = probe.next();
  ASSERT_EQ(sp.kind, Step::Kind::kWait);
  clock.advance_to(sp.until);
  const Step send = probe.next();
  ASSERT_EQ(send.kind, Step::Kind::kSend);
  EXPECT_TRUE(send.probe);
  const Step sw = waiter.next();
  ASSERT_EQ(sw.kind, Step::Kind::kWait);
  EXPECT_EQ(sw.until, clock.mono_now() + 10s);  // the probe timeout, unless notified
  EXPECT_FALSE(sw.reason.empty());
  clock.advance_to(clock.mono_now() + 300ms);
  EXPECT_EQ(waiter.next().kind, Step::Kind::kWait);  // no answer yet
  EXPECT_EQ(notified, 0);
  EXPECT_TRUE(probe.head(200, {}, clock.wall_now(), clock.mono_now()));
  probe.complete();
  EXPECT_EQ(notified, 1);
  const Step go = waiter.next();
  ASSERT_EQ(go.kind, Step::Kind::kSend);
  EXPECT_FALSE(go.probe);
  EXPECT_EQ(clock.sleeps, 0);
}

// An attempt permitted before another answer said wait, and held back by
// its transport before a byte went out: it is not counted, and the request
// waits out the wait the pacer now holds.
TEST(EngineDriven, AWithdrawnAttemptIsNotCountedAndWaitsForThePacer) {
  InstantClock clock;
  Config c = quick_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  Engine engine(c);
  const Request req = get();
  std::vector<Event::Kind> kinds;
  Machine late(engine, req, {}, 0, [&](const Event& e) { kinds.push_back(e.kind); });
  Machine other(engine, req);
  ASSERT_EQ(other.next().kind, Step::Kind::kSend);
  const Step permit = late.next();
  ASSERT_EQ(permit.kind, Step::Kind::kSend);
  EXPECT_EQ(permit.attempt, 1);
  EXPECT_FALSE(engine.pacer().held_until(late.pacer_key()));
  // The other's answer says wait 5 s, before the late attempt is written.
  HeaderList h;
  h.add("Retry-After", "5");
  static_cast<void>(other.head(429, h, clock.wall_now(), clock.mono_now()));
  const auto held = engine.pacer().held_until(late.pacer_key());
  ASSERT_TRUE(held);
  EXPECT_EQ(*held, clock.mono_now() + 5s);
  late.withdraw();
  EXPECT_TRUE(late.outcome().attempts.empty());
  ASSERT_FALSE(kinds.empty());
  EXPECT_EQ(kinds.back(), Event::Kind::kWaitStarted);
  const Step wait = late.next();
  ASSERT_EQ(wait.kind, Step::Kind::kWait);
  EXPECT_GE(wait.until, clock.mono_now() + 5s);
  clock.advance_to(wait.until);
  Step again = late.next();
  while (again.kind == Step::Kind::kWait) {
    clock.advance_to(again.until);
    again = late.next();
  }
  ASSERT_EQ(again.kind, Step::Kind::kSend);
  EXPECT_EQ(again.attempt, 1);  // the withdrawn one did not count
  EXPECT_TRUE(late.head(200, {}, clock.wall_now(), clock.mono_now()));
  late.complete();
  ASSERT_EQ(late.next().kind, Step::Kind::kFinished);
  EXPECT_EQ(late.outcome().kind, OutcomeKind::kDone);
  EXPECT_EQ(late.outcome().attempts.size(), 1u);
  // Withdrawing is for an attempt being sent: elsewhere it changes nothing.
  late.withdraw();
  EXPECT_EQ(late.outcome().attempts.size(), 1u);
}

// An engine whose origin's cooldown (5 s) has just ended: the next request
// is the pacer's probe.
struct CooldownJustEnded {
  InstantClock clock;
  Config config = [this] {
    Config c = quick_config();
    c.mono = &clock.monotonic();
    c.wall = &clock.wall();
    return c;
  }();
  Engine engine{config};
  Request req = get();

  CooldownJustEnded() {
    engine.pacer().block_until(engine.pacer().key(pacer_key("https://api.example.com")), clock.wall_now() + 5s);
    clock.advance_to(clock.mono_now() + 5s);
  }
};

// A Machine keeps a reference to its Request: it takes no temporary (an
// event loop's `Machine m(engine, make_request())` does not compile instead
// of dangling).
TEST(EngineDriven, AMachineTakesNoTemporaryRequest) {
  static_assert(std::is_constructible_v<Machine, Engine&, const Request&>);
  static_assert(!std::is_constructible_v<Machine, Engine&, Request&&>);
  SUCCEED();
}

// An event loop may drop a request whose transfer is under way (its caller
// went away) without telling the machine: the probe it held is handed back,
// so the request after it goes at once instead of after the probe timeout.
TEST(EngineDriven, AMachineDestroyedHoldingTheProbeHandsItBack) {
  CooldownJustEnded e;
  Engine& engine = e.engine;
  const Request& req = e.req;
  {
    Machine probe(engine, req);
    const Step s = probe.next();
    ASSERT_EQ(s.kind, Step::Kind::kSend);
    ASSERT_TRUE(s.probe);
  }  // destroyed during its transfer, nothing reported
  Machine next(engine, req);
  const Step s = next.next();
  ASSERT_EQ(s.kind, Step::Kind::kSend) << s.reason;
  EXPECT_TRUE(s.probe);  // the probe again, at once
}

TEST(EngineDriven, AWaitForTheProbeEndsAtTheDeadlineAsTheBlockingFormsDoes) {
  CooldownJustEnded e;
  InstantClock& clock = e.clock;
  Engine& engine = e.engine;
  const Request& req = e.req;
  Machine probe(engine, req);
  ASSERT_TRUE(probe.next().probe);  // and no answer comes
  Request late = get();
  late.deadline = clock.mono_now() + 3s;
  Machine waiter(engine, late);
  const Step s = waiter.next();
  ASSERT_EQ(s.kind, Step::Kind::kWait);
  EXPECT_EQ(s.until, *late.deadline);  // not ended at once: the answer may come before
  clock.advance_to(s.until);
  EXPECT_EQ(waiter.next().kind, Step::Kind::kFinished);
  EXPECT_EQ(waiter.outcome().kind, OutcomeKind::kDeadlineExceeded) << waiter.outcome().reason;
  ASSERT_TRUE(waiter.outcome().not_before_mono);
  EXPECT_GE(*waiter.outcome().not_before_mono, *late.deadline);
  probe.cancel(false);
}

TEST(EngineDriven, AKnownOriginIsLookedUpWithoutChangingWhatAURLMeans) {
  InstantClock clock;
  Config c = quick_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  Engine engine(c);
  auto key_of = [&](const Request& r) {
    Machine m(engine, r);
    const Step s = m.next();
    std::string name = m.finished() ? std::string("finished: ") + m.outcome().reason : m.pacer_key().name();
    if (!m.finished()) m.cancel(false);
    EXPECT_NE(s.kind, Step::Kind::kWait);
    return name;
  };
  // Twice each: the second finds the first's entry.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(key_of(get("https://api.example.com/a")), "https://api.example.com");
    EXPECT_EQ(key_of(get("HTTPS://API.Example.com:443/b?q")), "https://api.example.com");
    EXPECT_EQ(key_of(get("https://user:pw@api.example.com/c")), "https://api.example.com");
    EXPECT_EQ(key_of(get("https://api.example.com:8443/d")), "https://api.example.com:8443");
  }
  // A known origin does not make the rest of the URL acceptable.
  const std::string bad = key_of(get("https://api.example.com/a b"));
  EXPECT_EQ(bad.rfind("finished: invalid URL", 0), 0u) << bad;
  EXPECT_EQ(key_of(get("https://api.example.com:99999/")).rfind("finished: invalid URL", 0), 0u);
  // The request's own key still wins.
  Request own = get("https://api.example.com/a");
  own.pacer_key = "tenant-7";
  EXPECT_EQ(key_of(own), "tenant-7");
  // The same origin in two spellings shares one cooldown.
  {
    const Request first = get("https://API.example.com/x");
    Machine m(engine, first);
    ASSERT_EQ(m.next().kind, Step::Kind::kSend) << m.outcome().reason;
    HeaderList h;
    h.add("Retry-After", "30");
    (void)m.head(429, h, clock.wall_now(), clock.mono_now());
    m.complete();
  }
  const Request second = get("https://api.example.com/y");
  Machine later(engine, second);
  const Step s = later.next();
  ASSERT_EQ(s.kind, Step::Kind::kWait);
  EXPECT_EQ(s.until, clock.mono_now() + 30s);
}

// The thread's last origin points into an engine's cache: after that engine
// is gone, a new one (perhaps at the same address) must not use it.
TEST(EngineDriven, ANewEngineNeverUsesADestroyedEnginesLastOrigin) {
  InstantClock clock;
  Config c = quick_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  auto key_of = [](Engine& engine, const Request& r) {
    Machine m(engine, r);
    (void)m.next();
    std::string name = m.finished() ? std::string("finished: ") + m.outcome().reason : m.pacer_key().name();
    if (!m.finished()) m.cancel(false);
    return name;
  };
  for (int i = 0; i < 3; ++i) {
    auto engine = std::make_unique<Engine>(c);
    EXPECT_EQ(key_of(*engine, get("https://api.example.com/a")), "https://api.example.com");
    EXPECT_EQ(key_of(*engine, get("https://api.example.com/b")), "https://api.example.com");
    engine.reset();
    auto next = std::make_unique<Engine>(c);
    // Each request is its engine's first: it reads the URL afresh.
    EXPECT_EQ(key_of(*next, get("https://api.example.com/a b")).rfind("finished: invalid URL", 0), 0u);
    EXPECT_EQ(key_of(*next, get("https://api.example.com:8443/c")), "https://api.example.com:8443");
    EXPECT_EQ(key_of(*next, get("https://api.example.com/d")), "https://api.example.com");
  }
}

// A known origin skips the URL's parse, not its byte check: every byte
// parse_origin rejects (controls, space, DEL) is rejected at every place of
// the rest of the URL, and no other byte is.
TEST(EngineDriven, AKnownOriginsURLIsCheckedForBadBytesEverywhere) {
  InstantClock clock;
  Config c = quick_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  Engine engine(c);
  auto accepted = [&](const std::string& url) {
    const Request r = get(url);  // the machine keeps a reference to it
    Machine m(engine, r);
    (void)m.next();
    const bool ok = !m.finished();
    if (ok) m.cancel(false);
    return ok;
  };
  ASSERT_TRUE(accepted("https://api.example.com/"));  // now known
  for (std::size_t len = 1; len <= 19; ++len) {
    for (std::size_t at = 0; at < len; ++at) {
      for (int b = 0; b < 256; ++b) {
        std::string tail(len, 'a');
        tail[at] = static_cast<char>(b);
        const std::string url = "https://api.example.com/" + tail;
        const bool bad = b <= 0x20 || b == 0x7f;
        // '#' and '?' and '/' end no authority here: the origin is known either way.
        ASSERT_EQ(accepted(url), !bad) << "byte " << b << " at " << at << " of " << len;
      }
    }
  }
}

TEST(EngineDriven, BeyondTheOriginCacheRequestsStillFindTheirKeys) {
  InstantClock clock;
  Config c = quick_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  c.pacer_config.max_keys = 2;  // the cache may hold one origin
  Engine engine(c);
  const std::vector<Request> reqs{get("https://a.example/"), get("https://b.example/"), get("https://c.example/")};
  for (int round = 0; round < 2; ++round) {
    for (const Request& r : reqs) {
      Machine m(engine, r);
      ASSERT_EQ(m.next().kind, Step::Kind::kSend);
      EXPECT_EQ(m.pacer_key().name(), origin_of(r.url).value_or("?"));
      m.cancel(false);
    }
  }
}

TEST(EngineDriven, ThreadsShareTheOriginCacheAndThePacer) {
  ManualClock clock;
  Config c = quick_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  Engine engine(c);
  const std::vector<Request> reqs{get("https://a.example/x"), get("https://B.example/y"), get("https://b.example/z"),
                                  get("http://c.example:8080/")};
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        Machine m(engine, reqs[static_cast<std::size_t>(t + i) % reqs.size()]);
        const Step s = m.next();
        if (s.kind != Step::Kind::kSend) continue;
        if (m.head(200, {}, clock.wall_now(), clock.mono_now())) (void)m.body("ok");
        m.complete();
        if (m.outcome().done()) ++done;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(done.load(), 200);
}

// The same script through both forms: the same outcome, attempts and events.
TEST(Engine, BothFormsGiveIdenticalOutcomesAttemptsAndEvents) {
  Config c = quick_config();
  c.planner.backoff = BackoffPolicy(100ms, 2s, Jitter::kFull);
  const std::vector<Answer> script{status(503, {{"Retry-After", "2"}}, {"x"}), status(500), ok({"a", "bc"})};
  const Result driven = run_form(false, get(), script, c);
  const Result blocking = run_form(true, get(), script, c);
  ASSERT_EQ(driven.out.kind, OutcomeKind::kDone);
  EXPECT_EQ(driven.out.kind, blocking.out.kind);
  EXPECT_EQ(driven.out.reason, blocking.out.reason);
  EXPECT_EQ(driven.out.waited, blocking.out.waited);
  EXPECT_EQ(driven.out.body_bytes, blocking.out.body_bytes);
  ASSERT_EQ(driven.out.attempts.size(), 3u);
  ASSERT_EQ(driven.out.attempts.size(), blocking.out.attempts.size());
  for (std::size_t i = 0; i < driven.out.attempts.size(); ++i) {
    const Attempt& a = driven.out.attempts[i];
    const Attempt& b = blocking.out.attempts[i];
    EXPECT_EQ(a.number, b.number);
    EXPECT_EQ(a.started_mono, b.started_mono);
    EXPECT_EQ(a.paced, b.paced);
    EXPECT_EQ(a.status, b.status);
    EXPECT_EQ(a.plan.decision, b.plan.decision);
    EXPECT_EQ(a.plan.wait, b.plan.wait);
    EXPECT_EQ(a.reason, b.reason);
    EXPECT_EQ(a.warnings, b.warnings);
  }
  EXPECT_EQ(driven.events, blocking.events);
  EXPECT_GT(driven.events.size(), 10u);
  EXPECT_EQ(driven.body, blocking.body);
}

TEST(Engine, OriginOfAndParseOrigin) {
  EXPECT_EQ(origin_of("https://API.Example.com/v1?x=1").value_or(""), "https://api.example.com");
  EXPECT_EQ(origin_of("http://127.0.0.1:8080/").value_or(""), "http://127.0.0.1:8080");
  EXPECT_EQ(origin_of("https://h:443/").value_or(""), "https://h");
  EXPECT_EQ(origin_of("HTTP://h:80").value_or(""), "http://h");
  EXPECT_EQ(origin_of("http://[::1]:9000/x").value_or(""), "http://[::1]:9000");
  EXPECT_FALSE(origin_of("file:///etc/passwd"));
  EXPECT_FALSE(origin_of("not a url"));
  EXPECT_EQ(origin_of("https://user:pw@H/").value_or(""), "https://h");  // userinfo is no part of it
  EXPECT_FALSE(origin_of("https://h:99999/"));
  EXPECT_FALSE(origin_of("https://h:/"));
  EXPECT_FALSE(origin_of("https:///x"));
  const auto p = parse_origin("http://Example.com:8080/a/b?q=1#frag");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->host, "example.com");
  EXPECT_EQ(p->port, 8080);
  EXPECT_EQ(p->target, "/a/b?q=1");
  EXPECT_EQ(parse_origin("https://h?x")->target, "/?x");
  EXPECT_EQ(parse_origin("https://h")->port, 443);
}

}  // namespace
}  // namespace abide::engine

namespace abide::engine {
namespace {

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

}  // namespace
}  // namespace abide::engine

namespace abide::engine {
namespace {

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
