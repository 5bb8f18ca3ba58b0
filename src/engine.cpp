// The engine: one request's acquire -> send -> observe -> record -> decide ->
// wait loop as a state machine (see abide/engine.h).
#include "abide/engine.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <initializer_list>
#include <random>
#include <utility>

#include "ascii.h"
#include "concat.h"
#include "decimal.h"
#include "body_hint.h"
#include "llm/cost_estimate.h"
#include "llm/usage_tap.h"
#include "engine_impl.h"
#include "profile_select.h"

namespace abide {
namespace {

// What parse_origin rejects in any part of a URL.
bool url_bytes_ok(std::string_view url) noexcept {
  if (url.empty() || url.size() > 65536) return false;
  for (char c : url) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return false;
  }
  return true;
}

// The scheme and authority of a URL as written ("HTTPS://Api.Example.com:443"),
// everything parse_origin reads for the origin and host. Empty when there is
// none, or when the authority carries userinfo (credentials are not kept).
// Plain loops: this runs for every request.
std::string_view origin_part(std::string_view url) noexcept {
  std::size_t i = 0;
  while (i + 2 < url.size() && !(url[i] == ':' && url[i + 1] == '/' && url[i + 2] == '/')) ++i;
  if (i + 2 >= url.size()) return {};
  for (std::size_t j = i + 3; j < url.size(); ++j) {
    const char c = url[j];
    if (c == '/' || c == '?' || c == '#') return url.substr(0, j);
    if (c == '@') return {};
  }
  return url;
}

// No byte that parse_origin rejects (controls, space, DEL; without its length
// rule). It runs over the rest of every request's URL, so eight bytes at a
// time: (w - 0x21 in each byte) & ~w has a byte's high bit set exactly when
// some byte is below 0x21 (no byte at or above it borrows), and the same with
// w ^ 0x7f.. and 0x01.. finds a DEL.
bool no_bad_bytes(std::string_view s) noexcept {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
  constexpr std::uint64_t kHigh = 0x8080808080808080ULL;
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, s.data() + i, 8);
    const std::uint64_t del = w ^ (kOnes * 0x7f);
    if ((((w - kOnes * 0x21) & ~w) | ((del - kOnes) & ~del)) & kHigh) return false;
  }
  for (; i < s.size(); ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u <= 0x20 || u == 0x7f) return false;
  }
  return true;
}

// `part` is origin_part(url): url starts with it, and the authority ends there.
bool starts_with_part(std::string_view url, std::string_view part) noexcept {
  if (part.empty() || url.size() < part.size() || url.compare(0, part.size(), part) != 0) return false;
  if (url.size() == part.size()) return true;
  const char c = url[part.size()];
  return c == '/' || c == '?' || c == '#';
}

// The last origin this thread looked up, per engine: most requests go where
// the previous one went, and this skips the lock and the hash. It points into
// the engine's cache (entries are never erased), so it is trivially
// destructible and each access is a plain thread-local load; an engine's id is
// never reused, so an entry of a destroyed engine is never matched.
struct LastOrigin {
  std::uint64_t engine = 0;
  const std::string* part = nullptr;  // the cache's key
  const void* entry = nullptr;
};
thread_local LastOrigin last_origin;

std::atomic<std::uint64_t> next_engine_id{1};

bool valid_method(std::string_view m) noexcept {
  return !m.empty() && m.size() <= 64 && std::all_of(m.begin(), m.end(), ascii::is_tchar);
}

bool host_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~' || c == '%';
}

bool ipv6_char(char c) noexcept { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == ':' || c == '.'; }

std::shared_ptr<RandomSource> default_random() {
  std::random_device rd;
  const std::uint64_t seed = (std::uint64_t{rd()} << 32) ^ std::uint64_t{rd()};
  return std::make_shared<SeededRandom>(seed);
}

using detail::cat;

// Transport errors are shown to people and may quote a server.
constexpr std::size_t kMaxErrorText = 256;

}  // namespace

