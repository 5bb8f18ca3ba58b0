// The logic of `abide mock-server`, without HTTP: header styles, fixed-window
// quota (refilling buckets for the openai and token styles, see
// mock_bucket.h and mock_token_quota.h), per-client accounting (accepted,
// limited, failed, premature), the optional request record, and the /__stats
// JSON. Apart from the HTTP server
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
// The token styles (openai-tokens, anthropic-tokens) read the request body
// and keep token buckets beside the requests bucket (mock_token_quota.h
// says how). A body they cannot read is answered 400 (413 above 1 MiB) in
// the vendor's error shape, uses no quota, and is counted apart ("invalid"),
// not as a request. The gemini style is a fixed window that sends no quota
// field at all; its limited answer's body states the wait (RetryInfo).
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
//   openai-tokens: S' + retry-after-ms (until every bucket holds what this
//     request needs); anthropic-tokens: S' + retry-after (the same, in whole
//     seconds); a request too large for a bucket states no wait, and no P;
//   gemini: S' + the retryDelay of its body (whole seconds to the window's end);
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
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "abide/clock.h"
#include "mock_bucket.h"
#include "mutex.h"

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
  kOpenaiTokens,       // openai's requests bucket and a tokens bucket charged from the body;
                       // x-ratelimit-*-{requests,tokens}; retry-after-ms and retry-after on limit
  kAnthropicTokens,    // requests, input-tokens and output-tokens buckets charged from the body;
                       // anthropic-ratelimit-*; retry-after on limit
  kGemini,             // a fixed window and no quota field; a 429 RESOURCE_EXHAUSTED body whose
                       // RetryInfo retryDelay is the wait signal
};

inline constexpr std::array<std::pair<Style, std::string_view>, 12> kStyleNames{{
    {Style::kDraft11, "draft11"},
    {Style::kDraftLegacy, "draft-legacy"},
    {Style::kGithub, "github"},
    {Style::kOpenai, "openai"},
    {Style::kRetryAfterSeconds, "retry-after-seconds"},
    {Style::kRetryAfterDate, "retry-after-date"},
    {Style::kMalformed, "malformed"},
    {Style::kNone, "none"},
    {Style::kDraft12, "draft12"},
    {Style::kOpenaiTokens, "openai-tokens"},
    {Style::kAnthropicTokens, "anthropic-tokens"},
    {Style::kGemini, "gemini"},
}};

// True for the styles that read the request body and count its tokens.
constexpr bool is_token_style(Style s) noexcept { return s == Style::kOpenaiTokens || s == Style::kAnthropicTokens; }

// True for the styles that answer in a vendor's own error shape, always 429.
constexpr bool is_vendor_style(Style s) noexcept { return is_token_style(s) || s == Style::kGemini; }

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
  // The token styles' buckets, per window (1 to kMaxTokenLimit): openai-tokens'
  // tokens and anthropic-tokens' input tokens; anthropic-tokens' output tokens.
  std::uint64_t token_limit = 40000;
  std::uint64_t output_token_limit = 8000;
};

inline constexpr std::uint64_t kMaxTokenLimit = 1'000'000'000'000;

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

// What became of one API request. kInvalid: a token style could not read its
// body (400, 413); it uses no quota and is counted apart from the requests.
enum class Outcome : std::uint8_t { kAccepted, kLimited, kFailed, kInvalid };

std::string_view to_string(Outcome o) noexcept;

// One API request as the limiter sees it.
struct RequestInfo {
  std::string_view method;      // "GET", ...
  std::string_view path;        // "/items/1"
  std::string_view client;      // X-Client-Id, else the peer address
  std::string_view connection;  // identifies the TCP connection ("addr:port")
  std::string_view body = {};   // read by the token styles only (at most kMaxBodyBytes)
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// The limiter's answer to one API request.
struct Answer {
  int status = 200;
  Outcome outcome = Outcome::kAccepted;
  bool premature = false;
  std::int64_t window = 0;  // index of the window it arrived in
  HeaderList headers;       // Date, the style's quota fields, the wait signal
  std::string body;         // small JSON, or server-sent events
  std::string content_type = "application/json";
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
    if (o == Outcome::kInvalid) return;  // not a request that the quota saw
    ++requests;
    if (o == Outcome::kAccepted) ++accepted;
    if (o == Outcome::kLimited) ++limited;
    if (o == Outcome::kFailed) ++failed;
    if (early) ++premature;
  }
  nlohmann::ordered_json json() const;
};

