// The pacer's costs: token quotas paced by what each send needs, and usage
// that gives unused tokens back, on the manual clock.
#include "support/pacer_fixture.h"

namespace abide {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test::response;
using test::window_obs;
using test::with;
using test::Fixture;

// ---- costs: token quotas --------------------------------------------------------------

QuotaObservation tokens_obs(std::int64_t remaining, Duration reset, std::optional<std::int64_t> cost = std::nullopt) {
  QuotaObservation o = window_obs(remaining, reset, "tokens");
  o.unit = "tokens";
  o.cost = cost;
  return o;
}

// A tokens quota the server states is paced by what each send needs of it:
// sends that do not fit wait for the window's end, though requests have room.
TEST_F(Fixture, ATokensQuotaHoldsSendsThatDoNotFit) {
  PacerConfig c = config();
  c.rules.pacing = Pacing::kBurst;
  Pacer p = make(c);
  const Pacer::Key k = p.key("llm");
  p.record(k, with(with(response(clock), window_obs(100, seconds{60}, "requests")), tokens_obs(10'000, seconds{60})));
  const std::vector<UnitCost> big{{"tokens", 4'000}};
  EXPECT_TRUE(p.acquire(k, clock.mono_now(), {}, big).ok());
  EXPECT_TRUE(p.acquire(k, clock.mono_now(), {}, big).ok());
  const AcquireResult third = p.acquire(k, clock.mono_now(), {}, big);
  EXPECT_EQ(third.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(third.not_before, clock.mono_now() + seconds{60});
  EXPECT_EQ(third.cause, WaitCause::kQuota);
  // The answer names the quota and its counts, for what is said to people.
  ASSERT_TRUE(third.held);
  EXPECT_EQ(describe(*third.held), "tokens: 2,000 left, 4,000 needed");
  // A send that needs less still fits.
  const std::vector<UnitCost> small{{"tokens", 1'500}};
  EXPECT_TRUE(p.acquire(k, clock.mono_now(), {}, small).ok());
  // The driven form says the same while it holds the slot, and with the permit.
  Pacer::Ticket t;
  const TryAcquireResult reserved = p.try_acquire(t, k, std::nullopt, big);
  ASSERT_EQ(reserved.status, TryStatus::kReserved);
  ASSERT_TRUE(reserved.held);
  EXPECT_EQ(reserved.held->unit, "tokens");
  clock.advance(seconds{60});
  const TryAcquireResult permit = p.try_acquire(t, k, std::nullopt, big);
  ASSERT_EQ(permit.status, TryStatus::kPermit);
  EXPECT_EQ(permit.cause, WaitCause::kQuota);
  EXPECT_EQ(permit.held, reserved.held);
  p.abandon_probe(k);
}

// What an answer says was used settles what its send reserved: the unused
// part comes back for the next sends (the draft's `c` counts as the usage).
TEST_F(Fixture, AnAnswersUsageGivesTheUnusedTokensBack) {
  PacerConfig c = config();
  c.rules.pacing = Pacing::kBurst;
  Pacer p = make(c);
  const Pacer::Key k = p.key("llm");
  p.record(k, with(response(clock), tokens_obs(10'000, seconds{60})));
  const std::vector<UnitCost> reserve{{"tokens", 8'000}};
  ASSERT_TRUE(p.acquire(k, clock.mono_now(), {}, reserve).ok());
  const std::vector<UnitCost> next{{"tokens", 5'000}};
  EXPECT_FALSE(p.acquire(k, clock.mono_now(), {}, next).ok());
  clock.advance(seconds{1});
  const std::vector<UnitCost> used{{"tokens", 1'000}};
  p.record(k, with(response(clock), tokens_obs(9'000, seconds{59})), SendCosts{reserve, used});
  EXPECT_TRUE(p.acquire(k, clock.mono_now(), {}, next).ok());

  // The same through the server's `c`, with no usage from the caller.
  const Pacer::Key k2 = p.key("llm-c");
  p.record(k2, with(response(clock), tokens_obs(10'000, seconds{60})));
  ASSERT_TRUE(p.acquire(k2, clock.mono_now(), {}, reserve).ok());
  clock.advance(seconds{1});
  p.record(k2, with(response(clock), tokens_obs(9'000, seconds{58}, 1'000)), SendCosts{reserve, {}});
  EXPECT_TRUE(p.acquire(k2, clock.mono_now(), {}, next).ok());
}

// A slot given back holds what its send reserved: it goes only to a send
// that needs no more than that, never letting a larger one through early.
TEST_F(Fixture, AReturnedSlotGoesOnlyToASendItHasRoomFor) {
  Pacer p = make(config());
  const Pacer::Key k = p.key("llm");
  p.record(k, with(response(clock), tokens_obs(10'000, seconds{10})));
  const std::vector<UnitCost> small{{"tokens", 1'000}};
  const std::vector<UnitCost> large{{"tokens", 6'000}};
  ASSERT_TRUE(p.acquire(k, clock.mono_now(), {}, small).ok());
  Pacer::Ticket t;
  const TryAcquireResult held = p.try_acquire(t, k, std::nullopt, small);
  ASSERT_EQ(held.status, TryStatus::kReserved);
  t.release();  // its 1,000 tokens' slot goes back
  Pacer::Ticket big;
  const TryAcquireResult r = p.try_acquire(big, k, std::nullopt, large);
  ASSERT_TRUE(r.pending());
  EXPECT_GT(r.at, held.at) << "the large send took the small one's slot";
  Pacer::Ticket again;
  const TryAcquireResult same = p.try_acquire(again, k, std::nullopt, small);
  EXPECT_EQ(same.status, TryStatus::kReserved);
  EXPECT_EQ(same.at, held.at) << "a send of the same size takes the slot given back";
}

// A usage known only at the end of the body settles the send's reservation
// after the head was recorded.
TEST_F(Fixture, AUsageAtTheEndOfTheBodySettlesTheReservation) {
  PacerConfig c = config();
  c.rules.pacing = Pacing::kBurst;
  Pacer p = make(c);
  const Pacer::Key k = p.key("llm");
  p.record(k, with(response(clock), tokens_obs(10'000, seconds{60})));
  const std::vector<UnitCost> reserve{{"tokens", 8'000}};
  ASSERT_TRUE(p.acquire(k, clock.mono_now(), {}, reserve).ok());
  const Signals head = with(response(clock), tokens_obs(9'000, seconds{59}));
  p.record(k, head, SendCosts{reserve, {}});
  const std::vector<UnitCost> next{{"tokens", 5'000}};
  EXPECT_FALSE(p.acquire(k, clock.mono_now(), {}, next).ok());
  clock.advance(seconds{3});  // the stream ends
  const std::vector<UnitCost> used{{"tokens", 2'000}};
  p.settle(k, head.received_mono, SendCosts{reserve, used});
  EXPECT_TRUE(p.acquire(k, clock.mono_now(), {}, next).ok());
}

}  // namespace
}  // namespace abide
