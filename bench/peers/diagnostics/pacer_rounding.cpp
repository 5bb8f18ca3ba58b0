// Diagnostic for issue 8 (not built by CMake): drives abide::MemoryStore the way
// the pacer does, against a fixed-window server (50 requests per 2 s) whose
// reset is rounded up to whole seconds, as the IETF draft's delta-seconds `t`,
// GitHub's epoch x-ratelimit-reset and `abide mock-server` state it. One worker,
// 0.5 ms round trips, no threads: every figure is deterministic.
//
//   g++ -std=c++20 -O1 -Iinclude bench/peers/diagnostics/pacer_rounding.cpp \
//       build/peers/libabide.a -o /tmp/pacer_rounding && /tmp/pacer_rounding
//
// Prints the requests accepted in each of the first 12 windows; a fair pacer
// gets 50 in every one. Cases: the reset exact; rounded up (draft t); an epoch
// reset rounded up, windows starting 0.49 s into a second (github); and that
// reset also counted from the whole-second Date (the skew rule, DESIGN.md rule 3).
#include <cmath>
#include <cstdio>
#include <map>

#include "abide/quota_store.h"

using namespace abide;
using namespace std::chrono;

namespace {

enum class Reset { kExact, kCeil, kEpochCeil, kEpochCeilFromDate };

void run(Pacing pacing, Reset mode, const char* label) {
  constexpr double kWindow = 2.0;
  constexpr int kLimit = 50;
  constexpr double kFrac = 0.49;  // where in its Unix second the first window starts
  MemoryStore store;
  auto key = store.open("k");
  PacingRules rules;
  rules.pacing = pacing;
  const MonoTime t0{seconds{1000}};
  MonoTime now = t0;
  std::map<long, int> accepted, limited;
  long window = -1;
  int used = 0;
  for (int sent = 0; sent < 800 && now - t0 < seconds{24};) {
    const StoreGrant g = store.acquire(*key, {now, seconds{3600}}, rules);
    now += g.wait;
    if (g.kind == StoreGrant::Kind::kAwaitProbe) continue;
    // The server: a fixed window, `kLimit` accepted per window.
    const double s = duration<double>(now - t0).count();
    const long k = static_cast<long>(std::floor(s / kWindow));
    if (k != window) window = k, used = 0;
    const bool ok = used < kLimit;
    used += ok;
    (ok ? accepted : limited)[k]++;
    ++sent;
    const double left = kWindow * static_cast<double>(k + 1) - s;
    double t = left;
    if (mode == Reset::kCeil) t = std::ceil(left - 1e-12);
    if (mode == Reset::kEpochCeil || mode == Reset::kEpochCeilFromDate)
      t = std::ceil(kFrac + kWindow * static_cast<double>(k + 1) - 1e-12) - kFrac - s;
    if (mode == Reset::kEpochCeilFromDate) t += (kFrac + s) - std::floor(kFrac + s);
    StoreRecord r;
    r.now = now;
    PolicyUpdate u;
    u.id = "default";
    u.limit = kLimit;
    u.window = seconds{2};
    u.remaining = kLimit - used;
    u.reset = duration_cast<Duration>(duration<double>(t));
    r.policies.push_back(u);
    if (!ok || used == kLimit) r.cooldown = u.reset;
    store.record(*key, r, rules);
    now += microseconds{500};
  }
  std::printf("%-6s %-34s", pacing == Pacing::kBurst ? "burst" : "smooth", label);
  for (long k = 0; k < 12; ++k) std::printf(" %2d%s", accepted[k], limited[k] ? "*" : " ");
  std::printf("\n");
}

}  // namespace

int main() {
  std::printf("accepted per 2 s window (quota 50; * = the window also had 429s)\n");
  for (Pacing p : {Pacing::kSmooth, Pacing::kBurst}) {
    run(p, Reset::kExact, "reset exact");
    run(p, Reset::kCeil, "reset rounded up (draft t)");
    run(p, Reset::kEpochCeil, "epoch reset rounded up (github)");
    run(p, Reset::kEpochCeilFromDate, "epoch reset from whole-second Date");
  }
}
