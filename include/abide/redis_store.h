// abide/redis_store.h: the pacer's quota state shared by many processes and
// machines through Redis (target abide::redis).
//
// Each key's state is one Redis string, changed only by one Lua script (the
// pacer's state machine), so every operation is atomic and one acquire is one
// round trip: EVALSHA by the digest that SCRIPT LOAD answered. When the server
// has lost the script (a restart, SCRIPT FLUSH) it is loaded again and the call
// retried once. Keys expire once nothing in them matters any more. By default
// time is the Redis server's clock, which every client shares.
//
// When Redis is down or unreachable the store never crashes and never queues:
// by default it goes on with an in-process MemoryStore, reports the outage once
// through on_event, and reconnects with exponential backoff; fail-closed makes
// acquire wait for Redis (up to the caller's deadline) and then report
// AcquireStatus::kUnavailable. A reservation that cannot be confirmed with
// Redis (still_valid) counts as void: the pacer asks again. What the pacer
// was told is kept in its memory too (abide/pacer.h, the floor): a Redis
// that comes back empty gets it written back. The library prints nothing, and no message or
// description ever contains a password or user name.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "abide/clock.h"
#include "abide/quota_store.h"
#include "abide/result.h"

namespace abide {

// Where Redis listens and how to log in.
struct RedisEndpoint {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::string unix_socket;        // used instead of host:port when set
  std::string user;               // ACL user; empty: the default user
  std::string password;           // empty: no AUTH
  std::string prefix = "abide:";  // put before every key

  // "redis://host:port" or "unix:/path", without credentials: safe to print.
  std::string describe() const;
};

// Parses a Redis location:
//   redis://[[user]:password@]host[:port][/prefix]
//   redis://[[user]:password@]unix:/path/to/socket[?prefix=P]
//   unix://[[user]:password@]/path/to/socket[?prefix=P]
//   unix:/path/to/socket[?prefix=P]
//   /path/to/socket
// A socket path runs to the end (or to '?'), so a socket's prefix goes in
// ?prefix=P (any form takes it). User, password and prefix are
// percent-decoded. An empty prefix keeps the default. A rejection says what
// is wrong and where; its message never repeats the credentials.
Result<RedisEndpoint, std::string> parse_redis_url(std::string_view url);

// What the store does while Redis cannot be reached.
enum class RedisDownPolicy : std::uint8_t {
  kFallback,    // go on with the in-process store (the default)
  kFailClosed,  // acquire waits for Redis, then reports unavailable
};

// Whose clock the shared state runs on.
enum class RedisTimeBase : std::uint8_t {
  kServer,  // the Redis server's TIME: every client agrees (the default)
  kClient,  // the caller's monotonic clock: one host only, or tests with a manual clock
};

// Reported through RedisStoreOptions::on_event.
enum class RedisEvent : std::uint8_t {
  kDown,         // Redis became unreachable (once per outage)
  kRecovered,    // Redis answers again
  kScriptError,  // Redis refused a script (a key of the wrong type, ...); once per store
};

// "down", "recovered", "script_error".
std::string_view to_string(RedisEvent e) noexcept;

struct RedisStoreOptions {
  RedisEndpoint endpoint;
  RedisDownPolicy on_down = RedisDownPolicy::kFallback;
  RedisTimeBase time_base = RedisTimeBase::kServer;
  Duration connect_timeout = std::chrono::milliseconds{250};
  Duration command_timeout = std::chrono::milliseconds{250};
  // Reconnect attempts back off exponentially from min to max.
  Duration reconnect_min = std::chrono::milliseconds{100};
  Duration reconnect_max = std::chrono::seconds{10};
  // At most this many connections (one per concurrent operation).
  std::size_t connections = 4;
  // Outage, recovery and script errors, with a message safe to log. Called
  // without locks held, from whichever thread noticed.
  std::function<void(RedisEvent, std::string_view message)> on_event;
  MemoryStoreOptions fallback;
};

// Why RedisStore::check found Redis unusable.
enum class RedisProblem : std::uint8_t {
  kUnreachable,     // nothing answers there (refused, no such socket, timed out)
  kAuthentication,  // the credentials were refused, or Redis wants some and none were given
  kPermission,      // the Redis user may not run the pacer's script on keys under the prefix (ACL)
  kRefused,         // Redis answered with another error (loading, misconfigured, the script refused)
};

// "unreachable", "authentication", "permission", "refused".
std::string_view to_string(RedisProblem p) noexcept;

struct RedisCheckError {
  RedisProblem problem = RedisProblem::kUnreachable;
  // One sentence, safe to print: the location without credentials, server
  // words bounded and escaped.
  std::string message;
};

// Counters, for tests and monitoring.
struct RedisStoreStats {
  std::uint64_t round_trips = 0;  // commands sent (SCRIPT LOAD included: a NOSCRIPT costs two more)
  std::uint64_t fallbacks = 0;    // operations answered by the in-process store
  std::uint64_t failures = 0;     // operations that found Redis unreachable
  std::uint64_t reconnects = 0;   // successful reconnections after an outage
};

// QuotaStore over Redis. Thread-safe. Constructing it does not connect; the
// first operation does, or check() when the caller wants to know at start.
class RedisStore final : public QuotaStore {
 public:
  explicit RedisStore(RedisStoreOptions options);
  ~RedisStore() override;
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  // Connects once, logs in, loads the script and runs its read-only check on
  // a key under the prefix (the prefix itself), so that a Redis this store
  // cannot use (nothing listens, credentials refused, an ACL that forbids the
  // prefix) is known before the first request instead of being found by it.
  // Takes at most the connect timeout plus three command timeouts. On failure
  // the store counts as down from `now`, as after an outage (operations go to
  // the fallback or wait, by on_down, and Redis is tried again with backoff),
  // and on_event does not report it: the caller holds the error. On success a
  // connection is left in the pool and the script is loaded.
  [[nodiscard]] std::optional<RedisCheckError> check(MonoTime now);

  std::shared_ptr<Handle> open(std::string_view key) override;
  bool shared() const noexcept override { return true; }

  // True unless the last attempt found Redis unreachable.
  bool up() const noexcept;
  RedisStoreStats stats() const noexcept;
  // The full Redis key of a pacer key (prefix included).
  std::string redis_key(std::string_view key) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with the handles
};

}  // namespace abide
