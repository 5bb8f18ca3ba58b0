#include "explain_text.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <string_view>

#include "abide/headers.h"
#include "abide/http_date.h"
#include "common.h"
#include "duration_text.h"

namespace abide::cli {
namespace {

// Appends the parts to out (no `literal + std::string`, see planner.cpp).
void put(std::string& out, std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts) out.append(p);
}

std::string upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

// A wall time for people: rounded up to the millisecond (never shown earlier).
std::string when(WallTime t) {
  if (t == WallTime::max()) return "never (too far to represent)";
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(t);
  return format_rfc3339(WallTime{std::chrono::duration_cast<Duration>(ms.time_since_epoch())});
}

// Bytes a server (or a profile) supplied: through abide::printable(), cut
// at `limit` bytes.
std::string shown(std::string_view v, std::size_t limit = 120) { return abide::printable(v, limit); }

std::string jitter_words(Jitter j) {
  if (j == Jitter::kNone) return "no jitter";
  std::string s(to_string(j));
  s += " jitter";
  return s;
}

std::string count(std::optional<std::int64_t> v) { return v ? std::to_string(*v) : "?"; }

std::string quota_line(const QuotaObservation& q) {
  std::string s;
  put(s, {count(q.remaining), " of ", count(q.limit), " ", shown(q.unit), " left"});
  if (q.window) put(s, {" per ", format_seconds(*q.window)});
  if (q.reset) put(s, {", resets in ", format_seconds(*q.reset)});
  if (q.partition_key) put(s, {", partition ", shown(*q.partition_key)});
  if (q.cost) put(s, {", this request cost ", std::to_string(*q.cost)});
  if (q.reset_is_full_refill) s += ", the reset is a full refill";
  put(s, {" (", shown(q.source_name()), q.confidence == Confidence::kLow ? ", low confidence" : "", ")"});
  return s;
}

std::string quota_verdict(const ExplainContext& c, std::size_t i) {
  const QuotaObservation& q = c.signals.quota[i];
  const Plan& p = c.plan;
  const bool used_confidence = q.confidence == Confidence::kHigh || c.planner.config().use_low_confidence_quota;
  if (q.exhausted()) {
    if (!used_confidence) return "exhausted, but low confidence (no vendor profile): not used";
    if (p.quota_index == i) {
      if (p.decision == Decision::kDone) return "exhausted: the next request on this quota waits for its reset";
      if (p.basis == Basis::kRateLimit || p.basis == Basis::kVendor) return "exhausted: this reset sets the wait";
      if (p.basis == Basis::kRetryAfter) return "exhausted: overridden by Retry-After (which waits as long or longer)";
      return "exhausted: bounds the wait, but the local backoff is longer";
    }
    return "exhausted: resets sooner than the winning hint";
  }
  if (q.remaining && *q.remaining <= 0) return "at zero but without a reset time: cannot bound the wait";
  if (q.remaining && c.signals.retry_after) return "room left: overridden by Retry-After (never shortens it)";
  if (q.remaining) return "room left: no wait from this quota";
  return "no remaining count: informational";
}

std::string retry_after_line(const ExplainContext& c) {
  const Signals& s = c.signals;
  const Plan& p = c.plan;
  std::string line = "  Retry-After: ";
  if (s.retry_after_rejected && !s.retry_after) {
    line += "malformed, ignored: the local backoff applies instead (never zero)";
    return line;
  }
  if (!s.retry_after) {
    line += "none";
    return line;
  }
  const RetryHint& h = *s.retry_after;
  const Duration w = p.retry_after.value_or(h.wait);
  if (h.kind == RetryHint::Kind::kDate && h.date) {
    put(line, {when(*h.date), " (a date: ", format_seconds(w), " from receipt"});
  } else {
    put(line, {format_seconds(w), " (a delay"});
  }
  put(line, {", from ", shown(h.source), ") -> "});
  if (p.notes.has(PlanNote::kRetryAfterInPast)) {
    line += "in the past: a zero hint, the local backoff applies";
  } else if (p.basis == Basis::kRetryAfter) {
    line += "sets the wait";
  } else if (p.basis == Basis::kRateLimit || p.basis == Basis::kVendor) {
    line += "an exhausted quota resets later, and the later time applies";
  } else if (p.basis == Basis::kBackoff) {
    line += "shorter than the local backoff, which applies";
  } else {
    line += "reported";
  }
  if (s.retry_after_rejected) line += " (another Retry-After line was malformed)";
  return line;
}

std::string profile_line(const ExplainContext& c) {
  std::string line = "  Vendor profile: ";
  if (!c.signals.profile.empty()) {
    put(line, {shown(c.signals.profile)});
    if (!c.profile_option.empty() && c.profile_option != "none") {
      line += " (chosen with --profile)";
    } else {
      put(line, {" (for host ", shown(c.host), ")"});
    }
  } else if (c.profile_option == "none") {
    line += "none (--profile none): vendor headers are not read";
  } else if (c.host.empty()) {
    line += "none (no --host or --profile given): vendor headers are not read";
  } else {
    put(line, {"none for host ", shown(c.host), ": vendor headers are not read"});
  }
  return line;
}

// The server's own verdict on retrying (Stripe-Should-Retry, x-should-retry).
std::string should_retry_line(const ExplainContext& c) {
  const Signals& s = c.signals;
  std::string line = "  Server's retry verdict: ";
  put(line, {*s.should_retry ? "retry" : "do not retry"});
  if (!s.should_retry_source.empty()) put(line, {" (", shown(s.should_retry_source), ")"});
  line += *s.should_retry ? " -> grants no permission to repeat a non-idempotent request without an idempotency key"
                          : " -> no retry";
  return line;
}

std::string skew_line(const Signals& s) {
  if (!s.server_date) return "Clock skew: unknown (no valid Date header).";
  if (!s.clock_skew || *s.clock_skew == Duration::zero()) {
    return "Clock skew: none (the server's Date matches the local receive time).";
  }
  const Duration k = *s.clock_skew;
  std::string line;
  put(line,
      {"Clock skew: the server's clock is ", format_seconds(k < Duration::zero() ? -k : k),
       k < Duration::zero() ? " behind" : " ahead of", k < Duration::zero() ? " the local clock" : " the local clock",
       " (Date ", when(*s.server_date), "); a date hint counts from whichever clock makes the wait longer."});
  return line;
}

std::string headline(const ExplainContext& c) {
  const Plan& p = c.plan;
  std::string h = upper(to_string(p.decision));
  switch (p.decision) {
    case Decision::kRetry: put(h, {" in ", format_seconds(p.wait), " (at ", when(*p.not_before_wall), ")"}); break;
    case Decision::kDeferred:
      put(h, {" until ", when(*p.not_before_wall), " (in ", format_seconds(p.wait), ")"});
      break;
    case Decision::kDone:
      if (p.not_before_wall) put(h, {" (next request on this quota not before ", when(*p.not_before_wall), ")"});
      break;
    default:
      if (p.not_before_wall) put(h, {": a retry would be permitted at ", when(*p.not_before_wall)});
      break;
  }
  if (p.ambiguous) h += " [ambiguous: may have been applied]";
  return h;
}

std::string winner_line(const ExplainContext& c) {
  const Plan& p = c.plan;
  std::string line = "Which signal won: ";
  switch (p.basis) {
    case Basis::kRetryAfter:
      put(line, {"Retry-After (", format_seconds(p.server_hint.value_or(Duration::zero())), ")"});
      break;
    case Basis::kRateLimit:
    case Basis::kVendor: {
      const QuotaObservation& q = c.signals.quota[*p.quota_index];
      put(line, {p.basis == Basis::kRateLimit ? "the RateLimit quota" : "the vendor quota",
                 q.policy.empty() ? "" : " \"", shown(q.policy), q.policy.empty() ? "" : "\"", " (",
                 shown(q.source_name()), "), exhausted for ", format_seconds(*p.quota_wait)});
      break;
    }
    case Basis::kBackoff:
      put(line, {"the local backoff (nominal ", format_seconds(p.nominal_backoff), " with ",
                 jitter_words(c.planner.config().backoff.jitter())});
      if (p.server_hint) put(line, {"; the server's hint was only ", format_seconds(*p.server_hint)});
      line += ")";
      break;
    case Basis::kNone: line += "none (no wait applies)"; break;
  }
  return line;
}

}  // namespace

