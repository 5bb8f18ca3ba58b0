// SharedTransfers::Impl: the bound on transfers that several LoopClients, each
// on its own thread, share (see abide/loop_client.h).
//
// A slot is taken at once while fewer than `limit` are in use and no client
// waits. Otherwise the client queues (once, however many of its requests
// wait), and a slot given back goes straight to the client at the head of
// the queue (it stays in use, credited to that client, which is woken through
// its descriptor): a client whose own transfer ended cannot take that slot
// again ahead of a client that waited first, so the loops take turns.
#pragma once

#include <cstddef>
#include <deque>

#include "abide/loop_client.h"
#include "mutex.h"

namespace abide {

struct SharedTransfers::Impl {
  // One client's place in the budget. Its fields belong to the budget's
  // mutex; the client holds it for its whole life.
  class Waiter {
   public:
    explicit Waiter(int wake_fd) : wake_fd_(wake_fd) {}

   private:
    friend struct SharedTransfers::Impl;
    const int wake_fd_;       // written once per slot handed over
    std::size_t granted_ = 0;  // slots handed over, not yet taken
    bool queued_ = false;
  };

  explicit Impl(std::size_t most) : limit(most == 0 ? 1 : most) {}

  // A slot for one transfer of `w`'s client: true when it has one (then it
  // gives it back with give()); false when it must wait (it is queued and
  // woken when one is handed to it).
  bool take(Waiter& w);
  // A slot `w`'s client held goes back (to the client waiting longest).
  void give();
  // `w`'s client waits for nothing any more: out of the queue, and the slots
  // handed to it and not taken go on to the next.
  void leave(Waiter& w);
  std::size_t in_use() const;

  const std::size_t limit;

 private:
  void hand_on() ABIDE_REQUIRES(mu);  // one slot: to the queue's head, or free

  mutable detail::Mutex mu;
  std::size_t used ABIDE_GUARDED_BY(mu) = 0;  // running, or handed over and not yet taken
  std::deque<Waiter*> queue ABIDE_GUARDED_BY(mu);
};

}  // namespace abide
