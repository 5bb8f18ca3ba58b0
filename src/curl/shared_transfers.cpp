// The transfer bound shared by LoopClients (see shared_transfers.h).
#include "shared_transfers.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace abide {

bool SharedTransfers::Impl::take(Waiter& w) {
  detail::MutexLock lock(mu);
  if (w.granted_ > 0) {
    --w.granted_;
    return true;
  }
  if (used < limit && queue.empty()) {
    ++used;
    return true;
  }
  if (!w.queued_) {
    w.queued_ = true;
    queue.push_back(&w);
  }
  return false;
}

void SharedTransfers::Impl::give() {
  detail::MutexLock lock(mu);
  hand_on();
}

void SharedTransfers::Impl::leave(Waiter& w) {
  detail::MutexLock lock(mu);
  if (w.queued_) {
    std::erase(queue, &w);
    w.queued_ = false;
  }
  for (; w.granted_ > 0; --w.granted_) hand_on();
}

std::size_t SharedTransfers::Impl::in_use() const {
  detail::MutexLock lock(mu);
  return used;
}

void SharedTransfers::Impl::hand_on() {
  if (queue.empty()) {
    if (used > 0) --used;
    return;
  }
  Waiter& next = *queue.front();
  queue.pop_front();
  next.queued_ = false;
  ++next.granted_;
  // Under the mutex: a client leaves (and closes its descriptor) only after
  // leave(), which waits for it.
  const std::uint64_t one = 1;
  static_cast<void>(::write(next.wake_fd_, &one, sizeof one));
}

SharedTransfers::SharedTransfers(std::size_t limit) : impl_(std::make_unique<Impl>(limit)) {}
SharedTransfers::~SharedTransfers() = default;
std::size_t SharedTransfers::limit() const noexcept { return impl_->limit; }
std::size_t SharedTransfers::in_use() const { return impl_->in_use(); }

}  // namespace abide
