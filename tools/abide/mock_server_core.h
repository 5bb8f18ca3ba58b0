// The logic of `abide mock-server`, without HTTP: header styles, fixed-window
// quota (a refilling bucket for openai), per-client accounting (accepted, limited, failed, premature), the
// optional request record, and the /__stats JSON. Header-only so that a test
// can drive it with a manual clock; mock_server.h puts it behind cpp-httplib.
//
// Time: the limiter reads the *wall* clock it is given. A mock server is a real
// server, and the signals it sends mix deltas ("Retry-After: 2") with instants
// (GitHub's epoch reset, an IMF-fixdate Retry-After); reading one clock keeps
// them describing the same instant. Within the limiter, time never runs
// backwards (a wall-clock step back is held at the latest instant seen).
//
// Quota: one global quota of `limit` accepted requests per fixed window of
// length `window` (all clients share it, like one API key). Windows start at
// the first API request after start or /__reset (Align::kFirstRequest), or at
// multiples of `window` in Unix time (Align::kEpoch). Only accepted requests
// use quota, so a client that obeys the headers reaches exactly `limit` per
// `window` in the long run.
//
// The openai style alone is not a fixed window: it models OpenAI's limit, a
// token bucket of `limit` requests that refills continuously over `window`
// (one request every window/limit). It starts full, an accepted request takes
// one, and a request is limited when less than one whole request is left. Its
// reset-requests is the time until the bucket is full again, as OpenAI
// documents it, not the time to the next permitted request; that one is the
// 429's retry-after-ms. The fixed windows still index its accounting.
//
// Premature requests (the number this server exists to count). Every limited
// answer states an earliest permitted time P (its wait signal, below) and
// leaves at a time S (decision time + latency). A request from a client that
// arrives at A is judged by the most recent limited answer that client must
// already have had:
//   - the latest one sent to it at least `grace` before A (younger answers may
//     still be in flight: a request sent before the client could read them is
//     not disobedient; `--grace`, default 50 ms), or, if it was sent later,
//   - the last one sent on the request's own connection (HTTP/1.1 answers in
//     order, so the client had read it).
// The request is premature when A is strictly earlier than that answer's P.
// With grace 0 this is simply "the last limited answer sent to the client".
// P per style, from the answer's own wait signal:
//   draft11, draft-legacy, retry-after-seconds: S' + T, the delta-seconds T
//     counted from the decision time S' (<= the time the client received it);
//   draft12: the same, with T its RateLimit `w` (it sends no Retry-After);
//   malformed: the same, from its valid RateLimit field (the garbage
//     Retry-After tells nothing, and a client must fall back, not retry now);
//   retry-after-date: the IMF-fixdate sent; github: x-ratelimit-reset (epoch);
//   openai: S' + retry-after-ms (the time until one whole request is back
//     in the bucket, in whole ms), not its reset-requests (a full refill);
//   none: no signal, so nothing is ever premature.
// Every stated wait is rounded up (whole seconds or ms), never down, so a
// client that obeys it always arrives at or after the real window end.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <arpa/inet.h>

#include "abide/clock.h"
#include "abide/http_date.h"

