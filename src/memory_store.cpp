// MemoryStore: the pacer's per-key state machine, in process memory.
//
// The same state machine runs in Redis as a Lua script (src/redis/pacer.lua);
// keep the two in step. Times are monotonic instants; "none" is the zero instant.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "abide/quota_store.h"

namespace abide {
namespace {

constexpr MonoTime kNone{};
constexpr double kGolden = 0.6180339887498949;  // low-discrepancy step for the spread

struct PolicyState {
  std::string id;
  std::int64_t limit = 0;       // 0: unknown
  Duration window{};            // 0: unknown
  std::int64_t remaining = -1;  // tracked remaining in the current window; -1: no window known
  MonoTime reset_at{};          // end of the current window (when remaining >= 0)
  MonoTime aim{};               // smooth pacing spends the window's quota by this (<= reset_at)
  MonoTime next{};              // this policy's next free slot (smooth / GCRA spacing)
};

struct KeyState final : QuotaStore::Handle {
  std::mutex mu;
  std::uint64_t epoch = 0;
  MonoTime tat{};         // the key's next free slot; slots are handed out in order
  MonoTime cool_end{};    // nothing before this
  WaitCause cool_cause = WaitCause::kCooldown;  // what set cool_end
  MonoTime spread_end{};  // slots before this are spread
  double spread_seed = 0.0;
  std::uint64_t spread_n = 0;
  bool probe_need = false;  // the next grant must be a probe (a cooldown ended)
  bool probe_out = false;   // a probe was handed out and not yet answered
  MonoTime probe_start{};
  MonoTime probe_until{};
  MonoTime seen{};  // the latest `now` seen, for expiry
  std::vector<PolicyState> policies;
};

MonoTime later(MonoTime a, MonoTime b) { return a < b ? b : a; }

// A duration in nanoseconds from a double, clamped to [0, kMaxDuration].
Duration from_ns(double ns) {
  if (!(ns > 0.0)) return Duration::zero();
  if (ns >= 9.0e18) return kMaxDuration;
  return Duration{static_cast<Duration::rep>(std::ceil(ns))};
}

double margin_of(const PacingRules& rules) {
  const double m = rules.safety_margin;
  if (!(m > 0.0)) return 0.0;
  return m > 1.0 ? 1.0 : m;
}

Duration spread_step(KeyState& s, const PacingRules& rules) {
  const Duration spread = rules.cooldown_spread;
  if (spread <= Duration::zero()) return Duration::zero();
  double u = s.spread_seed + static_cast<double>(s.spread_n++ % 1000000) * kGolden;
  u -= std::floor(u);
  const double sp = static_cast<double>(spread.count());
  return from_ns(sp / 4.0 + u * sp * 0.75);
}

// Consumes one unit of every policy for a send at `slot`, and moves the key's
// schedule on.
void commit(KeyState& s, MonoTime slot, const PacingRules& rules) {
  const double stretch = 1.0 + margin_of(rules);
  for (auto& p : s.policies) {
    if (p.remaining >= 0) {
      if (slot < p.reset_at && p.remaining > 0) {
        if (rules.pacing == Pacing::kSmooth) {
          // Divide what is left of the window among what is left of the quota.
          // Aim at the earliest instant the window can end (see `aim`).
          const double left = p.aim > slot ? static_cast<double>((p.aim - slot).count()) : 0.0;
          p.next = saturating_add(slot, from_ns(left * stretch / static_cast<double>(p.remaining)));
        }
        --p.remaining;
      }
    } else if (p.limit > 0 && p.window > Duration::zero()) {
      const double interval = static_cast<double>(p.window.count()) / static_cast<double>(p.limit);
      p.next = saturating_add(slot, from_ns(interval * stretch));
    }
  }
  s.tat = slot;
  if (slot < s.spread_end) s.tat = saturating_add(slot, spread_step(s, rules));
}

StoreGrant acquire_locked(KeyState& s, MonoTime now, Duration max_wait, const PacingRules& rules) {
  s.seen = later(s.seen, now);
  // The slot is the latest of these bounds; the one that set it is the cause.
  MonoTime slot = now;
  WaitCause cause = WaitCause::kNone;
  const auto bound = [&](MonoTime t, WaitCause c) {
    if (t > slot) {
      slot = t;
      cause = c;
    }
  };
  // Slots spread out after a cooldown are still the cooldown's doing.
  bound(s.tat, s.tat <= s.spread_end ? s.cool_cause : WaitCause::kQueue);
  bound(s.cool_end, s.cool_cause);
  const bool smooth = rules.pacing == Pacing::kSmooth;
  for (const auto& p : s.policies) {
    if (p.remaining >= 0) {
      if (p.remaining == 0) {
        bound(p.reset_at, WaitCause::kQuota);
      } else if (smooth) {
        // A smooth slot past the reset means: the next send is the probe, at the reset.
        bound(p.next < p.reset_at ? p.next : p.reset_at, WaitCause::kQuota);
      }
    } else if (p.limit > 0 && p.window > Duration::zero()) {
      bound(p.next, WaitCause::kQuota);
    }
  }
  bool ended = false;  // a known window ends before this slot: nothing fresh is known
  for (const auto& p : s.policies) {
    if (p.remaining >= 0 && slot >= p.reset_at) ended = true;
  }
  const Duration wait = slot - now;
  if (ended || s.probe_need) {
    if (s.probe_out && s.probe_until > now) {
      return {StoreGrant::Kind::kAwaitProbe, s.probe_until - now, s.epoch, WaitCause::kProbe};
    }
    if (wait > max_wait) return {StoreGrant::Kind::kTooLate, wait, s.epoch, cause};
    s.probe_out = true;
    s.probe_start = slot;
    s.probe_until = saturating_add(slot, std::max(rules.probe_timeout, Duration::zero()));
    commit(s, slot, rules);
    return {StoreGrant::Kind::kProbe, wait, s.epoch, cause};
  }
  if (wait > max_wait) return {StoreGrant::Kind::kTooLate, wait, s.epoch, cause};
  commit(s, slot, rules);
  return {StoreGrant::Kind::kGranted, wait, s.epoch, cause};
}

void release(KeyState& s, MonoTime now, double seed, const PacingRules& rules) {
  s.spread_end = saturating_add(now, std::max(rules.spread_period, Duration::zero()));
  s.spread_seed = seed;
  s.spread_n = 0;
}

RecordOutcome record_locked(KeyState& s, const StoreRecord& r, const PacingRules& rules) {
  RecordOutcome out;
  const MonoTime now = r.now;
  s.seen = later(s.seen, now);
  Duration age = std::max(r.age, Duration::zero());
  if (age > now.time_since_epoch()) age = now.time_since_epoch();
  const MonoTime received = now - age;
  double seed = r.spread_seed;
  if (!(seed >= 0.0 && seed < 1.0)) seed = 0.0;

  // A response received after a window ended is fresh information about it:
  // the window's count no longer applies.
  for (auto& p : s.policies) {
    if (p.remaining >= 0 && received >= p.reset_at) p.remaining = -1;
  }
  // The probe's answer, or any response received after the cooldown ended,
  // is the fresh information the waiters wait for.
  if ((s.probe_out && received >= s.probe_start) || (s.probe_need && received >= s.cool_end)) {
    s.probe_out = false;
    s.probe_need = false;
    out.released = true;
  }

  if (r.cooldown && *r.cooldown > Duration::zero()) {
    const MonoTime end = saturating_add(now, *r.cooldown);
    if (end > s.cool_end) {
      s.cool_end = end;
      s.cool_cause = r.cooldown_cause == WaitCause::kQuota ? WaitCause::kQuota : WaitCause::kCooldown;
      ++s.epoch;
      out.blocked = true;
      // Like every reservation, a probe handed out before the cooldown is void.
      s.probe_out = false;
      if (rules.probe_after_cooldown) {
        s.probe_need = true;
      } else {
        release(s, end, seed, rules);
      }
    }
  }
  if (out.released && !out.blocked) release(s, now, seed, rules);

  for (const auto& u : r.policies) {
    const bool has_policy = u.limit && *u.limit > 0 && u.window && *u.window > Duration::zero();
    const bool has_window = u.remaining.has_value() && u.reset.has_value();
    if (!has_policy && !u.remaining) continue;
    const std::string_view id = std::string_view(u.id).substr(0, 256);
    auto it = std::find_if(s.policies.begin(), s.policies.end(), [&](const PolicyState& p) { return p.id == id; });
    if (it == s.policies.end()) {
      if (s.policies.size() >= QuotaStore::kMaxPolicies || (!has_policy && !has_window)) continue;
      s.policies.push_back(PolicyState{std::string(id)});
      it = std::prev(s.policies.end());
    }
    PolicyState& p = *it;
    if (u.limit && *u.limit > 0) p.limit = *u.limit;
    if (u.window && *u.window > Duration::zero()) p.window = *u.window;
    if (!u.remaining) continue;
    const std::int64_t remaining = std::max<std::int64_t>(*u.remaining, 0);
    if (u.reset) {
      const MonoTime reset_at = saturating_add(now, std::max(*u.reset, Duration::zero()));
      if (reset_at <= now) continue;  // a stale response about a window already over
      // A reset stated in steps (whole seconds) is at most a step after the
      // true end, so reset_at - step is a lower bound of it (servers round up).
      const Duration step = std::max(u.reset_resolution, Duration::zero());
      // A reset a whole window later than the window we count in is the next
      // one. (Two answers about one window differ by less than the server's rounding.)
      const bool next_window = p.window > Duration::zero() && reset_at >= saturating_add(p.reset_at, p.window);
      if (p.remaining >= 0 && !next_window) {
        // The same window: counts only go down (a late response reports too
        // much), and the earliest reset is the closest: servers round times up,
        // so every answer's reset is at or after the true one. Later answers
        // only tighten the aim; a bound at or past the tracked end is about a
        // later window.
        p.remaining = std::min(p.remaining, remaining);
        p.reset_at = std::min(p.reset_at, reset_at);
        const MonoTime bound = reset_at - std::min(step, reset_at - now);
        if (bound < p.reset_at) p.aim = std::max(p.aim, bound);
        p.aim = std::min(p.aim, p.reset_at);
      } else {
        // A window starts. Its first answer is aimed at most half way, so a
        // window shorter than the step is still spread.
        p.remaining = remaining;
        p.reset_at = reset_at;
        p.aim = reset_at - std::min(step, (reset_at - now) / 2);
      }
    } else if (p.remaining >= 0) {
      p.remaining = std::min(p.remaining, remaining);
    }
  }
  return out;
}

// The last instant the state matters, plus a grace of the longest window.
MonoTime expiry(const KeyState& s) {
  MonoTime last = later(later(s.seen, s.tat), later(later(s.cool_end, s.spread_end), s.probe_until));
  Duration grace = std::chrono::seconds{1};
  for (const auto& p : s.policies) {
    last = later(last, later(p.next, p.remaining >= 0 ? p.reset_at : kNone));
    grace = std::max(grace, p.window);
  }
  return saturating_add(last, grace);
}

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

}  // namespace

struct MemoryStore::Impl {
  MemoryStoreOptions options;
  mutable std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<KeyState>, StringHash, std::equal_to<>> keys;
  std::shared_ptr<KeyState> overflow = std::make_shared<KeyState>();

