// SharedTransfers: one bound on the transfers of LoopClients that run on
// different threads (as the proxy's loops do), against real HTTP servers on
// 127.0.0.1. Each client runs on a thread of its own here, driven through its
// descriptor, sleeping until it is readable: a slot handed over from another
// thread must wake it.
#include <abide/loop_client.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/client_config.h"
#include "support/concurrency.h"
#include "support/http_test_server.h"

namespace abide {
namespace {

using namespace std::chrono_literals;
using test::TestServer;

// A LoopClient on a thread of its own. Work reaches it through post(); it
// waits on the client's descriptor and its timeout only (no polling), so a
// request waiting for a shared slot goes out only when woken.
class LoopThread {
 public:
  LoopThread(ClientConfig config, std::shared_ptr<SharedTransfers> transfers)
      : tasks_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    thread_ = std::thread([this, config = std::move(config), transfers = std::move(transfers)]() mutable {
      auto client = std::make_unique<LoopClient>(std::move(config), LoopClient::Hooks{}, std::move(transfers));
      run(client);
    });
  }
  ~LoopThread() {
    post([this](std::unique_ptr<LoopClient>&) { stop_ = true; });
    thread_.join();
    ::close(tasks_fd_);
  }
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;

  // Runs `f` on the loop's thread (the client may be null: ended).
  void post(std::function<void(std::unique_ptr<LoopClient>&)> f) {
    {
      std::lock_guard lock(mu_);
      tasks_.push_back(std::move(f));
    }
    const std::uint64_t one = 1;
    static_cast<void>(::write(tasks_fd_, &one, sizeof one));
  }
  // Starts a GET of `url` on the loop.
  void get(const std::string& url) {
    post([this, url](std::unique_ptr<LoopClient>& c) {
      Request r;
      r.url = url;
      last_ = c->start(r, [this](RequestOutcome&& out) {
        std::lock_guard lock(mu_);
        outcomes_.push_back(std::move(out));
      });
    });
  }
  // Cancels the request get() started last.
  void cancel_last() {
    post([this](std::unique_ptr<LoopClient>& c) { EXPECT_TRUE(c->cancel(last_)); });
  }
  // Ends the client (its transfers stop) on the loop's thread.
  void end_client() {
    post([](std::unique_ptr<LoopClient>& c) { c.reset(); });
  }
  std::vector<RequestOutcome> outcomes() {
    std::lock_guard lock(mu_);
    return outcomes_;
  }
  // Waits up to 10 s of real time for `n` outcomes.
  bool wait_for(std::size_t n) {
    for (auto give_up = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < give_up;) {
      if (outcomes().size() >= n) return true;
      std::this_thread::sleep_for(1ms);
    }
    return false;
  }

 private:
  void run(std::unique_ptr<LoopClient>& client) {
    while (!stop_) {
      int ms = -1;
      if (client) {
        if (const auto t = client->timeout())
          ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(*t).count());
      }
      pollfd p[2] = {{tasks_fd_, POLLIN, 0}, {client ? client->fd() : -1, POLLIN, 0}};
      static_cast<void>(::poll(p, 2, ms));
      std::uint64_t count = 0;
      static_cast<void>(::read(tasks_fd_, &count, sizeof count));
      std::deque<std::function<void(std::unique_ptr<LoopClient>&)>> now;
      {
        std::lock_guard lock(mu_);
        now.swap(tasks_);
      }
      for (auto& f : now) f(client);
      if (client) client->process();
    }
  }

  int tasks_fd_;
  std::mutex mu_;
  std::deque<std::function<void(std::unique_ptr<LoopClient>&)>> tasks_;
  std::vector<RequestOutcome> outcomes_;
  bool stop_ = false;        // the loop's thread only
  LoopClient::Id last_ = 0;  // the loop's thread only
  std::thread thread_;
};

// A server whose /hold answers once release() is called; /quick at once.
struct HoldingServer {
  HoldingServer() {
    server.svr().Get("/hold", [this](const httplib::Request& req, httplib::Response& res) {
      server.log(req);
      for (int i = 0; i < 10000 && !released.load(); ++i) std::this_thread::sleep_for(1ms);
      res.set_content("held", "text/plain");
    });
    server.svr().Get("/quick", [this](const httplib::Request& req, httplib::Response& res) {
      server.log(req);
      res.set_content("quick", "text/plain");
    });
  }
  void release() { released = true; }
  // Waits up to 10 s for `n` requests to have reached it.
  bool saw(std::size_t n) {
    for (auto give_up = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < give_up;) {
      if (server.seen().size() >= n) return true;
      std::this_thread::sleep_for(1ms);
    }
    return false;
  }
  std::atomic<bool> released{false};
  TestServer server;
};

