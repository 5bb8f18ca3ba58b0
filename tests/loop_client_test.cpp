// abide::LoopClient against real HTTP servers on 127.0.0.1: many requests on
// one thread, waits as timers (an injected clock), both ways of driving it.
#include <abide/http_date.h>
#include <abide/loop_client.h>
#include <abide/testing/manual_clock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <set>
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
using Interest = LoopClient::Interest;

using test::fast_config;

// Turns the loop (through its descriptor) until `until` holds or 10 s of
// real time pass. Polls at most 5 ms at a time: with a manual clock, the
// client's timers are on the test's time, libcurl's on real time.
template <class Pred>
bool drive(LoopClient& client, Pred until) {
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!until()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    int ms = 5;
    if (const auto t = client.timeout()) ms = std::min<int>(ms, static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(*t).count()));
    pollfd p{client.fd(), POLLIN, 0};
    static_cast<void>(::poll(&p, 1, ms));
    client.process();
  }
  return true;
}

// Outcomes by request, as done reports them.
struct Outcomes {
  std::map<LoopClient::Id, RequestOutcome> by_id;
  std::vector<std::thread::id> threads;
  LoopClient::Done done_for(LoopClient::Id* id_slot) {
    return [this, id_slot](RequestOutcome&& out) {
      EXPECT_EQ(by_id.count(*id_slot), 0u) << "done called twice";
      by_id.emplace(*id_slot, std::move(out));
      threads.push_back(std::this_thread::get_id());
    };
  }
};

TEST(LoopClient, ManyRequestsRunAtOnceOnTheCallingThread) {
  test::Concurrency concurrency;  // before the server: its handlers use it until the server stops
  TestServer server;
  server.svr().Get(R"(/slow/(\d+))", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    {
      const auto inside = concurrency.enter();
      std::this_thread::sleep_for(50ms);
    }
    res.set_content("answer " + req.matches[1].str(), "text/plain");
  });
  LoopClient client(fast_config());
  constexpr std::size_t kRequests = 16;
  std::vector<LoopClient::Id> ids(kRequests);
  Outcomes outcomes;
  for (std::size_t i = 0; i < kRequests; ++i) {
    Request r;
    r.url = server.url("/slow/" + std::to_string(i));
    ids[i] = client.start(r, outcomes.done_for(&ids[i]), {}, i);
  }
  EXPECT_TRUE(outcomes.by_id.empty()) << "done is never called from inside start()";
  EXPECT_EQ(client.running(), kRequests);
  client.run();
  ASSERT_EQ(outcomes.by_id.size(), kRequests);
  for (std::size_t i = 0; i < kRequests; ++i) {
    const RequestOutcome& out = outcomes.by_id.at(ids[i]);
    ASSERT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
    EXPECT_EQ(out.body, "answer " + std::to_string(i));
  }
  for (const auto& t : outcomes.threads) EXPECT_EQ(t, std::this_thread::get_id());
  EXPECT_GT(concurrency.most(), 1) << "the requests ran one after another";
  EXPECT_EQ(client.running(), 0u);
}

TEST(LoopClient, MaxTransfersBoundsTheTransfersAtOnce) {
  test::Concurrency concurrency;
  TestServer server;
  test::serve_counted(server, concurrency, "/s", 30ms);
  ClientConfig c = fast_config();
  c.max_transfers = 2;
  LoopClient client(c);
  int done = 0;
  for (int i = 0; i < 6; ++i) {
    Request r;
    r.url = server.url("/s");
    client.start(r, [&](RequestOutcome&& out) {
      EXPECT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
      ++done;
    });
  }
  client.run();
  EXPECT_EQ(done, 6);
  EXPECT_EQ(server.seen().size(), 6u);
  EXPECT_LE(concurrency.most(), 2);
}

