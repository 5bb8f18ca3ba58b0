// abide state [--store file|file:PATH] [--json] [--forget KEY]...
//
// What the file quota store remembers, one key a line, sorted: the key, a
// cooldown and its permitted time, the quota the server announced (or the one
// learned from its limited answers), and when a response was last recorded.
// --forget KEY drops a key (and the keys of that origin under a credential,
// KEY#...), so the next request on it goes as on a key never seen. Only the
// file store can be listed: memory dies with its process, and a Redis store's
// keys are read with redis-cli. Keys are printed through safe_text (they hold
// a server's origin).
//
// Exit status: 0 listed or forgotten; 1 the store cannot be opened, or a key
// to forget is not there; 2 usage.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "abide/clock.h"
#include "abide/http_date.h"
#include "abide/sqlite_store.h"
#include "command.h"
#include "duration_text.h"
#include "common.h"
#include "fetch_store.h"
#include "learned_text.h"

namespace abide::cli {
namespace cmd_state {  // private to this file (the CLI is compiled as one unit)

using ojson = nlohmann::ordered_json;

struct Options {
  std::string store;
  bool json = false;
  std::vector<std::string> forget;
};

std::string seconds_text(Duration d) { return format_seconds(std::chrono::ceil<std::chrono::milliseconds>(d)); }

// An instant for people, to the second: a time something waits for is
// rounded up (never shown before it is), a time something happened, down.
std::string until_text(WallTime t) { return format_rfc3339(std::chrono::ceil<std::chrono::seconds>(t)); }
std::string when_text(WallTime t) { return format_rfc3339(std::chrono::floor<std::chrono::seconds>(t)); }

std::string policy_text(const StoredKey::Policy& p, WallTime now) {
  std::string s = "quota";
  if (!p.id.empty()) s += " " + safe_text(p.id, 128);
  if (p.limit > 0) s += " " + std::to_string(p.limit);
  if (p.window > Duration::zero()) s += (p.limit > 0 ? " per " : " window ") + seconds_text(p.window);
  if (p.remaining && p.reset) {
    s += ", " + std::to_string(*p.remaining) + " left until " + until_text(*p.reset);
    if (*p.reset > now) s += " (in " + seconds_text(*p.reset - now) + ")";
  }
  return s;
}

void print_text(const std::vector<StoredKey>& keys, const std::string& path, WallTime now) {
  if (keys.empty()) {
    std::cout << "nothing remembered in " << safe_text(path) << "\n";
    return;
  }
  std::cout << keys.size() << (keys.size() == 1 ? " key" : " keys") << " remembered in " << safe_text(path) << "\n";
  for (const StoredKey& k : keys) {
    std::cout << safe_text(k.key, 512) << "\n";
    if (k.cooldown_until) {
      std::cout << "  cooldown until " << until_text(*k.cooldown_until) << " (in "
                << seconds_text(*k.cooldown_until - now) << "): "
                << (k.cooldown_cause == WaitCause::kQuota ? "its quota is spent" : "the server's Retry-After") << "\n";
    }
    for (const auto& p : k.policies) std::cout << "  " << policy_text(p, now) << "\n";
    if (k.learned) std::cout << "  learned: " << learned_text(*k.learned) << "\n";
    if (k.told) std::cout << "  last told " << when_text(*k.told) << "\n";
  }
}

ojson to_json(const std::vector<StoredKey>& keys, const std::string& path) {
  ojson out = ojson::object();
  out["store"] = path;
  ojson list = ojson::array();
  for (const StoredKey& k : keys) {
    ojson j;
    j["key"] = k.key;
    j["cooldown_until"] = k.cooldown_until ? ojson(format_rfc3339(*k.cooldown_until)) : ojson(nullptr);
    j["cooldown_cause"] = k.cooldown_until ? ojson(k.cooldown_cause == WaitCause::kQuota ? "quota" : "retry-after")
                                           : ojson(nullptr);
    ojson policies = ojson::array();
    for (const auto& p : k.policies) {
      ojson q;
      q["policy"] = p.id;
      q["limit"] = p.limit > 0 ? ojson(p.limit) : ojson(nullptr);
      q["window_s"] = p.window > Duration::zero() ? ojson(to_seconds(p.window)) : ojson(nullptr);
      q["remaining"] = p.remaining ? ojson(*p.remaining) : ojson(nullptr);
      q["reset"] = p.reset ? ojson(format_rfc3339(*p.reset)) : ojson(nullptr);
      policies.push_back(std::move(q));
    }
    j["policies"] = std::move(policies);
    if (k.learned) {
      ojson l;
      put_learned_json(l, *k.learned);
      j["learned"] = std::move(l);
    } else {
      j["learned"] = nullptr;
    }
    j["told"] = k.told ? ojson(format_rfc3339(*k.told)) : ojson(nullptr);
    j["expires"] = format_rfc3339(k.expires);
    list.push_back(std::move(j));
  }
  out["keys"] = std::move(list);
  return out;
}

int run(const Options& o) {
  auto spec = parse_store_spec(o.store);
  if (!spec) {
    std::cerr << "abide state: " << spec.error() << "\n";
    return kExitUsage;
  }
  if (!spec->file) {
    std::cerr << "abide state: only a file store can be listed (--store file or file:PATH): "
              << (spec->redis ? "a Redis store's keys are read with redis-cli" : "memory dies with its process")
              << "\n";
    return kExitUsage;
  }
  // Looking creates nothing: no file is a store that remembers nothing.
  auto path = store_file_path(*spec, false);
  if (!path) {
    std::cerr << "abide state: " << path.error().text << "\n";
    return kExitRejected;
  }
  std::error_code ec;
  if (!std::filesystem::exists(*path, ec)) {
    if (!o.forget.empty()) {
      std::cerr << "abide state: " << safe_text(*path) << " does not exist: nothing to forget\n";
      return kExitRejected;
    }
    if (o.json) {
      std::cout << to_json({}, *path).dump(2) << "\n";
    } else {
      std::cout << "nothing remembered: " << safe_text(*path) << " does not exist\n";
    }
    return kExitOk;
  }
  SqliteStoreOptions options;
  options.path = *path;
  auto opened = SqliteStore::open_file(std::move(options));
  if (!opened) {
    std::cerr << "abide state: " << safe_text(opened.error().message) << "\n";
    return kExitRejected;
  }
  SqliteStore* store = opened->get();
  const MonoTime now = system_monotonic_clock().now();
  const WallTime wall = system_wall_clock().now();
  auto keys = store->list(now);
  if (!keys) {
    std::cerr << "abide state: " << safe_text(keys.error()) << "\n";
    return kExitRejected;
  }
  if (!o.forget.empty()) {
    int status = kExitOk;
    for (const std::string& name : o.forget) {
      std::vector<std::string> doomed;
      for (const StoredKey& k : *keys) {
        if (k.key == name || k.key.starts_with(name + "#")) doomed.push_back(k.key);
      }
      if (doomed.empty()) {
        std::cerr << "abide state: " << safe_text(name, 512) << " is not in " << safe_text(store->path()) << "\n";
        status = kExitRejected;
        continue;
      }
      for (const std::string& k : doomed) {
        auto r = store->forget(k);
        if (!r) {
          std::cerr << "abide state: " << safe_text(r.error()) << "\n";
          return kExitRejected;
        }
        std::cout << "forgot " << safe_text(k, 512) << "\n";
      }
    }
    return status;
  }
  if (o.json) {
    std::cout << to_json(*keys, store->path()).dump(2) << "\n";
  } else {
    print_text(*keys, store->path(), wall);
  }
  return kExitOk;
}

const Registration state_cmd{
    {"state"},
    "Show what the file quota store remembers about each key, or forget a key",
    [](CLI::App& app) -> Run {
      auto o = std::make_shared<Options>();
      app.add_option("--store", o->store,
                     "file (the default: quota.db in $XDG_STATE_HOME/abide, else ~/.local/state/abide) or file:PATH; "
                     "ABIDE_STORE sets the default");
      app.add_flag("--json", o->json, "Print JSON instead of words");
      app.add_option("--forget", o->forget,
                     "Forget KEY (and that origin's keys under a credential, KEY#...); repeatable")
          ->allow_extra_args(false);
      return [o] { return run(*o); };
    }};

}  // namespace cmd_state
}  // namespace abide::cli
