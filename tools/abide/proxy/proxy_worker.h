// One event loop of `abide proxy`: a thread with its own epoll set, its share
// of the caller connections (accepted from the listening socket all loops
// share) and its own LoopClient, whose sockets and timer live in the same
// epoll set. Nothing in a loop blocks: a caller's read, a pacer or retry wait
// and an upstream transfer are each an event or a timer. The loops share only
// ProxyServer::Core (its atomics and locked maps).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "abide/loop_client.h"
#include "proxy/proxy_core.h"

namespace abide::proxy {

class Caller;

class Worker {
 public:
  // `transfers`: ProxyOptions::jobs, shared by every loop (a slot one loop
  // frees goes to another whose requests wait). `idle_transfers`,
  // `max_connections` and `upstream_connections` (0: no bound): this loop's
  // shares of the jobs (as the idle connections its client keeps),
  // max_connections and max_upstream_connections.
  // `index`: the loop's place among the loops (for the stats pages).
  Worker(ProxyServer::Core& core, std::size_t index, std::shared_ptr<SharedTransfers> transfers,
         std::size_t idle_transfers, std::size_t max_connections, std::size_t upstream_connections);
  ~Worker();  // joins the thread
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // False when the epoll set or the wake-up descriptor could not be made.
  bool ok() const noexcept { return epoll_fd_ >= 0 && wake_fd_ >= 0; }
  // Starts the loop's thread, accepting from core.listen_fd.
  void start();
  // Wakes the loop (from any thread): it looks at Core::stopping (once set,
  // it drains and returns when its callers are answered; see
  // ProxyServer::stop) and at whether it should accept.
  void wake();
  void join();

  // --- for this loop's callers (on its thread) ---
  ProxyServer::Core& core() noexcept { return core_; }
  LoopClient& client() noexcept { return *client_; }
  // A buffer to receive into, shared by the loop's callers (an idle caller holds none).
  std::span<char> scratch() noexcept { return {scratch_.get(), kScratch}; }
  // Watches the caller's socket, edge-triggered, for everything (once).
  void watch(Caller& c);
  // Stops watching the caller's socket at all (before it closes, or after a hang-up).
  void unwatch(Caller& c);
  // The caller's next deadline on Core::mono (nullopt: none).
  void set_deadline(Caller& c, std::optional<MonoTime> at);
  // The caller has something to do after the current event: its flight's
  // outcome arrived, or its output grew.
  void mark(Caller& c);
  // The flight's events reach it (by Flight::id) until forget().
  void track(Flight& f) { flights_[f.id] = &f; }
  void forget(const Flight& f) { flights_.erase(f.id); }
  // The caller is finished: its socket closes and it is freed after this turn.
  void close(Caller& c);
  bool draining() const noexcept { return draining_; }

 private:
  static constexpr std::size_t kScratch = std::size_t{64} << 10;
  void run();
  void on_client_event(const ClientEvent& e);
  void listen(bool on);
  void balance_accepting();
  // This loop holds well more callers than the loops' average: callers
  // arrive in bursts, and a loop that takes a whole burst does its work alone.
  bool ahead_of_others() const;
  void nudge_others();  // each other loop looks at its accepting again
  void accept_some();
  void admit(int fd);
  bool reclaim_idle();
  void fire_deadlines();
  void service_marked();
  void begin_drain();
  void drain_step();
  bool drained_out() const;
  int wait_ms() const;

  void count_connections(int change);

  ProxyServer::Core& core_;
  const std::size_t index_;
  std::size_t max_connections_;
  std::size_t connections_ = 0;  // callers open (closed_ ones no longer count)
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::unique_ptr<char[]> scratch_;
  std::unique_ptr<LoopClient> client_;
  std::optional<std::chrono::steady_clock::time_point> client_due_;  // LoopClient's timer (real time)
  std::unordered_map<Caller*, std::unique_ptr<Caller>> callers_;
  std::vector<std::unique_ptr<Caller>> closed_;  // freed at the end of the turn
  std::set<std::pair<MonoTime, Caller*>> deadlines_;
  std::vector<Caller*> marked_;
  std::unordered_map<std::uint64_t, Flight*> flights_;
  bool listening_ = false;                // the listening socket is in this loop's epoll set
  std::optional<MonoTime> accept_resume_;  // out of descriptors: accepting waits until then
  bool draining_ = false;
  bool cut_ = false;  // the grace period ended: what is left was cancelled
  MonoTime grace_end_{};
  MonoTime last_end_{};  // the drain's last moment: then every connection is cut
};

}  // namespace abide::proxy
