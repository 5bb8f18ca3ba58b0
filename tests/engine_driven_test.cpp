// The driven form (engine::Machine) beyond the rules both forms share: its
// place in the pacer's line, notifications, withdrawn attempts, lifetimes,
// and the origin cache; and the two forms side by side.
#include "support/engine_fixture.h"

namespace abide::engine {
namespace {

using namespace std::chrono_literals;

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