// max_host_connections bounds the connections to one origin: over
// HTTP/1.1, transfers beyond it wait for one (nothing fails), while another
// origin is not held back.
TEST(LoopClient, MaxHostConnectionsBoundsTheConnectionsToAnOrigin) {
  test::Concurrency concurrency;
  TestServer server;
  TestServer other;
  test::serve_counted(server, concurrency, "/s", 30ms);
  other.svr().Get("/o", [&](const httplib::Request& req, httplib::Response& res) {
    other.log(req);
    res.set_content("other", "text/plain");
  });
  ClientConfig c = fast_config();
  c.max_host_connections = 1;
  LoopClient client(c);
  int done = 0;
  std::optional<MonoTime> other_done;
  MonoTime last_done{};
  for (int i = 0; i < 4; ++i) {
    Request r;
    r.url = server.url("/s");
    client.start(r, [&](RequestOutcome&& out) {
      EXPECT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
      ++done;
      last_done = system_monotonic_clock().now();
    });
  }
  Request o;
  o.url = other.url("/o");
  client.start(o, [&](RequestOutcome&& out) {
    EXPECT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
    other_done = system_monotonic_clock().now();
  });
  client.run();
  EXPECT_EQ(done, 4);
  EXPECT_EQ(server.seen().size(), 4u);
  EXPECT_EQ(concurrency.most(), 1) << "two connections to one origin at once";
  ASSERT_TRUE(other_done.has_value());
  EXPECT_LT(*other_done, last_done) << "the other origin waited for this one's queue";
}

// A Retry-After of 60 s is a timer on the injected clock: nothing is sent a
// second early, and the retry goes out once the time has come.
TEST(LoopClient, ARetryWaitIsATimerAndNothingIsSentEarly) {
  ManualClock clock;
  const MonoTime t0 = clock.mono_now();
  TestServer server;
  server.svr().Get("/wait", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 429;
      res.set_header("Date", format_imf_fixdate(clock.wall_now()));
      res.set_header("Retry-After", "60");
      return;
    }
    res.set_content("ok", "text/plain");
  });
  ClientConfig c = fast_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  LoopClient client(c);
  std::optional<RequestOutcome> result;
  Request r;
  r.url = server.url("/wait");
  client.start(r, [&](RequestOutcome&& out) { result = std::move(out); });
  // The first answer is heard, and the loop is told to come back in 60 s.
  ASSERT_TRUE(drive(client, [&] {
    const auto t = client.timeout();
    return server.seen().size() == 1 && t && *t >= 59s;
  }));
  EXPECT_EQ(*client.timeout(), 60s);
  clock.advance_monotonic(59s);
  client.process();
  std::this_thread::sleep_for(20ms);
  client.process();
  EXPECT_EQ(server.seen().size(), 1u) << "sent a second early";
  EXPECT_FALSE(result);
  clock.advance_monotonic(1s);
  ASSERT_TRUE(drive(client, [&] { return result.has_value(); }));
  ASSERT_EQ(result->kind, OutcomeKind::kDone) << result->reason;
  ASSERT_EQ(result->attempts.size(), 2u);
  EXPECT_EQ(result->attempts[0].plan.basis, Basis::kRetryAfter);
  EXPECT_EQ(result->attempts[1].started_mono - t0, 60s);
  EXPECT_EQ(result->waited, 60s);
}

// A quota the server announced paces the next request as a timer: it is
// not sent before the window the server named has ended.
TEST(LoopClient, AnAnnouncedQuotaPacesTheNextRequest) {
  ManualClock clock;
  TestServer server;
  server.svr().Get("/q", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.set_header("RateLimit-Policy", "\"p\";q=1;w=30");
    res.set_header("RateLimit", "\"p\";r=0;t=30");
    res.set_content("ok", "text/plain");
  });
  ClientConfig c = fast_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  LoopClient client(c);
  int done = 0;
  Request r;
  r.url = server.url("/q");
  client.start(r, [&](RequestOutcome&&) { ++done; });
  ASSERT_TRUE(drive(client, [&] { return done == 1; }));
  client.start(r, [&](RequestOutcome&& out) {
    EXPECT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
    ++done;
  });
  client.process();
  std::this_thread::sleep_for(20ms);
  client.process();
  EXPECT_EQ(server.seen().size(), 1u) << "the spent quota did not hold the second request";
  ASSERT_TRUE(client.timeout());
  EXPECT_GT(*client.timeout(), 29s);
  clock.advance_monotonic(30s);
  ASSERT_TRUE(drive(client, [&] { return done == 2; }));
  EXPECT_EQ(server.seen().size(), 2u);
}

