// abide/pacer.h: spend quota evenly and honour cooldowns across every worker
// (docs/RULES.md rule 9).
//
// Every request asks the pacer first: acquire(key) returns a permit when the
// request may be sent, waits (cancellably) when it must, or says when it will
// be permitted. An event loop asks try_acquire(ticket, key) instead, which
// never sleeps: the same rules (one computation; acquire waits on its answers),
// with the slot reserved and the place in line kept by the ticket between
// calls. Every response is fed back: record(key, signals). State lives in
// a QuotaStore, in-process (MemoryStore, the default) or shared by a fleet
// (RedisStore, abide/redis_store.h).
//
// The rules, per key:
// - Cooldown: a Retry-After, or a quota with remaining 0 until a reset, blocks
//   the key for every worker until it ends. Its length is the answer's
//   permitted time, permitted_wait() (signals.h), the same the planner waits
//   for: a reset that counts to a full refill does not hold the key for the
//   whole refill. With room left r of l, such a reset t is not the window's
//   end either: r is spread over the time r more units come back,
//   t x r / (l - r) (at most t), after which a probe learns the quota afresh. Reservations made before it are
//   void. Released workers are spread (PacingRules::cooldown_spread) so they do
//   not all start in the same millisecond.
// - Remaining r with reset t: `smooth` pacing (default) spaces sends so r lasts
//   until t, stretched by a small safety margin; `burst` sends while r lasts and
//   then waits for t. Neither sends more than r before t. A t stated in whole
//   seconds (QuotaObservation::reset_resolution) may be up to a second after the
//   true end, so each answer bounds the end from below by t minus the step:
//   smooth pacing spends r by the latest such bound of the window (its first
//   answer's taken at most half way to t), so the rounding does not cost a
//   share of every window; it still sends nothing beyond r before t.
// - A policy alone (q per window w): a GCRA with interval w/q (times 1 + margin)
//   and no burst, since the server's window boundaries are unknown.
// - Several policies: each constrains the slot, the most restrictive wins.
// - A window that ended with no fresh information (and, by default, a cooldown
//   that ended): one probe request goes first; the others wait for its answer
//   (any record), or for PacingRules::probe_timeout if it never comes.
// - Waiting workers are served in arrival order: reserved slots are handed out
//   in order, and workers waiting for a probe queue first-in first-out. A
//   slot given back before its time (a cancelled wait) goes to the next worker
//   to ask, in this process (the store has no way to take it back).
// - The floor (docs/RULES.md rule 10): the cooldowns and spent windows' ends this
//   process was told (record, block_until) are kept in its memory too, per
//   key, until they pass. A store that answers with less (a shared store
//   flushed, restarted empty, failed over; down) never lets a send go before
//   them: the acquire waits or is deferred until the floor, with its cause,
//   and the floor is written back to the store as a cooldown so that other
//   processes learn it again. A spent window's end is the latest instant its
//   resets prove (each less its rounding step), never past the earliest
//   reset stated: the floor never holds a key longer than the window lasts. A reserved slot is checked
//   against the floor when it is used, so an answer recorded between the
//   grant and the send that says the quota is spent holds it.
// Tracked remaining quota only goes down within a window: a response reporting
// more than already spent keeps the lower count (stale responses arrive late).
// Within a window the earliest reported reset is kept: servers round reset
// times up, so each answer's reset is at or after the true one and the earliest
// is the closest. A spent window's cooldown ends there too, not at the reset
// of the answer that spent it (a Retry-After still holds in full). The first
// answer of a window counts the sends still in flight that nothing counted
// (the workers that went before anything was known) as spent. A reset a whole
// window (or more) after the tracked one starts the next window; otherwise the
// next window begins when the tracked reset passes (the probe above).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>

#include "abide/backoff.h"
#include "abide/clock.h"
#include "abide/quota_store.h"
#include "abide/signals.h"

