// The state's layout: one version byte, then the fields of KeyState in
// declaration order, integers as 8 little-endian bytes, flags and enums as
// one byte, the spread seed as its IEEE-754 bits; then the policy count
// (at most QuotaStore::kMaxPolicies) and each policy (its id as a length and
// bytes, at most 256, ..., its unit likewise), then the learned policy, then
// the blind amounts of other units (a count, then each unit and amount). Written field by field, so a
// new field is a new version, never a silent reinterpretation.
#include "pacing/state_codec.h"

#include <bit>
#include <cstdint>

namespace abide::pacing {
namespace {

constexpr std::size_t kMaxId = 256;
constexpr std::uint8_t kNanosecondFormat = 1;   // the layout of 2, times in nanoseconds
constexpr std::uint8_t kMicrosecondFormat = 2;  // without units (every policy counted requests)
constexpr std::int64_t kAnyCount = INT64_MAX;  // a count a server stated

class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xffU));
  }
  void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
  void flag(bool v) { u8(v ? 1 : 0); }
  void time(Instant t) { i64(t.time_since_epoch().count()); }
  void span(Micros d) { i64(d.count()); }
  void real(double v) { u64(std::bit_cast<std::uint64_t>(v)); }
  void text(std::string_view s) {
    u64(s.size());
    out_.append(s);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads fields in order; the first failure sticks and names the field.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  // Format 1 kept times in nanoseconds: they are read rounded up to the
  // microsecond (a cooldown read back never ends earlier).
  void times_in_nanoseconds() { nanos_ = true; }

  std::uint8_t u8(const char* what) {
    if (!need(1, what)) return 0;
    const auto v = static_cast<std::uint8_t>(in_[0]);
    in_.remove_prefix(1);
    return v;
  }
  std::uint64_t u64(const char* what) {
    if (!need(8, what)) return 0;
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(in_[i])) << (8 * i);
    in_.remove_prefix(8);
    return v;
  }
  std::int64_t i64(const char* what) { return static_cast<std::int64_t>(u64(what)); }
  // A count: within [min, max] (the kernel keeps its own counts within
  // LearnedPolicyBounds::kMaxCount; a server's may be larger).
  std::int64_t count(const char* what, std::int64_t min = 0, std::int64_t max = LearnedPolicyBounds::kMaxCount) {
    const std::int64_t v = i64(what);
    if (v < min || v > max) bad(what, "out of range");
    return v;
  }
  bool flag(const char* what) {
    const std::uint8_t v = u8(what);
    if (v > 1) bad(what, "not 0 or 1");
    return v == 1;
  }
  Instant time(const char* what) { return Instant{span(what)}; }
  Micros span(const char* what) {
    const std::int64_t v = i64(what);
    if (v < 0) {
      bad(what, "negative");
      return Micros::zero();
    }
    return nanos_ ? micros_up(Duration{v}) : Micros{v};
  }
  double unit(const char* what) {
    const double v = std::bit_cast<double>(u64(what));
    if (!(v >= 0.0 && v < 1.0)) bad(what, "not in [0, 1)");
    return v;
  }
  std::string text(const char* what, std::size_t max) {
    const std::uint64_t n = u64(what);
    if (n > max) {
      bad(what, "too long");
      return {};
    }
    if (!need(static_cast<std::size_t>(n), what)) return {};
    std::string s(in_.substr(0, static_cast<std::size_t>(n)));
    in_.remove_prefix(static_cast<std::size_t>(n));
    return s;
  }
  void bad(const char* what, const char* why) {
    if (error_.empty()) error_ = std::string(what) + " " + why;
  }
  bool done() {
    if (error_.empty() && !in_.empty()) error_ = std::to_string(in_.size()) + " bytes after the state";
    return error_.empty();
  }
  const std::string& error() const { return error_; }

 private:
  bool need(std::size_t n, const char* what) {
    if (!error_.empty()) return false;
    if (in_.size() < n) {
      error_ = std::string("truncated at ") + what;
      return false;
    }
    return true;
  }
  std::string_view in_;
  std::string error_;
  bool nanos_ = false;
};

WaitCause cause_of(std::uint8_t v, Reader& r) {
  if (v == static_cast<std::uint8_t>(WaitCause::kCooldown)) return WaitCause::kCooldown;
  if (v == static_cast<std::uint8_t>(WaitCause::kQuota)) return WaitCause::kQuota;
  r.bad("cooldown cause", "unknown");
  return WaitCause::kCooldown;
}

Learned::Mode mode_of(std::uint8_t v, Reader& r) {
  if (v > Learned::kBare) r.bad("learned mode", "unknown");
  return v == Learned::kRetryAfter ? Learned::kRetryAfter : v == Learned::kBare ? Learned::kBare : Learned::kNothing;
}

}  // namespace