// After a cooldown one probe goes first and the others wait for its answer:
// the answer wakes them (the pacer's notification), with no wait for the
// probe's timeout, which the manual clock never reaches.
TEST(LoopClient, AProbesAnswerWakesTheRequestsWaitingForIt) {
  ManualClock clock;
  TestServer server;
  server.svr().Get("/p", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 429;
      res.set_header("Retry-After", "1");
      return;
    }
    res.set_content("ok", "text/plain");
  });
  ClientConfig c = fast_config();
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  c.pacer_config.rules.probe_timeout = 30s;
  LoopClient client(c);
  int done = 0;
  const auto count = [&](RequestOutcome&& out) {
    EXPECT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
    ++done;
  };
  Request r;
  r.url = server.url("/p");
  client.start(r, count);
  ASSERT_TRUE(drive(client, [&] { return server.seen().size() == 1 && client.timeout() && *client.timeout() > 500ms; }));
  client.start(r, count);
  client.start(r, count);
  client.process();
  EXPECT_EQ(server.seen().size(), 1u);
  clock.advance_monotonic(1s);
  // The probe and a waiter it woke are sent with the clock still at the
  // cooldown's end (the rest may be spaced by what the 429 taught).
  ASSERT_TRUE(drive(client, [&] { return server.seen().size() >= 3; }))
      << "the waiters were not woken by the probe's answer: " << server.seen().size() << " sent";
  clock.advance_monotonic(1s);
  ASSERT_TRUE(drive(client, [&] { return done == 3; }));
  EXPECT_EQ(server.seen().size(), 4u);
}

// An attempt permitted before an answer said wait, and sent later (here it
// waited for the one transfer slot): the wait holds it back, unsent and
// uncounted, instead of sending it into the server's cooldown.
TEST(LoopClient, AWaitHeardAfterThePermitHoldsBackAnAttemptNotYetSent) {
  TestServer server;
  server.svr().Get("/busy", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    std::this_thread::sleep_for(100ms);
    res.status = 429;
    res.set_header("Retry-After", "30");
  });
  ClientConfig c = fast_config();
  c.max_transfers = 1;
  LoopClient client(c);
  std::vector<RequestOutcome> results;
  Request r;
  r.url = server.url("/busy");
  const auto first = client.start(r, [&](RequestOutcome&& out) { results.push_back(std::move(out)); });
  const auto second = client.start(r, [&](RequestOutcome&& out) { results.push_back(std::move(out)); });
  // Both permitted at once (nothing was known); the second waits for the slot.
  ASSERT_TRUE(drive(client, [&] { return server.seen().size() == 1 && client.timeout() && *client.timeout() > 20s; }));
  // The loop turns on for a while: the slot is free, the second is not sent.
  const auto until = std::chrono::steady_clock::now() + 300ms;
  ASSERT_TRUE(drive(client, [&] { return std::chrono::steady_clock::now() > until || server.seen().size() > 1; }));
  EXPECT_EQ(server.seen().size(), 1u) << "an attempt went out into the server's cooldown";
  client.cancel(first);
  client.cancel(second);
  ASSERT_TRUE(drive(client, [&] { return results.size() == 2; }));
  for (const RequestOutcome& out : results) EXPECT_EQ(out.kind, OutcomeKind::kCancelled) << out.reason;
  std::size_t attempts = 0;
  for (const RequestOutcome& out : results) attempts += out.attempts.size();
  EXPECT_EQ(attempts, 1u) << "the attempt held back was counted";
}

TEST(LoopClient, AFinalAnswerStreamsToItsSinkAndARetriedOneDoesNot) {
  TestServer server;
  server.svr().Get("/sink", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 503;
      res.set_header("Retry-After", "0");
      res.set_content("not this one", "text/plain");
      return;
    }
    res.set_header("X-Final", "yes");
    res.set_content(std::string(100000, 'x'), "text/plain");
  });
  LoopClient client(fast_config());
  int heads = 0;
  int status = 0;
  std::string body;
  ResponseSink sink;
  sink.head = [&](const FinalHead& h) {
    ++heads;
    status = h.response.status;
    EXPECT_EQ(h.kind, OutcomeKind::kDone);
    return true;
  };
  sink.body = [&](std::string_view chunk) {
    body.append(chunk);
    return true;
  };
  std::optional<RequestOutcome> result;
  Request r;
  r.url = server.url("/sink");
  client.start(r, [&](RequestOutcome&& out) { result = std::move(out); }, sink);
  client.run();
  ASSERT_TRUE(result);
  ASSERT_EQ(result->kind, OutcomeKind::kDone) << result->reason;
  EXPECT_EQ(result->attempts.size(), 2u);
  EXPECT_EQ(heads, 1);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body, std::string(100000, 'x'));
  EXPECT_TRUE(result->body.empty());
  EXPECT_EQ(result->body_bytes, 100000u);
}