  // Drops keys nobody holds whose state no longer matters.
  void sweep() {
    MonoTime now{};
    {
      std::lock_guard lock(overflow->mu);
      now = overflow->seen;
    }
    for (auto& [k, s] : keys) {
      std::lock_guard lock(s->mu);
      now = later(now, s->seen);
    }
    for (auto it = keys.begin(); it != keys.end();) {
      bool drop = false;
      if (it->second.use_count() == 1) {
        std::lock_guard lock(it->second->mu);
        drop = expiry(*it->second) < now;
      }
      it = drop ? keys.erase(it) : std::next(it);
    }
  }
};

MemoryStore::MemoryStore(MemoryStoreOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  if (impl_->options.max_keys == 0) impl_->options.max_keys = 1;
}

MemoryStore::~MemoryStore() = default;

std::shared_ptr<QuotaStore::Handle> MemoryStore::open(std::string_view key) {
  std::lock_guard lock(impl_->mu);
  if (auto it = impl_->keys.find(key); it != impl_->keys.end()) return it->second;
  if (impl_->keys.size() >= impl_->options.max_keys) {
    impl_->sweep();
    if (impl_->keys.size() >= impl_->options.max_keys) return impl_->overflow;
  }
  auto s = std::make_shared<KeyState>();
  impl_->keys.emplace(std::string(key), s);
  return s;
}

StoreGrant MemoryStore::acquire(Handle& key, const StoreAcquire& request, const PacingRules& rules) {
  auto& s = static_cast<KeyState&>(key);
  std::lock_guard lock(s.mu);
  return acquire_locked(s, request.now, request.max_wait, rules);
}

RecordOutcome MemoryStore::record(Handle& key, const StoreRecord& record, const PacingRules& rules) {
  auto& s = static_cast<KeyState&>(key);
  std::lock_guard lock(s.mu);
  return record_locked(s, record, rules);
}

bool MemoryStore::still_valid(Handle& key, std::uint64_t epoch, MonoTime /*now*/) {
  auto& s = static_cast<KeyState&>(key);
  std::lock_guard lock(s.mu);
  return s.epoch == epoch;
}

void MemoryStore::abandon_probe(Handle& key, MonoTime now) {
  auto& s = static_cast<KeyState&>(key);
  std::lock_guard lock(s.mu);
  s.seen = later(s.seen, now);
  s.probe_out = false;
  s.probe_until = kNone;
}

std::size_t MemoryStore::size() const {
  std::lock_guard lock(impl_->mu);
  return impl_->keys.size();
}

}  // namespace abide
