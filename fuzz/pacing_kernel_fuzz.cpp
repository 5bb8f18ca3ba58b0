// The pacing kernel driven by arbitrary operations on one key, checking what
// must hold whatever a server says and whenever a caller asks:
// - a stated cooldown (a Retry-After) is never shortened: no grant has its
//   slot before it;
// - a grant whose slot lies inside a cooldown recorded after it was handed
//   out is no longer valid (still_valid), so it is never used;
// - after an answer stating r units left until a reset, no more than r slots
//   before that reset (or an earlier one stated for the same window) are
//   granted, until a later answer about that policy;
// - waits are never negative, and never longer than the longest input allows
//   for each reservation made so far;
// - the state survives its encoding (state_codec) unchanged.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "pacing/kernel.h"
#include "pacing/state_codec.h"

namespace {

using abide::Duration;
using abide::MonoTime;
using abide::StoreGrant;
using abide::StoreRecord;
using abide::WaitCause;
using namespace std::chrono_literals;

constexpr Duration kLongestInput = std::chrono::hours{48};  // cooldowns, resets, windows, steps

// ABIDE_FUZZ_TRACE=1 prints every operation (to replay a finding by hand).
const bool kTrace = std::getenv("ABIDE_FUZZ_TRACE") != nullptr;

[[noreturn]] void broken(const char* rule) {
  std::fprintf(stderr, "pacing kernel: %s\n", rule);
  std::abort();
}

Duration some_duration(FuzzedDataProvider& in, Duration max) {
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0: return Duration::zero();
    case 1: return Duration{in.ConsumeIntegralInRange<Duration::rep>(0, 1'000'000)};  // under a millisecond
    case 2: return std::chrono::milliseconds{in.ConsumeIntegralInRange<std::int64_t>(0, 10'000)};
    default: return Duration{in.ConsumeIntegralInRange<Duration::rep>(0, max.count())};
  }
}

namespace units = abide::pacing;

struct Counted {  // the last answer about a policy that stated a count until a reset
  units::Instant end{};  // in the kernel's units (pacing/units.h), rounded as it rounds
  std::int64_t left = 0;
  std::int64_t granted = 0;
};

struct Grant {
  MonoTime slot{};
  std::uint64_t epoch = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  abide::pacing::KeyState s;
  abide::PacingRules rules;
  rules.pacing = in.ConsumeBool() ? abide::Pacing::kSmooth : abide::Pacing::kBurst;
  rules.probe_after_cooldown = in.ConsumeBool();
  rules.safety_margin = in.ConsumeProbability<double>();
  MonoTime now{std::chrono::hours{1000}};
  MonoTime stated{};  // nothing may be sent before this (the Retry-Afters told)
  std::map<std::string, Counted> counted;       // the windows answers counted, by policy
  std::map<std::string, Duration> window_of;    // each policy's stated window length
  std::vector<Grant> grants;  // outstanding, for the validity rule
  std::int64_t granted = 0;   // every grant so far
  for (int ops = 0; ops < 200 && in.remaining_bytes() > 0; ++ops) {
    now += some_duration(in, kLongestInput / 16);
    switch (in.ConsumeIntegralInRange(0, 9)) {
      case 0:
      case 1:
      case 2:
      case 3: {
        const Duration max_wait = in.ConsumeBool() ? abide::kMaxDuration : some_duration(in, kLongestInput);
        const StoreGrant g = abide::pacing::acquire(s, now, max_wait, rules);
        if (kTrace) {
          std::fprintf(stderr, "%lld acquire max_wait %lld: kind %d wait %lld (stated until %lld)\n",
                       static_cast<long long>(now.time_since_epoch().count()), static_cast<long long>(max_wait.count()),
                       static_cast<int>(g.kind), static_cast<long long>(g.wait.count()),
                       static_cast<long long>(stated.time_since_epoch().count()));
        }
        if (g.wait < Duration::zero()) broken("a negative wait");
        // Each reservation takes a slot of its own, at worst a window each
        // (learned ones last up to a day): the bound grows with the grants.
        if (g.wait > (granted + 4) * 2 * kLongestInput) broken("a wait longer than anything stated");
        if (g.kind != StoreGrant::Kind::kGranted && g.kind != StoreGrant::Kind::kProbe) break;
        ++granted;
        const MonoTime slot = now + g.wait;
        if (slot < stated) broken("a grant inside a stated cooldown");
        for (auto& [id, c] : counted) {
          if (slot < units::mono_of(c.end) && ++c.granted > c.left) {
            if (kTrace) {
              std::fprintf(stderr, "%s: %lld granted, %lld left until %lld; slot %lld\n", id.c_str(),
                           static_cast<long long>(c.granted), static_cast<long long>(c.left),
                           static_cast<long long>(c.end.time_since_epoch().count()),
                           static_cast<long long>(slot.time_since_epoch().count()));
            }
            broken("more grants than an answer said were left");
          }
        }
        grants.push_back({slot, g.epoch});
        if (grants.size() > 64) grants.erase(grants.begin());
        break;
      }
      case 4:
      case 5:
      case 6:
      case 7: {
        StoreRecord r;
        r.now = now;
        r.age = in.ConsumeBool() ? Duration::zero() : some_duration(in, 10s);
        r.limited = in.ConsumeBool();
        r.spread_seed = in.ConsumeProbability<double>();
        if (in.ConsumeBool()) r.cooldown = some_duration(in, kLongestInput);
        const bool quota = r.cooldown && in.ConsumeBool();
        if (quota) {
          r.cooldown_cause = WaitCause::kQuota;
          // The pacer's floor (a Retry-After beside the spent quota) never exceeds the cooldown.
          r.cooldown_floor = std::min(some_duration(in, *r.cooldown), *r.cooldown);
        }
        const int policies = in.ConsumeIntegralInRange(0, 3);
        for (int i = 0; i < policies; ++i) {
          abide::PolicyUpdate u;
          u.id = "p" + std::to_string(in.ConsumeIntegralInRange(0, 2));
          if (in.ConsumeBool()) u.limit = in.ConsumeIntegralInRange<std::int64_t>(-1, 1000);
          if (in.ConsumeBool()) u.window = some_duration(in, kLongestInput);
          if (in.ConsumeBool()) u.remaining = in.ConsumeIntegralInRange<std::int64_t>(-5, 1000);
          if (in.ConsumeBool()) u.reset = some_duration(in, kLongestInput);
          if (in.ConsumeBool()) u.reset_resolution = 1s;
          r.policies.push_back(u);
        }
        if (kTrace) {
          std::fprintf(stderr, "%lld record age %lld limited %d cooldown %lld cause %d floor %lld policies %zu\n",
                       static_cast<long long>(now.time_since_epoch().count()), static_cast<long long>(r.age.count()),
                       r.limited ? 1 : 0, r.cooldown ? static_cast<long long>(r.cooldown->count()) : -1LL,
                       static_cast<int>(r.cooldown_cause), static_cast<long long>(r.cooldown_floor.count()),
                       r.policies.size());
          for (const auto& u : r.policies) {
            std::fprintf(stderr, "  %s limit %lld window %lld remaining %lld reset %lld\n", u.id.c_str(),
                         u.limit ? static_cast<long long>(*u.limit) : -9LL,
                         u.window ? static_cast<long long>(u.window->count()) : -9LL,
                         u.remaining ? static_cast<long long>(*u.remaining) : -9LL,
                         u.reset ? static_cast<long long>(u.reset->count()) : -9LL);
          }
        }
        const std::uint64_t epoch_before = s.epoch;
        (void)abide::pacing::record(s, r, rules);
        // What this answer states, for the rules above.
        if (r.cooldown && *r.cooldown > Duration::zero()) {
          const MonoTime end = now + (quota ? r.cooldown_floor : *r.cooldown);
          if (end > stated) stated = end;
        }
        // Each statement bounds the grants after it: at most its count before
        // its reset. Statements about one window are merged as the kernel
        // merges them (servers round resets up, so the earliest reset is the
        // window's end); a reset a whole window past the known end starts the
        // next window, and any answer received after a window's end ends it.
        // In the kernel's units, rounded as units.h rounds (now cut to its
        // microsecond, spans up): an answer received in the nanoseconds
        // before a window's end rounded up is still about that window.
        const units::Instant now_us = units::instant_of(now);
        const units::Instant received = now_us - std::min(units::micros_up(r.age), now_us.time_since_epoch());
        std::erase_if(counted, [&](const auto& c) { return received >= c.second.end; });
        for (const auto& u : r.policies) {
          // The kernel keeps a policy once a statement gives it a limit and a
          // window, or a count and a reset; only then does it take a window's length.
          const bool has_policy = u.limit && *u.limit > 0 && u.window && *u.window > Duration::zero();
          if (!has_policy && !u.remaining) continue;
          if (!window_of.contains(u.id) && !has_policy && !(u.remaining && u.reset)) continue;
          if (u.window && *u.window > Duration::zero()) {
            window_of[u.id] = *u.window;
          } else {
            window_of.try_emplace(u.id, Duration::zero());
          }
          if (!u.remaining) continue;
          const auto it = counted.find(u.id);
          if (u.reset && *u.reset <= Duration::zero()) continue;  // about a window already over: stale
          const std::int64_t left = std::max<std::int64_t>(*u.remaining, 0);
          if (!u.reset) {
            // A count without a reset is about the window already known.
            if (it != counted.end()) it->second = Counted{it->second.end, left, 0};
            continue;
          }
          units::Instant end = units::add(now_us, units::span_up(now, *u.reset));
          if (it != counted.end()) {
            const units::Micros window = units::micros_up(window_of[u.id]);
            const bool next = window > units::Micros::zero() && end >= units::add(it->second.end, window);
            // A spent count whose reset is later than the known end by more
            // than rounding explains moves the end; else the earliest stands.
            const units::Micros step = std::max(units::micros_down(u.reset_resolution), units::Micros{1'000'000});
            const bool moved = left == 0 && end > units::add(it->second.end, step);
            if (!next && !moved) end = std::min(end, it->second.end);
          }
          counted[u.id] = Counted{end, left, 0};
        }
        // A cooldown that started voids the reservations inside it.
        if (s.epoch != epoch_before) {
          for (const Grant& g : grants) {
            if (g.slot < abide::pacing::mono_of(s.cool_end) && abide::pacing::still_valid(s, g.epoch)) broken("a voided grant still valid");
          }
          grants.clear();
        }
        break;
      }
      case 8: abide::pacing::abandon_probe(s, now); break;
      default: (void)abide::pacing::learned(s, now); break;
    }
    if (kTrace) {
      for (const auto& p : s.policies) {
        std::fprintf(stderr, "    state %s remaining %lld reset %lld out %lld owed %lld seen %lld\n", p.id.c_str(),
                     static_cast<long long>(p.remaining), static_cast<long long>(p.reset_at.time_since_epoch().count()),
                     static_cast<long long>(p.out), static_cast<long long>(p.owed), static_cast<long long>(p.seen));
      }
    }
    const std::string bytes = abide::pacing::encode(s);
    auto back = abide::pacing::decode(bytes);
    if (!back || abide::pacing::encode(*back) != bytes) broken("the state does not survive its encoding");
  }
  return 0;
}
