// abide::LoopClient: engine::Machines over one libcurl multi handle, driven
// by an event loop (see abide/loop_client.h).
//
// Each request is a Job: its own copy of the request, its Machine, and, while
// an attempt is out, an easy handle in the multi handle, or an exchange of
// the own HTTP/1.1 client (plain_transfer.h: cleartext to an IP literal, its
// sockets on the same loop, idle ones kept per origin). A job is in one place
// at a time:
//   ready     its machine is asked next() at the next pump;
//   timer     waiting until a time (a pacer, retry or not-before wait);
//   slot      permitted to send, waiting for one of max_transfers (or of a
//             bound shared with other clients, SharedTransfers);
//   transfer  its easy handle is in the multi handle;
//   done      its outcome waits for its done callback (at the pump's end).
// libcurl's callbacks (header, body, socket, timer) run inside libcurl's calls
// and only feed the machine or note what to watch; handles are added and
// removed, and done callbacks run, outside them (pump), where a callback may
// start or cancel requests safely.
#include "abide/loop_client.h"

#include <curl/curl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "abide/engine.h"
#include "client_parts.h"
#include "connection_gate.h"
#include "easy_attempt.h"
#include "epoll_interest.h"
#include "mutex.h"
#include "h2_attempt.h"
#include "request_rules.h"
#include "plain_transfer.h"
#include "shared_transfers.h"
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
// While the gate lets an origin's transfers go one at a time (each to the
// connection the one before found or set up), more rounds: a burst of streams
// to one HTTP/2 origin goes out at a transfer per round, not per loop turn.
constexpr int kMaxGateKicks = 256;
// What the own HTTP/1.1 client reads at a time, into one buffer per client.
constexpr std::size_t kPlainScratch = std::size_t{512} << 10;  // the most receive_buffer_bytes asks

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

// One turn of the loop shares one step of the pacer's store (one file
// transaction for all its requests; QuotaStore::begin_batch).
class StoreBatch {
 public:
  explicit StoreBatch(QuotaStore& store) : store_(store) { store_.begin_batch(); }
  ~StoreBatch() { store_.end_batch(); }
  StoreBatch(const StoreBatch&) = delete;
  StoreBatch& operator=(const StoreBatch&) = delete;

