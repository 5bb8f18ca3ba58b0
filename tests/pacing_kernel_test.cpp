// The pacing kernel's state codec and its move to another timeline.
#include "pacing/kernel.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>
#include <string>

#include "pacing/state_codec.h"

namespace abide::pacing {
namespace {

using std::chrono::seconds;

const MonoTime kT0{std::chrono::hours{1000}};

// A state with every field set, from a seed.
KeyState busy_state(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto t = [&] { return Instant{Micros{static_cast<Micros::rep>(rng() >> 12)}}; };
  const auto d = [&] { return Micros{static_cast<Micros::rep>(rng() >> 30)}; };
  const auto n = [&] { return static_cast<std::int64_t>(rng() % 1000); };
  KeyState s;
  s.epoch = rng();
  s.tat = t();
  s.cool_end = t();
  s.cool_cause = rng() % 2 ? WaitCause::kQuota : WaitCause::kCooldown;
  s.spread_end = t();
  s.spread_seed = static_cast<double>(rng() % 1000) / 1000.0;
  s.spread_n = rng();
  s.probe_need = rng() % 2;
  s.probe_out = rng() % 2;
  s.probe_start = t();
  s.probe_until = t();
  s.seen = t();
  s.blind = n();
  s.blind_at = t();
  for (std::size_t i = 0; i < rng() % (QuotaStore::kMaxPolicies + 1); ++i) {
    PolicyState p;
    p.id = "policy-" + std::to_string(i) + std::string(rng() % 40, 'x');
    p.limit = static_cast<std::int64_t>(rng() >> 1);
    p.window = d();
    p.remaining = n() - 1;
    p.reset_at = t();
    p.aim = t();
    p.next = t();
    p.seen = n();
    p.out = n();
    p.owed = n();
    if (rng() % 2) p.unit = i % 2 ? "tokens" : "input-tokens";
    s.policies.push_back(p);
  }
  for (std::size_t i = 0; i < rng() % 3; ++i) s.blind_units.push_back({"unit-" + std::to_string(i), n() + 1});
  Learned& l = s.learned;
  l.mode = static_cast<Learned::Mode>(rng() % 3);
  l.n = n();
  l.len = d();
  l.guess = d();
  l.start = t();
  l.anchor = t();
  l.since = n();
  l.accepted = n();
  l.used = n();
  l.quiet = n();
  l.next = t();
  l.hold = d();
  l.hold_end = t();
  l.search_began = t();
  l.windows = n();
  l.open = rng() % 2;
  l.first = rng() % 2;
  l.rtt = d();
  l.found = d();
  return s;
}

TEST(StateCodec, EveryFieldComesBack) {
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const KeyState s = busy_state(seed);
    const std::string bytes = encode(s);
    auto back = decode(bytes);
    ASSERT_TRUE(back.has_value()) << seed << ": " << back.error();
    EXPECT_EQ(encode(*back), bytes) << seed;
    EXPECT_EQ(back->cool_end, s.cool_end);
    EXPECT_EQ(back->policies.size(), s.policies.size());
    EXPECT_EQ(back->learned.found, s.learned.found);
    EXPECT_EQ(back->blind_units, s.blind_units);
    for (std::size_t i = 0; i < s.policies.size(); ++i) EXPECT_EQ(back->policies[i].unit, s.policies[i].unit);
  }
}

// A state written before units (format 2) reads with every policy counting
// requests and no blind amounts: its layout is format 3's without them.
TEST(StateCodec, StatesWithoutUnitsReadAsRequests) {
  KeyState s;
  s.policies.push_back(PolicyState{"default"});
  s.policies[0].remaining = 4;
  std::string bytes = encode(s);
  // Drop the policy's unit and start (an empty text's 8-byte length and an
  // instant, just before the learned policy) and the blind unit count (the
  // last 8 bytes).
  bytes.resize(bytes.size() - 8);
  const std::size_t learned_size = encode(KeyState{}).size() - 8 - (1 + 8 + 8 + 8 + 1 + 8 + 8 + 8 + 1 + 1 + 8 + 8 + 8 + 8 + 8 + 8);
  bytes.erase(bytes.size() - learned_size - 16, 16);
  bytes[0] = 2;
  auto back = decode(bytes);
  ASSERT_TRUE(back.has_value()) << back.error();
  ASSERT_EQ(back->policies.size(), 1u);
  EXPECT_EQ(back->policies[0].unit, "");
  EXPECT_EQ(back->policies[0].remaining, 4);
  EXPECT_TRUE(back->blind_units.empty());
}

TEST(StateCodec, EveryTruncationIsRefused) {
  const std::string bytes = encode(busy_state(7));
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    auto r = decode(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(r.has_value()) << n;
    EXPECT_NE(r.error().find("truncated"), std::string::npos) << r.error();
  }
  auto longer = decode(bytes + "x");
  ASSERT_FALSE(longer.has_value());
  EXPECT_EQ(longer.error(), "1 bytes after the state");
}

TEST(StateCodec, UnknownFormatsAndOutOfRangeValuesAreRefused) {
  std::string bytes = encode(KeyState{});
  bytes[0] = static_cast<char>(kStateFormat + 1);
  auto newer = decode(bytes);
  ASSERT_FALSE(newer.has_value());
  EXPECT_EQ(newer.error(), "state format 4 is not 3");

  KeyState negative;
  negative.cool_end = Instant{Micros{-5}};
  auto r = decode(encode(negative));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error(), "cooldown end negative");

