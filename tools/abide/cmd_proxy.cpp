// abide proxy: a local reverse proxy that obeys the server for programs in
// any language (proxy/proxy_server.h). Built only with abide::curl.

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "abide/client.h"
#include "abide/profiles.h"
#include "command.h"
#include "common.h"
#include "fetch_store.h"
#include "key_secret.h"
#include "proxy/proxy_rules.h"
#include "proxy/proxy_server.h"

namespace abide::cli {
namespace cmd_proxy {  // private to this file (the CLI is compiled in batches)

struct ProxyFlags {
  std::string upstream;
  std::vector<std::string> routes;
  std::string bind = "127.0.0.1";
  int port = 8080;
  std::string profile;
  std::vector<std::string> profile_files;
  std::string store;  // --store; empty: ABIDE_STORE, else the file store
  bool store_fallback = false;
  bool fail_closed = false;
  std::string pacing = "smooth";
  std::int64_t max_attempts = 5;
  double max_wait_s = 60;
  double connect_timeout_s = 10;
  double max_time_s = 0;
  double read_timeout_s = 60;
  double send_timeout_s = 60;
  bool insecure = false;  // -k
  std::string cacert;     // --cacert FILE
  std::size_t jobs = 32;
  std::size_t loops = 0;  // --loops: 0 = one per core
  std::size_t max_upstream_connections = 0;  // --max-upstream-connections: 0 = no limit
  std::size_t upstream_buffer = 16384;        // --upstream-buffer-size: libcurl's default
  std::size_t queue = 1024;
  std::uint64_t max_body = std::uint64_t{64} << 20;
  std::uint64_t body_memory = std::uint64_t{256} << 20;
  double grace_s = 10;
  bool verbose = false;
  bool public_pages = false;
};

int usage(std::string_view why) {
  std::cerr << "abide proxy: " << why << "\n";
  return kExitUsage;
}

// Why --cacert FILE cannot be used, or nullopt. Checked before the proxy
// listens: libcurl would only find out at each request's handshake, and
// every caller would get a 502 for a typo in a path.
std::optional<std::string> cacert_problem(const std::string& path) {
  if (path == "-") return std::string("give a file: the proxy reads no certificate from standard input");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return "cannot read " + path + ": it is a folder";
  auto text = read_text(path);
  if (!text) return text.error().text;
  if (text->find("-----BEGIN CERTIFICATE-----") == std::string::npos)
    return path + " holds no PEM certificate (-----BEGIN CERTIFICATE-----)";
  return std::nullopt;
}

// --upstream and every --route, in order; a usage problem when one cannot
// be read or there is none.
std::optional<std::string> read_routes(const ProxyFlags& o, std::vector<proxy::Route>& routes) {
  if (!o.upstream.empty()) {
    auto r = proxy::parse_upstream(o.upstream);
    if (!r) return "--upstream: " + r.error().text;
    routes.push_back(std::move(*r));
  }
  for (const std::string& spec : o.routes) {
    auto r = proxy::parse_route(spec);
    if (!r) return "--route: " + r.error().text;
    routes.push_back(std::move(*r));
  }
  if (routes.empty()) return std::string("give --upstream URL or --route /PREFIX=URL");
  return std::nullopt;
}

// Each route answers in its upstream's dialect, as the client reads it:
// its own profile=NAME, else --profile, else the profile of its host
// ("auto": also the one its answers' fields point to). A usage problem when
// a profile named is not known.
std::optional<std::string> choose_dialects(const ProxyFlags& o, const ProfileRegistry& registry,
                                           proxy::ProxyOptions& opts) {
  const bool adopt = o.profile == "auto";
  if (const auto unknown = unknown_profile(registry, o.profile, true)) return "--profile: " + *unknown;
  for (proxy::Route& route : opts.routes) {
    if (const auto unknown = unknown_profile(registry, route.profile)) {
      return (route.prefix.empty() ? std::string("--upstream") : "--route " + route.prefix) + ": " + *unknown;
    }
    const std::string& chosen = !route.profile.empty() ? route.profile : adopt ? std::string() : o.profile;
    const Profile* profile = chosen == "none" ? nullptr
                             : chosen.empty() ? registry.for_host(route.origin.host)
                                              : registry.find(chosen);
    route.dialect = proxy::dialect_of(profile);
  }
  opts.adopt_profiles = adopt;
  return std::nullopt;
}

// How the proxy serves its callers: where it listens, its limits and times.
void set_serving(const ProxyFlags& o, proxy::ProxyOptions& opts) {
  opts.bind = o.bind;
  opts.port = static_cast<std::uint16_t>(o.port);
  opts.default_budget = seconds_option(o.max_wait_s);
  opts.jobs = o.jobs;
  opts.loops = o.loops;
  opts.max_upstream_connections = o.max_upstream_connections;
  opts.queue = o.queue;
  opts.max_body = o.max_body;
  opts.body_memory = o.body_memory;
  opts.grace = seconds_option(o.grace_s);
  opts.verbose = o.verbose;
  opts.public_pages = o.public_pages;
  opts.send_timeout = seconds_option(o.send_timeout_s);
}

// The flags that expose callers' credentials, each said once on stderr.
void warn_exposure(const ProxyFlags& o) {
  if (!proxy::is_loopback(o.bind)) {
    std::cerr << "abide proxy: warning: " << o.bind
              << " is not a loopback address: the proxy forwards its callers' credentials (Authorization, API "
                 "keys) to its upstreams, for anyone who can reach it\n";
  }

  if (o.insecure) {
    std::cerr << "abide proxy: warning: -k: upstreams' TLS certificates are not verified, and callers' credentials "
                 "go to whoever answers\n";
  }
}

// Credentials in pacer keys are hashed under a secret (key_secret.h): this
// process's own while the keys stay in it, else one that outlives it. False
// (said on stderr) when there is none to be had.
bool set_key_secret(const StoreSpec& spec, proxy::ProxyOptions& opts) {
  auto key_secret =
      resolve_key_secret(spec.redis  ? KeyScope::kFleet
                         : spec.file ? KeyScope::kMachine
                                     : KeyScope::kProcess,
                         SecretEnvironment::of_process());
  if (!key_secret) {
    std::cerr << "abide proxy: " << key_secret.error().text << "\n";
    return false;
  }
  if (!key_secret->warning.empty()) std::cerr << "abide proxy: warning: " << key_secret->warning << "\n";
  opts.key_secret = std::move(key_secret->secret);
  return true;
}

// The client that makes the upstream transfers, and its pacer over `store`.
void configure_client(const ProxyFlags& o, const ProfileRegistry& registry, std::shared_ptr<QuotaStore> store,
                      ClientConfig& config) {
  const bool adopt = o.profile == "auto";
  config.max_attempts = o.max_attempts;
  config.profile = adopt ? std::string() : o.profile;  // "": chosen by each upstream's host (or route)
  config.registry = &registry;
  config.connect_timeout = seconds_option(o.connect_timeout_s);
  config.attempt_timeout = seconds_option(o.max_time_s);
  config.read_timeout = seconds_option(o.read_timeout_s);
  config.verify_tls = !o.insecure;  // as abide fetch -k
  config.ca_file = o.cacert;
  config.receive_buffer_bytes = o.upstream_buffer;
  PacerConfig pacer_config;
  pacer_config.rules.pacing = o.pacing == "burst" ? Pacing::kBurst : Pacing::kSmooth;
  config.pacer = std::make_shared<Pacer>(pacer_config, std::move(store));
}

// Signals first: every thread started from here on inherits the mask, and
// this thread takes them with sigwait. A caller that hangs up must not
// kill the proxy with SIGPIPE. Returns the signals that stop the proxy.
sigset_t block_signals() {
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  ::signal(SIGINT, SIG_DFL);  // an inherited "ignore" would discard them before sigwait
  ::signal(SIGTERM, SIG_DFL);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// Listens, says where on the first stdout line, and serves until one of
// `stop` arrives.
int serve(proxy::ProxyOptions opts, const sigset_t& stop) {
  proxy::ProxyServer server(std::move(opts));
  auto started = server.start();
  if (!started) {
    std::cerr << "abide proxy: " << started.error().text << "\n";
    return kExitRejected;
  }
  std::printf("listening on %s\n", server.address().c_str());
  std::fflush(stdout);

  int signo = 0;
  while (sigwait(&stop, &signo) != 0) {
  }
  server.stop();
  return kExitOk;
}

int run_proxy(const ProxyFlags& o) {
  proxy::ProxyOptions opts;
  if (auto problem = read_routes(o, opts.routes)) return usage(*problem);
  auto profiles = load_profiles(o.profile_files);
  if (!profiles) return usage("--profile-file: " + profiles.error().error.what());
  const ProfileRegistry& registry = *profiles;
  if (auto problem = choose_dialects(o, registry, opts)) return usage(*problem);
  if (!o.cacert.empty()) {
    if (auto problem = cacert_problem(o.cacert)) return usage("--cacert: " + *problem);
  }
  auto spec = parse_store_spec(o.store);
  if (!spec) return usage(spec.error());
  spec->fallback = o.store_fallback;
  spec->fail_closed = o.fail_closed;

  set_serving(o, opts);
  warn_exposure(o);
  auto store = open_store(*spec, "abide proxy");
  if (!store) {
    std::cerr << "abide proxy: " << store.error() << "\n";
    return kExitRejected;
  }
  if (!set_key_secret(*spec, opts)) return kExitRejected;
  configure_client(o, registry, std::move(store->store), opts.client);
  const sigset_t stop = block_signals();
  return serve(std::move(opts), stop);
}

constexpr const char* kFooterStart =
    R"(Callers point their base URL at the proxy. Abide-Max-Wait: SECONDS on a request bounds how
long the proxy may hold it for pacing and retries (default --max-wait); every answer carries
Abide-Outcome, Abide-Attempts and Abide-Waited, and one that is not done also Retry-After and
Abide-Not-Before. /__abide/stats (JSON) and /__abide/metrics (Prometheus) are the proxy's own.

SIGTERM or SIGINT: stop accepting, answer callers still waiting with 503 and their permitted
time, give transfers in flight --grace seconds, then exit 0.

)";

// Where quota state lives (fetch_store.h).
constexpr const char* kFooterStore =
    R"(Quota state (--store): by default a file that every abide of this machine shares,
$XDG_STATE_HOME/abide/quota.db (~/.local/state/abide/quota.db), so a restarted proxy never sends
before what a server told the one before it; `abide state` shows what it holds and forgets a key.
--store file:PATH puts it elsewhere, --store memory keeps it in this process alone, and ABIDE_STORE
sets the default. A file that cannot be used is an error at start naming it (exit 1), unless
--store-fallback: then one line on stderr and the proxy goes on in memory.

)";

// Only in an abide built with abide::redis.
constexpr const char* kFooterRedis =
    R"(--store redis://[[USER]:PASSWORD@]HOST[:PORT][/PREFIX], redis://[[USER]:PASSWORD@]unix:/PATH or
unix:/PATH (a socket's prefix: ?prefix=P) shares quota and cooldowns with other proxies and
fetches. Without a password in the URL, ABIDE_REDIS_PASSWORD gives it. Redis is checked once at
start, before the proxy listens: if nothing answers there, the credentials are refused or the
user may not use the prefix, the proxy exits 1 with the reason (never the password), unless
--store-fallback: then one line on stderr, and it starts as in an outage. During an outage the
proxy goes on with in-process quota state and reconnects in the background; with --fail-closed
requests wait for Redis instead, each up to its Abide-Max-Wait (or --max-wait), and are then
answered Abide-Outcome: deferred, unsent. --store-fallback with --fail-closed: the proxy starts
without Redis and holds requests until it answers or their budget runs out.

)";

// How pacer keys keep credentials out of the store (key_secret.h).
constexpr const char* kFooterKeys =
    R"(Callers are paced per upstream origin and credential: a request with Authorization, X-Api-Key or
a like field is keyed by an HMAC of it under a secret, never by the credential. The secret:
ABIDE_KEY_SECRET (16 bytes or more) or ABIDE_KEY_SECRET_FILE (a file, mode 0600); with --store memory
one of the process alone; else key-secret beside quota.db in $XDG_STATE_HOME/abide, made once,
mode 0600. Give every proxy of a fleet sharing a store the same ABIDE_KEY_SECRET, or credentialed
quota is shared per machine only (one warning line on stderr says so).

)";

