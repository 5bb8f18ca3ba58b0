// RedisStore: each QuotaStore operation as one call of the pacer's Lua script
// (pacer.lua, run by pacer_script.cpp) over a pooled connection
// (connection_pool.cpp); while Redis cannot be reached, an in-process
// MemoryStore answers and Redis is tried again with exponential backoff.
#include "abide/redis_store.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <string>
#include <vector>

#include "abide/headers.h"
#include "connection_pool.h"
#include "learned_fields.h"
#include "mutex.h"
#include "pacer_script.h"
#include "pacing/kernel.h"
#include "pacing/units.h"

namespace abide {
namespace {

using redis_detail::ScriptReply;

constexpr std::uint64_t kFallbackEpoch = 1ULL << 63;  // marks epochs from the fallback store

// Every time the script takes or gives is the kernel's whole microseconds,
// rounded the one way pacing/units.h gives.
std::int64_t micros_up(Duration d) { return pacing::micros_up(d).count(); }
std::int64_t micros_down(Duration d) { return pacing::micros_down(d).count(); }

// The longest acceptable wait, rounded down (units.h); negative: only report.
std::string max_wait_arg(Duration max_wait) { return std::to_string(pacing::max_wait_of(max_wait).count()); }

std::string num(std::int64_t v) { return std::to_string(v); }

// Appends costs as the script reads them: a count, then each unit (as the
// kernel keeps it) and amount. A unit once (the first wins, as the kernel
// reads a list), none of requests, at most as many as a key keeps policies.
void add_costs(std::vector<std::string>& args, std::span<const UnitCost> costs) {
  const std::size_t at = args.size();
  args.emplace_back();
  std::size_t n = 0;
  for (const UnitCost& c : costs) {
    if (n == QuotaStore::kMaxPolicies) break;
    std::string unit = pacing::unit_of(c.unit);
    if (unit.empty()) continue;
    bool seen = false;
    for (std::size_t i = 0; i < n; ++i) seen = seen || args[at + 1 + 2 * i] == unit;
    if (seen) continue;
    args.push_back(std::move(unit));
    args.push_back(num(std::clamp<std::int64_t>(c.amount, 0, LearnedPolicyBounds::kMaxCount)));
    ++n;
  }
  args[at] = num(static_cast<std::int64_t>(n));
}

std::string num(double v) {
  std::array<char, 64> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), r.ptr);
}

Duration from_micros(long long us) {
  return pacing::duration_of(std::clamp(pacing::Micros{us}, pacing::Micros::zero(), pacing::kMaxMicros));
}

std::optional<StoreGrant::Kind> grant_kind(long long code) {
  if (code == redis_detail::kGrantGranted) return StoreGrant::Kind::kGranted;
  if (code == redis_detail::kGrantProbe) return StoreGrant::Kind::kProbe;
  if (code == redis_detail::kGrantAwaitProbe) return StoreGrant::Kind::kAwaitProbe;
  if (code == redis_detail::kGrantTooLate) return StoreGrant::Kind::kTooLate;
  return std::nullopt;
}

// What set a grant's wait. A script from before the cause was returned (a
// reply of three) says nothing of it.
WaitCause wait_cause(const std::vector<long long>& out) {
  if (out.size() < 4) return WaitCause::kUnknown;
  switch (out[3]) {
    case redis_detail::kCauseNone: return WaitCause::kNone;
    case redis_detail::kCauseCooldown: return WaitCause::kCooldown;
    case redis_detail::kCauseQuota: return WaitCause::kQuota;
    case redis_detail::kCauseQueue: return WaitCause::kQueue;
    case redis_detail::kCauseProbe: return WaitCause::kProbe;
    default: return WaitCause::kUnknown;
  }
}


// The policy that set a grant's wait: the reply's elements 5 to 8 (remaining,
// limit, need, unit), present only when one did.
std::optional<QuotaHeld> quota_held(const std::vector<long long>& out, std::string unit) {
  if (out.size() < 8) return std::nullopt;
  return QuotaHeld{std::move(unit), std::max<long long>(out[4], -1), std::max<long long>(out[5], 0),
                   std::max<long long>(out[6], 0)};
}

enum class Outcome { kOk, kDown, kBusy, kRefused };

