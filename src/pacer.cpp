// Pacer: turns each acquire into one store operation. The store decides
// (quota_store.h); this file owns what lies between the store's answers: the
// first-in first-out line of workers waiting for a probe, reserved slots and
// their return, the deadline and maximum wait, and notifying waiters when a
// record changes things. Ops::step is that logic, never blocking; try_acquire
// returns its answer, acquire sleeps on it.
#include "abide/pacer.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ascii.h"
#include "mutex.h"
#include "pacing/kernel.h"
#include "string_hash.h"

namespace abide {
namespace {

constexpr std::size_t kMaxKeyLength = 256;
// Sleeps are cut into slices of at most this; a waiter then simply looks again.
constexpr Duration kMaxSleepSlice = std::chrono::hours{1};
// Slots given back and not yet taken, per key; beyond it a slot is simply lost
// (a unit of quota unused: never a send too many).
constexpr std::size_t kMaxReturned = 64;
// Store questions per step while records keep changing the answer.
constexpr int kMaxRounds = 8;
// A store's answer this far (or less) before the floor is rounding (a shared
// store's own clock and microseconds), not a store that forgot: the floor
// holds without writing it back.
constexpr Duration kFloorSlack = std::chrono::milliseconds{1};
// Window ends followed per key for the floor (each policy once).
constexpr std::size_t kMaxWindowEnds = QuotaStore::kMaxPolicies;

std::uint64_t fnv1a(std::string_view s) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Keeps a key bounded: a long one becomes its head plus a hash of the whole.
std::string bounded(std::string s, std::size_t max) {
  if (s.size() <= max) return s;
  static constexpr char kHex[] = "0123456789abcdef";
  std::uint64_t h = fnv1a(s);
  s.resize(max - 18);
  s += "#";
  for (int i = 0; i < 16; ++i) {
    s += kHex[h >> 60];
    h <<= 4;
  }
  s += "#";
  return s;
}

bool has_unit(const std::vector<UnitCost>& costs, std::string_view unit) {
  return std::any_of(costs.begin(), costs.end(), [&](const UnitCost& c) { return ascii::iequals(c.unit, unit); });
}

std::uint64_t splitmix(std::uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

MonoTime earlier(MonoTime a, MonoTime b) { return a < b ? a : b; }

// The window a quota whose reset counts to a full refill is paced over. The
// reset is not the window's end: the quota is back in part long before, so a
// key held (or a small remainder spread) until it would stall for the whole
// refill.
// - None left: the window ends with the cooldown (the answer's permitted time,
//   `hold`), when a probe learns the quota afresh.
// - r left of l, full after t: the l - r missing units come back over t, so r
//   more are back after t * r / (l - r). The r are spread over that (never over
//   more than t), which spends them no faster than they come back when r is
//   small, and never sends more than r before the window ends, however the
//   server refills. Without a limit the rate is unknown: over t.
// - A quota of tokens: its window's end is probed with a send of its own
//   size, so the window lasts until three times what the answered send needed has
//   come back (sends vary in size), when that is more than r: a probe that
//   found the bucket short would be a limited answer.
Duration full_refill_window(const QuotaObservation& o, Duration reset, std::optional<Duration> hold,
                            std::int64_t need) {
  const std::int64_t r = *o.remaining;
  if (r <= 0) return std::min(reset, hold.value_or(reset));
  if (!o.limit || *o.limit <= r) return reset;
  const double back = static_cast<double>(std::max(r, 3 * need));
  const double ns = static_cast<double>(reset.count()) * back / static_cast<double>(*o.limit - r);
  if (!(ns < static_cast<double>(reset.count()))) return reset;
  return Duration{static_cast<Duration::rep>(std::ceil(ns))};
}

using detail::Mutex;
using detail::MutexLock;
using detail::RecursiveMutex;
using detail::StringHash;
using detail::UniqueLock;

}  // namespace

std::string pacer_key(std::string_view origin, std::string_view scope) {
  std::string k(origin);
  if (!scope.empty()) {
    k += '|';
    k += scope;
  }
  return bounded(std::move(k), kMaxKeyLength);
}

std::string quota_scope(const QuotaObservation& o) {
  std::string s = o.policy;
  if (o.partition_key) {
    s += ";pk=";
    s += *o.partition_key;
  }
  return bounded(std::move(s), kMaxKeyLength / 2);
}

std::string_view to_string(AcquireStatus s) noexcept {
  switch (s) {
    case AcquireStatus::kPermit: return "permit";
    case AcquireStatus::kDeferred: return "deferred";
    case AcquireStatus::kDeadlineExceeded: return "deadline_exceeded";
    case AcquireStatus::kCancelled: return "cancelled";
    case AcquireStatus::kUnavailable: return "unavailable";
  }
  return "unknown";
}

struct Pacer::Ticket::State {
  // Owned by the ticket's caller.
  bool started = false;  // an acquire is under way; the limits count from `start`
  MonoTime start{};
  std::vector<UnitCost> costs;  // what the send needs of quotas other than requests
  std::uint64_t number = 0;  // arrival order; 0 until it matters
  bool reserved = false;
  MonoTime slot{};
  Duration reserved_wait{};       // how far ahead the slot was reserved
  std::uint64_t epoch = 0;        // Local::epoch when it was reserved
  std::uint64_t store_epoch = 0;  // the store's, for still_valid()
  bool probe = false;
  WaitCause cause = WaitCause::kNone;  // what set the slot
  std::optional<QuotaHeld> held;       // the announced quota that set it, when the store said
  // Guarded by Local::mu.
  bool queued = false;
  // Recursive: a callback may ask again at once.
  RecursiveMutex notify_mu;
  bool notified ABIDE_GUARDED_BY(notify_mu) = false;
  std::stop_source wake ABIDE_GUARDED_BY(notify_mu){std::nostopstate};  // acquire's sleep, replaced before each step
  std::shared_ptr<const std::function<void()>> notify ABIDE_GUARDED_BY(notify_mu);

