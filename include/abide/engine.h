// abide/engine.h: one request to its outcome over any transport (abide::core).
//
// The engine keeps the rules of docs/RULES.md for one request, in this chain:
//   Pacer.acquire -> send -> observe (with the origin's ServerClock)
//   -> Pacer.record -> Planner.decide -> wait -> ...
// until the request has its outcome. It sends nothing itself: the caller's
// transport does, and reports what came back.
//
// Two forms, one logic:
// - engine::Machine, a per-request state machine for event loops. next() says
//   "send now" (with the pacer's permit), "wait until T, because ...", or
//   "finished"; the caller reports the response head, then the body of a final
//   answer, or a transport error. It never sleeps or blocks.
// - Engine::run(), the blocking form: the same state machine over a Transport,
//   waiting with the injected monotonic clock (cancellable by a stop token).
// Both give the same outcome, attempts and events for the same transport.
//
// The decision is made on the head: the body of a final answer goes to the
// sink as it arrives (no size cap), the body of an answer that will be retried
// is dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "abide/clock.h"
#include "abide/headers.h"
#include "abide/pacer.h"
#include "abide/planner.h"
#include "abide/profiles.h"
#include "abide/quota.h"
#include "abide/signals.h"

namespace abide {

class ServerClock;  // abide/server_clock.h: each origin's, kept by the engine

namespace detail {
class UsageTap;     // src/llm/usage_tap.h
struct EngineImpl;  // src/engine_impl.h: what the requests of one Engine share
}  // namespace detail

// The parts of an http(s) URL a transport and the pacer need.
struct UrlOrigin {
  std::string scheme;      // "http" or "https", lower case
  std::string host;        // lower case, without IPv6 brackets
  std::uint16_t port = 0;  // the explicit port, or the scheme's default
  std::string origin;      // scheme://host[:port] (port only when not the default; IPv6 in brackets)
  std::string target;      // the path and query ("/" when empty), without the fragment
};

// Splits an absolute http:// or https:// URL; nullopt for anything else (no
// host, a bad port, spaces or control characters). Userinfo is skipped.
[[nodiscard]] std::optional<UrlOrigin> parse_origin(std::string_view url);

// The origin of an http(s) URL ("https://api.example.com"), or nullopt.
[[nodiscard]] std::optional<std::string> origin_of(std::string_view url);

namespace engine {

// One HTTP request and how long it may take.
struct Request {
  std::string method = "GET";
  std::string url;  // http:// or https://
  HeaderList headers;
  std::string body;
  // Sent as the Idempotency-Key header by the transport, the same on every
  // attempt: with it a POST or PATCH may be repeated (rule 7). A header of that
  // name in `headers` counts too.
  std::optional<std::string> idempotency_key;
  bool non_idempotent = false;       // never repeated, whatever the method
  std::optional<MonoTime> deadline;  // no send (and no retry) after it; a transfer running at it is cut
  // No wait past it: the pacer holds a send only to a slot at or before it,
  // and no retry waits past it; a transfer started before it runs on (a
  // budget for waiting, not for the answer's length). A slot due when the
  // pacer is asked goes even if asking took past it (a shared store's round
  // trip is no wait). The longest acceptable wait: when it is the earlier
  // bound, a request it holds back ends deferred (rule 5), not deadline_exceeded.
  std::optional<MonoTime> send_by;
  std::optional<WallTime> not_before;  // nothing is sent before it (a resumed request)
  std::string pacer_key;               // empty: the URL's origin
  std::string profile;                 // the vendor profile its answers are read with; empty: Config::profile
  // What the request needs of quotas other than requests ({"tokens", 1200}):
  // the pacer sends it only when each such quota has room, and the answer's
  // usage settles it. Empty: estimated from the body by its profile's cost
  // rule (an LLM API's), else nothing.
  std::vector<UnitCost> costs;
};

// A response head as received (the body went to the sink).
struct Response {
  int status = 0;
  HeaderList headers;
  WallTime received_wall{};
  MonoTime received_mono{};
  int http_version = 0;  // as curl numbers it: 10, 11, 20, 30 (HTTP/1.0 ... HTTP/3); 0: not said
};

// One attempt and the decision taken after it.
struct Attempt {
  std::int64_t number = 0;  // 1 for the first send
  WallTime started_wall{};
  MonoTime started_mono{};
  Duration paced{};   // time waited for the pacer before it
  // The announced quota that held it during `paced`, when the pacer knows
  // which (describe() says it: "tokens: 1,850 of 40,000 left, 4,100 needed").
  std::optional<QuotaHeld> held;
  int status = 0;     // 0 when there was no response head
  std::string error;  // the transport error, when there was no (complete) response
  bool sent = false;  // the request was (at least partly) sent
  bool timed_out = false;  // that error was a time limit of the transfer (attempt or read timeout)
  Plan plan;
  std::string reason;                 // the decision in words
  std::vector<std::string> warnings;  // the Signals' warnings and the plan's notes
};

enum class OutcomeKind : std::uint8_t {
  kDone,
  kDeferred,
  kDeadlineExceeded,
  kNotRetryable,
  kExhausted,
  kCancelled,
};

// "done", "deferred", "deadline_exceeded", "not_retryable", "exhausted", "cancelled".
std::string_view to_string(OutcomeKind k) noexcept;

// How a request ended.
struct RequestOutcome {
  OutcomeKind kind = OutcomeKind::kCancelled;
  std::string reason;                       // the last attempt's reason, or why there was none
  std::optional<Response> response;         // the last response head (the final one when done)
  std::uint64_t body_bytes = 0;             // bytes of the final answer's body given to the sink
  std::optional<WallTime> not_before_wall;  // the earliest permitted next attempt, when known
  std::optional<MonoTime> not_before_mono;
  // Deferred or deadline_exceeded by the pacer: the announced quota that held
  // the send, when the pacer knows which.
  std::optional<QuotaHeld> held;
  bool ambiguous = false;  // may or may not have been applied: reconcile
  std::vector<Attempt> attempts;
  Duration waited{};  // pacer and retry waits

