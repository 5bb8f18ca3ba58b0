// abide/quota_store.h: where the pacer keeps per-key quota state (docs/RULES.md
// rule 9), and the in-process store that is the default.
//
// The interface is shaped so that one acquire is one atomic operation on one
// key's state: the store decides, reserves and answers in a single step. For
// the in-process store that is one short critical section; for Redis it is one
// script call, so one round trip per acquire.
//
// Every operation takes the caller's monotonic `now` and the pacing rules, so a
// store holds no configuration of its own and stays a plain state machine. The
// rules the state machine enforces are described in abide/pacer.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abide/clock.h"
#include "abide/quota.h"

namespace abide {

// How a known remaining quota is spent within its window.
enum class Pacing : std::uint8_t {
  kSmooth,  // space sends so the remaining quota lasts until the reset (the default)
  kBurst,   // send while quota remains, then wait for the reset
};

// The pacing rules, carried by every store operation.
struct PacingRules {
  Pacing pacing = Pacing::kSmooth;
  // Smooth and policy-only (GCRA) spacing is stretched by (1 + margin), so a
  // worker that wakes a little late cannot push a window over its quota.
  // Clamped to [0, 1].
  double safety_margin = 0.05;
  // A probe that gets no answer (no record) blocks the others at most this long;
  // after it the next acquire becomes the probe.
  Duration probe_timeout = std::chrono::seconds{10};
  // After a cooldown, one probe goes first (true) or everyone is released at its
  // end with the spread below (false).
  bool probe_after_cooldown = true;
  // When workers are released together (a cooldown ended, a probe answered),
  // consecutive slots are spaced by a step drawn in [spread/4, spread], so they
  // do not all start in the same millisecond. Zero disables the spread.
  Duration cooldown_spread = std::chrono::milliseconds{20};
  // How long after a release the spread applies.
  Duration spread_period = std::chrono::seconds{1};
};

// One acquire, as the store sees it.
struct StoreAcquire {
  MonoTime now{};       // the caller's monotonic now
  Duration max_wait{};  // reserve a slot only if it starts within this (negative: only report)
  // What the request needs of each quota that does not count requests
  // (tokens, bytes): a policy of that unit grants the slot only when its
  // window has room for the amount, and then reserves it, all or nothing.
  // A unit not listed costs nothing; every request quota takes one unit.
  // Viewed, not owned: it must outlive the call.
  std::span<const UnitCost> costs{};
};

// What holds a key's next send back: the reason behind a wait, a reserved
// slot or a refusal, so that what is said names the real cause.
enum class WaitCause : std::uint8_t {
  kNone,      // nothing: the send may go now
  kCooldown,  // a cooldown on the key (a server's Retry-After, or an exhausted quota's reset)
  kQuota,     // an announced quota: its spacing, or its window's end
  kQueue,     // the slots before it are held by requests ahead of it on the key
  kProbe,     // another request's answer (the probe) is awaited, to learn the quota afresh
  kStore,     // the shared store cannot answer (fail-closed)
  kUnknown,   // the store does not say (a shared store's state)
};

// A few words for the cause ("a cooldown the server asked for", ...).
std::string_view describe(WaitCause cause) noexcept;

// The announced quota whose count set a wait (WaitCause::kQuota): its unit
// ("" for requests), what was left of it in its window (-1: no window is
// counted, the wait is its spacing), its limit (0: unknown) and what the send
// needs of it.
struct QuotaHeld {
  std::string unit;
  std::int64_t remaining = -1;
  std::int64_t limit = 0;
  std::int64_t need = 0;