std::string encode(const KeyState& s) {
  Writer w;
  w.u8(kStateFormat);
  w.u64(s.epoch);
  w.time(s.tat);
  w.time(s.cool_end);
  w.u8(static_cast<std::uint8_t>(s.cool_cause));
  w.time(s.spread_end);
  w.real(s.spread_seed);
  w.u64(s.spread_n);
  w.flag(s.probe_need);
  w.flag(s.probe_out);
  w.time(s.probe_start);
  w.time(s.probe_until);
  w.time(s.seen);
  w.i64(s.blind);
  w.time(s.blind_at);
  w.u64(s.policies.size());
  for (const PolicyState& p : s.policies) {
    w.text(p.id);
    w.i64(p.limit);
    w.span(p.window);
    w.i64(p.remaining);
    w.time(p.reset_at);
    w.time(p.aim);
    w.time(p.next);
    w.i64(p.seen);
    w.i64(p.out);
    w.i64(p.owed);
    w.text(p.unit);
    w.time(p.begun);
  }
  const Learned& l = s.learned;
  w.u8(l.mode);
  w.i64(l.n);
  w.span(l.len);
  w.span(l.guess);
  w.time(l.start);
  w.time(l.anchor);
  w.i64(l.since);
  w.i64(l.accepted);
  w.i64(l.used);
  w.i64(l.quiet);
  w.time(l.next);
  w.span(l.hold);
  w.time(l.hold_end);
  w.time(l.search_began);
  w.i64(l.windows);
  w.flag(l.open);
  w.flag(l.first);
  w.span(l.rtt);
  w.span(l.found);
  w.u64(s.blind_units.size());
  for (const UnitCost& b : s.blind_units) {
    w.text(b.unit);
    w.i64(b.amount);
  }
  return w.take();
}

Result<KeyState, std::string> decode(std::string_view bytes) {
  Reader r(bytes);
  const std::uint8_t format = r.u8("format");
  if (r.error().empty() && format == kNanosecondFormat) r.times_in_nanoseconds();
  if (r.error().empty() && format != kStateFormat && format != kNanosecondFormat && format != kMicrosecondFormat) {
    return fail("state format " + std::to_string(format) + " is not " + std::to_string(kStateFormat));
  }
  const bool units = format >= 3;  // policies' units and blind amounts
  KeyState s;
  s.epoch = r.u64("epoch");
  s.tat = r.time("next slot");
  s.cool_end = r.time("cooldown end");
  s.cool_cause = cause_of(r.u8("cooldown cause"), r);
  s.spread_end = r.time("spread end");
  s.spread_seed = r.unit("spread seed");
  s.spread_n = r.u64("spread count");
  s.probe_need = r.flag("probe need");
  s.probe_out = r.flag("probe out");
  s.probe_start = r.time("probe start");
  s.probe_until = r.time("probe until");
  s.seen = r.time("last seen");
  s.blind = r.count("blind grants");
  s.blind_at = r.time("blind at");
  const std::uint64_t policies = r.u64("policy count");
  if (policies > QuotaStore::kMaxPolicies) r.bad("policy count", "over the limit");
  for (std::uint64_t i = 0; i < policies && r.error().empty(); ++i) {
    PolicyState p;
    p.id = r.text("policy id", kMaxId);
    p.limit = r.count("policy limit", 0, kAnyCount);
    p.window = r.span("policy window");
    p.remaining = r.count("policy remaining", -1, kAnyCount);
    p.reset_at = r.time("policy reset");
    p.aim = r.time("policy aim");
    p.next = r.time("policy next slot");
    p.seen = r.count("policy seen", 0, kAnyCount);
    p.out = r.count("policy out");
    p.owed = r.count("policy owed");
    if (units) {
      p.unit = r.text("policy unit", kMaxUnitBytes);
      p.begun = r.time("policy begun");
    }
    s.policies.push_back(std::move(p));
  }
  Learned& l = s.learned;
  l.mode = mode_of(r.u8("learned mode"), r);
  l.n = r.count("learned count");
  l.len = r.span("learned length");
  l.guess = r.span("learned guess");
  l.start = r.time("learned start");
  l.anchor = r.time("learned anchor");
  l.since = r.count("learned since");
  l.accepted = r.count("learned accepted");
  l.used = r.count("learned used");
  l.quiet = r.count("learned quiet");
  l.next = r.time("learned next slot");
  l.hold = r.span("learned hold");
  l.hold_end = r.time("learned hold end");
  l.search_began = r.time("learned search");
  l.windows = r.count("learned windows");
  l.open = r.flag("learned open");
  l.first = r.flag("learned first");
  l.rtt = r.span("learned round trip");
  l.found = r.span("learned found");
  if (units) {
    const std::uint64_t n = r.u64("blind unit count");
    if (n > QuotaStore::kMaxPolicies) r.bad("blind unit count", "over the limit");
    for (std::uint64_t i = 0; i < n && r.error().empty(); ++i) {
      UnitCost b;
      b.unit = r.text("blind unit", kMaxUnitBytes);
      b.amount = r.count("blind amount");
      s.blind_units.push_back(std::move(b));
    }
  }
  if (!r.done()) return fail(r.error());
  return s;
}

}  // namespace abide::pacing
