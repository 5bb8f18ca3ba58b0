// A discrete-event simulation of workers pacing through a QuotaStore against a
// fixed-window rate-limited server, on simulated time (no clock, no sleep).
//
// Each worker: acquire -> (wait) -> check the reservation is still valid ->
// request reaches the server after `latency` -> the answer comes back after
// `latency` -> record -> acquire again (the same request again after a limited
// answer). The server counts arrivals per window of `window` starting at
// `phase`, answers limited once `limit` were accepted, and states times rounded
// up to whole seconds, as real servers do (or exactly, without `round_up`).
//
// What the server says varies: an announced policy and/or remaining count
// (the drafts, vendors), or only a Retry-After on limited answers, or nothing
// at all (bare 429s: the worker then waits its own backoff before it asks the
// store again, as the planner's backoff would make it).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <queue>
#include <tuple>
#include <vector>

#include "abide/quota_store.h"

namespace abide::test {

struct SimOptions {
  int requests = 300;
  int workers = 8;
  std::int64_t limit = 50;
  Duration window = std::chrono::seconds{2};
  Duration phase{};  // where the server's windows start, in [0, window)
  // Windows start at the first arrival after the last one ended (as the mock
  // server's do), not on a fixed grid: a client that starts a window late
  // moves every later window with it. `phase` is then unused.
  bool windows_from_first = false;
  Duration latency = std::chrono::milliseconds{1};  // one way
  bool announce_policy = true;                      // limit and window in every answer (draft11, github)
  bool announce_window = true;                      // with announce_policy: the window too (GitHub sends none)
  bool announce_remaining = true;                   // remaining and reset in every answer
  // The reset as a Unix second (GitHub's x-ratelimit-reset): the window end
  // rounded up to a whole second of a clock where `start` is `unix_offset`
  // past a whole second. Otherwise: the time to the end rounded up (the drafts).
  bool reset_unix_second = false;
  Duration unix_offset{};
  // Limited answers carry a Retry-After: the time to the window's end (rounded
  // up with round_up). Without it (and without announcements) a 429 is bare.
  bool retry_after = true;
  bool round_up = true;  // times in whole seconds, rounded up; false: exact
  // After a bare limited answer the worker waits this before asking again,
  // doubled per consecutive limited answer of its request when exponential (at most backoff_cap).
  Duration worker_backoff = std::chrono::seconds{1};
  bool backoff_exponential = false;
  Duration backoff_cap = std::chrono::seconds{8};
  // A changing server: from start + change_at on, each window holds limit_later (0: no change).
  std::int64_t limit_later = 0;
  Duration change_at{};
  // Records say which answers were limited (StoreRecord::limited). false: as
  // before the store learned policies, for comparison.
  bool tell_limited = true;
  PacingRules rules;
};

struct SimResult {
  Duration elapsed{};  // first acquire to the last accepted answer
  int accepted = 0;
  int limited = 0;  // limited answers (429s)
  int limited_after_first_window = 0;
  std::int64_t max_arrivals_per_window = 0;  // accepted + limited, over windows after the first
  // Requests sent while the client knew of a Retry-After that forbade them.
  int premature = 0;
  // Limited answers per server window, from the first window the run touched.
  std::vector<int> limited_by_window;
  double quota_time_s = 1.0;  // requests x window / limit
  // The least time any client with these workers could take: one that knew
  // the server's windows and sent each one's quota to arrive at its start.
  // What it is depends on the phase (a first window nearly over is short).
  // It assumes the limit never changes (limit_later is not counted).
  Duration floor{};
  // Elapsed time divided by the time the quota allows at its long-run rate.
  double ratio() const { return std::chrono::duration<double>(elapsed).count() / quota_time_s; }
  double floor_ratio() const { return std::chrono::duration<double>(floor).count() / quota_time_s; }
};

// The workload issue 17 measures: 120 requests, 20 per 2 s, 8 workers.
inline SimOptions quota_workload(Duration latency, Duration phase) {
  SimOptions o;
  o.requests = 120;
  o.limit = 20;
  o.latency = latency;
  o.phase = phase;
  return o;
}

// quota_workload() with the quota announced: the reset in seconds from now
// (the drafts) or as a Unix second with no window (GitHub), on a grid of
// windows or on windows that start with their first request.
inline SimOptions announced_workload(bool unix_second, bool from_first, Duration latency, Duration phase,
                                     const PacingRules& rules) {
  SimOptions o = quota_workload(latency, phase);
  o.windows_from_first = from_first;
  if (unix_second) {
    o.announce_window = false;
    o.reset_unix_second = true;
    o.unix_offset = phase % std::chrono::seconds{1};
  }
  o.rules = rules;
  return o;
}

inline SimResult simulate(QuotaStore::Handle& key, const SimOptions& o, MonoTime start) {
  using std::chrono::seconds;
  enum Ev { kAcquire, kSend, kArrive, kAnswer };
  struct Event {
    MonoTime at;
    std::uint64_t seq;
    int worker;
    Ev ev;
    bool operator>(const Event& b) const { return std::tie(at, seq) > std::tie(b.at, b.seq); }
  };
  struct Worker {
    std::uint64_t epoch = 0;
    std::uint64_t pending = 0;  // the one acquire event that counts (others are stale)
    bool busy = false;          // has a request to send
    bool awaiting = false;      // waits for a probe's answer
    bool limited = false;       // the last answer was limited
    int limited_in_a_row = 0;   // consecutive limited answers of the current request
    std::int64_t remaining = 0;
    Duration reset{};
    Duration retry_after{};
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<>> q;
  std::uint64_t seq = 0;
  std::vector<Worker> w(static_cast<std::size_t>(o.workers));
  int next_request = 0;
  SimResult r;
  r.quota_time_s = static_cast<double>(o.requests) * std::chrono::duration<double>(o.window).count() /
                   static_cast<double>(o.limit);
  std::map<std::int64_t, std::int64_t> accepted_in, arrivals_in, limited_in;
  MonoTime permitted{};  // the latest Retry-After the client has recorded: no send before it
  const auto window_of = [&](MonoTime t) { return (t - start + o.window - o.phase) / o.window; };
  const auto window_end = [&](std::int64_t n) { return start - (o.window - o.phase) + (n + 1) * o.window; };
  std::int64_t first_window = -1;
  std::int64_t moving_n = -1;  // windows_from_first: the current window and its end
  MonoTime moving_end{};
  const auto acquire_at = [&](int i, MonoTime at) {
    w[static_cast<std::size_t>(i)].pending = seq;
    q.push({at, seq++, i, kAcquire});
  };
  for (int i = 0; i < o.workers; ++i) acquire_at(i, start);
  int guard = 0;
  while (!q.empty() && ++guard < 1000000) {
    const Event e = q.top();
    q.pop();
    Worker& me = w[static_cast<std::size_t>(e.worker)];
    switch (e.ev) {
      case kAcquire: {
        if (e.seq != me.pending) break;
        if (!me.busy) {
          if (next_request >= o.requests) break;
          ++next_request;
          me.busy = true;
        }
        me.awaiting = false;
        const StoreGrant g = key.acquire(StoreAcquire{e.at, kMaxDuration}, o.rules);
        if (g.kind == StoreGrant::Kind::kAwaitProbe) {
          me.awaiting = true;
          acquire_at(e.worker, saturating_add(e.at, g.wait));
        } else if (g.kind == StoreGrant::Kind::kGranted || g.kind == StoreGrant::Kind::kProbe) {
          me.epoch = g.epoch;
          q.push({saturating_add(e.at, g.wait), seq++, e.worker, kSend});
        } else {
          acquire_at(e.worker, e.at + std::chrono::milliseconds{10});
        }
        break;
      }
      case kSend:
        if (!key.still_valid(me.epoch, e.at)) {
          acquire_at(e.worker, e.at);
        } else {
          if (e.at < permitted) ++r.premature;
          q.push({e.at + o.latency, seq++, e.worker, kArrive});
        }
        break;
      case kArrive: {
        if (o.windows_from_first && (moving_n < 0 || e.at >= moving_end)) {
          ++moving_n;
          moving_end = e.at + o.window;
        }
        const std::int64_t n = o.windows_from_first ? moving_n : window_of(e.at);
        const MonoTime end = o.windows_from_first ? moving_end : window_end(n);
        if (first_window < 0) first_window = n;
        ++arrivals_in[n];
        const Duration to_end = end - e.at;
        Duration reset = o.round_up ? Duration{std::chrono::ceil<seconds>(to_end)} : to_end;
        if (o.reset_unix_second) {
          const auto unix_at = [&](MonoTime m) { return m - start + o.unix_offset + std::chrono::hours{1}; };
          reset = std::chrono::ceil<seconds>(unix_at(end)) - unix_at(e.at);
        }
        const bool changed = o.limit_later > 0 && end - o.window >= start + o.change_at;
        const std::int64_t limit = changed ? o.limit_later : o.limit;
        if (accepted_in[n] < limit) {
          ++accepted_in[n];
          me.limited = false;
        } else {
          me.limited = true;
          ++r.limited;
          ++limited_in[n];
          if (n != first_window) ++r.limited_after_first_window;
        }
        me.remaining = limit - accepted_in[n];
        me.reset = reset;
        me.retry_after = o.round_up ? Duration{std::chrono::ceil<seconds>(reset)} : reset;
        q.push({e.at + o.latency, seq++, e.worker, kAnswer});
        break;
      }
      case kAnswer: {
        StoreRecord rec;
        rec.now = e.at;
        PolicyUpdate u;
        u.id = "default";
        if (o.announce_policy) {
          u.limit = o.limit;
          if (o.announce_window) u.window = o.window;
        }
        if (o.announce_remaining) {
          u.remaining = me.remaining;
          u.reset = me.reset;
          u.reset_resolution = seconds{1};
        }
        if (o.announce_policy || o.announce_remaining) rec.policies.push_back(u);
        rec.limited = me.limited && o.tell_limited;
        if (me.limited && o.retry_after) {
          rec.cooldown = me.retry_after;
          permitted = std::max(permitted, e.at + me.retry_after);
        }
        if (o.announce_remaining && me.remaining <= 0 && me.reset > rec.cooldown.value_or(Duration::zero())) {
          // A spent quota holds the key until its reset, as the pacer tells
          // the store: the store may end it at the window's pinned end, never
          // before the Retry-After.
          rec.cooldown_floor = rec.cooldown.value_or(Duration::zero());
          rec.cooldown = me.reset;
          rec.cooldown_cause = WaitCause::kQuota;
        }
        rec.spread_seed = 0.5;
        key.record(rec, o.rules);
        Duration backoff{};
        if (!me.limited) {
          ++r.accepted;
          me.busy = false;
          me.limited_in_a_row = 0;
          r.elapsed = e.at - start;
        } else if (!o.retry_after && !o.announce_policy && !o.announce_remaining) {
          // A bare 429: the worker's own backoff is the floor of its retry.
          backoff = o.worker_backoff;
          for (int i = 0; o.backoff_exponential && i < me.limited_in_a_row && backoff < o.backoff_cap; ++i) {
            backoff += backoff;
          }
          backoff = std::min(backoff, std::max(o.backoff_cap, o.worker_backoff));
          ++me.limited_in_a_row;
        }
        // Wake everyone waiting for a probe's answer, then this worker goes on.
        for (std::size_t i = 0; i < w.size(); ++i) {
          if (w[i].awaiting) {
            w[i].awaiting = false;
            acquire_at(static_cast<int>(i), e.at);
          }
        }
        acquire_at(e.worker, e.at + backoff);
        break;
      }
    }
  }
  {
    // The floor: the last window's share arrives at that window's start (or
    // at the first arrival, in the first window), in rounds of `workers`.
    const std::int64_t per = std::max<std::int64_t>(o.limit, 1);
    const std::int64_t last = (o.requests - 1) / per;  // windows after the first
    const std::int64_t share = o.requests - last * per;
    const std::int64_t rounds = (share + o.workers - 1) / std::max(o.workers, 1);
    const MonoTime first_arrival = start + o.latency;
    MonoTime at = first_arrival + o.window * last;
    if (!o.windows_from_first) {
      const std::int64_t n0 = window_of(first_arrival);
      at = last == 0 ? first_arrival : window_end(n0 + last - 1);
    }
    r.floor = (at - start) + o.latency + (rounds - 1) * 2 * o.latency;
  }
  for (const auto& [n, count] : arrivals_in) {
    if (n != first_window) r.max_arrivals_per_window = std::max(r.max_arrivals_per_window, count);
    r.limited_by_window.resize(static_cast<std::size_t>(n - first_window + 1), 0);
    r.limited_by_window.back() = static_cast<int>(limited_in[n]);
  }
  return r;
}

}  // namespace abide::test