namespace abide {

// The key for an origin's quota ("https://api.example.com"), narrowed to a scope
// when the API has several (a policy name, a partition key, a vendor resource
// such as GitHub's "search"). Long keys are shortened with a hash, never cut.
std::string pacer_key(std::string_view origin, std::string_view scope = {});

// The scope one quota observation names: its policy name and partition key
// (empty when it has neither). Pass it to pacer_key() for per-policy keys.
std::string quota_scope(const QuotaObservation& observation);

// How an acquire ended.
enum class AcquireStatus : std::uint8_t {
  kPermit,            // send now
  kDeferred,          // permitted only after the maximum acceptable wait
  kDeadlineExceeded,  // permitted only after the deadline
  kCancelled,         // the stop token was triggered
  kUnavailable,       // the shared store is down and the pacer is fail-closed
};

// "permit", "deferred", "deadline_exceeded", "cancelled", "unavailable".
std::string_view to_string(AcquireStatus s) noexcept;

// How a try_acquire() ended. Pending answers (kReserved, kAskAgain) keep the
// ticket's place; the others are final and the ticket holds nothing.
enum class TryStatus : std::uint8_t {
  kPermit,    // send now
  kReserved,  // a slot at `at` is held for the ticket: ask again then and it is granted
  kAskAgain,  // a probe's answer (or the turn in line) is awaited: ask again at `at`,
              // or as soon as the ticket's notification fires
  kDeferred,  // as AcquireStatus
  kDeadlineExceeded,
  kUnavailable,
};

// "permit", "reserved", "ask_again", "deferred", "deadline_exceeded", "unavailable".
std::string_view to_string(TryStatus s) noexcept;

// The answer to try_acquire().
struct TryAcquireResult {
  TryStatus status = TryStatus::kPermit;
  // kPermit: this is the probe (record() its response or abandon_probe()).
  // kReserved: the slot held is the probe's.
  bool probe = false;
  // kPermit: now. kReserved, kAskAgain: when to ask again. Otherwise the
  // earliest time a send may be permitted, as far as known.
  MonoTime at{};
  // `at` on the wall clock, for deferred / deadline_exceeded / unavailable.
  std::optional<WallTime> not_before_wall;
  WaitCause cause = WaitCause::kNone;  // what holds the send until `at` (kPermit: what it waited for)
  std::optional<QuotaHeld> held;       // the announced quota behind a kQuota cause, when the store says

  bool ok() const noexcept { return status == TryStatus::kPermit; }
  bool pending() const noexcept { return status == TryStatus::kReserved || status == TryStatus::kAskAgain; }
};

// The answer to acquire().
struct AcquireResult {
  AcquireStatus status = AcquireStatus::kPermit;
  // A permit for the probe: record() its response, or abandon_probe() if there
  // will be none, so the other workers need not wait for the probe timeout.
  bool probe = false;
  // Permit: when it was granted. Otherwise the earliest time a send may be
  // permitted, as far as known (for kCancelled: when it was cancelled).
  MonoTime not_before{};
  // not_before on the wall clock, for deferred / deadline_exceeded / unavailable.
  std::optional<WallTime> not_before_wall;
  Duration waited{};  // time spent inside acquire
  // What held the send (deferred, deadline_exceeded, unavailable: what would
  // hold it until not_before; a permit: what it waited for, kNone if nothing).
  WaitCause cause = WaitCause::kNone;
  std::optional<QuotaHeld> held;  // the announced quota behind a kQuota cause, when the store says

