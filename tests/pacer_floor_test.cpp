// The pacer's floor (what this process was told outlives a store that
// forgets) and its defects with shared stores, on the manual clock.
#include "support/pacer_fixture.h"

namespace abide {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test::response;
using test::retry_after;
using test::window_obs;
using test::policy_obs;
using test::with;
using test::Fixture;
using test::SlowStore;

// ---- the floor: what this process was told outlives a store that forgets ------------------

// A store that can lose everything at once, as a shared store does when it is
// flushed, restarted empty or failed over; and that can be down.
class ForgetfulStore final : public QuotaStore {
 public:
  explicit ForgetfulStore(bool shared) : shared_(shared) {}

  void forget() {
    std::lock_guard lock(mu_);
    inner_ = std::make_shared<MemoryStore>();
  }
  void set_down(bool down) { down_ = down; }
  int records() const { return records_.load(); }

  std::shared_ptr<Handle> open(std::string_view key) override {
    return std::make_shared<Named>(*this, std::string(key));
  }
  bool shared() const noexcept override { return shared_; }

 private:
  // A key by its name, looked up in whatever the store holds now.
  class Named final : public Handle {
   public:
    Named(ForgetfulStore& store, std::string name) : store_(store), name_(std::move(name)) {}
    StoreGrant acquire(const StoreAcquire& request, const PacingRules& rules) override {
      if (store_.down_) return {StoreGrant::Kind::kUnavailable, milliseconds{100}, 0, WaitCause::kStore};
      return resolve()->acquire(request, rules);
    }
    RecordOutcome record(const StoreRecord& record, const PacingRules& rules) override {
      ++store_.records_;
      if (store_.down_) return {};
      return resolve()->record(record, rules);
    }
    bool still_valid(std::uint64_t epoch, MonoTime now) override {
      return !store_.down_ && resolve()->still_valid(epoch, now);
    }
    void abandon_probe(MonoTime now) override { resolve()->abandon_probe(now); }
    std::optional<LearnedPolicy> learned(MonoTime now) override { return resolve()->learned(now); }

   private:
    std::shared_ptr<Handle> resolve() {
      std::shared_ptr<MemoryStore> inner;
      {
        std::lock_guard lock(store_.mu_);
        inner = store_.inner_;
      }
      return inner->open(name_);
    }
    ForgetfulStore& store_;
    std::string name_;
  };

  bool shared_;
  std::atomic<bool> down_{false};
  std::atomic<int> records_{0};
  std::mutex mu_;
  std::shared_ptr<MemoryStore> inner_ = std::make_shared<MemoryStore>();
};

TEST_F(Fixture, ARetryAfterOutlivesAStoreThatForgetsAndIsWrittenBack) {
  for (const bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "shared" : "local");
    auto store = std::make_shared<ForgetfulStore>(shared);
    Pacer p(config(), store, clock.monotonic(), clock.wall());
    const auto k = p.key("api");
    const MonoTime t0 = clock.mono_now();
    p.record(k, retry_after(clock, seconds{30}));
    clock.advance(seconds{4});
    store->forget();
    const AcquireResult r = peek(p, k);
    ASSERT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
    EXPECT_EQ(r.not_before, t0 + seconds{30});
    EXPECT_EQ(r.cause, WaitCause::kCooldown);
    // Written back: another process on the store learns it again.
    Pacer other(config(), store, clock.monotonic(), clock.wall());
    const AcquireResult o = other.acquire(other.key("api"), clock.mono_now());
    ASSERT_EQ(o.status, AcquireStatus::kDeadlineExceeded);
    EXPECT_GE(o.not_before, t0 + seconds{30});
    // A worker that may wait goes at the end, as the probe.
    auto waiter = std::async(std::launch::async, [&] { return p.acquire(k); });
    clock.wait_for_sleepers(1);
    clock.advance(t0 + seconds{30} - clock.mono_now());
    const AcquireResult w = waiter.get();
    EXPECT_TRUE(w.ok());
    EXPECT_EQ(w.not_before, t0 + seconds{30});
    EXPECT_TRUE(w.probe);
    p.record(k, response(clock));
  }
}

