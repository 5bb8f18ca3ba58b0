#include "abide/clock.h"
#include "abide/testing/manual_clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace abide {
namespace {

using namespace std::chrono_literals;

TEST(Saturating, SubClampsAtTheEnds) {
  EXPECT_EQ(saturating_sub(Duration::min(), 1s), Duration::min());
  EXPECT_EQ(saturating_sub(Duration::max(), -1s), Duration::max());
  EXPECT_EQ(saturating_sub(Duration{0}, Duration::min()), Duration::max());
  EXPECT_EQ(saturating_sub(Duration{5}, Duration{7}), Duration{-2});
}

TEST(Saturating, AddClampsAtTheEnds) {
  EXPECT_EQ(saturating_add(Duration::max(), 1s), Duration::max());
  EXPECT_EQ(saturating_add(Duration::min(), -1s), Duration::min());
  EXPECT_EQ(saturating_add(Duration{5}, Duration{7}), Duration{12});
  const WallTime late{Duration::max() - Duration{10}};
  EXPECT_EQ(saturating_add(late, 1h).time_since_epoch(), Duration::max());
}

TEST(Saturating, SecondsConversionNeverWraps) {
  EXPECT_EQ(seconds_saturating(30), 30s);
  EXPECT_EQ(seconds_saturating(std::numeric_limits<std::int64_t>::max()), Duration::max());
  EXPECT_EQ(seconds_saturating(std::numeric_limits<std::int64_t>::min()), Duration::min());
}

TEST(ManualClock, WallAndMonotonicMoveIndependently) {
  ManualClock c;
  const auto w0 = c.wall().now();
  const auto m0 = c.monotonic().now();
  c.jump_wall(1h);
  c.advance_monotonic(1s);
  EXPECT_EQ(c.wall().now() - w0, 1h);
  EXPECT_EQ(c.monotonic().now() - m0, 1s);
  c.jump_wall(-2h);
  EXPECT_EQ(c.wall().now() - w0, -1h);
  EXPECT_EQ(c.monotonic().now() - m0, 1s);
  c.advance(10s);
  EXPECT_EQ(c.monotonic().now() - m0, 11s);
  EXPECT_EQ(c.wall().now() - w0, -1h + 10s);
}

TEST(ManualClock, SleeperWakesWhenTimeIsAdvancedPastItsDeadline) {
  ManualClock c;
  const auto deadline = c.mono_now() + 5s;
  std::atomic<int> result{-1};
  std::thread t([&] { result = static_cast<int>(c.monotonic().sleep_until(deadline, {})); });
  c.wait_for_sleepers(1);
  c.advance(4s);
  EXPECT_EQ(c.sleepers(), 1u);  // not yet due
  c.advance(1s);
  t.join();
  EXPECT_EQ(result.load(), static_cast<int>(WaitResult::kReached));
  EXPECT_EQ(c.sleepers(), 0u);
}

TEST(ManualClock, WallJumpDoesNotWakeASleeper) {
  ManualClock c;
  std::stop_source stop;
  std::atomic<int> result{-1};
  std::thread t([&] { result = static_cast<int>(c.monotonic().sleep_until(c.mono_now() + 10s, stop.get_token())); });
  c.wait_for_sleepers(1);
  c.jump_wall(24h);
  c.jump_wall(-48h);
  EXPECT_EQ(c.sleepers(), 1u);
  stop.request_stop();
  t.join();
  EXPECT_EQ(result.load(), static_cast<int>(WaitResult::kCancelled));
}

TEST(ManualClock, PastDeadlineReturnsAtOnce) {
  ManualClock c;
  EXPECT_EQ(c.monotonic().sleep_until(c.mono_now() - 1s, {}), WaitResult::kReached);
}

TEST(SystemClock, CancellationWakesARealSleeperPromptly) {
  const auto& clock = system_monotonic_clock();
  std::stop_source stop;
  const auto start = std::chrono::steady_clock::now();
  std::thread canceller([&] {
    std::this_thread::sleep_for(10ms);
    stop.request_stop();
  });
  const auto r = clock.sleep_until(clock.now() + 60s, stop.get_token());
  const auto took = std::chrono::steady_clock::now() - start;
  canceller.join();
  EXPECT_EQ(r, WaitResult::kCancelled);
  EXPECT_LT(took, 1s);
}

TEST(SystemClock, AlreadyCancelledReturnsAtOnce) {
  std::stop_source stop;
  stop.request_stop();
  EXPECT_EQ(system_monotonic_clock().sleep_until(system_monotonic_clock().now() + 60s, stop.get_token()),
            WaitResult::kCancelled);
}

TEST(SystemClock, ShortSleepIsReached) {
  const auto& clock = system_monotonic_clock();
  const auto deadline = clock.now() + 2ms;
  EXPECT_EQ(clock.sleep_until(deadline, {}), WaitResult::kReached);
  EXPECT_GE(clock.now(), deadline);
}

}  // namespace
}  // namespace abide