// Errors that say the server cannot serve anyone now, rather than that it
// refused this script: they count as an outage.
bool server_unusable(std::string_view error) {
  // The last: what Redis answers a client that has not logged in and sends a
  // command as large as the script, instead of NOAUTH.
  for (const std::string_view p : {"LOADING", "BUSY", "MASTERDOWN", "NOAUTH", "WRONGPASS", "READONLY", "NOPERM",
                                   "CLUSTERDOWN", "TRYAGAIN", "MISCONF", "ERR Protocol error: unauthenticated"}) {
    if (error.substr(0, p.size()) == p) return true;
  }
  return false;
}

// The first word of a Redis error (its code), escaped: what a message may quote.
std::string error_code(std::string_view error) { return printable(error.substr(0, error.find(' ')), 32); }

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

std::string_view to_string(RedisProblem p) noexcept {
  switch (p) {
    case RedisProblem::kUnreachable: return "unreachable";
    case RedisProblem::kAuthentication: return "authentication";
    case RedisProblem::kPermission: return "permission";
    case RedisProblem::kRefused: return "refused";
  }
  return "unknown";
}

std::string_view to_string(RedisEvent e) noexcept {
  switch (e) {
    case RedisEvent::kDown: return "down";
    case RedisEvent::kRecovered: return "recovered";
    case RedisEvent::kScriptError: return "script_error";
  }
  return "unknown";
}

struct RedisStore::Impl {
  class Key;  // a key's handle (below)

  explicit Impl(RedisStoreOptions o)
      : options(normalized(std::move(o))),
        fallback(options.fallback),
        pool(redis_detail::PoolOptions{options.endpoint, options.connect_timeout, options.command_timeout,
                                       options.connections}) {}

  static RedisStoreOptions normalized(RedisStoreOptions o) {
    if (o.connections == 0) o.connections = 1;
    if (o.reconnect_min <= Duration::zero()) o.reconnect_min = std::chrono::milliseconds{1};
    if (o.reconnect_max < o.reconnect_min) o.reconnect_max = o.reconnect_min;
    return o;
  }

  const RedisStoreOptions options;
  MemoryStore fallback;
  redis_detail::ConnectionPool pool;
  redis_detail::PacerScript script;

  // Health: while down, callers go to the fallback (or wait) until next_attempt,
  // when one of them tries Redis again.
  std::atomic<bool> down{false};
  detail::Mutex health_mu;
  MonoTime next_attempt ABIDE_GUARDED_BY(health_mu){};
  Duration backoff ABIDE_GUARDED_BY(health_mu){};
  bool reconnecting ABIDE_GUARDED_BY(health_mu) = false;
  std::atomic<bool> script_error_reported{false};

  std::atomic<std::uint64_t> round_trips{0};
  std::atomic<std::uint64_t> fallbacks{0};
  std::atomic<std::uint64_t> failures{0};
  std::atomic<std::uint64_t> reconnects{0};

  void event(RedisEvent e, const std::string& message) const {
    if (options.on_event) options.on_event(e, message);
  }

  std::string time_arg(MonoTime now) const {
    if (options.time_base == RedisTimeBase::kServer) return {};
    return num(static_cast<std::int64_t>(pacing::instant_of(now).time_since_epoch().count()));
  }

  // A span that ends a cooldown or a window, from `now`: on the caller's clock
  // the script counts from `now` cut to the microsecond (time_arg), so the
  // span runs to the end rounded up, never before now + d. On the server's
  // clock it is rounded up from the server's own now, later than the caller's.
  std::int64_t span_up(MonoTime now, Duration d) const {
    if (d <= Duration::zero()) return 0;
    if (options.time_base == RedisTimeBase::kServer) return micros_up(d);
    return pacing::span_up(now, d).count();
  }

  // While down, only one caller at a time tries Redis again, once the backoff passed.
  bool may_try(MonoTime now, bool& retrying) {
    if (!down.load(std::memory_order_acquire)) return true;
    detail::MutexLock lock(health_mu);
    if (!down.load(std::memory_order_relaxed)) return true;
    if (reconnecting || now < next_attempt) return false;
    reconnecting = true;
    retrying = true;
    return true;
  }

