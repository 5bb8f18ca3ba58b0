// abide::LoopClient: engine::Machines over one libcurl multi handle, driven
// by an event loop (see abide/loop_client.h).
//
// Each request is a Job: its own copy of the request, its Machine, and, while
// an attempt is out, an easy handle in the multi handle. A job is in one
// place at a time:
//   ready     its machine is asked next() at the next pump;
//   timer     waiting until a time (a pacer, retry or not-before wait);
//   slot      permitted to send, waiting for one of max_transfers;
//   transfer  its easy handle is in the multi handle;
//   done      its outcome waits for its done callback (at the pump's end).
// libcurl's callbacks (header, body, socket, timer) run inside libcurl's calls
// and only feed the machine or note what to watch; handles are added and
// removed, and done callbacks run, outside them (pump), where a callback may
// start or cancel requests safely.
#include "abide/loop_client.h"

#include <curl/curl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "abide/engine.h"
#include "client_parts.h"
#include "easy_attempt.h"
#include "epoll_interest.h"
#include "mutex.h"
#include "transfer.h"
#include "transport.h"

namespace abide {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;
using curl_detail::TransferEnd;
using curl_detail::epoll_events;

constexpr std::size_t kMaxIdleHandles = 64;
// Rounds of libcurl's zero timeouts run at once in one pump (each starts
// transfers that were added); the rest wait for the loop's next turn.
constexpr int kMaxKicks = 4;

int curl_flags(LoopClient::Interest what) {
  switch (what) {
    case LoopClient::Interest::kRead: return CURL_CSELECT_IN;
    case LoopClient::Interest::kWrite: return CURL_CSELECT_OUT;
    case LoopClient::Interest::kReadWrite: return CURL_CSELECT_IN | CURL_CSELECT_OUT;
    case LoopClient::Interest::kNone: break;
  }
  return 0;
}

LoopClient::Interest interest_of(int curl_what) {
  switch (curl_what) {
    case CURL_POLL_IN: return LoopClient::Interest::kRead;
    case CURL_POLL_OUT: return LoopClient::Interest::kWrite;
    case CURL_POLL_INOUT: return LoopClient::Interest::kReadWrite;
    default: return LoopClient::Interest::kNone;
  }
}

}  // namespace

struct LoopClient::Impl {
  enum class Where : std::uint8_t { kReady, kTimer, kSlot, kTransfer, kDone };

  struct Job {
    Job(Id id_, Request r, Done d, ResponseSink s, std::size_t index_)
        : id(id_), index(index_), request(std::move(r)), done(std::move(d)), sink(std::move(s)) {}
    Id id;
    std::size_t index;
    Request request;
    Done done;
    ResponseSink sink;
    std::optional<curl_detail::FinalSink> final;  // when streamed to `sink`
    curl_detail::ParsedUrl url;
    std::string body;  // the final answer's body, kept (no sink)
    curl_detail::BodyTarget target;
    std::optional<engine::Machine> machine;
    // While in a transfer (pooled between them: a waiting job holds none).
    std::unique_ptr<curl_detail::EasyAttempt> attempt;
    CURL* easy = nullptr;  // while in a transfer
    Where where = Where::kReady;
    std::optional<MonoTime> send_deadline;  // kSlot: the permitted attempt's (engine::Step::deadline)
    MonoTime timer_at{};  // kTimer, or kSlot with a bound: its entry in `timers`
    bool timed = false;
    bool cancelled = false;                // cancel() asked
    bool paused = false;                   // pause(): the body's delivery waits
    std::unique_ptr<RequestOutcome> result;  // kDone (a held job holds none)
  };

