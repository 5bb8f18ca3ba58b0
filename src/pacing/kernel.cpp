// The pacer's per-key state machine (pacing/kernel.h): every store runs it.
//
// The Redis store runs its mirror as a Lua script (src/redis/pacer.lua,
// without the learner); keep the two in step (tests/store_differential_test.cpp
// runs both). Times are whole microseconds on the caller's monotonic clock
// (pacing/units.h); "none" is the zero instant.
//
// The learned policy: the learner (learner.cpp, whose head gives its rules)
// turns limited answers into "about n per window"; the kernel enforces it as
// a counted window of its own (the learned bound in acquire, commit_learned),
// one more bound that only restrains, and keeps the learner's evidence (the
// answers accepted in the window, the last probe's round trip). A server that
// never limits pays one counter increment per record and one test per
// acquire (`mode` is kNothing).
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "ascii.h"
#include "pacing/kernel.h"
#include "pacing/learner.h"

namespace abide::pacing {
namespace {

constexpr Instant kNone{};
constexpr double kGolden = 0.6180339887498949;  // low-discrepancy step for the spread

constexpr std::int64_t kRaiseAfter = LearnedPolicyBounds::kRaiseAfter;
constexpr std::int64_t kBareShrink = LearnedPolicyBounds::kBareShrink;

Instant later(Instant a, Instant b) { return a < b ? b : a; }

// A span in microseconds from a double, rounded up, within [0, kMaxMicros].
Micros from_us(double us) {
  if (!(us > 0.0)) return Micros::zero();
  if (us >= static_cast<double>(kMaxMicros.count())) return kMaxMicros;
  return Micros{static_cast<Micros::rep>(std::ceil(us))};
}

// PacingRules in the kernel's units (rounded as the Redis store sends them).
struct Rules {
  bool smooth = true;
  double stretch = 1.0;  // 1 + the safety margin, clamped to [0, 1]
  bool probe_after_cooldown = true;
  Micros probe_timeout{};
  Micros spread{};
  Micros spread_period{};
};

Rules rules_of(const PacingRules& r) {
  Rules k;
  k.smooth = r.pacing == Pacing::kSmooth;
  const double m = r.safety_margin;
  k.stretch = 1.0 + (!(m > 0.0) ? 0.0 : m > 1.0 ? 1.0 : m);
  k.probe_after_cooldown = r.probe_after_cooldown;
  k.probe_timeout = micros_up(r.probe_timeout);
  k.spread = micros_up(r.cooldown_spread);
  k.spread_period = micros_up(r.spread_period);
  return k;
}

// What one answer said, in the kernel's units (StoreRecord rounded as units.h
// says; the policies are rounded as they are read).
struct Answer {
  Instant now{};
  Micros age{};
  std::optional<Micros> cooldown;  // > 0 when set
  WaitCause cooldown_cause = WaitCause::kCooldown;
  Micros cooldown_floor{};
  bool limited = false;
};

Answer answer_of(const StoreRecord& r) {
  Answer a;
  a.now = instant_of(r.now);
  a.age = micros_up(r.age);
  if (r.cooldown && *r.cooldown > Duration::zero()) a.cooldown = span_up(r.now, *r.cooldown);
  a.cooldown_cause = r.cooldown_cause;
  if (r.cooldown_cause == WaitCause::kQuota) a.cooldown_floor = span_up(r.now, r.cooldown_floor);
  a.limited = r.limited;
  return a;
}

Micros spread_step(KeyState& s, const Rules& rules) {
  const Micros spread = rules.spread;
  if (spread <= Micros::zero()) return Micros::zero();
  double u = s.spread_seed + static_cast<double>(s.spread_n++ % 1000000) * kGolden;
  u -= std::floor(u);
  const double sp = static_cast<double>(spread.count());
  return from_us(sp / 4.0 + u * sp * 0.75);
}

// The learned policy binds a key only while the server announces none.
bool learning(const KeyState& s) { return s.learned.mode != Learned::kNothing && s.policies.empty(); }

// The learned policy's part of a send at `slot`: a slot past the window's end
// rolls it on (the windows follow each other at the learned length), and the
// send counts in its window.
void commit_learned(Learned& l, Instant slot, bool smooth, double stretch) {
  if (l.hold > Micros::zero()) return;  // the probe for a window's end: counted when it is answered
  const Micros len = l.length();
  if (slot >= add(l.start, len)) {
    const std::int64_t k = (slot - l.start) / len;
    // Only a window that was spent in full and ended quiet says the limit
    // may be higher; idle windows say nothing.
    const bool full = l.used >= l.n;
    l.first = false;  // late answers of the first window are counted no more
    l.start += len * k;
    l.since = std::min(l.since + k, kMaxLearned);
    if (full) l.quiet = std::min(l.quiet + 1, kMaxLearned);
    l.used = 0;
    l.accepted = 0;
    l.open = false;  // this send is the window's probe: the others wait for its answer
    if (l.mode == Learned::kBare && full) {
      // Bare 429s tell no window's end; each quiet window shortens the one
      // found by a search (it can only be too long), so the rate is raised
      // slowly until a probe comes back limited and a search finds it again.
      const Micros shorter = len - len / kBareShrink;
      if (l.len > Micros::zero()) l.len = clamp_learned(shorter);
      else l.guess = clamp_learned(shorter);
    }
    if (l.quiet >= kRaiseAfter) {
      // Probing upward, slowly: a raised limit is found again.
      l.n = std::min(kMaxLearned, l.n + std::max<std::int64_t>(1, l.n / 16));
      l.quiet = 0;
    }
  }
  if (smooth && l.used < l.n) {
    // Spread what is left of n up to the window's earliest possible end: its
    // boundary was stated in whole seconds, so it may be up to one early.
    // A stated window's spacing is not stretched by the safety margin: the
    // aim is that margin already, and a stretch pushes the window's last
    // sends past it, into the next window. A found one (bare 429s) keeps it.
    const Instant end = add(l.start, len);
    const Instant aim = end - std::min(kStatedStep, len / 2);
    const double left = aim > slot ? static_cast<double>((aim - slot).count()) : 0.0;
    const double k = l.mode == Learned::kRetryAfter ? 1.0 : stretch;
    l.next = add(slot, from_us(left * k / static_cast<double>(l.n - l.used)));
  }
  l.used = std::min(l.used + 1, kMaxLearned);
}

// Whether a unit a caller stated is the one a policy keeps (unit_of()'s).
bool same_unit(std::string_view stated, std::string_view kept) {
  return ascii::iequals(stated.substr(0, kMaxUnitBytes), kept);
}

// What a send needs of policy p: one unit of a request quota, its stated
// amount of any other.
std::int64_t need(const PolicyState& p, std::span<const UnitCost> costs) {
  return p.unit.empty() ? 1 : amount_of(costs, p.unit);
}

// The amount blind grants of `unit` reserved (kernel.h, KeyState::blind_units).
std::int64_t blind_amount(const KeyState& s, std::string_view unit) {
  for (const UnitCost& b : s.blind_units) {
    if (b.unit == unit) return b.amount;
  }
  return 0;
}

// A grant's amounts that no counted window of their unit covered are blind.
void note_blind_units(KeyState& s, Instant slot, std::span<const UnitCost> costs) {
  for (const UnitCost& c : costs) {
    const std::int64_t n = std::clamp<std::int64_t>(c.amount, 0, kMaxLearned);
    if (n == 0 || is_requests(c.unit)) continue;
    // A unit listed twice counts once, as amount_of reads it: the first.
    if (std::any_of(costs.data(), &c, [&](const UnitCost& e) { return ascii::iequals(e.unit, c.unit); })) continue;
    const bool covered = std::any_of(s.policies.begin(), s.policies.end(), [&](const PolicyState& p) {
      return p.remaining >= 0 && slot < p.reset_at && same_unit(c.unit, p.unit);
    });
    if (covered) continue;
    std::string unit = unit_of(c.unit);
    auto it = std::find_if(s.blind_units.begin(), s.blind_units.end(), [&](const UnitCost& b) { return b.unit == unit; });
    if (it == s.blind_units.end()) {
      if (s.blind_units.size() >= QuotaStore::kMaxPolicies) continue;  // bounded: a unit this rare is not followed
      it = s.blind_units.insert(s.blind_units.end(), UnitCost{std::move(unit), 0});
    }
    it->amount = std::min(it->amount + n, kMaxLearned);
    s.blind_at = later(s.blind_at, slot);
  }
}

// Takes what a send at `slot` needs of every policy (one unit of a request
// quota, the stated amount of any other), and moves the key's schedule on.
void commit(KeyState& s, Instant slot, const Rules& rules, std::span<const UnitCost> costs) {
  const double stretch = rules.stretch;
  if (learning(s)) commit_learned(s.learned, slot, rules.smooth, stretch);
  bool counted = false;  // by a request quota's window
  for (auto& p : s.policies) {
    const std::int64_t n = need(p, costs);
    if (p.remaining >= 0) {
      if (p.unit.empty()) counted = counted || slot < p.reset_at;
      if (slot < p.reset_at && n > 0 && p.remaining >= n) {
        if (rules.smooth) {
          // Divide what is left of the window among what is left of the
          // quota, in proportion to what this send takes of it. Aim at the
          // earliest instant the window can end (see `aim`).
          const double left = p.aim > slot ? static_cast<double>((p.aim - slot).count()) : 0.0;
          p.next = add(slot, from_us(left * stretch * static_cast<double>(n) / static_cast<double>(p.remaining)));
        }
        p.remaining -= n;
        p.out = std::min(p.out + n, kMaxLearned);
      }
    } else if (p.limit > 0 && p.window > Micros::zero() && n > 0) {
      const double interval = static_cast<double>(p.window.count()) / static_cast<double>(p.limit);
      p.next = add(slot, from_us(interval * static_cast<double>(n) * stretch));
    }
  }
  if (!counted) {
    s.blind = std::min(s.blind + 1, kMaxLearned);
    s.blind_at = later(s.blind_at, slot);
  }
  if (!costs.empty()) note_blind_units(s, slot, costs);
  s.tat = slot;
  if (slot < s.spread_end) s.tat = add(slot, spread_step(s, rules));
}

// What StoreGrant::held says of the policy that set a wait (none: no policy did).
std::optional<QuotaHeld> held_of(const PolicyState* p, std::int64_t need) {
  if (p == nullptr) return std::nullopt;
  return QuotaHeld{p->unit, p->remaining, p->limit, need};
}

}  // namespace

bool is_requests(std::string_view unit) { return unit.empty() || ascii::iequals(unit, "requests"); }

std::int64_t amount_of(std::span<const UnitCost> costs, std::string_view unit) {
  for (const UnitCost& c : costs) {
    if (same_unit(c.unit, unit)) return std::clamp<std::int64_t>(c.amount, 0, kMaxLearned);
  }
  return 0;
}

std::string unit_of(std::string_view unit) {
  if (is_requests(unit)) return {};
  std::string u(unit.substr(0, kMaxUnitBytes));
  for (char& c : u) c = ascii::to_lower(c);
  return u;
}

StoreGrant acquire(KeyState& s, MonoTime caller_now, Duration caller_max_wait, const PacingRules& caller_rules,
                   std::span<const UnitCost> costs) {
  // Waits count from `now` cut to the microsecond: the caller, whose now is
  // later, never sends before the slot.
  const Instant now = instant_of(caller_now);
  const Micros max_wait = max_wait_of(caller_max_wait);
  const Rules rules = rules_of(caller_rules);
  s.seen = later(s.seen, now);
  // The slot is the latest of these bounds; the one that set it is the cause.
  Instant slot = now;
  WaitCause cause = WaitCause::kNone;
  const PolicyState* held = nullptr;  // the announced policy that set the slot, if one did
  std::int64_t held_need = 0;
  const auto bound = [&](Instant t, WaitCause c, const PolicyState* by = nullptr, std::int64_t by_need = 0) {
    if (t > slot) {
      slot = t;
      cause = c;
      held = by;
      held_need = by_need;
    }
  };
  // Slots spread out after a cooldown are still the cooldown's doing.
  bound(s.tat, s.tat <= s.spread_end ? s.cool_cause : WaitCause::kQueue);
  bound(s.cool_end, s.cool_cause);
  const bool smooth = rules.smooth;
  for (const auto& p : s.policies) {
    // A send that needs nothing of a quota (no tokens stated) is not held by it.
    const std::int64_t n = need(p, costs);
    if (p.remaining >= 0) {
      if (n > p.remaining) {
        // Not enough left: the next window (its probe) decides.
        bound(p.reset_at, WaitCause::kQuota, &p, n);
      } else if (smooth && n > 0) {
        // A smooth slot past the reset means: the next send is the probe, at the reset.
        bound(p.next < p.reset_at ? p.next : p.reset_at, WaitCause::kQuota, &p, n);
      }
    } else if (p.limit > 0 && p.window > Micros::zero() && n > 0) {
      bound(p.next, WaitCause::kQuota, &p, n);
    }
  }
  bool ended = false;  // a known window ends before this slot: nothing fresh is known
  if (learning(s)) {
    // The learned policy, one more bound (it only restrains). The first send
    // of each learned window, and the one after a bare 429's hold, is a probe.
    const Learned& l = s.learned;
    if (l.hold > Micros::zero()) {
      bound(l.hold_end, WaitCause::kQuota);
      ended = true;
    } else {
      const Micros len = l.length();
      const Instant end = add(l.start, len);
      if (l.used >= l.n) {
        bound(end, WaitCause::kQuota);
      } else if (smooth) {
        bound(l.next < end ? l.next : end, WaitCause::kQuota);
      }
      // The window may truly end up to a stated step before `end` (its
      // boundary was stated late): a send after that waits for the next one,
      // or it could land in the next true window beside that window's own.
      if (l.mode == Learned::kRetryAfter && slot >= end - std::min(kStatedStep, len / 2)) {
        bound(end, WaitCause::kQuota);
      }
      if (slot >= end || !l.open) ended = true;
    }
  }
  for (const auto& p : s.policies) {
    if (p.remaining >= 0 && slot >= p.reset_at) ended = true;
  }
  const Micros wait = slot - now;
  if (ended || s.probe_need) {
    if (s.probe_out && s.probe_until > now) {
      return {StoreGrant::Kind::kAwaitProbe, duration_of(s.probe_until - now), s.epoch, WaitCause::kProbe};
    }
    if (wait > max_wait) return {StoreGrant::Kind::kTooLate, duration_of(wait), s.epoch, cause, held_of(held, held_need)};
    const std::optional<QuotaHeld> by = held_of(held, held_need);
    s.probe_out = true;
    s.probe_start = slot;
    s.probe_until = add(slot, rules.probe_timeout);
    commit(s, slot, rules, costs);
    return {StoreGrant::Kind::kProbe, duration_of(wait), s.epoch, cause, by};
  }
  if (wait > max_wait) return {StoreGrant::Kind::kTooLate, duration_of(wait), s.epoch, cause, held_of(held, held_need)};
  const std::optional<QuotaHeld> by = held_of(held, held_need);  // before commit() spends from the policy
  commit(s, slot, rules, costs);
  return {StoreGrant::Kind::kGranted, duration_of(wait), s.epoch, cause, by};
}

namespace {

void release(KeyState& s, Instant now, double seed, const Rules& rules) {
  s.spread_end = add(now, rules.spread_period);
  s.spread_seed = seed;
  s.spread_n = 0;
}

// The learner's part of an answer: an announced policy drops what was
// learned (the server's word wins); a probe's answer opens the learned window
// and measures the round trip; an answer that teaches something goes to the
// learner, any other accepted one is counted.
void learn_from(KeyState& s, const Answer& r, Instant received, bool probe_answered) {
  Learned& l = s.learned;
  if (!s.policies.empty()) {
    if (l.mode != Learned::kNothing) l = Learned{};
    return;
  }
  if (probe_answered && l.mode != Learned::kNothing) {
    l.open = true;
    if (received >= s.probe_start && s.probe_start != kNone) l.rtt = std::min(received - s.probe_start, kMaxLearnedHold);
  }
  const Lesson a{r.now, received, r.limited, r.cooldown.value_or(Micros::zero())};
  if (teaches(l, a)) {
    learn(l, a);
  } else if (!r.limited) {
    count_accepted(l, received);
  }
}

// Settles a send's reservation of p (`mine` units) with what its answer
// says it used: the unused part comes back, an overrun is taken; never
// above the policy's limit, never below nothing. Nothing said: kept.
void settle_policy(PolicyState& p, std::int64_t mine, std::span<const UnitCost> used) {
  const auto it = std::find_if(used.begin(), used.end(), [&](const UnitCost& u) { return same_unit(u.unit, p.unit); });
  if (it == used.end()) return;
  const std::int64_t spent = std::clamp<std::int64_t>(it->amount, 0, kMaxLearned);
  std::int64_t left = std::max<std::int64_t>(p.remaining + mine - spent, 0);
  if (p.limit > 0) left = std::min(left, p.limit);
  p.remaining = left;
}

// When an answer was received: `age` before `now`, but never before the
// clock's start.
Instant received_at(Instant now, Micros age) {
  if (age > now.time_since_epoch()) age = now.time_since_epoch();
  return now - age;
}

// A response received after a window ended is fresh information about it:
// the window's count no longer applies.
void forget_ended_windows(KeyState& s, Instant received) {
  for (auto& p : s.policies) {
    if (p.remaining >= 0 && received >= p.reset_at) p.remaining = -1;
  }
}

// The probe's answer, or any response received after the cooldown ended,
// is the fresh information the waiters wait for: true when this one is.
bool answers_waiters(KeyState& s, Instant received) {
  if ((s.probe_out && received >= s.probe_start) || (s.probe_need && received >= s.cool_end)) {
    s.probe_out = false;
    s.probe_need = false;
    return true;
  }
  return false;
}

// This answer's request was one grant; the others granted blind and not yet
// answered may have reached the server after it, so the count it reports
// does not have them in yet. A window starting now spends them first (a
// few too many when they were counted before it: never too few). Returns
// those others; grants a probe timeout past the last blind one are
// forgotten first (they were never answered).
std::int64_t answer_blind(KeyState& s, const StoreRecord& record, Instant now, const Rules& rules) {
  if (now > add(s.blind_at, rules.probe_timeout)) {
    s.blind = 0;
    s.blind_units.clear();
  }
  const std::int64_t others = std::max<std::int64_t>(s.blind - 1, 0);
  if (s.blind > 0) --s.blind;
  // The other units alike: what this answer's request reserved is answered.
  for (UnitCost& b : s.blind_units) b.amount = std::max<std::int64_t>(b.amount - amount_of(record.reserved, b.unit), 0);
  return others;
}

// One answer, as the steps that read its policies need it.
struct Reading {
  const StoreRecord& record;
  Instant now;
  Instant received;
  std::int64_t others;  // blind grants still out besides this answer's (answer_blind)
  const Rules& rules;
};

// What an answer's policies told the steps after them.
struct Told {
  bool started = false;             // a request quota's window
  std::uint32_t started_units = 0;  // bit i: a window of blind_units[i]'s unit
  Instant pinned = kNone;           // the latest end of a window this answer says is spent
  bool untracked_spent = false;     // a spent policy the key does not keep: its end is not known here
};

// The key's policy an update is about, added when there is room and the
// update says enough to count with; nullptr when it is not kept.
PolicyState* policy_of(KeyState& s, const PolicyUpdate& u, bool has_policy, Told& told) {
  const std::string_view id = std::string_view(u.id).substr(0, 256);
  const auto it = std::find_if(s.policies.begin(), s.policies.end(), [&](const PolicyState& p) { return p.id == id; });
  if (it != s.policies.end()) return &*it;
  const bool has_window = u.remaining.has_value() && u.reset.has_value();
  if (s.policies.size() >= QuotaStore::kMaxPolicies || (!has_policy && !has_window)) {
    if (u.remaining && *u.remaining <= 0) told.untracked_spent = true;  // its end is not known here
    return nullptr;
  }
  s.policies.push_back(PolicyState{std::string(id), unit_of(u.unit)});
  return &s.policies.back();
}

// The least count reported, less what may still be out, is what is left: an
// answer that came back out of order (its count was already in the least)
// gives back the unit the first answer took for it, and once all are back
// the count is the server's. Never more than the first answer took.
void give_back_in_flight(PolicyState& p) {
  const std::int64_t left = p.seen - p.out;
  if (p.owed > 0 && left > p.remaining) {
    const std::int64_t back = std::min(left - p.remaining, p.owed);
    p.owed -= back;
    p.remaining += back;
  }
}

// The window's end, and the instant smooth pacing aims at, from one more
// answer's reset: the earliest reset is the closest, since servers round
// times up and every answer's reset is at or after the true one.
void place_window_end(PolicyState& p, std::int64_t remaining, Instant reset_at, Micros step, Instant now) {
  if (remaining == 0 && reset_at > add(p.reset_at, std::max(step, kStatedStep))) {
    // A spent count whose reset is later than the window's end by more
    // than rounding explains (a step, at least a second) moves that end:
    // the server holds the key until then, and an earlier answer's reset
    // never lets a send go before it.
    p.reset_at = reset_at;
  } else {
    p.reset_at = std::min(p.reset_at, reset_at);
  }
  const Instant bound = reset_at - std::min(step, reset_at - now);
  if (bound < p.reset_at) p.aim = std::max(p.aim, bound);
  p.aim = std::min(p.aim, p.reset_at);
}

// The same window: counts only go down (a late response reports too much),
// and the earliest reset is the closest: servers round times up, so every
// answer's reset is at or after the true one (but see a spent count in
// place_window_end). Later answers only tighten the aim; a bound at or past
// the tracked end is about a later window.
void count_same_window(PolicyState& p, std::int64_t remaining, Instant reset_at, Micros step, const Reading& a) {
  // This answer's reservation is answered. What it says was used
  // settles it first: the unused part comes back, an overrun is taken.
  const std::int64_t mine = p.unit.empty() ? 1 : amount_of(a.record.reserved, p.unit);
  if (!p.unit.empty()) settle_policy(p, mine, a.record.used);
  p.remaining = std::min(p.remaining, remaining);
  p.seen = std::min(p.seen, remaining);
  p.out = std::max<std::int64_t>(p.out - mine, 0);
  give_back_in_flight(p);
  place_window_end(p, remaining, reset_at, step, a.now);
}

// A window starts. Its first answer is aimed at most half way, so a window
// shorter than the step is still spread.
void start_window(KeyState& s, PolicyState& p, std::int64_t remaining, Instant reset_at, Micros step,
                  const Reading& a, Told& told) {
  std::int64_t before = p.unit.empty() ? a.others : blind_amount(s, p.unit);
  // Tokens are mostly a bucket, whose windows here are only spans over
  // which a count is spent: what the last window granted and is still
  // out may reach the server after this answer, so the new window
  // spends it first too (and gives it back as answers show it was in).
  if (!p.unit.empty() && p.out > 0 && a.now <= add(p.reset_at, a.rules.probe_timeout)) {
    before = std::min(before + std::max<std::int64_t>(p.out - amount_of(a.record.reserved, p.unit), 0), kMaxLearned);
  }
  p.remaining = std::max<std::int64_t>(remaining - before, 0);
  p.seen = remaining;
  p.out = before;
  p.owed = before;
  p.reset_at = reset_at;
  p.aim = reset_at - std::min(step, (reset_at - a.now) / 2);
  p.begun = a.received;
  if (p.unit.empty()) {
    told.started = true;
  } else {
    for (std::size_t i = 0; i < s.blind_units.size(); ++i) {
      if (s.blind_units[i].unit == p.unit) told.started_units |= 1U << i;
    }
  }
}

// A count with its reset: about the window the key counts in, or about one
// that starts.
void count_window(KeyState& s, PolicyState& p, const PolicyUpdate& u, std::int64_t remaining, const Reading& a,
                  Told& told) {
  const Instant reset_at = add(a.now, span_up(a.record.now, *u.reset));
  if (reset_at <= a.now) return;  // a stale response about a window already over
  // A reset stated in steps (whole seconds) is at most a step after the
  // true end, so reset_at - step is a lower bound of it (servers round up).
  const Micros step = micros_down(u.reset_resolution);
  // A reset a whole window later than the window we count in is the next
  // one. (Two answers about one window differ by less than the server's rounding.)
  const bool next_window = p.window > Micros::zero() && reset_at >= add(p.reset_at, p.window);
  if (p.remaining >= 0 && !next_window) {
    count_same_window(p, remaining, reset_at, step, a);
  } else {
    start_window(s, p, remaining, reset_at, step, a, told);
  }
  if (remaining == 0) told.pinned = later(told.pinned, p.reset_at);
}

// One policy the answer states: its limit and window, then its count.
void apply_policy(KeyState& s, const PolicyUpdate& u, const Reading& a, Told& told) {
  // Its spans rounded as units.h says: a window up, a reset's end up, a resolution down.
  const Micros window = u.window ? micros_up(*u.window) : Micros::zero();
  const bool has_policy = u.limit && *u.limit > 0 && window > Micros::zero();
  if (!has_policy && !u.remaining) return;
  PolicyState* const kept = policy_of(s, u, has_policy, told);
  if (kept == nullptr) return;
  PolicyState& p = *kept;
  if (u.limit && *u.limit > 0) p.limit = *u.limit;
  if (window > Micros::zero()) p.window = window;
  if (!u.remaining) return;
  const std::int64_t remaining = std::max<std::int64_t>(*u.remaining, 0);
  if (u.reset) {
    count_window(s, p, u, remaining, a, told);
  } else if (p.remaining >= 0) {
    p.remaining = std::min(p.remaining, remaining);
    p.seen = std::min(p.seen, remaining);  // what is given back stays below it
  }
}

// The blind grants a window that started counts as spent are blind no more;
// a unit with nothing blind left is dropped.
void clear_counted_blind(KeyState& s, const Told& told) {
  if (told.started) s.blind = 0;
  for (std::size_t i = 0; i < s.blind_units.size(); ++i) {
    if ((told.started_units >> i) & 1U) s.blind_units[i].amount = 0;
  }
  std::erase_if(s.blind_units, [](const UnitCost& b) { return b.amount == 0; });
}

// Where the cooldown an answer states ends.
Instant cooldown_end(const Answer& r, const Told& told) {
  const Instant now = r.now;
  const Instant end = add(now, *r.cooldown);
  if (r.cooldown_cause == WaitCause::kQuota && told.pinned != kNone && !told.untracked_spent && told.pinned < end) {
    // A spent window's cooldown ends where the window does: at the earliest
    // reset any answer gave it (each is at or after the true end), not at
    // this answer's own, which may be rounded up most of a second later.
    // What a Retry-After states stays whole.
    return later(told.pinned, add(now, r.cooldown_floor));
  }
  return end;
}

// A cooldown that ends later than the key's blocks it (true): a new epoch,
// and every reservation void.
bool start_cooldown(KeyState& s, const Answer& r, const Told& told, double seed, const Rules& rules) {
  if (!r.cooldown || *r.cooldown <= Micros::zero()) return false;
  const Instant now = r.now;
  const Instant end = cooldown_end(r, told);
  if (end <= s.cool_end) return false;
  s.cool_end = end;
  s.cool_cause = r.cooldown_cause == WaitCause::kQuota ? WaitCause::kQuota : WaitCause::kCooldown;
  ++s.epoch;
  // Like every reservation, a probe handed out before the cooldown is void.
  s.probe_out = false;
  // Every slot after now was a reservation, void now: the queue starts
  // again from here, and a learned window that has not begun has spent
  // nothing yet (its slots would otherwise count twice when asked again).
  s.tat = std::min(s.tat, now);
  if (s.learned.mode != Learned::kNothing && now < s.learned.start) {
    s.learned.used = 0;
    s.learned.next = s.learned.start;
  }
  if (rules.probe_after_cooldown) {
    s.probe_need = true;
  } else {
    release(s, end, seed, rules);
  }
  return true;
}

}  // namespace

// An answer, step by step: what it says of the windows counted, whether it
// is what waiters wait for, the blind grants it answers, each policy it
// states, the cooldown it sets; then what it teaches the learner.
RecordOutcome record(KeyState& s, const StoreRecord& record, const PacingRules& caller_rules) {
  const Answer r = answer_of(record);
  const Rules rules = rules_of(caller_rules);
  RecordOutcome out;
  const Instant now = r.now;
  s.seen = later(s.seen, now);
  const Instant received = received_at(now, r.age);
  double seed = record.spread_seed;
  if (!(seed >= 0.0 && seed < 1.0)) seed = 0.0;

  forget_ended_windows(s, received);
  out.released = answers_waiters(s, received);
  const Reading a{record, now, received, answer_blind(s, record, now, rules), rules};
  Told told;
  for (const auto& u : record.policies) apply_policy(s, u, a, told);
  clear_counted_blind(s, told);
  out.blocked = start_cooldown(s, r, told, seed, rules);
  if (out.released && !out.blocked) release(s, now, seed, rules);

  learn_from(s, r, received, out.released);
  return out;
}

Instant expiry(const KeyState& s) {
  Instant last = later(later(s.seen, s.tat), later(later(s.cool_end, s.spread_end), s.probe_until));
  Micros grace = std::chrono::seconds{1};
  if (s.learned.mode != Learned::kNothing) {
    const Learned& l = s.learned;
    last = later(last, later(add(l.start, l.length()), later(l.hold_end, l.next)));
    grace = std::max(grace, l.length());
  }
  for (const auto& p : s.policies) {
    last = later(last, later(p.next, p.remaining >= 0 ? p.reset_at : kNone));
    grace = std::max(grace, p.window);
  }
  return add(last, grace);
}

Micros Learned::length() const { return std::max(len > Micros::zero() ? len : guess, kMinLearnedWindow); }

void settle(KeyState& s, const StoreSettle& x) {
  const Instant now = instant_of(x.now);
  s.seen = later(s.seen, now);
  const Instant received = received_at(now, micros_up(x.age));
  for (PolicyState& p : s.policies) {
    // Only the window the answer was counted in, while it still counts.
    if (p.unit.empty() || p.remaining < 0 || received < p.begun || received >= p.reset_at) continue;
    settle_policy(p, amount_of(x.reserved, p.unit), x.used);
  }
}

void abandon_probe(KeyState& s, MonoTime caller_now) {
  const Instant now = instant_of(caller_now);
  s.seen = later(s.seen, now);
  s.probe_out = false;
  s.probe_until = kNone;
}

std::optional<LearnedPolicy> learned(KeyState& s, MonoTime caller_now) {
  const Instant now = instant_of(caller_now);
  s.seen = later(s.seen, now);
  if (!learning(s)) return std::nullopt;
  const Learned& l = s.learned;
  LearnedPolicy p;
  p.count = l.n;
  p.window = duration_of(l.len > Micros::zero() ? l.len : l.guess);
  p.window_measured = l.len > Micros::zero();
  p.windows = l.windows;
  p.from_retry_after = l.mode == Learned::kRetryAfter;
  return p;
}

void shift(KeyState& s, Micros by) {
  // An instant moved before the clock's start is long past: the earliest
  // instant that is not "none" says the same.
  const auto move = [by](Instant& t) {
    if (t != kNone) t = std::max(add(t, by), Instant{Micros{1}});
  };
  for (Instant* t : {&s.tat, &s.cool_end, &s.spread_end, &s.probe_start, &s.probe_until, &s.seen, &s.blind_at}) {
    move(*t);
  }
  for (auto& p : s.policies) {
    for (Instant* t : {&p.reset_at, &p.aim, &p.next, &p.begun}) move(*t);
  }
  Learned& l = s.learned;
  for (Instant* t : {&l.start, &l.anchor, &l.next, &l.hold_end, &l.search_began}) move(*t);
}

}  // namespace abide::pacing
