// abide::Client: the engine (abide/engine.h) over libcurl, one pooled easy
// handle per worker (see abide/client.h).
#include "abide/client.h"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "abide/engine.h"
#include "client_parts.h"
#include "mutex.h"
#include "own_handle.h"
#include "transfer.h"
#include "transport.h"

namespace abide {
namespace {

using curl_detail::Transport;

constexpr std::size_t kMaxJobs = 256;
constexpr std::size_t kMaxIdleTransports = 256;

// One attempt over libcurl, reported to the engine. Without a ResponseSink
// the final answer's body is kept (up to max_body_bytes); with one, it
// streams to the sink, its head given once, lazily: just before the first
// body byte, or at the end of an empty body. Until then the answer is not
// final (a transfer that breaks off first is retried), so the sink never
// hears of it.
class CurlAttempt final : public engine::Transport {
 public:
  CurlAttempt(const ClientConfig& config, const Request& request, const curl_detail::ParsedUrl& url,
              curl_detail::Transport& transport, curl_detail::TransferSlots& slots, const MonotonicClock& mono,
              const WallClock& wall, const ResponseSink* sink)
      : config_(config),
        request_(request),
        url_(url),
        transport_(transport),
        slots_(slots),
        mono_(mono),
        wall_(wall) {
    if (sink != nullptr) final_.emplace(*sink);
  }

  std::string take_body() { return std::move(body_); }

  // The engine's body sink: none when the body is kept (the engine counts it),
  // else the ResponseSink's, its head first.
  engine::BodySink body_sink() { return final_ ? final_->body_sink() : engine::BodySink{}; }

  void perform(const engine::Request&, const engine::Step& step, engine::Machine& m, std::stop_token stop) override {
    if (final_) final_->attach(m);
    if (!curl_detail::take_slot(slots_, request_, m, mono_, stop)) return;
    const curl_detail::TransferSlots::Held held(slots_.limit() != 0 ? &slots_ : nullptr);
    curl_detail::BodyTarget target;
    if (!final_) {
      // Only the last attempt's body is the caller's (an earlier limited
      // answer's may have been read for the wait it states).
      body_.clear();
      target.keep = &body_;
      target.max_bytes = config_.max_body_bytes;
    }
    if (transport_.perform(request_, curl_detail::limits_for(config_, step, mono_), target, m, mono_, wall_, stop,
                           &url_) != curl_detail::Transport::End::kComplete)
      return;
    // An empty body: the head reaches the sink now, before the outcome is final.
    if (final_ && !final_->given_head() && !m.body({})) return;
    m.complete();
  }

 private:
  const ClientConfig& config_;
  const Request& request_;
  const curl_detail::ParsedUrl& url_;  // request_.url, parsed once for every attempt
  curl_detail::Transport& transport_;
  curl_detail::TransferSlots& slots_;
  const MonotonicClock& mono_;
  const WallClock& wall_;
  std::optional<curl_detail::FinalSink> final_;  // streamed to a ResponseSink, or
  std::string body_;                             // the final answer's body, kept
};
}  // namespace

struct Client::Impl {
  explicit Impl(ClientConfig c)
      : config(std::move(c)),
        engine(static_cast<const engine::Config&>(config)),
        mono(engine.mono()),
        wall(engine.wall()),
        slots(config.max_transfers) {
    curl_detail::global_init();
  }

  ClientConfig config;
  engine::Engine engine;
  const MonotonicClock& mono;  // the engine's clocks (the config's, or the system's)
  const WallClock& wall;
  curl_detail::TransferSlots slots;  // max_transfers, over fetch, fetch_all and perform

  detail::Mutex pool_mu;
  std::vector<std::unique_ptr<Transport>> idle ABIDE_GUARDED_BY(pool_mu);

  std::unique_ptr<Transport> checkout() {
    {
      detail::MutexLock lock(pool_mu);
      if (!idle.empty()) {
        auto t = std::move(idle.back());
        idle.pop_back();
        return t;
      }
    }
    return std::make_unique<Transport>();
  }
  void checkin(std::unique_ptr<Transport> t) {
    detail::MutexLock lock(pool_mu);
    if (idle.size() < kMaxIdleTransports) idle.push_back(std::move(t));
  }

