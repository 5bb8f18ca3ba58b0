#include "proxy/hangup_watcher.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

namespace abide::proxy {

HangupWatcher::HangupWatcher() {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_ < 0 || wake_ < 0) {
    if (epoll_ >= 0) ::close(epoll_);
    if (wake_ >= 0) ::close(wake_);
    epoll_ = wake_ = -1;
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;  // id 0: the wake-up
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
  watched_.reserve(1024);
  thread_ = std::thread([this] { run(); });
}

HangupWatcher::~HangupWatcher() {
  if (epoll_ < 0) return;
  const std::uint64_t one = 1;
  static_cast<void>(::write(wake_, &one, sizeof one));
  thread_.join();
  ::close(epoll_);
  ::close(wake_);
}

std::uint64_t HangupWatcher::watch(int fd) {
  if (epoll_ < 0) return 0;
  std::uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    id = next_id_++;
    watched_.emplace(id, Watch{});
  }
  epoll_event ev{};
  // Edge-triggered: a caller that half-closed stays in that state, and one
  // report is enough (it is remembered until the connection ends).
  ev.events = EPOLLRDHUP | EPOLLHUP | EPOLLERR | EPOLLET;
  ev.data.u64 = id;
  if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    std::lock_guard lock(mu_);
    watched_.erase(id);
    return 0;
  }
  return id;
}

void HangupWatcher::arm(std::uint64_t id, std::stop_source stop) {
  if (id == 0) return;
  bool hung_up = false;
  {
    std::lock_guard lock(mu_);
    auto it = watched_.find(id);
    if (it == watched_.end()) return;
    hung_up = it->second.hung_up;
    if (!hung_up) it->second.stop = stop;
  }
  if (hung_up) stop.request_stop();  // outside the lock: the stop callbacks run here
}

void HangupWatcher::disarm(std::uint64_t id) {
  if (id == 0) return;
  std::lock_guard lock(mu_);
  if (auto it = watched_.find(id); it != watched_.end()) it->second.stop = std::stop_source{std::nostopstate};
}

void HangupWatcher::unwatch(int fd, std::uint64_t id) {
  if (id == 0) return;
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
  std::lock_guard lock(mu_);
  watched_.erase(id);
}

void HangupWatcher::run() {
  epoll_event events[64];
  for (;;) {
    const int n = ::epoll_wait(epoll_, events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < n; ++i) {
      const std::uint64_t id = events[i].data.u64;
      if (id == 0) return;
      std::stop_source stop{std::nostopstate};
      {
        std::lock_guard lock(mu_);
        // A watch ended meanwhile is no longer here: its event is stale.
        if (auto it = watched_.find(id); it != watched_.end()) {
          it->second.hung_up = true;
          stop = it->second.stop;
        }
      }
      // Outside the lock: the stop callbacks (the transfer's) run in here.
      stop.request_stop();
    }
  }
}

}  // namespace abide::proxy
