// `abide fetch --store`: where the pacer keeps quota state.
#pragma once

#include <memory>
#include <string>

#include "abide/quota_store.h"
#include "abide/result.h"

namespace abide::cli {

// A checked --store value: "memory", or a Redis URL
// (redis://[[user]:password@]HOST[:PORT][/PREFIX], see abide/redis_store.h).
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

// Opens the store. Redis outages are reported on stderr; the store then goes
// on in-process (abide::RedisDownPolicy::kFallback) and reconnects.
Result<std::shared_ptr<QuotaStore>, std::string> open_store(const StoreSpec& spec);

}  // namespace abide::cli