  Impl(ClientConfig c, Hooks h)
      : config(std::move(c)),
        engine(static_cast<const engine::Config&>(config)),
        mono(engine.mono()),
        wall(engine.wall()),
        hooks(std::move(h)),
        hooked(static_cast<bool>(hooks.watch) && static_cast<bool>(hooks.timer)) {
    curl_detail::global_init();
    multi = curl_multi_init();
    wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!hooked) {
      epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
      if (epoll_fd >= 0 && wake_fd >= 0) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = wake_fd;
        ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev);
      }
    }
    if (multi != nullptr) {
      curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, &on_curl_socket);
      curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, static_cast<void*>(this));
      curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, &on_curl_timer);
      curl_multi_setopt(multi, CURLMOPT_TIMERDATA, static_cast<void*>(this));
      // Idle connections kept: as many as transfers may run (libcurl's default
      // grows with the handles ever added, each a descriptor).
      if (config.max_transfers != 0)
        curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, static_cast<long>(std::min<std::size_t>(config.max_transfers, 1 << 20)));
      if (config.max_host_connections != 0)
        curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                          static_cast<long>(std::min<std::size_t>(config.max_host_connections, 1 << 20)));
    }
    if (hooked && wake_fd >= 0) hooks.watch(wake_fd, Interest::kRead);
  }

  ~Impl() {
    for (auto& [id, job] : jobs) {
      if (job->easy != nullptr) {
        curl_multi_remove_handle(multi, job->easy);
        curl_easy_cleanup(job->easy);
        job->easy = nullptr;
      }
    }
    jobs.clear();  // machines give back their pacer slots and probes
    for (CURL* e : idle) curl_easy_cleanup(e);
    if (multi != nullptr) curl_multi_cleanup(multi);
    if (hooked && wake_fd >= 0) hooks.watch(wake_fd, Interest::kNone);
    if (wake_fd >= 0) ::close(wake_fd);
    if (epoll_fd >= 0) ::close(epoll_fd);
  }

  ClientConfig config;
  engine::Engine engine;
  const MonotonicClock& mono;  // the engine's clocks (the config's, or the system's)
  const WallClock& wall;
  Hooks hooks;
  const bool hooked;
  CURLM* multi = nullptr;
  int wake_fd = -1;   // readable when a pacer notification came (from any thread)
  int epoll_fd = -1;  // without hooks: libcurl's sockets and wake_fd

  Id next_id = 1;
  std::unordered_map<Id, std::unique_ptr<Job>> jobs;
  std::deque<Id> ready;
  std::deque<Id> finished;
  std::deque<Id> slot_queue;              // in arrival order
  std::set<std::pair<MonoTime, Id>> timers;  // on the injected clock
  std::size_t transfers = 0;              // easy handles in the multi handle
  std::vector<CURL*> idle;
  std::vector<std::unique_ptr<curl_detail::EasyAttempt>> idle_attempts;
  std::vector<Id> to_cancel;  // asked from inside libcurl's callbacks
  bool in_curl = false;       // inside a libcurl call (its callbacks may run)
  bool pumping = false;
  bool ending = false;        // inside end_transfer

  // libcurl's wishes: its timer on the steady clock (it counts real time),
  // and the sockets watched (for the own epoll, and to tell hooks of changes).
  std::optional<SteadyTime> curl_due;
  std::unordered_map<int, Interest> watched;
  // The timer last asked of the hooks, to ask again only when it changed.
  std::optional<SteadyTime> told_curl_due;
  std::optional<MonoTime> told_timer_due;
  bool told_now = false;
  bool told_any = false;

  // Pacer notifications, from any thread.
  detail::Mutex notify_mu;
  std::vector<Id> notified ABIDE_GUARDED_BY(notify_mu);

  // ---- libcurl's callbacks ----
  static int on_curl_socket(CURL*, curl_socket_t fd, int what, void* self, void*) {
    static_cast<Impl*>(self)->watch(static_cast<int>(fd), interest_of(what));
    return 0;
  }
  static int on_curl_timer(CURLM*, long ms, void* self) {
    auto& impl = *static_cast<Impl*>(self);
    if (ms < 0) impl.curl_due.reset();
    else impl.curl_due = std::chrono::steady_clock::now() + std::chrono::milliseconds{ms};
    return 0;
  }

  void watch(int fd, Interest what) {
    if (what == Interest::kNone) watched.erase(fd);
    else watched[fd] = what;
    if (hooked) {
      hooks.watch(fd, what);
      return;
    }
    if (epoll_fd < 0) return;
    epoll_event ev{};
    ev.events = epoll_events(what);
    ev.data.fd = fd;
    if (what == Interest::kNone) {
      ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, &ev);  // (libcurl may have closed it: ENOENT/EBADF is fine)
    } else if (::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, fd, &ev) != 0 && errno == ENOENT) {
      ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
    }
  }

  // ---- starting ----
  Id start(Request request, Done done, ResponseSink sink, std::size_t index) {
    const Id id = next_id++;
    auto job = std::make_unique<Job>(id, std::move(request), std::move(done), std::move(sink), index);
    Job& j = *job;
    jobs.emplace(id, std::move(job));
    if (auto why = curl_detail::parse_url(j.request.url, j.url)) {
      finish(j, curl_detail::finish_early(j.request, index, OutcomeKind::kNotRetryable, "invalid URL: " + *why,
                                          config.on_event, mono));
      return id;
    }
    if (multi == nullptr || wake_fd < 0 || (!hooked && epoll_fd < 0)) {
      finish(j, curl_detail::finish_early(j.request, index, OutcomeKind::kNotRetryable,
                                          "libcurl's multi handle or the loop's descriptors could not be created",
                                          config.on_event, mono));
      return id;
    }
    engine::BodySink body_sink;
    if (j.sink.head || j.sink.body) {
      j.final.emplace(j.sink);
      body_sink = j.final->body_sink();
    } else {
      j.target.keep = &j.body;
      j.target.max_bytes = config.max_body_bytes;
    }
    j.machine.emplace(engine, j.request, std::move(body_sink), index);
    if (j.final) j.final->attach(*j.machine);
    j.machine->set_notify([this, id] { notify(id); });
    j.where = Where::kReady;
    ready.push_back(id);
    want_turn();
    return id;
  }

  void finish(Job& j, RequestOutcome out) {
    j.result = std::make_unique<RequestOutcome>(std::move(out));
    j.where = Where::kDone;
    finished.push_back(j.id);
    want_turn();
  }

  // Work is waiting for the pump: the loop must turn soon.
  void want_turn() {
    if (pumping) return;
    tell_timer();
  }

  void notify(Id id) {
    {
      detail::MutexLock lock(notify_mu);
      notified.push_back(id);
    }
    const std::uint64_t one = 1;
    static_cast<void>(::write(wake_fd, &one, sizeof one));
  }

  void take_notified() {
    std::uint64_t count = 0;
    static_cast<void>(::read(wake_fd, &count, sizeof count));
    std::vector<Id> ids;
    {
      detail::MutexLock lock(notify_mu);
      ids.swap(notified);
    }
    // A pacer wait may end early: ask the machine again.
    for (Id id : ids) {
      auto it = jobs.find(id);
      if (it == jobs.end() || it->second->where != Where::kTimer) continue;
      untime(*it->second);
      it->second->where = Where::kReady;
      ready.push_back(id);
    }
  }

  // ---- timers ----
  void time(Job& j, MonoTime at) {
    j.timer_at = at;
    j.timed = true;
    timers.emplace(at, j.id);
  }
  void untime(Job& j) {
    if (!j.timed) return;
    timers.erase({j.timer_at, j.id});
    j.timed = false;
  }

  void fire_timers() {
    const MonoTime now = mono.now();
    while (!timers.empty() && timers.begin()->first <= now) {
      const Id id = timers.begin()->second;
      timers.erase(timers.begin());
      auto it = jobs.find(id);
      if (it == jobs.end()) continue;
      Job& j = *it->second;
      j.timed = false;
      if (j.where == Where::kTimer) {
        j.where = Where::kReady;
        ready.push_back(id);
      } else if (j.where == Where::kSlot) {
        std::erase(slot_queue, id);
        j.machine->failed("the deadline passed while waiting for a transfer slot", false);
        j.where = Where::kReady;
        ready.push_back(id);
      }
    }
  }

  // ---- transfers ----
  bool slot_free() const { return config.max_transfers == 0 || transfers < config.max_transfers; }

  CURL* take_handle() {
    if (!idle.empty()) {
      CURL* e = idle.back();
      idle.pop_back();
      return e;
    }
    return curl_easy_init();
  }
  void give_handle(CURL* e) {
    if (idle.size() < kMaxIdleHandles) idle.push_back(e);
    else curl_easy_cleanup(e);
  }

  std::unique_ptr<curl_detail::EasyAttempt> take_attempt() {
    if (idle_attempts.empty()) return std::make_unique<curl_detail::EasyAttempt>();
    auto a = std::move(idle_attempts.back());
    idle_attempts.pop_back();
    return a;
  }
  void give_attempt(std::unique_ptr<curl_detail::EasyAttempt> a) {
    if (a && idle_attempts.size() < kMaxIdleHandles) idle_attempts.push_back(std::move(a));
  }

  void begin_transfer(Job& j, const engine::Step& step) {
    CURL* e = take_handle();
    const curl_detail::TransferLimits limits = curl_detail::limits_for(config, step, mono);
    if (e == nullptr) {
      j.machine->refuse("libcurl could not create a handle");
    } else if (j.attempt = take_attempt();
               j.attempt->start(e, j.request, limits, j.target, *j.machine, mono, wall, &j.url)) {
      // libcurl may send it later than now (waiting for a connection): an
      // answer heard meanwhile that says wait holds it back.
      j.attempt->hold_back_if_held(engine.pacer(), j.machine->pacer_key());
      curl_easy_setopt(e, CURLOPT_PRIVATE, static_cast<void*>(&j));
      in_curl = true;
      const CURLMcode rc = curl_multi_add_handle(multi, e);
      in_curl = false;
      if (rc == CURLM_OK) {
        j.easy = e;
        j.where = Where::kTransfer;
        ++transfers;
        return;
      }
      j.machine->refuse("libcurl could not start the transfer");
    }
    give_attempt(std::move(j.attempt));
    if (e != nullptr) give_handle(e);
    j.where = Where::kReady;
    ready.push_back(j.id);
  }

  // The transfer of `j` ended (`end`): the machine hears how, the handle and
  // its slot go back.
  void end_transfer(Job& j, const TransferEnd& end) {
    ending = true;  // the machine hears the end: its events may ask to cancel
    CURL* e = j.easy;
    j.easy = nullptr;
    j.paused = false;
    in_curl = true;
    curl_multi_remove_handle(multi, e);  // aborts the transfer if it still runs
    in_curl = false;
    --transfers;
    if (j.attempt->end(end, j.cancelled) == curl_detail::Transport::End::kComplete) {
      // An empty body: the head reaches the sink now, before the outcome is final.
      if (!j.final || j.final->given_head() || j.machine->body({})) j.machine->complete();
    }
    give_attempt(std::move(j.attempt));
    give_handle(e);
    j.where = Where::kReady;
    ready.push_back(j.id);
    ending = false;
    admit_waiters();
  }

  void admit_waiters() {
    while (!slot_queue.empty() && slot_free()) {
      const Id id = slot_queue.front();
      slot_queue.pop_front();
      auto it = jobs.find(id);
      if (it == jobs.end()) continue;
      Job& j = *it->second;
      untime(j);
      engine::Step step;
      step.kind = engine::Step::Kind::kSend;
      step.deadline = j.send_deadline;
      begin_transfer(j, step);
    }
  }

  // What libcurl finished.
  void reap() {
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      void* p = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &p);
      if (p == nullptr) continue;
      TransferEnd end;
      end.kind = TransferEnd::Kind::kFinished;
      end.code = msg->data.result;
      end_transfer(*static_cast<Job*>(p), end);
    }
  }

  void curl_action(curl_socket_t fd, int flags) {
    int running = 0;
    in_curl = true;
    curl_multi_socket_action(multi, fd, flags, &running);
    in_curl = false;
    reap();
  }

  // libcurl's timer, when due.
  void curl_timeouts() {
    for (int i = 0; i < kMaxKicks && curl_due && *curl_due <= std::chrono::steady_clock::now(); ++i) {
      curl_due.reset();
      curl_action(CURL_SOCKET_TIMEOUT, 0);
    }
  }

  // ---- cancelling ----
  bool cancel(Id id) {
    auto it = jobs.find(id);
    if (it == jobs.end() || it->second->where == Where::kDone || it->second->cancelled) return false;
    Job& j = *it->second;
    j.cancelled = true;
    if (in_curl || pumping || ending) {
      // From a callback (libcurl's, an event hook's inside a machine's step
      // or a transfer's end, a done): the job may be mid-move, so the cancel
      // is taken at the pump's next round, where every job is in its place.
      to_cancel.push_back(id);
      want_turn();
      return true;
    }
    cancel_now(j);
    want_turn();
    return true;
  }

  void cancel_now(Job& j) {
    switch (j.where) {
      case Where::kTransfer: {
        TransferEnd end;
        end.kind = TransferEnd::Kind::kCancelled;
        end_transfer(j, end);
        break;
      }
      case Where::kSlot:
        std::erase(slot_queue, j.id);
        untime(j);
        j.machine->failed("cancelled while waiting for a transfer slot", false);
        j.where = Where::kReady;
        ready.push_back(j.id);
        break;
      case Where::kTimer:
        untime(j);
        j.where = Where::kReady;
        ready.push_back(j.id);
        break;
      case Where::kReady:
      case Where::kDone: break;
    }
  }

  // ---- backpressure ----
  bool pause(Id id, bool paused) {
    auto it = jobs.find(id);
    if (it == jobs.end() || it->second->where != Where::kTransfer || it->second->easy == nullptr) return false;
    Job& j = *it->second;
    if (j.paused == paused) return true;
    j.paused = paused;
    // Allowed from inside libcurl's write callback. A resume may hand the
    // held data to the sink at once, inside curl_easy_pause (so it counts as
    // inside libcurl), and end the transfer there: what ended is reaped
    // unless the resume itself came from inside a callback.
    const bool was_in_curl = in_curl;
    in_curl = true;
    const CURLcode rc = curl_easy_pause(j.easy, paused ? CURLPAUSE_RECV : CURLPAUSE_CONT);
    in_curl = was_in_curl;
    if (!paused && !in_curl) reap();
    want_turn();
    return rc == CURLE_OK;
  }

  // ---- the pump: machines asked, transfers started, outcomes given ----
  void step(Job& j) {
    if (j.cancelled && !j.machine->finished()) j.machine->cancel(false);
    const engine::Step s = j.machine->next();
    switch (s.kind) {
      case engine::Step::Kind::kFinished:
        finish(j, curl_detail::with_body(j.machine->take_outcome(), std::move(j.body)));
        return;
      case engine::Step::Kind::kSend:
        if (slot_free() && slot_queue.empty()) {
          begin_transfer(j, s);
          return;
        }
        j.where = Where::kSlot;
        j.send_deadline = s.deadline;
        slot_queue.push_back(j.id);
        if (auto bound = slot_bound(j.request)) time(j, *bound);
        return;
      case engine::Step::Kind::kWait:
        if (s.until <= mono.now()) {
          ready.push_back(j.id);
          return;
        }
        j.where = Where::kTimer;
        time(j, s.until);
        return;
    }
  }

  // The latest a permitted attempt may wait for a transfer slot.
  static std::optional<MonoTime> slot_bound(const Request& r) {
    std::optional<MonoTime> bound = r.deadline;
    if (r.send_by && (!bound || *r.send_by < *bound)) bound = r.send_by;
    return bound;
  }

  void pump() {
    if (pumping) return;
    pumping = true;
    for (int kicks = 0;;) {
      for (const Id id : std::exchange(to_cancel, {})) {
        auto it = jobs.find(id);
        if (it != jobs.end()) cancel_now(*it->second);
      }
      // Each ready machine once per round: one that asks to be asked again
      // at once waits for the next round.
      for (std::size_t n = ready.size(); n > 0 && !ready.empty(); --n) {
        const Id id = ready.front();
        ready.pop_front();
        auto it = jobs.find(id);
        if (it != jobs.end() && it->second->where == Where::kReady) step(*it->second);
      }
      while (!finished.empty()) {
        const Id id = finished.front();
        finished.pop_front();
        auto it = jobs.find(id);
        if (it == jobs.end()) continue;
        std::unique_ptr<Job> job = std::move(it->second);
        jobs.erase(it);
        if (job->done) {
          try {
            job->done(std::move(*job->result));
          } catch (...) {  // a callback must not lose the other requests
          }
        }
      }
      // Transfers just added start now, not a loop turn later.
      if (kicks < kMaxKicks && curl_due && *curl_due <= std::chrono::steady_clock::now()) {
        ++kicks;
        curl_due.reset();
        curl_action(CURL_SOCKET_TIMEOUT, 0);
        continue;
      }
      if (ready.empty() && finished.empty() && to_cancel.empty()) break;
    }
    pumping = false;
    tell_timer();
  }

  // ---- what the loop is told ----
  std::optional<Duration> timeout() const {
    if (!ready.empty() || !finished.empty() || !to_cancel.empty()) return Duration::zero();
    std::optional<Duration> t;
    if (curl_due) t = std::max<Duration>(*curl_due - std::chrono::steady_clock::now(), Duration::zero());
    if (!timers.empty()) {
      const Duration left = std::max<Duration>(timers.begin()->first - mono.now(), Duration::zero());
      if (!t || left < *t) t = left;
    }
    return t;
  }

  void tell_timer() {
    if (!hooked) return;
    const bool now = !ready.empty() || !finished.empty() || !to_cancel.empty();
    const std::optional<MonoTime> timer_due =
        timers.empty() ? std::nullopt : std::optional<MonoTime>(timers.begin()->first);
    if (told_any && now == told_now && curl_due == told_curl_due && timer_due == told_timer_due) return;
    told_any = true;
    told_now = now;
    told_curl_due = curl_due;
    told_timer_due = timer_due;
    hooks.timer(timeout());
  }

  void on_socket(int fd, Interest what) {
    if (fd == wake_fd) {
      take_notified();
    } else {
      curl_action(static_cast<curl_socket_t>(fd), curl_flags(what));
    }
    pump();
  }

  void on_timer() {
    told_any = false;  // the hook's timer has fired: a new one is needed
    curl_timeouts();
    fire_timers();
    pump();
  }

  void process() {
    epoll_event events[64];
    const int n = epoll_fd >= 0 ? ::epoll_wait(epoll_fd, events, 64, 0) : 0;
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd) {
        take_notified();
        continue;
      }
      int flags = 0;
      if ((events[i].events & EPOLLIN) != 0) flags |= CURL_CSELECT_IN;
      if ((events[i].events & EPOLLOUT) != 0) flags |= CURL_CSELECT_OUT;
      if ((events[i].events & (EPOLLERR | EPOLLHUP)) != 0) flags |= CURL_CSELECT_ERR;
      curl_action(static_cast<curl_socket_t>(fd), flags);
    }
    curl_timeouts();
    fire_timers();
    pump();
  }
};