namespace abide::mock {

using namespace std::chrono_literals;

// How the server words its quota and its "wait" signal.
enum class Style : std::uint8_t {
  kDraft11,            // RateLimit-Policy / RateLimit, IETF draft -08 to -11; Retry-After on limit
  kDraftLegacy,        // RateLimit-Limit/-Remaining/-Reset + RateLimit-Policy (ietf-06); Retry-After
  kGithub,             // x-ratelimit-limit/-remaining/-used/-reset (epoch)/-resource
  kOpenai,             // x-ratelimit-{limit,remaining,reset}-requests (reset: to a full refill, a Go
                       // duration) over a refilling bucket; retry-after-ms on limit
  kRetryAfterSeconds,  // only Retry-After: delay-seconds, on the limited answer
  kRetryAfterDate,     // only Retry-After: IMF-fixdate, on the limited answer
  kMalformed,          // draft11 fields, and a garbage Retry-After on the limited answer
  kNone,               // the limited status, no hint at all
  kDraft12,            // RateLimit-Policy / RateLimit / RateLimit-Partition, provisional draft -12 (a, w, c);
                       // no Retry-After: `w` with a=0 is the wait signal
};

inline constexpr std::array<std::pair<Style, std::string_view>, 9> kStyleNames{{
    {Style::kDraft11, "draft11"},
    {Style::kDraftLegacy, "draft-legacy"},
    {Style::kGithub, "github"},
    {Style::kOpenai, "openai"},
    {Style::kRetryAfterSeconds, "retry-after-seconds"},
    {Style::kRetryAfterDate, "retry-after-date"},
    {Style::kMalformed, "malformed"},
    {Style::kNone, "none"},
    {Style::kDraft12, "draft12"},
}};

// The style's command-line name ("draft11", ...).
inline std::string_view to_string(Style s) noexcept {
  for (const auto& [style, name] : kStyleNames)
    if (style == s) return name;
  return "?";
}

// The style with that command-line name, if any.
inline std::optional<Style> parse_style(std::string_view name) noexcept {
  for (const auto& [style, n] : kStyleNames)
    if (n == name) return style;
  return std::nullopt;
}

// Where fixed windows start.
enum class Align : std::uint8_t {
  kFirstRequest,  // at the first API request after start or /__reset
  kEpoch,         // at Unix-time multiples of the window
};

// The Retry-After values the malformed style rotates through. Each is garbage
// that a reader may be tempted to take as "now" (or a date in the past); none
// is valid even in abide's robust mode.
inline constexpr std::array<std::string_view, 7> kMalformedRetryAfter{
    "soon", "-1", "", "NaN", "1e3", "0x10", "Thu, 31 Feb 2000 25:61:61 GMT"};

// Everything that decides what the limiter answers.
struct LimiterOptions {
  Style style = Style::kDraft11;
  std::uint32_t limit = 10;            // accepted requests per window (>= 1)
  Duration window = 1s;                // window length (1 ms to 1 day)
  Align align = Align::kFirstRequest;
  int limited_status = 429;            // 429, 503 or 403
  double fail_rate = 0.0;              // probability of a random 503, in [0, 1]
  std::uint64_t seed = 1;              // seeds the fail-rate draws
  Duration grace = 50ms;               // in-flight allowance for premature counting
  Duration latency = 0ms;              // added before each API answer leaves (by the server)
};

// Why the options cannot be used, or "" when they can.
inline std::string validate(const LimiterOptions& o) {
  if (o.limit < 1) return "--limit must be at least 1";
  if (o.window < 1ms || o.window > 24h) return "--window must be between 0.001 and 86400 seconds";
  if (o.limited_status != 429 && o.limited_status != 503 && o.limited_status != 403)
    return "--limited-status must be 429, 503 or 403";
  if (!(o.fail_rate >= 0.0 && o.fail_rate <= 1.0)) return "--fail-rate must be between 0 and 1";
  if (o.grace < 0ms || o.grace > 1h) return "--grace must be between 0 and 3600000 ms";
  if (o.latency < 0ms || o.latency > 1min) return "--latency must be between 0 and 60000 ms";
  return {};
}

// True for an IPv4 loopback address (127.0.0.0/8, dotted quad) or "localhost".
// The mock server binds nothing else.
inline bool is_loopback_address(const std::string& host) {
  if (host == "localhost") return true;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) != 1) return false;
  return (ntohl(a.s_addr) >> 24) == 127;
}

// d rounded up to whole seconds (0 for d <= 0).
inline std::int64_t ceil_seconds(Duration d) noexcept {
  if (d <= Duration::zero()) return 0;
  return std::chrono::ceil<std::chrono::seconds>(d).count();
}

