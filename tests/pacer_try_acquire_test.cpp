// The pacer's try_acquire (the same rules without blocking), block_until and
// where its clocks come from, on the manual clock.
#include "support/pacer_fixture.h"

namespace abide {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test::Clock;
using test::response;
using test::retry_after;
using test::policy_obs;
using test::with;
using test::Fixture;

// ---- try_acquire: the same rules without blocking ----------------------------------------

// A policy of 2 per 10 s: slots 5.25 s apart (the margin of 5%), the first now.
Pacer::Key spaced_key(Pacer& p, const Clock& clock) {
  const auto k = p.key("k");
  p.record(k, with(response(clock), policy_obs(2, seconds{10})));
  return k;
}
constexpr Duration kSpacing = milliseconds{5250};
constexpr Duration cooldown_spread_max = milliseconds{20};

// A key whose server announces no quota learns one from a limited answer
// with a Retry-After delay: the answers accepted before it are a window. A
// Retry-After date teaches nothing (its boundary may be seconds late).
TEST_F(Fixture, ARetryAfterDelayTeachesAWindowAndADateDoesNot) {
  for (const bool dated : {false, true}) {
    SCOPED_TRACE(dated ? "date" : "delay");
    PacerConfig c = config();
    c.rules.pacing = Pacing::kBurst;
    c.rules.cooldown_spread = Duration::zero();
    Pacer p = make(c);
    const auto k = p.key(dated ? "dated" : "delay");
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(peek(p, k).ok());
      p.record(k, response(clock));
    }
    Signals limited = retry_after(clock, seconds{2});
    if (dated) {
      limited.retry_after->kind = RetryHint::Kind::kDate;
      limited.retry_after->date = clock.wall_now() + seconds{2};
    }
    p.record(k, limited);
    clock.advance(seconds{2});
    const AcquireResult probe = peek(p, k);
    ASSERT_TRUE(probe.ok());
    EXPECT_TRUE(probe.probe);
    p.record(k, response(clock));
    int sent = 1;
    while (sent < 20 && peek(p, k).ok()) {
      ++sent;
      p.record(k, response(clock));
    }
    // Learned: 5 in this window, the next at its end; a date: no bound.
    EXPECT_EQ(sent, dated ? 20 : 5);
  }
}

TEST_F(Fixture, TryAcquireReservesSlotsInArrivalOrder) {
  Pacer p = make(config());
  const auto k = spaced_key(p, clock);
  const MonoTime t0 = clock.mono_now();
  Pacer::Ticket a, b, c;
  EXPECT_TRUE(p.try_acquire(a, k).ok());
  const TryAcquireResult rb = p.try_acquire(b, k);
  const TryAcquireResult rc = p.try_acquire(c, k);
  ASSERT_EQ(rb.status, TryStatus::kReserved) << to_string(rb.status);
  ASSERT_EQ(rc.status, TryStatus::kReserved);
  EXPECT_EQ(rb.at, t0 + kSpacing);
  EXPECT_EQ(rc.at, t0 + 2 * kSpacing);
  EXPECT_TRUE(b.held());
  // Asking early changes nothing; at b's time, c asking first does not get b's slot.
  EXPECT_EQ(p.try_acquire(b, k).at, rb.at);
  clock.advance(kSpacing);
  EXPECT_EQ(p.try_acquire(c, k).status, TryStatus::kReserved);
  const TryAcquireResult now_b = p.try_acquire(b, k);
  EXPECT_TRUE(now_b.ok());
  EXPECT_EQ(now_b.at, t0 + kSpacing);
  EXPECT_FALSE(b.held());
  clock.advance(kSpacing);
  EXPECT_TRUE(p.try_acquire(c, k).ok());
  EXPECT_EQ(clock.sleepers(), 0u);
}

TEST_F(Fixture, ASlotGivenBackGoesToTheNextToAsk) {
  Pacer p = make(config());
  const auto k = spaced_key(p, clock);
  const MonoTime t0 = clock.mono_now();
  Pacer::Ticket a, b, c, d;
  EXPECT_TRUE(p.try_acquire(a, k).ok());
  EXPECT_EQ(p.try_acquire(b, k).at, t0 + kSpacing);
  EXPECT_EQ(p.try_acquire(c, k).at, t0 + 2 * kSpacing);
  b.release();  // b gives up: its slot is not lost
  EXPECT_FALSE(b.held());
  const TryAcquireResult rd = p.try_acquire(d, k);
  ASSERT_EQ(rd.status, TryStatus::kReserved);
  EXPECT_EQ(rd.at, t0 + kSpacing);
  // A ticket destroyed while holding a slot gives it back too.
  {
    Pacer::Ticket e;
    EXPECT_EQ(p.try_acquire(e, k).at, t0 + 3 * kSpacing);
  }
  Pacer::Ticket f;
  EXPECT_EQ(p.try_acquire(f, k).at, t0 + 3 * kSpacing);
  clock.advance(kSpacing);
  EXPECT_TRUE(p.try_acquire(d, k).ok());
}