  explicit State(std::shared_ptr<const std::function<void()>> n) : notify(std::move(n)) {}
};

// A slot given back before its time, with what it reserved of quotas other
// than requests.
struct Returned {
  MonoTime slot{};
  std::uint64_t epoch = 0;
  std::uint64_t store_epoch = 0;
  std::vector<UnitCost> costs;
};

// True when a slot that reserved `held` has room for a send that needs
// `wanted` (what it held beyond that is lost: never a send too many).
bool covers(const std::vector<UnitCost>& held, std::span<const UnitCost> wanted) {
  return std::all_of(wanted.begin(), wanted.end(), [&](const UnitCost& w) {
    if (w.amount <= 0) return true;
    return std::any_of(held.begin(), held.end(),
                       [&](const UnitCost& h) { return ascii::iequals(h.unit, w.unit) && h.amount >= w.amount; });
  });
}

// One policy's window as this process was told it, for the floor.
struct WindowEnd {
  std::string id;
  MonoTime end{};     // the earliest reset stated for the window (each is at or after its true end)
  MonoTime lower{};   // the latest "not before" those resets prove (reset less its rounding step)
  Duration window{};  // the policy's length, when stated
};

struct Pacer::Local {
  std::string name;
  std::shared_ptr<QuotaStore::Handle> handle;
  // Bumped when a local record starts a cooldown: reservations made before are void.
  std::atomic<std::uint64_t> epoch{0};
  // Bumped by a record that answers a probe or starts a cooldown (any record
  // on a shared store), block_until and an abandoned probe: a waiting head
  // must look again.
  std::atomic<std::uint64_t> generation{0};
  std::atomic<std::uint32_t> queued{0};
  std::atomic<std::uint32_t> returned_count{0};
  Mutex mu;
  // By ticket number; the front is the head, the only one asking the store.
  std::vector<std::shared_ptr<Ticket::State>> queue ABIDE_GUARDED_BY(mu);
  std::vector<Returned> returned ABIDE_GUARDED_BY(mu);  // by slot, at most kMaxReturned
  // The head's latest estimate, for those behind it, whether the store was
  // unavailable (fail-closed), and what holds the head.
  MonoTime blocked_until ABIDE_GUARDED_BY(mu){};
  bool blocked_by_store ABIDE_GUARDED_BY(mu) = false;
  WaitCause blocked_cause ABIDE_GUARDED_BY(mu) = WaitCause::kProbe;
  // The floor (docs/RULES.md rule 10): the latest instant before which this
  // process was told nothing may be sent (cooldowns, spent windows' ends),
  // kept here because a shared store may forget it (a flush, a restart, a
  // failover). Nanoseconds of MonoTime; read without a lock on every acquire.
  std::atomic<Duration::rep> floor_end{0};
  std::atomic<WaitCause> floor_cause{WaitCause::kCooldown};
  // Raising the floor, and window_ends (at most kMaxWindowEnds, dropped once passed).
  Mutex floor_mu;
  std::vector<WindowEnd> window_ends ABIDE_GUARDED_BY(floor_mu);
};

struct Pacer::Keys {
  Mutex mu;
  std::unordered_map<std::string, std::shared_ptr<Local>, StringHash, std::equal_to<>> map ABIDE_GUARDED_BY(mu);
  // The map is swept when it reaches this size; set after each sweep so that
  // sweeps cost O(1) per new key, amortized.
  std::size_t sweep_at ABIDE_GUARDED_BY(mu);