  bool done() const noexcept { return kind == OutcomeKind::kDone; }
};

// What the event hook is told (the same events as abide::Client's).
struct Event {
  enum class Kind : std::uint8_t {
    kWaitStarted,
    kWaitEnded,
    kAttemptStarted,
    kResponseObserved,
    kTransportError,
    kDecision,
    kFinished,
  };
  enum class WaitKind : std::uint8_t { kPacer, kRetry, kNotBefore };

  Kind kind = Kind::kAttemptStarted;
  std::size_t index = 0;
  const Request* request = nullptr;
  std::int64_t attempt = 0;
  MonoTime at{};
  WaitKind wait_kind = WaitKind::kPacer;
  Duration wait{};
  bool cancelled = false;
  const QuotaHeld* held = nullptr;  // kWaitEnded of the pacer: the quota that held the send, if known
  const Response* response = nullptr;
  const Signals* signals = nullptr;
  std::string_view error;
  const Plan* plan = nullptr;
  std::string_view reason;
  const RequestOutcome* outcome = nullptr;
};
using EventHook = std::function<void(const Event&)>;

// Receives the body of the final answer, chunk by chunk; false stops the
// transfer (the request then ends not_retryable).
using BodySink = std::function<bool(std::string_view chunk)>;

// How the engine works. The pacer and the clocks must outlive the engine.
struct Config {
  PlannerConfig planner;          // statuses, backoff, max wait, idempotency, budget
  std::int64_t max_attempts = 5;  // per request, the first send included
  // The shared pacer; nullptr: a new one over a MemoryStore with
  // `pacer_config` and this config's clocks.
  std::shared_ptr<Pacer> pacer;
  PacerConfig pacer_config;
  // How responses are read (ObserveOptions): a vendor profile by name ("" to
  // select by host, "none" for none), the registry (nullptr: built-in).
  std::string profile;
  const ProfileRegistry* registry = nullptr;
  bool robust = true;
  bool heuristic = false;
  // Injected time and randomness (nullptr: the system clocks; a SeededRandom
  // from std::random_device). The random source must be thread-safe.
  const MonotonicClock* mono = nullptr;
  const WallClock* wall = nullptr;
  std::shared_ptr<RandomSource> random;
  EventHook on_event;
};

// What next() tells the caller.
struct Step {
  enum class Kind : std::uint8_t {
    kSend,  // send the attempt now, then report head()/body()/complete() or failed()
    // Call next() again at `until`. Earlier is safe (it asks again): do so
    // when the machine's notification fires (Machine::set_notify), since a
    // wait for the pacer may be a wait for another request's probe answer.
    kWait,
    kFinished,  // outcome() is final
  };
  Kind kind = Kind::kFinished;
  std::int64_t attempt = 0;                             // kSend: its number
  bool probe = false;                                   // kSend: the pacer's probe permit
  std::optional<MonoTime> deadline;                     // kSend: abort the transfer at it
  MonoTime until{};                                     // kWait
  Event::WaitKind wait_kind = Event::WaitKind::kPacer;  // kWait
  std::string_view reason;                              // kWait: why, for people (valid until the next call)
};

class Engine;

// One request's state machine. Not thread-safe (one caller drives it); many
// Machines of one Engine may be driven at once. It waits for the pacer as a
// blocking acquire does, through Pacer::try_acquire: a slot reserved for it
// ("wait until T", then it is sent), or its place in line while a probe's
// answer is awaited ("ask again at T, or when notified"), so driven and
// blocking requests alike are served in arrival order. Cancelling it (or
// destroying it) gives the slot back.
class Machine {
 public:
  // `hook`: this request's events (empty: Config::on_event).
  Machine(Engine& engine, const Request& request, BodySink sink = {}, std::size_t index = 0, EventHook hook = {});
  // The machine keeps a reference to its request, which must outlive it: a
  // temporary would dangle.
  Machine(Engine& engine, const Request&& request, BodySink sink = {}, std::size_t index = 0,
          EventHook hook = {}) = delete;
  // A machine destroyed unfinished while it holds the pacer's probe hands the
  // probe back, so the key's other requests go on at once.
  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  // What to do now. After kSend, report the transport's answer before calling
  // again: next() during a transfer ends it (as complete() after a wanted
  // head, else as failed() with the request sent).
  [[nodiscard]] Step next();

