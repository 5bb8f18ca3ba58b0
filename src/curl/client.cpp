// abide::Client: pacer -> send -> observe -> plan -> wait, until an outcome
// (see abide/client.h).
#include "abide/client.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "transport.h"

namespace abide {
namespace {

using curl_detail::Exchange;
using curl_detail::Transport;

constexpr std::size_t kMaxJobs = 256;
constexpr std::size_t kMaxIdleTransports = 256;

std::shared_ptr<RandomSource> default_random() {
  std::random_device rd;
  const std::uint64_t seed = (std::uint64_t{rd()} << 32) ^ std::uint64_t{rd()};
  return std::make_shared<SeededRandom>(seed);
}

}  // namespace

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

namespace {
// The client's own pacer counts the quotas its planner counts, so that both
// hold the same permitted time (permitted_wait()).
PacerConfig own_pacer_config(const ClientConfig& c) {
  PacerConfig p = c.pacer_config;
  p.use_low_confidence_quota = p.use_low_confidence_quota || c.planner.use_low_confidence_quota;
  return p;
}
}  // namespace

struct Client::Impl {
  explicit Impl(ClientConfig c)
      : config(std::move(c)),
        mono(config.mono != nullptr ? *config.mono : system_monotonic_clock()),
        wall(config.wall != nullptr ? *config.wall : system_wall_clock()),
        planner(config.planner),
        pacer(config.pacer ? config.pacer : std::make_shared<Pacer>(own_pacer_config(config), nullptr, mono, wall)),
        random(config.random ? config.random : default_random()) {
    curl_detail::global_init();
  }

  ClientConfig config;
  const MonotonicClock& mono;
  const WallClock& wall;
  Planner planner;
  std::shared_ptr<Pacer> pacer;
  std::shared_ptr<RandomSource> random;

  std::mutex pool_mu;
  std::vector<std::unique_ptr<Transport>> idle;

  // What each origin's clock reads (rule 3, tightened over many responses).
  static constexpr std::size_t kMaxServerClocks = 4096;
  std::mutex clocks_mu;
  std::map<std::string, std::unique_ptr<ServerClock>, std::less<>> clocks;
  ServerClock* server_clock(std::string_view origin) {
    std::lock_guard lock(clocks_mu);
    if (auto it = clocks.find(origin); it != clocks.end()) return it->second.get();
    if (clocks.size() >= kMaxServerClocks) return nullptr;  // beyond it: each response alone
    return clocks.emplace(std::string(origin), std::make_unique<ServerClock>()).first->second.get();
  }

  std::unique_ptr<Transport> checkout() {
    {
      std::lock_guard lock(pool_mu);
      if (!idle.empty()) {
        auto t = std::move(idle.back());
        idle.pop_back();
        return t;
      }
    }
    return std::make_unique<Transport>();
  }
  void checkin(std::unique_ptr<Transport> t) {
    std::lock_guard lock(pool_mu);
    if (idle.size() < kMaxIdleTransports) idle.push_back(std::move(t));
  }

  RequestOutcome run(const Request& req, std::size_t index, Transport& transport, std::stop_token stop);
  class Run;
};

// One request's run: the outcome being built and the events it reports.
class Client::Impl::Run {
 public:
  Run(Client::Impl& impl, const Request& req, std::size_t index) : impl_(impl), req_(req), index_(index) {}

  RequestOutcome go(Transport& transport, std::stop_token stop);

 private:
  ClientEvent event(ClientEvent::Kind kind) const {
    ClientEvent e;
    e.kind = kind;
    e.index = index_;
    e.request = &req_;
    e.attempt = attempt_;
    e.at = impl_.mono.now();
    return e;
  }
  void emit(const ClientEvent& e) const {
    if (!impl_.config.on_event) return;
    try {
      impl_.config.on_event(e);
    } catch (...) {  // a hook must not lose a request
    }
  }
  RequestOutcome finish(OutcomeKind kind, std::string reason) {
    out_.kind = kind;
    out_.reason = std::move(reason);
    ClientEvent e = event(ClientEvent::Kind::kFinished);
    e.outcome = &out_;
    emit(e);
    return std::move(out_);
  }
  void set_not_before(MonoTime mono) {
    out_.not_before_mono = mono;
    out_.not_before_wall = saturating_add(impl_.wall.now(), mono - impl_.mono.now());
  }
  void set_not_before(const Plan& p) {
    out_.not_before_mono = p.not_before_mono;
    out_.not_before_wall = p.not_before_wall;
  }
  // Waits (cancellably) until `until`; false when cancelled.
  bool wait(MonoTime until, ClientEvent::WaitKind kind) {
    const MonoTime start = impl_.mono.now();
    ClientEvent e = event(ClientEvent::Kind::kWaitStarted);
    e.wait_kind = kind;
    e.wait = until > start ? until - start : Duration::zero();
    emit(e);
    const WaitResult r = until > start ? impl_.mono.sleep_until(until, stop_) : WaitResult::kReached;
    const MonoTime end = impl_.mono.now();
    out_.waited += end - start;
    ClientEvent ended = event(ClientEvent::Kind::kWaitEnded);
    ended.wait_kind = kind;
    ended.wait = end - start;
    ended.cancelled = r == WaitResult::kCancelled || stop_.stop_requested();
    emit(ended);
    return !ended.cancelled;
  }
  bool idempotent_request() const {
    return !req_.non_idempotent && impl_.planner.idempotent(req_.method);
  }
  bool has_key() const {
    return (req_.idempotency_key && !req_.idempotency_key->empty()) || req_.headers.count("Idempotency-Key") > 0;
  }