  explicit Keys(std::size_t sweep) : sweep_at(sweep) {}
};

namespace {

MonoTime floor_of(const Pacer::Local& l) {
  return MonoTime{Duration{l.floor_end.load(std::memory_order_acquire)}};
}

// Raises the key's floor to `end` (it never goes down). Caller holds l.floor_mu.
void raise_floor_locked(Pacer::Local& l, MonoTime end, WaitCause cause) ABIDE_REQUIRES(l.floor_mu) {
  if (end <= floor_of(l)) return;
  l.floor_cause.store(cause, std::memory_order_relaxed);
  l.floor_end.store(end.time_since_epoch().count(), std::memory_order_release);
}

// Follows one policy's window for the floor, as the stores follow it (the
// earliest reset of a window, a new window once it is over or a whole window
// later), and returns the instant its reset proves the window lasts until.
// Caller holds l.floor_mu.
std::optional<MonoTime> follow_window_locked(Pacer::Local& l, const PolicyUpdate& u, MonoTime now, MonoTime received)
    ABIDE_REQUIRES(l.floor_mu) {
  if (!u.remaining || !u.reset) return std::nullopt;
  const MonoTime end = saturating_add(now, std::max(*u.reset, Duration::zero()));
  if (end <= now) return std::nullopt;  // about a window already over
  // A reset stated in steps (whole seconds) is at most a step after the true
  // end: end - step is what it proves, so the floor never holds longer than
  // the window truly lasts, whichever process saw an earlier reset.
  const MonoTime lower = end - std::min(std::max(u.reset_resolution, Duration::zero()), end - now);
  const Duration window = u.window && *u.window > Duration::zero() ? *u.window : Duration::zero();
  auto it = std::find_if(l.window_ends.begin(), l.window_ends.end(), [&](const WindowEnd& w) { return w.id == u.id; });
  if (it == l.window_ends.end()) {
    if (l.window_ends.size() >= kMaxWindowEnds) return std::nullopt;  // no floor: never a longer wait
    it = l.window_ends.insert(l.window_ends.end(), WindowEnd{u.id, end, lower, window});
  } else {
    if (window > Duration::zero()) it->window = window;
    const bool next = received >= it->end ||
                      (it->window > Duration::zero() && end >= saturating_add(it->end, it->window));
    if (next) {
      *it = WindowEnd{u.id, end, lower, it->window};
    } else {
      it->end = std::min(it->end, end);
      it->lower = std::max(it->lower, lower);
    }
  }
  // Answers that disagree beyond their rounding (exact resets, jittered):
  // never past the earliest stated end, as the stores hold it.
  return std::min(it->lower, it->end);
}

// What a record tells the floor: a cooldown in full (an exhausted quota's:
// the part the stores keep whole), and each spent window's end.
void note_floor(Pacer::Local& l, const StoreRecord& rec, MonoTime received) {
  if (!rec.cooldown && rec.policies.empty()) return;
  const bool quota = rec.cooldown_cause == WaitCause::kQuota;
  MutexLock lock(l.floor_mu);
  if (rec.cooldown && *rec.cooldown > Duration::zero()) {
    const Duration whole = quota ? std::min(std::max(rec.cooldown_floor, Duration::zero()), *rec.cooldown)
                                 : *rec.cooldown;
    if (whole > Duration::zero()) raise_floor_locked(l, saturating_add(rec.now, whole), rec.cooldown_cause);
  }
  std::erase_if(l.window_ends, [&](const WindowEnd& w) { return w.end <= rec.now; });
  for (const auto& u : rec.policies) {
    // A spent quota of tokens or bytes holds only the sends that need some
    // (the store's), not the key: the floor is for what holds every send.
    if (!pacing::is_requests(u.unit)) continue;
    const std::optional<MonoTime> until = follow_window_locked(l, u, rec.now, received);
    if (until && *u.remaining <= 0) raise_floor_locked(l, *until, WaitCause::kQuota);
  }
}

}  // namespace

const std::string& Pacer::Key::name() const noexcept {
  static const std::string kEmpty;
  return local_ ? local_->name : kEmpty;
}

namespace {

const MonotonicClock& mono_of(const PacerConfig& c) { return c.mono != nullptr ? *c.mono : system_monotonic_clock(); }
const WallClock& wall_of(const PacerConfig& c) { return c.wall != nullptr ? *c.wall : system_wall_clock(); }

PacerConfig with_clocks(PacerConfig c, const MonotonicClock& mono, const WallClock& wall) {
  c.mono = &mono;
  c.wall = &wall;
  return c;
}

}  // namespace

Pacer::Pacer(PacerConfig config, std::shared_ptr<QuotaStore> store)
    : config_(std::move(config)),
      store_(store ? std::move(store) : std::make_shared<MemoryStore>()),
      mono_(mono_of(config_)),
      wall_(wall_of(config_)),
      random_state_(config_.seed),
      keys_(std::make_unique<Keys>(std::max<std::size_t>(config_.max_keys, 1))) {
  if (config_.max_wait < Duration::zero()) config_.max_wait = Duration::zero();
  if (config_.max_keys == 0) config_.max_keys = 1;
}

Pacer::Pacer(PacerConfig config, std::shared_ptr<QuotaStore> store, const MonotonicClock& mono, const WallClock& wall)
    : Pacer(with_clocks(std::move(config), mono, wall), std::move(store)) {}

Pacer::~Pacer() = default;

Pacer::Key Pacer::key(std::string_view name) {
  std::string n = bounded(std::string(name), kMaxKeyLength);
  MutexLock lock(keys_->mu);
  if (auto it = keys_->map.find(n); it != keys_->map.end()) return Key(it->second);
  if (keys_->map.size() >= keys_->sweep_at) sweep_keys_locked();
  // Every key handed out is in the map, so two callers of one name share one
  // line, one epoch and one floor. Keys held (by a Key or a Ticket) are never
  // dropped; they are bounded by their holders.
  auto local = std::make_shared<Local>();
  local->name = n;
  local->handle = store_->open(n);
  keys_->map.emplace(std::move(n), local);
  return Key(std::move(local));
}

void Pacer::sweep_keys_locked() ABIDE_REQUIRES(keys_->mu) {
  auto& map = keys_->map;
  const MonoTime now = mono_.now();
  // Nobody holds it (only the map does: a Key is copied from the map under
  // this lock), and its floor has passed: its state stays in the store.
  const auto unheld = [](const auto& kv) { return kv.second.use_count() == 1; };
  std::erase_if(map, [&](const auto& kv) { return unheld(kv) && floor_of(*kv.second) <= now; });
  // Floors too are bounded: past half the bound, those that end first go.
  const std::size_t keep = std::max<std::size_t>(config_.max_keys / 2, 1);
  if (map.size() > keep) {
    std::vector<std::pair<MonoTime, std::string_view>> floored;
    for (const auto& kv : map) {
      if (unheld(kv)) floored.emplace_back(floor_of(*kv.second), kv.first);
    }
    const std::size_t drop = std::min(floored.size(), map.size() - keep);
    std::nth_element(floored.begin(), floored.begin() + static_cast<std::ptrdiff_t>(drop), floored.end());
    std::vector<std::string> gone;
    for (std::size_t i = 0; i < drop; ++i) gone.emplace_back(floored[i].second);
    for (const auto& g : gone) map.erase(g);
  }
  keys_->sweep_at = std::max(config_.max_keys, 2 * map.size());
}

double Pacer::next_random() {
  if (config_.random) {
    const double u = config_.random->next_unit();
    return (u >= 0.0 && u < 1.0) ? u : 0.0;
  }
  // A load and a store, not an atomic add: this runs on every record, and a
  // locked add cost more than the rest of the draw. Two records at the same
  // instant may draw the same number; it only offsets a cooldown's spread.
  const std::uint64_t x = random_state_.load(std::memory_order_relaxed);
  random_state_.store(x + 0x9e3779b97f4a7c15ULL, std::memory_order_relaxed);
  return static_cast<double>(splitmix(x) >> 11) * 0x1.0p-53;
}

AcquireResult Pacer::finish(AcquireStatus status, MonoTime start, MonoTime not_before, bool probe,
                            WaitCause cause) const {
  AcquireResult r;
  r.status = status;
  r.probe = probe;
  r.cause = cause;
  r.not_before = not_before;
  const MonoTime now = mono_.now();
  r.waited = now - start;
  if (status == AcquireStatus::kDeferred || status == AcquireStatus::kDeadlineExceeded ||
      status == AcquireStatus::kUnavailable) {
    r.not_before_wall = saturating_add(wall_.now(), not_before - now);
  }
  return r;
}

std::string_view describe(WaitCause cause) noexcept {
  switch (cause) {
    case WaitCause::kNone: return "nothing";
    case WaitCause::kCooldown: return "a cooldown the server asked for";
    case WaitCause::kQuota: return "the quota the server announced";
    case WaitCause::kQueue: return "the requests ahead of it on the same key";
    case WaitCause::kProbe: return "the answer to another request, which learns the quota afresh";
    case WaitCause::kStore: return "the shared quota store, which cannot answer";
    case WaitCause::kUnknown: return "the shared quota state of the key";
  }
  return "the pacer";
}

std::string_view to_string(TryStatus s) noexcept {
  switch (s) {
    case TryStatus::kPermit: return "permit";
    case TryStatus::kReserved: return "reserved";
    case TryStatus::kAskAgain: return "ask_again";
    case TryStatus::kDeferred: return "deferred";
    case TryStatus::kDeadlineExceeded: return "deadline_exceeded";
    case TryStatus::kUnavailable: return "unavailable";
  }
  return "unknown";
}

// The line, the reservations and the notifications.
struct Pacer::Ops {
  using State = Ticket::State;

