// What the tests of the engine (tests/engine_*_test.cpp) share: a clock whose
// sleeps end at once, scripted answers and a transport that plays them, and
// run_form(), which runs a request in either form (the driven state machine
// or the blocking run) so that each rule is checked in both.
#pragma once

#include "abide/engine.h"
#include "abide/testing/manual_clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace abide::engine {

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
inline void play(const Answer& a, Machine& run, InstantClock& clock, std::stop_source* stop) {
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

inline std::string describe(const Event& e, MonoTime t0) {
  std::string s = std::to_string(static_cast<int>(e.kind)) + " #" + std::to_string(e.attempt) + " at " +
                  std::to_string((e.at - t0).count());
  if (e.kind == Event::Kind::kWaitStarted || e.kind == Event::Kind::kWaitEnded)
    s += " wait" + std::to_string(static_cast<int>(e.wait_kind)) + "=" + std::to_string(e.wait.count()) +
         (e.cancelled ? " cancelled" : "");
  if (e.plan != nullptr) s += " " + std::string(to_string(e.plan->decision));
  return s;
}

inline Config quick_config() {
  Config c;
  c.planner.backoff = BackoffPolicy(20ms, 100ms, Jitter::kNone);
  c.max_attempts = 5;
  return c;
}

// Runs `req` over `script` in one form. The driven form waits by moving the
// clock to the time next() names; the blocking one sleeps on the instant clock.
// `configure` may change the config once its clocks are the run's (a pacer
// over a store of the test's, on those clocks).
inline Result run_form(bool blocking, const Request& req, const std::vector<Answer>& script, Config config = quick_config(),
                std::function<void(InstantClock&, std::stop_source&)> setup = {},
                std::function<void(InstantClock&, Config&)> configure = {}) {
  InstantClock clock;
  std::stop_source stop;
  if (setup) setup(clock, stop);
  Result res;
  res.t0 = clock.mono_now();
  config.mono = &clock.monotonic();
  config.wall = &clock.wall();
  config.random = std::make_shared<SeededRandom>(7);  // each run draws the same jitter
  if (configure) configure(clock, config);
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

inline Request get(std::string url = "https://api.example.com/v1/items") {
  Request r;
  r.url = std::move(url);
  return r;
}

inline Answer ok(std::vector<std::string> chunks = {"hello"}) {
  Answer a;
  a.chunks = std::move(chunks);
  return a;
}

inline Answer status(int code, std::vector<Header> headers = {}, std::vector<std::string> chunks = {"error page"}) {
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

}  // namespace abide::engine
