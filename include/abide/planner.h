// abide/planner.h: one retry decision from everything a response says
// (docs/RULES.md rules 1 to 8).
//
// Given what the request was (method, idempotency key), which attempt this is,
// how much time the task has left, and the outcome (a response's Signals, or a
// transport error), decide: retry after exactly how long, or stop and say when a
// retry would be permitted and why.
//
//   wait = max(server hint, local backoff floor) + jitter      (rule 4)
//
// where the server hint is the longest of a valid Retry-After and the reset of
// every exhausted quota (rules 1 and 8; a quota with room left never shortens
// it), computed by permitted_wait() (signals.h) exactly as the pacer computes
// its cooldown; the local backoff is capped (the cap never applies to a server
// hint), and jitter is never negative. A retry never ends after the deadline
// (rule 5); POST and PATCH are not repeated without an idempotency key (rule 7).
// The server's own verdict: "do not retry" (Signals::should_retry false) ends
// the retries on any status, with the permitted time still reported; "retry"
// grants nothing: rule 7 and the retryable statuses still decide.
//
// decide() allocates nothing and never throws; describe() and notes_text() turn a
// Plan into words for people.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abide/backoff.h"
#include "abide/clock.h"
#include "abide/signals.h"

namespace abide {

// What to do next.
enum class Decision : std::uint8_t {
  kRetry,             // retry after `wait`
  kDeferred,          // the server's hint is longer than the acceptable wait: come back at not_before
  kDeadlineExceeded,  // the earliest permitted retry is after the task's deadline
  kNotRetryable,      // the outcome must not be repeated automatically (status, idempotency)
  kExhausted,         // no attempts (or retry budget) left
  kDone,              // a final response that is not a failure (2xx; 1xx/3xx)
};

// Which signal set the wait.
enum class Basis : std::uint8_t {
  kNone,        // no wait was computed (done without any hint, status not retryable)
  kRetryAfter,  // the server's Retry-After (or retry-after-ms, ...)
  kRateLimit,   // an exhausted IETF RateLimit quota's reset
  kVendor,      // an exhausted vendor quota's reset, read through the vendor's profile
  kBackoff,     // the local exponential backoff (no server hint, or a shorter one)
};

// Why, in one word; describe() makes the sentence.
enum class Reason : std::uint8_t {
  kSucceeded,           // 2xx
  kNotAFailure,         // 1xx or 3xx: nothing to retry
  kRetry,               // retry after the wait
  kStatusNotRetryable,  // a status outside the retryable set (404, 501, ...)
  kNotIdempotent,       // POST/PATCH (or declared non-idempotent) without an idempotency key
  kAmbiguous,           // transport error after a non-idempotent request was sent
  kAttemptsExhausted,   // this was the last attempt
  kBudgetExhausted,     // the client's retry budget is empty
  kHintTooLong,         // the server's hint exceeds the maximum acceptable wait
  kDeadline,            // the earliest permitted retry ends after the deadline
  kServerSaysNoRetry,   // the server's own verdict (Stripe-Should-Retry: false, x-should-retry: false)
};

// Things the planner noticed and a person should know about (the planner's
// warnings; the Signals' own warnings are separate).
enum class PlanNote : std::uint8_t {
  kRetryAfterMalformed,        // Retry-After rejected: the local backoff applies, never zero
  kRetryAfterInPast,           // a Retry-After date in the past: zero hint, backoff applies
  kSkewLengthened,             // the server's Date is behind ours: the hint counts from it (rule 3)
  kQuotaOutlastsRetryAfter,    // an exhausted quota resets after the Retry-After: the later wins
  kQuotaRoomIgnored,           // a quota with room left does not shorten the Retry-After
  kQuotaZeroWithoutReset,      // a quota at zero without a reset cannot bound the wait
  kLowConfidenceQuotaIgnored,  // a heuristic (low-confidence) quota reading was not used
  kJitterShortened,            // jitter cut so that the retry ends by the deadline
  kFullRefillReset,            // an exhausted quota's reset counts to a full refill: not waited for in full
  kServerSaysRetry,            // the server says "retry": it grants no permission (rule 7), nor a status
  kRefusedUnprocessed,         // the vendor documents its limited answer as a refusal: a POST may repeat (rule 7)
};

// A small set of PlanNote values.
class PlanNotes {
 public:
  constexpr bool empty() const noexcept { return bits_ == 0; }
  constexpr bool has(PlanNote n) const noexcept { return (bits_ & bit(n)) != 0; }
  constexpr void add(PlanNote n) noexcept { bits_ = static_cast<std::uint16_t>(bits_ | bit(n)); }
  constexpr std::uint16_t bits() const noexcept { return bits_; }

