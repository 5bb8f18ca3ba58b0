// mutex.h: std::mutex and std::recursive_mutex with clang's thread-safety
// attributes, which libstdc++'s own carry none of, so that members can be
// declared ABIDE_GUARDED_BY one and the clang builds check every access.
// Each call is the standard one, inlined: no cost over the plain mutex.
#pragma once

#include <mutex>

#include "thread_annotations.h"

namespace abide::detail {

template <class M>
class ABIDE_CAPABILITY("mutex") BasicMutex {
 public:
  BasicMutex() = default;
  BasicMutex(const BasicMutex&) = delete;
  BasicMutex& operator=(const BasicMutex&) = delete;

  void lock() ABIDE_ACQUIRE() { mu_.lock(); }
  void unlock() ABIDE_RELEASE() { mu_.unlock(); }
  bool try_lock() ABIDE_TRY_ACQUIRE(true) { return mu_.try_lock(); }

  // The mutex itself, for a std::unique_lock (UniqueLock's, which a
  // std::condition_variable needs); taking it there is not seen by the checks.
  M& native() noexcept { return mu_; }

 private:
  M mu_;
};

using Mutex = BasicMutex<std::mutex>;
using RecursiveMutex = BasicMutex<std::recursive_mutex>;

// Holds the mutex for its scope, like std::lock_guard.
template <class M>
class ABIDE_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(BasicMutex<M>& mu) ABIDE_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() ABIDE_RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  BasicMutex<M>& mu_;
};

// Holds the mutex for its scope, like std::unique_lock: it may be released
// and taken again, and native() hands a std::condition_variable the
// std::unique_lock it waits with (which holds the mutex again when the wait
// returns, as the checks assume).
class ABIDE_SCOPED_CAPABILITY UniqueLock {
 public:
  explicit UniqueLock(Mutex& mu) ABIDE_ACQUIRE(mu) : lock_(mu.native()) {}
  ~UniqueLock() ABIDE_RELEASE() = default;
  UniqueLock(const UniqueLock&) = delete;
  UniqueLock& operator=(const UniqueLock&) = delete;

  void lock() ABIDE_ACQUIRE() { lock_.lock(); }
  void unlock() ABIDE_RELEASE() { lock_.unlock(); }

  std::unique_lock<std::mutex>& native() noexcept { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace abide::detail