  // A final (non-1xx) response head arrived for the attempt sent. Returns
  // true when this answer ends the request (done, or any other outcome but
  // a retry): its body is wanted and goes to the sink, and the outcome is
  // final at complete(). False: the answer will be retried and its body is
  // dropped (the transport may stop reading it). `http_version`: as
  // Response::http_version (0 when the transport does not say).
  [[nodiscard]] bool head(int status, HeaderList headers, WallTime received_wall, MonoTime received_mono,
                          int http_version = 0);
  // Body bytes after head() returned true. False: stop the transfer.
  [[nodiscard]] bool body(std::string_view chunk);
  // The transfer ended cleanly.
  void complete();
  // The attempt failed: no response head, or its body broke off. `sent`: the
  // request was (at least partly) sent.
  void failed(std::string_view error, bool sent, bool timed_out = false);
  // Stops the request (any state): it ends cancelled. `sent`: during a
  // transfer, whether the request was (at least partly) sent.
  void cancel(bool sent = true);
  // The transport cannot send this request as it is (a header with CR/LF,
  // ...): it ends not_retryable, nothing sent.
  void refuse(std::string_view why);
  // The transport kept the attempt back before any of it was sent, because
  // the pacer holds the key since the permit (Pacer::held_until: an answer
  // heard meanwhile said wait). The attempt is undone (not counted; its
  // event is a transport error saying so) and the request waits for the
  // pacer again: call next().
  void withdraw();
  // The transport will not take this answer's body (over its size limit,
  // say `error`): the request ends not_retryable.
  void reject_body(std::string_view error);
  // The answer's head passed the transport's size limit (say `error`): the
  // request ends not_retryable at once (the same head would come again). The
  // status and the lines read before the limit are heard as head() hears
  // them, so a Retry-After among them still holds the origin and gives the
  // outcome its permitted time.
  void head_too_large(int status, HeaderList lines_read, WallTime received_wall, MonoTime received_mono,
                      std::string_view error);

  // `notify` is called, from whichever thread records on the pacer key, when
  // a wait for the pacer may end before its `until` (a probe's answer came,
  // or it is this request's turn): call next() then. Keep it short and
  // thread-safe (wake the event loop); it is not called after the machine is
  // destroyed. Without it, waits for a probe's answer end at their `until`.
  void set_notify(std::function<void()> notify) { ticket_.set_notify(std::move(notify)); }

  const Pacer::Key& pacer_key() const noexcept { return *key_; }

  // After head() returned true: the answer is a limited one whose body may
  // state the wait (its profile names where: Gemini's retryDelay, "try again
  // in 1.5s"). Its body goes to body() as any other, and is read (up to a
  // small bound) before the request is planned: it reaches the sink only if
  // the answer ends the request, and pending_kind() is known only then.
  bool reading_body_first() const noexcept { return state_ == State::kHintBody; }

  // After head() returned true: how the request ends once its body is in
  // (kDone, or the outcome this answer gives it: deferred, not_retryable, ...).
  // outcome() then holds its attempts, waits and permitted time so far.
  OutcomeKind pending_kind() const noexcept { return state_ == State::kFinished ? out_.kind : pending_kind_; }

  bool finished() const noexcept { return state_ == State::kFinished; }
  const RequestOutcome& outcome() const noexcept { return out_; }
  RequestOutcome take_outcome() { return std::move(out_); }