  // `report`: false when the caller (check) reports the outage itself.
  void mark_down(MonoTime now, const std::string& why, bool report = true) {
    bool first = false;
    {
      detail::MutexLock lock(health_mu);
      if (!down.load(std::memory_order_relaxed)) {
        down.store(true, std::memory_order_release);
        backoff = options.reconnect_min;
        first = true;
      } else if (reconnecting) {
        backoff = std::min(options.reconnect_max, saturating_add(backoff, backoff));
      }
      next_attempt = saturating_add(now, backoff);
      reconnecting = false;
    }
    pool.drop_idle();  // pooled connections to a server that went away are useless now
    failures.fetch_add(1, std::memory_order_relaxed);
    if (first && report) {
      const bool closed = options.on_down == RedisDownPolicy::kFailClosed;
      event(RedisEvent::kDown,
            "redis " + options.endpoint.describe() + " unreachable (" + why + "); " +
                (closed ? "acquire waits for it (fail-closed)" : "continuing with the in-process store") +
                "; reconnecting with backoff");
    }
  }

  void mark_up() {
    if (!down.load(std::memory_order_acquire)) return;
    bool recovered = false;
    {
      detail::MutexLock lock(health_mu);
      if (down.load(std::memory_order_relaxed)) {
        down.store(false, std::memory_order_release);
        recovered = true;
      }
      reconnecting = false;
    }
    if (recovered) {
      reconnects.fetch_add(1, std::memory_order_relaxed);
      event(RedisEvent::kRecovered, "redis " + options.endpoint.describe() + " reachable again");
    }
  }

  void end_retry() {
    detail::MutexLock lock(health_mu);
    reconnecting = false;
  }

  // Runs one operation of the script on a key. On kOk, `out` holds the
  // integers it returned.
  // `text`, when given, receives the reply's string element (ScriptReply::text).
  Outcome run(const std::string& key, std::span<const std::string> args, MonoTime now, std::vector<long long>& out,
              std::string* text = nullptr) {
    bool retrying = false;
    if (!may_try(now, retrying)) return Outcome::kDown;
    // A pooled connection may have died quietly (a restarted server): then
    // once more on a fresh connection before calling Redis down.
    for (int attempt = 0; attempt < 2; ++attempt) {
      redis_detail::ConnectionPool::Taken taken = pool.take();
      if (!taken.connection) {
        if (!taken.busy) {
          mark_down(now, taken.why);
          return Outcome::kDown;
        }
        if (retrying) end_retry();
        return Outcome::kBusy;
      }
      redis_detail::Connection& c = *taken.connection;
      ScriptReply r = script.run(c, key, args, round_trips);
      if (r.kind == ScriptReply::Kind::kNoReply) {
        const std::string why = c.failure();
        const bool fresh = c.fresh();
        c.discard();
        if (!fresh && attempt == 0) {
          pool.drop_idle();  // the others are probably as stale
          continue;
        }
        mark_down(now, why);
        return Outcome::kDown;
      }
      taken.connection.reset();  // back to the pool before any callback runs
      if (r.kind == ScriptReply::Kind::kError) {
        if (server_unusable(r.error)) {
          mark_down(now, "server refuses commands: " + error_code(r.error));
          return Outcome::kDown;
        }
        if (retrying) mark_up();
        if (!script_error_reported.exchange(true)) {
          event(RedisEvent::kScriptError,
                "redis " + options.endpoint.describe() + " refused the pacer's script: " + printable(r.error, 200));
        }
        return Outcome::kRefused;
      }
      out = std::move(r.values);
      if (text != nullptr) *text = std::move(r.text);
      mark_up();
      return Outcome::kOk;
    }
    mark_down(now, "no reply");
    return Outcome::kDown;
  }

  ScriptReply ping(redis_detail::Connection& c) {
    const std::string_view argv[] = {"PING"};
    round_trips.fetch_add(1, std::memory_order_relaxed);
    const redis_detail::Reply r = c.command(argv);
    if (!r) return ScriptReply{ScriptReply::Kind::kNoReply, {}, {}};
    if (r->type == REDIS_REPLY_ERROR) {
      return ScriptReply{ScriptReply::Kind::kError, {}, std::string(r->str, std::min<std::size_t>(r->len, 200))};
    }
    return ScriptReply{ScriptReply::Kind::kOk, {}, {}};
  }