  KeyState cause;
  cause.cool_cause = WaitCause::kProbe;  // never a cooldown's cause
  EXPECT_FALSE(decode(encode(cause)).has_value());

  KeyState many;
  many.policies.resize(QuotaStore::kMaxPolicies + 1);
  auto over = decode(encode(many));
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error(), "policy count over the limit");

  KeyState seed;
  seed.spread_seed = 1.5;
  EXPECT_FALSE(decode(encode(seed)).has_value());
}

// A state moved to another timeline keeps its waits, and "none" stays none.
TEST(KernelShift, MovesEveryInstantButNone) {
  KeyState s;
  PacingRules rules;
  StoreRecord r;
  r.now = kT0;
  r.cooldown = seconds{30};
  (void)record(s, r, rules);
  ASSERT_EQ(s.probe_start, Instant{});
  const Micros by = -std::chrono::hours{999};
  shift(s, by);
  EXPECT_EQ(s.cool_end, instant_of(kT0) + seconds{30} + by);
  EXPECT_EQ(s.probe_start, Instant{});
  const StoreGrant g = acquire(s, kT0 + by + seconds{10}, Duration::zero(), rules);
  EXPECT_EQ(g.kind, StoreGrant::Kind::kTooLate);
  EXPECT_EQ(g.wait, seconds{20});
  // Moved before the clock's start: long past, not "none".
  shift(s, -std::chrono::hours{5000});
  EXPECT_EQ(s.cool_end, Instant{Micros{1}});
}

// A state written in nanoseconds (format 1) reads back in microseconds,
// every instant rounded up: a cooldown never ends earlier than it was told.
TEST(StateCodec, NanosecondStatesReadRoundedUp) {
  KeyState s;
  s.cool_end = Instant{Micros{7}};
  std::string bytes = encode(s);
  bytes.resize(bytes.size() - 8);  // format 1 has no blind unit count
  bytes[0] = 1;
  // The cooldown's end is the 8 bytes after the format, epoch and next slot.
  const std::int64_t ns = 7'000'001;
  for (int i = 0; i < 8; ++i) bytes[17 + static_cast<std::size_t>(i)] = static_cast<char>((ns >> (8 * i)) & 0xff);
  auto back = decode(bytes);
  ASSERT_TRUE(back.has_value()) << back.error();
  EXPECT_EQ(back->cool_end, Instant{Micros{7001}});
}

// ---- costs: quotas of tokens beside quotas of requests ----

std::vector<UnitCost> tokens(std::int64_t n) { return {{"tokens", n}}; }

