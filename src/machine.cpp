// One request's state machine (abide/engine.h, engine::Machine): the
// acquire -> send -> observe -> record -> decide -> wait loop, never blocking.
#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <utility>

#include "abide/engine.h"
#include "ascii.h"
#include "body_hint.h"
#include "concat.h"
#include "engine_impl.h"
#include "llm/cost_estimate.h"
#include "llm/usage_tap.h"
#include "profile_select.h"

namespace abide {
namespace {

bool valid_method(std::string_view m) noexcept {
  return !m.empty() && m.size() <= 64 && std::all_of(m.begin(), m.end(), ascii::is_tchar);
}

using detail::cat;

// Transport errors are shown to people and may quote a server.
constexpr std::size_t kMaxErrorText = 256;

}  // namespace

namespace engine {

// ---- Machine ----

Machine::Machine(Engine& engine, const Request& request, BodySink sink, std::size_t index, EventHook hook)
    : engine_(*engine.impl_),
      req_(request),
      sink_(std::move(sink)),
      index_(index),
      own_hook_(std::move(hook)),
      hook_(own_hook_ ? &own_hook_ : &engine_.config_.on_event) {
  send_deadline_ = req_.deadline;
  if (req_.send_by && (!send_deadline_ || *req_.send_by < *send_deadline_)) {
    send_deadline_ = req_.send_by;
    budget_binds_ = true;
  }
}

Event Machine::event(Event::Kind kind) const {
  Event e;
  e.kind = kind;
  e.index = index_;
  e.request = &req_;
  e.attempt = attempt_;
  e.at = engine_.mono_.now();
  return e;
}

void Machine::emit(const Event& e) const {
  if (!hooked()) return;
  try {
    (*hook_)(e);
  } catch (...) {  // a hook must not lose a request
  }
}

void Machine::emit_error(std::string_view error) const {
  if (!hooked()) return;
  Event e = event(Event::Kind::kTransportError);
  e.error = error;
  emit(e);
}

Step Machine::finish(OutcomeKind kind, std::string reason) {
  state_ = State::kFinished;
  out_.kind = kind;
  out_.reason = std::move(reason);
  if (kind == OutcomeKind::kDone) {
    out_.not_before_mono.reset();
    out_.not_before_wall.reset();
  }
  if (hooked()) {
    Event e = event(Event::Kind::kFinished);
    e.outcome = &out_;
    emit(e);
  }
  return Step{};
}

Step Machine::end_here(OutcomeKind kind, std::string reason) {
  Attempt& a = current();
  a.reason = reason;
  out_.ambiguous = a.sent && !idempotent_request();
  return finish(kind, std::move(reason));
}

void Machine::set_not_before(MonoTime mono) {
  out_.not_before_mono = mono;
  out_.not_before_wall = saturating_add(engine_.wall_.now(), mono - engine_.mono_.now());
}

Step Machine::wait_step(MonoTime until, Event::WaitKind kind, std::string_view reason) {
  Step s;
  s.kind = Step::Kind::kWait;
  s.until = until;
  s.wait_kind = kind;
  s.reason = reason;
  return s;
}

void Machine::begin_wait(Event::WaitKind kind, MonoTime until) {
  wait_start_ = engine_.mono_.now();
  wait_until_ = until;
  if (!hooked()) return;
  Event e = event(Event::Kind::kWaitStarted);
  e.wait_kind = kind;
  e.wait = until > wait_start_ ? until - wait_start_ : Duration::zero();
  emit(e);
}

void Machine::end_wait(Event::WaitKind kind, bool cancelled) {
  const MonoTime end = engine_.mono_.now();
  const Duration took = end > wait_start_ ? end - wait_start_ : Duration::zero();
  out_.waited += took;
  if (!hooked()) return;
  Event e = event(Event::Kind::kWaitEnded);
  e.wait_kind = kind;
  e.wait = took;
  e.cancelled = cancelled;
  emit(e);
}

bool Machine::idempotent_request() const { return !req_.non_idempotent && engine_.planner_.idempotent(req_.method); }

bool Machine::has_key() const {
  if (req_.idempotency_key && !req_.idempotency_key->empty()) return true;
  if (req_.headers.empty()) return false;
  // An empty Idempotency-Key field names no key: the request is not safe to repeat.
  for (const std::string_view v : req_.headers.all("Idempotency-Key"))
    if (!v.empty()) return true;
  return false;
}

Machine::~Machine() {
  // Only an unfinished machine can still hold its probe: an answer recorded,
  // or any end (finish, cancel), gave it up already.
  if (state_ != State::kFinished) abandon_probe();
}

void Machine::abandon_probe() {
  if (probe_) engine_.pacer_->abandon_probe(*key_);
  probe_ = false;
}

Step Machine::start() {
  detail::EngineImpl::Origin scratch;
  const detail::EngineImpl::Origin* origin = engine_.origin(req_.url, scratch);
  if (origin == nullptr)
    return finish(OutcomeKind::kNotRetryable, cat({"invalid URL \"", printable(req_.url, 128), "\""}));
  if (!valid_method(req_.method))
    return finish(OutcomeKind::kNotRetryable, cat({"invalid method \"", printable(req_.method, 64), "\""}));
  if (!req_.pacer_key.empty()) {
    own_key_ = engine_.pacer_->key(req_.pacer_key);
  } else if (origin == &scratch) {
    own_key_ = std::move(scratch.key);
  } else {
    key_ = &origin->key;
  }
  server_clock_ = origin->clock;
  if (origin == &scratch) {
    host_storage_ = std::move(scratch.host);
    host_ = host_storage_;
  } else {
    host_ = origin->host;
  }
  prepare_costs();

  // A permitted time carried over from an earlier run (a resumed request).
  if (req_.not_before) {
    const WallTime now = engine_.wall_.now();
    if (*req_.not_before > now) return wait_not_before(now);
  }
  return enter_acquire();
}

namespace {

// The request target of an http(s) URL: from the path's '/' on, without a
// fragment ("/" when the URL has no path).
std::string_view target_of(std::string_view url) {
  const std::size_t scheme = url.find("://");
  const std::size_t from = scheme == std::string_view::npos ? 0 : scheme + 3;
  const std::size_t path = url.find_first_of("/?#", from);
  if (path == std::string_view::npos || url[path] != '/') return "/";
  return url.substr(path, url.find('#', path) - path);
}

}  // namespace

// What each send of the request reserves of quotas other than requests: the
// caller's word, else the estimate its profile's rule makes from the body.
void Machine::prepare_costs() {
  ObserveOptions o;
  o.host = host_;
  o.profile = req_.profile.empty() ? std::string_view(engine_.config_.profile) : std::string_view(req_.profile);
  o.registry = engine_.config_.registry;
  const Profile* profile = detail::selected_profile(o);
  profile_ = profile;
  cost_rule_ = profile != nullptr ? profile->costs : CostRule::kNone;
  if (!req_.costs.empty()) {
    costs_ = req_.costs;
  } else if (cost_rule_ != CostRule::kNone) {
    costs_ = detail::estimate_costs(cost_rule_, req_.method, target_of(req_.url), req_.body).costs;
  }
}

// The final answer's body passes a tap that reads what it used, when its
// request reserved something to settle.
void Machine::tap_usage(const Signals& signals) {
  usage_.reset();
  if (costs_.empty() || cost_rule_ == CostRule::kNone || signals.status < 200 || signals.status > 299) return;
  const std::optional<std::string_view> type =
      out_.response ? out_.response->headers.first("Content-Type") : std::nullopt;
  const bool stream = type && ascii::istarts_with(ascii::trim_ows(*type), "text/event-stream");
  usage_ = std::make_unique<detail::UsageTap>(cost_rule_, stream);
  answered_ = signals.received_mono;
  // A body of stated length, as sent: its last bytes are known when they
  // come, and the usage settles before the caller has them (see deliver()).
  usage_length_.reset();
  if (!stream && out_.response && !out_.response->headers.first("Content-Encoding")) {
    if (const auto length = out_.response->headers.first("Content-Length")) {
      std::uint64_t n = 0;
      const std::string_view v = ascii::trim_ows(*length);
      const auto r = std::from_chars(v.data(), v.data() + v.size(), n);
      if (r.ec == std::errc{} && r.ptr == v.data() + v.size()) usage_length_ = n;
    }
  }
}

// The body is whole: what it says was used settles the reservation.
void Machine::settle_usage() {
  if (!usage_) return;
  if (const auto used = usage_->usage()) engine_.pacer_->settle(*key_, answered_, SendCosts{costs_, *used});
  usage_.reset();
}

Step Machine::wait_not_before(WallTime now) {
  const Duration left = *req_.not_before - now;
  const MonoTime until = saturating_add(engine_.mono_.now(), left);
  if (send_deadline_ && until > *send_deadline_) {
    set_not_before(until);
    if (budget_binds_) {
      return finish(OutcomeKind::kDeferred, "the request's permitted time is past its longest acceptable wait");
    }
    return finish(OutcomeKind::kDeadlineExceeded, "the request's permitted time is after its deadline");
  }
  if (left > engine_.planner_.config().max_wait) {
    set_not_before(until);
    return finish(OutcomeKind::kDeferred, "the request's permitted time is beyond the maximum acceptable wait");
  }
  begin_wait(Event::WaitKind::kNotBefore, until);
  state_ = State::kNotBefore;
  return wait_step(until, Event::WaitKind::kNotBefore, "the request's permitted time");
}

Step Machine::enter_acquire() {
  begin_acquire();
  return try_acquire();
}

void Machine::begin_acquire() {
  state_ = State::kAcquire;
  wait_start_ = engine_.mono_.now();
  if (hooked()) {
    Event e = event(Event::Kind::kWaitStarted);
    e.wait_kind = Event::WaitKind::kPacer;
    emit(e);
  }
}

std::vector<UnitCost> Machine::none_used() const {
  std::vector<UnitCost> none = costs_;
  for (UnitCost& c : none) c.amount = 0;
  return none;
}

// The latest slot the pacer may hold the send to. send_by bounds a wait, so
// the time before the pacer was asked, and its store's time to answer (a
// Redis round trip on a loaded machine), are no wait: a slot due when the
// acquire began goes even if send_by has passed by then. The deadline is
// hard: nothing is sent after it.
std::optional<MonoTime> Machine::acquire_bound() const {
  if (!budget_binds_) return send_deadline_;
  MonoTime bound = std::max(*send_deadline_, wait_start_);
  if (req_.deadline && *req_.deadline < bound) bound = *req_.deadline;
  return bound;
}

Step Machine::try_acquire() {
  Pacer& pacer = *engine_.pacer_;
  if (blocking_) return from_permit(pacer.acquire(*key_, acquire_bound(), stop_, costs_));

  // Non-blocking: the pacer's answer, with the slot or the place in line
  // kept by the ticket until the next call.
  const TryAcquireResult r = pacer.try_acquire(ticket_, *key_, acquire_bound(), costs_);
  const MonoTime now = engine_.mono_.now();
  AcquireResult a;
  a.probe = r.probe;
  a.not_before = r.at;
  a.not_before_wall = r.not_before_wall;
  a.waited = now - wait_start_;
  a.cause = r.cause;
  a.held = r.held;
  switch (r.status) {
    case TryStatus::kPermit: a.status = AcquireStatus::kPermit; return from_permit(a);
    case TryStatus::kDeferred: a.status = AcquireStatus::kDeferred; return from_permit(a);
    case TryStatus::kDeadlineExceeded: a.status = AcquireStatus::kDeadlineExceeded; return from_permit(a);
    case TryStatus::kUnavailable: a.status = AcquireStatus::kUnavailable; return from_permit(a);
    case TryStatus::kReserved:
      if (r.held) {
        wait_reason_ = cat({"the pacer reserved this request's send for then (", describe(*r.held), ")"});
        return wait_step(r.at, Event::WaitKind::kPacer, wait_reason_);
      }
      return wait_step(r.at, Event::WaitKind::kPacer, "the pacer reserved this request's send for then");
    case TryStatus::kAskAgain: break;
  }
  // Never a wait that ends now: ask again a millisecond later at the earliest.
  const MonoTime until = std::max(r.at, saturating_add(now, std::chrono::milliseconds{1}));
  return wait_step(until, Event::WaitKind::kPacer,
                   "waiting for the answer to the pacer's probe (ask again then, or when notified)");
}

namespace {

// What held a send, in words: the cause, and the quota's counts when known
// ("the quota the server announced (tokens: 1,850 of 40,000 left, 4,100 needed)").
std::string held_text(const AcquireResult& permit) {
  if (!permit.held) return std::string(describe(permit.cause));
  return cat({describe(permit.cause), " (", describe(*permit.held), ")"});
}

}  // namespace

Step Machine::from_permit(const AcquireResult& permit) {
  out_.waited += permit.waited;
  if (hooked()) {
    Event e = event(Event::Kind::kWaitEnded);
    e.wait_kind = Event::WaitKind::kPacer;
    e.wait = permit.waited;
    e.cancelled = permit.status == AcquireStatus::kCancelled;
    if (permit.held) e.held = &*permit.held;
    emit(e);
  }
  switch (permit.status) {
    case AcquireStatus::kPermit: break;
    case AcquireStatus::kCancelled: return finish(OutcomeKind::kCancelled, "cancelled while waiting for the pacer");
    case AcquireStatus::kDeferred:
      out_.not_before_mono = permit.not_before;
      out_.not_before_wall = permit.not_before_wall;
      out_.held = permit.held;
      return finish(OutcomeKind::kDeferred, cat({"the pacer holds the send for ", held_text(permit),
                                                 ", past the maximum acceptable wait"}));
    case AcquireStatus::kDeadlineExceeded:
      out_.not_before_mono = permit.not_before;
      out_.not_before_wall = permit.not_before_wall;
      out_.held = permit.held;
      if (budget_binds_) {
        return finish(OutcomeKind::kDeferred, cat({"the pacer holds the send for ", held_text(permit),
                                                   ", past the longest acceptable wait"}));
      }
      return finish(OutcomeKind::kDeadlineExceeded,
                    cat({"the pacer holds the send for ", held_text(permit), ", past the deadline"}));
    case AcquireStatus::kUnavailable:
      out_.not_before_mono = permit.not_before;
      out_.not_before_wall = permit.not_before_wall;
      return finish(OutcomeKind::kDeferred, "the shared quota store is unavailable");
  }
  probe_ = permit.probe;
  ++attempt_;
  const WallTime started_wall = engine_.wall_.now();
  const MonoTime started_mono = engine_.mono_.now();
  // Only the deadline stops a permitted send here: send_by bounds the
  // pacer's hold, which the permit already kept to (acquire_bound()).
  if (req_.deadline && *req_.deadline - started_mono <= Duration::zero()) {
    abandon_probe();
    --attempt_;
    return finish(OutcomeKind::kDeadlineExceeded, "the deadline passed before the request could be sent");
  }
  // The attempt is built where it stays, in the outcome (see current()).
  Attempt& a = out_.attempts.emplace_back();
  a.number = attempt_;
  a.paced = permit.waited;
  if (permit.waited > Duration::zero()) a.held = permit.held;
  a.started_wall = started_wall;
  a.started_mono = started_mono;
  if (hooked()) emit(event(Event::Kind::kAttemptStarted));
  state_ = State::kSending;
  Step s;
  s.kind = Step::Kind::kSend;
  s.attempt = attempt_;
  s.probe = probe_;
  s.deadline = req_.deadline;
  return s;
}

Step Machine::next() {
  switch (state_) {
    case State::kStart: return start();
    case State::kNotBefore:
      if (engine_.mono_.now() < wait_until_)
        return wait_step(wait_until_, Event::WaitKind::kNotBefore, "the request's permitted time");
      end_wait(Event::WaitKind::kNotBefore, false);
      return enter_acquire();
    case State::kAcquire: return try_acquire();
    case State::kSending: failed("the transport reported no answer", true); return next();
    case State::kHintBody:
    case State::kBody: complete(); return next();
    case State::kRetryWait:
      if (engine_.mono_.now() < wait_until_)
        return wait_step(wait_until_, Event::WaitKind::kRetry,
                         out_.attempts.empty() ? std::string_view{} : std::string_view(out_.attempts.back().reason));
      end_wait(Event::WaitKind::kRetry, false);
      out_.not_before_mono.reset();
      out_.not_before_wall.reset();
      return enter_acquire();
    case State::kFinished: return Step{};
  }
  return Step{};
}

// Plans after the attempt in current(); true when the answer is final and its
// body is wanted.
bool Machine::decide(const Signals* signals, std::string_view error, bool sent) {
  // A response's times are in its Signals; a transport error's are now.
  PlanInput input = signals != nullptr
                        ? PlanInput(Outcome(*signals))
                        : PlanInput(Outcome(TransportError{sent, engine_.wall_.now(), engine_.mono_.now()}));
  input.method = req_.method;
  input.idempotency_key = has_key();
  input.declared_non_idempotent = req_.non_idempotent;
  input.attempt = attempt_;
  input.max_attempts = std::max<std::int64_t>(engine_.config_.max_attempts, 1);
  input.deadline = send_deadline_;
  input.deadline_is_wait_budget = budget_binds_;
  input.previous_backoff = previous_backoff_;
  if (signals != nullptr) {
    if (hooked()) {
      Event e = event(Event::Kind::kResponseObserved);
      e.response = &*out_.response;
      e.signals = signals;
      emit(e);
    }
  } else {
    emit_error(error);
  }
  Attempt& a = current();
  a.plan = engine_.planner_.decide(input, *engine_.random_);
  // Most attempts' sentence is a constant: pointed at, not allocated (twice:
  // the outcome's reason is a copy of the last attempt's).
  if (const std::string_view fixed = Planner::constant_sentence(a.plan); !fixed.empty()) {
    a.reason.assign(fixed);
  } else if (signals != nullptr) {
    a.reason = engine_.planner_.describe(a.plan, input);
  } else {
    a.reason = cat({error, ". ", engine_.planner_.describe(a.plan, input)});
  }
  if (signals != nullptr) a.warnings = signals->warnings;
  if (!a.plan.notes.empty()) {
    for (std::string& n : notes_text(a.plan.notes)) a.warnings.push_back(std::move(n));
  }
  if (hooked()) {
    Event e = event(Event::Kind::kDecision);
    e.plan = &a.plan;
    e.reason = a.reason;
    emit(e);
  }
  const Plan& plan = a.plan;
  if (plan.not_before_mono) {
    out_.not_before_mono = plan.not_before_mono;
    out_.not_before_wall = plan.not_before_wall;
  }

  switch (plan.decision) {
    case Decision::kRetry: {
      previous_backoff_ = saturating_add(plan.backoff, plan.jitter);
      const MonoTime received = signals != nullptr ? signals->received_mono : input.outcome.transport.at_mono;
      const MonoTime until = plan.not_before_mono.value_or(saturating_add(received, plan.wait));
      begin_wait(Event::WaitKind::kRetry, until);
      state_ = State::kRetryWait;
      return false;
    }
    case Decision::kDone:
    case Decision::kDeferred:
    case Decision::kDeadlineExceeded:
    case Decision::kNotRetryable:
    case Decision::kExhausted: break;
  }
  OutcomeKind kind = OutcomeKind::kNotRetryable;
  switch (plan.decision) {
    case Decision::kDone: kind = OutcomeKind::kDone; break;
    case Decision::kDeferred: kind = OutcomeKind::kDeferred; break;
    case Decision::kDeadlineExceeded: kind = OutcomeKind::kDeadlineExceeded; break;
    case Decision::kExhausted: kind = OutcomeKind::kExhausted; break;
    case Decision::kNotRetryable: out_.ambiguous = plan.ambiguous; break;
    case Decision::kRetry: break;
  }
  if (signals == nullptr) {
    finish(kind, out_.attempts.back().reason);
    return false;
  }
  // This answer ends the request: its body is the caller's, and the
  // outcome is final once the body is in (with this attempt's reason).
  pending_kind_ = kind;
  state_ = State::kBody;
  return true;
}

bool Machine::head(int status, HeaderList headers, WallTime received_wall, MonoTime received_mono, int http_version) {
  if (state_ != State::kSending) return false;
  Attempt& a = current();
  a.sent = true;
  a.status = status;
  ObserveOptions options;
  options.host = host_;
  options.profile = req_.profile.empty() ? std::string_view(engine_.config_.profile) : std::string_view(req_.profile);
  options.registry = engine_.config_.registry;
  options.robust = engine_.config_.robust;
  options.heuristic = engine_.config_.heuristic;
  // The floor is used only with the response's own Date: without a Date line
  // the origin's clock (and its lock) is not consulted.
  if (server_clock_ != nullptr && headers.first("date")) {
    options.server_time_floor = server_clock_->trusted_floor_at(received_mono);
  }
  Signals signals = observe(status, headers, received_wall, received_mono, options);
  if (server_clock_ != nullptr) server_clock_->learn(signals, a.started_mono);
  Response& r = out_.response.emplace();
  r.status = status;
  r.headers = std::move(headers);
  r.http_version = http_version;
  r.received_wall = received_wall;
  r.received_mono = received_mono;
  out_.body_bytes = 0;
  if (signals.limited && profile_ != nullptr && !profile_->body_hints.empty()) {
    // The wait may be in the body: read it before planning (complete()).
    held_ = std::move(signals);
    held_body_.clear();
    state_ = State::kHintBody;
    return true;
  }
  return answer(signals);
}

// The answer heard whole (its head, and any wait its body stated): the pacer
// records it, the plan follows; true when it ends the request.
bool Machine::answer(const Signals& signals) {
  // Whatever the answer said about quota is real: the pacer hears it (and
  // the probe, if this was one, has its answer). A limited answer used none
  // of what its send reserved (the request was refused).
  if (costs_.empty()) {
    engine_.pacer_->record(*key_, signals);
  } else if (signals.limited) {
    const std::vector<UnitCost> none = none_used();
    engine_.pacer_->record(*key_, signals, SendCosts{costs_, none});
  } else {
    engine_.pacer_->record(*key_, signals, SendCosts{costs_, {}});
  }
  probe_ = false;
  const bool wanted = decide(&signals, {}, true);
  if (wanted) tap_usage(signals);
  return wanted;
}

// The held limited answer is planned: with the wait its body states when it
// is whole (`whole`), on its head alone when the body is past what is read.
// True when it ends the request (what was held then goes to the sink).
bool Machine::decide_on_held_body(bool whole) {
  Signals s = std::move(*held_);
  held_.reset();
  if (whole) {
    const std::span<const BodyHintKind> kinds = profile_->body_hints;
    (void)detail::apply_body_hint(kinds, held_body_, s);
  }
  std::string body = std::move(held_body_);
  held_body_.clear();
  if (!answer(s)) return false;
  return deliver(body);
}

// Body bytes of the answer that ends the request: counted, read for usage,
// given to the sink.
bool Machine::deliver(std::string_view chunk) {
  out_.body_bytes += chunk.size();
  if (usage_) {
    usage_->feed(chunk);
    // The body's last bytes: settled before the caller has them, so that the
    // request it sends next (a proxy's caller, at once) meets the settled
    // count, not the reservation.
    if (usage_length_ && out_.body_bytes >= *usage_length_) settle_usage();
  }
  if (sink_ && !sink_(chunk)) {
    out_.attempts.back().error = "the body's destination refused it";
    finish(OutcomeKind::kNotRetryable, "the body's destination stopped the transfer");
    return false;
  }
  return true;
}

bool Machine::body(std::string_view chunk) {
  if (state_ == State::kHintBody) {
    if (chunk.size() <= detail::kMaxBodyHintBytes - held_body_.size()) {
      held_body_.append(chunk);
      return true;
    }
    // Longer than a wait is ever stated in: planned on the head alone. A
    // retry drops the rest; an answer that ends the request goes on.
    if (!decide_on_held_body(false)) return false;
  }
  if (state_ != State::kBody) return false;
  return deliver(chunk);
}

void Machine::complete() {
  if (state_ == State::kHintBody && !decide_on_held_body(true)) return;
  if (state_ != State::kBody) return;
  settle_usage();
  finish(pending_kind_, out_.attempts.back().reason);
}

void Machine::failed(std::string_view error_bytes, bool sent, bool timed_out) {
  const std::string error = printable(error_bytes, kMaxErrorText);
  // A limited answer whose body broke off while it was read for its wait:
  // planned on its head alone; its body is the caller's only if it ends the
  // request, and then it broke off like any other.
  if (state_ == State::kHintBody) {
    held_body_.clear();
    if (!decide_on_held_body(false)) return;
  }
  if (state_ == State::kBody) {
    if (out_.body_bytes == 0) {
      // Nothing reached the sink yet: the attempt failed like any transfer
      // and is planned again as a transport error (a GET is retried).
      out_.ambiguous = false;  // planned afresh below
      out_.not_before_mono.reset();
      out_.not_before_wall.reset();
      state_ = State::kSending;
    } else {
      // Part of the body is at the sink already: it is not fetched again
      // behind the caller's back.
      Attempt& a = out_.attempts.back();
      a.error = error;
      a.timed_out = timed_out;
      out_.ambiguous = !idempotent_request();
      emit_error(error);
      finish(OutcomeKind::kNotRetryable,
             cat({"the body broke off after ", std::to_string(out_.body_bytes), " bytes: ", error}));
      return;
    }
  }
  if (state_ != State::kSending) return;
  current().sent = sent;
  current().error = error;
  current().timed_out = timed_out;
  abandon_probe();
  if (blocking_ && stop_.stop_requested()) {
    emit_error(error);
    end_here(OutcomeKind::kCancelled,
             sent ? "cancelled while the request was in flight" : "cancelled before the request was sent");
    return;
  }
  if (req_.deadline && engine_.mono_.now() >= *req_.deadline) {
    emit_error(error);
    end_here(OutcomeKind::kDeadlineExceeded, sent ? "the deadline passed while waiting for the response"
                                                  : "the deadline passed before the request could be sent");
    return;
  }
  (void)decide(nullptr, error, sent);
}

void Machine::refuse(std::string_view why_bytes) {
  if (state_ != State::kSending) return;
  const std::string why = printable(why_bytes, kMaxErrorText);
  current().sent = false;
  current().error = why;
  abandon_probe();
  emit_error(why);
  end_here(OutcomeKind::kNotRetryable, cat({"the request cannot be sent: ", why}));
}

void Machine::withdraw() {
  if (state_ != State::kSending) return;
  emit_error("not sent: the server asked for a wait after this attempt was permitted");
  abandon_probe();
  if (!costs_.empty()) {
    // What the permit reserved goes back: nothing was sent.
    const std::vector<UnitCost> none = none_used();
    engine_.pacer_->settle(*key_, engine_.mono_.now(), SendCosts{costs_, none});
  }
  out_.attempts.pop_back();
  --attempt_;
  begin_acquire();  // next() asks the pacer again
}

void Machine::reject_body(std::string_view error_bytes) {
  if (state_ != State::kBody) return;
  const std::string error = printable(error_bytes, kMaxErrorText);
  out_.attempts.back().error = error;
  out_.ambiguous = !idempotent_request();
  emit_error(error);
  finish(OutcomeKind::kNotRetryable, cat({"the ", error}));
}

void Machine::head_too_large(int status, HeaderList lines_read, WallTime received_wall, MonoTime received_mono,
                             std::string_view error_bytes) {
  if (state_ != State::kSending) return;
  const std::string error = printable(error_bytes, kMaxErrorText);
  // What was read is real: the pacer and the planner hear it, which sets the
  // permitted time when it carried one.
  const bool final_answer = head(status, std::move(lines_read), received_wall, received_mono);
  if (state_ == State::kFinished) return;
  out_.attempts.back().error = error;
  emit_error(error);
  if (state_ == State::kRetryWait) {
    end_wait(Event::WaitKind::kRetry, true);
    if (!out_.not_before_mono) set_not_before(wait_until_);
  }
  // An answer that ends the request anyway (deferred, deadline_exceeded, ...)
  // keeps its outcome: running it again later is still right.
  const OutcomeKind kind = final_answer && pending_kind_ != OutcomeKind::kDone ? pending_kind_
                                                                               : OutcomeKind::kNotRetryable;
  if (final_answer && kind == OutcomeKind::kNotRetryable) out_.ambiguous = !idempotent_request();
  finish(kind, cat({"the ", error, "; the same head would come again"}));
}

void Machine::cancel(bool sent) {
  switch (state_) {
    case State::kStart: finish(OutcomeKind::kCancelled, "cancelled before the first attempt"); return;
    case State::kNotBefore:
      end_wait(Event::WaitKind::kNotBefore, true);
      set_not_before(wait_until_);
      finish(OutcomeKind::kCancelled, "cancelled while waiting for the request's permitted time");
      return;
    case State::kAcquire: {
      ticket_.release();  // the slot reserved for it goes to the next request
      AcquireResult r;
      r.status = AcquireStatus::kCancelled;
      r.waited = engine_.mono_.now() - wait_start_;
      from_permit(r);
      return;
    }
    case State::kSending:
      current().sent = sent;
      current().error = "cancelled";
      abandon_probe();
      emit_error(current().error);
      end_here(OutcomeKind::kCancelled,
               sent ? "cancelled while the request was in flight" : "cancelled before the request was sent");
      return;
    case State::kHintBody:
      // A limited answer: the pacer hears it, though nobody waits for its plan.
      held_body_.clear();
      engine_.pacer_->record(*key_, *held_);
      probe_ = false;
      held_.reset();
      out_.ambiguous = !idempotent_request();
      finish(OutcomeKind::kCancelled, "cancelled while the body was arriving");
      return;
    case State::kBody:
      out_.ambiguous = !idempotent_request();
      finish(OutcomeKind::kCancelled, "cancelled while the body was arriving");
      return;
    case State::kRetryWait:
      end_wait(Event::WaitKind::kRetry, true);
      finish(OutcomeKind::kCancelled, "cancelled while waiting to retry");
      return;
    case State::kFinished: return;
  }
}

}  // namespace engine
}  // namespace abide
