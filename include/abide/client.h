// abide/client.h: HTTP requests that obey the server, over libcurl (target
// abide::curl). This header includes no curl header. A Client is the engine
// of abide/engine.h over libcurl: the rules live there, for any transport.
//
// A Client sends each request through the pacer (abide/pacer.h), reads the
// response into Signals (abide/signals.h), asks the planner (abide/planner.h)
// what to do, waits when told to (cancellably, on the monotonic clock), and
// repeats until the request has a final outcome:
//
//   done               a final response (2xx, or 1xx/3xx)
//   deferred           permitted again only after the longest acceptable wait
//   deadline_exceeded  permitted again only after the request's deadline
//   not_retryable      must not be repeated automatically (status, method, the
//                      server's own "do not retry"; or ambiguous: a
//                      non-idempotent request may have been applied)
//   exhausted          no attempts (or retry budget) left
//   cancelled          the stop token was triggered
//
// Every request ends with exactly one outcome, which carries every attempt and
// the decision taken after it. A batch runs on a pool of workers, each with its
// own connection (reused from request to request), all sharing one pacer. Each
// origin's server clock is learned from the Dates it sends (ServerClock, given
// each request's send time), so date-form hints need not cost up to a second;
// an origin whose Dates show several clocks is read by each answer's own Date.
// The library prints nothing: an event hook reports what happens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "abide/backoff.h"
#include "abide/clock.h"
#include "abide/engine.h"
#include "abide/headers.h"
#include "abide/pacer.h"
#include "abide/planner.h"
#include "abide/signals.h"

namespace abide {

class ProfileRegistry;  // abide/profiles.h

// One HTTP request and how long it may take.
struct Request {
  std::string method = "GET";  // any token; HEAD sends no body and reads none
  std::string url;             // http:// or https:// only
  HeaderList headers;          // sent as given; a name or value with CR, LF or NUL is rejected
  std::string body;            // sent when non-empty, and always for POST
  // Sent as the Idempotency-Key header, the same on every attempt. With it, a
  // POST or PATCH may be repeated (rule 7). A header of that name in `headers`
  // counts too.
  std::optional<std::string> idempotency_key;
  // The request must never be repeated, whatever its method.
  bool non_idempotent = false;
  // The request's deadline: a retry (or the first send) that would start after
  // it is not made (deadline_exceeded), and a transfer still running at it is
  // aborted.
  std::optional<MonoTime> deadline;
  // Nothing is sent before this instant (a resumed request's permitted time).
  std::optional<WallTime> not_before;
  // The pacer key; empty: the URL's origin ("https://api.example.com").
  std::string pacer_key;
};

// A response as received.
struct Response {
  int status = 0;
  HeaderList headers;
  std::string body;
  WallTime received_wall{};  // when its head was complete
  MonoTime received_mono{};
};

// One attempt and the decision taken after it.
struct Attempt {
  std::int64_t number = 0;    // 1 for the first send
  WallTime started_wall{};    // when it was sent (after the pacer's permit)
  MonoTime started_mono{};
  Duration paced{};           // time waited in the pacer before it
  int status = 0;             // the response's status; 0 when there was none
  std::string error;          // the transport error, when there was no (complete) response
  bool sent = false;          // the request was (at least partly) sent
  Plan plan;                  // the planner's decision
  std::string reason;         // the decision in words (Planner::describe)
  std::vector<std::string> warnings;  // the response's Signals warnings and the plan's notes
};

// How a request ended: the engine's kinds (done, deferred, deadline_exceeded,
// not_retryable, exhausted, cancelled), and their to_string().
using OutcomeKind = engine::OutcomeKind;
using engine::to_string;

// The final outcome of one request.
struct RequestOutcome {
  OutcomeKind kind = OutcomeKind::kCancelled;
  std::string reason;                 // one sentence
  std::optional<Response> response;   // the last response received (the final one when done)
  // The earliest permitted time for another attempt, whenever known.
  std::optional<WallTime> not_before_wall;
  std::optional<MonoTime> not_before_mono;
  // The request may or may not have been applied (a non-idempotent request
  // whose connection failed, or was cancelled, after it was sent): reconcile.
  bool ambiguous = false;
  std::vector<Attempt> attempts;
  Duration waited{};                  // time spent waiting: pacer and retry waits

