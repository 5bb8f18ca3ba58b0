// sqlite/group_commit.h: operations that arrive while a transaction runs
// wait, and then run together in one.
//
// A file-store transaction costs almost only its locks and one page write
// (bench/store_bench.cpp): about as much for twenty operations as for one.
// So callers that arrive while a batch runs queue up; when it ends, the first
// of them leads the next batch with every operation queued, in arrival
// order, and the others wait for it. No thread of its own: an uncontended
// caller leads a batch of one at once. Each waiter is woken once, when its
// batch ended or when it is to lead: never the whole queue.
#pragma once

#include <condition_variable>
#include <thread>
#include <vector>

#include "mutex.h"

namespace abide::sqlite_detail {

// What a queued operation carries for the queue (guarded by its mutex).
struct Queued {
  std::condition_variable wake;
  bool finished = false;  // its batch ended
  bool lead = false;      // it leads the next batch
};

template <class Op>  // Op derives from Queued
class GroupCommit {
 public:
  // Returns once `op` ran in a batch: `run(std::vector<Op*>&)` runs one
  // batch, in the thread of the caller that leads it.
  template <class Run>
  void submit(Op& op, Run&& run) {
    detail::UniqueLock lock(mu_);
    queue_.push_back(&op);
    if (leading_) {
      op.wake.wait(lock.native(), [&] { return op.finished || op.lead; });
      if (op.finished) return;
    }
    leading_ = true;
    if (contended_) {
      // The last batch's callers were just woken: let them queue their next
      // operations before this batch is taken.
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    }
    std::vector<Op*> batch;
    batch.swap(queue_);
    contended_ = batch.size() > 1;
    lock.unlock();
    // Whatever run() does (it may throw bad_alloc), the batch ends. The wakes
    // happen under the lock, so no waiter returns (and ends its operation's
    // life) before its wake is done.
    struct End {
      GroupCommit& q;
      detail::UniqueLock& lock;
      std::vector<Op*>& batch;
      // The checks do not follow the caller's lock into this destructor;
      // end_locked() states what it needs.
      ~End() ABIDE_NO_THREAD_SAFETY_ANALYSIS {
        lock.lock();
        q.end_locked(batch);
      }
    } end{*this, lock, batch};
    run(batch);
  }

 private:
  // Wakes the batch's callers, and the next leader if any.
  void end_locked(std::vector<Op*>& batch) ABIDE_REQUIRES(mu_) {
    for (Op* o : batch) {
      o->finished = true;
      o->wake.notify_one();
    }
    if (queue_.empty()) {
      leading_ = false;
    } else {
      queue_.front()->lead = true;
      queue_.front()->wake.notify_one();
    }
  }

  detail::Mutex mu_;
  std::vector<Op*> queue_ ABIDE_GUARDED_BY(mu_);
  bool leading_ ABIDE_GUARDED_BY(mu_) = false;
  bool contended_ ABIDE_GUARDED_BY(mu_) = false;  // the last batch held more than one operation
};

}  // namespace abide::sqlite_detail