// t as Unix seconds rounded up (an instant never stated earlier than it is).
inline std::int64_t unix_ceil(WallTime t) noexcept {
  return std::chrono::ceil<std::chrono::seconds>(t.time_since_epoch()).count();
}

// t as fractional Unix seconds, for JSON.
inline double unix_seconds(WallTime t) noexcept { return to_seconds(t.time_since_epoch()); }

// d (rounded up to whole milliseconds) as Go's time.Duration.String() writes
// it: "12ms", "1s", "1.5s", "6m0s", "1h0m0.25s". 0 gives "0s".
inline std::string go_duration(Duration d) {
  const std::int64_t ms = d <= Duration::zero() ? 0 : std::chrono::ceil<std::chrono::milliseconds>(d).count();
  if (ms == 0) return "0s";
  if (ms < 1000) return std::to_string(ms) + "ms";
  std::string out;
  const std::int64_t h = ms / 3'600'000;
  const std::int64_t m = ms / 60'000 % 60;
  const std::int64_t s = ms / 1000 % 60;
  const std::int64_t frac = ms % 1000;
  if (h > 0) out += std::to_string(h) + "h";
  if (h > 0 || m > 0) out += std::to_string(m) + "m";
  out += std::to_string(s);
  if (frac > 0) {
    std::string f = std::to_string(frac);
    f.insert(0, 3 - f.size(), '0');
    while (f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out + "s";
}

// What became of one API request.
enum class Outcome : std::uint8_t { kAccepted, kLimited, kFailed };

inline std::string_view to_string(Outcome o) noexcept {
  switch (o) {
    case Outcome::kAccepted: return "accepted";
    case Outcome::kLimited: return "limited";
    case Outcome::kFailed: return "failed";
  }
  return "?";
}

// One API request as the limiter sees it.
struct RequestInfo {
  std::string_view method;      // "GET", ...
  std::string_view path;        // "/items/1"
  std::string_view client;      // X-Client-Id, else the peer address
  std::string_view connection;  // identifies the TCP connection ("addr:port")
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// The limiter's answer to one API request.
struct Answer {
  int status = 200;
  Outcome outcome = Outcome::kAccepted;
  bool premature = false;
  std::int64_t window = 0;  // index of the window it arrived in
  HeaderList headers;       // Date, the style's quota fields, the wait signal
  std::string body;         // small JSON
  std::optional<WallTime> permitted;  // a limited answer's stated earliest permitted time
};

// Counters kept for the totals, each client, and each window.
struct Counts {
  std::uint64_t requests = 0;  // accepted + limited + failed
  std::uint64_t accepted = 0;
  std::uint64_t limited = 0;
  std::uint64_t failed = 0;    // random 503s (--fail-rate)
  std::uint64_t premature = 0;

  void add(Outcome o, bool early) noexcept {
    ++requests;
    if (o == Outcome::kAccepted) ++accepted;
    if (o == Outcome::kLimited) ++limited;
    if (o == Outcome::kFailed) ++failed;
    if (early) ++premature;
  }
  nlohmann::ordered_json json() const {
    return {{"requests", requests}, {"accepted", accepted}, {"limited", limited},
            {"failed", failed},     {"premature", premature}};
  }
};

// Counts per window, dense from the oldest kept window to the newest, bounded:
// beyond `cap` windows the oldest are dropped (and counted as dropped).
class WindowHistory {
 public:
  explicit WindowHistory(std::size_t cap) : cap_(cap) {}

  // The counts of window k (created, with any windows between, as zeros).
  Counts& at(std::int64_t k) {
    if (counts_.empty()) first_ = k;
    if (k < first_) k = first_;  // cannot happen: the limiter's time never goes back
    const auto end = first_ + static_cast<std::int64_t>(counts_.size());
    if (k - end >= static_cast<std::int64_t>(cap_)) {  // a long idle gap: start afresh
      dropped_ += counts_.size();
      counts_.clear();
      first_ = k;
    }
    while (first_ + static_cast<std::int64_t>(counts_.size()) <= k) counts_.emplace_back();
    while (counts_.size() > cap_) {
      counts_.pop_front();
      ++first_;
      ++dropped_;
    }
    return counts_[static_cast<std::size_t>(k - first_)];
  }
  std::int64_t first() const noexcept { return first_; }
  const std::deque<Counts>& counts() const noexcept { return counts_; }
  std::uint64_t dropped() const noexcept { return dropped_; }

 private:
  std::size_t cap_;
  std::int64_t first_ = 0;
  std::deque<Counts> counts_;
  std::uint64_t dropped_ = 0;
};

// The limiter (fixed windows; a refilling bucket for openai) and its accounting. Thread-safe: every public
// member takes one mutex, so a server's threads can share one Limiter.
class Limiter {
  __extension__ using Wide = __int128;

 public:
  static constexpr std::size_t kMaxClients = 1024;             // later ones share "(other)"
  static constexpr std::size_t kMaxClientWindows = 1024;       // per client
  static constexpr std::size_t kMaxWindows = 65536;            // in the totals
  static constexpr std::size_t kMaxConnectionsPerClient = 256; // answers kept per connection
  static constexpr std::size_t kMaxInFlight = 4096;            // answers younger than grace
  static constexpr std::size_t kMaxClientIdLength = 128;
  static constexpr std::size_t kMaxRecordedPath = 256;

  // `clock` must outlive the limiter. The options must pass validate().
  Limiter(LimiterOptions opts, const WallClock& clock) : opts_(opts), clock_(clock), rng_(opts.seed) {}

  const LimiterOptions& options() const noexcept { return opts_; }

  // Writes one JSON line per API request (and one per reset) to `out`, which
  // must outlive the limiter, or stops when `out` is null.
  void set_record(std::ostream* out) {
    std::lock_guard lock(mu_);
    record_ = out;
  }

  // Flushes the record stream, if any.
  void flush_record() {
    std::lock_guard lock(mu_);
    if (record_ != nullptr) record_->flush();
  }

  // Decides one API request: counts it, and returns status, headers and body.
  Answer handle(const RequestInfo& req) {
    std::lock_guard lock(mu_);
    const WallTime now = advance_time();
    if (!anchor_) anchor_ = opts_.align == Align::kEpoch ? floor_to_window(now) : now;
    const std::int64_t k = (now - *anchor_) / opts_.window;
    if (k != window_) {
      window_ = k;
      used_ = 0;
    }
    const WallTime window_end = *anchor_ + opts_.window * (k + 1);

    const std::string id = client_key(req.client);
    Client& client = clients_.try_emplace(id, now).first->second;
    client.last_seen = now;
    const bool early = is_premature(client, req.connection, now);

    Answer a;
    a.window = k;
    a.premature = early;
    const bool fail = draw() < opts_.fail_rate;
    if (fail) {
      a.outcome = Outcome::kFailed;
      a.status = 503;
    } else if (opts_.style == Style::kOpenai ? bucket_take(now) : used_ < opts_.limit) {
      ++used_;
      a.outcome = Outcome::kAccepted;
      a.status = 200;
    } else {
      a.outcome = Outcome::kLimited;
      a.status = opts_.limited_status;
    }

    Context ctx{now, window_end, 0, used_};
    if (opts_.style == Style::kOpenai) {
      bucket_refill(now);  // after a take, a no-op; a failed answer skipped the take
      ctx.remaining = bucket_available();
      ctx.until_full = bucket_until_full();
      ctx.until_next = bucket_until_next();
    } else {
      ctx.remaining = opts_.limit - used_;
    }
    a.headers.emplace_back("Date", format_imf_fixdate(now));
    quota_headers(ctx, a.outcome == Outcome::kAccepted, a.headers);
    if (a.outcome == Outcome::kLimited) {
      a.permitted = wait_signal(ctx, a.headers);
      if (a.permitted) remember_limited(client, req.connection, now, *a.permitted);
    }
    a.body = body(a, req, id);

    totals_.add(a.outcome, early);
    windows_.at(k).add(a.outcome, early);
    client.totals.add(a.outcome, early);
    client.windows.at(k).add(a.outcome, early);
    record(now, req, id, a);
    return a;
  }

  // Forgets every count, client and window; the next request starts window 0;
  // the fail-rate draws start again from the seed.
  void reset() {
    std::lock_guard lock(mu_);
    const WallTime now = advance_time();
    anchor_.reset();
    window_ = -1;
    used_ = 0;
    debt_ = 0;
    debt_at_ = now;
    totals_ = {};
    windows_ = WindowHistory{kMaxWindows};
    clients_.clear();
    rng_.seed(opts_.seed);
    malformed_next_ = 0;
    if (record_ != nullptr) {
      nlohmann::ordered_json line{{"t", unix_seconds(now)}, {"event", "reset"}};
      *record_ << line.dump() << '\n';
      record_->flush();
    }
  }

  // The totals alone.
  Counts totals() const {
    std::lock_guard lock(mu_);
    return totals_;
  }

  // Everything, as the /__stats JSON (see the command's help for the shape).
  nlohmann::ordered_json stats() const {
    std::lock_guard lock(mu_);
    const WallTime now = std::max(clock_.now(), last_now_);
    nlohmann::ordered_json j;
    j["server"] = {
        {"style", to_string(opts_.style)},
        {"limit", opts_.limit},
        {"window_s", to_seconds(opts_.window)},
        {"align", opts_.align == Align::kEpoch ? "epoch" : "first"},
        {"limited_status", opts_.limited_status},
        {"latency_ms", std::chrono::duration<double, std::milli>(opts_.latency).count()},
        {"fail_rate", opts_.fail_rate},
        {"seed", opts_.seed},
        {"grace_ms", std::chrono::duration<double, std::milli>(opts_.grace).count()},
        {"now_unix", unix_seconds(now)},
        {"anchor_unix", anchor_ ? nlohmann::ordered_json(unix_seconds(*anchor_)) : nlohmann::ordered_json()},
        {"current_window", anchor_ ? nlohmann::ordered_json((now - *anchor_) / opts_.window)
                                   : nlohmann::ordered_json()},
    };
    j["totals"] = totals_.json();
    j["windows"] = windows_json(windows_);
    j["windows_dropped"] = windows_.dropped();
    nlohmann::ordered_json clients = nlohmann::ordered_json::object();
    for (const auto& [id, c] : clients_) {
      nlohmann::ordered_json cj = c.totals.json();
      cj["first_unix"] = unix_seconds(c.first_seen);
      cj["last_unix"] = unix_seconds(c.last_seen);
      cj["not_before_unix"] =
          c.last ? nlohmann::ordered_json(unix_seconds(c.last->permitted)) : nlohmann::ordered_json();
      cj["windows"] = windows_json(c.windows);
      clients[id] = std::move(cj);
    }
    j["clients"] = std::move(clients);
    return j;
  }

 private:
  // A limited answer, as the premature rule needs it.
  struct Told {
    WallTime sent;       // S: decision time + latency
    WallTime permitted;  // P: the earliest permitted time it stated
  };
  struct Client {
    explicit Client(WallTime t) : first_seen(t), last_seen(t) {}
    Counts totals;
    WindowHistory windows{kMaxClientWindows};
    std::deque<Told> in_flight;       // answers younger than grace, oldest first
    std::optional<Told> known;        // the latest answer at least grace old
    std::map<std::string, Told, std::less<>> by_connection;  // the last answer on each connection
    std::optional<Told> last;         // the last answer sent (for /__stats)
    WallTime first_seen;
    WallTime last_seen;
  };
  // What the style's fields describe at the moment of an answer.
  struct Context {
    WallTime now;
    WallTime window_end;
    std::uint32_t remaining;  // after this request
    std::uint32_t used;       // accepted in this window, this request included
    // The openai style's bucket, after this request:
    Duration until_full{};    // until it is full again
    Duration until_next{};    // until one whole request is in it (0 when one is)
  };

  WallTime advance_time() {
    last_now_ = std::max(clock_.now(), last_now_);
    return last_now_;
  }

  WallTime floor_to_window(WallTime t) const {
    const auto since = t.time_since_epoch();
    return WallTime{since - since % opts_.window};
  }

  // A uniform draw in [0, 1), from the seeded generator: the same seed and the
  // same order of requests give the same failures on every platform.
  double draw() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

  std::string client_key(std::string_view client) {
    std::string id(client.substr(0, kMaxClientIdLength));
    if (id.empty()) id = "(unknown)";
    if (clients_.size() >= kMaxClients && clients_.find(id) == clients_.end()) id = "(other)";
    return id;
  }

  // See the rule at the top of this file.
  bool is_premature(Client& c, std::string_view connection, WallTime arrival) {
    while (!c.in_flight.empty() && c.in_flight.front().sent + opts_.grace <= arrival) {
      c.known = c.in_flight.front();
      c.in_flight.pop_front();
    }
    const Told* applies = c.known ? &*c.known : nullptr;
    if (const auto it = c.by_connection.find(connection); it != c.by_connection.end() &&
        it->second.sent <= arrival && (applies == nullptr || it->second.sent > applies->sent))
      applies = &it->second;
    const bool early = applies != nullptr && arrival < applies->permitted;
    // A connection's answer older than the known one can never apply again.
    if (c.known) std::erase_if(c.by_connection, [&](const auto& e) { return e.second.sent < c.known->sent; });
    return early;
  }

  void remember_limited(Client& c, std::string_view connection, WallTime now, WallTime permitted) {
    const Told told{now + opts_.latency, permitted};  // S never decreases: time and latency don't
    c.last = told;
    c.in_flight.push_back(told);
    if (c.in_flight.size() > kMaxInFlight) {
      c.known = c.in_flight.front();
      c.in_flight.pop_front();
    }
    c.by_connection[std::string(connection)] = told;
    if (c.by_connection.size() > kMaxConnectionsPerClient) {
      auto oldest = c.by_connection.begin();
      for (auto it = c.by_connection.begin(); it != c.by_connection.end(); ++it)
        if (it->second.sent < oldest->second.sent) oldest = it;
      c.by_connection.erase(oldest);
    }
  }

  // The openai style's token bucket, kept exact in integers: debt_ is the time
  // until the bucket is full, in units of 1/limit ns, so that one request
  // costs exactly window-in-ns of them whatever limit and window are (128
  // bits: window x limit reaches 1e23). Capacity: limit requests, that is
  // window x limit units.
  Wide window_ns() const { return static_cast<Wide>(opts_.window.count()); }
  Wide capacity() const { return window_ns() * opts_.limit; }

  void bucket_refill(WallTime now) {
    const Wide refilled = static_cast<Wide>((now - debt_at_).count()) * opts_.limit;  // time never goes back
    debt_ = refilled >= debt_ ? 0 : debt_ - refilled;
    debt_at_ = now;
  }

  // Takes one request if a whole one is there.
  bool bucket_take(WallTime now) {
    bucket_refill(now);
    if (debt_ > capacity() - window_ns()) return false;
    debt_ += window_ns();
    return true;
  }

  std::uint32_t bucket_available() const {
    return static_cast<std::uint32_t>((capacity() - debt_) / window_ns());
  }

  // units / limit as a Duration, rounded up to the ns (never states a refill earlier than it is).
  Duration bucket_time(Wide units) const {
    if (units <= 0) return Duration::zero();
    const Wide limit = opts_.limit;
    return Duration{static_cast<Duration::rep>((units + limit - 1) / limit)};  // <= window
  }
  Duration bucket_until_full() const { return bucket_time(debt_); }
  Duration bucket_until_next() const { return bucket_time(debt_ - (capacity() - window_ns())); }

  std::int64_t whole_window_seconds() const {
    return std::max<std::int64_t>(1, ceil_seconds(opts_.window));
  }

  void draft11_fields(const Context& ctx, HeaderList& h) const {
    h.emplace_back("RateLimit-Policy", "\"default\";q=" + std::to_string(opts_.limit) +
                                           ";w=" + std::to_string(whole_window_seconds()));
    h.emplace_back("RateLimit", "\"default\";r=" + std::to_string(ctx.remaining) +
                                    ";t=" + std::to_string(ceil_seconds(ctx.window_end - ctx.now)));
  }

  // The provisional draft-12 names: `a` available, `w` effective window, `c`
  // the cost of this request (1 when accepted; 0 when limited, since limited
  // requests use no quota here). The partition line declares no dimension:
  // the one quota is shared by every client.
  void draft12_fields(const Context& ctx, bool accepted, HeaderList& h) const {
    h.emplace_back("RateLimit-Policy", "\"default\";q=" + std::to_string(opts_.limit) +
                                           ";w=" + std::to_string(whole_window_seconds()));
    h.emplace_back("RateLimit", "\"default\";a=" + std::to_string(ctx.remaining) +
                                    ";w=" + std::to_string(ceil_seconds(ctx.window_end - ctx.now)) +
                                    ";c=" + (accepted ? "1" : "0"));
    h.emplace_back("RateLimit-Partition", "\"default\"");
  }

  // The style's quota fields, sent on every answer; `accepted`: this request used quota.
  void quota_headers(const Context& ctx, bool accepted, HeaderList& h) const {
    const std::int64_t t = ceil_seconds(ctx.window_end - ctx.now);
    switch (opts_.style) {
      case Style::kDraft11:
      case Style::kMalformed:
        draft11_fields(ctx, h);
        break;
      case Style::kDraft12:
        draft12_fields(ctx, accepted, h);
        break;
      case Style::kDraftLegacy:
        h.emplace_back("RateLimit-Limit", std::to_string(opts_.limit));
        h.emplace_back("RateLimit-Remaining", std::to_string(ctx.remaining));
        h.emplace_back("RateLimit-Reset", std::to_string(t));
        h.emplace_back("RateLimit-Policy",
                       std::to_string(opts_.limit) + ";w=" + std::to_string(whole_window_seconds()));
        break;
      case Style::kGithub:
        h.emplace_back("x-ratelimit-limit", std::to_string(opts_.limit));
        h.emplace_back("x-ratelimit-remaining", std::to_string(ctx.remaining));
        h.emplace_back("x-ratelimit-used", std::to_string(ctx.used));
        h.emplace_back("x-ratelimit-reset", std::to_string(unix_ceil(ctx.window_end)));
        h.emplace_back("x-ratelimit-resource", "core");
        break;
      case Style::kOpenai:
        h.emplace_back("x-ratelimit-limit-requests", std::to_string(opts_.limit));
        h.emplace_back("x-ratelimit-remaining-requests", std::to_string(ctx.remaining));
        h.emplace_back("x-ratelimit-reset-requests", go_duration(ctx.until_full));
        break;
      case Style::kRetryAfterSeconds:
      case Style::kRetryAfterDate:
      case Style::kNone:
        break;
    }
  }

  // Adds the limited answer's wait signal; returns the earliest permitted time
  // it states (none for the none style).
  std::optional<WallTime> wait_signal(const Context& ctx, HeaderList& h) {
    const std::int64_t t = ceil_seconds(ctx.window_end - ctx.now);
    const WallTime after_t = ctx.now + std::chrono::seconds{t};
    const WallTime reset_instant{std::chrono::seconds{unix_ceil(ctx.window_end)}};
    switch (opts_.style) {
      case Style::kDraft11:
      case Style::kDraftLegacy:
      case Style::kRetryAfterSeconds:
        h.emplace_back("Retry-After", std::to_string(t));
        return after_t;
      case Style::kMalformed:
        h.emplace_back("Retry-After", std::string(kMalformedRetryAfter[malformed_next_]));
        malformed_next_ = (malformed_next_ + 1) % kMalformedRetryAfter.size();
        return after_t;  // what its RateLimit field says
      case Style::kRetryAfterDate:
        h.emplace_back("Retry-After", format_imf_fixdate(reset_instant));
        return reset_instant;
      case Style::kDraft12:
        return after_t;  // its RateLimit w, already sent with a=0
      case Style::kGithub:
        return reset_instant;  // x-ratelimit-reset, already sent with remaining 0
      case Style::kOpenai: {
        // Only retry-after-ms: OpenAI's SDKs read it first, and a whole-second
        // Retry-After beside it would be the longer wait, so a client would never
        // show whether it reads retry-after-ms.
        const auto ms = std::chrono::ceil<std::chrono::milliseconds>(ctx.until_next);
        h.emplace_back("retry-after-ms", std::to_string(ms.count()));
        return ctx.now + ms;
      }
      case Style::kNone:
        return std::nullopt;
    }
    return std::nullopt;
  }

  static std::string dump(const nlohmann::ordered_json& j) {
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }

  std::string body(const Answer& a, const RequestInfo& req, const std::string& id) const {
    nlohmann::ordered_json j;
    switch (a.outcome) {
      case Outcome::kAccepted:
        j = {{"ok", true}, {"method", req.method}, {"path", req.path.substr(0, kMaxRecordedPath)},
             {"client", id}, {"window", a.window}};
        break;
      case Outcome::kLimited:
        j = {{"error", "rate_limited"}, {"message", "API rate limit exceeded; see the response headers"}};
        if (opts_.style == Style::kGithub) j["documentation_url"] = "https://docs.github.com/rest/rate-limit";
        break;
      case Outcome::kFailed:
        j = {{"error", "unavailable"}, {"message", "simulated failure (--fail-rate)"}};
        break;
    }
    return dump(j) + "\n";
  }

  void record(WallTime now, const RequestInfo& req, const std::string& id, const Answer& a) {
    if (record_ == nullptr) return;
    nlohmann::ordered_json line{{"t", unix_seconds(now)},
                                {"client", id},
                                {"method", req.method},
                                {"path", req.path.substr(0, kMaxRecordedPath)},
                                {"status", a.status},
                                {"outcome", to_string(a.outcome)},
                                {"premature", a.premature},
                                {"window", a.window}};
    // The record carries P itself, so that a reader never re-derives a style's rule.
    if (a.permitted) line["permitted"] = unix_seconds(*a.permitted);
    *record_ << dump(line) << '\n';
  }

  nlohmann::ordered_json windows_json(const WindowHistory& w) const {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    std::int64_t k = w.first();
    for (const Counts& c : w.counts()) {
      nlohmann::ordered_json cj{{"index", k}};
      if (anchor_) cj["start_unix"] = unix_seconds(*anchor_ + opts_.window * k);
      cj.update(c.json());
      out.push_back(std::move(cj));
      ++k;
    }
    return out;
  }

  const LimiterOptions opts_;
  const WallClock& clock_;
  mutable std::mutex mu_;
  WallTime last_now_{};
  std::optional<WallTime> anchor_;
  std::int64_t window_ = -1;
  std::uint32_t used_ = 0;
  Wide debt_ = 0;          // the openai style's bucket (see bucket_refill); starts full
  WallTime debt_at_{};
  Counts totals_;
  WindowHistory windows_{kMaxWindows};
  std::map<std::string, Client, std::less<>> clients_;
  std::mt19937_64 rng_;
  std::size_t malformed_next_ = 0;
  std::ostream* record_ = nullptr;
};

}  // namespace abide::mock
