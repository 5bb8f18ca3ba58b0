// pacing/kernel.h: the pacer's per-key state machine, written once.
//
// One key's state (KeyState) and pure functions over it: no I/O, no locks, no
// clock reads. Every store keeps a KeyState per key and runs these functions
// on it inside its own atomic step: MemoryStore under a per-key mutex, the
// file store inside one SQLite transaction (the state is encoded with
// state_codec.h between steps), and the Redis store runs the same machine as
// a Lua script. What answers teach a key whose server announces no quota is
// the learner's (learner.h), in C++ only: record() calls it in the same step,
// and RedisStore publishes its result. The state's times are whole
// microseconds on the caller's monotonic clock (pacing/units.h says why and
// how they are rounded); the zero instant means "none". The functions take
// the caller's nanoseconds and round them the one way units.h gives. The
// rules are in abide/pacer.h and abide/quota_store.h.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "abide/clock.h"
#include "abide/quota_store.h"
#include "pacing/units.h"

namespace abide::pacing {

// A policy learned from limited answers (the rules are at the head of
// learner.cpp; the kernel enforces it and keeps the evidence counters).
struct Learned {
  enum Mode : std::uint8_t { kNothing, kRetryAfter, kBare };
  Mode mode = kNothing;
  std::int64_t n = 0;         // sends per window
  Micros len{};             // the window's length; zero until two boundaries were seen
  Micros guess{};           // the length used before then
  Instant start{};           // the current window's start
  Instant anchor{};          // the last boundary an answer stated (or a probe found)
  std::int64_t since = 0;     // windows rolled since the anchor
  std::int64_t accepted = 0;  // accepted answers received since `start` (counted even before anything is learned)
  std::int64_t used = 0;      // sends granted in the current window
  std::int64_t quiet = 0;     // windows ended without a limited answer since n last changed
  Instant next{};            // smooth pacing's next slot in the window
  Micros hold{};            // bare: while the window's end is searched for, the hold (zero: not searching)
  Instant hold_end{};        // bare: the next probe's slot
  Instant search_began{};    // bare: when the search began
  std::int64_t windows = 0;   // windows it was learned from (for what is shown)
  bool open = true;           // false from a window's first send (its probe) until the probe is answered
  bool first = false;         // n is the first window's count, still open to answers that come back late
  Micros rtt{};             // the last probe's round trip: answers sooner after a window began are the last one's
  Micros found{};           // bare: how late the anchor may be (the hold and round trip of the search that found it)
  Micros length() const;    // len once measured, else guess; at least the smallest learned window
};

// One announced policy of the key. Its counts are in its own unit: a request
// quota's (unit "") take one per send, any other's (tokens, bytes) the amount
// the send stated it needs (StoreAcquire::costs).
struct PolicyState {
  std::string id;
  std::string unit{};           // "": requests
  std::int64_t limit = 0;       // 0: unknown
  Micros window{};            // 0: unknown
  std::int64_t remaining = -1;  // tracked remaining in the current window; -1: no window known
  Instant reset_at{};          // end of the current window (when remaining >= 0)
  Instant aim{};               // smooth pacing spends the window's quota by this (<= reset_at)
  Instant next{};              // this policy's next free slot (smooth / GCRA spacing)
  // The counted window's first answer counts the sends still in flight as
  // spent; its later answers give them back (see record()): the least
  // remaining an answer reported, the sends that may not be in it yet
  // (those, and the window's own, not answered), and how many of the units
  // the first answer took may still be given back.
  std::int64_t seen = 0;
  std::int64_t out = 0;
  std::int64_t owed = 0;
  // When the answer that started the counted window was received: a send
  // answered before it was counted in an earlier window (settle()).
  Instant begun{};
};

// Everything enforcement needs about one key.
struct KeyState {
  std::uint64_t epoch = 0;                      // the blocking generation (StoreGrant::epoch)
  Instant tat{};                               // the key's next free slot; slots are handed out in order
  Instant cool_end{};                          // nothing before this
  WaitCause cool_cause = WaitCause::kCooldown;  // what set cool_end
  Instant spread_end{};                        // slots before this are spread
  double spread_seed = 0.0;
  std::uint64_t spread_n = 0;
  bool probe_need = false;  // the next grant must be a probe (a cooldown ended)
  bool probe_out = false;   // a probe was handed out and not yet answered
  Instant probe_start{};
  Instant probe_until{};
  Instant seen{};  // the latest `now` seen, for expiry
  // Grants no counted window covered (nothing was known, or their slot was
  // past every window's end), not yet answered: the first answer of a window
  // counts those still in flight as spent (see record()). A grant that is
  // never answered (a transport failure records nothing) is forgotten a probe
  // timeout after the last blind grant.
  std::int64_t blind = 0;
  Instant blind_at{};
  // The same for the other units: the amounts blind grants reserved, per
  // unit no counted window of that unit covered (at most kMaxPolicies units).
  std::vector<UnitCost> blind_units;
  std::vector<PolicyState> policies;
  Learned learned;
};

// Decides, and reserves when granted (StoreGrant's kinds), all or nothing
// across the key's quotas: one unit of each request quota, `costs` of the others.
StoreGrant acquire(KeyState& s, MonoTime now, Duration max_wait, const PacingRules& rules,
                   std::span<const UnitCost> costs = {});

// The unit a policy update names, as the kernel keeps it ("" for requests,
// at most kMaxUnitBytes otherwise).
std::string unit_of(std::string_view unit);
inline constexpr std::size_t kMaxUnitBytes = 32;

// Whether a unit names a request quota ("" or "requests", in any case).
bool is_requests(std::string_view unit);

// The amount of `unit` among `costs` (none listed: 0; listed twice: the
// first), within the kernel's counts; units compare as the kernel keeps them.
std::int64_t amount_of(std::span<const UnitCost> costs, std::string_view unit);

// Applies what one response said, and what it teaches the learner.
RecordOutcome record(KeyState& s, const StoreRecord& r, const PacingRules& rules);

// Settles a send's reservation with what its answer's body says it used.
void settle(KeyState& s, const StoreSettle& settle);

// Forgets the outstanding probe: the next acquire probes.
void abandon_probe(KeyState& s, MonoTime now);

// True when no cooldown started since `epoch` was handed out.
inline bool still_valid(const KeyState& s, std::uint64_t epoch) { return s.epoch == epoch; }

// What the key learned, while its server announces no quota.
std::optional<LearnedPolicy> learned(KeyState& s, MonoTime now);

// The last instant the state matters (plus a grace of the longest window):
// after it the state is the same as a new key's and may be dropped.
Instant expiry(const KeyState& s);

// Moves every instant of the state by `by` (zero instants stay "none"): the
// same state on another timeline (a monotonic clock after a reboot).
void shift(KeyState& s, Micros by);

}  // namespace abide::pacing