 private:
  static constexpr std::uint16_t bit(PlanNote n) noexcept {
    return static_cast<std::uint16_t>(1u << static_cast<unsigned>(n));
  }
  std::uint16_t bits_ = 0;
};

// "retry", "deferred", "deadline_exceeded", "not_retryable", "exhausted", "done".
std::string_view to_string(Decision d) noexcept;
// "retry-after", "ratelimit", "vendor", "backoff"; "" for kNone.
std::string_view to_string(Basis b) noexcept;
// A short phrase, e.g. "status not retryable".
std::string_view to_string(Reason r) noexcept;
// A sentence describing the note, e.g. "Retry-After was malformed and ignored; ...".
std::string_view to_string(PlanNote n) noexcept;

// A set of HTTP status codes (100..999).
class StatusSet {
 public:
  constexpr StatusSet() = default;
  constexpr StatusSet(std::initializer_list<int> codes) noexcept {
    for (int c : codes) add(c);
  }
  constexpr bool contains(int code) const noexcept {
    return code >= 0 && code < kSize && (words_[index(code)] & mask(code)) != 0;
  }
  constexpr void add(int code) noexcept {
    if (code >= 0 && code < kSize) words_[index(code)] |= mask(code);
  }
  constexpr void remove(int code) noexcept {
    if (code >= 0 && code < kSize) words_[index(code)] &= ~mask(code);
  }

 private:
  static constexpr int kSize = 1024;
  static constexpr std::size_t index(int code) noexcept { return static_cast<std::size_t>(code) / 64; }
  static constexpr std::uint64_t mask(int code) noexcept {
    return std::uint64_t{1} << (static_cast<unsigned>(code) % 64);
  }
  std::array<std::uint64_t, kSize / 64> words_{};
};

// How the planner decides.
struct PlannerConfig {
  // Statuses worth retrying. A response whose Signals say `limited` (GitHub's
  // 403 with its quota at zero, per its profile) is retryable too.
  StatusSet retryable_statuses{408, 429, 500, 502, 503, 504};
  // The local backoff: 1 s doubling up to 60 s, equal jitter. Equal rather than
  // full jitter by default so that the local backoff keeps a floor (half the
  // exponential backoff): full jitter may draw a wait close to zero, which after
  // a 429 with a malformed Retry-After would be "retry now" in all but name.
  BackoffPolicy backoff{std::chrono::seconds{1}, std::chrono::seconds{60}, Jitter::kEqual};
  // The longest server hint worth waiting for here; a longer one gives kDeferred.
  Duration max_wait = kMaxDuration;
  // Methods that are not repeated without an idempotency key (ASCII case-insensitive).
  std::vector<std::string> non_idempotent_methods{"POST", "PATCH"};
  // Shared by all requests of one client; nullptr: no budget. decide() spends a
  // token on every kRetry and earns on responses that show a healthy server.
  std::shared_ptr<RetryBudget> budget;
  // Use quota readings of low confidence (the opt-in heuristic for vendor-style
  // headers without a profile) to bound the wait. Off: they are only reported.
  bool use_low_confidence_quota = false;
};

// A transport-level failure (no response).
struct TransportError {
  bool sent = false;   // the request had (at least partly) been sent when it failed
  WallTime at_wall{};  // when it failed
  MonoTime at_mono{};
};

// The outcome of one attempt: a response (its Signals) or a transport error.
struct Outcome {
  Outcome(const Signals& s) noexcept : signals(&s) {}          // NOLINT: implicit by design
  Outcome(const Signals&& s) = delete;  // a temporary would dangle: keep the Signals in a variable
  Outcome(const TransportError& e) noexcept : transport(e) {}  // NOLINT: implicit by design
  const Signals* signals = nullptr;                            // the response; must outlive decide()
  TransportError transport;                                    // used when signals is nullptr
};

// Everything decide() needs about one attempt.
struct PlanInput {
  PlanInput(Outcome o) noexcept : outcome(o) {}  // NOLINT: implicit by design

