// How many of a test server's handlers run at once, and the most seen: a
// handler holds enter()'s guard while it works.
#pragma once

#include <atomic>

namespace abide::test {

class Concurrency {
 public:
  class Inside {
   public:
    explicit Inside(std::atomic<int>& now) noexcept : now_(now) {}
    ~Inside() { --now_; }
    Inside(const Inside&) = delete;
    Inside& operator=(const Inside&) = delete;

   private:
    std::atomic<int>& now_;
  };

  [[nodiscard]] Inside enter() noexcept {
    const int in = ++now_;
    int seen = most_.load();
    while (in > seen && !most_.compare_exchange_weak(seen, in)) {
    }
    return Inside(now_);
  }
  int most() const noexcept { return most_.load(); }

 private:
  std::atomic<int> now_{0};
  std::atomic<int> most_{0};
};

}  // namespace abide::test
