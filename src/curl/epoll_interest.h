// LoopClient's socket interests as epoll events, and back: for the loops that
// drive a LoopClient over epoll (its own descriptor, and `abide proxy`'s).
#pragma once

#include <sys/epoll.h>

#include <cstdint>

#include "abide/loop_client.h"

namespace abide::curl_detail {

inline std::uint32_t epoll_events(LoopClient::Interest what) noexcept {
  switch (what) {
    case LoopClient::Interest::kRead: return EPOLLIN;
    case LoopClient::Interest::kWrite: return EPOLLOUT;
    case LoopClient::Interest::kReadWrite: return EPOLLIN | EPOLLOUT;
    case LoopClient::Interest::kNone: break;
  }
  return 0;
}

// What epoll reported, as LoopClient::on_socket takes it: an error or a
// hang-up is told as both (libcurl finds out which when it reads or writes).
inline LoopClient::Interest interest_of_epoll(std::uint32_t events) noexcept {
  bool in = (events & EPOLLIN) != 0;
  bool out = (events & EPOLLOUT) != 0;
  if ((events & (EPOLLERR | EPOLLHUP)) != 0) in = out = true;
  if (in && out) return LoopClient::Interest::kReadWrite;
  return out ? LoopClient::Interest::kWrite : LoopClient::Interest::kRead;
}

}  // namespace abide::curl_detail