// receive_buffer_bytes is what libcurl reads at a time: no piece of the
// answer handed to the sink is larger (libcurl's default hands on 16 KiB).
TEST(LoopClient, ReceiveBufferBytesBoundsEachPieceOfTheAnswer) {
  const std::string whole(200000, 'r');  // outlives the server's threads
  TestServer server;
  server.svr().Get("/big", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(whole, "application/octet-stream");
  });
  const auto largest_piece = [&](std::size_t buffer) {
    ClientConfig config = fast_config();
    config.receive_buffer_bytes = buffer;
    LoopClient client(config);
    std::size_t largest = 0;
    std::string body;
    ResponseSink sink;
    sink.body = [&](std::string_view chunk) {
      largest = std::max(largest, chunk.size());
      body.append(chunk);
      return true;
    };
    std::optional<RequestOutcome> result;
    Request r;
    r.url = server.url("/big");
    client.start(r, [&](RequestOutcome&& out) { result = std::move(out); }, sink);
    client.run();
    EXPECT_TRUE(result && result->kind == OutcomeKind::kDone) << (result ? result->reason : "no outcome");
    EXPECT_EQ(body.size(), whole.size());
    return largest;
  };
  EXPECT_LE(largest_piece(2048), 2048u);
  EXPECT_LE(largest_piece(100), 1024u) << "libcurl's least, 1 KiB, is the least asked";
  EXPECT_GT(largest_piece(0), 2048u) << "0 leaves libcurl's default";
}

// A sink that cannot take more pauses the answer; nothing more comes until
// it resumes, then all of it, whole.
TEST(LoopClient, APausedAnswerWaitsForItsSinkAndResumesWhole) {
  const std::string whole(256 * 1024, 'p');  // outlives the server's threads
  TestServer server;
  server.svr().Get("/big", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.set_content(whole, "text/plain");
  });
  LoopClient client(fast_config());
  LoopClient::Id id = 0;
  std::string body;
  int chunks_while_paused = 0;
  bool paused = false;
  ResponseSink sink;
  sink.body = [&](std::string_view chunk) {
    if (paused) ++chunks_while_paused;
    body.append(chunk);
    if (!paused && body.size() < whole.size()) {
      paused = true;
      EXPECT_TRUE(client.pause(id));
    }
    return true;
  };
  std::optional<RequestOutcome> result;
  Request r;
  r.url = server.url("/big");
  id = client.start(r, [&](RequestOutcome&& out) { result = std::move(out); }, sink);
  ASSERT_TRUE(drive(client, [&] { return paused; }));
  const std::size_t at_pause = body.size();
  const auto until = std::chrono::steady_clock::now() + 200ms;
  ASSERT_TRUE(drive(client, [&] { return std::chrono::steady_clock::now() > until || result.has_value(); }));
  EXPECT_FALSE(result) << "the answer ended while its sink was paused";
  EXPECT_EQ(body.size(), at_pause);
  EXPECT_EQ(chunks_while_paused, 0);
  EXPECT_TRUE(client.resume(id));
  ASSERT_TRUE(drive(client, [&] { return result.has_value(); }));
  ASSERT_EQ(result->kind, OutcomeKind::kDone) << result->reason;
  EXPECT_EQ(body, whole);
  EXPECT_FALSE(client.pause(id)) << "finished";
}

TEST(LoopClient, AnInvalidUrlEndsAtTheNextTurnNotInsideStart) {
  LoopClient client(fast_config());
  std::optional<RequestOutcome> result;
  Request r;
  r.url = "ftp://127.0.0.1/x";
  client.start(r, [&](RequestOutcome&& out) { result = std::move(out); });
  EXPECT_FALSE(result);
  ASSERT_TRUE(client.timeout());
  EXPECT_EQ(*client.timeout(), Duration::zero());
  client.process();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->kind, OutcomeKind::kNotRetryable);
  EXPECT_NE(result->reason.find("invalid URL"), std::string::npos) << result->reason;
}