std::vector<std::string> explain_warnings(const ExplainContext& c) {
  std::vector<std::string> out(c.head_warnings.begin(), c.head_warnings.end());
  out.insert(out.end(), c.signals.warnings.begin(), c.signals.warnings.end());
  for (auto& n : notes_text(c.plan.notes)) out.push_back(std::move(n));
  return out;
}

std::string explain_text(const ExplainContext& c) {
  const Signals& s = c.signals;
  const Plan& p = c.plan;
  std::string out;
  // The planner's sentence may name a policy or source the server sent.
  put(out, {headline(c), "\n", safe_text(c.planner.describe(p, c.input)), "\n\n", winner_line(c), "\n\n"});

  put(out, {"What the response said (status ", std::to_string(s.status), s.limited ? ", rate limited" : "", "):\n"});
  put(out, {retry_after_line(c), "\n"});
  if (s.quota.empty()) out += "  Quota: none reported\n";
  for (std::size_t i = 0; i < s.quota.size(); ++i) {
    const QuotaObservation& q = s.quota[i];
    put(out, {"  Quota ", q.policy.empty() ? "(unnamed)" : "\"", shown(q.policy), q.policy.empty() ? "" : "\"", ": ",
              quota_line(q), " -> ", quota_verdict(c, i), "\n"});
  }
  put(out, {profile_line(c), "\n"});
  if (s.should_retry) put(out, {should_retry_line(c), "\n"});
  for (const Header& h : s.uninterpreted) {
    put(out, {"  ", shown(h.name), ": ", shown(h.value), " -> ignored: ",
              s.profile.empty() ? "no profile for this host, and the same name means different things at different "
                                  "vendors (try --host or --profile)"
                                : "not read by this profile",
              "\n"});
  }

  const bool backoff_computed = p.decision != Decision::kDone && p.reason != Reason::kStatusNotRetryable;
  if (backoff_computed) {
    const BackoffPolicy& b = c.planner.config().backoff;
    put(out,
        {"\nLocal backoff: attempt ", std::to_string(std::max<std::int64_t>(c.input.attempt, 1)), " of ",
         std::to_string(std::max<std::int64_t>(c.input.max_attempts, 1)), ", base ", format_seconds(b.base()),
         " doubling to a cap of ", format_seconds(b.cap()), ", ", jitter_words(b.jitter()), ": nominal ",
         format_seconds(p.nominal_backoff), ", floor ", format_seconds(p.backoff), ", jitter ",
         format_seconds(p.jitter), p.decision == Decision::kRetry ? "" : " (jitter applies only to a retry)", "\n"});
  }
  put(out, {"\n", skew_line(s), "\n"});

  const std::vector<std::string> warnings = explain_warnings(c);
  if (!warnings.empty()) {
    out += "\nIgnored, adjusted or worth knowing:\n";
    // Warnings carry server bytes already made printable where they were written.
    for (const auto& w : warnings) put(out, {"  - ", safe_text(w, 400), "\n"});
  }
  return out;
}

}  // namespace abide::cli