  // One request; its final answer's body kept, or streamed to `sink`.
  RequestOutcome run(const Request& req, std::size_t index, Transport& transport, std::stop_token stop,
                     const ResponseSink* sink = nullptr);
  RequestOutcome finish_early(const Request& req, std::size_t index, OutcomeKind kind, std::string reason);
  // `url`: where libcurl's parse of the URL is kept, when the caller wants it.
  std::optional<RequestOutcome> precheck(const Request& req, std::size_t index, std::stop_token stop,
                                         curl_detail::ParsedUrl* url = nullptr);
};

// Ends a request before the engine sees it, with the engine's event.
RequestOutcome Client::Impl::finish_early(const Request& req, std::size_t index, OutcomeKind kind, std::string reason) {
  return curl_detail::finish_early(req, index, kind, std::move(reason), config.on_event, mono);
}

std::optional<RequestOutcome> Client::Impl::precheck(const Request& req, std::size_t index, std::stop_token stop,
                                                     curl_detail::ParsedUrl* url) {
  if (stop.stop_requested())
    return finish_early(req, index, OutcomeKind::kCancelled, "cancelled before the first attempt");
  // libcurl's own URL parser says what it will not take, in its words.
  if (auto error = url != nullptr ? curl_detail::parse_url(req.url, *url) : curl_detail::url_error(req.url))
    return finish_early(req, index, OutcomeKind::kNotRetryable, "invalid URL: " + *error);
  return std::nullopt;
}

// One request: the engine over libcurl.
RequestOutcome Client::Impl::run(const Request& req, std::size_t index, Transport& transport, std::stop_token stop,
                                 const ResponseSink* sink) {
  curl_detail::ParsedUrl url;
  if (auto early = precheck(req, index, stop, &url)) return std::move(*early);
  CurlAttempt attempt(config, req, url, transport, slots, mono, wall, sink);
  engine::RequestOutcome out = engine.run(req, attempt, attempt.body_sink(), stop, index);
  return curl_detail::with_body(std::move(out), attempt.take_body());
}

Client::Client(ClientConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
Client::~Client() = default;

RequestOutcome Client::fetch(const Request& request, std::stop_token stop, std::size_t index) {
  auto transport = impl_->checkout();
  RequestOutcome out = impl_->run(request, index, *transport, stop);
  impl_->checkin(std::move(transport));
  return out;
}

RequestOutcome Client::fetch(const Request& request, const ResponseSink& sink, std::stop_token stop,
                             std::size_t index) {
  auto transport = impl_->checkout();
  RequestOutcome out = impl_->run(request, index, *transport, stop, &sink);
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

RequestOutcome Client::perform(CurlEasy* handle, const Request& request, const HandleCallbacks& callbacks,
                               std::stop_token stop) {
  if (handle == nullptr) return impl_->finish_early(request, 0, OutcomeKind::kNotRetryable, "no easy handle given");
  // abide adds nothing to a caller's handle that libcurl cannot give back.
  if (!request.headers.empty())
    return impl_->finish_early(request, 0, OutcomeKind::kNotRetryable,
                               "a caller's handle sends its own headers (CURLOPT_HTTPHEADER): "
                               "the request's must be empty");
  if (!request.body.empty())
    return impl_->finish_early(request, 0, OutcomeKind::kNotRetryable,
                               "a caller's handle sends its own body (CURLOPT_POSTFIELDS...): "
                               "the request's must be empty");
  if (auto early = impl_->precheck(request, 0, stop)) return std::move(*early);
  std::unique_ptr<CURLM, decltype(&curl_multi_cleanup)> multi(curl_multi_init(), &curl_multi_cleanup);
  if (!multi)
    return impl_->finish_early(request, 0, OutcomeKind::kNotRetryable, "libcurl could not create a multi handle");
  std::string body;
  engine::RequestOutcome out;
  {
    // Its destructor gives the handle its callbacks back, before the multi
    // handle (which held its connections) goes.
    curl_detail::HandleTransport transport(static_cast<CURL*>(handle), multi.get(), callbacks,
                                           impl_->config.max_body_bytes, impl_->config.max_header_bytes, impl_->slots,
                                           impl_->mono, impl_->wall);
    out = impl_->engine.run(request, transport, transport.sink(), stop);
    body = transport.take_body();
  }
  return curl_detail::with_body(std::move(out), std::move(body));
}

Pacer& Client::pacer() noexcept { return impl_->engine.pacer(); }
const Planner& Client::planner() const noexcept { return impl_->engine.planner(); }
const ClientConfig& Client::config() const noexcept { return impl_->config; }

std::optional<std::string> Client::origin_of(std::string_view url) { return abide::origin_of(url); }

}  // namespace abide
