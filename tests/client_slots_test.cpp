// At most max_transfers at once: the transfer slots, and requests and
// batches that wait for one.
#include "support/client_fixture.h"

namespace abide {
namespace {

using namespace std::chrono_literals;
using test::fast_config;
using test::TestServer;
using test::CallersHandle;
using test::SinkLog;

// ---- At most max_transfers at once ----

TEST(TransferSlots, AtMostTheLimitAndInArrivalOrder) {
  curl_detail::TransferSlots slots(2);
  ASSERT_EQ(slots.acquire({}, std::nullopt), curl_detail::TransferSlots::Result::kAcquired);
  ASSERT_EQ(slots.acquire({}, std::nullopt), curl_detail::TransferSlots::Result::kAcquired);
  EXPECT_EQ(slots.active(), 2u);
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([&, i] {
      ASSERT_EQ(slots.acquire({}, std::nullopt), curl_detail::TransferSlots::Result::kAcquired);
      {
        std::lock_guard lock(mu);
        order.push_back(i);
      }
      slots.release();
    });
    // Each is queued before the next arrives.
    for (int spin = 0; spin < 100000 && slots.waiting() != static_cast<std::size_t>(i + 1); ++spin)
      std::this_thread::yield();
    ASSERT_EQ(slots.waiting(), static_cast<std::size_t>(i + 1));
  }
  EXPECT_EQ(slots.active(), 2u);  // nobody got in beyond the limit
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(order.empty());
  }
  slots.release();  // one slot, handed down the line in order
  for (auto& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(slots.active(), 1u);
  EXPECT_EQ(slots.waiting(), 0u);
  slots.release();
  EXPECT_EQ(slots.active(), 0u);
}

TEST(TransferSlots, AWaitEndsAtAStopOrItsBound) {
  curl_detail::TransferSlots slots(1);
  ASSERT_EQ(slots.acquire({}, std::nullopt), curl_detail::TransferSlots::Result::kAcquired);
  EXPECT_EQ(slots.acquire({}, std::chrono::steady_clock::now()), curl_detail::TransferSlots::Result::kTimedOut);
  std::stop_source stop;
  auto fut = std::async(std::launch::async, [&] { return slots.acquire(stop.get_token(), std::nullopt); });
  for (int spin = 0; spin < 100000 && slots.waiting() != 1; ++spin) std::this_thread::yield();
  ASSERT_EQ(slots.waiting(), 1u);
  stop.request_stop();
  ASSERT_EQ(fut.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(fut.get(), curl_detail::TransferSlots::Result::kCancelled);
  EXPECT_EQ(slots.waiting(), 0u);
  slots.release();
  EXPECT_EQ(slots.active(), 0u);
  // No limit: never a wait.
  curl_detail::TransferSlots none(0);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(none.acquire({}, std::nullopt), curl_detail::TransferSlots::Result::kAcquired);
}

TEST(Client, MaxTransfersBoundsConcurrentRequests) {
  constexpr std::size_t kFetches = 6;
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0;
  int most_inside = 0;
  int meetings = 0;         // times a transfer arrived with another one inside
  std::size_t served = 0;   // answered
  std::size_t started = 0;  // attempts the engine let go (kAttemptStarted)
  bool timed_out = false;
  TestServer server;
  server.svr().Get(R"(/c/(\d+))", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    std::unique_lock lock(mu);
    const int met_before = meetings;
    if (++inside >= 2) ++meetings;
    most_inside = std::max(most_inside, inside);
    cv.notify_all();
    // Wait until every attempt was let go by the engine (a client without the
    // bound would then send them all at once) and another transfer was inside
    // with this one (or none is left to come).
    const auto go = [&] {
      return started == kFetches && (meetings > met_before || served + static_cast<std::size_t>(inside) == kFetches);
    };
    if (!cv.wait_for(lock, 20s, go)) timed_out = true;
    // The first two, with every attempt let go: a third transfer has a while
    // to show up here (a client without the bound sends it at once); with the
    // bound it never comes, so this waits out the while, never longer.
    if (met_before == 0 && inside == 2) cv.wait_for(lock, 300ms, [&] { return inside > 2; });
    --inside;
    ++served;
    cv.notify_all();
    res.set_content(req.matches[1].str(), "text/plain");
  });
  ClientConfig c = fast_config();
  c.max_transfers = 2;
  c.on_event = [&](const ClientEvent& e) {
    if (e.kind != ClientEvent::Kind::kAttemptStarted) return;
    std::lock_guard lock(mu);
    ++started;
    cv.notify_all();
  };
  Client client(c);
  std::vector<Request> requests(kFetches);
  std::vector<std::future<RequestOutcome>> futures;
  for (std::size_t i = 0; i < kFetches; ++i) {
    requests[i].url = server.url("/c/" + std::to_string(i));
    futures.push_back(std::async(std::launch::async, [&, i] { return client.fetch(requests[i]); }));
  }
  for (std::size_t i = 0; i < kFetches; ++i) {
    ASSERT_EQ(futures[i].wait_for(60s), std::future_status::ready) << i;
    const RequestOutcome out = futures[i].get();
    ASSERT_EQ(out.kind, OutcomeKind::kDone) << i << ": " << out.reason;
    EXPECT_EQ(out.body, std::to_string(i));
  }
  std::lock_guard lock(mu);
  EXPECT_EQ(most_inside, 2);
  EXPECT_FALSE(timed_out);
  EXPECT_EQ(server.seen().size(), kFetches);
}

TEST(Client, MaxTransfersBoundsABatchToo) {
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0;
  int most_inside = 0;
  bool first = true;
  TestServer server;
  server.svr().Get(R"(/b/(\d+))", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    std::unique_lock lock(mu);
    most_inside = std::max(most_inside, ++inside);
    cv.notify_all();
    // The first one gives a second transfer a while to show up (three
    // workers would send at once without the bound); it never comes.
    if (std::exchange(first, false)) cv.wait_for(lock, 300ms, [&] { return inside > 1; });
    --inside;
    res.set_content(req.matches[1].str(), "text/plain");
  });
  ClientConfig c = fast_config();
  c.max_transfers = 1;
  Client client(c);
  std::vector<Request> batch(3);
  for (std::size_t i = 0; i < batch.size(); ++i) batch[i].url = server.url("/b/" + std::to_string(i));
  BatchOptions opts;
  opts.jobs = 3;
  const auto outcomes = client.fetch_all(batch, opts);
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    ASSERT_EQ(outcomes[i].kind, OutcomeKind::kDone) << i << ": " << outcomes[i].reason;
    EXPECT_EQ(outcomes[i].body, std::to_string(i));
  }
  std::lock_guard lock(mu);
  EXPECT_EQ(most_inside, 1);
}

