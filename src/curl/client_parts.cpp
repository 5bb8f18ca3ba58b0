// What abide::Client and abide::LoopClient share (see client_parts.h).
#include "client_parts.h"

#include <algorithm>
#include <random>
#include <utility>

namespace abide::curl_detail {
namespace {

std::shared_ptr<RandomSource> default_random() {
  std::random_device rd;
  const std::uint64_t seed = (std::uint64_t{rd()} << 32) ^ std::uint64_t{rd()};
  return std::make_shared<SeededRandom>(seed);
}

// The client's own pacer counts the quotas its planner counts, so that both
// hold the same permitted time (permitted_wait()).
PacerConfig own_pacer_config(const ClientConfig& c) {
  PacerConfig p = c.pacer_config;
  p.use_low_confidence_quota = p.use_low_confidence_quota || c.planner.use_low_confidence_quota;
  return p;
}

}  // namespace

std::shared_ptr<Pacer> pacer_for(const ClientConfig& c, const MonotonicClock& mono, const WallClock& wall) {
  return c.pacer ? c.pacer : std::make_shared<Pacer>(own_pacer_config(c), nullptr, mono, wall);
}

engine::Config engine_config(const ClientConfig& c, const MonotonicClock& mono, const WallClock& wall) {
  engine::Config e;
  e.planner = c.planner;
  e.max_attempts = c.max_attempts;
  e.pacer = pacer_for(c, mono, wall);
  e.profile = c.profile;
  e.registry = c.registry;
  e.robust = c.robust;
  e.heuristic = c.heuristic;
  e.mono = c.mono;
  e.wall = c.wall;
  e.random = c.random ? c.random : default_random();
  e.on_event = c.on_event;  // the client's events are the engine's
  return e;
}

TransferLimits limits_for(const ClientConfig& config, const engine::Step& step, const MonotonicClock& mono) {
  TransferLimits limits;
  limits.connect_timeout = config.connect_timeout;
  limits.timeout = config.attempt_timeout;
  limits.read_timeout = config.read_timeout;
  limits.max_header_bytes = config.max_header_bytes;
  limits.user_agent = config.user_agent;
  limits.default_fields = config.default_fields;
  limits.verify_tls = config.verify_tls;
  limits.ca_file = config.ca_file;
  limits.proxy = config.proxy;
  limits.decompress = config.decompress;
  limits.http_version = config.http_version;
  limits.receive_buffer_bytes = config.receive_buffer_bytes;
  if (step.deadline) {
    const Duration left = *step.deadline - mono.now();
    if (limits.timeout == Duration::zero() || left < limits.timeout) limits.timeout = std::max(left, Duration{1});
  }
  return limits;
}

RequestOutcome with_body(engine::RequestOutcome&& e, std::string body) {
  RequestOutcome out;
  out.kind = e.kind;
  out.reason = std::move(e.reason);
  if (e.response) {
    out.response.emplace();
    static_cast<engine::Response&>(*out.response) = std::move(*e.response);
    out.response->body = std::move(body);
  }
  out.body_bytes = e.body_bytes;
  out.not_before_wall = e.not_before_wall;
  out.not_before_mono = e.not_before_mono;
  out.held = e.held;
  out.ambiguous = e.ambiguous;
  out.attempts = std::move(e.attempts);
  out.waited = e.waited;
  return out;
}

RequestOutcome finish_early(const Request& request, std::size_t index, OutcomeKind kind, std::string reason,
                            const EventHook& hook, const MonotonicClock& mono) {
  engine::RequestOutcome out;
  out.kind = kind;
  out.reason = std::move(reason);
  if (hook) {
    ClientEvent e;
    e.kind = ClientEvent::Kind::kFinished;
    e.index = index;
    e.request = &request;
    e.at = mono.now();
    e.outcome = &out;
    try {
      hook(e);
    } catch (...) {  // a hook must not lose a request
    }
  }
  return with_body(std::move(out), {});
}

bool FinalSink::put(std::string_view chunk) {
  try {
    if (!head_given_) {
      head_given_ = true;
      if (sink_.head) {
        if (machine_ == nullptr) return false;
        const engine::RequestOutcome& so_far = machine_->outcome();
        if (!so_far.response) return false;  // (the machine gives no body without a head)
        const FinalHead final_head{*so_far.response, machine_->pending_kind(), so_far};
        if (!sink_.head(final_head)) return false;
      }
    }
    if (chunk.empty()) return true;
    return !sink_.body || sink_.body(chunk);
  } catch (...) {  // a callback's exception must not cross libcurl: it stops the transfer
    return false;
  }
}

}  // namespace abide::curl_detail
