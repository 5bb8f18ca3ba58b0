// Pacer: turns each acquire into one store operation, and waits where the store
// says so. The store decides (quota_store.h); this file owns the waiting: the
// first-in first-out queue of workers waiting for a probe, cancellation, the
// deadline and maximum wait, and waking waiters when a record changes things.
#include "abide/pacer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace abide {
namespace {

constexpr std::size_t kMaxKeyLength = 256;
// Sleeps are cut into slices of at most this; a waiter then simply looks again.
constexpr Duration kMaxSleepSlice = std::chrono::hours{1};

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

bool is_requests(std::string_view unit) {
  static constexpr std::string_view kRequests = "requests";
  if (unit.empty()) return true;
  if (unit.size() != kRequests.size()) return false;
  for (std::size_t i = 0; i < unit.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(unit[i])) != kRequests[i]) return false;
  }
  return true;
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
Duration full_refill_window(const QuotaObservation& o, Duration reset, std::optional<Duration> hold) {
  const std::int64_t r = *o.remaining;
  if (r <= 0) return std::min(reset, hold.value_or(reset));
  if (!o.limit || *o.limit <= r) return reset;
  const double ns = static_cast<double>(reset.count()) * static_cast<double>(r) / static_cast<double>(*o.limit - r);
  if (!(ns < static_cast<double>(reset.count()))) return reset;
  return Duration{static_cast<Duration::rep>(std::ceil(ns))};
}

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

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

// One waiter in a key's queue.
struct Waiter {
  std::uint64_t ticket = 0;
  std::stop_source wake{std::nostopstate};  // replaced (under Local::mu) before each sleep
};

struct Pacer::Local {
  std::string name;
  std::shared_ptr<QuotaStore::Handle> handle;
  // Bumped when a local record starts a cooldown: reservations made before are void.
  std::atomic<std::uint64_t> epoch{0};
  // Bumped by every record and abandoned probe: a waiting head must look again.
  std::atomic<std::uint64_t> generation{0};
  std::atomic<std::uint32_t> queued{0};
  std::mutex mu;
  std::vector<Waiter*> queue;  // by ticket; the front is the head, the only one asking the store
  MonoTime blocked_until{};    // the head's latest estimate, for reports of those behind it
  bool blocked_by_store = false;  // ... and whether the store was unavailable (fail-closed)
};

struct Pacer::Keys {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<Local>, StringHash, std::equal_to<>> map;
};

const std::string& Pacer::Key::name() const noexcept {
  static const std::string kEmpty;
  return local_ ? local_->name : kEmpty;
}

Pacer::Pacer(PacerConfig config, std::shared_ptr<QuotaStore> store, const MonotonicClock& mono,
             const WallClock& wall)
    : config_(std::move(config)),
      store_(store ? std::move(store) : std::make_shared<MemoryStore>()),
      mono_(mono),
      wall_(wall),
      random_state_(config_.seed),
      keys_(std::make_unique<Keys>()) {
  if (config_.max_wait < Duration::zero()) config_.max_wait = Duration::zero();
  if (config_.max_keys == 0) config_.max_keys = 1;
}

Pacer::~Pacer() = default;

Pacer::Key Pacer::key(std::string_view name) {
  std::string n = bounded(std::string(name), kMaxKeyLength);
  std::lock_guard lock(keys_->mu);
  if (auto it = keys_->map.find(n); it != keys_->map.end()) return Key(it->second);
  auto local = std::make_shared<Local>();
  local->name = n;
  local->handle = store_->open(n);
  if (keys_->map.size() >= config_.max_keys) {
    // Drop keys nobody holds (no handle, no acquire in progress); their state
    // stays in the store.
    std::erase_if(keys_->map, [](const auto& kv) { return kv.second.use_count() == 1; });
  }
  if (keys_->map.size() < config_.max_keys) keys_->map.emplace(std::move(n), local);
  return Key(std::move(local));
}

double Pacer::next_random() {
  if (config_.random) {
    const double u = config_.random();
    return (u >= 0.0 && u < 1.0) ? u : 0.0;
  }
  const std::uint64_t x = random_state_.fetch_add(0x9e3779b97f4a7c15ULL, std::memory_order_relaxed);
  return static_cast<double>(splitmix(x) >> 11) * 0x1.0p-53;
}

AcquireResult Pacer::finish(AcquireStatus status, MonoTime start, MonoTime not_before, bool probe) const {
  AcquireResult r;
  r.status = status;
  r.probe = probe;
  r.not_before = not_before;
  const MonoTime now = mono_.now();
  r.waited = now - start;
  if (status == AcquireStatus::kDeferred || status == AcquireStatus::kDeadlineExceeded ||
      status == AcquireStatus::kUnavailable) {
    r.not_before_wall = saturating_add(wall_.now(), not_before - now);
  }
  return r;
}