  // A store answer with the local epoch read before the store was asked (a
  // cooldown recorded in between voids the slot: asked again, never early).
  struct Asked {
    StoreGrant grant;
    std::uint64_t epoch = 0;
    MonoTime at{};  // the `now` the store was given
  };

  static void notify(State& s) {
    MutexLock lock(s.notify_mu);
    s.notified = true;
    s.wake.request_stop();
    if (const auto f = s.notify) (*f)();
  }

  // Notifies the head of the line, outside the key's lock (a callback may ask again).
  static void notify_head(Local& l) {
    if (l.queued.load(std::memory_order_acquire) == 0) return;
    std::shared_ptr<State> head;
    {
      MutexLock lock(l.mu);
      if (!l.queue.empty()) head = l.queue.front();
    }
    if (head) notify(*head);
  }

  static void wake_head(Local& l) {
    l.generation.fetch_add(1, std::memory_order_acq_rel);
    notify_head(l);
  }

  // Joins the line in ticket order, never ahead of the current head (it may be
  // talking to the store). Caller holds l.mu.
  static void enqueue_locked(Pacer& p, Local& l, const std::shared_ptr<State>& s) ABIDE_REQUIRES(l.mu) {
    if (s->number == 0) s->number = p.next_ticket_.fetch_add(1, std::memory_order_relaxed);
    auto from = l.queue.begin() + (l.queue.empty() ? 0 : 1);
    auto at = std::upper_bound(from, l.queue.end(), s->number,
                               [](std::uint64_t t, const std::shared_ptr<State>& w) { return t < w->number; });
    l.queue.insert(at, s);
    s->queued = true;
    l.queued.fetch_add(1, std::memory_order_release);
  }

  // Leaves the line and hands the turn to the next one.
  static void leave(Local& l, State& s) {
    std::shared_ptr<State> next;
    {
      MutexLock lock(l.mu);
      if (!s.queued) return;
      const bool was_head = !l.queue.empty() && l.queue.front().get() == &s;
      l.queue.erase(
          std::find_if(l.queue.begin(), l.queue.end(), [&](const std::shared_ptr<State>& w) { return w.get() == &s; }));
      l.queued.fetch_sub(1, std::memory_order_release);
      s.queued = false;
      if (was_head && !l.queue.empty()) next = l.queue.front();
    }
    if (next) notify(*next);
  }

  // The earliest slot given back that is still good and has room for what
  // the send needs. Caller holds l.mu.
  static std::optional<Returned> take_returned_locked(Local& l, MonoTime now, std::span<const UnitCost> costs)
      ABIDE_REQUIRES(l.mu) {
    const std::uint64_t epoch = l.epoch.load(std::memory_order_acquire);
    std::erase_if(l.returned, [&](const Returned& r) { return r.slot < now || r.epoch != epoch; });
    std::optional<Returned> out;
    const auto it =
        std::find_if(l.returned.begin(), l.returned.end(), [&](const Returned& r) { return covers(r.costs, costs); });
    if (it != l.returned.end()) {
      out = std::move(*it);
      l.returned.erase(it);
    }
    l.returned_count.store(static_cast<std::uint32_t>(l.returned.size()), std::memory_order_release);
    return out;
  }

  // A reserved slot the caller will not use: the next to ask gets it.
  static void give_back(Pacer& p, Local& l, const State& s) {
    if (s.probe) {
      l.handle->abandon_probe(p.mono_.now());
      wake_head(l);
      return;
    }
    return_slot(p, l, Returned{s.slot, s.epoch, s.store_epoch, s.costs});
  }

  // A slot the store reserved that its taker will not use.
  static void return_slot(Pacer& p, Local& l, Returned r) {
    if (r.slot < p.mono_.now() || l.epoch.load(std::memory_order_acquire) != r.epoch) return;
    {
      MutexLock lock(l.mu);
      if (l.returned.size() >= kMaxReturned) return;
      const auto at = std::upper_bound(l.returned.begin(), l.returned.end(), r.slot,
                                       [](MonoTime t, const Returned& x) { return t < x.slot; });
      l.returned.insert(at, std::move(r));
      l.returned_count.store(static_cast<std::uint32_t>(l.returned.size()), std::memory_order_release);
    }
    notify_head(l);
  }

  static TryAcquireResult pending_result(TryStatus status, MonoTime at, bool probe,
                                         WaitCause cause = WaitCause::kNone,
                                         std::optional<QuotaHeld> held = std::nullopt) {
    TryAcquireResult r;
    r.status = status;
    r.at = at;
    r.probe = probe;
    r.cause = cause;
    r.held = std::move(held);
    return r;
  }

  static TryAcquireResult final_result(Pacer& p, TryStatus status, MonoTime at, WaitCause cause,
                                       std::optional<QuotaHeld> held = std::nullopt) {
    TryAcquireResult r;
    r.status = status;
    r.at = at;
    r.cause = cause;
    r.held = std::move(held);
    r.not_before_wall = saturating_add(p.wall_.now(), at - p.mono_.now());
    return r;
  }

  // The wait would pass the limit: which limit decides the status.
  static TryAcquireResult too_late(Pacer& p, std::optional<MonoTime> deadline, MonoTime at, WaitCause cause,
                                   std::optional<QuotaHeld> held = std::nullopt) {
    const bool past_deadline = deadline && at >= *deadline;
    return final_result(p, past_deadline ? TryStatus::kDeadlineExceeded : TryStatus::kDeferred, at, cause,
                        std::move(held));
  }

  // Holds `slot` for the ticket.
  static TryAcquireResult reserve(State& s, MonoTime slot, MonoTime now, std::uint64_t epoch, std::uint64_t store_epoch,
                                  bool probe, WaitCause cause, std::optional<QuotaHeld> held = std::nullopt) {
    s.cause = cause;
    s.held = std::move(held);
    s.reserved = true;
    s.slot = slot;
    s.reserved_wait = slot - now;
    s.epoch = epoch;
    s.store_epoch = store_epoch;
    s.probe = probe;
    return pending_result(TryStatus::kReserved, slot, probe, cause, s.held);
  }