constexpr const char* kFooterEnd =
    "Exit status: 0 after a signal, 1 when it cannot listen or cannot use its --store or key secret, 2 usage error.";

// Where requests go, and how their answers are read.
void add_upstream_flags(CLI::App& app, ProxyFlags& o) {
  app.add_option("--upstream", o.upstream, "URL[,profile=NAME]: the upstream (http or https) every path goes to; NAME reads its answers");
  app.add_option("--route", o.routes, "/PREFIX=URL[,profile=NAME]: paths under PREFIX go to URL, PREFIX stripped; NAME reads its answers (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--bind", o.bind, "Address to listen on (not loopback: a warning, credentials pass through)")
      ->capture_default_str();
  app.add_option("--port", o.port, "Port; 0 picks a free one (the first stdout line says which)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--profile", o.profile,
                 "Vendor profile for quota headers (default: by upstream host; auto: also by the fields an upstream's answers carry; none: off)");
  app.add_option("--profile-file", o.profile_files, "Load a profile from this JSON file first (repeatable)")
      ->allow_extra_args(false);
}

// Where quota state lives (--store), and what happens when it cannot be used.
void add_store_flags(CLI::App& app, ProxyFlags& o) {
  app.add_option("--store", o.store,
                 std::string("Quota state: file (the default: a restarted proxy remembers), file:PATH, memory") +
                     (redis_built_in() ? ", or redis://[:PASSWORD@]HOST:PORT[/PREFIX] to share it with other "
                                         "machines (password also from $ABIDE_REDIS_PASSWORD)"
                                       : "") +
                     "; ABIDE_STORE sets the default");
  app.add_flag("--store-fallback", o.store_fallback,
               "Start even when the store cannot be used: go on in memory (a Redis store: as during an outage)");
  if (redis_built_in()) {
    app.add_flag("--fail-closed", o.fail_closed,
                 "While Redis is down, hold requests until it is back (up to their wait budget)");
  }
}

