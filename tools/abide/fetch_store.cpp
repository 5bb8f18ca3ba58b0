#include "fetch_store.h"

#include <cstdio>
#include <cstdlib>

#include "common.h"

#if defined(ABIDE_REDIS)
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
  if (!text.starts_with("redis://") && !text.starts_with("unix:") && !text.starts_with("/"))
    return fail(std::string(redis_built_in() ? "--store must be memory or redis://HOST:PORT[/PREFIX]"
                                             : "--store must be memory (this abide was built without Redis support)"));
#ifdef ABIDE_FETCH_HAS_REDIS
  if (auto endpoint = parse_redis_url(text); !endpoint) return fail("--store: " + endpoint.error());
  spec.redis = true;
  spec.url = text;
  return spec;
#else
  // Said before anything is sent, and without the URL (it may hold a password).
  return fail(std::string("--store: this abide was built without Redis support (abide::redis), so only "
                          "--store memory is available"));
#endif
}

Result<std::shared_ptr<QuotaStore>, std::string> open_store(const StoreSpec& spec) {
  if (!spec.redis) return std::shared_ptr<QuotaStore>(std::make_shared<MemoryStore>());
#ifdef ABIDE_FETCH_HAS_REDIS
  auto endpoint = parse_redis_url(spec.url);
  if (!endpoint) return fail("--store: " + endpoint.error());
  if (endpoint->password.empty()) {
    if (const char* pw = std::getenv(kRedisPasswordEnv); pw != nullptr) endpoint->password = pw;
  }
  RedisStoreOptions options;
  options.endpoint = std::move(*endpoint);
  options.on_event = [where = options.endpoint.describe()](RedisEvent e, std::string_view message) {
    // One line, written at once (the message never carries credentials; it
    // may quote a Redis error reply, so it is printed through safe_text).
    const std::string line = "abide fetch: redis " + where + ": " + std::string(to_string(e)) + ": " +
                             safe_text(message) +
                             (e == RedisEvent::kDown ? " (going on with in-process quota state)" : "") + "\n";
    std::fputs(line.c_str(), stderr);
  };
  return std::shared_ptr<QuotaStore>(std::make_shared<RedisStore>(std::move(options)));
#else
  return fail(std::string("this abide was built without Redis support (abide::redis)"));
#endif
}

}  // namespace abide::cli