  Client::Impl& impl_;
  const Request& req_;
  std::size_t index_;
  std::stop_token stop_;
  std::int64_t attempt_ = 0;
  RequestOutcome out_;
};

RequestOutcome Client::Impl::Run::go(Transport& transport, std::stop_token stop) {
  stop_ = stop;
  if (stop.stop_requested()) return finish(OutcomeKind::kCancelled, "cancelled before the first attempt");
  auto url = curl_detail::parse_url(req_.url);
  if (!url) return finish(OutcomeKind::kNotRetryable, "invalid URL: " + url.error());
  if (!curl_detail::valid_token(req_.method))
    return finish(OutcomeKind::kNotRetryable, "invalid method \"" + req_.method + "\"");

  Pacer& pacer = *impl_.pacer;
  const Pacer::Key key = pacer.key(req_.pacer_key.empty() ? pacer_key(url->origin) : std::string_view(req_.pacer_key));
  ObserveOptions observe_options;
  observe_options.host = url->host;
  observe_options.profile = impl_.config.profile;
  observe_options.registry = impl_.config.registry;
  observe_options.robust = impl_.config.robust;
  observe_options.heuristic = impl_.config.heuristic;
  ServerClock* const server_clock = impl_.server_clock(url->origin);

  // A permitted time carried over from an earlier run (a resumed request).
  if (const WallTime now = impl_.wall.now(); req_.not_before && *req_.not_before > now) {
    const Duration left = *req_.not_before - now;
    const MonoTime until = saturating_add(impl_.mono.now(), left);
    if (req_.deadline && until > *req_.deadline) {
      set_not_before(until);
      return finish(OutcomeKind::kDeadlineExceeded, "the request's permitted time is after its deadline");
    }
    if (left > impl_.config.planner.max_wait) {
      set_not_before(until);
      return finish(OutcomeKind::kDeferred, "the request's permitted time is beyond the maximum acceptable wait");
    }
    if (!wait(until, ClientEvent::WaitKind::kNotBefore)) {
      set_not_before(until);
      return finish(OutcomeKind::kCancelled, "cancelled while waiting for the request's permitted time");
    }
  }

  std::optional<Duration> previous_backoff;
  const std::int64_t max_attempts = std::max<std::int64_t>(impl_.config.max_attempts, 1);
  while (true) {
    if (stop.stop_requested()) return finish(OutcomeKind::kCancelled, "cancelled");

    // The pacer: spend quota evenly, honour cooldowns.
    {
      ClientEvent e = event(ClientEvent::Kind::kWaitStarted);
      e.wait_kind = ClientEvent::WaitKind::kPacer;
      emit(e);
    }
    const AcquireResult permit = pacer.acquire(key, req_.deadline, stop);
    out_.waited += permit.waited;
    {
      ClientEvent e = event(ClientEvent::Kind::kWaitEnded);
      e.wait_kind = ClientEvent::WaitKind::kPacer;
      e.wait = permit.waited;
      e.cancelled = permit.status == AcquireStatus::kCancelled;
      emit(e);
    }
    switch (permit.status) {
      case AcquireStatus::kPermit:
        break;
      case AcquireStatus::kCancelled:
        return finish(OutcomeKind::kCancelled, "cancelled while waiting for the pacer");
      case AcquireStatus::kDeferred:
        out_.not_before_mono = permit.not_before;
        out_.not_before_wall = permit.not_before_wall;
        return finish(OutcomeKind::kDeferred, "the quota permits the next send only after the maximum acceptable wait");
      case AcquireStatus::kDeadlineExceeded:
        out_.not_before_mono = permit.not_before;
        out_.not_before_wall = permit.not_before_wall;
        return finish(OutcomeKind::kDeadlineExceeded, "the quota permits the next send only after the deadline");
      case AcquireStatus::kUnavailable:
        out_.not_before_mono = permit.not_before;
        out_.not_before_wall = permit.not_before_wall;
        return finish(OutcomeKind::kDeferred, "the shared quota store is unavailable");
    }
    const auto abandon = [&] {
      if (permit.probe) pacer.abandon_probe(key);
    };

    ++attempt_;
    Attempt a;
    a.number = attempt_;
    a.paced = permit.waited;
    a.started_wall = impl_.wall.now();
    a.started_mono = impl_.mono.now();

    curl_detail::TransferLimits limits;
    limits.connect_timeout = impl_.config.connect_timeout;
    limits.timeout = impl_.config.attempt_timeout;
    limits.max_body_bytes = impl_.config.max_body_bytes;
    limits.max_header_bytes = impl_.config.max_header_bytes;
    limits.user_agent = impl_.config.user_agent;
    limits.verify_tls = impl_.config.verify_tls;
    bool deadline_bounds_transfer = false;
    if (req_.deadline) {
      const Duration left = *req_.deadline - a.started_mono;
      if (left <= Duration::zero()) {
        abandon();
        --attempt_;
        return finish(OutcomeKind::kDeadlineExceeded, "the deadline passed before the request could be sent");
      }
      if (limits.timeout == Duration::zero() || left < limits.timeout) {
        limits.timeout = left;
        deadline_bounds_transfer = true;
      }
    }

    emit(event(ClientEvent::Kind::kAttemptStarted));
    Exchange ex = transport.perform(req_, limits, impl_.mono, impl_.wall, stop);
    a.sent = ex.sent;
    a.status = ex.head_complete ? ex.status : 0;
    if (ex.result != Exchange::Result::kResponse) a.error = ex.error;

    // Whatever a response head said about quota is real, even when its body
    // then failed: the pacer hears it.
    std::optional<Signals> signals;
    if (ex.head_complete) {
      if (server_clock != nullptr) observe_options.server_time_floor = server_clock->trusted_floor_at(ex.received_mono);
      signals = observe(ex.status, ex.headers, ex.received_wall, ex.received_mono, observe_options);
      if (server_clock != nullptr) server_clock->learn(*signals, a.started_mono);
      pacer.record(key, *signals);
    } else {
      abandon();
    }

    const auto keep_response = [&] {
      if (!ex.head_complete) return;
      Response r;
      r.status = ex.status;
      r.headers = std::move(ex.headers);
      r.body = std::move(ex.body);
      r.received_wall = ex.received_wall;
      r.received_mono = ex.received_mono;
      out_.response = std::move(r);
    };
    // Ends the request without asking the planner (cancelled, deadline, local limit).
    const auto end_here = [&](OutcomeKind kind, std::string reason) {
      a.reason = reason;
      out_.ambiguous = ex.sent && !idempotent_request();
      out_.attempts.push_back(std::move(a));
      keep_response();
      return finish(kind, std::move(reason));
    };

    switch (ex.result) {
      case Exchange::Result::kCancelled:
        emit([&] { ClientEvent e = event(ClientEvent::Kind::kTransportError); e.error = ex.error; return e; }());
        return end_here(OutcomeKind::kCancelled, ex.sent ? "cancelled while the request was in flight"
                                                          : "cancelled before the request was sent");
      case Exchange::Result::kInvalid:
        emit([&] { ClientEvent e = event(ClientEvent::Kind::kTransportError); e.error = ex.error; return e; }());
        a.sent = false;
        return end_here(OutcomeKind::kNotRetryable, "the request cannot be sent: " + ex.error);
      case Exchange::Result::kBodyTooLarge:
        emit([&] { ClientEvent e = event(ClientEvent::Kind::kTransportError); e.error = ex.error; return e; }());
        return end_here(OutcomeKind::kNotRetryable, "the " + ex.error);
      case Exchange::Result::kTimedOut:
        if (deadline_bounds_transfer && impl_.mono.now() >= *req_.deadline) {
          emit([&] { ClientEvent e = event(ClientEvent::Kind::kTransportError); e.error = ex.error; return e; }());
          return end_here(OutcomeKind::kDeadlineExceeded,
                          ex.sent ? "the deadline passed while waiting for the response"
                                  : "the deadline passed before the request could be sent");
        }
        break;
      case Exchange::Result::kResponse:
      case Exchange::Result::kFailed:
        break;
    }

    // Ask the planner.
    const TransportError terr{ex.sent, ex.received_wall, ex.received_mono};
    const bool response = ex.result == Exchange::Result::kResponse;
    PlanInput input = response ? PlanInput(Outcome(*signals)) : PlanInput(Outcome(terr));
    input.method = req_.method;
    input.idempotency_key = has_key();
    input.declared_non_idempotent = req_.non_idempotent;
    input.attempt = attempt_;
    input.max_attempts = max_attempts;
    input.deadline = req_.deadline;
    input.previous_backoff = previous_backoff;
    if (response) {
      keep_response();  // the outcome keeps the last response
      ClientEvent e = event(ClientEvent::Kind::kResponseObserved);
      e.response = &*out_.response;
      e.signals = &*signals;
      emit(e);
    } else {
      ClientEvent e = event(ClientEvent::Kind::kTransportError);
      e.error = ex.error;
      emit(e);
    }
    const Plan plan = impl_.planner.decide(input, *impl_.random);
    a.plan = plan;
    a.reason = impl_.planner.describe(plan, input);
    if (!response) a.reason = ex.error + ". " + a.reason;
    if (signals) a.warnings = signals->warnings;
    for (std::string& n : notes_text(plan.notes)) a.warnings.push_back(std::move(n));
    {
      ClientEvent e = event(ClientEvent::Kind::kDecision);
      e.plan = &plan;
      e.reason = a.reason;
      emit(e);
    }
    std::string reason = a.reason;
    out_.attempts.push_back(std::move(a));
    if (plan.not_before_mono) set_not_before(plan);

    switch (plan.decision) {
      case Decision::kRetry: {
        previous_backoff = saturating_add(plan.backoff, plan.jitter);
        const MonoTime until = plan.not_before_mono.value_or(saturating_add(ex.received_mono, plan.wait));
        if (!wait(until, ClientEvent::WaitKind::kRetry))
          return finish(OutcomeKind::kCancelled, "cancelled while waiting to retry");
        out_.not_before_mono.reset();
        out_.not_before_wall.reset();
        continue;
      }
      case Decision::kDone:
        out_.not_before_mono.reset();
        out_.not_before_wall.reset();
        return finish(OutcomeKind::kDone, std::move(reason));
      case Decision::kDeferred:
        return finish(OutcomeKind::kDeferred, std::move(reason));
      case Decision::kDeadlineExceeded:
        return finish(OutcomeKind::kDeadlineExceeded, std::move(reason));
      case Decision::kNotRetryable:
        out_.ambiguous = plan.ambiguous;
        return finish(OutcomeKind::kNotRetryable, std::move(reason));
      case Decision::kExhausted:
        return finish(OutcomeKind::kExhausted, std::move(reason));
    }
    return finish(OutcomeKind::kNotRetryable, "unknown decision");
  }
}

RequestOutcome Client::Impl::run(const Request& req, std::size_t index, Transport& transport, std::stop_token stop) {
  return Run(*this, req, index).go(transport, stop);
}

Client::Client(ClientConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
Client::~Client() = default;

RequestOutcome Client::fetch(const Request& request, std::stop_token stop) {
  auto transport = impl_->checkout();
  RequestOutcome out = impl_->run(request, 0, *transport, stop);
  impl_->checkin(std::move(transport));
  return out;
}

std::vector<RequestOutcome> Client::fetch_all(std::span<const Request> requests, const BatchOptions& options,
                                              std::stop_token stop) {
  std::vector<RequestOutcome> outcomes(requests.size());
  if (requests.empty()) return outcomes;
  const std::size_t jobs = std::clamp<std::size_t>(options.jobs, 1, std::min(kMaxJobs, requests.size()));
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    auto transport = impl_->checkout();
    for (std::size_t i = next.fetch_add(1); i < requests.size(); i = next.fetch_add(1)) {
      outcomes[i] = impl_->run(requests[i], i, *transport, stop);
      if (options.on_done) {
        try {
          options.on_done(i, outcomes[i]);
        } catch (...) {  // a callback must not lose the other requests
        }
      }
    }
    impl_->checkin(std::move(transport));
  };
  std::vector<std::thread> threads;
  threads.reserve(jobs - 1);
  for (std::size_t j = 1; j < jobs; ++j) threads.emplace_back(worker);
  worker();  // the calling thread is one of the workers
  for (auto& t : threads) t.join();
  return outcomes;
}

Pacer& Client::pacer() noexcept { return *impl_->pacer; }
const Planner& Client::planner() const noexcept { return impl_->planner; }
const ClientConfig& Client::config() const noexcept { return impl_->config; }

std::optional<std::string> Client::origin_of(std::string_view url) {
  auto parts = curl_detail::parse_url(url);
  if (!parts) return std::nullopt;
  return parts->origin;
}

}  // namespace abide