  // RedisStore::check: one connection and one script call, tried like run()
  // (a stale pooled connection is replaced once), each failure classified.
  std::optional<RedisCheckError> check(MonoTime now, const std::string& key) {
    const std::string where = "redis " + options.endpoint.describe();
    const std::array<std::string, redis_detail::kCheckArgs> args{num(redis_detail::kOpCheck), "0"};
    auto failed = [&](RedisProblem problem, std::string message, const std::string& why) {
      mark_down(now, why, false);
      return std::optional<RedisCheckError>(RedisCheckError{problem, std::move(message)});
    };
    for (int attempt = 0; attempt < 2; ++attempt) {
      redis_detail::ConnectionPool::Taken taken = pool.take();
      if (!taken.connection) {
        if (taken.login_refused) {
          return failed(RedisProblem::kAuthentication, where + " refused the credentials (authentication failed)",
                        taken.why);
        }
        if (taken.busy) {
          return failed(RedisProblem::kUnreachable, where + ": every connection stayed busy past the command timeout",
                        "busy");
        }
        return failed(RedisProblem::kUnreachable, "cannot connect to " + where + " (" + printable(taken.why, 200) + ")",
                      taken.why);
      }
      redis_detail::Connection& c = *taken.connection;
      // PING first: a server that wants a password refuses a client that has
      // not logged in with a protocol error on a command as large as the
      // script, and says NOAUTH only to a small one.
      ScriptReply r = ping(c);
      if (r.kind == ScriptReply::Kind::kOk) r = script.run(c, key, args, round_trips);
      if (r.kind == ScriptReply::Kind::kNoReply) {
        const std::string why = c.failure();
        const bool fresh = c.fresh();
        c.discard();
        if (!fresh && attempt == 0) {
          pool.drop_idle();
          continue;
        }
        return failed(RedisProblem::kUnreachable, where + " did not answer (" + printable(why, 200) + ")", why);
      }
      taken.connection.reset();
      if (r.kind == ScriptReply::Kind::kError) {
        const std::string code = error_code(r.error);
        if (starts_with(r.error, "NOAUTH") || starts_with(r.error, "ERR Protocol error: unauthenticated")) {
          return failed(RedisProblem::kAuthentication, where + " requires a password and none was given (NOAUTH)",
                        code);
        }
        if (starts_with(r.error, "WRONGPASS")) {
          return failed(RedisProblem::kAuthentication, where + " refused the credentials (WRONGPASS)", code);
        }
        if (starts_with(r.error, "NOPERM")) {
          return failed(RedisProblem::kPermission,
                        where + ": the Redis user may not run the pacer's script on keys under the prefix \"" +
                            printable(options.endpoint.prefix, 64) + "\" (NOPERM)",
                        code);
        }
        // The store will not get further with a server in this state, nor
        // with a script it refuses: both are for the caller to fix or accept.
        const std::string said = server_unusable(r.error) ? code : printable(r.error, 200);
        return failed(RedisProblem::kRefused, where + " refused the pacer's script: " + said, code);
      }
      mark_up();
      return std::nullopt;
    }
    return failed(RedisProblem::kUnreachable, where + " did not answer", "no reply");
  }

  // How long until Redis is tried again (for fail-closed waits).
  Duration retry_in(MonoTime now) {
    detail::MutexLock lock(health_mu);
    const Duration d = next_attempt > now ? next_attempt - now : Duration::zero();
    return std::max(d, Duration{std::chrono::milliseconds{1}});
  }

  bool fail_closed() const { return options.on_down == RedisDownPolicy::kFailClosed; }
};

