// One event loop of `abide proxy` (see proxy_worker.h).
#include "proxy/proxy_worker.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "curl/epoll_interest.h"
#include "proxy/answer_writer.h"
#include "proxy/caller_connection.h"

namespace abide::proxy {
namespace proxy_worker {  // private to this file (the CLI is compiled in batches)

// What an epoll event is for, in its 64 bits: a Caller's address (aligned,
// so its low three bits are 0), or one of these tags in the low bits.
constexpr std::uint64_t kCurlTag = 1;  // a LoopClient socket: (fd << 3) | kCurlTag
constexpr std::uint64_t kListenTag = 2;
constexpr std::uint64_t kWakeTag = 3;
constexpr int kMaxEvents = 256;
constexpr int kAcceptsPerEvent = 64;
// Out of descriptors: accepting pauses this long, so that connections can end.
constexpr Duration kAcceptPause = std::chrono::milliseconds{50};
// During the drain the loop looks at the clock at least this often.
constexpr Duration kDrainTick = std::chrono::milliseconds{50};
// After the grace period, what was cancelled has this long to be answered.
constexpr Duration kLastWords = std::chrono::seconds{5};

}  // namespace proxy_worker

using namespace proxy_worker;

Worker::Worker(ProxyServer::Core& core, std::size_t index, std::shared_ptr<SharedTransfers> transfers,
               std::size_t idle_transfers, std::size_t max_connections, std::size_t upstream_connections)
    : core_(core),
      index_(index),
      max_connections_(std::max<std::size_t>(max_connections, 1)),
      epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      scratch_(std::make_unique_for_overwrite<char[]>(kScratch)) {
  if (epoll_fd_ >= 0 && wake_fd_ >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kWakeTag;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  }
  ClientConfig config = core.client_config;
  config.max_transfers = idle_transfers;
  config.max_host_connections = upstream_connections;
  EventHook user = std::move(config.on_event);
  config.on_event = [this, user](const ClientEvent& e) {
    on_client_event(e);
    if (user) user(e);
  };
  LoopClient::Hooks hooks;
  hooks.watch = [this](int fd, LoopClient::Interest what) {
    epoll_event ev{};
    ev.events = curl_detail::epoll_events(what);
    ev.data.u64 = (static_cast<std::uint64_t>(fd) << 3) | kCurlTag;
    if (what == LoopClient::Interest::kNone) {
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, &ev);  // (libcurl may have closed it: that is fine)
    } else if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev) != 0 && errno == ENOENT) {
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    }
  };
  hooks.timer = [this](std::optional<Duration> after) {
    if (!after) client_due_.reset();
    else client_due_ = std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::steady_clock::duration>(*after);
  };
  client_ = std::make_unique<LoopClient>(std::move(config), std::move(hooks), std::move(transfers));
}

Worker::~Worker() {
  join();
  client_.reset();  // its requests end (their done is not called) before the callers go
  callers_.clear();
  closed_.clear();
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Worker::start() {
  core_.stats.set_loop_connections(index_, 0);  // every loop shows on the pages
  listen(true);
  thread_ = std::thread([this] { run(); });
}

void Worker::listen(bool on) {
  if (on == listening_) return;
  if (!on) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, core_.listen_fd, nullptr);
    listening_ = false;
    return;
  }
  epoll_event ev{};
  // Every loop watches the one listening socket; EPOLLEXCLUSIVE wakes one
  // (or a few) of them per new connection, not all.
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  ev.data.u64 = kListenTag;
  listening_ = ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, core_.listen_fd, &ev) == 0;
}

void Worker::balance_accepting() {
  if (draining_) return;
  if (accept_resume_ && core_.mono.now() < *accept_resume_) return;  // out of descriptors a moment ago
  accept_resume_.reset();
  // A loop at its share of the connections, or well ahead of the loops'
  // average, leaves new callers to the loops with room (as an nginx worker
  // does when its connections run short); when every loop is full, each goes
  // on accepting, to reclaim an idle connection of its own or answer 503.
  const bool leave_to_others = connections_ >= max_connections_ || ahead_of_others();
  const bool room_elsewhere = core_.open_connections.load() < core_.opts.max_connections;
  const bool on = !leave_to_others || !room_elsewhere;
  // The others look again now: one may have stopped while it was ahead.
  if (listening_ && !on) nudge_others();
  listen(on);
}

bool Worker::ahead_of_others() const {
  const std::size_t loops = core_.workers.size();
  if (loops < 2) return false;
  const std::size_t average = core_.open_connections.load() / loops;
  return connections_ > average + 2 + average / 16;
}

void Worker::nudge_others() {
  for (const auto& w : core_.workers)
    if (w.get() != this) w->wake();
}

