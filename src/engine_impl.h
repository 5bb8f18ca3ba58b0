// Internal: what the requests of one engine::Engine share (the config, the
// clocks, the planner and the pacer), and each origin's pacer key and
// ServerClock, cached. Engine holds it behind a pointer so that the public
// header carries none of it; each Machine holds a reference to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "abide/engine.h"
#include "abide/server_clock.h"
#include "mutex.h"
#include "string_hash.h"

namespace abide::detail {

// A new pacer for an engine with `config` and no shared pacer: over a
// MemoryStore, counting the quotas its planner counts (so both hold the same
// permitted time), on these clocks.
std::shared_ptr<Pacer> own_pacer(const engine::Config& config, const MonotonicClock& mono, const WallClock& wall);

struct EngineImpl {
  explicit EngineImpl(engine::Config config);

  // What a request's start needs of its URL's origin. Cached by the URL's
  // scheme and authority as written, so a request to a known origin skips
  // parsing and the key and clock lookups.
  struct Origin {
    Pacer::Key key;  // the pacer key of the origin
    ServerClock* clock = nullptr;
    std::string host;
  };

  // The origin of `url`: the cached entry, or `scratch` filled in (beyond the
  // cache's bound); nullptr when it is not an http(s) URL.
  const Origin* origin(std::string_view url, Origin& scratch);
  // The origin's clock; nullptr beyond kMaxServerClocks (each answer is then
  // read by its own Date).
  ServerClock* server_clock(std::string_view origin);

  engine::Config config_;
  const MonotonicClock& mono_;
  const WallClock& wall_;
  Planner planner_;
  std::shared_ptr<Pacer> pacer_;
  std::shared_ptr<RandomSource> random_;
  std::uint64_t id_;  // unique per engine in the process (a thread's last origin names it)

 private:
  static constexpr std::size_t kMaxServerClocks = 4096;
  static constexpr std::size_t kMaxOrigins = 4096;
  Mutex clocks_mu_;
  std::map<std::string, std::unique_ptr<ServerClock>, std::less<>> clocks_ ABIDE_GUARDED_BY(clocks_mu_);
  Mutex origins_mu_;
  // Never erased: a pointer to an entry stays good for the engine's life.
  std::unordered_map<std::string, Origin, StringHash, std::equal_to<>> origins_ ABIDE_GUARDED_BY(origins_mu_);
};

}  // namespace abide::detail
