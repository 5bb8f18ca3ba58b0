#include "fetch_store.h"

#include <cstdio>
#include <cstdlib>

#include "common.h"

#if defined(ABIDE_REDIS)
#include "abide/clock.h"
#include "abide/redis_store.h"
#define ABIDE_FETCH_HAS_REDIS 1
#endif

namespace abide::cli {

bool redis_built_in() noexcept {
#ifdef ABIDE_FETCH_HAS_REDIS
  return true;
#else
  return false;
#endif
}

Result<StoreSpec, std::string> parse_store_spec(const std::string& text) {
  StoreSpec spec;
  if (text == "memory") return spec;
#ifdef ABIDE_FETCH_HAS_REDIS
  // The parser names every form it takes, and never repeats credentials.
  if (auto endpoint = parse_redis_url(text); !endpoint) {
    return fail("--store: " + endpoint.error() + " (or --store memory)");
  }
  spec.redis = true;
  spec.url = text;
  return spec;
#else
  // Said before anything is sent, and without the URL (it may hold a password).
  return fail(std::string("--store: this abide was built without Redis support (abide::redis), so only "
                          "--store memory is available"));
#endif
}

#ifdef ABIDE_FETCH_HAS_REDIS
namespace {

// What to do about a Redis that cannot be used, by what was wrong.
std::string remedy(RedisProblem problem, bool password_given) {
  switch (problem) {
    case RedisProblem::kUnreachable: return "check that redis-server runs there";
    case RedisProblem::kAuthentication:
      return password_given
                 ? "check the user and password (in the --store URL or in " + std::string(kRedisPasswordEnv) + ")"
                 : "give the password in the --store URL or in " + std::string(kRedisPasswordEnv);
    case RedisProblem::kPermission: return "use a prefix that the Redis user's ACL allows, or another user";
    case RedisProblem::kRefused: return "fix that Redis server or use another one";
  }
  return "check the --store location";
}

}  // namespace
#endif

Result<std::shared_ptr<QuotaStore>, std::string> open_store(const StoreSpec& spec, std::string_view who) {
  if (!spec.redis) return std::shared_ptr<QuotaStore>(std::make_shared<MemoryStore>());
#ifdef ABIDE_FETCH_HAS_REDIS
  auto endpoint = parse_redis_url(spec.url);
  if (!endpoint) return fail("--store: " + endpoint.error());
  if (endpoint->password.empty()) {
    if (const char* pw = std::getenv(kRedisPasswordEnv); pw != nullptr) endpoint->password = pw;
  }
  const bool password_given = !endpoint->password.empty();
  const std::string where = endpoint->describe();
  RedisStoreOptions options;
  options.endpoint = std::move(*endpoint);
  options.on_down = spec.fail_closed ? RedisDownPolicy::kFailClosed : RedisDownPolicy::kFallback;
  const char* const while_down = spec.fail_closed
                                     ? "requests wait for it (--fail-closed), each at most its maximum wait"
                                     : "going on with in-process quota state";
  options.on_event = [prefix = std::string(who) + ": redis " + where + ": ", while_down](RedisEvent e,
                                                                                         std::string_view message) {
    // One line, written at once (the message never carries credentials; it
    // may quote a Redis error reply, so it is printed through safe_text).
    const std::string line = prefix + std::string(to_string(e)) + ": " + safe_text(message) +
                             (e == RedisEvent::kDown ? " (" + std::string(while_down) + ")" : "") + "\n";
    std::fputs(line.c_str(), stderr);
  };
  auto store = std::make_shared<RedisStore>(std::move(options));
  // Once, before anything is sent: a Redis that refuses the password or is
  // not there is a mistake in the command line, not an outage to ride out.
  if (auto problem = store->check(system_monotonic_clock().now())) {
    const std::string what = safe_text(problem->message);
    if (!spec.fallback) {
      return fail("--store: " + what + ". Nothing was sent: " + remedy(problem->problem, password_given) +
                  ", or add --store-fallback to go on without Redis");
    }
    const std::string line = std::string(who) + ": --store: " + what + "; " + while_down +
                             " (--store-fallback), reconnecting in the background\n";
    std::fputs(line.c_str(), stderr);
  }
  return std::shared_ptr<QuotaStore>(std::move(store));
#else
  (void)who;
  return fail(std::string("this abide was built without Redis support (abide::redis)"));
#endif
}

}  // namespace abide::cli