void Worker::wake() {
  const std::uint64_t one = 1;
  static_cast<void>(::write(wake_fd_, &one, sizeof one));
}

void Worker::join() {
  if (thread_.joinable()) thread_.join();
}

// ---- the callers' bookkeeping ----------------------------------------------

void Worker::watch(Caller& c) {
  if (c.in_epoll_) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u64 = reinterpret_cast<std::uintptr_t>(&c);
  c.in_epoll_ = ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd(), &ev) == 0;
}

void Worker::unwatch(Caller& c) {
  if (!c.in_epoll_) return;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd(), nullptr);
  c.in_epoll_ = false;
}

void Worker::set_deadline(Caller& c, std::optional<MonoTime> at) {
  if (c.deadline_ == at) return;
  if (c.deadline_) deadlines_.erase({*c.deadline_, &c});
  c.deadline_ = at;
  if (at) deadlines_.emplace(*at, &c);
}

void Worker::mark(Caller& c) {
  if (c.marked_ || c.closed_) return;
  c.marked_ = true;
  marked_.push_back(&c);
}

void Worker::close(Caller& c) {
  if (c.closed_) return;
  unwatch(c);
  set_deadline(c, std::nullopt);
  c.closed_ = true;
  count_connections(-1);
  const auto it = callers_.find(&c);
  if (it == callers_.end()) return;
  closed_.push_back(std::move(it->second));  // freed at the end of the turn: events for it may still be in hand
  callers_.erase(it);
}

// ---- the loop ----------------------------------------------------------------

int Worker::wait_ms() const {
  if (!marked_.empty()) return 0;
  std::optional<Duration> wait;
  if (client_due_) wait = std::max<Duration>(*client_due_ - std::chrono::steady_clock::now(), Duration::zero());
  if (!deadlines_.empty()) {
    const Duration left = std::max<Duration>(deadlines_.begin()->first - core_.mono.now(), Duration::zero());
    if (!wait || left < *wait) wait = left;
  }
  if (draining_ && (!wait || *wait > kDrainTick)) wait = kDrainTick;
  if (!listening_ && !draining_ && (!wait || *wait > kAcceptPause)) wait = kAcceptPause;  // to look again
  // At most a second: a loop never sleeps on a state it forgot to wake for.
  if (!wait) return 1000;
  return static_cast<int>(std::min<std::int64_t>(std::chrono::ceil<std::chrono::milliseconds>(*wait).count(), 1000));
}

void Worker::run() {
  epoll_event events[kMaxEvents];
  for (;;) {
    const int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, wait_ms());
    // The turn's requests and answers share one step of the quota store (one
    // transaction of the file store) instead of two each.
    struct Batch {
      QuotaStore& store;
      explicit Batch(QuotaStore& s) : store(s) { store.begin_batch(); }
      ~Batch() { store.end_batch(); }
      Batch(const Batch&) = delete;
      Batch& operator=(const Batch&) = delete;
    };
    std::optional<Batch> batch(std::in_place, client_->pacer().store());
    for (int i = 0; i < n; ++i) {
      const std::uint64_t tag = events[i].data.u64;
      const std::uint32_t what = events[i].events;
      if (tag == kWakeTag) {
        std::uint64_t count = 0;
        static_cast<void>(::read(wake_fd_, &count, sizeof count));
        if (core_.stopping.load() && !draining_) begin_drain();
      } else if (tag == kListenTag) {
        accept_some();
      } else if ((tag & 7) == kCurlTag) {
        client_->on_socket(static_cast<int>(tag >> 3), curl_detail::interest_of_epoll(what));
      } else {
        auto* c = reinterpret_cast<Caller*>(static_cast<std::uintptr_t>(tag));
        if (!c->closed_) c->on_ready(what);
      }
    }
    if (client_due_ && *client_due_ <= std::chrono::steady_clock::now()) {
      client_due_.reset();
      client_->on_timer();
    }
    fire_deadlines();
    service_marked();
    balance_accepting();
    if (draining_) drain_step();
    batch.reset();
    closed_.clear();
    if (draining_ && drained_out()) break;
  }
  // Whatever is still open is cut.
  std::vector<Caller*> left;
  for (auto& kv : callers_) left.push_back(kv.first);
  for (Caller* c : left) {
    unwatch(*c);
    count_connections(-1);
  }
  client_.reset();
  callers_.clear();
}

void Worker::on_client_event(const ClientEvent& e) {
  Flight* f = nullptr;
  if (const auto it = flights_.find(e.index); it != flights_.end()) f = it->second;
  // A cancel asked from inside the event is taken at the loop's next turn.
  if (f != nullptr && core_.on_event(f, e)) client_->cancel(f->job);
  core_.log_event(f, e);
}

