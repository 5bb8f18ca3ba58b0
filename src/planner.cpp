#include "abide/planner.h"

#include <algorithm>
#include <charconv>

#include "ascii.h"
#include "duration_text.h"
#include "planner_internal.h"

namespace abide {

namespace {

using namespace std::string_view_literals;

constexpr Duration kZero = Duration::zero();

Duration non_negative(Duration d) noexcept { return d < kZero ? kZero : d; }

// Fills the server-hint part of the plan from the Signals: the permitted time
// is computed once, in permitted_wait() (signals.h), which the pacer uses too.
void read_hints(const Signals& s, bool use_low_confidence, Plan& p) noexcept {
  const PermittedWait w = permitted_wait(s, use_low_confidence);
  p.retry_after = w.retry_after;
  p.quota_wait = w.quota;
  p.quota_index = w.quota_index;
  p.server_hint = w.wait;
  if (!s.retry_after && s.retry_after_rejected) p.notes.add(PlanNote::kRetryAfterMalformed);
  if (w.retry_after_in_past) p.notes.add(PlanNote::kRetryAfterInPast);
  if (w.skew_lengthened) p.notes.add(PlanNote::kSkewLengthened);
  if (w.zero_without_reset) p.notes.add(PlanNote::kQuotaZeroWithoutReset);
  if (w.room_left && w.retry_after) p.notes.add(PlanNote::kQuotaRoomIgnored);
  if (w.low_confidence_ignored) p.notes.add(PlanNote::kLowConfidenceQuotaIgnored);
  if (w.full_refill) p.notes.add(PlanNote::kFullRefillReset);
  if (w.retry_after && w.quota && *w.quota > *w.retry_after) p.notes.add(PlanNote::kQuotaOutlastsRetryAfter);
  if (w.wait) {
    // Retry-After wins ties (it is the most trusted).
    p.basis = w.retry_after && *w.retry_after >= w.quota.value_or(kZero) ? Basis::kRetryAfter
                                                                         : quota_basis(s.quota[*w.quota_index]);
  }
}

// Sets wait and the permitted time on both clocks.
void set_wait(Plan& p, Duration wait, WallTime wall, MonoTime mono) noexcept {
  p.wait = wait;
  p.not_before_wall = saturating_add(wall, wait);
  p.not_before_mono = saturating_add(mono, wait);
}

}  // namespace

std::string_view to_string(Decision d) noexcept {
  switch (d) {
    case Decision::kRetry: return "retry";
    case Decision::kDeferred: return "deferred";
    case Decision::kDeadlineExceeded: return "deadline_exceeded";
    case Decision::kNotRetryable: return "not_retryable";
    case Decision::kExhausted: return "exhausted";
    case Decision::kDone: return "done";
  }
  return "done";
}

std::string_view to_string(Basis b) noexcept {
  switch (b) {
    case Basis::kNone: return "";
    case Basis::kRetryAfter: return "retry-after";
    case Basis::kRateLimit: return "ratelimit";
    case Basis::kVendor: return "vendor";
    case Basis::kBackoff: return "backoff";
  }
  return "";
}

std::string_view to_string(Reason r) noexcept {
  switch (r) {
    case Reason::kSucceeded: return "succeeded";
    case Reason::kNotAFailure: return "not a failure";
    case Reason::kRetry: return "retry";
    case Reason::kStatusNotRetryable: return "status not retryable";
    case Reason::kNotIdempotent: return "not idempotent";
    case Reason::kAmbiguous: return "ambiguous";
    case Reason::kAttemptsExhausted: return "attempts exhausted";
    case Reason::kBudgetExhausted: return "retry budget exhausted";
    case Reason::kHintTooLong: return "hint too long";
    case Reason::kDeadline: return "deadline";
    case Reason::kServerSaysNoRetry: return "the server says not to retry";
  }
  return "";
}

std::string_view to_string(PlanNote n) noexcept {
  switch (n) {
    case PlanNote::kRetryAfterMalformed:
      return "Retry-After was malformed and ignored; the local backoff applies instead (never zero)";
    case PlanNote::kRetryAfterInPast:
      return "the Retry-After date is in the past: the server hint is zero and the local backoff still applies";
    case PlanNote::kSkewLengthened:
      return "the server's Date is behind the local clock: the Retry-After date counts from the server's Date, "
             "so the skew cannot make the retry early";
    case PlanNote::kQuotaOutlastsRetryAfter:
      return "an exhausted quota resets after the Retry-After: the later time applies";
    case PlanNote::kQuotaRoomIgnored: return "a quota with room left does not shorten the server's Retry-After";
    case PlanNote::kQuotaZeroWithoutReset: return "a quota at zero carries no reset time, so it cannot bound the wait";
    case PlanNote::kLowConfidenceQuotaIgnored:
      return "a low-confidence quota reading (vendor-style headers without a profile) was not used";
    case PlanNote::kJitterShortened: return "the jitter was shortened so that the retry ends by the deadline";
    case PlanNote::kFullRefillReset:
      return "an exhausted quota's reset counts to a full refill, not to the next permitted request: the server's "
             "retry delay sets the wait, or without one the time the next request's units take to refill";
    case PlanNote::kServerSaysRetry:
      return "the server says the request may be retried; that grants no permission to repeat a non-idempotent "
             "request without an idempotency key, and does not make the status retryable";
    case PlanNote::kRefusedUnprocessed:
      return "the API documents its limited answer as a request refused without processing: it may be sent again "
             "without an idempotency key";
  }
  return "";
}

std::vector<std::string> notes_text(const PlanNotes& notes) {
  std::vector<std::string> out;
  for (PlanNote n : {PlanNote::kRetryAfterMalformed, PlanNote::kRetryAfterInPast, PlanNote::kSkewLengthened,
                     PlanNote::kQuotaOutlastsRetryAfter, PlanNote::kQuotaRoomIgnored, PlanNote::kQuotaZeroWithoutReset,
                     PlanNote::kLowConfidenceQuotaIgnored, PlanNote::kJitterShortened, PlanNote::kFullRefillReset,
                     PlanNote::kServerSaysRetry, PlanNote::kRefusedUnprocessed}) {
    if (notes.has(n)) out.emplace_back(to_string(n));
  }
  return out;
}

Basis quota_basis(const QuotaObservation& q) noexcept {
  return is_ietf_draft(q.source) ? Basis::kRateLimit : Basis::kVendor;
}

bool Planner::idempotent(std::string_view method) const noexcept {
  for (const std::string& m : config_.non_idempotent_methods) {
    if (ascii::iequals(m, method)) return false;
  }
  return true;
}

namespace {

// The answer's part of the plan: its status, skew and hints.
void read_answer(const Signals& s, bool use_low_confidence, Plan& p) noexcept {
  p.status = s.status;
  p.clock_skew = s.clock_skew;
  read_hints(s, use_low_confidence, p);
  if (s.should_retry == true) p.notes.add(PlanNote::kServerSaysRetry);
}

// A final answer: 2xx is done, 1xx/3xx are not failures, the rest are
// not retryable. Any server hint still tells when the next request may go.
void decide_final(const Signals& s, WallTime wall, MonoTime mono, Plan& p) noexcept {
  if (s.status >= 200 && s.status < 300) {
    p.decision = Decision::kDone;
    p.reason = Reason::kSucceeded;
  } else if (s.status >= 100 && s.status < 400) {
    p.decision = Decision::kDone;
    p.reason = Reason::kNotAFailure;
  } else {
    p.decision = Decision::kNotRetryable;
    p.reason = Reason::kStatusNotRetryable;
  }
  if (p.server_hint) {
    set_wait(p, *p.server_hint, wall, mono);
    if (p.decision == Decision::kDone) p.wait = kZero;  // nothing to wait for: the request is done
  }
}

// Whether the request may be sent again: an idempotent one, one with an
// idempotency key, one refused unprocessed, or one that never left.
bool may_repeat(const PlanInput& in, bool idempotent_request, Plan& p) noexcept {
  const Signals* s = in.outcome.signals;
  bool may = idempotent_request || in.idempotency_key;
  if (s != nullptr && s->unprocessed && !may) {
    may = true;  // refused unprocessed, as the vendor documents (rule 7)
    p.notes.add(PlanNote::kRefusedUnprocessed);
  }
  if (s == nullptr) {
    // A connection that failed before sending can be repeated whatever the
    // method; after sending, a non-idempotent request may have been applied.
    if (!in.outcome.transport.sent) may = true;
    p.ambiguous = in.outcome.transport.sent && !idempotent_request;
  }
  return may;
}

// Timing, for every outcome worth repeating (also reported when we stop):
// the later of the server's hint and the backoff's floor. Returns that wait.
Duration time_backoff(const BackoffDraw& draw, WallTime wall, MonoTime mono, Plan& p) noexcept {
  p.backoff = draw.floor;
  p.nominal_backoff = draw.nominal;
  const Duration hint = p.server_hint.value_or(kZero);
  const Duration base_wait = std::max(hint, draw.floor);
  if (!(p.server_hint && hint > kZero && hint >= draw.floor)) p.basis = Basis::kBackoff;
  set_wait(p, base_wait, wall, mono);
  return base_wait;
}

bool stop(Plan& p, Decision d, Reason r) noexcept {
  p.decision = d;
  p.reason = r;
  return true;
}

// Why the request is not retried, the first reason in this order; false
// when it is. The retry budget is asked last: asking spends from it.
bool stopped(const PlanInput& in, const PlannerConfig& config, std::int64_t attempt, bool may_repeat,
             Plan& p) noexcept {
  // The server's own "do not retry" ends it whatever the method or the hint.
  if (const Signals* s = in.outcome.signals; s != nullptr && s->should_retry == false) {
    return stop(p, Decision::kNotRetryable, Reason::kServerSaysNoRetry);
  }
  if (!may_repeat) return stop(p, Decision::kNotRetryable, p.ambiguous ? Reason::kAmbiguous : Reason::kNotIdempotent);
  if (attempt >= std::max<std::int64_t>(in.max_attempts, 1)) {
    return stop(p, Decision::kExhausted, Reason::kAttemptsExhausted);
  }
  if (in.deadline && *p.not_before_mono > *in.deadline) {
    return stop(p, in.deadline_is_wait_budget ? Decision::kDeferred : Decision::kDeadlineExceeded, Reason::kDeadline);
  }
  if (p.server_hint && *p.server_hint > config.max_wait) return stop(p, Decision::kDeferred, Reason::kHintTooLong);
  if (config.budget && !config.budget->try_spend()) return stop(p, Decision::kExhausted, Reason::kBudgetExhausted);
  return false;
}

// Retry: jitter on top, cut (never below zero) so the retry ends by the deadline.
void retry_with_jitter(const PlanInput& in, Duration base_wait, Duration jitter, WallTime wall, MonoTime mono,
                       Plan& p) noexcept {
  if (in.deadline) {
    const Duration room = saturating_sub(in.deadline->time_since_epoch(), p.not_before_mono->time_since_epoch());
    if (jitter > room) {
      jitter = non_negative(room);
      p.notes.add(PlanNote::kJitterShortened);
    }
  }
  p.jitter = jitter;
  set_wait(p, saturating_add(base_wait, jitter), wall, mono);
  p.decision = Decision::kRetry;
  p.reason = Reason::kRetry;
}

}  // namespace

Plan Planner::decide(const PlanInput& in, RandomSource& rng) const noexcept {
  Plan p;
  const Signals* s = in.outcome.signals;
  const WallTime wall = s ? s->received_wall : in.outcome.transport.at_wall;
  const MonoTime mono = s ? s->received_mono : in.outcome.transport.at_mono;
  if (in.deadline) p.time_left = saturating_sub(in.deadline->time_since_epoch(), mono.time_since_epoch());

  if (s != nullptr) {
    read_answer(*s, config_.use_low_confidence_quota, p);
    const bool retryable = config_.retryable_statuses.contains(s->status) || s->limited;
    if (!retryable) {
      decide_final(*s, wall, mono, p);
      if (config_.budget) config_.budget->on_success();
      return p;
    }
  }
  // Whether the request may be repeated matters only from here on: a final
  // answer above needs no method lookup.
  const bool idempotent_request = !in.declared_non_idempotent && idempotent(in.method);
  const bool repeatable = may_repeat(in, idempotent_request, p);

  const std::int64_t attempt = std::max<std::int64_t>(in.attempt, 1);
  const BackoffDraw draw = config_.backoff.draw(attempt, in.previous_backoff, rng);
  const Duration base_wait = time_backoff(draw, wall, mono, p);
  if (stopped(in, config_, attempt, repeatable, p)) return p;
  retry_with_jitter(in, base_wait, draw.jitter, wall, mono, p);
  return p;
}

namespace {

// describe() runs after every attempt (an attempt's reason is its sentence),
// so the sentence is appended into one string reserved up front, numbers are
// written in place, and only the pieces the case says are made: a string per
// piece, joined afterwards, cost a fifth of the engine's time per attempt.
constexpr std::size_t kSentenceReserve = 128;  // most sentences fit; longer ones grow once

void add_int(std::string& s, std::int64_t n) {
  if (n >= 100 && n <= 999) {  // a status, the usual number in a sentence: three digits, in place
    s.push_back(static_cast<char>('0' + n / 100));
    s.push_back(static_cast<char>('0' + n / 10 % 10));
    s.push_back(static_cast<char>('0' + n % 10));
    return;
  }
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, n);
  s.append(buf, static_cast<std::size_t>(r.ptr - buf));
}

void add_seconds(std::string& s, Duration d) { s.append(format_seconds(d)); }

// "the server's Retry-After asks for 30 s", ... for the basis of the plan.
void add_basis(std::string& s, const Plan& p, const PlanInput& in, Jitter jitter) {
  const Duration hint = p.server_hint.value_or(kZero);
  switch (p.basis) {
    case Basis::kRetryAfter: {
      // A wait read from a limited answer's body says where it was read.
      const Signals* sig = in.outcome.signals;
      constexpr std::string_view kBody = "body: ";
      if (sig && sig->retry_after && sig->retry_after->source.starts_with(kBody)) {
        s.append("the answer's body ("sv)
            .append(printable(std::string_view(sig->retry_after->source).substr(kBody.size()), 96))
            .append(") asks for "sv);
      } else {
        s.append("the server's Retry-After asks for "sv);
      }
      add_seconds(s, hint);
      return;
    }
    case Basis::kRateLimit:
    case Basis::kVendor: {
      s.append(p.basis == Basis::kRateLimit ? "the RateLimit quota" : "the vendor quota"sv);
      const Signals* sig = in.outcome.signals;
      if (sig && p.quota_index && *p.quota_index < sig->quota.size()) {
        const QuotaObservation& q = sig->quota[*p.quota_index];
        // The policy name is the server's: escaped here, where the text is made.
        if (!q.policy.empty()) s.append(" \""sv).append(printable(q.policy, 64)).append("\""sv);
        if (p.basis == Basis::kVendor && !q.source_name().empty())
          s.append(" ("sv).append(q.source_name()).append(")"sv);
        if (q.reset_is_full_refill) {
          s.append(" is exhausted; its reset counts to a full refill, and the next request's units refill in "sv);
          add_seconds(s, hint);
          return;
        }
      }
      s.append(" is exhausted for "sv);
      add_seconds(s, hint);
      return;
    }
    case Basis::kBackoff:
      s.append("the local backoff for attempt "sv);
      add_int(s, std::max<std::int64_t>(in.attempt, 1));
      s.append(" is "sv);
      add_seconds(s, p.nominal_backoff);
      s.append(" nominal with "sv).append(jitter == Jitter::kNone ? "no" : to_string(jitter)).append(" jitter"sv);
      return;
    case Basis::kNone: break;
  }
  s.append("nothing sets a wait"sv);
}

// The header that carried the server's verdict, for people.
void add_verdict_source(std::string& s, const Signals& sig) {
  if (sig.should_retry_source.empty()) {
    s.append("retry verdict"sv);
  } else {
    s.append(printable(sig.should_retry_source, 64));
  }
}

// The sentence of a success without a hint, for every 2xx status, built at
// compile time: an attempt's reason can then point at it instead of
// allocating a copy (the general path of describe() gives the same words).
struct SucceededSentences {
  static constexpr std::string_view kText = "The request succeeded (status 000); nothing to retry.";
  static constexpr std::size_t kAt = kText.find("000");
  static constexpr int kFirst = 200;
  static constexpr int kCount = 100;
  char text[kCount][kText.size() + 1];  // each with its NUL

