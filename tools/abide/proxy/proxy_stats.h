// What `abide proxy` counts and shows on its own pages: /__abide/stats (JSON)
// and /__abide/metrics (Prometheus text exposition format 0.0.4).
// Thread-safe: every connection thread records into one Stats.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "abide/client.h"
#include "abide/clock.h"
#include "mutex.h"

namespace abide::proxy {

class Stats {
 public:
  // `wall` tells which cooldowns have ended when one is recorded (nullptr:
  // the system clock); the pages take their `now` as a parameter.
  explicit Stats(const WallClock* wall = nullptr) noexcept;

  // A caller's request was read (including those answered with an error).
  void request_received();
  // A request ended: its upstream origin ("" for the proxy's own answers),
  // the status the caller was answered, and its outcome (nullptr for errors
  // answered before forwarding: bad input, queue full, no route). An outcome
  // adds its attempts, its retries (attempts after the first), its waits
  // (attempts that waited for the pacer, and one retry wait before each
  // attempt after the first), its waited time, its name under "outcomes"
  // (and "ambiguous" too when it is), a deferral (deferred,
  // deadline_exceeded), and its permitted time as the origin's cooldown.
  void request_answered(std::string_view origin, int status, const RequestOutcome* outcome);
  // The permitted time an upstream stated or the pacer computed for a key:
  // a cooldown that the pages show while it lasts (the later one, when the
  // origin has one already; an ended one is not kept). At most 4096 origins:
  // ended cooldowns are dropped first, then the soonest to end.
  void cooldown(std::string_view origin, WallTime until);
  // Callers currently held (waiting for pacing, retries or a transfer slot),
  // and transfers running upstream.
  void set_in_flight(std::int64_t held, std::int64_t transfers);
  // Caller connections open on event loop `loop` (counted from 0; the
  // first 64 loops are shown).
  void set_loop_connections(std::size_t loop, std::uint64_t connections);

  // {"requests":N,"answered":{"200":N,...},"attempts":N,"retries":N,"waits":N,
  //  "waited_s":X,"outcomes":{"done":N,...},"deferrals":N,"held":N,"transfers":N,
  //  "connections":N,"loops":[{"connections":N},...],
  //  "cooldowns":{"https://api.x.com":{"until":"RFC 3339","left_s":X}},
  //  "quota_held":{"tokens":{"paced":N,"deferred":N,"waited_s":X,"last":"tokens: 1,850 of 40,000 left, 4,100 needed"}}}
  nlohmann::ordered_json json(WallTime now) const;
  // abide_proxy_requests_total, abide_proxy_answers_total{status}, abide_proxy_attempts_total,
  // abide_proxy_retries_total, abide_proxy_waits_total, abide_proxy_waited_seconds_total,
  // abide_proxy_outcomes_total{outcome}, abide_proxy_deferrals_total, abide_proxy_held,
  // abide_proxy_transfers, abide_proxy_connections{loop}, abide_proxy_cooldown_seconds{upstream} (only cooldowns still
  // running), abide_proxy_quota_held_total{quota}, abide_proxy_quota_held_seconds_total{quota},
  // each with # HELP and # TYPE; label values escaped (\\, \", \n).
  std::string prometheus(WallTime now) const;

 private:
  static constexpr std::size_t kMaxCooldowns = 4096;
  static constexpr std::size_t kMaxLoops = 64;  // as ProxyOptions::loops allows
  // Quota units are a server's words: a few are kept, further ones counted as "other".
  static constexpr std::size_t kMaxQuotaUnits = 32;
  void cooldown_locked(std::string_view origin, WallTime until, WallTime now) ABIDE_REQUIRES(mu_);
  // What one announced quota held back: attempts it paced, requests it
  // deferred, the time attempts waited for it, and the last one's counts.
  struct QuotaHolds {
    std::uint64_t paced = 0;
    std::uint64_t deferred = 0;
    double waited_s = 0;
    std::string last;
  };
  QuotaHolds& holds_locked(const QuotaHeld& held) ABIDE_REQUIRES(mu_);

  const WallClock* wall_;
  mutable detail::Mutex mu_;
  std::uint64_t requests_ ABIDE_GUARDED_BY(mu_) = 0;
  std::uint64_t attempts_ ABIDE_GUARDED_BY(mu_) = 0;
  std::uint64_t retries_ ABIDE_GUARDED_BY(mu_) = 0;
  std::uint64_t waits_ ABIDE_GUARDED_BY(mu_) = 0;
  double waited_s_ ABIDE_GUARDED_BY(mu_) = 0;
  std::uint64_t deferrals_ ABIDE_GUARDED_BY(mu_) = 0;
  std::int64_t held_ ABIDE_GUARDED_BY(mu_) = 0;
  std::vector<std::uint64_t> loop_connections_ ABIDE_GUARDED_BY(mu_);
  std::int64_t transfers_ ABIDE_GUARDED_BY(mu_) = 0;
  std::map<int, std::uint64_t> answered_ ABIDE_GUARDED_BY(mu_);
  std::map<std::string, std::uint64_t, std::less<>> outcomes_ ABIDE_GUARDED_BY(mu_);
  // Origin (printable) to its end; at most kMaxCooldowns.
  std::map<std::string, WallTime, std::less<>> cooldowns_ ABIDE_GUARDED_BY(mu_);
  // By unit (printable); at most kMaxQuotaUnits + 1.
  std::map<std::string, QuotaHolds, std::less<>> quota_held_ ABIDE_GUARDED_BY(mu_);
};

}  // namespace abide::proxy