 private:
  QuotaStore& store_;
};

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
    std::unique_ptr<curl_detail::PlainTransfer> plain;  // while in the own client's exchange
    SteadyTime plain_timer_at{};  // its entry in plain_timers
    bool plain_timed = false;
    bool plain_eligible = false;  // the own client may send it (plain_target), when the limits allow
    std::unique_ptr<curl_detail::H2Attempt> h2;  // while on a stream of the own HTTP/2 client
    bool h2_eligible = false;     // the own HTTP/2 client may send it (h2_target), when the limits allow
    std::string gate_origin;      // an https origin: its transfers pass `gate`
    bool gate_pass = false;       // released by the gate: the next transfer skips it
    Where where = Where::kReady;
    std::optional<MonoTime> send_deadline;  // kSlot: the permitted attempt's (engine::Step::deadline)
    MonoTime timer_at{};  // kTimer, or kSlot with a bound: its entry in `timers`
    bool timed = false;
    bool cancelled = false;                // cancel() asked
    bool paused = false;                   // pause(): the body's delivery waits
    std::unique_ptr<RequestOutcome> result;  // kDone (a held job holds none)
  };

  Impl(ClientConfig c, Hooks h, std::shared_ptr<SharedTransfers> s = nullptr)
      : config(std::move(c)),
        engine(static_cast<const engine::Config&>(config)),
        mono(engine.mono()),
        wall(engine.wall()),
        hooks(std::move(h)),
        hooked(static_cast<bool>(hooks.watch) && static_cast<bool>(hooks.timer)),
        // A proxy from the environment, or a bound on the connections to an
        // origin (which libcurl's queue keeps): libcurl sends everything.
        plain_ok(!curl_detail::proxy_in_environment() && config.max_host_connections == 0),
        h2_ok(!curl_detail::https_proxy_in_environment()) {
    curl_detail::global_init();
    multi = curl_multi_init();
    wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s) {
      shared = std::move(s);
      waiter.emplace(wake_fd);
    }
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
    if (shared) {  // the slots go to the other clients before the descriptor closes
      shared->impl_->leave(*waiter);
      for (; transfers > 0; --transfers) shared->impl_->give();
    }
    // The HTTP/2 connections go first: their streams' owners are the jobs.
    for (auto& [fd, c] : h2_conns) {
      if (c.armed != Interest::kNone) arm(fd, Interest::kNone);
    }
    h2_conns.clear();
    for (auto it = plain_fds.begin(); it != plain_fds.end(); it = plain_fds.erase(it)) {
      if (it->second.armed != Interest::kNone) arm(it->first, Interest::kNone);
      ::close(it->first);
    }
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
  const bool plain_ok;
  const bool h2_ok;
  CURLM* multi = nullptr;
  int wake_fd = -1;   // readable when a pacer notification came (from any thread)
  int epoll_fd = -1;  // without hooks: libcurl's sockets and wake_fd

  Id next_id = 1;
  std::unordered_map<Id, std::unique_ptr<Job>> jobs;
  std::deque<Id> ready;
  std::deque<Id> finished;
  std::deque<Id> slot_queue;              // in arrival order
  curl_detail::ConnectionGate gate;       // held jobs wait in kSlot, outside slot_queue
  std::set<std::pair<MonoTime, Id>> timers;  // on the injected clock
  std::size_t transfers = 0;              // slots held: transfers and exchanges running
  // A bound shared with other clients (in place of config.max_transfers), and
  // this client's place in it; `asked`: it may be queued or hold slots handed to it.
  std::shared_ptr<SharedTransfers> shared;
  std::optional<SharedTransfers::Impl::Waiter> waiter;
  bool asked = false;
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

  // The own client's sockets: in an exchange (job), or idle (job 0) in
  // idle_plain under their origin, watched for the server's close.
  struct PlainSocket {
    Id job = 0;
    std::string pool;
    Interest armed = Interest::kNone;
  };
  std::unordered_map<int, PlainSocket> plain_fds;
  std::unordered_map<std::string, std::vector<int>> idle_plain;
  std::size_t idle_plain_count = 0;
  std::set<std::pair<SteadyTime, Id>> plain_timers;  // due() of exchanges (lazily: a fired one is asked again)
  std::vector<std::unique_ptr<curl_detail::PlainTransfer>> idle_plain_xfers;
  std::unique_ptr<char[]> plain_scratch;
  std::optional<SteadyTime> told_plain_due;

  // The own HTTP/2 client's connections, by socket, and by origin; origins
  // whose server would not speak HTTP/2 (libcurl sends to them); the TLS
  // context, made once (null with h2_tls_failed: libcurl sends everything
  // and reports the CA file it cannot load).
  struct H2Conn {
    std::unique_ptr<h2::Channel> channel;
    curl_detail::H2Target target;  // where it goes (its pool; a spare is made from it)
    Interest armed = Interest::kNone;
    bool dirty = false;  // streams opened, consumed or stopped: bytes may wait to be written
  };
  std::unordered_map<int, H2Conn> h2_conns;
  std::unordered_map<std::string, std::vector<int>> h2_pools;
  std::unordered_set<std::string> h2_refused;
  std::shared_ptr<const h2::TlsContext> h2_tls;
  bool h2_tls_failed = false;
  std::vector<Id> h2_ended;    // jobs whose stream ended by itself, to be ended
  std::vector<int> h2_dirty;   // connections to flush
  std::vector<int> h2_closing; // connections closed, to be dropped once their jobs ended

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
    arm(fd, what);
  }

  // The loop watches `fd` for `what` (through the hooks, or the own epoll).
  void arm(int fd, Interest what) {
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
    // The own client's requests need no libcurl parse (plain_target's is
    // theirs, when the attempt goes out; one that it refuses gets libcurl's then).
    j.plain_eligible = plain_ok && curl_detail::plain_candidate(j.request.url);
    j.h2_eligible = h2_ok && curl_detail::h2_candidate(j.request.url);
    const bool own = j.plain_eligible || j.h2_eligible;
    if (auto why = own ? std::nullopt : curl_detail::parse_url(j.request.url, j.url)) {
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
        if (!j.gate_origin.empty()) gate.left(j.gate_origin, id);
        j.machine->failed("the deadline passed while waiting for a transfer slot", false);
        j.where = Where::kReady;
        ready.push_back(id);
      }
    }
  }

  // ---- transfers ----
  // A slot for one transfer, held until give_slot(); false: none now (with a
  // shared bound, one handed over later wakes the loop).
  bool take_slot() {
    if (shared) {
      if (!shared->impl_->take(*waiter)) {
        asked = true;
        return false;
      }
    } else if (config.max_transfers != 0 && transfers >= config.max_transfers) {
      return false;
    }
    ++transfers;
    return true;
  }
  void give_slot() {
    --transfers;
    if (shared) shared->impl_->give();
  }
  // Nothing waits for a slot here: what the shared bound queued or handed to
  // this client goes on to the others.
  void leave_shared() {
    if (!asked || !slot_queue.empty()) return;
    asked = false;
    shared->impl_->leave(*waiter);
  }

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

  // `j` goes out, on a slot taken for it (given back if it does not).
  void begin_transfer(Job& j, const engine::Step& step) {
    const curl_detail::TransferLimits limits = curl_detail::limits_for(config, step, mono);
    if (j.plain_eligible && curl_detail::plain_allowed(limits)) {
      if (auto target = curl_detail::plain_target(j.request)) {
        begin_plain(j, limits, std::move(*target));
        return;
      }
    }
    if (j.h2_eligible && curl_detail::h2_allowed(limits) && h2_context(limits)) {
      if (auto target = curl_detail::h2_target(j.request); target && !h2_refused.contains(target->pool)) {
        begin_h2(j, limits, std::move(*target), step);
        return;
      }
    }
    begin_curl(j, step, limits);
  }

  // `j` goes out through libcurl, on the slot it holds.
  void begin_curl(Job& j, const engine::Step& step, const curl_detail::TransferLimits& limits) {
    if ((j.plain_eligible || j.h2_eligible) && j.url.handle() == nullptr) {  // libcurl sends it after all
      j.plain_eligible = false;
      j.h2_eligible = false;
      if (auto why = curl_detail::parse_url(j.request.url, j.url)) {
        j.machine->refuse("invalid URL: " + *why);
        give_slot();
        j.where = Where::kReady;
        ready.push_back(j.id);
        return;
      }
    }
    if (held_at_gate(j, step, limits)) {
      give_slot();
      return;
    }
    CURL* e = take_handle();
    if (e == nullptr) {
      j.machine->refuse("libcurl could not create a handle");
    } else if (j.attempt = take_attempt();
               j.attempt->start(e, j.request, limits, j.target, *j.machine, mono, wall,
                                j.url.handle() != nullptr ? &j.url : nullptr)) {
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
        return;
      }
      j.machine->refuse("libcurl could not start the transfer");
    }
    if (!j.gate_origin.empty()) gate.left(j.gate_origin, j.id);
    give_attempt(std::move(j.attempt));
    if (e != nullptr) give_handle(e);
    give_slot();
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
    give_slot();
    if (!j.gate_origin.empty()) {
      tell_gate(j.gate_origin, j.id, *j.attempt);
      gate.left(j.gate_origin, j.id);
    }
    if (j.attempt->end(end, j.cancelled) == curl_detail::Transport::End::kComplete) {
      // An empty body: the head reaches the sink now, before the outcome is final.
      if (!j.final || j.final->given_head() || j.machine->body({})) j.machine->complete();
    }
    give_attempt(std::move(j.attempt));
    give_handle(e);
    j.where = Where::kReady;
    ready.push_back(j.id);
    ending = false;
    take_gate_releases();
    admit_waiters();
  }

  // ---- the own HTTP/2 client ----
  // The TLS context of every connection (the limits' TLS settings are the
  // config's, the same for all); false: libcurl sends instead.
  bool h2_context(const curl_detail::TransferLimits& limits) {
    if (h2_tls) return true;
    if (h2_tls_failed) return false;
    std::string error;
    h2_tls = h2::TlsContext::make({limits.verify_tls, std::string(limits.ca_file), {"h2", "http/1.1"}}, error);
    h2_tls_failed = !h2_tls;
    return !h2_tls_failed;
  }

  void begin_h2(Job& j, const curl_detail::TransferLimits& limits, curl_detail::H2Target target,
                const engine::Step& step) {
    j.h2 = std::make_unique<curl_detail::H2Attempt>();
    if (!j.h2->start(j.request, std::move(target), limits, j.target, *j.machine, mono, wall,
                     std::chrono::steady_clock::now())) {
      j.h2.reset();
      give_slot();
      j.where = Where::kReady;
      ready.push_back(j.id);
      return;
    }
    j.h2->hold_back_if_held(engine.pacer(), j.machine->pacer_key());
    j.h2->tell_end_to(&h2_ended, j.id);
    j.where = Where::kTransfer;
    j.send_deadline = step.deadline;
    int fd = -1;
    if (H2Conn* c = h2_connection(j.h2->target(), fd)) {
      if (j.h2->open(c->channel->session(), fd)) {
        dirty_h2(fd, *c);
        time_plain(j);
        keep_spare(j.h2->target());
        return;
      }
    }
    if (fd < 0) j.h2->fail_to_connect("socket: " + curl_detail::errno_text(errno));
    h2_ended.push_back(j.id);  // held back, refused, or no socket: ended at the pump's next round
  }

  // A connection to `t`'s origin with room for a stream: one open with room,
  // else a new one while the origin has fewer than max_host_connections,
  // else the least busy (its session queues the stream until one ends).
  // Null when no socket could be made (`fd` -1).
  H2Conn* h2_connection(const curl_detail::H2Target& t, int& fd) {
    std::vector<int>& fds = h2_pools[t.pool];
    H2Conn* least = nullptr;
    for (const int f : fds) {
      H2Conn& c = h2_conns.at(f);
      const h2::Session& s = c.channel->session();
      if (c.channel->closed() || s.going_away()) continue;
      if (s.can_open()) {
        fd = f;
        return &c;
      }
      if (least == nullptr || s.open_streams() < least->channel->session().open_streams()) {
        least = &c;
        fd = f;
      }
    }
    if (least != nullptr && config.max_host_connections != 0 && fds.size() >= config.max_host_connections)
      return least;
    if (H2Conn* made = open_h2(t, &fd)) return made;
    return least;
  }

  // A new connection to `t`'s origin (null when no socket could be made;
  // `fd` set when asked).
  H2Conn* open_h2(const curl_detail::H2Target& t, int* made_fd = nullptr) {
    const int fd = ::socket(t.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (made_fd != nullptr) *made_fd = fd;
    if (fd < 0) return nullptr;
    const int one = 1;
    static_cast<void>(::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one));
    const int err = ::connect(fd, reinterpret_cast<const sockaddr*>(&t.addr), t.addr_len) == 0 ? 0 : errno;
    h2::Session::Settings settings;
    settings.max_head_bytes = config.max_header_bytes;
    H2Conn& c = h2_conns[fd];
    c.channel = std::make_unique<h2::Channel>(settings);
    c.target = t;
    h2_pools[t.pool].push_back(fd);
    h2_want(fd, c, c.channel->start(fd, err, h2_tls, t.ip));
    return &c;
  }

  // The origin's connections are all full: one more is set up now, while
  // the bound allows, so that the next request finds a connection ready
  // rather than waiting for a TCP and TLS handshake with a busy server.
  void keep_spare(const curl_detail::H2Target& t) {
    std::vector<int>& fds = h2_pools[t.pool];
    if (config.max_host_connections != 0 && fds.size() >= config.max_host_connections) return;
    for (const int f : fds) {
      const H2Conn& c = h2_conns.at(f);
      if (!c.channel->closed() && c.channel->session().can_open()) return;
    }
    open_h2(t);
  }

  void dirty_h2(int fd, H2Conn& c) {
    if (c.dirty) return;
    c.dirty = true;
    h2_dirty.push_back(fd);
  }
  void dirty_h2(int fd) {
    if (auto it = h2_conns.find(fd); it != h2_conns.end()) dirty_h2(fd, it->second);
  }

  // What connection `fd` waits for next.
  void h2_want(int fd, H2Conn& c, h2::Channel::Want want) {
    Interest what = Interest::kNone;
    switch (want) {
      case h2::Channel::Want::kRead: what = Interest::kRead; break;
      case h2::Channel::Want::kReadWrite: what = Interest::kReadWrite; break;
      case h2::Channel::Want::kClosed:
        if (c.armed != Interest::kNone) arm(fd, Interest::kNone);
        c.armed = Interest::kNone;
        h2_closing.push_back(fd);
        return;
    }
    if (c.armed != what) {
      c.armed = what;
      arm(fd, what);
    }
  }

  void h2_event(int fd) {
    auto it = h2_conns.find(fd);
    if (it == h2_conns.end() || it->second.channel->closed()) return;
    if (!plain_scratch) plain_scratch = std::make_unique_for_overwrite<char[]>(kPlainScratch);
    in_curl = true;
    const auto want = it->second.channel->on_ready(std::span<char>(plain_scratch.get(), kPlainScratch));
    in_curl = false;
    h2_want(fd, it->second, want);
    // The server's SETTINGS may have said the connection is full already.
    const h2::Session& s = it->second.channel->session();
    if (!it->second.channel->closed() && !s.going_away() && !s.can_open()) keep_spare(it->second.target);
  }

  // Streams that ended are ended, connections written to, closed ones dropped.
  void h2_settle() {
    while (!h2_ended.empty() || !h2_dirty.empty() || !h2_closing.empty()) {
      for (const Id id : std::exchange(h2_ended, {})) {
        auto it = jobs.find(id);
        if (it != jobs.end() && it->second->h2) end_h2(*it->second, false);
      }
      for (const int fd : std::exchange(h2_dirty, {})) {
        auto it = h2_conns.find(fd);
        if (it == h2_conns.end() || !it->second.dirty) continue;
        it->second.dirty = false;
        in_curl = true;
        const auto want = it->second.channel->flush();
        in_curl = false;
        h2_want(fd, it->second, want);
      }
      if (!h2_ended.empty()) continue;  // their connections are looked at as they end
      for (const int fd : std::exchange(h2_closing, {})) {
        auto it = h2_conns.find(fd);
        if (it == h2_conns.end()) continue;
        std::erase(h2_pools[it->second.target.pool], fd);
        h2_conns.erase(it);  // closes the socket
      }
    }
  }

  // The stream of `j` ended (`stopped`: cancelled): as end_plain. A request
  // whose server would not speak HTTP/2 goes to libcurl on the same slot,
  // the machine none the wiser.
  void end_h2(Job& j, bool stopped) {
    ending = true;
    std::unique_ptr<curl_detail::H2Attempt> x = std::move(j.h2);
    j.paused = false;
    untime_plain(j);
    x->stop();
    h2::Channel::Failure failure = h2::Channel::Failure::kNone;
    if (auto c = h2_conns.find(x->fd()); c != h2_conns.end()) {
      dirty_h2(x->fd(), c->second);
      if (c->second.channel->closed()) failure = c->second.channel->failure();
    }
    x->connection_failed(failure);
    if (!stopped && failure == h2::Channel::Failure::kNoHttp2 && x->unsent()) {
      h2_refused.insert(x->target().pool);
      ending = false;
      engine::Step step;
      step.kind = engine::Step::Kind::kSend;
      step.deadline = j.send_deadline;
      begin_curl(j, step, curl_detail::limits_for(config, step, mono));
      return;
    }
    give_slot();
    if (x->end(stopped) == curl_detail::Transport::End::kComplete) {
      if (!j.final || j.final->given_head() || j.machine->body({})) j.machine->complete();
    }
    j.where = Where::kReady;
    ready.push_back(j.id);
    ending = false;
    admit_waiters();
  }

  // ---- the own HTTP/1.1 client ----
  void begin_plain(Job& j, const curl_detail::TransferLimits& limits, curl_detail::PlainTarget target) {
    const SteadyTime now = std::chrono::steady_clock::now();
    j.plain = take_plain_xfer();
    if (!j.plain->start(j.request, std::move(target), limits, j.target, *j.machine, mono, wall, now)) {
      give_plain_xfer(std::move(j.plain));
      give_slot();
      j.where = Where::kReady;
      ready.push_back(j.id);
      return;
    }
    j.plain->hold_back_if_held(engine.pacer(), j.machine->pacer_key());
    j.where = Where::kTransfer;
    int err = 0;
    bool reused = false;
    const int fd = plain_socket(j, reused, err);
    in_curl = true;
    const auto want = j.plain->attach(fd, reused, err, now);
    in_curl = false;
    plain_want(j, want);
  }

  std::unique_ptr<curl_detail::PlainTransfer> take_plain_xfer() {
    if (idle_plain_xfers.empty()) return std::make_unique<curl_detail::PlainTransfer>();
    auto x = std::move(idle_plain_xfers.back());
    idle_plain_xfers.pop_back();
    return x;
  }
  void give_plain_xfer(std::unique_ptr<curl_detail::PlainTransfer> x) {
    if (x && idle_plain_xfers.size() < kMaxIdleHandles) idle_plain_xfers.push_back(std::move(x));
  }

  // A socket for j's exchange: one kept alive to its origin, else a fresh
  // one connecting (-1 with `err` when none could be made).
  int plain_socket(Job& j, bool& reused, int& err, bool may_reuse = true) {
    const curl_detail::PlainTarget& t = j.plain->target();
    if (auto it = idle_plain.find(t.pool); may_reuse && it != idle_plain.end() && !it->second.empty()) {
      const int fd = it->second.back();
      it->second.pop_back();
      --idle_plain_count;
      plain_fds[fd].job = j.id;
      reused = true;
      return fd;
    }
    reused = false;
    const int fd = ::socket(t.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      err = errno;
      return -1;
    }
    const int one = 1;  // as libcurl: no Nagle delay on a request's last bytes
    static_cast<void>(::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one));
    err = ::connect(fd, reinterpret_cast<const sockaddr*>(&t.addr), t.addr_len) == 0 ? 0 : errno;
    if (err != 0 && err != EINPROGRESS) {
      ::close(fd);
      return -1;
    }
    PlainSocket& s = plain_fds[fd];
    s.job = j.id;
    s.pool = t.pool;
    s.armed = Interest::kNone;
    return fd;
  }

  void arm_plain(int fd, Interest what) {
    auto it = plain_fds.find(fd);
    if (it == plain_fds.end() || it->second.armed == what) return;
    it->second.armed = what;
    arm(fd, what);
  }

  void close_plain(int fd) {
    if (fd < 0) return;
    if (auto it = plain_fds.find(fd); it != plain_fds.end()) {
      if (it->second.job == 0) {
        auto& list = idle_plain[it->second.pool];
        if (std::erase(list, fd) > 0) --idle_plain_count;
      }
      if (it->second.armed != Interest::kNone) arm(fd, Interest::kNone);
      plain_fds.erase(it);
    }
    ::close(fd);
  }

  // A socket whose exchange ended well, kept for the next one to its origin
  // (as many as transfers may run, as libcurl's connection cache).
  void keep_plain(int fd) {
    auto it = plain_fds.find(fd);
    const std::size_t most = config.max_transfers != 0 ? config.max_transfers : kMaxIdleHandles;
    if (it == plain_fds.end() || idle_plain_count >= most) {
      close_plain(fd);
      return;
    }
    it->second.job = 0;
    idle_plain[it->second.pool].push_back(fd);
    ++idle_plain_count;
    arm_plain(fd, Interest::kRead);  // the server's close (or stray bytes) ends it
  }

  // What the exchange of `j` waits for next.
  void plain_want(Job& j, curl_detail::PlainTransfer::Want want) {
    using Want = curl_detail::PlainTransfer::Want;
    for (;;) {
      const int fd = j.plain->fd();
      switch (want) {
        case Want::kEnded: end_plain(j, false); return;
        case Want::kRead: arm_plain(fd, Interest::kRead); break;
        case Want::kWrite: arm_plain(fd, Interest::kWrite); break;
        case Want::kReadWrite: arm_plain(fd, Interest::kReadWrite); break;
        case Want::kNothing: arm_plain(fd, Interest::kNone); break;
        case Want::kStale: {
          // Sent again once, on a fresh socket (the stale one said nothing).
          close_plain(fd);
          bool reused = false;
          int err = 0;
          const int fresh = plain_socket(j, reused, err, /*may_reuse=*/false);
          in_curl = true;
          want = j.plain->attach(fresh, false, err, std::chrono::steady_clock::now());
          in_curl = false;
          if (want == Want::kStale) want = Want::kEnded;  // (a fresh socket is never stale)
          continue;
        }
      }
      time_plain(j);
      return;
    }
  }

  void time_plain(Job& j) {
    const SteadyTime due = j.plain ? j.plain->due() : j.h2 ? j.h2->due() : SteadyTime::max();
    if (j.plain_timed && j.plain_timer_at <= due) return;  // the entry fires first and asks again
    untime_plain(j);
    if (due == SteadyTime::max()) return;
    j.plain_timer_at = due;
    j.plain_timed = true;
    plain_timers.emplace(due, j.id);
  }
  void untime_plain(Job& j) {
    if (!j.plain_timed) return;
    plain_timers.erase({j.plain_timer_at, j.id});
    j.plain_timed = false;
  }

  // The exchange of `j` ended (`stopped`: cancelled): as end_transfer.
  void end_plain(Job& j, bool stopped) {
    ending = true;
    std::unique_ptr<curl_detail::PlainTransfer> x = std::move(j.plain);
    j.paused = false;
    untime_plain(j);
    give_slot();
    const int fd = x->fd();
    if (x->end(stopped) == curl_detail::Transport::End::kComplete) {
      if (!j.final || j.final->given_head() || j.machine->body({})) j.machine->complete();
    }
    if (x->reusable() && !stopped) keep_plain(fd);
    else close_plain(fd);
    give_plain_xfer(std::move(x));
    j.where = Where::kReady;
    ready.push_back(j.id);
    ending = false;
    admit_waiters();
  }

  void plain_event(int fd) {
    auto it = plain_fds.find(fd);
    if (it == plain_fds.end()) return;
    if (it->second.job == 0) {  // idle: closed by the server, or bytes no request asked for
      close_plain(fd);
      return;
    }
    auto jt = jobs.find(it->second.job);
    if (jt == jobs.end() || !jt->second->plain) return;
    Job& j = *jt->second;
    if (!plain_scratch) plain_scratch = std::make_unique_for_overwrite<char[]>(kPlainScratch);
    in_curl = true;
    const auto want = j.plain->on_ready(std::span<char>(plain_scratch.get(), kPlainScratch), std::chrono::steady_clock::now());
    in_curl = false;
    plain_want(j, want);
  }

  void plain_timeouts() {
    const SteadyTime now = std::chrono::steady_clock::now();
    while (!plain_timers.empty() && plain_timers.begin()->first <= now) {
      const Id id = plain_timers.begin()->second;
      plain_timers.erase(plain_timers.begin());
      auto it = jobs.find(id);
      if (it == jobs.end() || (!it->second->plain && !it->second->h2)) continue;
      Job& j = *it->second;
      j.plain_timed = false;
      if (j.h2) {
        if (!j.h2->on_time(now)) time_plain(j);  // (on_time ended it: h2_ended has it)
        continue;
      }
      in_curl = true;
      const auto want = j.plain->on_time(now);
      in_curl = false;
      plain_want(j, want);
    }
  }

  // The earliest of libcurl's timer and the own client's.
  std::optional<SteadyTime> steady_due() const {
    std::optional<SteadyTime> t = curl_due;
    if (!plain_timers.empty() && (!t || plain_timers.begin()->first < *t)) t = plain_timers.begin()->first;
    return t;
  }

  // ---- the gate: one transfer per https origin connecting at a time ----
  // Whether `j` waits for its origin's connection being set up
  // (connection_gate.h); it then waits in kSlot, its bound timed as a slot's.
  bool held_at_gate(Job& j, const engine::Step& step, const curl_detail::TransferLimits& limits) {
    if (std::exchange(j.gate_pass, false)) return false;
    if (limits.http_version == HttpVersion::kHttp1_1) return false;
    if (j.gate_origin.empty()) {
      auto o = parse_origin(j.request.url);
      if (!o || o->scheme != "https") return false;
      j.gate_origin = std::move(o->origin);
    }
    if (gate.admit(j.gate_origin, j.id)) return false;
    j.where = Where::kSlot;
    j.send_deadline = step.deadline;
    if (auto bound = slot_bound(j.request)) time(j, *bound);
    return true;
  }

  // After libcurl ran: the connecting transfers whose connection is ready let
  // the next of their origin go.
  void look_at_gate() {
    if (gate.connecting().empty()) return;
    std::vector<std::pair<std::string, Id>> now(gate.connecting().begin(), gate.connecting().end());
    for (auto& [origin, id] : now) {
      auto it = jobs.find(id);
      if (it == jobs.end()) {
        gate.left(origin, id);
        continue;
      }
      const Job& j = *it->second;
      if (j.where != Where::kTransfer || !j.attempt) continue;  // released, waiting for a transfer slot
      tell_gate(origin, id, *j.attempt);
    }
    take_gate_releases();
  }

  // What transfer `id`'s attempt learned of its origin: the answer's HTTP
  // version, and whether its connection is ready.
  void tell_gate(const std::string& origin, Id id, const curl_detail::EasyAttempt& a) {
    if (const int v = a.answer_version(); v != 0) gate.heard(origin, v);
    if (a.connected()) gate.connected(origin, id);
  }

  // Jobs the gate released go first among those waiting for a slot.
  void take_gate_releases() {
    const std::vector<Id> released = gate.take_released();
    for (auto it = released.rbegin(); it != released.rend(); ++it) {
      auto jt = jobs.find(*it);
      if (jt == jobs.end() || jt->second->where != Where::kSlot) continue;
      jt->second->gate_pass = true;
      slot_queue.push_front(*it);
    }
  }

  void admit_waiters() {
    while (!slot_queue.empty()) {
      const Id id = slot_queue.front();
      auto it = jobs.find(id);
      if (it == jobs.end()) {
        slot_queue.pop_front();
        continue;
      }
      if (!take_slot()) break;
      slot_queue.pop_front();
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
        if (j.plain) {
          end_plain(j, true);
          break;
        }
        if (j.h2) {
          end_h2(j, true);
          break;
        }
        TransferEnd end;
        end.kind = TransferEnd::Kind::kCancelled;
        end_transfer(j, end);
        break;
      }
      case Where::kSlot:
        std::erase(slot_queue, j.id);
        if (!j.gate_origin.empty()) gate.left(j.gate_origin, j.id);
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
    if (it == jobs.end() || it->second->where != Where::kTransfer ||
        (it->second->easy == nullptr && !it->second->plain && !it->second->h2))
      return false;
    Job& j = *it->second;
    if (j.paused == paused) return true;
    j.paused = paused;
    if (j.h2) {
      // The stream's window stays closed while paused; a resume reopens it,
      // and the connection writes the WINDOW_UPDATE at the pump.
      if (paused) {
        j.h2->pause();
      } else {
        j.h2->resume();
        dirty_h2(j.h2->fd());
        time_plain(j);
      }
      want_turn();
      return true;
    }
    if (j.plain) {
      // From the sink (inside the exchange's read): what it returns next
      // follows the flag. From anywhere else, the socket's watch changes now.
      if (paused) {
        j.plain->pause();
        if (!in_curl) arm_plain(j.plain->fd(), Interest::kNone);
      } else {
        const auto want = j.plain->resume();
        if (!in_curl && want != curl_detail::PlainTransfer::Want::kEnded) plain_want(j, want);
        else if (!in_curl) want_turn();
      }
      want_turn();
      return true;
    }
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
        if (slot_queue.empty() && take_slot()) {
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
      h2_settle();
      look_at_gate();
      admit_waiters();
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
      const int most_kicks = gate.connecting().empty() ? kMaxKicks : kMaxGateKicks;
      if (kicks < most_kicks && curl_due && *curl_due <= std::chrono::steady_clock::now()) {
        ++kicks;
        curl_due.reset();
        curl_action(CURL_SOCKET_TIMEOUT, 0);
        continue;
      }
      if (ready.empty() && finished.empty() && to_cancel.empty() && h2_ended.empty() && h2_dirty.empty() &&
          h2_closing.empty())
        break;
    }
    if (shared) leave_shared();
    pumping = false;
    tell_timer();
  }

  // ---- what the loop is told ----
  std::optional<Duration> timeout() const {
    if (!ready.empty() || !finished.empty() || !to_cancel.empty()) return Duration::zero();
    std::optional<Duration> t;
    if (const auto due = steady_due()) t = std::max<Duration>(*due - std::chrono::steady_clock::now(), Duration::zero());
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
    const std::optional<SteadyTime> plain_due =
        plain_timers.empty() ? std::nullopt : std::optional<SteadyTime>(plain_timers.begin()->first);
    if (told_any && now == told_now && curl_due == told_curl_due && timer_due == told_timer_due &&
        plain_due == told_plain_due)
      return;
    told_any = true;
    told_now = now;
    told_curl_due = curl_due;
    told_plain_due = plain_due;
    told_timer_due = timer_due;
    hooks.timer(timeout());
  }

  void on_socket(int fd, Interest what) {
    const StoreBatch batch(engine.pacer().store());
    if (fd == wake_fd) {
      take_notified();
    } else if (plain_fds.contains(fd)) {
      plain_event(fd);
    } else if (h2_conns.contains(fd)) {
      h2_event(fd);
    } else {
      curl_action(static_cast<curl_socket_t>(fd), curl_flags(what));
    }
    pump();
  }

  void on_timer() {
    const StoreBatch batch(engine.pacer().store());
    told_any = false;  // the hook's timer has fired: a new one is needed
    curl_timeouts();
    plain_timeouts();
    fire_timers();
    pump();
  }

  void process() {
    const StoreBatch batch(engine.pacer().store());
    epoll_event events[64];
    const int n = epoll_fd >= 0 ? ::epoll_wait(epoll_fd, events, 64, 0) : 0;
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd) {
        take_notified();
        continue;
      }
      if (plain_fds.contains(fd)) {
        plain_event(fd);
        continue;
      }
      if (h2_conns.contains(fd)) {
        h2_event(fd);
        continue;
      }
      int flags = 0;
      if ((events[i].events & EPOLLIN) != 0) flags |= CURL_CSELECT_IN;
      if ((events[i].events & EPOLLOUT) != 0) flags |= CURL_CSELECT_OUT;
      if ((events[i].events & (EPOLLERR | EPOLLHUP)) != 0) flags |= CURL_CSELECT_ERR;
      curl_action(static_cast<curl_socket_t>(fd), flags);
    }
    curl_timeouts();
    plain_timeouts();
    fire_timers();
    pump();
  }
};

LoopClient::LoopClient(ClientConfig config) : impl_(std::make_unique<Impl>(std::move(config), Hooks{})) {}
LoopClient::LoopClient(ClientConfig config, Hooks hooks)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(hooks))) {}
LoopClient::LoopClient(ClientConfig config, Hooks hooks, std::shared_ptr<SharedTransfers> transfers)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(hooks), std::move(transfers))) {}
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