TEST_F(Fixture, ABlockUntilOutlivesAStoreThatForgets) {
  auto store = std::make_shared<ForgetfulStore>(true);
  Pacer p(config(), store, clock.monotonic(), clock.wall());
  const auto k = p.key("api");
  const MonoTime t0 = clock.mono_now();
  ASSERT_TRUE(p.block_until(k, clock.wall_now() + seconds{20}));
  store->forget();
  const AcquireResult r = peek(p, k);
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(r.not_before, t0 + seconds{20});
}

TEST_F(Fixture, ASpentWindowsEndOutlivesAStoreThatForgets) {
  auto store = std::make_shared<ForgetfulStore>(true);
  Pacer p(config(), store, clock.monotonic(), clock.wall());
  const auto exact = p.key("exact");
  const auto coarse = p.key("coarse");
  const MonoTime t0 = clock.mono_now();
  p.record(exact, with(response(clock), window_obs(0, seconds{10})));
  // A reset in whole seconds proves the window lasts one second less.
  QuotaObservation whole = window_obs(0, seconds{10});
  whole.reset_resolution = seconds{1};
  p.record(coarse, with(response(clock), whole));
  store->forget();
  const AcquireResult e = peek(p, exact);
  EXPECT_EQ(e.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(e.not_before, t0 + seconds{10});
  EXPECT_EQ(e.cause, WaitCause::kQuota);
  const AcquireResult c = peek(p, coarse);
  EXPECT_EQ(c.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(c.not_before, t0 + seconds{9});
}

TEST_F(Fixture, TheFloorNeverHoldsAKeyLongerThanTheStoreDoes) {
  // Answers of one window in whole seconds: the store ends the spent window at
  // the earliest reset any of them gave, and so does the floor; the store is
  // not written to by acquires.
  auto store = std::make_shared<ForgetfulStore>(false);
  PacerConfig c = config();
  c.rules.pacing = Pacing::kBurst;
  Pacer p(c, store, clock.monotonic(), clock.wall());
  const auto k = p.key("api");
  const MonoTime t0 = clock.mono_now();
  QuotaObservation first = window_obs(3, seconds{10});
  first.reset_resolution = seconds{1};
  p.record(k, with(response(clock), first));
  clock.advance(seconds{5});
  QuotaObservation spent = window_obs(0, seconds{6});  // rounded up: the window ends at 10 s, not 11 s
  spent.reset_resolution = seconds{1};
  p.record(k, with(response(clock), spent));
  const int records = store->records();
  const AcquireResult r = peek(p, k);
  EXPECT_EQ(r.not_before, t0 + seconds{10});
  clock.advance(seconds{5});
  const AcquireResult probe = peek(p, k);
  EXPECT_TRUE(probe.ok());
  EXPECT_TRUE(probe.probe);
  EXPECT_EQ(store->records(), records);
}

TEST_F(Fixture, TheFloorServesWhileTheStoreIsDown) {
  auto store = std::make_shared<ForgetfulStore>(true);
  Pacer p(config(), store, clock.monotonic(), clock.wall());
  const auto k = p.key("api");
  const MonoTime t0 = clock.mono_now();
  p.record(k, retry_after(clock, seconds{30}));
  store->set_down(true);
  // Not "the store cannot answer": when the send may go, with the server's reason.
  const AcquireResult r = p.acquire(k, clock.mono_now());
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(r.not_before, t0 + seconds{30});
  EXPECT_EQ(r.cause, WaitCause::kCooldown);
}

TEST_F(Fixture, AFloorOutlivesTheKeyBoundWhileItRuns) {
  // Past max_keys, keys nobody holds are dropped, those whose floor has
  // passed first: a key still in a cooldown keeps it while the store forgets.
  auto store = std::make_shared<ForgetfulStore>(true);
  PacerConfig c = config();
  c.max_keys = 4;
  Pacer p(c, store, clock.monotonic(), clock.wall());
  const MonoTime t0 = clock.mono_now();
  p.record("live", retry_after(clock, seconds{60}));
  for (int i = 0; i < 16; ++i) p.key("k" + std::to_string(i));
  store->forget();
  const AcquireResult r = peek(p, p.key("live"));
  EXPECT_EQ(r.status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(r.not_before, t0 + seconds{60});
}

// ---- defects --------------------------------------------------------------------------------

TEST_F(Fixture, TwoCallersOfOneKeyPastMaxKeysShareOneLine) {
  // Past max_keys (every key held), a key handed out twice was two lines: a
  // slot reserved through one survived a cooldown recorded through the other.
  PacerConfig c = config();
  c.max_keys = 1;
  Pacer p = make(c);
  const auto held = p.key("held");
  const auto k1 = p.key("k");
  const auto k2 = p.key("k");
  p.record(k1, with(response(clock), policy_obs(2, seconds{10})));
  Pacer::Ticket a, b;
  ASSERT_TRUE(p.try_acquire(a, k1).ok());
  const TryAcquireResult rb = p.try_acquire(b, k1);
  ASSERT_EQ(rb.status, TryStatus::kReserved);
  p.record(k2, retry_after(clock, seconds{60}));
  clock.advance(rb.at - clock.mono_now());
  const TryAcquireResult again = p.try_acquire(b, k1);
  EXPECT_NE(again.status, TryStatus::kPermit);
  EXPECT_GE(again.at, clock.mono_now() + seconds{50});
}

TEST_F(Fixture, AReservedSlotIsCheckedAgainstASpentQuotaRecordedBeforeItsTime) {
  // A slot granted, then an answer says "0 left for 0.1 s" (a reading too
  // uncertain to start a cooldown, which the store still counts): the slot,
  // 15 ms later, is not used inside those 0.1 s.
  Pacer p = make(config());
  const auto k = p.key("api");
  QuotaObservation room = window_obs(10, seconds{10});
  room.limit = 100;
  p.record(k, with(response(clock), room));
  Pacer::Ticket a, b;
  ASSERT_TRUE(p.try_acquire(a, k).ok());
  const TryAcquireResult rb = p.try_acquire(b, k);
  ASSERT_EQ(rb.status, TryStatus::kReserved);
  clock.advance(rb.at - clock.mono_now() - milliseconds{15});
  const MonoTime answered = clock.mono_now();
  QuotaObservation spent = window_obs(0, milliseconds{100});
  spent.limit = 100;
  spent.confidence = Confidence::kLow;
  p.record(k, with(response(clock), spent));
  clock.advance(milliseconds{15});
  const TryAcquireResult again = p.try_acquire(b, k);
  EXPECT_NE(again.status, TryStatus::kPermit);
  EXPECT_GE(again.at, answered + milliseconds{100});
}

TEST_F(Fixture, ASharedStoresWaitCountedFromItsAnswerIsNotAcceptedBeyondMaxWait) {
  // The store is asked with max_wait from the caller's now; its wait counts
  // from its answer, a round trip later: a wait it accepted right at the
  // limit ends past it.
  ManualClock c;
  PacerConfig cfg = config();
  cfg.max_wait = seconds{10};
  Pacer p(cfg, std::make_shared<SlowStore>(c, seconds{1}, true), c.monotonic(), c.wall());
  const auto k = p.key("k");
  const MonoTime t0 = c.mono_now();
  p.record(k, retry_after(c, seconds{10}));
  Pacer::Ticket t;
  const TryAcquireResult r = p.try_acquire(t, k);
  EXPECT_EQ(r.status, TryStatus::kDeferred) << to_string(r.status);
  EXPECT_EQ(r.at, t0 + seconds{11});
  EXPECT_FALSE(t.held());
  // The probe it was granted is handed on, not held until it times out.
  c.advance(seconds{10});
  Pacer::Ticket next;
  const TryAcquireResult n = p.try_acquire(next, k);
  EXPECT_TRUE(n.ok() || n.status == TryStatus::kReserved) << to_string(n.status);
  EXPECT_TRUE(n.probe);
}

TEST_F(Fixture, ASharedStoresSlotThatIsDueGoesWhateverItsRoundTrip) {
  // A caller that accepts no wait, on a key with nothing known and on one
  // whose cooldown has ended (its first send is the probe): the store's
  // round trip is no wait, so the send goes.
  ManualClock c;
  PacerConfig cfg = config();
  cfg.max_wait = Duration::zero();
  Pacer p(cfg, std::make_shared<SlowStore>(c, milliseconds{5}, true), c.monotonic(), c.wall());
  const auto k = p.key("k");
  Pacer::Ticket t;
  EXPECT_TRUE(p.try_acquire(t, k).ok());
  EXPECT_TRUE(p.acquire(k).ok());
  p.record(k, retry_after(c, seconds{1}));
  c.advance(seconds{1});
  const AcquireResult probe = p.acquire(k);
  EXPECT_TRUE(probe.ok()) << to_string(probe.status);
  EXPECT_TRUE(probe.probe);
}

}  // namespace
}  // namespace abide