  // What this process was told, written back to a store that answered with
  // less (it was flushed, restarted empty, failed over to a replica that
  // missed writes), so that every process learns it again. Received at the
  // clock's origin, like block_until's: it answers no probe.
  static void write_back(Pacer& p, Local& l, MonoTime floor, WaitCause cause) {
    StoreRecord rec;
    rec.now = p.mono_.now();
    if (floor <= rec.now) return;
    rec.age = kMaxDuration;
    rec.cooldown = floor - rec.now;
    rec.cooldown_cause = cause;
    rec.cooldown_floor = *rec.cooldown;  // whole: the store has no window to end it at
    rec.spread_seed = p.next_random();
    const RecordOutcome out = l.handle->record(rec, p.config_.rules);
    if (out.blocked) l.epoch.fetch_add(1, std::memory_order_acq_rel);
    wake_head(l);
  }

  // A grant the ticket will not take (the floor or the caller's limit lies
  // past it): a probe is abandoned, a slot goes to the next to ask.
  static void return_grant(Pacer& p, Local& l, const Asked& asked, MonoTime at, const std::vector<UnitCost>& costs) {
    if (asked.grant.kind == StoreGrant::Kind::kProbe) {
      l.handle->abandon_probe(p.mono_.now());
      wake_head(l);
    } else if (asked.grant.wait > Duration::zero()) {
      return_slot(p, l, Returned{at, asked.epoch, asked.grant.epoch, costs});
    }
  }

  // What a part of a step decided: the caller's answer, another round, or on
  // to the next part.
  enum class Then { kAnswer, kAgain, kGoOn };

  // A slot reserved earlier: not due yet (reserved still), due (the permit),
  // or voided since (nothing: another round).
  static std::optional<TryAcquireResult> reserved_slot(Pacer& p, Local& local, State& s, MonoTime now) {
    if (now < s.slot) return pending_result(TryStatus::kReserved, s.slot, s.probe, s.cause, s.held);
    s.reserved = false;
    // Void too when an answer since the reservation raised the floor past
    // it (a quota said spent, even one too uncertain to start a cooldown).
    const bool valid = local.epoch.load(std::memory_order_acquire) == s.epoch && floor_of(local) <= now &&
                       !(p.store_->shared() && s.reserved_wait >= p.config_.revalidate_after &&
                         !local.handle->still_valid(s.store_epoch, now));
    // The permit says what it waited for.
    if (valid) return pending_result(TryStatus::kPermit, s.slot, s.probe, s.cause, std::move(s.held));
    // A cooldown began since: the slot is void (a probe's too). The ticket
    // keeps its number, so it queues ahead of those who came later.
    s.probe = false;
    return std::nullopt;
  }

  // The ticket's turn in the key's line: not its turn yet (an answer), a slot
  // given back to take (an answer, or another round when it is due), or the
  // store asked (`pending` set, on to its answer).
  static Then take_turn(Pacer& p, Ticket& t, std::optional<MonoTime> deadline, MonoTime limit, MonoTime now,
                        std::optional<Asked>& pending, TryAcquireResult& answer) {
    Local& local = *t.local_;
    const std::shared_ptr<State>& sp = t.state_;
    State& s = *sp;
    UniqueLock lock(local.mu);
    if (!s.queued && !local.queue.empty()) enqueue_locked(p, local, sp);
    if (s.queued && local.queue.front() != sp) {
      // Not our turn: the head leaving notifies us.
      if (now >= limit) {
        const MonoTime estimate = std::max(local.blocked_until, limit);
        const bool unavailable = local.blocked_by_store;
        const WaitCause cause = local.blocked_cause;
        lock.unlock();
        leave(local, s);
        answer = unavailable ? final_result(p, TryStatus::kUnavailable, estimate, WaitCause::kStore)
                             : too_late(p, deadline, estimate, cause);
        return Then::kAnswer;
      }
      // Without a notification, look again when the head will (or soon).
      const MonoTime at = local.blocked_until > now ? local.blocked_until : saturating_add(now, p.config_.shared_poll);
      answer = pending_result(TryStatus::kAskAgain, earlier(at, limit), false, local.blocked_cause);
      return Then::kAnswer;
    }
    if (local.returned_count.load(std::memory_order_acquire) != 0) {
      if (const auto r = take_returned_locked(local, now, s.costs)) {
        lock.unlock();
        leave(local, s);
        if (s.number == 0) s.number = p.next_ticket_.fetch_add(1, std::memory_order_relaxed);
        answer = reserve(s, r->slot, now, r->epoch, r->store_epoch, false, WaitCause::kQueue);
        // Checked against a shared store when due: it was reserved long ago.
        s.reserved_wait = kMaxDuration;
        return r->slot <= now ? Then::kAgain : Then::kAnswer;
      }
    }
    lock.unlock();
    const std::uint64_t epoch = local.epoch.load(std::memory_order_acquire);
    pending = Asked{local.handle->acquire({now, limit - now, s.costs}, p.config_.rules), epoch, now};
    return Then::kGoOn;
  }

  // The floor: never earlier than this process was told. Moves `at` (and the
  // grant's cause) up to it, or writes it back to a store that forgot, once
  // per step (another round: the write voids what the store just granted).
  static Then hold_to_floor(Pacer& p, Local& local, MonoTime now, StoreGrant& g, MonoTime& at, bool& wrote_back,
                            bool& floored) {
    const MonoTime floor = floor_of(local);
    if (floor <= now || g.kind == StoreGrant::Kind::kAwaitProbe) return Then::kGoOn;
    const WaitCause floor_cause = local.floor_cause.load(std::memory_order_relaxed);
    if (floor > saturating_add(at, kFloorSlack) && g.kind != StoreGrant::Kind::kUnavailable && !wrote_back) {
      // The store forgot: teach it again (which voids what it just
      // granted) and ask again. Once per step: a store that still
      // answers with less is held by the floor below.
      wrote_back = true;
      write_back(p, local, floor, floor_cause);
      return Then::kAgain;
    }
    if (floor > at) {
      at = floor;
      floored = true;
      g.cause = floor_cause;
      g.held.reset();  // the store's policy no longer sets the time
    } else if (at - floor <= kFloorSlack && g.cause == WaitCause::kUnknown) {
      g.cause = floor_cause;  // the store holds it there too, without saying why
    }
    return Then::kGoOn;
  }