  bool done() const noexcept { return kind == OutcomeKind::kDone; }
};

// What the event hook is told.
struct ClientEvent {
  enum class Kind : std::uint8_t {
    kWaitStarted,       // a pacer or retry wait begins (wait: planned, 0 when unknown)
    kWaitEnded,         // it ended (wait: how long it took; cancelled when stopped)
    kAttemptStarted,    // a request is about to be sent
    kResponseObserved,  // a response arrived (response, signals)
    kTransportError,    // the attempt ended without a response (error)
    kDecision,          // the planner decided (plan, reason)
    kFinished,          // the request has its outcome (outcome)
  };
  enum class WaitKind : std::uint8_t { kPacer, kRetry, kNotBefore };

  Kind kind = Kind::kAttemptStarted;
  std::size_t index = 0;          // the request's position in the batch (0 for fetch())
  const Request* request = nullptr;
  std::int64_t attempt = 0;       // the attempt it concerns (0 before the first)
  MonoTime at{};                  // when it happened
  WaitKind wait_kind = WaitKind::kPacer;
  Duration wait{};
  bool cancelled = false;
  const Response* response = nullptr;
  const Signals* signals = nullptr;
  std::string_view error;
  const Plan* plan = nullptr;
  std::string_view reason;
  const RequestOutcome* outcome = nullptr;
};

// Called from the worker threads, possibly at once: must be thread-safe and
// quick. Pointers in the event are valid during the call only. Exceptions it
// throws are swallowed.
using EventHook = std::function<void(const ClientEvent&)>;

// How a Client works.
struct ClientConfig {
  PlannerConfig planner;            // statuses, backoff, max wait, idempotency, budget
  std::int64_t max_attempts = 5;    // per request, the first send included
  // The shared pacer; nullptr: a new one over a MemoryStore with `pacer_config`
  // and this config's clocks.
  std::shared_ptr<Pacer> pacer;
  PacerConfig pacer_config;
  // How responses are read (ObserveOptions): a vendor profile by name ("" to
  // select by host, "none" for none), the registry (nullptr: built-in).
  std::string profile;
  const ProfileRegistry* registry = nullptr;
  bool robust = true;
  bool heuristic = false;
  // Transfers.
  Duration connect_timeout = std::chrono::seconds{10};
  Duration attempt_timeout{};       // one attempt's whole transfer; zero: none (only the deadline)
  std::size_t max_body_bytes = std::size_t{64} << 20;   // a longer body ends the request (not_retryable)
  std::size_t max_header_bytes = std::size_t{1} << 20;  // a longer head is a transport error
  std::string user_agent = "abide/0.1.0";
  bool verify_tls = true;
  // Injected time and randomness (nullptr: the system clocks; a SeededRandom
  // from std::random_device). The random source must be thread-safe.
  const MonotonicClock* mono = nullptr;
  const WallClock* wall = nullptr;
  std::shared_ptr<RandomSource> random;
  EventHook on_event;
};

// How a batch runs.
struct BatchOptions {
  std::size_t jobs = 4;  // workers (each its own connection); clamped to [1, 256] and to the batch
  // Called (from a worker thread, one call at a time per worker) as soon as a
  // request has its outcome.
  std::function<void(std::size_t index, const RequestOutcome&)> on_done;
};

// The client. Thread-safe: fetch() and fetch_all() may be called from many
// threads; all of them share the pacer and the connection pool.
class Client {
 public:
  explicit Client(ClientConfig config = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Runs one request to its outcome on the calling thread.
  RequestOutcome fetch(const Request& request, std::stop_token stop = {});

  // Runs a batch on `options.jobs` workers; returns the outcomes in request
  // order. After a stop, requests not yet started end as cancelled at once.
  std::vector<RequestOutcome> fetch_all(std::span<const Request> requests, const BatchOptions& options = {},
                                        std::stop_token stop = {});

  Pacer& pacer() noexcept;
  const Planner& planner() const noexcept;
  const ClientConfig& config() const noexcept;

  // The origin of an http(s) URL ("https://api.example.com", with the port
  // when it is not the scheme's default; the host in lower case), or nullopt.
  static std::optional<std::string> origin_of(std::string_view url);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace abide
