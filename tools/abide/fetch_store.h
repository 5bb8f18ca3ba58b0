// `abide fetch --store`: where the pacer keeps quota state.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "abide/quota_store.h"
#include "abide/result.h"

namespace abide::cli {

// A checked --store value: "memory", or a Redis location
// (redis://[[user]:password@]HOST[:PORT][/PREFIX], redis://[[user]:password@]unix:/PATH[?prefix=P],
// unix:/PATH[?prefix=P]; see abide/redis_store.h).
//
// The two flags are independent: `fallback` decides what a Redis unusable at
// start means (an error, or an outage from the first second), `fail_closed`
// what an outage means (in-process quota state, or requests that wait for
// Redis). Both together: the run starts without Redis and its requests wait
// for it, each up to its --max-wait or deadline, then end deferred.
struct StoreSpec {
  bool redis = false;
  std::string url;
  bool fallback = false;     // --store-fallback: a Redis unusable at start is not an error
  bool fail_closed = false;  // --fail-closed: while Redis is down, wait for it
};

// True when this abide was built with abide::redis (else --store is memory only).
bool redis_built_in() noexcept;

// Checks a --store value; an error message (without credentials) says what is
// wrong, and that Redis is not built in when it is not.
Result<StoreSpec, std::string> parse_store_spec(const std::string& text);

// The environment variable that holds the Redis password when the --store URL
// carries none (keeps it out of the command line, which other users may see).
inline constexpr const char* kRedisPasswordEnv = "ABIDE_REDIS_PASSWORD";

// Opens the store. A Redis store is checked once, before anything is sent
// (connect, AUTH, the script on a key under the prefix, within the connect
// and command timeouts): when Redis cannot be used the result is an error
// that says why (never the password), unless spec.fallback, which writes one
// line on stderr instead and goes on as in an outage. Outages later are
// reported on stderr as one line each; the store then goes on in-process
// (RedisDownPolicy::kFallback) or makes requests wait (kFailClosed), and
// reconnects. `who` starts every line ("abide fetch", "abide proxy").
Result<std::shared_ptr<QuotaStore>, std::string> open_store(const StoreSpec& spec,
                                                            std::string_view who = "abide fetch");

}  // namespace abide::cli