LoopClient::LoopClient(ClientConfig config) : impl_(std::make_unique<Impl>(std::move(config), Hooks{})) {}
LoopClient::LoopClient(ClientConfig config, Hooks hooks)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(hooks))) {}
LoopClient::~LoopClient() = default;

LoopClient::Id LoopClient::start(const Request& request, Done done, ResponseSink sink, std::size_t index) {
  return impl_->start(request, std::move(done), std::move(sink), index);
}
LoopClient::Id LoopClient::start(Request&& request, Done done, ResponseSink sink, std::size_t index) {
  return impl_->start(std::move(request), std::move(done), std::move(sink), index);
}
bool LoopClient::cancel(Id id) { return impl_->cancel(id); }
bool LoopClient::pause(Id id) { return impl_->pause(id, true); }
bool LoopClient::resume(Id id) { return impl_->pause(id, false); }
void LoopClient::on_socket(int fd, Interest what) { impl_->on_socket(fd, what); }
void LoopClient::on_timer() { impl_->on_timer(); }
int LoopClient::fd() const noexcept { return impl_->epoll_fd; }
std::optional<Duration> LoopClient::timeout() const { return impl_->timeout(); }
void LoopClient::process() { impl_->process(); }
std::size_t LoopClient::running() const noexcept { return impl_->jobs.size(); }
Pacer& LoopClient::pacer() noexcept { return impl_->engine.pacer(); }
const ClientConfig& LoopClient::config() const noexcept { return impl_->config; }

void LoopClient::run(std::stop_token stop) {
  if (impl_->hooked || impl_->epoll_fd < 0) return;
  while (!impl_->jobs.empty() && !stop.stop_requested()) {
    int ms = -1;
    if (const auto t = impl_->timeout()) {
      ms = static_cast<int>(std::min<std::int64_t>(std::chrono::ceil<std::chrono::milliseconds>(*t).count(), 1000));
    }
    // A stop is noticed within a second.
    if (ms < 0 || ms > 1000) ms = 1000;
    pollfd p{impl_->epoll_fd, POLLIN, 0};
    static_cast<void>(::poll(&p, 1, ms));
    impl_->process();
  }
}

}  // namespace abide