void Worker::fire_deadlines() {
  const MonoTime now = core_.mono.now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    Caller* c = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    c->deadline_.reset();
    c->on_deadline();
  }
}

void Worker::service_marked() {
  // Rounds, bounded: servicing a caller may mark it (or another) again.
  for (int round = 0; round < 4 && !marked_.empty(); ++round) {
    std::vector<Caller*> now;
    now.swap(marked_);
    for (Caller* c : now) {
      c->marked_ = false;
      if (!c->closed_) c->service();
    }
  }
}

// ---- accepting ---------------------------------------------------------------

void Worker::accept_some() {
  for (int i = 0; i < kAcceptsPerEvent && listening_ && !ahead_of_others(); ++i) {
    const int fd = ::accept4(core_.listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      admit(fd);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      // Out of descriptors: stop listening for a moment instead of spinning.
      listen(false);
      accept_resume_ = saturating_add(core_.mono.now(), kAcceptPause);
    }
    return;  // EAGAIN: another loop took it, or nothing is left
  }
}

void Worker::count_connections(int change) {
  if (change > 0) {
    ++connections_;
    core_.open_connections.fetch_add(1);
  } else {
    --connections_;
    core_.open_connections.fetch_sub(1);
  }
  core_.stats.set_loop_connections(index_, connections_);
}

bool Worker::reclaim_idle() {
  for (auto& kv : callers_) {
    if (kv.first->idle()) {
      close(*kv.first);
      return true;
    }
  }
  return false;
}

void Worker::admit(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // Past its share of max_connections an idle keep-alive connection of
  // this loop is closed for the new caller (as an nginx worker reuses its
  // own); when none is idle, the new caller is told to come back.
  if (connections_ >= max_connections_ && !reclaim_idle()) {
    const WallTime now = core_.wall.now();
    MadeAnswer a = error_answer(503, "too many connections", std::chrono::seconds{1}, now + std::chrono::seconds{1}, now);
    if (!a.head.headers.first("Abide-Outcome")) a.head.headers.add("Abide-Outcome", "deferred");
    std::string bytes;
    AnswerWriter(bytes, 1, false, false).made(a);
    // One try: a fresh socket's send buffer takes a short answer whole.
    static_cast<void>(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT));
    ::close(fd);
    return;
  }
  count_connections(+1);
  auto c = std::make_unique<Caller>(*this, fd);
  Caller& ref = *c;
  callers_.emplace(&ref, std::move(c));
  ref.begin();
}

// ---- the drain ---------------------------------------------------------------

void Worker::begin_drain() {
  draining_ = true;
  listen(false);
  // Idle connections close now.
  std::vector<Caller*> all;
  all.reserve(callers_.size());
  for (auto& kv : callers_) all.push_back(kv.first);
  for (Caller* c : all)
    if (!c->closed_) c->on_drain();
  // Callers held in a wait are answered now, with the end of that wait.
  const WallTime now = core_.wall.now();
  const MonoTime mono_now = core_.mono.now();
  std::vector<std::uint64_t> cancels;
  for (auto& kv : flights_) {
    Flight& f = *kv.second;
    if (f.phase != Flight::Phase::kWaiting || f.drained) continue;
    ProxyServer::Core::drain(f, core_.drain_time(f, now, mono_now));
    cancels.push_back(f.job);
  }
  for (const std::uint64_t job : cancels) client_->cancel(job);
  // Transfers in flight get the grace period (on the injected clock).
  grace_end_ = saturating_add(mono_now, core_.opts.grace);
}

void Worker::drain_step() {
  if (cut_) return;
  const MonoTime mono_now = core_.mono.now();
  if (!flights_.empty() && mono_now < grace_end_) return;
  // The grace period is over (or nothing runs): what is left is cancelled,
  // answered 503 unless its answer already began.
  cut_ = true;
  last_end_ = saturating_add(mono_now, kLastWords);
  const WallTime now = core_.wall.now();
  std::vector<std::uint64_t> cancels;
  for (auto& kv : flights_) {
    Flight& f = *kv.second;
    if (f.phase != Flight::Phase::kStreaming && !f.drained) {
      ProxyServer::Core::drain(f, f.phase == Flight::Phase::kWaiting ? core_.drain_time(f, now, mono_now)
                                                                     : now + std::chrono::seconds{1});
    }
    cancels.push_back(f.job);
  }
  for (const std::uint64_t job : cancels) client_->cancel(job);
}

bool Worker::drained_out() const {
  if (!cut_) return false;
  if (core_.mono.now() >= last_end_) return true;
  if (!flights_.empty()) return false;  // a caller forwarding has its flight tracked until answered
  for (const auto& kv : callers_)
    if (kv.first->has_output()) return false;
  return true;
}

}  // namespace abide::proxy