// One transfer is held by the server; a second request, over fetch or over a
// caller's handle, waits for the slot and is cancelled there: nothing is sent.
void cancelled_while_waiting_for_a_transfer(bool own_handle) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  TestServer server;
  server.svr().Get("/held", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    std::unique_lock lock(mu);
    cv.wait_for(lock, 30s, [&] { return release; });
    res.set_content("held", "text/plain");
  });
  server.svr().Get("/waits", [&](const httplib::Request& req, httplib::Response&) { server.log(req); });
  ClientConfig c = fast_config();
  c.max_transfers = 1;
  Request held;
  held.url = server.url("/held");
  Request waits;
  waits.url = server.url("/waits");
  std::atomic<bool> waits_started{false};
  c.on_event = [&](const ClientEvent& e) {
    if (e.kind == ClientEvent::Kind::kAttemptStarted && e.request == &waits) waits_started = true;
  };
  Client client(c);
  auto first = std::async(std::launch::async, [&] { return client.fetch(held); });
  for (int i = 0; i < 2000 && server.seen().empty(); ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(server.seen().size(), 1u);
  std::stop_source stop;
  CallersHandle h;
  auto second = std::async(std::launch::async, [&] {
    return own_handle ? client.perform(h.easy.get(), waits, {}, stop.get_token())
                      : client.fetch(waits, stop.get_token());
  });
  for (int i = 0; i < 2000 && !waits_started; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(waits_started);
  stop.request_stop();
  // The held transfer still runs: only a cancellable wait lets this end.
  const bool ended = second.wait_for(20s) == std::future_status::ready;
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  ASSERT_TRUE(ended) << "the wait for a transfer slot was not cancelled";
  const RequestOutcome out = second.get();
  EXPECT_EQ(out.kind, OutcomeKind::kCancelled) << out.reason;
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_FALSE(out.attempts[0].sent);
  EXPECT_FALSE(out.ambiguous);
  const RequestOutcome first_out = first.get();
  EXPECT_EQ(first_out.kind, OutcomeKind::kDone) << first_out.reason;
  const auto seen = server.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].path, "/held");
}