std::optional<UrlOrigin> parse_origin(std::string_view url) {
  if (!url_bytes_ok(url)) return std::nullopt;
  UrlOrigin out;
  const std::size_t colon = url.find("://");
  if (colon == std::string_view::npos) return std::nullopt;
  for (char c : url.substr(0, colon)) out.scheme.push_back(ascii::to_lower(c));
  if (out.scheme != "http" && out.scheme != "https") return std::nullopt;
  const std::uint16_t default_port = out.scheme == "http" ? 80 : 443;
  std::string_view rest = url.substr(colon + 3);
  const std::size_t end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  std::string_view tail = end == std::string_view::npos ? std::string_view{} : rest.substr(end);
  // Userinfo names no part of the origin (it is the transport's business).
  if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  if (authority.empty()) return std::nullopt;

  std::string_view host;
  std::string_view port_text;
  bool bracketed = false;
  if (authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = authority.substr(1, close - 1);
    bracketed = true;
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return std::nullopt;
      port_text = after.substr(1);
      if (port_text.empty()) return std::nullopt;
    }
  } else {
    const std::size_t c = authority.find(':');
    host = authority.substr(0, c);
    if (c != std::string_view::npos) {
      port_text = authority.substr(c + 1);
      if (port_text.empty()) return std::nullopt;
    }
  }
  if (host.empty() || host.size() > 253) return std::nullopt;
  for (char c : host) out.host.push_back(ascii::to_lower(c));
  for (char c : out.host) {
    if (!(bracketed ? ipv6_char(c) : host_char(c))) return std::nullopt;
  }

  out.port = default_port;
  if (!port_text.empty()) {
    if (port_text.size() > 5) return std::nullopt;
    const auto value = detail::parse_decimal<unsigned, 65535>(port_text);
    if (!value || *value == 0) return std::nullopt;
    out.port = static_cast<std::uint16_t>(*value);
  }
  out.origin.reserve(out.scheme.size() + out.host.size() + 11);
  out.origin.append(out.scheme).append("://");
  if (bracketed) out.origin.push_back('[');
  out.origin.append(out.host);
  if (bracketed) out.origin.push_back(']');
  if (!port_text.empty() && out.port != default_port) out.origin.append(":").append(std::to_string(out.port));

  tail = tail.substr(0, tail.find('#'));
  out.target = cat({tail.empty() || tail.front() != '/' ? "/" : "", tail});
  return out;
}

std::optional<std::string> origin_of(std::string_view url) {
  auto parts = parse_origin(url);
  if (!parts) return std::nullopt;
  return std::move(parts->origin);
}

namespace engine {

std::string_view to_string(OutcomeKind k) noexcept {
  switch (k) {
    case OutcomeKind::kDone: return "done";
    case OutcomeKind::kDeferred: return "deferred";
    case OutcomeKind::kDeadlineExceeded: return "deadline_exceeded";
    case OutcomeKind::kNotRetryable: return "not_retryable";
    case OutcomeKind::kExhausted: return "exhausted";
    case OutcomeKind::kCancelled: return "cancelled";
  }
  return "?";
}

}  // namespace engine

// ---- the engine's shared state ----