  constexpr SucceededSentences() : text{} {
    for (int i = 0; i < kCount; ++i) {
      for (std::size_t j = 0; j < kText.size(); ++j) text[i][j] = kText[j];
      const int status = kFirst + i;
      text[i][kAt] = static_cast<char>('0' + status / 100);
      text[i][kAt + 1] = static_cast<char>('0' + status / 10 % 10);
      text[i][kAt + 2] = static_cast<char>('0' + status % 10);
      text[i][kText.size()] = '\0';
    }
  }
  std::string_view at(int status) const noexcept {
    if (status < kFirst || status >= kFirst + kCount) return {};
    return {text[status - kFirst], kText.size()};
  }
};
constexpr SucceededSentences kSucceededSentences{};

// describe()'s sentence, appended to one string: a function per reason.
struct Sentence {
  std::string& s;
  const Plan& p;
  const PlanInput& in;
  Jitter jitter;

  // "in 30 s" whenever a permitted time is known.
  void when() {
    if (p.not_before_wall) add_seconds(s.append("in "sv), p.wait);
  }
  void status() { add_int(s.append("status "sv), p.status); }
  void basis() { add_basis(s, p, in, jitter); }

  void succeeded() {
    add_int(s.append("The request succeeded (status "sv), p.status);
    s.append("); nothing to retry"sv);
    if (p.server_hint) {
      add_seconds(s.append(", but the server permits the next request only in "sv), *p.server_hint);
      s.append(" ("sv);
      basis();
      s.append(")"sv);
    }
  }
  void not_a_failure() {
    s.append("The response ("sv);
    status();
    s.append(") is not a failure; nothing to retry"sv);
    if (p.server_hint) {
      add_seconds(s.append(", and the server asks for "sv), *p.server_hint);
      s.append(" before the next request"sv);
    }
  }
  void status_not_retryable() {
    s.append("The "sv);
    status();
    s.append(" is not retryable"sv);
    if (p.server_hint) {
      s.append("; the server would permit a new request "sv);
      when();
    }
  }
  void not_idempotent() {
    s.append(in.method).append(
        " is not idempotent and the request carried no idempotency key, so it is not repeated automatically; "
        "a retry would be permitted "sv);
    when();
    if (const Signals* sig = in.outcome.signals; sig && sig->should_retry == true) {
      add_verdict_source(s.append(" (the server's "sv), *sig);
      s.append(" says it may be retried, which grants no such permission)"sv);
    }
  }
  void server_says_no_retry() {
    s.append("The server says not to retry ("sv);
    if (const Signals* sig = in.outcome.signals) {
      add_verdict_source(s, *sig);
    } else {
      s.append("its verdict"sv);
    }
    s.append(": false), so the "sv);
    status();
    s.append(" is not repeated"sv);
    if (p.not_before_wall) {
      s.append("; a new request would be permitted "sv);
      when();
    }
  }
  void ambiguous() {
    s.append("The connection failed after the "sv)
        .append(in.method)
        .append(" request was sent, so it may have been applied: reconcile before repeating (a retry would be "
                "permitted "sv);
    when();
    s.append(")"sv);
  }
  void attempts_exhausted() {
    add_int(s.append("Attempt "sv), std::max<std::int64_t>(in.attempt, 1));
    add_int(s.append(" of "sv), std::max<std::int64_t>(in.max_attempts, 1));
    s.append(" was the last; a retry would be permitted "sv);
    when();
    s.append(" ("sv);
    basis();
    s.append(")"sv);
  }
  void budget_exhausted() {
    s.append("The client's retry budget is empty (too many recent retries), so this one is not retried; a retry "
             "would be permitted "sv);
    when();
  }
  void hint_too_long(Duration max_wait) {
    s.append("Deferred: "sv);
    basis();
    add_seconds(s.append(", longer than the acceptable "sv), max_wait);
    s.append("; come back "sv);
    when();
  }
  void deadline() {
    s.append("The earliest permitted retry is "sv);
    when();
    s.append(" ("sv);
    basis();
    s.append(in.deadline_is_wait_budget ? "), after the longest acceptable wait "sv : "), after the deadline "sv);
    if (p.time_left && *p.time_left < kZero) {
      s.append("that had already passed"sv);
    } else {
      add_seconds(s.append("("sv), p.time_left.value_or(kZero));
      s.append(" left)"sv);
    }
    s.append("; it is not cut short"sv);
  }
  void retry() {
    s.append("Retry "sv);
    when();
    s.append(": "sv);
    basis();
    if (p.basis != Basis::kBackoff && p.backoff > kZero) {
      add_seconds(s.append(" (local backoff "sv), p.backoff);
      s.append(")"sv);
    }
    if (p.basis != Basis::kBackoff && p.jitter > kZero) {
      add_seconds(s.append(", plus "sv), p.jitter);
      s.append(" of jitter"sv);
    }
  }
};

}  // namespace

