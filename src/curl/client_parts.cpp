// What abide::Client and abide::LoopClient share (see client_parts.h).
#include "client_parts.h"

#include <algorithm>
#include <utility>

#include "engine_impl.h"

namespace abide::curl_detail {

std::shared_ptr<Pacer> pacer_for(const ClientConfig& c, const MonotonicClock& mono, const WallClock& wall) {
  return c.pacer ? c.pacer : detail::own_pacer(c, mono, wall);
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
  static_cast<engine::RequestOutcome&>(out) = std::move(e);
  out.body = std::move(body);
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