TEST(LoopClient, CancelEndsATransferAndAWaitAndIsToldOnce) {
  TestServer server;
  server.svr().Get("/hold", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    server.hold(5s);
    res.set_content("late", "text/plain");
  });
  server.svr().Get("/later", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.status = 429;
    res.set_header("Retry-After", "30");
  });
  LoopClient client(fast_config());
  std::map<std::string, std::vector<RequestOutcome>> results;
  Request hold;
  hold.url = server.url("/hold");
  const auto a = client.start(hold, [&](RequestOutcome&& out) { results["hold"].push_back(std::move(out)); });
  Request later;
  later.url = server.url("/later");
  const auto b = client.start(later, [&](RequestOutcome&& out) { results["later"].push_back(std::move(out)); });
  // Both sent; the second waits out its Retry-After.
  ASSERT_TRUE(drive(client, [&] { return server.seen().size() == 2 && client.timeout() && *client.timeout() > 20s; }));
  EXPECT_TRUE(client.cancel(a));
  EXPECT_TRUE(client.cancel(b));
  EXPECT_FALSE(client.cancel(a)) << "asked twice";
  ASSERT_TRUE(drive(client, [&] { return client.running() == 0; }));
  ASSERT_EQ(results["hold"].size(), 1u);
  ASSERT_EQ(results["later"].size(), 1u);
  EXPECT_EQ(results["hold"][0].kind, OutcomeKind::kCancelled) << results["hold"][0].reason;
  EXPECT_EQ(results["later"][0].kind, OutcomeKind::kCancelled) << results["later"][0].reason;
  EXPECT_EQ(results["later"][0].attempts.size(), 1u);
  EXPECT_FALSE(client.cancel(a)) << "finished";
  EXPECT_EQ(server.seen().size(), 2u);
}

// The caller's own loop: an epoll set it owns, told what to watch and when
// to call back through the hooks.
class TestLoop {
 public:
  TestLoop() : epoll_(::epoll_create1(EPOLL_CLOEXEC)) {}
  ~TestLoop() { ::close(epoll_); }

  LoopClient::Hooks hooks() {
    LoopClient::Hooks h;
    h.watch = [this](int fd, Interest what) {
      epoll_event ev{};
      ev.data.fd = fd;
      ev.events = (what == Interest::kRead || what == Interest::kReadWrite ? EPOLLIN : 0u) |
                  (what == Interest::kWrite || what == Interest::kReadWrite ? EPOLLOUT : 0u);
      if (what == Interest::kNone) {
        ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, &ev);
        watched_.erase(fd);
      } else if (watched_.count(fd) != 0) {
        ::epoll_ctl(epoll_, EPOLL_CTL_MOD, fd, &ev);
      } else {
        ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
        watched_.insert(fd);
      }
      ++watch_calls;
    };
    h.timer = [this](std::optional<Duration> after) {
      due_ = after ? std::optional(std::chrono::steady_clock::now() + *after) : std::nullopt;
      ++timer_calls;
    };
    return h;
  }

  // One turn: waits for a socket or the timer (at most 10 ms), then tells the client.
  void turn(LoopClient& client) {
    int ms = 10;
    if (due_) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*due_ - std::chrono::steady_clock::now()).count();
      ms = static_cast<int>(std::clamp<std::int64_t>(left, 0, 10));
    }
    epoll_event events[16];
    const int n = ::epoll_wait(epoll_, events, 16, ms);
    for (int i = 0; i < n; ++i) {
      const bool r = (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0;
      const bool w = (events[i].events & EPOLLOUT) != 0;
      client.on_socket(events[i].data.fd, r && w ? Interest::kReadWrite : w ? Interest::kWrite : Interest::kRead);
    }
    if (due_ && *due_ <= std::chrono::steady_clock::now()) {
      due_.reset();
      client.on_timer();
    }
  }

  int watch_calls = 0;
  int timer_calls = 0;

 private:
  int epoll_;
  std::set<int> watched_;
  std::optional<std::chrono::steady_clock::time_point> due_;
};