  Outcome outcome;
  std::string_view method = "GET";
  bool idempotency_key = false;          // the request carried an Idempotency-Key
  bool declared_non_idempotent = false;  // the caller says this request must not repeat
  std::int64_t attempt = 1;              // attempts made, this one included (>= 1)
  std::int64_t max_attempts = 5;         // values below 1 count as 1
  std::optional<MonoTime> deadline;      // the task's deadline
  // The deadline is a budget for waiting (the longest acceptable wait, as a
  // proxy's caller states it), not the task's: a retry after it is deferred.
  bool deadline_is_wait_budget = false;
  // The backoff drawn after the previous attempt (decorrelated jitter grows from it).
  std::optional<Duration> previous_backoff;
};

// The decision and everything that led to it. Durations count from receipt of
// the response (or from the transport error).
struct Plan {
  Decision decision = Decision::kDone;
  Reason reason = Reason::kSucceeded;
  Basis basis = Basis::kNone;
  int status = 0;  // the response's status; 0 for a transport error

  // kRetry: how long to wait before retrying (server hint or backoff, plus jitter).
  // Other decisions: until the earliest permitted retry (no jitter), when known.
  Duration wait{};
  // receipt + wait, on both clocks, whenever a permitted time is known.
  std::optional<WallTime> not_before_wall;
  std::optional<MonoTime> not_before_mono;

  std::optional<Duration> server_hint;     // the longest valid server hint
  std::optional<Duration> retry_after;     // Retry-After's part of it
  std::optional<Duration> quota_wait;      // the longest wait among exhausted quotas used (see permitted_wait)
  std::optional<std::size_t> quota_index;  // which Signals::quota entry gave quota_wait

  Duration backoff{};                  // the local backoff's floor (see BackoffDraw), 0 if unused
  Duration nominal_backoff{};          // the capped exponential backoff of this attempt
  Duration jitter{};                   // >= 0; only on kRetry
  std::optional<Duration> clock_skew;  // server Date - local receive time
  std::optional<Duration> time_left;   // deadline - receipt (may be negative), if a deadline

  bool ambiguous = false;  // the request may or may not have been applied: reconcile first
  PlanNotes notes;
};

// The retry planner. Cheap to copy; decide() is const and thread-safe (the
// budget is atomic; give each thread its own RandomSource, or a SeededRandom).
class Planner {
 public:
  Planner() = default;
  explicit Planner(PlannerConfig config) : config_(std::move(config)) {}

  const PlannerConfig& config() const noexcept { return config_; }

  // The decision for one attempt. Draws one random number for the jitter.
  Plan decide(const PlanInput& input, RandomSource& rng) const noexcept;

  // One sentence for a person, with the numbers, e.g. "Retry in 30 s: the
  // server's Retry-After asks for 30 s (local backoff 2 s)."
  std::string describe(const Plan& plan, const PlanInput& input) const;

  // describe()'s sentence when it is a constant text: a 2xx success without a
  // server hint ("The request succeeded (status 200); nothing to retry."),
  // the sentence of most attempts. Static storage with a NUL after it, so a
  // caller keeps it without a copy; empty when the sentence must be made.
  static std::string_view constant_sentence(const Plan& plan) noexcept;

  // True when the method may be repeated without an idempotency key.
  bool idempotent(std::string_view method) const noexcept;

 private:
  PlannerConfig config_;
};

// The sentences of the plan's notes, in PlanNote order.
std::vector<std::string> notes_text(const PlanNotes& notes);

}  // namespace abide
