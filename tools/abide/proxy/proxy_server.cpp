// `abide proxy`'s server: the listener, the shared state, the event hook and
// the loops' start and drain (see proxy_server.h). A loop is proxy_worker.cpp,
// one caller connection caller_connection.cpp.
#include "proxy/proxy_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "abide/headers.h"
#include "abide/redact.h"
#include "common.h"
#include "curl/client_parts.h"
#include "proxy/proxy_core.h"
#include "proxy/proxy_worker.h"

namespace abide::proxy {
namespace proxy_server {  // private to this file (the CLI is compiled in batches)


// The caller's budget bounds each request (send_by); the planner itself
// accepts any hint up to a month, so that a long one is answered with its
// permitted time rather than cut down.
constexpr Duration kPlannerMaxWait = std::chrono::hours{24 * 31};
// Event loops at most (--loops, or one per core).
constexpr std::size_t kMaxLoops = 64;

std::string_view wait_name(ClientEvent::WaitKind k) {
  switch (k) {
    case ClientEvent::WaitKind::kPacer: return "pacer";
    case ClientEvent::WaitKind::kRetry: return "retry";
    case ClientEvent::WaitKind::kNotBefore: return "not-before";
  }
  return "wait";
}

std::string seconds_text(Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", to_seconds(d));
  return buf;
}

}  // namespace proxy_server

ProxyServer::Core::Core(ProxyOptions o)
    : opts(std::move(o)),
      mono(opts.client.mono != nullptr ? *opts.client.mono : system_monotonic_clock()),
      wall(opts.client.wall != nullptr ? *opts.client.wall : system_wall_clock()),
      client_config(opts.client) {
  ClientConfig& config = client_config;
  // What goes upstream is what the caller sent: no User-Agent, Accept or
  // Content-Type of the transport's own.
  config.user_agent.clear();
  config.default_fields = false;
  config.planner.max_wait = proxy_server::kPlannerMaxWait;
  // One pacer for every loop (each LoopClient would make its own).
  config.pacer = curl_detail::pacer_for(config, mono, wall);
  named.resize(opts.routes.size());
  named_dialect.resize(opts.routes.size());
  said = std::make_unique<std::atomic<bool>[]>(opts.routes.size());
}

std::pair<std::string, Dialect> ProxyServer::Core::profile_for(const Route& route) {
  if (!route.profile.empty() || !opts.adopt_profiles) return {route.profile, route.dialect};
  const auto i = static_cast<std::size_t>(&route - opts.routes.data());
  if (!said[i].load(std::memory_order_acquire)) return {std::string(), route.dialect};
  detail::MutexLock lock(named_mu);
  return {named[i], named_dialect[i]};
}

void ProxyServer::Core::notice_fields(const Route& route, const engine::Response& response) {
  // Only where nothing chose a profile: not the route, not --profile, not the host.
  if (!route.profile.empty() || (!opts.client.profile.empty())) return;
  const ProfileRegistry& registry =
      opts.client.registry != nullptr ? *opts.client.registry : ProfileRegistry::builtin();
  const auto i = static_cast<std::size_t>(&route - opts.routes.data());
  if (said[i].load(std::memory_order_acquire)) return;  // said once
  std::string field;
  const Profile* p = registry.by_fields(response.headers, &field);
  if (p == nullptr) return;
  {
    detail::MutexLock lock(named_mu);
    if (!named[i].empty()) return;
    named[i] = p->name;
    named_dialect[i] = dialect_of(p);
    said[i].store(true, std::memory_order_release);
  }
  const std::string where = route.prefix.empty() ? std::string("--upstream URL") : "--route " + route.prefix + "=URL";
  if (opts.adopt_profiles) {
    log(cat_line("answers from ", route.origin.origin, " carry the ", p->name, " profile's quota fields (",
                 abide::printable(field, 64), "): read with it from now on (--profile auto)"));
  } else {
    log(cat_line("answers from ", route.origin.origin, " carry the ", p->name, " profile's quota fields (",
                 abide::printable(field, 64), "), which are not read without it: give --profile ", p->name,
                 ", or ", where, ",profile=", p->name, ", or --profile auto"));
  }
}

ProxyServer::Core::~Core() {
  workers.clear();  // their threads are joined
  if (listen_fd >= 0) ::close(listen_fd);
}

void ProxyServer::Core::keep_limited(const std::string& key, LimitedAnswer answer) {
  auto kept = std::make_shared<const LimitedAnswer>(std::move(answer));
  detail::MutexLock lock(limited_mu);
  if (limited.size() >= kMaxLimitedKeys && !limited.contains(key)) limited.erase(limited.begin());
  limited[key] = std::move(kept);
}

std::shared_ptr<const LimitedAnswer> ProxyServer::Core::limited_of(const std::string& key) {
  detail::MutexLock lock(limited_mu);
  const auto it = limited.find(key);
  return it == limited.end() ? nullptr : it->second;
}

void ProxyServer::Core::note_cooldown(const std::string& key, WallTime until) {
  detail::MutexLock lock(cooldown_mu);
  auto it = key_cooldowns.find(key);
  if (it != key_cooldowns.end()) {
    if (until > it->second) it->second = until;
    return;
  }
  if (key_cooldowns.size() >= kMaxCooldownKeys) {
    // Bounded: the expired entries go first, else all of them (a drain then
    // answers "in a second" for a key it forgot).
    const WallTime now = wall.now();
    std::erase_if(key_cooldowns, [now](const auto& kv) { return kv.second <= now; });
    if (key_cooldowns.size() >= kMaxCooldownKeys) key_cooldowns.clear();
  }
  key_cooldowns.emplace(key, until);
}

WallTime ProxyServer::Core::drain_time(const Flight& f, WallTime now, MonoTime mono_now) {
  if (f.wait_until) return now + (*f.wait_until > mono_now ? *f.wait_until - mono_now : Duration::zero());
  return not_before(f.pacer_key, now);
}

WallTime ProxyServer::Core::not_before(const std::string& key, WallTime now) {
  {
    detail::MutexLock lock(cooldown_mu);
    if (auto it = key_cooldowns.find(key); it != key_cooldowns.end() && it->second > now) return it->second;
  }
  return now + std::chrono::seconds{1};  // a wait whose end nobody told: come back in a second
}

void ProxyServer::Core::log(std::string_view line) {
  detail::MutexLock lock(log_mu);
  std::string s(line);
  s += '\n';
  static_cast<void>(::write(STDERR_FILENO, s.data(), s.size()));
}

bool ProxyServer::Core::on_event(Flight* f, const ClientEvent& e) {
  using K = ClientEvent::Kind;
  if (f == nullptr) return false;
  bool cancel = false;
  int transfer_change = 0;
  switch (e.kind) {
    case K::kWaitStarted:
      f->phase = Flight::Phase::kWaiting;
      f->wait_until.reset();
      if (e.wait > Duration::zero()) f->wait_until = saturating_add(e.at, e.wait);
      // A wait that starts during the drain ends at once, answered with its end.
      if (stopping.load() && !f->drained) {
        drain(*f, drain_time(*f, wall.now(), mono.now()));
        cancel = true;
      }
      break;
    case K::kWaitEnded:
      if (f->phase == Flight::Phase::kWaiting) f->phase = Flight::Phase::kPreparing;
      f->wait_until.reset();
      break;
    case K::kAttemptStarted:
      f->phase = Flight::Phase::kSending;
      if (!f->transferring) {
        f->transferring = true;
        transfer_change = 1;
      }
      break;
    case K::kDecision:
      if (e.plan != nullptr && e.plan->not_before_wall) note_cooldown(f->pacer_key, *e.plan->not_before_wall);
      // An answer that will be retried ends its transfer here (its body is dropped).
      if (e.plan != nullptr && e.plan->decision == Decision::kRetry && f->transferring) {
        f->transferring = false;
        transfer_change = -1;
      }
      break;
    case K::kFinished:
      if (f->transferring) {
        f->transferring = false;
        transfer_change = -1;
      }
      break;
    case K::kResponseObserved:
    case K::kTransportError: break;
  }
  if (e.kind == K::kResponseObserved && e.response != nullptr && f->route != nullptr &&
      (e.signals == nullptr || e.signals->profile.empty())) {
    notice_fields(*f->route, *e.response);
  }
  if (transfer_change != 0) {
    transfers.fetch_add(transfer_change);
    publish_in_flight();
  }
  return cancel;
}

void ProxyServer::Core::log_event(const Flight* f, const ClientEvent& e) {
  using K = ClientEvent::Kind;
  if (!opts.verbose) return;
  const std::uint64_t id = f != nullptr ? f->id : 0;
  switch (e.kind) {
    case K::kAttemptStarted:
      log(cat_line("[", id, "] > ", abide::printable(e.request->method, 32), " ",
                   abide::printable(redact_url(e.request->url), 512), " (attempt ", e.attempt, ")"));
      break;
    case K::kResponseObserved: {
      std::string s = cat_line("[", id, "] < ", e.response->status);
      for (const Header& h : e.response->headers.lines()) {
        // The fields that decide waits, shown redacted and escaped.
        const std::string_view n = h.name;
        const bool shown = iequals(n, "Retry-After") || (n.size() >= 9 && iequals(n.substr(0, 9), "RateLimit")) ||
                           (n.size() >= 11 && iequals(n.substr(0, 11), "X-RateLimit"));
        if (shown) s += " " + abide::printable(n, 64) + ": " + printable_header_value(n, h.value);
      }
      if (e.signals != nullptr)
        for (const std::string& w : e.signals->warnings) s += " (warning: " + cli::safe_text(w, 512) + ")";
      log(s);
      break;
    }
    case K::kTransportError: log(cat_line("[", id, "] error: ", cli::safe_text(e.error, 512))); break;
    case K::kDecision:
      if (e.plan != nullptr)
        log(cat_line("[", id, "] decision ", to_string(e.plan->decision), ": ", cli::safe_text(e.reason, 1024)));
      break;
    case K::kWaitEnded:
      if (e.wait >= std::chrono::milliseconds{1})
        log(cat_line("[", id, "] waited ", proxy_server::seconds_text(e.wait), " (",
                     proxy_server::wait_name(e.wait_kind), e.cancelled ? ", cancelled)" : ")",
                     e.held ? " by " + cli::safe_text(describe(*e.held), 256) : std::string()));
      break;
    case K::kFinished:
      if (e.outcome != nullptr)
        log(cat_line("[", id, "] outcome ", to_string(e.outcome->kind), e.outcome->ambiguous ? " (ambiguous)" : "",
                     ": ", cli::safe_text(e.outcome->reason, 1024)));
      break;
    case K::kWaitStarted: break;
  }
}

ProxyServer::ProxyServer(ProxyOptions options) : core_(std::make_unique<Core>(std::move(options))) {}

ProxyServer::~ProxyServer() { stop(); }

const Stats& ProxyServer::stats() const noexcept { return core_->stats; }

std::string ProxyServer::address() const { return core_->address; }

void fit_connections_to_descriptors(ProxyOptions& opts) {
  // Past the limit accept() fails and a fresh caller is never answered.
  const std::optional<std::size_t> limit = cli::raise_descriptor_limit();
  if (!limit) return;
  // Room beside the callers for the upstream sockets (each loop's
  // connection cache holds at most its share of the transfers, in use or
  // idle), the store, the listener, each loop's descriptors and the rest.
  std::size_t upstream_sockets = opts.jobs;
  if (opts.max_upstream_connections != 0) {
    std::vector<std::string_view> origins;  // distinct upstreams: each has its own bound
    for (const Route& r : opts.routes)
      if (std::find(origins.begin(), origins.end(), r.origin.origin) == origins.end()) origins.push_back(r.origin.origin);
    upstream_sockets = std::min(upstream_sockets, opts.max_upstream_connections * std::max<std::size_t>(origins.size(), 1));
  }
  const std::size_t reserve = upstream_sockets + 128;
  const std::size_t room = *limit > reserve + 16 ? *limit - reserve : 16;
  opts.max_connections = std::min(opts.max_connections, room);
}

Result<std::uint16_t, ErrorMessage> ProxyServer::start() {
  Core& c = *core_;
  const std::string where = (c.opts.bind.find(':') != std::string::npos ? "[" + c.opts.bind + "]" : c.opts.bind) + ":" +
                            std::to_string(c.opts.port);
  const auto failed = [&](const std::string& why) {
    return fail(ErrorMessage("cannot listen on " + where + ": " + why));
  };
  if (!c.workers.empty() || c.stopped.load()) return failed("the server was started already");
  fit_connections_to_descriptors(c.opts);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(c.opts.port);
  if (const int rc = ::getaddrinfo(c.opts.bind.c_str(), port.c_str(), &hints, &found); rc != 0)
    return failed(::gai_strerror(rc));
  std::string error = "no address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    c.listen_fd = fd;
    break;
  }
  ::freeaddrinfo(found);
  if (c.listen_fd < 0) return failed(error);

  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(c.listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
  char host[INET6_ADDRSTRLEN] = "";
  std::uint16_t bound = 0;
  if (addr.ss_family == AF_INET6) {
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a6->sin6_addr, host, sizeof host);
    bound = ntohs(a6->sin6_port);
    c.address = std::string("[") + host + "]:" + std::to_string(bound);
  } else {
    const auto* a4 = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a4->sin_addr, host, sizeof host);
    bound = ntohs(a4->sin_port);
    c.address = std::string(host) + ":" + std::to_string(bound);
  }
  // The loops: one per core unless told, never more than transfers may run
  // (each needs at least one). They share one bound on the transfers: callers
  // do not come to the loops evenly (a loop accepts several at a wake-up), and
  // a loop with more requests than an even share of the transfers would make
  // them wait while another loop's slots idle.
  std::size_t loops = c.opts.loops != 0 ? c.opts.loops : std::max(1u, std::thread::hardware_concurrency());
  loops = std::clamp<std::size_t>(loops, 1, std::max<std::size_t>(1, std::min<std::size_t>(c.opts.jobs, proxy_server::kMaxLoops)));
  // Each loop has connections of its own: a bound on them below the loops
  // takes loops away, so that the bound holds over all of them.
  if (c.opts.max_upstream_connections != 0) loops = std::min(loops, c.opts.max_upstream_connections);
  const auto transfers = std::make_shared<SharedTransfers>(c.opts.jobs);
  for (std::size_t i = 0; i < loops; ++i) {
    const auto share_of = [&](std::size_t total) { return total / loops + (i < total % loops ? 1 : 0); };
    auto w = std::make_unique<Worker>(c, i, transfers, std::max<std::size_t>(share_of(c.opts.jobs), 1),
                                      share_of(c.opts.max_connections),
                                      c.opts.max_upstream_connections == 0
                                          ? 0
                                          : std::max<std::size_t>(share_of(c.opts.max_upstream_connections), 1));
    if (!w->ok()) {
      c.workers.clear();
      ::close(c.listen_fd);
      c.listen_fd = -1;
      return failed("cannot make an event loop (epoll): " + std::string(std::strerror(errno)));
    }
    c.workers.push_back(std::move(w));
  }
  for (auto& w : c.workers) w->start();
  return bound;
}

void ProxyServer::stop() {
  Core& c = *core_;
  if (c.stopped.exchange(true)) return;
  // Each loop drains its own callers (see Worker::begin_drain): it stops
  // accepting, answers callers held in a wait, gives transfers the grace
  // period, cancels what is left, and ends once every answer is out.
  c.stopping.store(true);
  for (auto& w : c.workers) w->wake();
  for (auto& w : c.workers) w->join();
  c.workers.clear();
  if (c.listen_fd >= 0) {
    ::close(c.listen_fd);
    c.listen_fd = -1;
  }
}

bool is_loopback(const std::string& address) noexcept {
  if (address == "localhost") return true;
  in_addr a4{};
  if (::inet_pton(AF_INET, address.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (::inet_pton(AF_INET6, address.c_str(), &a6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
  }
  return false;
}

bool peer_is_loopback(int fd) noexcept {
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return false;
  if (peer.ss_family == AF_UNIX) return true;  // the same machine
  char text[INET6_ADDRSTRLEN] = {};
  const void* where = peer.ss_family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&peer)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_addr);
  if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) return false;
  if (::inet_ntop(peer.ss_family, where, text, sizeof text) == nullptr) return false;
  return is_loopback(text);
}

}  // namespace abide::proxy