TEST_F(Fixture, ASlotGivenBackAfterACooldownBeganIsVoid) {
  Pacer p = make(config());
  const auto k = spaced_key(p, clock);
  Pacer::Ticket a, b, c;
  EXPECT_TRUE(p.try_acquire(a, k).ok());
  ASSERT_EQ(p.try_acquire(b, k).status, TryStatus::kReserved);
  p.record(k, retry_after(clock, seconds{60}));
  b.release();
  const TryAcquireResult rc = p.try_acquire(c, k);
  ASSERT_EQ(rc.status, TryStatus::kReserved);
  EXPECT_GE(rc.at, clock.mono_now() + seconds{60});
  EXPECT_TRUE(rc.probe);
}

TEST_F(Fixture, ACancelledBlockingWaitGivesItsSlotBack) {
  Pacer p = make(config());
  const auto k = spaced_key(p, clock);
  const MonoTime t0 = clock.mono_now();
  EXPECT_TRUE(p.acquire(k).ok());
  std::stop_source stop;
  auto f = std::async(std::launch::async, [&] { return p.acquire(k, std::nullopt, stop.get_token()); });
  clock.wait_for_sleepers(1);
  stop.request_stop();
  const AcquireResult r = f.get();
  EXPECT_EQ(r.status, AcquireStatus::kCancelled);
  EXPECT_EQ(r.not_before, t0 + kSpacing);
  Pacer::Ticket t;
  EXPECT_EQ(p.try_acquire(t, k).at, t0 + kSpacing);
}

TEST_F(Fixture, AWaiterForTheProbeIsNotifiedWhenItsAnswerIsRecorded) {
  Pacer p = make(config());
  const auto k = p.key("k");
  p.record(k, retry_after(clock, seconds{5}));
  clock.advance(seconds{5});
  Pacer::Ticket probe, waiter;
  const TryAcquireResult rp = p.try_acquire(probe, k);
  ASSERT_TRUE(rp.ok());
  ASSERT_TRUE(rp.probe);
  const TryAcquireResult rw = p.try_acquire(waiter, k);
  ASSERT_EQ(rw.status, TryStatus::kAskAgain) << to_string(rw.status);
  EXPECT_EQ(rw.at, clock.mono_now() + seconds{10});  // the probe timeout, at the latest
  int notified = 0;
  waiter.set_notify([&] { ++notified; });
  EXPECT_EQ(notified, 0);
  EXPECT_EQ(p.try_acquire(waiter, k).status, TryStatus::kAskAgain);
  clock.advance(milliseconds{200});
  p.record(k, response(clock));  // the probe's answer
  EXPECT_EQ(notified, 1);
  EXPECT_TRUE(p.try_acquire(waiter, k).ok());
  EXPECT_EQ(clock.sleepers(), 0u);
}

// Only a record that can change a waiter's answer wakes it (the probe's
// answer, a cooldown): the rest skip the wake, which every record paid for.
TEST_F(Fixture, ARecordThatAnswersNoProbeWakesNoWaiter) {
  Pacer p = make(config());
  const auto k = p.key("k");
  const Signals early = response(clock);  // received before the cooldown: it answers no probe
  p.record(k, retry_after(clock, seconds{5}));
  clock.advance(seconds{5});
  Pacer::Ticket probe, waiter;
  ASSERT_TRUE(p.try_acquire(probe, k).probe);
  ASSERT_EQ(p.try_acquire(waiter, k).status, TryStatus::kAskAgain);
  int notified = 0;
  waiter.set_notify([&] { ++notified; });
  p.record(k, early);  // late, and about the time before the cooldown
  EXPECT_EQ(notified, 0);
  EXPECT_EQ(p.try_acquire(waiter, k).status, TryStatus::kAskAgain);
  p.record(k, response(clock));  // the probe's answer
  EXPECT_EQ(notified, 1);
  EXPECT_TRUE(p.try_acquire(waiter, k).ok());
}

TEST_F(Fixture, ANotificationBeforeTheCallbackIsSetFiresItAtOnce) {
  Pacer p = make(config());
  const auto k = p.key("k");
  p.record(k, retry_after(clock, seconds{5}));
  clock.advance(seconds{5});
  Pacer::Ticket probe, waiter;
  ASSERT_TRUE(p.try_acquire(probe, k).probe);
  ASSERT_EQ(p.try_acquire(waiter, k).status, TryStatus::kAskAgain);
  p.abandon_probe(k);  // no answer will come: the waiter may probe
  int notified = 0;
  waiter.set_notify([&] { ++notified; });
  EXPECT_EQ(notified, 1);
  const TryAcquireResult r = p.try_acquire(waiter, k);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.probe);
}

