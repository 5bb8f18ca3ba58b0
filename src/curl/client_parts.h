// What abide::Client and abide::LoopClient share (private to abide::curl):
// a shared pacer built from a ClientConfig, one attempt's transfer limits, the
// engine's outcome with the body read, and the final answer's way to a
// ResponseSink.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "abide/client.h"
#include "abide/engine.h"
#include "transport.h"

namespace abide::curl_detail {

// The config's shared pacer, or a new one as the engine makes its own (over a
// MemoryStore, counting what its planner counts): for a program that runs
// several clients (LoopClients on several loops) on one.
std::shared_ptr<Pacer> pacer_for(const ClientConfig& config, const MonotonicClock& mono, const WallClock& wall);

// What one attempt's transfer may do: the config's limits, its timeout cut
// to the step's deadline (the engine sends nothing at or after it).
TransferLimits limits_for(const ClientConfig& config, const engine::Step& step, const MonotonicClock& mono);

// The engine's outcome, moved, with the body the client read.
RequestOutcome with_body(engine::RequestOutcome&& e, std::string body);

// A request that ends before the engine sees it: the outcome, and the
// engine's kFinished event for it (to `hook`, when set).
RequestOutcome finish_early(const Request& request, std::size_t index, OutcomeKind kind, std::string reason,
                            const EventHook& hook, const MonotonicClock& mono);

// The final answer's way to a ResponseSink, as the engine's body sink: the
// head given once, lazily (just before the first body byte, or at the end of
// an empty body: give_head()), so that an answer whose transfer breaks off
// first never reaches the sink.
class FinalSink {
 public:
  explicit FinalSink(const ResponseSink& sink) : sink_(sink) {}
  FinalSink(const FinalSink&) = delete;
  FinalSink& operator=(const FinalSink&) = delete;

  // The machine the chunks come from (its outcome so far makes FinalHead).
  void attach(const engine::Machine& machine) noexcept { machine_ = &machine; }
  // The engine's BodySink, calling this one (which must outlive it).
  engine::BodySink body_sink() {
    return [this](std::string_view chunk) { return put(chunk); };
  }
  // The head of an empty body, before the outcome is final.
  bool given_head() const noexcept { return head_given_; }

 private:
  bool put(std::string_view chunk);

  const ResponseSink& sink_;
  const engine::Machine* machine_ = nullptr;
  bool head_given_ = false;
};

}  // namespace abide::curl_detail