  // The store granted a send (or the probe) at `at`: now, a slot reserved for
  // later, or past what the caller accepts.
  static TryAcquireResult take_grant(Pacer& p, Local& local, State& s, std::optional<MonoTime> deadline, MonoTime limit,
                                     const Asked& asked, StoreGrant& g, MonoTime now, MonoTime at) {
    leave(local, s);
    const bool probe = g.kind == StoreGrant::Kind::kProbe;
    if (at <= now) return pending_result(TryStatus::kPermit, now, probe);
    if (at > limit) {
      // A sleep past what the caller accepts: a shared store's wait
      // counts from its answer, a round trip after the caller's limit
      // was given to it. (A slot that is due goes: the round trip is
      // the store's time, not a wait.)
      return_grant(p, local, asked, at, s.costs);
      return too_late(p, deadline, at, g.cause, std::move(g.held));
    }
    // A number now, so that if the slot is voided the ticket queues
    // ahead of those who came later.
    if (s.number == 0) s.number = p.next_ticket_.fetch_add(1, std::memory_order_relaxed);
    return reserve(s, at, now, asked.epoch, g.epoch, probe, g.cause, std::move(g.held));
  }

  // The store says wait for a probe's answer, or is down: the ticket waits in
  // line, at its head for the time the store gave. Nothing when it should look
  // again at once (someone came first, or a record came since `generation`).
  static std::optional<TryAcquireResult> await_at_head(Pacer& p, Ticket& t, std::optional<MonoTime> deadline,
                                                       MonoTime limit, const StoreGrant& g, MonoTime now, MonoTime at,
                                                       bool floored, std::uint64_t generation) {
    Local& local = *t.local_;
    const std::shared_ptr<State>& sp = t.state_;
    State& s = *sp;
    const bool unavailable = g.kind == StoreGrant::Kind::kUnavailable;
    UniqueLock lock(local.mu);
    if (!s.queued) enqueue_locked(p, local, sp);
    if (local.queue.front() != sp) return std::nullopt;  // someone came first: wait for our turn
    local.blocked_until = at;
    local.blocked_by_store = unavailable;
    local.blocked_cause = unavailable ? WaitCause::kStore : WaitCause::kProbe;
    if (now >= limit || (unavailable && at > limit)) {
      lock.unlock();
      leave(local, s);
      // While the store is down, what this process was told still says when.
      if (floored) return too_late(p, deadline, at, g.cause);
      return unavailable ? final_result(p, TryStatus::kUnavailable, at, WaitCause::kStore)
                         : too_late(p, deadline, at, WaitCause::kProbe);
    }
    MonoTime until = earlier(at, limit);
    if (p.store_->shared()) until = earlier(until, saturating_add(now, p.config_.shared_poll));
    // A record since we asked the store: ask again rather than wait.
    if (local.generation.load(std::memory_order_acquire) != generation) return std::nullopt;
    return pending_result(TryStatus::kAskAgain, until, false, local.blocked_cause);
  }

  // One look at the key, never blocking: the logic both acquire forms share.
  // Each round: a reserved slot, else the ticket's turn in line and the
  // store's answer, held to the floor, then what that answer says.
  static TryAcquireResult step(Pacer& p, Ticket& t, std::optional<MonoTime> deadline, std::optional<Asked> pending) {
    Local& local = *t.local_;
    State& s = *t.state_;
    MonoTime limit = saturating_add(s.start, p.config_.max_wait);
    if (deadline && *deadline < limit) limit = *deadline;
    bool wrote_back = false;

    for (int round = 0; round < kMaxRounds; ++round) {
      MonoTime now = p.mono_.now();
      if (s.reserved) {
        if (auto r = reserved_slot(p, local, s, now)) return std::move(*r);
        continue;
      }
      const std::uint64_t generation = local.generation.load(std::memory_order_acquire);
      if (!pending) {
        TryAcquireResult answer;
        const Then then = take_turn(p, t, deadline, limit, now, pending, answer);
        if (then == Then::kAnswer) return answer;
        if (then == Then::kAgain) continue;
      }
      const Asked asked = *pending;
      pending.reset();
      // The wait counts from the instant the store was asked. A shared store may
      // answer on its own clock: counting from its answer is never early.
      now = p.store_->shared() ? std::max(asked.at, p.mono_.now()) : asked.at;
      StoreGrant g = asked.grant;
      MonoTime at = saturating_add(now, std::max(g.wait, Duration::zero()));
      bool floored = false;
      if (hold_to_floor(p, local, now, g, at, wrote_back, floored) == Then::kAgain) continue;
      switch (g.kind) {
        case StoreGrant::Kind::kGranted:
        case StoreGrant::Kind::kProbe: return take_grant(p, local, s, deadline, limit, asked, g, now, at);
        case StoreGrant::Kind::kTooLate:
          leave(local, s);
          return too_late(p, deadline, at, g.cause, std::move(g.held));
        case StoreGrant::Kind::kAwaitProbe:
        case StoreGrant::Kind::kUnavailable:
          if (auto r = await_at_head(p, t, deadline, limit, g, now, at, floored, generation)) return std::move(*r);
          continue;
      }
    }
    // Records keep changing the answer: ask again at once.
    return pending_result(TryStatus::kAskAgain, p.mono_.now(), false);
  }

  // A fresh acquire's first store question, skipping the line when nobody
  // is in it: most acquires end here.
  static std::optional<Asked> fast_path(Pacer& p, Local& local, MonoTime now, MonoTime limit,
                                        std::span<const UnitCost> costs) {
    if (local.queued.load(std::memory_order_acquire) != 0 ||
        local.returned_count.load(std::memory_order_acquire) != 0) {
      return std::nullopt;
    }
    const std::uint64_t epoch = local.epoch.load(std::memory_order_acquire);
    return Asked{local.handle->acquire({now, limit - now, costs}, p.config_.rules), epoch, now};
  }

  static bool granted_now(const Local& l, const std::optional<Asked>& a) {
    return a && a->grant.kind == StoreGrant::Kind::kGranted && a->grant.wait <= Duration::zero() &&
           floor_of(l) <= a->at;
  }

  static void start(Ticket& t, MonoTime now, std::span<const UnitCost> costs) {
    if (!t.state_) {
      t.state_ = std::make_shared<State>(t.notify_);
    }
    t.state_->started = true;
    t.state_->start = now;
    t.state_->costs.assign(costs.begin(), costs.end());
  }

  static void done(Ticket& t) {
    t.state_->started = false;
    t.state_->number = 0;
  }

  // Sleeps until `until`, or until notified through `wake`, or cancelled.
  static void doze(Pacer& p, MonoTime until, std::stop_source wake, const std::stop_token& stop) {
    until = earlier(until, saturating_add(p.mono_.now(), kMaxSleepSlice));
    std::stop_callback on_stop(stop, [wake]() mutable noexcept { wake.request_stop(); });
    p.mono_.sleep_until(until, wake.get_token());
  }