TEST(SharedTransfers, TwoLoopsRunAtMostTheBoundBetweenThem) {
  test::Concurrency concurrency;
  TestServer server;
  test::serve_counted(server, concurrency, "/s", 30ms);
  auto shared = std::make_shared<SharedTransfers>(2);
  ClientConfig own = test::fast_config();  // the own HTTP/1.1 client (an IP literal)
  ClientConfig curl = test::fast_config();
  curl.max_host_connections = 8;  // libcurl sends everything
  {
    LoopThread a(own, shared);
    LoopThread b(curl, shared);
    for (int i = 0; i < 5; ++i) {
      a.get(server.url("/s"));
      b.get(server.url("/s"));
    }
    ASSERT_TRUE(a.wait_for(5));
    ASSERT_TRUE(b.wait_for(5));
    for (auto* loop : {&a, &b})
      for (const RequestOutcome& out : loop->outcomes()) EXPECT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
  }
  EXPECT_EQ(server.seen().size(), 10u);
  EXPECT_LE(concurrency.most(), 2) << "each loop ran up to the bound on its own";
  EXPECT_EQ(shared->in_use(), 0u);
}

// One slot between loops a and b: a holds it with a request the server
// answers only once released, and b has a request waiting for it.
class OneSlotHeld : public ::testing::Test {
 protected:
  void SetUp() override {
    a.get(h.server.url("/hold"));
    ASSERT_TRUE(h.saw(1));
    b.get(h.server.url("/quick"));
    std::this_thread::sleep_for(100ms);  // b's request had time to go, were it allowed
  }

  HoldingServer h;
  std::shared_ptr<SharedTransfers> shared = std::make_shared<SharedTransfers>(1);
  LoopThread a{test::fast_config(), shared};
  LoopThread b{test::fast_config(), shared};
};

// The slot a loop frees goes to the other loop's waiting request, which is
// woken for it (its loop sleeps on its descriptor, with no timeout).
TEST_F(OneSlotHeld, ASlotFreedInOneLoopWakesARequestWaitingInAnother) {
  EXPECT_EQ(h.server.seen().size(), 1u) << "b sent beyond the shared bound";
  EXPECT_EQ(shared->in_use(), 1u);
  h.release();
  ASSERT_TRUE(a.wait_for(1));
  ASSERT_TRUE(b.wait_for(1)) << "b was not woken for the slot a freed";
  EXPECT_EQ(b.outcomes()[0].kind, OutcomeKind::kDone) << b.outcomes()[0].reason;
  EXPECT_EQ(b.outcomes()[0].body, "quick");
  EXPECT_EQ(shared->in_use(), 0u);
}

// Slots are handed round: while one loop always has more waiting, a loop
// that began waiting earlier gets the next slot, not the loop that freed it.
TEST_F(OneSlotHeld, ALoopThatFreesASlotDoesNotTakeItBackAheadOfAnEarlierWaiter) {
  a.get(h.server.url("/hold"));  // after b's; answered at once after the release
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(h.server.seen().size(), 1u);
  h.release();
  ASSERT_TRUE(a.wait_for(2));
  ASSERT_TRUE(b.wait_for(1));
  const auto seen = h.server.seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[1].path, "/quick") << "the loop that freed the slot took it back first";
  EXPECT_EQ(seen[2].path, "/hold");
  EXPECT_EQ(shared->in_use(), 0u);
}

// A request that stops waiting (cancelled) leaves nothing behind: the slot
// freed later is not handed to a loop with nothing to send.
TEST_F(OneSlotHeld, ACancelledWaiterLeavesTheQueue) {
  b.cancel_last();
  ASSERT_TRUE(b.wait_for(1));
  EXPECT_EQ(b.outcomes()[0].kind, OutcomeKind::kCancelled);
  h.release();
  ASSERT_TRUE(a.wait_for(1));
  a.get(h.server.url("/quick"));
  ASSERT_TRUE(a.wait_for(2)) << "the slot went to the loop that had stopped waiting";
  EXPECT_EQ(a.outcomes()[1].kind, OutcomeKind::kDone);
  EXPECT_EQ(h.server.seen().size(), 2u);
  EXPECT_EQ(shared->in_use(), 0u);
}

// A client that ends with a transfer running gives its slot to the client
// waiting for one.
TEST_F(OneSlotHeld, AnEndedClientGivesItsSlotsOn) {
  EXPECT_EQ(h.server.seen().size(), 1u);
  a.end_client();
  ASSERT_TRUE(b.wait_for(1)) << "the ended client's slot was lost";
  EXPECT_EQ(b.outcomes()[0].kind, OutcomeKind::kDone) << b.outcomes()[0].reason;
  h.release();
  EXPECT_EQ(shared->in_use(), 0u);
}

}  // namespace
}  // namespace abide
