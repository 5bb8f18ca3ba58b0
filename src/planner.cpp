#include "abide/planner.h"

#include <algorithm>

#include "ascii.h"
#include "concat.h"
#include "duration_text.h"
#include "planner_internal.h"

namespace abide {

namespace {

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
  }
  return "";
}

std::vector<std::string> notes_text(const PlanNotes& notes) {
  std::vector<std::string> out;
  for (PlanNote n : {PlanNote::kRetryAfterMalformed, PlanNote::kRetryAfterInPast, PlanNote::kSkewLengthened,
                     PlanNote::kQuotaOutlastsRetryAfter, PlanNote::kQuotaRoomIgnored, PlanNote::kQuotaZeroWithoutReset,
                     PlanNote::kLowConfidenceQuotaIgnored, PlanNote::kJitterShortened, PlanNote::kFullRefillReset,
                     PlanNote::kServerSaysRetry}) {
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

Plan Planner::decide(const PlanInput& in, RandomSource& rng) const noexcept {
  Plan p;
  const Signals* s = in.outcome.signals;
  const WallTime wall = s ? s->received_wall : in.outcome.transport.at_wall;
  const MonoTime mono = s ? s->received_mono : in.outcome.transport.at_mono;
  if (in.deadline) p.time_left = saturating_sub(in.deadline->time_since_epoch(), mono.time_since_epoch());

  const bool idempotent_request = !in.declared_non_idempotent && idempotent(in.method);
  bool may_repeat = idempotent_request || in.idempotency_key;

  if (s != nullptr) {
    p.status = s->status;
    p.clock_skew = s->clock_skew;
    read_hints(*s, config_.use_low_confidence_quota, p);
    if (s->should_retry == true) p.notes.add(PlanNote::kServerSaysRetry);
    const bool retryable = config_.retryable_statuses.contains(s->status) || s->limited;
    if (!retryable) {
      // A final answer: 2xx is done, 1xx/3xx are not failures, the rest are
      // not retryable. Any server hint still tells when the next request may go.
      if (s->status >= 200 && s->status < 300) {
        p.decision = Decision::kDone;
        p.reason = Reason::kSucceeded;
      } else if (s->status >= 100 && s->status < 400) {
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
      if (config_.budget) config_.budget->on_success();
      return p;
    }
  } else {
    // A connection that failed before sending can be repeated whatever the
    // method; after sending, a non-idempotent request may have been applied.
    if (!in.outcome.transport.sent) may_repeat = true;
    p.ambiguous = in.outcome.transport.sent && !idempotent_request;
  }

  // Timing, for every outcome worth repeating (also reported when we stop).
  const std::int64_t attempt = std::max<std::int64_t>(in.attempt, 1);
  const BackoffDraw draw = config_.backoff.draw(attempt, in.previous_backoff, rng);
  p.backoff = draw.floor;
  p.nominal_backoff = draw.nominal;
  const Duration hint = p.server_hint.value_or(kZero);
  const Duration base_wait = std::max(hint, draw.floor);
  if (!(p.server_hint && hint > kZero && hint >= draw.floor)) p.basis = Basis::kBackoff;
  set_wait(p, base_wait, wall, mono);

  // The server's own "do not retry" ends it whatever the method or the hint.
  if (s != nullptr && s->should_retry == false) {
    p.decision = Decision::kNotRetryable;
    p.reason = Reason::kServerSaysNoRetry;
    return p;
  }
  if (!may_repeat) {
    p.decision = Decision::kNotRetryable;
    p.reason = p.ambiguous ? Reason::kAmbiguous : Reason::kNotIdempotent;
    return p;
  }
  if (attempt >= std::max<std::int64_t>(in.max_attempts, 1)) {
    p.decision = Decision::kExhausted;
    p.reason = Reason::kAttemptsExhausted;
    return p;
  }
  if (in.deadline && *p.not_before_mono > *in.deadline) {
    p.decision = Decision::kDeadlineExceeded;
    p.reason = Reason::kDeadline;
    return p;
  }
  if (p.server_hint && *p.server_hint > config_.max_wait) {
    p.decision = Decision::kDeferred;
    p.reason = Reason::kHintTooLong;
    return p;
  }
  if (config_.budget && !config_.budget->try_spend()) {
    p.decision = Decision::kExhausted;
    p.reason = Reason::kBudgetExhausted;
    return p;
  }

  // Retry: jitter on top, cut (never below zero) so the retry ends by the deadline.
  Duration jitter = draw.jitter;
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
  return p;
}

namespace {

using detail::cat;

// "the server's Retry-After asks for 30 s", ... for the basis of the plan.
std::string basis_phrase(const Plan& p, const PlanInput& in, Jitter jitter) {
  const std::string hint = format_seconds(p.server_hint.value_or(kZero));
  switch (p.basis) {
    case Basis::kRetryAfter: return cat({"the server's Retry-After asks for ", hint});
    case Basis::kRateLimit:
    case Basis::kVendor: {
      std::string who = p.basis == Basis::kRateLimit ? "the RateLimit quota" : "the vendor quota";
      const Signals* s = in.outcome.signals;
      if (s && p.quota_index && *p.quota_index < s->quota.size()) {
        const QuotaObservation& q = s->quota[*p.quota_index];
        // The policy name is the server's: escaped here, where the text is made.
        if (!q.policy.empty()) who.append(cat({" \"", printable(q.policy, 64), "\""}));
        if (p.basis == Basis::kVendor && !q.source_name().empty()) who.append(cat({" (", q.source_name(), ")"}));
        if (q.reset_is_full_refill) {
          return cat(
              {who, " is exhausted; its reset counts to a full refill, and the next request's units refill in ", hint});
        }
      }
      return cat({who, " is exhausted for ", hint});
    }
    case Basis::kBackoff:
      return cat({"the local backoff for attempt ", std::to_string(std::max<std::int64_t>(in.attempt, 1)), " is ",
                  format_seconds(p.nominal_backoff), " nominal with ",
                  jitter == Jitter::kNone ? "no" : to_string(jitter), " jitter"});
    case Basis::kNone: break;
  }
  return "nothing sets a wait";
}

// The header that carried the server's verdict, for people.
std::string verdict_source(const Signals& s) {
  return s.should_retry_source.empty() ? std::string("retry verdict") : printable(s.should_retry_source, 64);
}

}  // namespace

std::string Planner::describe(const Plan& p, const PlanInput& in) const {
  const std::string when = p.not_before_wall ? cat({"in ", format_seconds(p.wait)}) : std::string{};
  const std::string status = cat({"status ", std::to_string(p.status)});
  const std::string attempt = std::to_string(std::max<std::int64_t>(in.attempt, 1));
  const std::string max_attempts = std::to_string(std::max<std::int64_t>(in.max_attempts, 1));
  std::string s;
  switch (p.reason) {
    case Reason::kSucceeded:
      s = cat({"The request succeeded (", status, "); nothing to retry"});
      if (p.server_hint) {
        s.append(cat({", but the server permits the next request only in ", format_seconds(*p.server_hint), " (",
                      basis_phrase(p, in, config_.backoff.jitter()), ")"}));
      }
      break;
    case Reason::kNotAFailure:
      s = cat({"The response (", status, ") is not a failure; nothing to retry"});
      if (p.server_hint) {
        s.append(cat({", and the server asks for ", format_seconds(*p.server_hint), " before the next request"}));
      }
      break;
    case Reason::kStatusNotRetryable:
      s = cat({"The ", status, " is not retryable"});
      if (p.server_hint) s.append(cat({"; the server would permit a new request ", when}));
      break;
    case Reason::kNotIdempotent:
      s = cat({in.method,
               " is not idempotent and the request carried no idempotency key, so it is not repeated automatically; "
               "a retry would be permitted ",
               when});
      if (const Signals* sig = in.outcome.signals; sig && sig->should_retry == true) {
        s.append(cat(
            {" (the server's ", verdict_source(*sig), " says it may be retried, which grants no such permission)"}));
      }
      break;
    case Reason::kServerSaysNoRetry: {
      const Signals* sig = in.outcome.signals;
      s = cat({"The server says not to retry (", sig ? verdict_source(*sig) : std::string("its verdict"),
               ": false), so the ", status, " is not repeated"});
      if (p.not_before_wall) s.append(cat({"; a new request would be permitted ", when}));
      break;
    }
    case Reason::kAmbiguous:
      s = cat({"The connection failed after the ", in.method,
               " request was sent, so it may have been applied: reconcile before repeating (a retry would be "
               "permitted ",
               when, ")"});
      break;
    case Reason::kAttemptsExhausted:
      s = cat({"Attempt ", attempt, " of ", max_attempts, " was the last; a retry would be permitted ", when, " (",
               basis_phrase(p, in, config_.backoff.jitter()), ")"});
      break;
    case Reason::kBudgetExhausted:
      s = cat({"The client's retry budget is empty (too many recent retries), so this one is not retried; a retry "
               "would be permitted ",
               when});
      break;
    case Reason::kHintTooLong:
      s = cat({"Deferred: ", basis_phrase(p, in, config_.backoff.jitter()), ", longer than the acceptable ",
               format_seconds(config_.max_wait), "; come back ", when});
      break;
    case Reason::kDeadline: {
      const std::string left = p.time_left && *p.time_left < kZero
                                   ? std::string("that had already passed")
                                   : cat({"(", format_seconds(p.time_left.value_or(kZero)), " left)"});
      s = cat({"The earliest permitted retry is ", when, " (", basis_phrase(p, in, config_.backoff.jitter()),
               "), after the deadline ", left, "; it is not cut short"});
      break;
    }
    case Reason::kRetry:
      s = cat({"Retry ", when, ": ", basis_phrase(p, in, config_.backoff.jitter())});
      if (p.basis != Basis::kBackoff && p.backoff > kZero) {
        s.append(cat({" (local backoff ", format_seconds(p.backoff), ")"}));
      }
      if (p.basis != Basis::kBackoff && p.jitter > kZero) {
        s.append(cat({", plus ", format_seconds(p.jitter), " of jitter"}));
      }
      break;
  }
  s.push_back('.');
  return s;
}

}  // namespace abide
