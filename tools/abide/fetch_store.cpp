#include "fetch_store.h"

#include <cstdio>
#include <cstdlib>

#include "common.h"

#include "abide/clock.h"
#include "abide/http_date.h"
#include "state_dir.h"

#if defined(ABIDE_REDIS)
#include "abide/redis_store.h"
#define ABIDE_FETCH_HAS_REDIS 1
#endif
#if defined(ABIDE_SQLITE)
#include "abide/sqlite_store.h"
#define ABIDE_FETCH_HAS_SQLITE 1
#endif

namespace abide::cli {

bool redis_built_in() noexcept {
#ifdef ABIDE_FETCH_HAS_REDIS
  return true;
#else
  return false;
#endif
}

bool file_store_built_in() noexcept {
#ifdef ABIDE_FETCH_HAS_SQLITE
  return true;
#else
  return false;
#endif
}

namespace {

Result<StoreSpec, std::string> parse_store_text(const std::string& text) {
  StoreSpec spec;
  if (text == "memory") return spec;
  if (text == "file" || text.starts_with("file:")) {
    if (!file_store_built_in()) {
      return fail(std::string("--store: this abide was built without the file store (abide::sqlite), so use "
                              "--store memory"));
    }
    spec.file = true;
    if (text != "file") {
      spec.path = text.substr(5);
      if (spec.path.empty()) return fail(std::string("--store file: wants a path after the colon (or --store file)"));
    }
    return spec;
  }
#ifdef ABIDE_FETCH_HAS_REDIS
  // The parser names every form it takes, and never repeats credentials.
  if (auto endpoint = parse_redis_url(text); !endpoint) {
    return fail("--store: " + endpoint.error() + " (or --store file, file:PATH or memory)");
  }
  spec.redis = true;
  spec.url = text;
  return spec;
#else
  // Said before anything is sent, and without the URL (it may hold a password).
  return fail(std::string("--store: this abide was built without Redis support (abide::redis), so only "
                          "--store file, file:PATH and memory are available"));
#endif
}

}  // namespace

Result<StoreSpec, std::string> parse_store_spec(const std::string& text) {
  if (!text.empty()) return parse_store_text(text);
  const char* env = std::getenv(kStoreEnv);
  if (env == nullptr || *env == '\0') return parse_store_text(file_store_built_in() ? "file" : "memory");
  auto spec = parse_store_text(env);
  if (!spec) return fail(std::string(kStoreEnv) + " (the default --store): " + spec.error());
  return spec;
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

Result<std::string, ErrorMessage> store_file_path(const StoreSpec& spec, bool create) {
  if (!spec.path.empty()) return spec.path;
  auto dir = state_dir(create);
  if (!dir) return fail(dir.error());
  return (*dir / kStoreFileName).string();
}

#ifdef ABIDE_FETCH_HAS_SQLITE
namespace {

Result<OpenedStore, std::string> open_file_store(const StoreSpec& spec, std::string_view who) {
  const std::string prefix(who);
  const auto memory = [&](const std::string& what) -> Result<OpenedStore, std::string> {
    if (!spec.fallback) {
      return fail("--store: " + what + ". Nothing was sent: fix or move the file, or add --store-fallback " +
                  "to go on with in-process quota state (--store memory)");
    }
    std::fputs((prefix + ": --store: " + what + "; going on with in-process quota state (--store-fallback)\n").c_str(),
               stderr);
    return OpenedStore{std::make_shared<MemoryStore>(), {}};
  };
  auto path = store_file_path(spec, true);
  if (!path) return memory(path.error().text);
  SqliteStoreOptions options;
  options.path = *path;
  options.on_event = [prefix](SqliteEvent e, std::string_view message) {
    std::fputs((prefix + ": quota store " + std::string(to_string(e)) + ": " + safe_text(message) + "\n").c_str(),
               stderr);
  };
  auto store = SqliteStore::open_file(std::move(options));
  if (!store) return memory(safe_text(store.error().message));
  // Only a file outlives the process that was told: the one store asked where a wait came from.
  std::shared_ptr<SqliteStore> file = *store;
  auto remembered = [file](std::string_view key, MonoTime now) -> std::optional<std::string> {
    const auto told = file->remembered(key, now);
    if (!told) return std::nullopt;
    return "remembered in " + safe_text(file->path()) + " (told " +
           format_rfc3339(std::chrono::floor<std::chrono::seconds>(*told)) + ")";
  };
  return OpenedStore{std::move(file), std::move(remembered)};
}

}  // namespace
#endif

Result<OpenedStore, std::string> open_store(const StoreSpec& spec, std::string_view who) {
#ifdef ABIDE_FETCH_HAS_SQLITE
  if (spec.file) return open_file_store(spec, who);
#endif
  if (!spec.redis) return OpenedStore{std::make_shared<MemoryStore>(), {}};
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
  return OpenedStore{std::move(store), {}};
#else
  (void)who;
  return fail(std::string("this abide was built without Redis support (abide::redis)"));
#endif
}

}  // namespace abide::cli
