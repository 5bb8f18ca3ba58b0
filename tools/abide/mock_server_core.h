// The logic of `abide mock-server`, without HTTP: header styles, fixed-window
// quota (a refilling bucket for openai), per-client accounting (accepted, limited, failed, premature), the
// optional request record, and the /__stats JSON. Apart from the HTTP server
// so that a test can drive it with a manual clock (mock_server_core.cpp holds
// the implementation); mock_server.h puts it behind cpp-httplib.
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

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <iosfwd>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "abide/clock.h"

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
std::string_view to_string(Style s) noexcept;

// The style with that command-line name, if any.
std::optional<Style> parse_style(std::string_view name) noexcept;

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
  std::uint32_t limit = 10;  // accepted requests per window (>= 1)
  Duration window = 1s;      // window length (1 ms to 1 day)
  Align align = Align::kFirstRequest;
  int limited_status = 429;  // 429, 503 or 403
  double fail_rate = 0.0;    // probability of a random 503, in [0, 1]
  std::uint64_t seed = 1;    // seeds the fail-rate draws
  Duration grace = 50ms;     // in-flight allowance for premature counting
  Duration latency = 0ms;    // added before each API answer leaves (by the server)
};

// Why the options cannot be used, or "" when they can.
std::string validate(const LimiterOptions& o);

// True for an IPv4 loopback address (127.0.0.0/8, dotted quad) or "localhost".
// The mock server binds nothing else.
bool is_loopback_address(const std::string& host);

// t as fractional Unix seconds, for JSON.
double unix_seconds(WallTime t) noexcept;

// d (rounded up to whole milliseconds) as Go's time.Duration.String() writes
// it: "12ms", "1s", "1.5s", "6m0s", "1h0m0.25s". 0 gives "0s".
std::string go_duration(Duration d);

// What became of one API request.
enum class Outcome : std::uint8_t { kAccepted, kLimited, kFailed };

std::string_view to_string(Outcome o) noexcept;

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
  std::int64_t window = 0;            // index of the window it arrived in
  HeaderList headers;                 // Date, the style's quota fields, the wait signal
  std::string body;                   // small JSON
  std::optional<WallTime> permitted;  // a limited answer's stated earliest permitted time
};

// Counters kept for the totals, each client, and each window.
struct Counts {
  std::uint64_t requests = 0;  // accepted + limited + failed
  std::uint64_t accepted = 0;
  std::uint64_t limited = 0;
  std::uint64_t failed = 0;  // random 503s (--fail-rate)
  std::uint64_t premature = 0;

  void add(Outcome o, bool early) noexcept {
    ++requests;
    if (o == Outcome::kAccepted) ++accepted;
    if (o == Outcome::kLimited) ++limited;
    if (o == Outcome::kFailed) ++failed;
    if (early) ++premature;
  }
  nlohmann::ordered_json json() const;
};

// Counts per window, dense from the oldest kept window to the newest, bounded:
// beyond `cap` windows the oldest are dropped (and counted as dropped).
class WindowHistory {
 public:
  explicit WindowHistory(std::size_t cap) : cap_(cap) {}

  // The counts of window k (created, with any windows between, as zeros).
  Counts& at(std::int64_t k);
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
  static constexpr std::size_t kMaxClients = 1024;              // later ones share "(other)"
  static constexpr std::size_t kMaxClientWindows = 1024;        // per client
  static constexpr std::size_t kMaxWindows = 65536;             // in the totals
  static constexpr std::size_t kMaxConnectionsPerClient = 256;  // answers kept per connection
  static constexpr std::size_t kMaxInFlight = 4096;             // answers younger than grace
  static constexpr std::size_t kMaxClientIdLength = 128;
  static constexpr std::size_t kMaxRecordedPath = 256;

  // `clock` must outlive the limiter. The options must pass validate().
  Limiter(LimiterOptions opts, const WallClock& clock) : opts_(opts), clock_(clock), rng_(opts.seed) {}

  const LimiterOptions& options() const noexcept { return opts_; }