TEST_F(Fixture, TryAcquireAndBlockingAcquireShareOneLine) {
  Pacer p = make(config());
  const auto k = p.key("k");
  p.record(k, retry_after(clock, seconds{5}));
  clock.advance(seconds{5});
  Pacer::Ticket probe, first;
  ASSERT_TRUE(p.try_acquire(probe, k).probe);
  ASSERT_EQ(p.try_acquire(first, k).status, TryStatus::kAskAgain);
  auto later = std::async(std::launch::async, [&] { return p.acquire(k); });
  clock.wait_for_sleepers(1);
  p.record(k, response(clock));
  // The blocking worker came later: it is not woken past the first in line.
  clock.wait_for_sleepers(1);
  EXPECT_EQ(later.wait_for(std::chrono::seconds{0}), std::future_status::timeout);
  EXPECT_TRUE(p.try_acquire(first, k).ok());
  // Its turn now, one spread step later (released workers are spread).
  clock.wait_for_sleepers(1);
  clock.advance(cooldown_spread_max);
  const AcquireResult r = later.get();
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.probe);
}

TEST_F(Fixture, TryAcquireDefersAndMissesDeadlinesAsAcquireDoes) {
  PacerConfig c = config();
  c.max_wait = seconds{30};
  Pacer p = make(c);
  const auto k = p.key("k");
  p.record(k, retry_after(clock, seconds{60}));
  const MonoTime end = clock.mono_now() + seconds{60};
  Pacer::Ticket t;
  const TryAcquireResult late = p.try_acquire(t, k, clock.mono_now() + seconds{10});
  EXPECT_EQ(late.status, TryStatus::kDeadlineExceeded);
  EXPECT_EQ(late.at, end);
  ASSERT_TRUE(late.not_before_wall);
  EXPECT_EQ(*late.not_before_wall, clock.wall_now() + seconds{60});
  EXPECT_FALSE(t.held());
  const TryAcquireResult deferred = p.try_acquire(t, k);
  EXPECT_EQ(deferred.status, TryStatus::kDeferred);
  EXPECT_EQ(deferred.at, end);
  // Within the limits: the probe's slot at the cooldown's end.
  clock.advance(seconds{40});
  const TryAcquireResult r = p.try_acquire(t, k);
  EXPECT_EQ(r.status, TryStatus::kReserved);
  EXPECT_TRUE(r.probe);
  EXPECT_EQ(r.at, end);
}

// ---- block_until --------------------------------------------------------------------------

TEST_F(Fixture, BlockUntilHoldsTheKeyUntilThatWallTime) {
  Pacer p = make(config());
  const auto k = p.key("k");
  const MonoTime t0 = clock.mono_now();
  EXPECT_TRUE(p.block_until(k, clock.wall_now() + seconds{30}));
  const AcquireResult r = peek(p, k);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.not_before, t0 + seconds{30});
  // A shorter one changes nothing; a past one neither.
  EXPECT_FALSE(p.block_until(k, clock.wall_now() + seconds{10}));
  EXPECT_FALSE(p.block_until("k", clock.wall_now() - seconds{10}));
  EXPECT_EQ(peek(p, k).not_before, t0 + seconds{30});
  clock.advance(seconds{30});
  const AcquireResult after = peek(p, k);
  EXPECT_TRUE(after.ok());
  EXPECT_TRUE(after.probe);  // then the probe rule, as after any cooldown
}

TEST_F(Fixture, BlockUntilInThePastLeavesTheKeyFree) {
  Pacer p = make(config());
  EXPECT_FALSE(p.block_until("k", clock.wall_now() - seconds{1}));
  EXPECT_FALSE(p.block_until("k", clock.wall_now()));
  const AcquireResult r = peek(p, p.key("k"));
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.probe);
}

TEST_F(Fixture, BlockUntilRedirectsAWaiterForTheProbe) {
  Pacer p = make(config());
  const auto k = p.key("k");
  p.record(k, retry_after(clock, seconds{5}));
  clock.advance(seconds{5});
  Pacer::Ticket probe, waiter;
  ASSERT_TRUE(p.try_acquire(probe, k).probe);
  ASSERT_EQ(p.try_acquire(waiter, k).status, TryStatus::kAskAgain);
  int notified = 0;
  waiter.set_notify([&] { ++notified; });
  ASSERT_TRUE(p.block_until(k, clock.wall_now() + seconds{20}));
  EXPECT_EQ(notified, 1);
  // The probe handed out before is void; the waiter gets the probe at the new end.
  const TryAcquireResult r = p.try_acquire(waiter, k);
  EXPECT_EQ(r.status, TryStatus::kReserved);
  EXPECT_EQ(r.at, clock.mono_now() + seconds{20});
  EXPECT_TRUE(r.probe);
}

TEST_F(Fixture, ClocksAndRandomnessComeFromTheConfig) {
  PacerConfig c = config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  c.random = std::make_shared<SeededRandom>(3);
  Pacer p(c);
  const auto k = p.key("k");
  EXPECT_TRUE(p.block_until(k, clock.wall_now() + seconds{2}));
  EXPECT_EQ(p.acquire(k, clock.mono_now()).not_before, clock.mono_now() + seconds{2});
}

}  // namespace
}  // namespace abide