std::string_view Planner::constant_sentence(const Plan& p) noexcept {
  if (p.reason != Reason::kSucceeded || p.server_hint) return {};
  return kSucceededSentences.at(p.status);
}

std::string Planner::describe(const Plan& p, const PlanInput& in) const {
  if (const std::string_view fixed = constant_sentence(p); !fixed.empty()) return std::string(fixed);
  std::string s;
  s.reserve(kSentenceReserve);
  Sentence say{s, p, in, config_.backoff.jitter()};
  switch (p.reason) {
    case Reason::kSucceeded: say.succeeded(); break;
    case Reason::kNotAFailure: say.not_a_failure(); break;
    case Reason::kStatusNotRetryable: say.status_not_retryable(); break;
    case Reason::kNotIdempotent: say.not_idempotent(); break;
    case Reason::kServerSaysNoRetry: say.server_says_no_retry(); break;
    case Reason::kAmbiguous: say.ambiguous(); break;
    case Reason::kAttemptsExhausted: say.attempts_exhausted(); break;
    case Reason::kBudgetExhausted: say.budget_exhausted(); break;
    case Reason::kHintTooLong: say.hint_too_long(config_.max_wait); break;
    case Reason::kDeadline: say.deadline(); break;
    case Reason::kRetry: say.retry(); break;
  }
  s.push_back('.');
  return s;
}

}  // namespace abide