// How each request is paced, retried and timed.
void add_request_flags(CLI::App& app, ProxyFlags& o) {
  app.add_option("--pacing", o.pacing, "Spend known quota smoothly, or in a burst")
      ->capture_default_str()
      ->check(CLI::IsMember({"smooth", "burst"}));
  app.add_option("--max-attempts", o.max_attempts, "Attempts per request, the first included")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000}));
  app.add_option("--max-wait", o.max_wait_s,
                 "A caller's budget in seconds for pacing and retries (its Abide-Max-Wait overrides)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 31.0 * 86400));
  app.add_option("--connect-timeout", o.connect_timeout_s, "Connect timeout in seconds")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
  app.add_option("--max-time", o.max_time_s, "Longest time for one attempt's transfer, in seconds (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--read-timeout", o.read_timeout_s,
                 "An upstream silent this long (under a byte a second) is cut: 504, or 502 ambiguous (0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--send-timeout", o.send_timeout_s,
                 "A caller that does not take a piece of its answer within this many seconds is dropped")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  app.add_flag("-k,--insecure", o.insecure, "Do not verify the upstreams' TLS certificates");
  app.add_option("--cacert", o.cacert,
                 "PEM file of the CA certificates that verify https upstreams, instead of the system's");
}

// How much the proxy takes on at once, and how it stops and reports.
void add_capacity_flags(CLI::App& app, ProxyFlags& o) {
  app.add_option("--jobs", o.jobs, "Most concurrent upstream transfers")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{100000}));
  app.add_option("--loops", o.loops,
                 "Event loops (threads) serving callers; 0: one per core (at most --jobs and "
                 "--max-upstream-connections)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{0}, std::size_t{64}));
  app.add_option("--max-upstream-connections", o.max_upstream_connections,
                 "Most connections to each upstream at once (0: no limit); to an HTTP/2 upstream the "
                 "transfers share their streams")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 20));
  app.add_option("--upstream-buffer-size", o.upstream_buffer,
                 "Bytes read from an upstream at a time, a buffer each transfer holds: smaller saves "
                 "memory with many long streams, costs CPU on large bodies")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1024}, std::size_t{512} << 10));
  app.add_option("--queue", o.queue, "Most callers held beyond --jobs (beyond: 503 with Retry-After)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 20));
  app.add_option("--max-body", o.max_body, "Largest request body in bytes (413 beyond)")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 40));
  app.add_option("--body-memory", o.body_memory,
                 "Request bodies held in memory at once, over every caller, in bytes (503 beyond)")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  app.add_option("--grace", o.grace_s, "Seconds that transfers in flight get to finish after SIGTERM")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  app.add_flag("-v,--verbose", o.verbose, "One line per attempt, decision and outcome on stderr (redacted)");
  app.add_flag("--public-pages", o.public_pages,
               "Serve /__abide/stats and /__abide/metrics to any caller, not only to this machine's");
}

const Registration proxy_cmd{
    {"proxy"},
    "A local reverse proxy that obeys Retry-After, RateLimit and vendor quotas for any client",
    [](CLI::App& app) -> Run {
      auto o = std::make_shared<ProxyFlags>();
      add_upstream_flags(app, *o);
      add_store_flags(app, *o);
      add_request_flags(app, *o);
      add_capacity_flags(app, *o);
      app.footer(std::string(kFooterStart) + (file_store_built_in() ? kFooterStore : "") +
                 (redis_built_in() ? kFooterRedis : "") + kFooterKeys + kFooterEnd);
      return [o] { return run_proxy(*o); };
    }};

}  // namespace cmd_proxy
}  // namespace abide::cli