  bool ok() const noexcept { return status == AcquireStatus::kPermit; }
};

// Pacer settings.
struct PacerConfig {
  PacingRules rules;
  // The longest wait acquire accepts; a longer one returns kDeferred with the
  // time, never a shorter wait.
  Duration max_wait = kMaxDuration;
  // Shared stores: how often a worker waiting for a probe's answer looks again
  // (the answer may come to another process).
  Duration shared_poll = std::chrono::milliseconds{50};
  // Shared stores: a reservation waited longer than this is checked against the
  // store before use (a cooldown may have started in another process).
  Duration revalidate_after = std::chrono::milliseconds{20};
  // The most keys the pacer holds handles for that nobody uses: past it, keys
  // that no Key or acquire holds are dropped, those whose floor has passed
  // first (their state stays in the store). Keys in use are never dropped, so
  // every caller of one name shares its line.
  std::size_t max_keys = 65536;
  // Low-confidence quota readings (the opt-in heuristic) start cooldowns too;
  // set it as PlannerConfig::use_low_confidence_quota so both wait alike.
  bool use_low_confidence_quota = false;
  // Injected time and randomness, as engine::Config and ClientConfig take
  // them (nullptr: the system clocks; a SplitMix64 sequence from `seed`). The
  // clocks must outlive the pacer; the random source must be thread-safe.
  // Random numbers in [0, 1) draw the cooldown spread.
  const MonotonicClock* mono = nullptr;
  const WallClock* wall = nullptr;
  std::shared_ptr<RandomSource> random;
  std::uint64_t seed = 0x9e3779b97f4a7c15ULL;
};

// What one send reserved of quotas other than requests (the costs its acquire
// was given), and what its answer says it used. Viewed, not owned.
struct SendCosts {
  std::span<const UnitCost> reserved;
  std::span<const UnitCost> used;
};

// The pacer. Thread-safe: any number of workers share one instance.
class Pacer {
 public:
  struct Local;  // per-key in-process state (waiter queue); defined in pacer.cpp
  struct Ops;    // the line, reservations and notifications, in pacer.cpp

  // A resolved key: cheap to copy, and acquiring through it skips the lookup.
  class Key {
   public:
    Key() = default;
    const std::string& name() const noexcept;
    bool valid() const noexcept { return local_ != nullptr; }

   private:
    friend class Pacer;
    explicit Key(std::shared_ptr<Local> l) : local_(std::move(l)) {}
    std::shared_ptr<Local> local_;
  };

  // One caller's place in a key's line across the try_acquire() calls of one
  // send: its arrival order, and the slot reserved for it. release() (or the
  // destructor) gives back what it holds: a reserved slot goes to the next in
  // line, a probe is abandoned. One caller uses a ticket at a time.
  class Ticket {
   public:
    Ticket() = default;
    ~Ticket();
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&& other) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

    // Called, on whichever thread records, when asking again may give a new
    // answer to a kAskAgain: the probe was answered or abandoned, or it is
    // this ticket's turn. Keep it short and thread-safe (wake an event loop).
    // It may fire spuriously (asking early is safe), never once the ticket's
    // destructor or a later set_notify() has returned. A notification since
    // the last try_acquire() fires it at once.
    void set_notify(std::function<void()> notify);
    // Gives back the reserved slot and the place in line (the caller gave up:
    // cancelled, or past its deadline). The ticket can be used again.
    void release();
    // A slot is reserved or a place in line is held.
    bool held() const;

   private:
    friend class Pacer;
    friend struct Pacer::Local;
    friend struct Pacer::Ops;
    struct State;
    Pacer* pacer_ = nullptr;
    std::shared_ptr<Local> local_;
    std::shared_ptr<State> state_;
    std::shared_ptr<const std::function<void()>> notify_;
  };

  // store: nullptr for a new MemoryStore. Clocks and randomness come from
  // config (nullptr there: the system clocks).
  explicit Pacer(PacerConfig config = {}, std::shared_ptr<QuotaStore> store = nullptr);
  // The same with the clocks given here, over config's (they must outlive the pacer).
  Pacer(PacerConfig config, std::shared_ptr<QuotaStore> store, const MonotonicClock& mono, const WallClock& wall);
  ~Pacer();
  Pacer(const Pacer&) = delete;
  Pacer& operator=(const Pacer&) = delete;

  // The handle for a key name (see pacer_key()).
  Key key(std::string_view name);