AcquireResult Pacer::acquire(std::string_view name, std::optional<MonoTime> deadline, std::stop_token stop) {
  return acquire(key(name), deadline, std::move(stop));
}

// The waiting machinery: everything that is not the fast path.
struct Pacer::Ops {
  Pacer& p;
  Local& local;
  MonoTime start;
  MonoTime limit;  // the latest acceptable send time: min(deadline, start + max_wait)
  std::optional<MonoTime> deadline;
  std::stop_token stop;
  Waiter me;
  bool in_queue = false;

  // Never leaves a pointer to `me` behind, whatever the way out.
  ~Ops() { leave(); }

  // Joins the queue in ticket order, never ahead of the current head (it may be
  // talking to the store). Caller holds local.mu.
  void enqueue_locked() {
    if (me.ticket == 0) me.ticket = p.next_ticket_.fetch_add(1, std::memory_order_relaxed);
    auto from = local.queue.begin() + (local.queue.empty() ? 0 : 1);
    auto at = std::upper_bound(from, local.queue.end(), me.ticket,
                               [](std::uint64_t t, const Waiter* w) { return t < w->ticket; });
    local.queue.insert(at, &me);
    in_queue = true;
    local.queued.fetch_add(1, std::memory_order_release);
  }

  // Leaves the queue and hands the turn to the next waiter.
  void leave() {
    if (!in_queue) return;
    std::lock_guard lock(local.mu);
    local.queue.erase(std::find(local.queue.begin(), local.queue.end(), &me));
    local.queued.fetch_sub(1, std::memory_order_release);
    in_queue = false;
    if (!local.queue.empty()) local.queue.front()->wake.request_stop();
  }

  static void wake_head(Local& l) {
    l.generation.fetch_add(1, std::memory_order_acq_rel);
    if (l.queued.load(std::memory_order_acquire) == 0) return;
    std::lock_guard lock(l.mu);
    if (!l.queue.empty()) l.queue.front()->wake.request_stop();
  }

  AcquireResult cancelled(MonoTime not_before) {
    leave();
    return p.finish(AcquireStatus::kCancelled, start, not_before, false);
  }

  // The wait would pass the limit: which limit decides the status.
  AcquireResult too_late(MonoTime not_before) {
    leave();
    const bool past_deadline = deadline && not_before >= *deadline;
    return p.finish(past_deadline ? AcquireStatus::kDeadlineExceeded : AcquireStatus::kDeferred, start,
                    not_before, false);
  }

  // Sleeps until `until`, or until woken through `wake`, or cancelled. The
  // caller created `wake` (under local.mu) before deciding to sleep, so a wake
  // between that decision and this sleep is not lost.
  void doze(MonoTime until, std::stop_source wake) {
    const MonoTime now = p.mono_.now();
    until = earlier(until, saturating_add(now, kMaxSleepSlice));
    std::stop_callback on_stop(stop, [wake]() mutable noexcept { wake.request_stop(); });
    p.mono_.sleep_until(until, wake.get_token());
  }

  // Sleeps until `until` unless cancelled; false when cancelled.
  bool sleep_to(MonoTime until) {
    for (;;) {
      const MonoTime now = p.mono_.now();
      if (now >= until) return true;
      const MonoTime slice = earlier(until, saturating_add(now, kMaxSleepSlice));
      if (p.mono_.sleep_until(slice, stop) == WaitResult::kCancelled) return false;
    }
  }

