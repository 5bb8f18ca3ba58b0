// Many workers on the pacer at once, against a server that counts: no
// window's quota is ever exceeded.
#include "support/pacer_fixture.h"

namespace abide {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test::Clock;
using test::response;
using test::retry_after;
using test::policy_obs;
using test::with;
using test::Fixture;

// ---- many workers against a server that counts ---------------------------------------

// A server with fixed windows that answers with RateLimit-style observations
// and counts every request per window.
class CountingServer {
 public:
  CountingServer(const Clock& clock, std::int64_t quota, Duration window)
      : clock_(clock), quota_(quota), window_(window), origin_(clock.mono_now()) {}

  Signals send() {
    std::lock_guard lock(mu_);
    const MonoTime now = clock_.mono_now();
    const auto index = (now - origin_) / window_;
    const std::int64_t used = ++counts_[index];
    sends_.push_back(now);
    Signals s = response(clock_, used > quota_ ? 429 : 200);
    QuotaObservation o;
    o.limit = quota_;
    o.window = window_;
    o.remaining = std::max<std::int64_t>(quota_ - used, 0);
    o.reset = origin_ + (index + 1) * window_ - now;
    s.quota.push_back(o);
    return s;
  }
  std::int64_t max_per_window() const {
    std::int64_t m = 0;
    for (const auto& [i, c] : counts_) m = std::max(m, c);
    return m;
  }
  // The most sends in any interval [t, t + window).
  std::int64_t max_per_sliding_window() const {
    std::vector<MonoTime> s = sends_;
    std::sort(s.begin(), s.end());
    std::int64_t best = 0;
    std::size_t lo = 0;
    for (std::size_t hi = 0; hi < s.size(); ++hi) {
      while (s[hi] - s[lo] >= window_) ++lo;
      best = std::max<std::int64_t>(best, static_cast<std::int64_t>(hi - lo + 1));
    }
    return best;
  }
  std::size_t total() const { return sends_.size(); }

 private:
  const Clock& clock_;
  std::int64_t quota_;
  Duration window_;
  MonoTime origin_;
  std::mutex mu_;
  std::map<std::int64_t, std::int64_t> counts_;
  std::vector<MonoTime> sends_;
};

struct ManyWorkers : Fixture, ::testing::WithParamInterface<Pacing> {};

TEST_P(ManyWorkers, SixteenThreadsOnOneKeyNeverExceedTheQuota) {
  PacerConfig c = config();
  c.rules.pacing = GetParam();
  Pacer p = make(c);
  const auto k = p.key("api");
  CountingServer server(clock, 20, seconds{1});
  p.record(k, server.send());  // the first response teaches the window
  constexpr int kThreads = 16;
  constexpr int kPerThread = 8;
  std::atomic<int> alive{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        const AcquireResult r = p.acquire(k);
        if (!r.ok()) break;
        p.record(k, server.send());
      }
      alive.fetch_sub(1);
    });
  }
  clock.drive(alive, milliseconds{5});
  for (auto& t : threads) t.join();
  EXPECT_EQ(server.total(), std::size_t{kThreads * kPerThread + 1});
  EXPECT_LE(server.max_per_window(), 20);
}

TEST_P(ManyWorkers, SixteenThreadsUnderAPolicyNeverExceedItInAnyWindow) {
  PacerConfig c = config();
  c.rules.pacing = GetParam();
  Pacer p = make(c);
  const auto k = p.key("api");
  p.record(k, with(response(clock), policy_obs(20, seconds{1})));
  constexpr int kThreads = 16;
  constexpr int kPerThread = 6;
  std::atomic<int> alive{kThreads};
  std::mutex mu;
  std::vector<MonoTime> sends;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        if (!p.acquire(k).ok()) break;
        std::lock_guard lock(mu);
        sends.push_back(clock.mono_now());
      }
      alive.fetch_sub(1);
    });
  }
  clock.drive(alive, milliseconds{5});
  for (auto& t : threads) t.join();
  ASSERT_EQ(sends.size(), std::size_t{kThreads * kPerThread});
  std::sort(sends.begin(), sends.end());
  for (std::size_t i = 20; i < sends.size(); ++i) {
    EXPECT_GE(sends[i] - sends[i - 20], seconds{1}) << "21 sends within one second, ending at " << i;
  }
}

std::string pacing_name(const ::testing::TestParamInfo<Pacing>& p) {
  return p.param == Pacing::kSmooth ? "Smooth" : "Burst";
}
INSTANTIATE_TEST_SUITE_P(Pacing, ManyWorkers, ::testing::Values(Pacing::kSmooth, Pacing::kBurst), pacing_name);

TEST_F(Fixture, SixteenThreadsRecordingCooldownsConcurrently) {
  Pacer p = make(config());
  const auto k = p.key("api");
  constexpr int kThreads = 16;
  std::atomic<int> alive{kThreads};
  std::atomic<int> permits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const AcquireResult r = p.acquire(k, clock.mono_now() + seconds{30});
        if (r.ok()) ++permits;
        if ((i + t) % 5 == 0) p.record(k, retry_after(clock, milliseconds{50}));
        else p.record(k, response(clock));
      }
      alive.fetch_sub(1);
    });
  }
  clock.drive(alive, milliseconds{10});
  for (auto& t : threads) t.join();
  EXPECT_GT(permits.load(), 0);
}

}  // namespace
}  // namespace abide
