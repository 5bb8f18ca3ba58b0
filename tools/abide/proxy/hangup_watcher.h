// The callers of `abide proxy` that hang up while their request is in flight:
// one thread watches their sockets (epoll: EPOLLRDHUP, EPOLLHUP, EPOLLERR,
// never EPOLLIN, so pipelined bytes do not count) and triggers the request's
// stop source, which cancels its wait and its upstream transfer.
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

  // Watches `fd` until unwatch(): a hang-up triggers `stop` once. Returns the
  // watch's id (0: not watched).
  std::uint64_t watch(int fd, std::stop_source stop);
  // Ends the watch (before the socket is closed, so that a reused fd is never
  // taken for this one).
  void unwatch(int fd, std::uint64_t id);

 private:
  void run();

  int epoll_ = -1;
  int wake_ = -1;  // an eventfd that ends run()
  std::mutex mu_;
  std::uint64_t next_id_ = 1;
  std::unordered_map<std::uint64_t, std::stop_source> watched_;  // by id
  std::thread thread_;
};

}  // namespace abide::proxy
