// The callers of `abide proxy` that hang up while their request is in flight:
// one thread watches their sockets (epoll: EPOLLRDHUP, EPOLLHUP, EPOLLERR,
// never EPOLLIN, so pipelined bytes do not count) and triggers the request's
// stop source, which cancels its wait and its upstream transfer.
//
// A socket is registered once per connection, edge-triggered (a hang-up is
// reported once), and each request arms its stop source for its time in
// flight: two system calls per connection instead of two per request. A
// hang-up seen while nothing is armed is remembered, so a request armed
// after it is stopped at once.
#pragma once

#include <cstdint>
#include <mutex>
#include <stop_token>
#include <thread>
#include <unordered_map>

namespace abide::proxy {

class HangupWatcher {
 public:
  HangupWatcher();
  ~HangupWatcher();  // stops the thread
  HangupWatcher(const HangupWatcher&) = delete;
  HangupWatcher& operator=(const HangupWatcher&) = delete;

  // False when epoll could not be set up (then nothing is watched).
  bool ok() const noexcept { return epoll_ >= 0; }

  // Watches `fd` (a connection) until unwatch(). Returns the watch's id (0:
  // not watched; arm and disarm then do nothing).
  std::uint64_t watch(int fd);
  // A hang-up from now until disarm(), or one already seen, triggers `stop`.
  void arm(std::uint64_t id, std::stop_source stop);
  void disarm(std::uint64_t id);
  // Ends the watch (before the socket is closed, so that a reused fd is never
  // taken for this one).
  void unwatch(int fd, std::uint64_t id);

 private:
  void run();

  int epoll_ = -1;
  int wake_ = -1;  // an eventfd that ends run()
  std::mutex mu_;
  std::uint64_t next_id_ = 1;
  struct Watch {
    std::stop_source stop{std::nostopstate};  // armed: the request in flight
    bool hung_up = false;
  };
  std::unordered_map<std::uint64_t, Watch> watched_;  // by id
  std::thread thread_;
};

}  // namespace abide::proxy