// A cancel asked by the event hook as a wait begins (a proxy draining ends
// such waits at once) ends the request at the next turn, not when the wait
// would have ended: here a pacer wait, which begins inside the loop's step.
TEST(LoopClient, ACancelFromTheEventHookAsAWaitBeginsEndsItAtOnce) {
  ManualClock clock;
  TestServer server;
  server.svr().Get("/later", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.status = 429;
    res.set_header("Retry-After", "60");
  });
  ClientConfig c = fast_config();
  c.max_attempts = 1;  // the first request ends on its 429; the key stays held 60 s
  c.mono = &clock.monotonic();
  c.wall = &clock.wall();
  LoopClient* self = nullptr;
  LoopClient::Id second = 0;
  int cancels = 0;
  c.on_event = [&](const ClientEvent& e) {
    if (e.kind == ClientEvent::Kind::kWaitStarted && e.index == 2 && self != nullptr) {
      EXPECT_TRUE(self->cancel(second));
      ++cancels;
    }
  };
  LoopClient client(c);
  self = &client;
  std::map<std::size_t, RequestOutcome> results;
  Request r;
  r.url = server.url("/later");
  client.start(r, [&](RequestOutcome&& out) { results.emplace(1, std::move(out)); }, {}, 1);
  ASSERT_TRUE(drive(client, [&] { return results.count(1) == 1; }));
  second = client.start(r, [&](RequestOutcome&& out) { results.emplace(2, std::move(out)); }, {}, 2);
  // The manual clock never moves: only the cancel can end the 60 s wait.
  ASSERT_TRUE(drive(client, [&] { return results.count(2) == 1; }));
  EXPECT_EQ(cancels, 1);
  EXPECT_EQ(results[2].kind, OutcomeKind::kCancelled) << results[2].reason;
  EXPECT_EQ(server.seen().size(), 1u);
}

TEST(LoopClient, ALoopOfTheCallersDrivesItThroughHooks) {
  TestServer server;
  server.svr().Get("/h", [&](const httplib::Request& req, httplib::Response& res) {
    if (server.log(req) == 0) {
      res.status = 503;
      res.set_header("Retry-After", "0");
      return;
    }
    res.set_content("hooked", "text/plain");
  });
  TestLoop loop;
  LoopClient client(fast_config(), loop.hooks());
  EXPECT_EQ(client.fd(), -1) << "no descriptor of its own when hooked";
  int done = 0;
  for (int i = 0; i < 5; ++i) {
    Request r;
    r.url = server.url("/h");
    client.start(r, [&](RequestOutcome&& out) {
      EXPECT_EQ(out.kind, OutcomeKind::kDone) << out.reason;
      if (out.response) {
        EXPECT_EQ(out.body, "hooked");
      }
      ++done;
    });
  }
  EXPECT_GE(loop.timer_calls, 1) << "the loop was not asked to turn";
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (done < 5 && std::chrono::steady_clock::now() < give_up) loop.turn(client);
  EXPECT_EQ(done, 5);
  EXPECT_EQ(server.seen().size(), 6u);  // one retried 503
  EXPECT_GT(loop.watch_calls, 1);
}

// Destroyed with a transfer out and a wait pending: no callback, no leak
// (the sanitizer build checks), and the pacer is free for others.
TEST(LoopClient, DestroyedWhileRequestsRunItCallsNothing) {
  TestServer server;
  server.svr().Get("/hold", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    server.hold(3s);
    res.set_content("late", "text/plain");
  });
  server.svr().Get("/later", [&](const httplib::Request& req, httplib::Response& res) {
    server.log(req);
    res.status = 429;
    res.set_header("Retry-After", "30");
  });
  int called = 0;
  {
    LoopClient client(fast_config());
    Request hold;
    hold.url = server.url("/hold");
    client.start(hold, [&](RequestOutcome&&) { ++called; });
    Request later;
    later.url = server.url("/later");
    client.start(later, [&](RequestOutcome&&) { ++called; });
    ASSERT_TRUE(drive(client, [&] { return server.seen().size() == 2 && client.timeout() && *client.timeout() > 20s; }));
  }
  EXPECT_EQ(called, 0);
}

}  // namespace
}  // namespace abide
