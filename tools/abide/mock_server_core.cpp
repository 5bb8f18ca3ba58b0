#include "mock_server_core.h"

#include <arpa/inet.h>

#include <algorithm>
#include <ostream>

#include "abide/http_date.h"

namespace abide::mock {
namespace {

// d rounded up to whole seconds (0 for d <= 0).
std::int64_t ceil_seconds(Duration d) noexcept {
  if (d <= Duration::zero()) return 0;
  return std::chrono::ceil<std::chrono::seconds>(d).count();
}

// t as Unix seconds rounded up (an instant never stated earlier than it is).
std::int64_t unix_ceil(WallTime t) noexcept {
  return std::chrono::ceil<std::chrono::seconds>(t.time_since_epoch()).count();
}

}  // namespace

std::string_view to_string(Style s) noexcept {
  for (const auto& [style, name] : kStyleNames)
    if (style == s) return name;
  return "?";
}

std::optional<Style> parse_style(std::string_view name) noexcept {
  for (const auto& [style, n] : kStyleNames)
    if (n == name) return style;
  return std::nullopt;
}

std::string validate(const LimiterOptions& o) {
  if (o.limit < 1) return "--limit must be at least 1";
  if (o.window < 1ms || o.window > 24h) return "--window must be between 0.001 and 86400 seconds";
  if (o.limited_status != 429 && o.limited_status != 503 && o.limited_status != 403)
    return "--limited-status must be 429, 503 or 403";
  if (!(o.fail_rate >= 0.0 && o.fail_rate <= 1.0)) return "--fail-rate must be between 0 and 1";
  if (o.grace < 0ms || o.grace > 1h) return "--grace must be between 0 and 3600000 ms";
  if (o.latency < 0ms || o.latency > 1min) return "--latency must be between 0 and 60000 ms";
  return {};
}

bool is_loopback_address(const std::string& host) {
  if (host == "localhost") return true;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) != 1) return false;
  return (ntohl(a.s_addr) >> 24) == 127;
}

double unix_seconds(WallTime t) noexcept { return to_seconds(t.time_since_epoch()); }