namespace detail {

// The engine's own pacer counts the quotas its planner counts, so both hold
// the same permitted time.
std::shared_ptr<Pacer> own_pacer(const engine::Config& c, const MonotonicClock& mono, const WallClock& wall) {
  PacerConfig p = c.pacer_config;
  p.use_low_confidence_quota = p.use_low_confidence_quota || c.planner.use_low_confidence_quota;
  p.mono = &mono;
  p.wall = &wall;
  return std::make_shared<Pacer>(p);
}

EngineImpl::EngineImpl(engine::Config config)
    : config_(std::move(config)),
      mono_(config_.mono != nullptr ? *config_.mono : system_monotonic_clock()),
      wall_(config_.wall != nullptr ? *config_.wall : system_wall_clock()),
      planner_(config_.planner),
      pacer_(config_.pacer ? config_.pacer : own_pacer(config_, mono_, wall_)),
      random_(config_.random ? config_.random : default_random()),
      id_(next_engine_id.fetch_add(1, std::memory_order_relaxed)) {}

ServerClock* EngineImpl::server_clock(std::string_view origin) {
  MutexLock lock(clocks_mu_);
  if (auto it = clocks_.find(origin); it != clocks_.end()) return it->second.get();
  if (clocks_.size() >= kMaxServerClocks) return nullptr;  // beyond it: each answer by its own Date
  return clocks_.emplace(std::string(origin), std::make_unique<ServerClock>()).first->second.get();
}

const EngineImpl::Origin* EngineImpl::origin(std::string_view url, Origin& scratch) {
  if (url.empty() || url.size() > 65536) return nullptr;
  LastOrigin& last = last_origin;
  if (last.engine == id_ && starts_with_part(url, *last.part)) {
    // The part's bytes were checked when it was cached.
    if (!no_bad_bytes(url.substr(last.part->size()))) return nullptr;
    return static_cast<const Origin*>(last.entry);
  }
  if (!no_bad_bytes(url)) return nullptr;
  const std::string_view part = origin_part(url);
  if (!part.empty()) {
    const std::pair<const std::string, Origin>* found = nullptr;
    {
      MutexLock lock(origins_mu_);
      if (auto it = origins_.find(part); it != origins_.end()) found = &*it;
    }
    if (found != nullptr) {
      last.engine = id_;
      last.part = &found->first;
      last.entry = &found->second;
      return &found->second;
    }
  }
  auto parts = parse_origin(url);
  if (!parts) return nullptr;
  scratch.key = pacer_->key(abide::pacer_key(parts->origin));
  scratch.clock = server_clock(parts->origin);
  scratch.host = std::move(parts->host);
  if (part.empty()) return &scratch;
  MutexLock lock(origins_mu_);
  // The cache holds pacer keys: it leaves the pacer at least half of its own bound.
  if (origins_.size() >= std::min(kMaxOrigins, pacer_->config().max_keys / 2)) return &scratch;
  const auto& entry = *origins_.try_emplace(std::string(part), std::move(scratch)).first;
  last.engine = id_;
  last.part = &entry.first;
  last.entry = &entry.second;
  return &entry.second;
}

}  // namespace detail

namespace engine {

// ---- Engine ----

Engine::Engine(Config config) : impl_(std::make_unique<detail::EngineImpl>(std::move(config))) {}
Engine::~Engine() = default;

Pacer& Engine::pacer() noexcept { return *impl_->pacer_; }
const Planner& Engine::planner() const noexcept { return impl_->planner_; }
const Config& Engine::config() const noexcept { return impl_->config_; }
const MonotonicClock& Engine::mono() const noexcept { return impl_->mono_; }
const WallClock& Engine::wall() const noexcept { return impl_->wall_; }

RequestOutcome Engine::run(const Request& request, Transport& transport, BodySink sink, std::stop_token stop,
                           std::size_t index, EventHook hook) {
  Machine r(*this, request, std::move(sink), index, std::move(hook));
  r.blocking_ = true;
  r.stop_ = stop;
  for (;;) {
    if (stop.stop_requested() && !r.finished()) r.cancel(false);
    const Step step = r.next();
    switch (step.kind) {
      case Step::Kind::kFinished: return r.take_outcome();
      case Step::Kind::kSend:
        transport.perform(request, step, r, stop);
        // A transport that reported nothing failed; one that did not say the
        // body ended finished it.
        if (r.state_ == Machine::State::kSending) r.failed("the transport reported no answer", true);
        if (r.state_ == Machine::State::kBody) r.complete();
        break;
      case Step::Kind::kWait:
        if (step.until > impl_->mono_.now() && impl_->mono_.sleep_until(step.until, stop) == WaitResult::kCancelled) r.cancel(false);
        break;
    }
  }
}

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

Step Machine::try_acquire() {
  Pacer& pacer = *engine_.pacer_;
  if (blocking_) return from_permit(pacer.acquire(*key_, send_deadline_, stop_, costs_));

  // Non-blocking: the pacer's answer, with the slot or the place in line
  // kept by the ticket until the next call.
  const TryAcquireResult r = pacer.try_acquire(ticket_, *key_, send_deadline_, costs_);
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
  if (send_deadline_ && *send_deadline_ - started_mono <= Duration::zero()) {
    abandon_probe();
    --attempt_;
    if (budget_binds_) return finish(OutcomeKind::kDeferred, "the longest acceptable wait ended before the send");
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