  // Sleeps until `until` unless cancelled; false when cancelled.
  static bool sleep_to(Pacer& p, MonoTime until, const std::stop_token& stop) {
    for (;;) {
      const MonoTime now = p.mono_.now();
      if (now >= until) return true;
      const MonoTime slice = earlier(until, saturating_add(now, kMaxSleepSlice));
      if (p.mono_.sleep_until(slice, stop) == WaitResult::kCancelled) return false;
    }
  }

  static AcquireResult with_held(AcquireResult a, const TryAcquireResult& r) {
    a.held = r.held;
    return a;
  }

  // The blocking acquire: sleeps on step's answers. Out of line, so that
  // acquire's fast path (most acquires) stays a small function.
  [[gnu::noinline]] static AcquireResult wait(Pacer& p, Ticket& t, MonoTime start, std::optional<MonoTime> deadline,
                                              const std::stop_token& stop, std::optional<Asked> pending) {
    State& s = *t.state_;
    for (;;) {
      if (stop.stop_requested()) {
        const MonoTime at = s.reserved ? s.slot : p.mono_.now();
        t.release();
        return p.finish(AcquireStatus::kCancelled, start, at, false);
      }
      // A fresh wake before looking, so a notification after the look is not lost.
      std::stop_source wake;
      {
        MutexLock lock(s.notify_mu);
        s.wake = wake;
        s.notified = false;
      }
      const TryAcquireResult r = step(p, t, deadline, std::move(pending));
      pending.reset();
      switch (r.status) {
        case TryStatus::kPermit: done(t); return with_held(p.finish(AcquireStatus::kPermit, start, r.at, r.probe, r.cause), r);
        case TryStatus::kDeferred:
          done(t);
          return with_held(p.finish(AcquireStatus::kDeferred, start, r.at, false, r.cause), r);
        case TryStatus::kDeadlineExceeded:
          done(t);
          return with_held(p.finish(AcquireStatus::kDeadlineExceeded, start, r.at, false, r.cause), r);
        case TryStatus::kUnavailable:
          done(t);
          return p.finish(AcquireStatus::kUnavailable, start, r.at, false, r.cause);
        case TryStatus::kReserved:
          if (!sleep_to(p, r.at, stop)) {
            t.release();
            return p.finish(AcquireStatus::kCancelled, start, r.at, false);
          }
          continue;
        case TryStatus::kAskAgain: doze(p, r.at, std::move(wake), stop); continue;
      }
    }
  }
};

// ---- Ticket ----

Pacer::Ticket::~Ticket() {
  release();
  if (state_) {
    // After this no notification runs (one running now has ended).
    MutexLock lock(state_->notify_mu);
    state_->notify.reset();
  }
}

Pacer::Ticket::Ticket(Ticket&& other) noexcept
    : pacer_(std::exchange(other.pacer_, nullptr)),
      local_(std::move(other.local_)),
      state_(std::move(other.state_)),
      notify_(std::move(other.notify_)) {}

Pacer::Ticket& Pacer::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    release();
    if (state_) {
      MutexLock lock(state_->notify_mu);
      state_->notify.reset();
    }
    pacer_ = std::exchange(other.pacer_, nullptr);
    local_ = std::move(other.local_);
    state_ = std::move(other.state_);
    notify_ = std::move(other.notify_);
  }
  return *this;
}

void Pacer::Ticket::set_notify(std::function<void()> notify) {
  notify_ = notify ? std::make_shared<const std::function<void()>>(std::move(notify)) : nullptr;
  if (!state_) return;
  MutexLock lock(state_->notify_mu);
  state_->notify = notify_;
  if (state_->notified && notify_) (*notify_)();
}

void Pacer::Ticket::release() {
  if (!state_) return;
  State& s = *state_;
  if (local_ && pacer_ != nullptr) {
    Ops::leave(*local_, s);
    if (s.reserved) {
      s.reserved = false;
      Ops::give_back(*pacer_, *local_, s);
      s.probe = false;
    }
  }
  s.started = false;
  s.number = 0;
}

bool Pacer::Ticket::held() const {
  if (!state_ || !local_) return false;
  if (state_->reserved) return true;
  MutexLock lock(local_->mu);
  return state_->queued;
}

// ---- acquire ----

TryAcquireResult Pacer::try_acquire(Ticket& t, const Key& key, std::optional<MonoTime> deadline,
                                    std::span<const UnitCost> costs) {
  const MonoTime now = mono_.now();
  if (!key.local_) return Ops::final_result(*this, TryStatus::kUnavailable, now, WaitCause::kUnknown);
  Local& local = *key.local_;
  const bool bound = t.local_ == key.local_ && t.pacer_ == this;
  if (!bound && t.state_ && t.state_->started) t.release();  // what it holds on another key
  std::optional<Ops::Asked> first;
  if (!bound || !t.state_ || !t.state_->started) {
    MonoTime limit = saturating_add(now, config_.max_wait);
    if (deadline && *deadline < limit) limit = *deadline;
    first = Ops::fast_path(*this, local, now, limit, costs);
    // Most acquires end here, and the ticket is not even bound to the key.
    if (Ops::granted_now(local, first)) return Ops::pending_result(TryStatus::kPermit, now, false);
    if (!bound) {
      t.release();
      t.pacer_ = this;
      t.local_ = key.local_;
    }
    Ops::start(t, now, costs);
  }
  {
    MutexLock lock(t.state_->notify_mu);
    t.state_->notified = false;
  }
  const TryAcquireResult r = Ops::step(*this, t, deadline, std::move(first));
  if (!r.pending()) Ops::done(t);
  return r;
}

AcquireResult Pacer::acquire(std::string_view name, std::optional<MonoTime> deadline, std::stop_token stop,
                             std::span<const UnitCost> costs) {
  return acquire(key(name), deadline, std::move(stop), costs);
}

AcquireResult Pacer::acquire(const Key& key, std::optional<MonoTime> deadline, std::stop_token stop,
                             std::span<const UnitCost> costs) {
  const MonoTime start = mono_.now();
  if (!key.local_ || stop.stop_requested()) return finish(AcquireStatus::kCancelled, start, start, false);
  MonoTime limit = saturating_add(start, config_.max_wait);
  if (deadline && *deadline < limit) limit = *deadline;
  std::optional<Ops::Asked> first = Ops::fast_path(*this, *key.local_, start, limit, costs);
  if (Ops::granted_now(*key.local_, first)) {
    AcquireResult r;
    r.not_before = start;
    return r;
  }
  Ticket t;
  t.pacer_ = this;
  t.local_ = key.local_;
  Ops::start(t, start, costs);
  return Ops::wait(*this, t, start, deadline, stop, std::move(first));
}