// The token styles' counters, for the totals and each window. Each adds up
// saturating. openai-tokens: admitted = the admission charges, charged = what
// the answers used (prompt + completion, after reconciliation), split into
// input_charged (prompt) and output_charged (completion). anthropic-tokens:
// input_admitted = input_charged (charged at admission), output_admitted =
// max_tokens reserved, output_charged = the output used; admitted and charged
// are their sums.
struct TokenCounts {
  std::uint64_t invalid = 0;  // bodies refused (400, 413)
  std::uint64_t admitted = 0;
  std::uint64_t charged = 0;
  std::uint64_t input_admitted = 0;
  std::uint64_t input_charged = 0;
  std::uint64_t output_admitted = 0;
  std::uint64_t output_charged = 0;

  void add(const TokenCounts& o) noexcept;
  // The style's own keys (see the command's help).
  nlohmann::ordered_json json(Style style) const;
};

// Counters per window, dense from the oldest kept window to the newest,
// bounded: beyond `cap` windows the oldest are dropped (and counted as dropped).
template <class T>
class WindowSeries {
 public:
  explicit WindowSeries(std::size_t cap) : cap_(cap) {}

  // The counters of window k (created, with any windows between, as zeros).
  T& at(std::int64_t k) {
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
  // Window k's counters, or null when it is not kept.
  const T* find(std::int64_t k) const noexcept {
    if (k < first_ || k - first_ >= static_cast<std::int64_t>(counts_.size())) return nullptr;
    return &counts_[static_cast<std::size_t>(k - first_)];
  }
  std::int64_t first() const noexcept { return first_; }
  const std::deque<T>& counts() const noexcept { return counts_; }
  std::uint64_t dropped() const noexcept { return dropped_; }

 private:
  std::size_t cap_;
  std::int64_t first_ = 0;
  std::deque<T> counts_;
  std::uint64_t dropped_ = 0;
};

using WindowHistory = WindowSeries<Counts>;

class TokenQuota;  // mock_token_quota.h

// The limiter (fixed windows; refilling buckets for openai and the token
// styles) and its accounting. Thread-safe: every public member takes one
// mutex, so a server's threads can share one Limiter.
class Limiter {
 public:
  static constexpr std::size_t kMaxClients = 1024;              // later ones share "(other)"
  static constexpr std::size_t kMaxClientWindows = 1024;        // per client
  static constexpr std::size_t kMaxWindows = 65536;             // in the totals
  static constexpr std::size_t kMaxConnectionsPerClient = 256;  // answers kept per connection
  static constexpr std::size_t kMaxInFlight = 4096;             // answers younger than grace
  static constexpr std::size_t kMaxClientIdLength = 128;
  static constexpr std::size_t kMaxRecordedPath = 256;

  // `clock` must outlive the limiter. The options must pass validate().
  Limiter(LimiterOptions opts, const WallClock& clock);
  ~Limiter();
  Limiter(const Limiter&) = delete;
  Limiter& operator=(const Limiter&) = delete;

  const LimiterOptions& options() const noexcept { return opts_; }

  // Writes one JSON line per API request (and one per reset) to `out`, which
  // must outlive the limiter, or stops when `out` is null.
  void set_record(std::ostream* out);

  // Flushes the record stream, if any.
  void flush_record();

  // Decides one API request: counts it, and returns status, headers and body.
  Answer handle(const RequestInfo& req);