  // Writes one JSON line per API request (and one per reset) to `out`, which
  // must outlive the limiter, or stops when `out` is null.
  void set_record(std::ostream* out);

  // Flushes the record stream, if any.
  void flush_record();

  // Decides one API request: counts it, and returns status, headers and body.
  Answer handle(const RequestInfo& req);

  // Forgets every count, client and window; the next request starts window 0;
  // the fail-rate draws start again from the seed.
  void reset();

  // The totals alone.
  Counts totals() const;

  // Everything, as the /__stats JSON (see the command's help for the shape).
  nlohmann::ordered_json stats() const;

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
    std::deque<Told> in_flight;                              // answers younger than grace, oldest first
    std::optional<Told> known;                               // the latest answer at least grace old
    std::map<std::string, Told, std::less<>> by_connection;  // the last answer on each connection
    std::optional<Told> last;                                // the last answer sent (for /__stats)
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
    Duration until_full{};  // until it is full again
    Duration until_next{};  // until one whole request is in it (0 when one is)
  };

  WallTime advance_time();

  WallTime floor_to_window(WallTime t) const;

  // A uniform draw in [0, 1), from the seeded generator: the same seed and the
  // same order of requests give the same failures on every platform.
  double draw() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

  std::string client_key(std::string_view client);

  // See the rule at the top of this file.
  bool is_premature(Client& c, std::string_view connection, WallTime arrival);

  void remember_limited(Client& c, std::string_view connection, WallTime now, WallTime permitted);

  // The openai style's token bucket, kept exact in integers: debt_ is the time
  // until the bucket is full, in units of 1/limit ns, so that one request
  // costs exactly window-in-ns of them whatever limit and window are (128
  // bits: window x limit reaches 1e23). Capacity: limit requests, that is
  // window x limit units.
  Wide window_ns() const { return static_cast<Wide>(opts_.window.count()); }
  Wide capacity() const { return window_ns() * opts_.limit; }

  void bucket_refill(WallTime now);

  // Takes one request if a whole one is there.
  bool bucket_take(WallTime now);

  std::uint32_t bucket_available() const;

  // units / limit as a Duration, rounded up to the ns (never states a refill earlier than it is).
  Duration bucket_time(Wide units) const;
  Duration bucket_until_full() const { return bucket_time(debt_); }
  Duration bucket_until_next() const { return bucket_time(debt_ - (capacity() - window_ns())); }

  std::int64_t whole_window_seconds() const;

  void draft11_fields(const Context& ctx, HeaderList& h) const;

  // The provisional draft-12 names: `a` available, `w` effective window, `c`
  // the cost of this request (1 when accepted; 0 when limited, since limited
  // requests use no quota here). The partition line declares no dimension:
  // the one quota is shared by every client.
  void draft12_fields(const Context& ctx, bool accepted, HeaderList& h) const;

  // The style's quota fields, sent on every answer; `accepted`: this request used quota.
  void quota_headers(const Context& ctx, bool accepted, HeaderList& h) const;

  // Adds the limited answer's wait signal; returns the earliest permitted time
  // it states (none for the none style).
  std::optional<WallTime> wait_signal(const Context& ctx, HeaderList& h);

  static std::string dump(const nlohmann::ordered_json& j);

  std::string body(const Answer& a, const RequestInfo& req, const std::string& id) const;

  void record(WallTime now, const RequestInfo& req, const std::string& id, const Answer& a);

  nlohmann::ordered_json windows_json(const WindowHistory& w) const;

  const LimiterOptions opts_;
  const WallClock& clock_;
  mutable std::mutex mu_;
  WallTime last_now_{};
  std::optional<WallTime> anchor_;
  std::int64_t window_ = -1;
  std::uint32_t used_ = 0;
  Wide debt_ = 0;  // the openai style's bucket (see bucket_refill); starts full
  WallTime debt_at_{};
  Counts totals_;
  WindowHistory windows_{kMaxWindows};
  std::map<std::string, Client, std::less<>> clients_;
  std::mt19937_64 rng_;
  std::size_t malformed_next_ = 0;
  std::ostream* record_ = nullptr;
};

}  // namespace abide::mock