  friend bool operator==(const QuotaHeld&, const QuotaHeld&) = default;
};

// For people: "tokens: 1,850 of 40,000 left, 4,100 needed" (digits grouped;
// "requests" for the unit ""; the parts not known are left out). The unit
// is printable ASCII as the kernel keeps it.
std::string describe(const QuotaHeld& held);

// A store's answer to one acquire.
struct StoreGrant {
  enum class Kind : std::uint8_t {
    kGranted,      // a slot is reserved `wait` from now (zero: send now)
    kProbe,        // as kGranted, and this request is the probe the others wait for
    kAwaitProbe,   // a probe is out: ask again when it is answered, at the latest after `wait`
    kTooLate,      // the earliest slot is `wait` from now, beyond max_wait; nothing reserved
    kUnavailable,  // the store cannot answer (fail-closed); ask again after `wait`
  };
  Kind kind = Kind::kGranted;
  // Counts from the request's `now`. The pacer counts a shared store's wait
  // from when the answer came back instead, since that store's clock is its own.
  Duration wait{};
  // The key's blocking generation when the slot was reserved; a cooldown that
  // starts later changes it and invalidates the reservation (still_valid()).
  std::uint64_t epoch = 0;
  WaitCause cause = WaitCause::kUnknown;  // what set `wait` (kNone when it is zero)
  // kQuota set by an announced policy: which, and its counts (a learned quota
  // or a shared store that does not say: none).
  std::optional<QuotaHeld> held{};
};

// One quota policy of a response, with times relative to the record's `now`.
struct PolicyUpdate {
  std::string id;                         // policy name and partition (bounded length)
  std::optional<std::int64_t> limit;      // quota units per window (> 0 to count)
  std::optional<Duration> window;         // the policy's window (> 0 to count)
  std::optional<std::int64_t> remaining;  // units left (negative counts as zero)
  std::optional<Duration> reset;          // from now until the quota resets (>= 0)
  // The step the server stated `reset` in (1 s for whole seconds; zero: exact).
  // The window ends within the step before `reset`: smooth pacing spends the
  // quota by the earliest instant it can end.
  Duration reset_resolution{};
  std::string unit;  // what the quota counts; "" or "requests": requests
};

// One response, as the store sees it.
struct StoreRecord {
  MonoTime now{};                                   // the caller's monotonic now
  Duration age{};                                   // how long ago the response was received (>= 0)
  std::optional<Duration> cooldown;                 // nothing may be sent before now + cooldown
  WaitCause cooldown_cause = WaitCause::kCooldown;  // kQuota when an exhausted quota's reset set it
  // kQuota: the store ends the cooldown where the spent window ends (the
  // earliest reset its answers gave), never before now + cooldown_floor (what
  // a Retry-After, or a quota the store does not count, asks for).
  Duration cooldown_floor{};
  std::vector<PolicyUpdate> policies;  // at most kMaxPolicies are kept per key
  double spread_seed = 0.0;            // in [0, 1), from the pacer's random source
  // The answer was limited (429, 503), with or without a cooldown. While the
  // key has no announced quota, limited answers teach the store a policy of
  // its own (LearnedPolicyBounds); false, the default, teaches nothing.
  bool limited = false;
  // What this answer's request reserved at its acquire (StoreAcquire::costs),
  // and what the answer says it used (its usage, or the draft's `c`). A
  // window that counted the reservation gives back what was not used, or
  // takes what was used beyond it; a unit not in `used` is kept as reserved.
  std::vector<UnitCost> reserved;
  std::vector<UnitCost> used;
};

// A key whose server announces no quota learns one from its limited answers:
// "about n per window", n the answers accepted since the last window boundary
// and the boundary where a Retry-After ends (bare 429s: where a probe is first
// accepted again). The store then enforces it like an announced window (smooth
// or burst, a probe first in each window). It only ever restrains: every
// cooldown and announced policy still binds, and an announced quota replaces
// it. A limited answer in a learned window lowers n at once; every
// kRaiseAfter quiet windows n grows by n/16 (at least one). Both stores keep
// to these bounds (the Redis script takes them from here).
struct LearnedPolicyBounds {
  static constexpr std::int64_t kMaxCount = 1'000'000'000;              // n, and every count kept
  static constexpr Duration kMinWindow = std::chrono::milliseconds{1};  // a learned window, and a hold
  static constexpr Duration kMaxWindow = std::chrono::hours{24};
  static constexpr Duration kFirstHold = std::chrono::milliseconds{250};  // bare 429s: before the first probe
  static constexpr Duration kMaxHold = std::chrono::seconds{60};          // the longest hold
  static constexpr std::int64_t kHoldGrowth = 2;   // each limited probe lengthens the hold by 1/kHoldGrowth
  static constexpr std::int64_t kRaiseAfter = 8;   // quiet windows before n grows
  static constexpr std::int64_t kBareShrink = 16;  // bare 429s: a quiet window shortens the learned one by 1/16
  // Retry-After is stated in whole seconds: a boundary may be up to this late.
  static constexpr Duration kStatedStep = std::chrono::seconds{1};
};

// What a key learned from its limited answers, for people (QuotaStore::learned).
struct LearnedPolicy {
  std::int64_t count = 0;        // about this many sends per window
  Duration window{};             // the window's length; zero while bare 429s' first search has found none
  bool window_measured = false;  // false: a guess (from one cooldown or one search), until two boundaries were seen
  std::int64_t windows = 0;      // windows it was learned from
  bool from_retry_after = true;  // false: from bare 429s (no Retry-After)
};

// What an answer's body said its send used, once the head was recorded (an
// LLM API's usage arrives at the end of its body, or of its stream).
struct StoreSettle {
  MonoTime now{};  // the caller's monotonic now
  Duration age{};  // how long ago the answer's head was received (>= 0)
  std::vector<UnitCost> reserved;  // what the send reserved at its acquire
  std::vector<UnitCost> used;      // what the answer says it used
};

// What a record changed.
struct RecordOutcome {
  bool blocked = false;   // a cooldown started or grew: reservations made before are void
  bool released = false;  // an outstanding probe was answered: waiters may go on
};

// Per-key quota state behind the pacer. Implementations are thread-safe.
class QuotaStore {
 public:
  // The most policies a key keeps (the most restrictive wins among them).
  static constexpr std::size_t kMaxPolicies = 8;