void Pacer::record(std::string_view name, const Signals& signals, SendCosts costs) {
  record(key(name), signals, costs);
}

void Pacer::record(const Key& key, const Signals& signals, SendCosts costs) {
  if (!key.local_) return;
  Local& local = *key.local_;
  StoreRecord rec;
  rec.now = mono_.now();
  // Signals count from receipt; the store counts from now. An unset or future
  // receive time counts as now (never as "long ago", which would shorten waits).
  if (signals.received_mono != MonoTime{} && signals.received_mono < rec.now) {
    rec.age = rec.now - signals.received_mono;
  }
  // The cooldown is the answer's permitted time, computed as the planner computes it.
  const PermittedWait permitted = permitted_wait(signals, config_.use_low_confidence_quota);
  const std::optional<Duration> hold = permitted.wait;
  if (hold && *hold > rec.age) rec.cooldown = *hold - rec.age;
  // Which part set it, so that a wait it causes names it.
  if (permitted.quota && (!permitted.retry_after || *permitted.quota > *permitted.retry_after)) {
    rec.cooldown_cause = WaitCause::kQuota;
    // The store may end it where the spent window ends; a Retry-After, and a
    // quota it does not count (bytes, tokens), still hold in full.
    Duration floor = permitted.retry_after.value_or(Duration::zero());
    for (const auto& o : signals.quota) {
      if (!pacing::is_requests(o.unit) && o.remaining && *o.remaining <= 0 && o.reset) floor = std::max(floor, *o.reset);
    }
    rec.cooldown_floor = floor > rec.age ? floor - rec.age : Duration::zero();
  }
  rec.reserved.assign(costs.reserved.begin(), costs.reserved.end());
  rec.used.assign(costs.used.begin(), costs.used.end());
  for (const auto& o : signals.quota) {
    if (rec.policies.size() >= 2 * QuotaStore::kMaxPolicies) break;
    // The server's own word on what this request cost (the draft's `c`)
    // settles its reservation of that unit, unless the caller knows better.
    if (o.cost && !pacing::is_requests(o.unit) && !has_unit(rec.used, o.unit)) rec.used.push_back({o.unit, *o.cost});
    PolicyUpdate u;
    u.id = quota_scope(o);
    u.unit = o.unit;
    u.limit = o.limit;
    u.window = o.window;
    u.remaining = o.remaining;
    std::optional<Duration> reset = o.reset;
    if (reset && o.reset_is_full_refill && o.remaining) {
      const std::int64_t need = pacing::is_requests(o.unit) ? 0 : pacing::amount_of(costs.reserved, o.unit);
      reset = full_refill_window(o, *reset, hold, need);
    }
    if (reset) u.reset = *reset > rec.age ? *reset - rec.age : Duration::zero();
    u.reset_resolution = o.reset_resolution;
    rec.policies.push_back(std::move(u));
  }
  // Limited: 429 (or a profile's status); a bare 503 is an outage, not a
  // quota. A Retry-After date teaches no window: read against a Date of
  // whole seconds, the boundary it states is up to two seconds late, and a
  // window guessed that long is never corrected (it earns no 429), where a
  // window of two seconds would run at half its rate.
  const bool dated = signals.retry_after && signals.retry_after->kind == RetryHint::Kind::kDate;
  rec.limited = signals.limited && !dated;
  rec.spread_seed = next_random();
  const RecordOutcome out = local.handle->record(rec, config_.rules);
  note_floor(local, rec, rec.now - rec.age);
  if (out.blocked) local.epoch.fetch_add(1, std::memory_order_acq_rel);
  // A waiting head waits for a probe's answer (released) or for a cooldown
  // to be known (blocked); a record that is neither changes no answer it
  // got, so most records skip the wake and its locked add. A shared store's
  // answers may change by other processes' records: it is always woken.
  if (out.blocked || out.released || store_->shared()) Ops::wake_head(local);
}

void Pacer::settle(const Key& key, MonoTime received, SendCosts costs) {
  if (!key.local_ || costs.used.empty()) return;
  StoreSettle s;
  s.now = mono_.now();
  // An unset or future receive time counts as now: the answer is the current window's.
  if (received != MonoTime{} && received < s.now) s.age = s.now - received;
  s.reserved.assign(costs.reserved.begin(), costs.reserved.end());
  s.used.assign(costs.used.begin(), costs.used.end());
  key.local_->handle->settle(s, config_.rules);
}

bool Pacer::block_until(std::string_view name, WallTime until) { return block_until(key(name), until); }

bool Pacer::block_until(const Key& key, WallTime until) {
  if (!key.local_) return false;
  const WallTime wall_now = wall_.now();
  if (until <= wall_now) return false;
  Local& local = *key.local_;
  StoreRecord rec;
  rec.now = mono_.now();
  // Received at the clock's origin: older than any probe and any window, so
  // it answers no probe and says nothing fresh about a window; the cooldown
  // counts from now.
  rec.age = kMaxDuration;
  rec.cooldown = until - wall_now;
  rec.spread_seed = next_random();
  const RecordOutcome out = local.handle->record(rec, config_.rules);
  note_floor(local, rec, MonoTime{});
  if (out.blocked) local.epoch.fetch_add(1, std::memory_order_acq_rel);
  // A head waiting for a probe's answer now waits for the cooldown instead.
  Ops::wake_head(local);
  return out.blocked;
}

std::optional<MonoTime> Pacer::held_until(const Key& key) const {
  if (!key.valid()) return std::nullopt;
  const MonoTime end = floor_of(*key.local_);
  if (end <= mono_.now()) return std::nullopt;
  return end;
}

std::optional<LearnedPolicy> Pacer::learned(const Key& key) {
  if (!key.local_) return std::nullopt;
  return key.local_->handle->learned(mono_.now());
}

void Pacer::abandon_probe(const Key& key) {
  if (!key.local_) return;
  key.local_->handle->abandon_probe(mono_.now());
  Ops::wake_head(*key.local_);
}

}  // namespace abide
