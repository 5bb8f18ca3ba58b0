// What the threads of `abide proxy`'s server share (private to the server's
// files): the options, the one Client, the pages' counters, the hang-up
// watcher, the requests in flight (for the drain) and the connections.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "abide/client.h"
#include "proxy/hangup_watcher.h"
#include "proxy/proxy_rules.h"
#include "proxy/proxy_server.h"
#include "proxy/proxy_stats.h"

namespace abide::proxy {

// One forwarded request, from admission to its answer. Lives on its
// connection thread's stack; the event hook and the drain reach it.
struct InFlight {
  enum class Phase : std::uint8_t {
    kPreparing,  // before the first wait or attempt, or between them
    kWaiting,    // pacer, retry or not-before wait
    kSending,    // an attempt in flight (or waiting for a transfer slot)
    kStreaming,  // the final answer's head went to the caller
  };

  engine::Request request;
  const Route* route = nullptr;             // in Core::opts.routes
  std::stop_source stop{std::nostopstate};  // the connection's (see Session::forward)
  std::uint64_t id = 0;                     // for --verbose lines

  std::mutex mu;  // guards what follows (the hook, the drain and the connection)
  Phase phase = Phase::kPreparing;
  std::optional<MonoTime> wait_until;  // a retry or not-before wait's end (a pacer wait's is unknown)
  bool transferring = false;           // counted in Core::transfers
  bool drained = false;                // cancelled by the drain: answer 503 with drain_not_before
  WallTime drain_not_before{};

  InFlight* prev = nullptr;  // in Core's list (guarded by Core::flights_mu)
  InFlight* next = nullptr;
};

// One caller connection and its thread.
struct Connection {
  // Between requests a connection is idle, and may be reclaimed for a new
  // caller when the connections run out (as nginx reuses keep-alive ones).
  // The switch is one compare-and-swap each way, so that a request that has
  // begun is never cut by a reclaim, and a reclaimed connection forwards nothing.
  enum State : int { kIdle, kBusy, kReclaimed };
  std::thread thread;
  std::mutex mu;  // guards fd against the drain's shutdown()
  int fd = -1;
  std::atomic<bool> done{false};
  std::atomic<int> state{kIdle};
};

struct ProxyServer::Core {
  explicit Core(ProxyOptions o);
  ~Core();

  ProxyOptions opts;
  const MonotonicClock& mono;
  const WallClock& wall;
  std::unique_ptr<Client> client;
  Stats stats{&wall};  // the injected clock tells which cooldowns have ended
  HangupWatcher watcher;
  int wake_fd = -1;  // an eventfd, readable once the drain starts: idle connections close
  std::atomic<bool> stopping{false};
  std::atomic<bool> stopped{false};
  std::atomic<std::uint64_t> next_id{1};

  // Bytes of request bodies in memory now (within opts.body_memory).
  std::atomic<std::uint64_t> body_bytes{0};

  // Admitted requests (held until answered) and transfers running upstream.
  std::atomic<std::int64_t> admitted{0};
  std::atomic<std::int64_t> transfers{0};
  void publish_in_flight() { stats.set_in_flight(admitted.load(), transfers.load()); }

  // The requests in flight, for the drain.
  std::mutex flights_mu;
  std::condition_variable flights_cv;  // a request left the list
  InFlight* flights = nullptr;
  std::size_t flight_count = 0;
  void enter(InFlight& f);
  void leave(InFlight& f);

  // The latest permitted time each pacer key was given (a pacer wait's end
  // is not told: a caller drained from one is answered with this).
  std::mutex cooldown_mu;
  std::unordered_map<std::string, WallTime> key_cooldowns;  // bounded by kMaxCooldownKeys
  static constexpr std::size_t kMaxCooldownKeys = 4096;
  void note_cooldown(const std::string& key, WallTime until);
  WallTime drain_time(const InFlight& f, WallTime now, MonoTime mono_now);  // f.mu held
  // When a caller turned away on `key` may come back: the key's latest
  // permitted time while it is ahead, else in a second.
  WallTime not_before(const std::string& key, WallTime now);

  // The last limited answer of each quota key, given again to the callers
  // the proxy answers in the upstream's place (outcome_answer). Bounded: at
  // most kMaxLimitedKeys answers of at most kMaxLimitedBody bytes each.
  std::mutex limited_mu;
  std::unordered_map<std::string, std::shared_ptr<const LimitedAnswer>> limited;
  static constexpr std::size_t kMaxLimitedKeys = 1024;
  void keep_limited(const std::string& key, LimitedAnswer answer);
  std::shared_ptr<const LimitedAnswer> limited_of(const std::string& key);

  // Per route (by its place in opts.routes): the profile its upstream's
  // answers named by their fields (ProfileRegistry::by_fields), for the
  // notice and --profile auto; "" until seen, and for routes with a profile.
  // `said[i]` is set once named[i] is: the hot path reads it without the lock.
  std::mutex named_mu;
  std::vector<std::string> named;
  std::vector<Dialect> named_dialect;
  std::unique_ptr<std::atomic<bool>[]> said;
  void notice_fields(const Route& route, const engine::Response& response);  // from the hook
  // The profile and dialect a route's requests use now.
  std::pair<std::string, Dialect> profile_for(const Route& route);

  // The event hook: tracks each request's phase, the transfers, --verbose.
  void on_event(const ClientEvent& e);
  // Marks a waiting request drained and cancels it (f.mu held).
  void drain_locked(InFlight& f, WallTime not_before);

  // --verbose: one line on stderr, whole.
  std::mutex log_mu;
  void log(std::string_view line);

  // Listening and connections.
  int listen_fd = -1;
  std::string address;
  std::thread acceptor;
  std::mutex conns_mu;
  std::list<Connection> conns;
  std::size_t live_connections = 0;  // guarded by conns_mu
  void accept_loop();
  void reap(bool all);
  // Closes one idle connection for a new caller (conns_mu held); false when none is idle.
  bool reclaim_idle_locked();
};

// A --verbose line from its parts (text and integers).
template <class... T>
std::string cat_line(const T&... parts) {
  std::string s = "abide proxy: ";
  const auto add = [&s](const auto& p) {
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(p)>>) s += std::to_string(p);
    else s += std::string_view(p);
  };
  (add(parts), ...);
  return s;
}

// The request the calling thread is forwarding (the hook runs on it).
InFlight*& current_flight() noexcept;

// One connection's keep-alive loop; closes the socket at its end.
void serve_connection(ProxyServer::Core& core, Connection& conn);

}  // namespace abide::proxy