std::string go_duration(Duration d) {
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

std::string_view to_string(Outcome o) noexcept {
  switch (o) {
    case Outcome::kAccepted: return "accepted";
    case Outcome::kLimited: return "limited";
    case Outcome::kFailed: return "failed";
  }
  return "?";
}

nlohmann::ordered_json Counts::json() const {
  return {{"requests", requests},
          {"accepted", accepted},
          {"limited", limited},
          {"failed", failed},
          {"premature", premature}};
}

Counts& WindowHistory::at(std::int64_t k) {
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

void Limiter::set_record(std::ostream* out) {
  std::lock_guard lock(mu_);
  record_ = out;
}

void Limiter::flush_record() {
  std::lock_guard lock(mu_);
  if (record_ != nullptr) record_->flush();
}

Answer Limiter::handle(const RequestInfo& req) {
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

void Limiter::reset() {
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

Counts Limiter::totals() const {
  std::lock_guard lock(mu_);
  return totals_;
}

nlohmann::ordered_json Limiter::stats() const {
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
      {"current_window", anchor_ ? nlohmann::ordered_json((now - *anchor_) / opts_.window) : nlohmann::ordered_json()},
  };
  j["totals"] = totals_.json();
  j["windows"] = windows_json(windows_);
  j["windows_dropped"] = windows_.dropped();
  nlohmann::ordered_json clients = nlohmann::ordered_json::object();
  for (const auto& [id, c] : clients_) {
    nlohmann::ordered_json cj = c.totals.json();
    cj["first_unix"] = unix_seconds(c.first_seen);
    cj["last_unix"] = unix_seconds(c.last_seen);
    cj["not_before_unix"] = c.last ? nlohmann::ordered_json(unix_seconds(c.last->permitted)) : nlohmann::ordered_json();
    cj["windows"] = windows_json(c.windows);
    clients[id] = std::move(cj);
  }
  j["clients"] = std::move(clients);
  return j;
}

WallTime Limiter::advance_time() {
  last_now_ = std::max(clock_.now(), last_now_);
  return last_now_;
}

WallTime Limiter::floor_to_window(WallTime t) const {
  const auto since = t.time_since_epoch();
  return WallTime{since - since % opts_.window};
}

std::string Limiter::client_key(std::string_view client) {
  std::string id(client.substr(0, kMaxClientIdLength));
  if (id.empty()) id = "(unknown)";
  if (clients_.size() >= kMaxClients && clients_.find(id) == clients_.end()) id = "(other)";
  return id;
}

bool Limiter::is_premature(Client& c, std::string_view connection, WallTime arrival) {
  while (!c.in_flight.empty() && c.in_flight.front().sent + opts_.grace <= arrival) {
    c.known = c.in_flight.front();
    c.in_flight.pop_front();
  }
  const Told* applies = c.known ? &*c.known : nullptr;
  if (const auto it = c.by_connection.find(connection); it != c.by_connection.end() && it->second.sent <= arrival &&
                                                        (applies == nullptr || it->second.sent > applies->sent))
    applies = &it->second;
  const bool early = applies != nullptr && arrival < applies->permitted;
  // A connection's answer older than the known one can never apply again.
  if (c.known) std::erase_if(c.by_connection, [&](const auto& e) { return e.second.sent < c.known->sent; });
  return early;
}

void Limiter::remember_limited(Client& c, std::string_view connection, WallTime now, WallTime permitted) {
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

void Limiter::bucket_refill(WallTime now) {
  const Wide refilled = static_cast<Wide>((now - debt_at_).count()) * opts_.limit;  // time never goes back
  debt_ = refilled >= debt_ ? 0 : debt_ - refilled;
  debt_at_ = now;
}

bool Limiter::bucket_take(WallTime now) {
  bucket_refill(now);
  if (debt_ > capacity() - window_ns()) return false;
  debt_ += window_ns();
  return true;
}

std::uint32_t Limiter::bucket_available() const {
  return static_cast<std::uint32_t>((capacity() - debt_) / window_ns());
}

Duration Limiter::bucket_time(Wide units) const {
  if (units <= 0) return Duration::zero();
  const Wide limit = opts_.limit;
  return Duration{static_cast<Duration::rep>((units + limit - 1) / limit)};  // <= window
}

std::int64_t Limiter::whole_window_seconds() const { return std::max<std::int64_t>(1, ceil_seconds(opts_.window)); }

void Limiter::draft11_fields(const Context& ctx, HeaderList& h) const {
  h.emplace_back("RateLimit-Policy",
                 "\"default\";q=" + std::to_string(opts_.limit) + ";w=" + std::to_string(whole_window_seconds()));
  h.emplace_back("RateLimit", "\"default\";r=" + std::to_string(ctx.remaining) +
                                  ";t=" + std::to_string(ceil_seconds(ctx.window_end - ctx.now)));
}

void Limiter::draft12_fields(const Context& ctx, bool accepted, HeaderList& h) const {
  h.emplace_back("RateLimit-Policy",
                 "\"default\";q=" + std::to_string(opts_.limit) + ";w=" + std::to_string(whole_window_seconds()));
  h.emplace_back("RateLimit", "\"default\";a=" + std::to_string(ctx.remaining) +
                                  ";w=" + std::to_string(ceil_seconds(ctx.window_end - ctx.now)) +
                                  ";c=" + (accepted ? "1" : "0"));
  h.emplace_back("RateLimit-Partition", "\"default\"");
}

void Limiter::quota_headers(const Context& ctx, bool accepted, HeaderList& h) const {
  const std::int64_t t = ceil_seconds(ctx.window_end - ctx.now);
  switch (opts_.style) {
    case Style::kDraft11:
    case Style::kMalformed: draft11_fields(ctx, h); break;
    case Style::kDraft12: draft12_fields(ctx, accepted, h); break;
    case Style::kDraftLegacy:
      h.emplace_back("RateLimit-Limit", std::to_string(opts_.limit));
      h.emplace_back("RateLimit-Remaining", std::to_string(ctx.remaining));
      h.emplace_back("RateLimit-Reset", std::to_string(t));
      h.emplace_back("RateLimit-Policy", std::to_string(opts_.limit) + ";w=" + std::to_string(whole_window_seconds()));
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
    case Style::kNone: break;
  }
}

std::optional<WallTime> Limiter::wait_signal(const Context& ctx, HeaderList& h) {
  const std::int64_t t = ceil_seconds(ctx.window_end - ctx.now);
  const WallTime after_t = ctx.now + std::chrono::seconds{t};
  const WallTime reset_instant{std::chrono::seconds{unix_ceil(ctx.window_end)}};
  switch (opts_.style) {
    case Style::kDraft11:
    case Style::kDraftLegacy:
    case Style::kRetryAfterSeconds: h.emplace_back("Retry-After", std::to_string(t)); return after_t;
    case Style::kMalformed:
      h.emplace_back("Retry-After", std::string(kMalformedRetryAfter[malformed_next_]));
      malformed_next_ = (malformed_next_ + 1) % kMalformedRetryAfter.size();
      return after_t;  // what its RateLimit field says
    case Style::kRetryAfterDate: h.emplace_back("Retry-After", format_imf_fixdate(reset_instant)); return reset_instant;
    case Style::kDraft12: return after_t;       // its RateLimit w, already sent with a=0
    case Style::kGithub: return reset_instant;  // x-ratelimit-reset, already sent with remaining 0
    case Style::kOpenai: {
      // Only retry-after-ms: OpenAI's SDKs read it first, and a whole-second
      // Retry-After beside it would be the longer wait, so a client would never
      // show whether it reads retry-after-ms.
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(ctx.until_next);
      h.emplace_back("retry-after-ms", std::to_string(ms.count()));
      return ctx.now + ms;
    }
    case Style::kNone: return std::nullopt;
  }
  return std::nullopt;
}

std::string Limiter::dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string Limiter::body(const Answer& a, const RequestInfo& req, const std::string& id) const {
  nlohmann::ordered_json j;
  switch (a.outcome) {
    case Outcome::kAccepted:
      j = {{"ok", true},
           {"method", req.method},
           {"path", req.path.substr(0, kMaxRecordedPath)},
           {"client", id},
           {"window", a.window}};
      break;
    case Outcome::kLimited:
      j = {{"error", "rate_limited"}, {"message", "API rate limit exceeded; see the response headers"}};
      if (opts_.style == Style::kGithub) j["documentation_url"] = "https://docs.github.com/rest/rate-limit";
      break;
    case Outcome::kFailed: j = {{"error", "unavailable"}, {"message", "simulated failure (--fail-rate)"}}; break;
  }
  return dump(j) + "\n";
}

void Limiter::record(WallTime now, const RequestInfo& req, const std::string& id, const Answer& a) {
  if (record_ == nullptr) return;
  nlohmann::ordered_json line{{"t", unix_seconds(now)},   {"client", id},
                              {"method", req.method},     {"path", req.path.substr(0, kMaxRecordedPath)},
                              {"status", a.status},       {"outcome", to_string(a.outcome)},
                              {"premature", a.premature}, {"window", a.window}};
  // The record carries P itself, so that a reader never re-derives a style's rule.
  if (a.permitted) line["permitted"] = unix_seconds(*a.permitted);
  *record_ << dump(line) << '\n';
}

nlohmann::ordered_json Limiter::windows_json(const WindowHistory& w) const {
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

}  // namespace abide::mock