  // Forgets every count, client and window; the next request starts window 0;
  // the fail-rate draws start again from the seed; every bucket is full.
  void reset();

  // The totals alone.
  Counts totals() const;

  // The token styles' totals (zeros for the other styles).
  TokenCounts token_totals() const;

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

  WallTime advance_time() ABIDE_REQUIRES(mu_);

  WallTime floor_to_window(WallTime t) const;

  // Anchors the windows if need be, moves to the window `now` is in, and
  // returns its index.
  std::int64_t enter_window(WallTime now) ABIDE_REQUIRES(mu_);

  // A uniform draw in [0, 1), from the seeded generator: the same seed and the
  // same order of requests give the same failures on every platform.
  double draw() ABIDE_REQUIRES(mu_) { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

  std::string client_key(std::string_view client) ABIDE_REQUIRES(mu_);

  // See the rule at the top of this file.
  bool is_premature(Client& c, std::string_view connection, WallTime arrival);

  void remember_limited(Client& c, std::string_view connection, WallTime now, WallTime permitted);

  // The answer to a body that a token style could not read.
  Answer refuse_body(WallTime now, std::int64_t k, const RequestInfo& req, int status, const std::string& message)
      ABIDE_REQUIRES(mu_);

  // Decides a request of a style without tokens: the window's count, or the
  // openai style's requests bucket. a.outcome is kFailed when already failed.
  void decide_requests(WallTime now, const RequestInfo& req, const std::string& id, Answer& a) ABIDE_REQUIRES(mu_);

  // Adds the answer to every count.
  void account(std::int64_t k, Client& client, const Answer& a, const TokenCounts& tokens) ABIDE_REQUIRES(mu_);

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
  std::optional<WallTime> wait_signal(const Context& ctx, HeaderList& h) ABIDE_REQUIRES(mu_);

  static std::string dump(const nlohmann::ordered_json& j);

  std::string body(const Answer& a, const Context& ctx, const RequestInfo& req, const std::string& id) const;

  void record(WallTime now, const RequestInfo& req, const std::string& id, const Answer& a) ABIDE_REQUIRES(mu_);

  // A window's or the totals' counts as JSON; with `tokens` (the token
  // styles), also "invalid" and "tokens".
  nlohmann::ordered_json counts_json(const Counts& c, const TokenCounts* tokens) const;

  nlohmann::ordered_json windows_json(const WindowHistory& w, const WindowSeries<TokenCounts>* tokens) const
      ABIDE_REQUIRES(mu_);

  nlohmann::ordered_json server_json(WallTime now) const ABIDE_REQUIRES(mu_);

  const LimiterOptions opts_;
  const WallClock& clock_;
  mutable detail::Mutex mu_;
  WallTime last_now_ ABIDE_GUARDED_BY(mu_){};
  std::optional<WallTime> anchor_ ABIDE_GUARDED_BY(mu_);
  std::int64_t window_ ABIDE_GUARDED_BY(mu_) = -1;
  std::uint32_t used_ ABIDE_GUARDED_BY(mu_) = 0;
  Bucket requests_ ABIDE_GUARDED_BY(mu_);                     // the openai style's bucket; starts full
  std::unique_ptr<TokenQuota> tokens_ ABIDE_GUARDED_BY(mu_);  // the token styles' buckets, else null
  Counts totals_ ABIDE_GUARDED_BY(mu_);
  WindowHistory windows_ ABIDE_GUARDED_BY(mu_){kMaxWindows};
  TokenCounts token_totals_ ABIDE_GUARDED_BY(mu_);
  WindowSeries<TokenCounts> token_windows_ ABIDE_GUARDED_BY(mu_){kMaxWindows};
  std::map<std::string, Client, std::less<>> clients_ ABIDE_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABIDE_GUARDED_BY(mu_);
  std::size_t malformed_next_ ABIDE_GUARDED_BY(mu_) = 0;
  std::ostream* record_ ABIDE_GUARDED_BY(mu_) = nullptr;
};

}  // namespace abide::mock