// One answer that states a requests window and a tokens window.
StoreRecord llm_answer(MonoTime now, std::int64_t requests_left, std::int64_t tokens_left, Duration reset = seconds{60}) {
  StoreRecord r;
  r.now = now;
  PolicyUpdate req;
  req.id = "requests";
  req.remaining = requests_left;
  req.reset = reset;
  PolicyUpdate tok;
  tok.id = "tokens";
  tok.unit = "tokens";
  tok.remaining = tokens_left;
  tok.reset = reset;
  r.policies = {req, tok};
  return r;
}

PacingRules burst() {
  PacingRules rules;
  rules.pacing = Pacing::kBurst;
  return rules;
}

// A send is granted only when the tokens window has room for what it
// needs, and takes that amount: the requests window has plenty.
TEST(KernelCosts, ASendWaitsForTheWindowWhenItsTokensDoNotFit) {
  KeyState s;
  const PacingRules rules = burst();
  (void)record(s, llm_answer(kT0, 100, 10'000), rules);
  const MonoTime t = kT0 + seconds{1};
  EXPECT_EQ(acquire(s, t, kMaxDuration, rules, tokens(4'000)).wait, Duration::zero());
  EXPECT_EQ(acquire(s, t, kMaxDuration, rules, tokens(4'000)).wait, Duration::zero());
  EXPECT_EQ(s.policies[1].remaining, 2'000);
  EXPECT_EQ(s.policies[0].remaining, 98);
  // 2,000 left, 4,000 needed: the window's end, as its probe.
  const StoreGrant g = acquire(s, t, kMaxDuration, rules, tokens(4'000));
  EXPECT_EQ(g.kind, StoreGrant::Kind::kProbe);
  EXPECT_EQ(g.wait, seconds{59});
  EXPECT_EQ(g.cause, WaitCause::kQuota);
  // The grant names the quota that held it, with its counts before the send.
  ASSERT_TRUE(g.held);
  EXPECT_EQ(*g.held, (QuotaHeld{"tokens", 2'000, 0, 4'000}));
  EXPECT_EQ(describe(*g.held), "tokens: 2,000 left, 4,000 needed");
}

// What a grant names: the policy whose bound set the slot, not the first one
// listed, and nothing when no announced policy held the send.
TEST(KernelCosts, AGrantNamesTheQuotaThatHeldIt) {
  KeyState s;
  const PacingRules rules = burst();
  StoreRecord r = llm_answer(kT0, 100, 40'000);
  r.policies[0].limit = 500;
  r.policies[1].limit = 40'000;
  (void)record(s, r, rules);
  EXPECT_FALSE(acquire(s, kT0, kMaxDuration, rules, tokens(38'150)).held);  // sent at once
  const StoreGrant g = acquire(s, kT0, seconds{1}, rules, tokens(4'100));
  EXPECT_EQ(g.kind, StoreGrant::Kind::kTooLate);
  ASSERT_TRUE(g.held);
  EXPECT_EQ(describe(*g.held), "tokens: 1,850 of 40,000 left, 4,100 needed");
  // A cooldown holds a send longer than the quota: the cooldown is named, no quota.
  StoreRecord cool;
  cool.now = kT0;
  cool.cooldown = seconds{120};
  (void)record(s, cool, rules);
  const StoreGrant c = acquire(s, kT0, seconds{1}, rules, tokens(4'100));
  EXPECT_EQ(c.cause, WaitCause::kCooldown);
  EXPECT_FALSE(c.held);
}

// Requests named as such, and a policy spacing alone (no window counted).
TEST(KernelCosts, TheHeldTextNamesRequestsAndSpacing) {
  EXPECT_EQ(describe(QuotaHeld{"", 0, 5'000, 1}), "requests: 0 of 5,000 left, 1 needed");
  EXPECT_EQ(describe(QuotaHeld{"tokens", -1, 1'000'000, 12'345}),
            "tokens: spaced to 1,000,000 a window, 12,345 needed");
  EXPECT_EQ(describe(QuotaHeld{"tokens", -1, 0, 7}), "tokens: 7 needed");
}

// All or nothing: a send refused for lack of room reserves nothing anywhere.
TEST(KernelCosts, ARefusedSendReservesNothing) {
  KeyState s;
  const PacingRules rules = burst();
  (void)record(s, llm_answer(kT0, 100, 3'000), rules);
  const StoreGrant g = acquire(s, kT0, seconds{1}, rules, tokens(4'000));
  EXPECT_EQ(g.kind, StoreGrant::Kind::kTooLate);
  EXPECT_EQ(s.policies[0].remaining, 100);
  EXPECT_EQ(s.policies[1].remaining, 3'000);
}

// A send that states no tokens needs none: a spent tokens window does not
// hold it (a cooldown would, if the server asked for one).
TEST(KernelCosts, ASendWithoutTokensIsNotHeldByTheTokensWindow) {
  KeyState s;
  const PacingRules rules = burst();
  (void)record(s, llm_answer(kT0, 100, 0), rules);
  EXPECT_EQ(acquire(s, kT0, kMaxDuration, rules).wait, Duration::zero());
  EXPECT_GT(acquire(s, kT0, kMaxDuration, rules, tokens(1)).wait, seconds{59});
}

// Smooth pacing spaces a send in proportion to what it takes of the window:
// 2,000 of 10,000 tokens left over 100 s is a fifth of it.
TEST(KernelCosts, SmoothSpacingIsInProportionToTheCost) {
  KeyState s;
  PacingRules rules;
  rules.safety_margin = 0.0;
  StoreRecord r;
  r.now = kT0;
  PolicyUpdate tok;
  tok.id = "tokens";
  tok.unit = "tokens";
  tok.remaining = 10'000;
  tok.reset = seconds{100};  // exact: spent by the reset itself
  r.policies = {tok};
  (void)record(s, r, rules);
  EXPECT_EQ(acquire(s, kT0, kMaxDuration, rules, tokens(2'000)).wait, Duration::zero());
  EXPECT_EQ(acquire(s, kT0, kMaxDuration, rules, tokens(100)).wait, seconds{20});
  // 100 of the 8,000 left over the 80 s left: one second more.
  EXPECT_EQ(acquire(s, kT0, kMaxDuration, rules, tokens(100)).wait, seconds{21});
}

// An answer's usage settles its reservation: 4,000 reserved, 1,000 used
// gives 3,000 back; 5,000 used takes 1,000 more. Never past the limit.
TEST(KernelCosts, AnAnswersUsageGivesBackOrTakesMore) {
  KeyState s;
  const PacingRules rules = burst();
  (void)record(s, llm_answer(kT0, 100, 10'000), rules);
  (void)acquire(s, kT0, kMaxDuration, rules, tokens(4'000));
  (void)acquire(s, kT0, kMaxDuration, rules, tokens(4'000));
  ASSERT_EQ(s.policies[1].remaining, 2'000);
  StoreRecord a = llm_answer(kT0 + seconds{1}, 99, 9'000, seconds{59});
  a.reserved = tokens(4'000);
  a.used = tokens(1'000);
  (void)record(s, a, rules);
  EXPECT_EQ(s.policies[1].remaining, 5'000);
  StoreRecord b = llm_answer(kT0 + seconds{2}, 98, 9'000, seconds{58});
  b.reserved = tokens(4'000);
  b.used = tokens(5'000);
  (void)record(s, b, rules);
  EXPECT_EQ(s.policies[1].remaining, 4'000);
  // The server's lower count still wins over what was given back.
  StoreRecord c = llm_answer(kT0 + seconds{3}, 97, 1'500, seconds{57});
  (void)record(s, c, rules);
  EXPECT_EQ(s.policies[1].remaining, 1'500);
}

// Without a usage the reservation stands: the server's count (which may
// not have this request in yet) only ever lowers it.
TEST(KernelCosts, WithoutAUsageTheReservationStands) {
  KeyState s;
  const PacingRules rules = burst();
  (void)record(s, llm_answer(kT0, 100, 10'000), rules);
  (void)acquire(s, kT0, kMaxDuration, rules, tokens(4'000));
  StoreRecord a = llm_answer(kT0 + seconds{1}, 99, 9'500, seconds{59});
  a.reserved = tokens(4'000);
  (void)record(s, a, rules);
  EXPECT_EQ(s.policies[1].remaining, 6'000);
}

// Tokens reserved before any window was known are in flight when the first
// answer comes: the window it starts spends them first.
TEST(KernelCosts, TokensGrantedBlindAreSpentFromTheFirstWindow) {
  KeyState s;
  const PacingRules rules = burst();
  for (int i = 0; i < 3; ++i) (void)acquire(s, kT0, kMaxDuration, rules, tokens(3'000));
  ASSERT_EQ(s.blind_units.size(), 1u);
  EXPECT_EQ(s.blind_units[0].amount, 9'000);
  StoreRecord first = llm_answer(kT0 + seconds{1}, 99, 37'000);
  first.reserved = tokens(3'000);
  (void)record(s, first, rules);
  // 37,000 left after the first, less the other two still out.
  EXPECT_EQ(s.policies[1].remaining, 31'000);
  EXPECT_TRUE(s.blind_units.empty());
}

// A usage that comes at the end of the body settles the reservation in the
// window that counted it; an answer received before that window began was
// counted in an earlier one, and settles nothing.
TEST(KernelCosts, ALateUsageSettlesOnlyTheWindowThatCountedIt) {
  KeyState s;
  const PacingRules rules = burst();
  (void)record(s, llm_answer(kT0, 100, 10'000), rules);
  (void)acquire(s, kT0, kMaxDuration, rules, tokens(4'000));
  StoreRecord head = llm_answer(kT0 + seconds{1}, 99, 9'000, seconds{59});
  head.reserved = tokens(4'000);
  (void)record(s, head, rules);
  ASSERT_EQ(s.policies[1].remaining, 6'000);
  settle(s, StoreSettle{kT0 + seconds{5}, seconds{4}, tokens(4'000), tokens(500)});
  EXPECT_EQ(s.policies[1].remaining, 9'500);
  // A head from before the window (received 2 s before its first answer).
  settle(s, StoreSettle{kT0 + seconds{6}, seconds{8}, tokens(4'000), tokens(500)});
  EXPECT_EQ(s.policies[1].remaining, 9'500);
  // Never past the limit the server stated.
  s.policies[1].limit = 10'000;
  settle(s, StoreSettle{kT0 + seconds{6}, seconds{1}, tokens(4'000), tokens(0)});
  EXPECT_EQ(s.policies[1].remaining, 10'000);
}

// Separate quotas of one request (Anthropic's input and output tokens): the
// send needs room in both, and takes from each its own amount.
TEST(KernelCosts, EveryQuotaOfTheKeyMustHaveRoom) {
  KeyState s;
  const PacingRules rules = burst();
  StoreRecord r;
  r.now = kT0;
  for (const char* unit : {"input-tokens", "output-tokens"}) {
    PolicyUpdate u;
    u.id = unit;
    u.unit = unit;
    u.remaining = std::string(unit) == "input-tokens" ? 50'000 : 2'000;
    u.reset = seconds{60};
    r.policies.push_back(u);
  }
  (void)record(s, r, rules);
  const std::vector<UnitCost> costs{{"input-tokens", 1'000}, {"output-tokens", 1'500}};
  EXPECT_EQ(acquire(s, kT0, kMaxDuration, rules, costs).wait, Duration::zero());
  EXPECT_EQ(s.policies[0].remaining, 49'000);
  EXPECT_EQ(s.policies[1].remaining, 500);
  const StoreGrant g = acquire(s, kT0, seconds{1}, rules, costs);
  EXPECT_EQ(g.kind, StoreGrant::Kind::kTooLate);  // output tokens bind
  EXPECT_EQ(s.policies[0].remaining, 49'000);
}

}  // namespace
}  // namespace abide::pacing