TEST(Client, AFetchWaitingForATransferIsCancelledUnsent) { cancelled_while_waiting_for_a_transfer(false); }

TEST(OwnHandle, AHandleWaitingForATransferIsCancelledUnsent) { cancelled_while_waiting_for_a_transfer(true); }

TEST(Client, AWaitForATransferEndsAtTheDeadline) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  TestServer server;
  server.svr().Get("/held", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    std::unique_lock lock(mu);
    cv.wait_for(lock, 30s, [&] { return release; });
    res.set_content("held", "text/plain");
  });
  ClientConfig c = fast_config();
  c.max_transfers = 1;
  Client client(c);
  Request held;
  held.url = server.url("/held");
  auto first = std::async(std::launch::async, [&] { return client.fetch(held); });
  for (int i = 0; i < 2000 && server.seen().empty(); ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(server.seen().size(), 1u);
  Request late = held;
  late.deadline = system_monotonic_clock().now() + 200ms;
  const RequestOutcome out = client.fetch(late);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  EXPECT_EQ(out.kind, OutcomeKind::kDeadlineExceeded) << out.reason;
  ASSERT_EQ(out.attempts.size(), 1u);
  EXPECT_FALSE(out.attempts[0].sent);
  EXPECT_EQ(first.get().kind, OutcomeKind::kDone);
  EXPECT_EQ(server.seen().size(), 1u);
}

TEST(Client, EveryEventCarriesTheIndexTheCallerGave) {
  TestServer server;
  server.svr().Get("/i", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 503;
      res.set_header("Retry-After", "0");
      return;
    }
    res.set_content("ok", "text/plain");
  });
  std::mutex mu;
  std::vector<std::size_t> indexes;
  ClientConfig c = fast_config();
  c.on_event = [&](const ClientEvent& e) {
    std::lock_guard lock(mu);
    indexes.push_back(e.index);
  };
  Client client(c);
  Request r;
  r.url = server.url("/i");
  SinkLog log;
  ASSERT_EQ(client.fetch(r, log.sink(), {}, 7).kind, OutcomeKind::kDone);  // a retry, then the answer
  ASSERT_EQ(client.fetch(r, {}, 3).kind, OutcomeKind::kDone);
  Request bad;
  bad.url = "ftp://127.0.0.1/";  // ended before the engine: its one event too
  ASSERT_EQ(client.fetch(bad, log.sink(), {}, 9).kind, OutcomeKind::kNotRetryable);
  std::lock_guard lock(mu);
  const auto first_three = std::find(indexes.begin(), indexes.end(), 3u);
  ASSERT_NE(first_three, indexes.end());
  ASSERT_GT(first_three - indexes.begin(), 5);  // two attempts' events
  EXPECT_TRUE(std::all_of(indexes.begin(), first_three, [](std::size_t i) { return i == 7; }));
  ASSERT_EQ(indexes.back(), 9u);
  EXPECT_TRUE(std::all_of(first_three, indexes.end() - 1, [](std::size_t i) { return i == 3; }));
}

}  // namespace
}  // namespace abide
