// The pacing kernel's state codec and its move to another timeline.
#include "pacing/kernel.h"

#include <gtest/gtest.h>

#include <random>
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
    s.policies.push_back(p);
  }
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
  }
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
  EXPECT_EQ(newer.error(), "state format 3 is not 2");

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
  bytes[0] = 1;
  // The cooldown's end is the 8 bytes after the format, epoch and next slot.
  const std::int64_t ns = 7'000'001;
  for (int i = 0; i < 8; ++i) bytes[17 + static_cast<std::size_t>(i)] = static_cast<char>((ns >> (8 * i)) & 0xff);
  auto back = decode(bytes);
  ASSERT_TRUE(back.has_value()) << back.error();
  EXPECT_EQ(back->cool_end, Instant{Micros{7001}});
}

}  // namespace
}  // namespace abide::pacing
