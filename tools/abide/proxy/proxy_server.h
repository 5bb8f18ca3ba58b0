// `abide proxy`'s server: the listening socket, event loops (one per core by
// default) that each serve their share of the caller connections and run
// their share of the upstream transfers, the admission bound (jobs + queue),
// and the drain at shutdown. What is forwarded and what
// callers are answered are proxy_rules.h's rules; this file owns the sockets
// and the lifecycle.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "abide/client.h"
#include "abide/result.h"
#include "proxy/proxy_rules.h"
#include "proxy/proxy_stats.h"

namespace abide::proxy {

struct ProxyOptions {
  std::vector<Route> routes;  // at least one
  std::string bind = "127.0.0.1";
  std::uint16_t port = 8080;                           // 0 picks a free one
  Duration default_budget = std::chrono::seconds{60};  // a caller's wait without Abide-Max-Wait
  std::size_t jobs = 32;                               // concurrent upstream transfers
  // Event loops (threads); 0: one per core. At most jobs, and at most
  // max_upstream_connections when that is set.
  std::size_t loops = 0;
  // Connections to each upstream at once, over every loop (0: no limit;
  // nginx's max_conns): transfers beyond wait for one. To an HTTP/2 upstream
  // they share its connections' streams (ClientConfig::max_host_connections).
  std::size_t max_upstream_connections = 0;
  std::size_t queue = 1024;                            // callers held beyond them
  std::uint64_t max_body = std::uint64_t{64} << 20;    // of a caller's request
  // Request bodies held in memory at once, over every caller: a body that
  // would pass it is answered 503 with Retry-After, not read.
  std::uint64_t body_memory = std::uint64_t{256} << 20;
  Duration grace = std::chrono::seconds{10};           // for transfers in flight at shutdown
  // Callers connected at once; start() lowers it to what the descriptors
  // allow (the soft limit raised to the hard one first). Each loop takes its
  // share; past it an idle keep-alive connection of that loop is closed for
  // the new caller (as an nginx worker does with worker_connections), or
  // when none is idle the new caller is answered 503.
  std::size_t max_connections = 65536;
  Duration head_timeout = std::chrono::seconds{30};  // to receive a whole head (and each body read)
  Duration idle_timeout = std::chrono::seconds{60};  // a keep-alive connection without a request
  Duration send_timeout = std::chrono::seconds{60};  // for a caller to take each piece of its answer, in all
  bool verbose = false;                              // one line per decision on stderr
  // --profile auto: a route whose upstream's host selects no profile reads
  // its answers with the one built-in profile whose distinctive fields they
  // carry, once seen (ProfileRegistry::by_fields). Without it that profile is
  // named once on stderr, with the flags that would use it.
  bool adopt_profiles = false;
  // /__abide/stats and /__abide/metrics name upstreams and cooldowns: served
  // to callers on this machine only, unless this says anyone may read them.
  bool public_pages = false;
  // The secret of the credential part of pacer keys (proxy::quota_key); by
  // default this process's own, right for a store that never leaves it.
  cli::KeySecret key_secret;
  // The client's settings (pacer, profile, timeouts, attempts). The server
  // sets max_transfers (= jobs), the planner's max_wait (long: the caller's
  // budget is each request's send_by), no fields of the client's own
  // (user_agent, default_fields), and adds its own event hook.
  ClientConfig client;
};

class ProxyServer {
 public:
  explicit ProxyServer(ProxyOptions options);
  ~ProxyServer();  // stop() if running: no thread outlives the server
  ProxyServer(const ProxyServer&) = delete;
  ProxyServer& operator=(const ProxyServer&) = delete;

  // Binds, listens and starts serving on the loops' threads. The error says
  // "cannot listen on ADDRESS:PORT: why".
  [[nodiscard]] Result<std::uint16_t, ErrorMessage> start();
  // "ADDRESS:PORT" as bound (IPv6 in brackets).
  std::string address() const;

  // The drain: stops accepting, answers callers held in a wait with 503 and
  // their permitted time, gives transfers in flight the grace period, then
  // cancels what is left, closes every connection and joins every loop.
  // Idempotent.
  void stop();

  const Stats& stats() const noexcept;

  struct Core;  // the state the loops share (proxy_core.h)

 private:
  std::unique_ptr<Core> core_;
};

// Raises RLIMIT_NOFILE's soft limit to the hard one, and lowers
// opts.max_connections to what the descriptors then leave beside the
// upstream sockets (one per job, in use or pooled, or max_upstream_connections
// for each upstream when that is fewer) and 128 for the rest.
void fit_connections_to_descriptors(ProxyOptions& opts);

// Whether `address` (numeric IPv4 or IPv6) is a loopback address.
[[nodiscard]] bool is_loopback(const std::string& address) noexcept;

// Whether the peer of a connected socket is on this machine (a loopback
// address, or a Unix socket); false when it cannot be told.
[[nodiscard]] bool peer_is_loopback(int fd) noexcept;

}  // namespace abide::proxy