  // One key's state in its store: the operations the pacer needs, each one
  // atomic. A handle keeps what it needs of its store alive, so it may
  // outlive the store object.
  class Handle {
   public:
    virtual ~Handle() = default;
    // Decides, and reserves when granted, in one atomic operation.
    virtual StoreGrant acquire(const StoreAcquire& request, const PacingRules& rules) = 0;
    // Applies what one response said, in one atomic operation.
    virtual RecordOutcome record(const StoreRecord& record, const PacingRules& rules) = 0;
    // True when no cooldown has started on the key since `epoch` was handed
    // out; false too when the store cannot tell.
    virtual bool still_valid(std::uint64_t epoch, MonoTime now) = 0;
    // Forgets the outstanding probe (it will get no answer): the next acquire probes.
    virtual void abandon_probe(MonoTime now) = 0;
    // Settles a send's reservation with what its answer used, in each window
    // that counted it and is still counting: the unused part comes back, an
    // overrun is taken. A store that does not (the default) keeps the
    // reservation, which only ever restrains.
    virtual void settle(const StoreSettle& settle, const PacingRules& rules) {
      (void)settle;
      (void)rules;
    }
    // What the key learned from its limited answers, while its server
    // announces no quota; nullopt otherwise.
    virtual std::optional<LearnedPolicy> learned(MonoTime now) = 0;
  };

  virtual ~QuotaStore() = default;

  // The handle for a key (created empty when new). Never null.
  virtual std::shared_ptr<Handle> open(std::string_view key) = 0;
  // True when other processes share the state: a record there cannot wake
  // waiters here, so the pacer polls while it waits for a probe's answer.
  virtual bool shared() const noexcept { return false; }
  // Until end_batch(), the calling thread's operations may share one atomic
  // step of the store (the file store: one transaction instead of one each),
  // which other processes wait for: an event loop brackets one turn with
  // them, never a wait on another thread. Calls nest in pairs.
  // The default does nothing.
  virtual void begin_batch() {}
  virtual void end_batch() {}
};

// Bounds for MemoryStore.
struct MemoryStoreOptions {
  // The most keys held. Expired keys are dropped first; when every key is live,
  // further keys share one overflow state (more conservative, never unbounded).
  std::size_t max_keys = 65536;
};

// The in-process store: the default. State lives in memory, one lock per key.
class MemoryStore final : public QuotaStore {
 public:
  explicit MemoryStore(MemoryStoreOptions options = {});
  ~MemoryStore() override;
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  std::shared_ptr<Handle> open(std::string_view key) override;

  // Keys held right now (for tests and bounds).
  std::size_t size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace abide
