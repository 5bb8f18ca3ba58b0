// `abide fetch --store`: where the pacer keeps quota state.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "abide/quota_store.h"
#include "abide/result.h"

namespace abide::cli {

// A checked --store value: "file" (the default: a file in the state
// directory, state_dir.h, that every process of the machine shares),
// "file:PATH", "memory" (state that dies with the process), or a Redis
// location (redis://[[user]:password@]HOST[:PORT][/PREFIX],
// redis://[[user]:password@]unix:/PATH[?prefix=P], unix:/PATH[?prefix=P]; see
// abide/redis_store.h). ABIDE_STORE sets the default.
//
// The two flags are independent: `fallback` decides what a Redis unusable at
// start means (an error, or an outage from the first second), `fail_closed`
// what an outage means (in-process quota state, or requests that wait for
// Redis). Both together: the run starts without Redis and its requests wait
// for it, each up to its --max-wait or deadline, then end deferred.
struct StoreSpec {
  bool redis = false;
  std::string url;
  bool file = false;
  std::string path;          // the file; empty: quota.db in the state directory
  bool fallback = false;     // --store-fallback: a store unusable at start is not an error
  bool fail_closed = false;  // --fail-closed: while Redis is down, wait for it
};

// True when this abide was built with abide::redis (else no --store redis://).
bool redis_built_in() noexcept;
// True when this abide was built with abide::sqlite (else no --store file).
bool file_store_built_in() noexcept;

// The environment variable that sets --store's default.
inline constexpr const char* kStoreEnv = "ABIDE_STORE";
// The file store's name in the state directory.
inline constexpr const char* kStoreFileName = "quota.db";

// Checks a --store value; empty: the default (ABIDE_STORE, else "file" when
// built in, else "memory"). An error message (without credentials) says what
// is wrong, where it came from, and which parts are not built in.
Result<StoreSpec, std::string> parse_store_spec(const std::string& text);

// The environment variable that holds the Redis password when the --store URL
// carries none (keeps it out of the command line, which other users may see).
inline constexpr const char* kRedisPasswordEnv = "ABIDE_REDIS_PASSWORD";

// The file of a file store: spec.path, else quota.db in the state directory
// (made 0700 with `create`); an error says why there is none.
Result<std::string, ErrorMessage> store_file_path(const StoreSpec& spec, bool create);

// Opens the store. A file store is opened and checked (abide/sqlite_store.h):
// a file that is not abide's, damaged, newer, read-only or locked is an error
// naming the path, unless spec.fallback, which writes one line on stderr and
// goes on in process memory. A Redis store is checked once, before anything is sent
// (connect, AUTH, the script on a key under the prefix, within the connect
// and command timeouts): when Redis cannot be used the result is an error
// that says why (never the password), unless spec.fallback, which writes one
// line on stderr instead and goes on as in an outage. Outages later are
// reported on stderr as one line each; the store then goes on in-process
// (RedisDownPolicy::kFallback) or makes requests wait (kFailClosed), and
// reconnects. `who` starts every line ("abide fetch", "abide proxy").
struct OpenedStore {
  std::shared_ptr<QuotaStore> store;
  // Where a wait on `key` comes from when an earlier process was told it and
  // the file store remembered it: "remembered in PATH (told TIME)"; nullopt
  // for what this process was told. Empty for stores that forget with the process.
  std::function<std::optional<std::string>(std::string_view key, MonoTime now)> remembered;
};
Result<OpenedStore, std::string> open_store(const StoreSpec& spec, std::string_view who = "abide fetch");

}  // namespace abide::cli
