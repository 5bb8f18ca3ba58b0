// Built against an installed abide with COMPONENTS sqlite: a store in a
// scratch file remembers a cooldown from one store to the next.
#include <abide/sqlite_store.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

int main() {
  const std::string path = "consumer-sqlite-" + std::to_string(getpid()) + ".db";
  abide::SqliteStoreOptions o;
  o.path = path;
  const abide::MonoTime now{std::chrono::hours{1}};
  {
    auto s = abide::SqliteStore::open_file(o);
    if (!s) {
      std::fprintf(stderr, "consumer: %s\n", s.error().message.c_str());
      return 1;
    }
    auto k = (*s)->open("k");
    abide::StoreRecord r;
    r.now = now;
    r.cooldown = std::chrono::seconds{30};
    (void)k->record(r, abide::PacingRules{});
  }
  auto s = abide::SqliteStore::open_file(o);
  if (!s) return 1;
  auto k = (*s)->open("k");
  const auto g = k->acquire({now, std::chrono::seconds{1}}, abide::PacingRules{});
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  std::printf("consumer: sqlite store remembered a %lld s wait\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(g.wait).count()));
  return g.kind == abide::StoreGrant::Kind::kTooLate ? 0 : 1;
}