  AcquireResult run(std::optional<StoreGrant> pending) {
    const PacingRules& rules = p.config_.rules;
    for (;;) {
      if (stop.stop_requested()) return cancelled(p.mono_.now());
      MonoTime now = p.mono_.now();
      const std::uint64_t generation = local.generation.load(std::memory_order_acquire);
      if (!pending) {
        std::unique_lock lock(local.mu);
        if (!in_queue && !local.queue.empty()) enqueue_locked();
        if (in_queue && local.queue.front() != &me) {
          // Not our turn: sleep until it is, or until the limit.
          if (now >= limit) {
            const MonoTime estimate = std::max(local.blocked_until, limit);
            const bool unavailable = local.blocked_by_store;
            lock.unlock();
            if (unavailable) {
              leave();
              return p.finish(AcquireStatus::kUnavailable, start, estimate, false);
            }
            return too_late(estimate);
          }
          me.wake = std::stop_source{};
          std::stop_source wake = me.wake;
          lock.unlock();
          doze(limit, std::move(wake));
          continue;
        }
        lock.unlock();
        pending = p.store_->acquire(*local.handle, {now, limit - now}, rules);
        now = std::max(now, p.mono_.now());
      }
      const StoreGrant g = *pending;
      pending.reset();
      const MonoTime at = saturating_add(now, std::max(g.wait, Duration::zero()));
      switch (g.kind) {
        case StoreGrant::Kind::kGranted:
        case StoreGrant::Kind::kProbe: {
          leave();
          const bool probe = g.kind == StoreGrant::Kind::kProbe;
          if (g.wait <= Duration::zero()) return p.finish(AcquireStatus::kPermit, start, now, probe);
          // Take a ticket now, so that if the reservation is voided we queue
          // ahead of those who came later.
          if (me.ticket == 0) me.ticket = p.next_ticket_.fetch_add(1, std::memory_order_relaxed);
          const std::uint64_t epoch = local.epoch.load(std::memory_order_acquire);
          if (!sleep_to(at)) {
            if (probe) release_probe();
            return cancelled(at);
          }
          if (local.epoch.load(std::memory_order_acquire) != epoch) continue;  // a cooldown began
          if (p.store_->shared() && g.wait >= p.config_.revalidate_after &&
              !p.store_->still_valid(*local.handle, g.epoch, p.mono_.now())) {
            continue;
          }
          return p.finish(AcquireStatus::kPermit, start, at, probe);
        }
        case StoreGrant::Kind::kTooLate:
          return too_late(at);
        case StoreGrant::Kind::kAwaitProbe:
        case StoreGrant::Kind::kUnavailable: {
          const bool unavailable = g.kind == StoreGrant::Kind::kUnavailable;
          std::unique_lock lock(local.mu);
          if (!in_queue) enqueue_locked();
          if (local.queue.front() != &me) continue;  // someone came first: wait for our turn
          local.blocked_until = at;
          local.blocked_by_store = unavailable;
          if (now >= limit || (unavailable && at > limit)) {
            lock.unlock();
            if (unavailable) {
              leave();
              return p.finish(AcquireStatus::kUnavailable, start, at, false);
            }
            return too_late(at);
          }
          MonoTime until = earlier(at, limit);
          if (p.store_->shared()) until = earlier(until, saturating_add(now, p.config_.shared_poll));
          me.wake = std::stop_source{};
          std::stop_source wake = me.wake;
          // A record since we asked the store: ask again rather than sleep.
          if (local.generation.load(std::memory_order_acquire) != generation) continue;
          lock.unlock();
          doze(until, std::move(wake));
          continue;
        }
      }
    }
  }

  void release_probe() {
    p.store_->abandon_probe(*local.handle, p.mono_.now());
    wake_head(local);
  }
};

AcquireResult Pacer::acquire(const Key& key, std::optional<MonoTime> deadline, std::stop_token stop) {
  const MonoTime start = mono_.now();
  if (!key.local_ || stop.stop_requested()) return finish(AcquireStatus::kCancelled, start, start, false);
  Local& local = *key.local_;
  MonoTime limit = saturating_add(start, config_.max_wait);
  if (deadline && *deadline < limit) limit = *deadline;

  std::optional<StoreGrant> first;
  // The fast path: nobody waits for a probe, and the store grants now.
  if (local.queued.load(std::memory_order_acquire) == 0) {
    first = store_->acquire(*local.handle, {start, limit - start}, config_.rules);
    if (first->kind == StoreGrant::Kind::kGranted && first->wait <= Duration::zero()) {
      AcquireResult r;
      r.not_before = start;
      return r;
    }
  }
  Ops ops{*this, local, start, limit, deadline, std::move(stop), {}, false};
  return ops.run(first);
}

void Pacer::record(std::string_view name, const Signals& signals) { record(key(name), signals); }

void Pacer::record(const Key& key, const Signals& signals) {
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
  const std::optional<Duration> hold = permitted_wait(signals, config_.use_low_confidence_quota).wait;
  if (hold && *hold > rec.age) rec.cooldown = *hold - rec.age;
  for (const auto& o : signals.quota) {
    if (!is_requests(o.unit)) continue;  // the pacer counts requests, not bytes or tokens
    if (rec.policies.size() >= 2 * QuotaStore::kMaxPolicies) break;
    PolicyUpdate u;
    u.id = quota_scope(o);
    u.limit = o.limit;
    u.window = o.window;
    u.remaining = o.remaining;
    std::optional<Duration> reset = o.reset;
    if (reset && o.reset_is_full_refill && o.remaining) reset = full_refill_window(o, *reset, hold);
    if (reset) u.reset = *reset > rec.age ? *reset - rec.age : Duration::zero();
    u.reset_resolution = o.reset_resolution;
    rec.policies.push_back(std::move(u));
  }
  rec.spread_seed = next_random();
  const RecordOutcome out = store_->record(*local.handle, rec, config_.rules);
  if (out.blocked) local.epoch.fetch_add(1, std::memory_order_acq_rel);
  Ops::wake_head(local);
}

void Pacer::abandon_probe(const Key& key) {
  if (!key.local_) return;
  store_->abandon_probe(*key.local_->handle, mono_.now());
  Ops::wake_head(*key.local_);
}

}  // namespace abide