  // Waits until a request on `key` may be sent, or says why not. deadline:
  // the latest acceptable send time (none: only max_wait bounds the wait).
  // costs: what the send needs of quotas other than requests (tokens,
  // bytes); each such quota grants it only with room for that amount.
  AcquireResult acquire(const Key& key, std::optional<MonoTime> deadline = std::nullopt, std::stop_token stop = {},
                        std::span<const UnitCost> costs = {});
  AcquireResult acquire(std::string_view key, std::optional<MonoTime> deadline = std::nullopt,
                        std::stop_token stop = {}, std::span<const UnitCost> costs = {});

  // The same rules, never sleeping or blocking: a permit now, a slot held for
  // `ticket` until its time (ask again then), or "ask again at `at`, or when
  // notified" while a probe's answer is awaited; or the final answers acquire
  // gives. max_wait and `deadline` count from the ticket's first call. Asking
  // early is always safe. A permit or a final answer leaves the ticket empty.
  // `costs` as for acquire, read at the ticket's first call.
  [[nodiscard]] TryAcquireResult try_acquire(Ticket& ticket, const Key& key,
                                             std::optional<MonoTime> deadline = std::nullopt,
                                             std::span<const UnitCost> costs = {});

  // A cooldown on `key` until `until` on the wall clock, as a Retry-After date
  // would set it (a resumed run carries what the server permitted): nothing is
  // sent before it, then the probe rule applies. It answers no probe. A time
  // in the past changes nothing. True when the cooldown started or grew.
  bool block_until(const Key& key, WallTime until);
  bool block_until(std::string_view key, WallTime until);

  // Feeds what a response on `key` said: its Retry-After, its quota
  // observations (in every unit), whether it was limited (a key whose server
  // announces no quota learns one from its limited answers), and, for any
  // response, the answer a probe waits for. `costs`: what the send reserved
  // at its acquire and what its answer used (its usage), so the window keeps
  // the truth; a quota's `cost` (the draft's `c`) counts as used too.
  void record(const Key& key, const Signals& signals, SendCosts costs = {});
  void record(std::string_view key, const Signals& signals, SendCosts costs = {});

  // What an answer's body said its send used (an LLM API's usage, at the end
  // of its body or stream), after its head was recorded: the window that
  // counted the send gives back what was not used, or takes the overrun.
  // `received`: when the answer's head was received.
  void settle(const Key& key, MonoTime received, SendCosts costs);

  // What `key` learned from its limited answers ("about 20 per 2 s, from 3
  // windows"), while its server announces no quota; nullopt otherwise.
  std::optional<LearnedPolicy> learned(const Key& key);

  // The probe permit on `key` will get no response: let the next worker probe.
  void abandon_probe(const Key& key);

  // The end of what this process was told holds every send on `key` (a
  // cooldown, a spent window; the floor above), when it lies ahead; else
  // nullopt. A transport that sends a permitted attempt later (an event loop
  // waiting for a connection) asks it just before sending: a wait heard
  // since the permit holds the attempt back (engine::Machine::withdraw).
  [[nodiscard]] std::optional<MonoTime> held_until(const Key& key) const;

  const PacerConfig& config() const noexcept { return config_; }
  QuotaStore& store() noexcept { return *store_; }

 private:
  friend struct Ops;
  AcquireResult finish(AcquireStatus status, MonoTime start, MonoTime not_before, bool probe,
                       WaitCause cause = WaitCause::kNone) const;
  double next_random();
  void sweep_keys_locked();  // drops keys nobody holds whose floor has passed; caller holds Keys::mu

  PacerConfig config_;
  std::shared_ptr<QuotaStore> store_;
  const MonotonicClock& mono_;
  const WallClock& wall_;
  std::atomic<std::uint64_t> random_state_;
  std::atomic<std::uint64_t> next_ticket_{1};
  struct Keys;
  std::unique_ptr<Keys> keys_;
};

}  // namespace abide