 private:
  enum class State : std::uint8_t {
    kStart,
    kNotBefore,
    kAcquire,
    kSending,
    kHintBody,  // a limited answer's body, read for the wait it may state before the plan
    kBody,
    kRetryWait,
    kFinished,
  };
  Event event(Event::Kind kind) const;
  void emit(const Event& e) const;
  // Events are built only for a hook (building one reads the clock).
  bool hooked() const noexcept { return static_cast<bool>(*hook_); }
  Step finish(OutcomeKind kind, std::string reason);
  Step wait_step(MonoTime until, Event::WaitKind kind, std::string_view reason);
  void begin_wait(Event::WaitKind kind, MonoTime until);
  void end_wait(Event::WaitKind kind, bool cancelled);
  void emit_error(std::string_view error) const;
  Step start();
  Step wait_not_before(WallTime now);
  Step enter_acquire();
  void begin_acquire();  // the pacer wait begins (state, start, event); enter_acquire() then asks
  std::optional<MonoTime> acquire_bound() const;  // the latest slot the pacer may hold the send to
  // costs_ with every amount 0: what a send that used nothing reports.
  std::vector<UnitCost> none_used() const;
  Step try_acquire();
  Step from_permit(const AcquireResult& result);
  bool decide(const Signals* signals, std::string_view error, bool sent);
  Step end_here(OutcomeKind kind, std::string reason);
  void set_not_before(MonoTime mono);
  void abandon_probe();
  bool idempotent_request() const;
  // The attempt being sent (from the permit on): it is built in place as the
  // outcome's last attempt, not moved there once decided, which cost a
  // fifth of the engine's bookkeeping per attempt.
  Attempt& current() noexcept { return out_.attempts.back(); }
  bool has_key() const;

  void prepare_costs();
  void tap_usage(const Signals& signals);
  void settle_usage();
  bool answer(const Signals& signals);
  bool deliver(std::string_view chunk);
  bool decide_on_held_body(bool whole);

  friend class Engine;
  detail::EngineImpl& engine_;
  const Request& req_;
  bool blocking_ = false;  // Engine::run: wait in Pacer::acquire itself, cancelled by stop_
  std::stop_token stop_;
  BodySink sink_;
  std::size_t index_;
  EventHook own_hook_;
  const EventHook* hook_;  // own_hook_, or the engine's (it outlives the machine): no copy per request
  State state_ = State::kStart;
  // The pacer key: the origin cache's entry (it lives as long as the engine),
  // or own_key_ (the request's own key, or an origin beyond the cache's bound).
  // A pointer, not a copy: copying a Key costs two atomic counts per request.
  const Pacer::Key* key_ = &own_key_;
  Pacer::Key own_key_;
  Pacer::Ticket ticket_;  // the driven form's reservation and place in line
  ServerClock* server_clock_ = nullptr;
  std::string_view host_;  // in the engine's origin cache, or in host_storage_
  std::string host_storage_;
  std::int64_t attempt_ = 0;
  bool probe_ = false;     // the permit in use is the pacer's probe
  MonoTime wait_start_{};  // the current wait (pacer, retry, not-before)
  MonoTime wait_until_{};
  std::optional<Duration> previous_backoff_;
  std::optional<MonoTime> send_deadline_;          // the earlier of the request's deadline and send_by
  bool budget_binds_ = false;                      // send_by is the earlier: passing it is deferred (rule 5)
  OutcomeKind pending_kind_ = OutcomeKind::kDone;  // the outcome once the body is in (reason: the last attempt's)
  const Profile* profile_ = nullptr;               // the request's vendor profile, if any
  CostRule cost_rule_ = CostRule::kNone;           // the profile's: how costs are estimated and usage read
  std::optional<Signals> held_;                    // kHintBody: the limited answer's head, not yet planned
  std::string held_body_;                          // kHintBody: its body so far
  std::vector<UnitCost> costs_;                    // what each send reserves (Request::costs, or the estimate)
  std::string wait_reason_;                        // a kWait step's reason, when composed
  std::unique_ptr<detail::UsageTap> usage_;        // the final answer's usage, read as its body passes
  std::optional<std::uint64_t> usage_length_;      // that body's Content-Length, when stated and not encoded
  MonoTime answered_{};                            // when the final answer's head came
  RequestOutcome out_;
};

// A transport for the blocking form: sends one attempt and reports to `machine`
// (head() then body()/complete(), or failed()). It must honour
// step.deadline and `stop` (then report failed() with sent as it was).
class Transport {
 public:
  virtual ~Transport() = default;
  virtual void perform(const Request& request, const Step& step, Machine& machine, std::stop_token stop) = 0;
};

// The engine: the planner, the pacer, the clocks and each origin's ServerClock,
// shared by every request. Thread-safe.
class Engine {
 public:
  explicit Engine(Config config = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs one request to its outcome, blocking (waits cancellable by `stop`).
  [[nodiscard]] RequestOutcome run(const Request& request, Transport& transport, BodySink sink = {},
                                   std::stop_token stop = {}, std::size_t index = 0, EventHook hook = {});

  Pacer& pacer() noexcept;
  const Planner& planner() const noexcept;
  const Config& config() const noexcept;
  const MonotonicClock& mono() const noexcept;
  const WallClock& wall() const noexcept;

 private:
  friend class Machine;
  std::unique_ptr<detail::EngineImpl> impl_;
};

}  // namespace engine
}  // namespace abide
