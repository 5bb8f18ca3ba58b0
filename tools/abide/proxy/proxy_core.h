// What the event loops of `abide proxy`'s server share (private to the
// server's files): the options, the pacer, the pages' counters, the admission
// counts, the cooldowns and limited answers callers are told again, and the
// profiles named by the upstreams' fields. Everything here is safe from any
// loop's thread; what one loop owns is in proxy_worker.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "abide/client.h"
#include "mutex.h"
#include "proxy/proxy_rules.h"
#include "proxy/proxy_server.h"
#include "proxy/proxy_stats.h"

namespace abide::proxy {

class Worker;

// One forwarded request, from admission to its answer: owned by its caller's
// connection, read and written only on its loop's thread (the event hook
// runs there too).
struct Flight {
  enum class Phase : std::uint8_t {
    kPreparing,  // before the first wait or attempt, or between them
    kWaiting,    // pacer, retry or not-before wait
    kSending,    // an attempt in flight (or waiting for a transfer slot)
    kStreaming,  // the final answer's head went to the caller
  };

  std::uint64_t id = 0;   // for --verbose lines, and the ClientEvent index of its events
  std::uint64_t job = 0;  // its LoopClient request
  const Route* route = nullptr;  // in Core::opts.routes
  std::string pacer_key;
  Phase phase = Phase::kPreparing;
  std::optional<MonoTime> wait_until;  // a retry or not-before wait's end (a pacer wait's is unknown)
  bool transferring = false;           // counted in Core::transfers
  bool drained = false;                // cancelled by the drain: answer 503 with drain_not_before
  WallTime drain_not_before{};
};

struct ProxyServer::Core {
  explicit Core(ProxyOptions o);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  ProxyOptions opts;
  const MonotonicClock& mono;
  const WallClock& wall;
  ClientConfig client_config;  // each loop's LoopClient's, the pacer shared
  Stats stats{&wall};          // the injected clock tells which cooldowns have ended
  std::atomic<bool> stopping{false};
  std::atomic<bool> stopped{false};
  std::atomic<std::uint64_t> next_id{1};

  // Bytes of request bodies in memory now (within opts.body_memory).
  std::atomic<std::uint64_t> body_bytes{0};
  // Admitted requests (held until answered) and transfers running upstream,
  // over every loop.
  std::atomic<std::int64_t> admitted{0};
  std::atomic<std::int64_t> transfers{0};
  std::atomic<std::size_t> open_connections{0};  // callers connected, over every loop
  void publish_in_flight() { stats.set_in_flight(admitted.load(), transfers.load()); }

  // The latest permitted time each pacer key was given (a pacer wait's end
  // is not told: a caller drained from one is answered with this).
  detail::Mutex cooldown_mu;
  std::unordered_map<std::string, WallTime> key_cooldowns ABIDE_GUARDED_BY(cooldown_mu);  // bounded by kMaxCooldownKeys
  static constexpr std::size_t kMaxCooldownKeys = 4096;
  void note_cooldown(const std::string& key, WallTime until);
  // When a caller turned away on `key` may come back: the key's latest
  // permitted time while it is ahead, else in a second.
  WallTime not_before(const std::string& key, WallTime now);
  // When a drained request may come back: its wait's end when known, else
  // not_before() of its key.
  WallTime drain_time(const Flight& f, WallTime now, MonoTime mono_now);

  // The last limited answer of each quota key, given again to the callers
  // the proxy answers in the upstream's place (outcome_answer). Bounded: at
  // most kMaxLimitedKeys answers of at most kMaxLimitedBody bytes each.
  detail::Mutex limited_mu;
  std::unordered_map<std::string, std::shared_ptr<const LimitedAnswer>> limited ABIDE_GUARDED_BY(limited_mu);
  static constexpr std::size_t kMaxLimitedKeys = 1024;
  void keep_limited(const std::string& key, LimitedAnswer answer);
  std::shared_ptr<const LimitedAnswer> limited_of(const std::string& key);

  // Per route (by its place in opts.routes): the profile its upstream's
  // answers named by their fields (ProfileRegistry::by_fields), for the
  // notice and --profile auto; "" until seen, and for routes with a profile.
  // `said[i]` is set once named[i] is: the hot path reads it without the lock.
  detail::Mutex named_mu;
  std::vector<std::string> named ABIDE_GUARDED_BY(named_mu);
  std::vector<Dialect> named_dialect ABIDE_GUARDED_BY(named_mu);
  std::unique_ptr<std::atomic<bool>[]> said;
  void notice_fields(const Route& route, const engine::Response& response);
  // The profile and dialect a route's requests use now.
  std::pair<std::string, Dialect> profile_for(const Route& route);

  // The event hook's part for one request (on its loop's thread): tracks its
  // phase and the transfers, notes cooldowns and profiles. True: cancel it
  // (a wait that began during the drain).
  bool on_event(Flight* f, const ClientEvent& e);
  // --verbose lines for an event.
  void log_event(const Flight* f, const ClientEvent& e);
  // Marks a request drained: answered 503 with `not_before` once cancelled.
  static void drain(Flight& f, WallTime not_before) {
    f.drained = true;
    f.drain_not_before = not_before;
  }

  // --verbose: one line on stderr, whole.
  detail::Mutex log_mu;
  void log(std::string_view line);

  int listen_fd = -1;
  std::string address;
  std::vector<std::unique_ptr<Worker>> workers;
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

}  // namespace abide::proxy