RedisStore::RedisStore(RedisStoreOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {}

RedisStore::~RedisStore() = default;

std::string RedisStore::redis_key(std::string_view key) const {
  return impl_->options.endpoint.prefix + std::string(key);
}

std::optional<RedisCheckError> RedisStore::check(MonoTime now) { return impl_->check(now, redis_key("")); }

// One key in Redis: each operation one call of the script; while Redis
// cannot be used, the fallback's handle answers (or, fail-closed, nothing).
class RedisStore::Impl::Key final : public QuotaStore::Handle {
 public:
  Key(std::shared_ptr<Impl> store, std::string key, std::shared_ptr<QuotaStore::Handle> fallback)
      : store_(std::move(store)), key_(std::move(key)), fallback_(std::move(fallback)) {}

  StoreGrant acquire(const StoreAcquire& request, const PacingRules& rules) override {
    std::vector<std::string> args{
        num(redis_detail::kOpAcquire),
        store_->time_arg(request.now),
        max_wait_arg(request.max_wait),
        rules.pacing == Pacing::kSmooth ? "1" : "0",
        num(std::clamp(rules.safety_margin, 0.0, 1.0)),
        num(micros_up(rules.probe_timeout)),
        num(micros_up(rules.cooldown_spread)),
    };
    add_costs(args, request.costs);
    std::vector<long long> out;
    std::string unit;
    const Outcome o = store_->run(key_, args, request.now, out, &unit);
    if (o == Outcome::kOk && out.size() >= 3) {
      if (const auto kind = grant_kind(out[0])) {
        StoreGrant g;
        g.kind = *kind;
        g.wait = from_micros(out[1]);
        g.epoch = static_cast<std::uint64_t>(std::max<long long>(out[2], 0)) & ~kFallbackEpoch;
        g.cause = wait_cause(out);
        g.held = quota_held(out, std::move(unit));
        return g;
      }
    }
    if (store_->fail_closed()) {
      return {StoreGrant::Kind::kUnavailable, store_->retry_in(request.now), 0};
    }
    store_->fallbacks.fetch_add(1, std::memory_order_relaxed);
    StoreGrant g = fallback_->acquire(request, rules);
    g.epoch |= kFallbackEpoch;
    return g;
  }

  RecordOutcome record(const StoreRecord& record, const PacingRules& rules) override {
    // The fallback store learns every response too, so an outage starts from
    // what was known (cooldowns, policies), not from nothing.
    RecordOutcome local;
    if (!store_->fail_closed()) local = fallback_->record(record, rules);
    // Twice the kept policies: updates for ones already known come first, the
    // script keeps at most MAX_POLICIES.
    const std::size_t n = std::min(record.policies.size(), 2 * redis_detail::kMaxPolicies);
    std::vector<std::string> args{
        num(redis_detail::kOpRecord),
        store_->time_arg(record.now),
        num(micros_up(record.age)),
        record.cooldown && *record.cooldown > Duration::zero() ? num(store_->span_up(record.now, *record.cooldown))
                                                               : std::string(),
        num(record.spread_seed >= 0.0 && record.spread_seed < 1.0 ? record.spread_seed : 0.0),
        rules.probe_after_cooldown ? "1" : "0",
        num(micros_up(rules.spread_period)),
        record.limited ? "1" : "0",
        // An exhausted quota's cooldown may end where its window does, not before the floor.
        record.cooldown_cause == WaitCause::kQuota ? num(store_->span_up(record.now, record.cooldown_floor))
                                                   : std::string(),
        num(micros_up(std::max(rules.probe_timeout, Duration::zero()))),
        num(static_cast<std::int64_t>(n)),
    };
    args.reserve(redis_detail::kRecordFixedArgs + n * redis_detail::kPolicyArgs);
    for (std::size_t i = 0; i < n; ++i) {
      const PolicyUpdate& u = record.policies[i];
      args.push_back(u.id.substr(0, redis_detail::kMaxIdBytes));
      args.push_back(u.limit ? num(*u.limit) : std::string());
      args.push_back(u.window ? num(micros_up(*u.window)) : std::string());
      args.push_back(u.remaining ? num(*u.remaining) : std::string());
      args.push_back(u.reset ? num(store_->span_up(record.now, *u.reset)) : std::string());
      args.push_back(num(micros_down(u.reset_resolution)));
      args.push_back(pacing::unit_of(u.unit));
    }
    add_costs(args, record.reserved);
    add_costs(args, record.used);
    std::vector<long long> out;
    if (store_->run(key_, args, record.now, out) == Outcome::kOk && out.size() >= 2) {
      if (auto taught = redis_detail::lesson_of(out)) publish(std::move(*taught), record.now);
      return RecordOutcome{out[0] != 0, out[1] != 0};
    }
    if (!store_->fail_closed()) store_->fallbacks.fetch_add(1, std::memory_order_relaxed);
    return local;
  }

  // The learner's part of a record whose answer teaches (pacing/learner.h):
  // it runs here, on the policy the script returned, and the result is
  // published with a compare-and-set. When another process changed the key's
  // policy in between, the lesson is applied again to the policy it has now,
  // a few times at most: a lesson lost to a key that busy only leaves a
  // policy that restrains less (the script kept the answer's cooldown).
  void publish(redis_detail::ScriptLesson taught, MonoTime now) {
    constexpr int kAttempts = 4;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      pacing::Learned after = taught.learned;
      pacing::learn(after, taught.lesson);
      const redis_detail::LearnedFields from = redis_detail::fields_of(taught.learned);
      const redis_detail::LearnedFields to = redis_detail::fields_of(after);
      if (from == to) return;
      std::vector<std::string> args;
      args.reserve(redis_detail::kPublishArgs);
      args.push_back(num(redis_detail::kOpPublish));
      args.push_back(store_->time_arg(now));
      for (const long long v : from) args.push_back(num(static_cast<std::int64_t>(v)));
      for (const long long v : to) args.push_back(num(static_cast<std::int64_t>(v)));
      std::vector<long long> out;
      if (store_->run(key_, args, now, out) != Outcome::kOk || out.empty() || out[0] != 2) return;
      taught.learned = redis_detail::learned_of(std::span<const long long>(out).subspan(1));
    }
  }

  bool still_valid(std::uint64_t epoch, MonoTime now) override {
    if ((epoch & kFallbackEpoch) != 0) return fallback_->still_valid(epoch & ~kFallbackEpoch, now);
    const std::array<std::string, redis_detail::kCheckArgs> args{num(redis_detail::kOpCheck),
                                                                 num(static_cast<std::int64_t>(epoch))};
    std::vector<long long> out;
    if (store_->run(key_, args, now, out) == Outcome::kOk && !out.empty()) return out[0] == 1;
    // Cannot tell: a cooldown may have started since in another process, so
    // the reservation is void and the pacer asks again (the fallback store, or
    // unavailable when fail-closed), never sends on a guess.
    return false;
  }

  void abandon_probe(MonoTime now) override {
    fallback_->abandon_probe(now);
    const std::array<std::string, redis_detail::kAbandonArgs> args{num(redis_detail::kOpAbandon), store_->time_arg(now)};
    std::vector<long long> out;
    store_->run(key_, args, now, out);
  }

  void settle(const StoreSettle& settle, const PacingRules& rules) override {
    fallback_->settle(settle, rules);
    std::vector<std::string> args{num(redis_detail::kOpSettle), store_->time_arg(settle.now), num(micros_up(settle.age))};
    add_costs(args, settle.reserved);
    add_costs(args, settle.used);
    std::vector<long long> out;
    store_->run(key_, args, settle.now, out);
  }

  std::optional<LearnedPolicy> learned(MonoTime now) override {
    const std::array<std::string, redis_detail::kLearnedArgs> args{num(redis_detail::kOpLearned)};
    std::vector<long long> out;
    if (store_->run(key_, args, now, out) != Outcome::kOk) return fallback_->learned(now);
    if (out.size() != 6 || out[0] != 1) return std::nullopt;
    LearnedPolicy p;
    p.count = out[1];
    p.window = std::chrono::microseconds{out[2]};
    p.window_measured = out[3] == 1;
    p.windows = out[4];
    p.from_retry_after = out[5] == 1;
    return p;
  }

 private:
  std::shared_ptr<Impl> store_;
  std::string key_;                               // the full Redis key
  std::shared_ptr<QuotaStore::Handle> fallback_;  // the fallback store's handle
};

std::shared_ptr<QuotaStore::Handle> RedisStore::open(std::string_view key) {
  return std::make_shared<Impl::Key>(impl_, redis_key(key), impl_->fallback.open(key));
}

bool RedisStore::up() const noexcept { return !impl_->down.load(std::memory_order_acquire); }

RedisStoreStats RedisStore::stats() const noexcept {
  RedisStoreStats s;
  s.round_trips = impl_->round_trips.load(std::memory_order_relaxed);
  s.fallbacks = impl_->fallbacks.load(std::memory_order_relaxed);
  s.failures = impl_->failures.load(std::memory_order_relaxed);
  s.reconnects = impl_->reconnects.load(std::memory_order_relaxed);
  return s;
}

}  // namespace abide
