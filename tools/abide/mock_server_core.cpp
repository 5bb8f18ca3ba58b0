#include "mock_server_core.h"

#include <arpa/inet.h>

#include <algorithm>
#include <ostream>

#include "abide/http_date.h"
#include "mock_request_body.h"
#include "mock_token_quota.h"
#include "mock_vendor.h"

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
  if (o.token_limit < 1 || o.token_limit > kMaxTokenLimit)
    return "--token-limit must be between 1 and " + std::to_string(kMaxTokenLimit);
  if (o.output_token_limit < 1 || o.output_token_limit > kMaxTokenLimit)
    return "--output-token-limit must be between 1 and " + std::to_string(kMaxTokenLimit);
  // Their bodies are the vendors' 429s: another status would carry the body of another answer.
  if (is_vendor_style(o.style) && o.limited_status != 429)
    return "--limited-status must be 429 for the " + std::string(to_string(o.style)) + " style";
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
    case Outcome::kInvalid: return "invalid";
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

void TokenCounts::add(const TokenCounts& o) noexcept {
  invalid = sat_add(invalid, o.invalid);
  admitted = sat_add(admitted, o.admitted);
  charged = sat_add(charged, o.charged);
  input_admitted = sat_add(input_admitted, o.input_admitted);
  input_charged = sat_add(input_charged, o.input_charged);
  output_admitted = sat_add(output_admitted, o.output_admitted);
  output_charged = sat_add(output_charged, o.output_charged);
}

nlohmann::ordered_json TokenCounts::json(Style style) const {
  if (style == Style::kAnthropicTokens)
    return {{"input_admitted", input_admitted},
            {"input_charged", input_charged},
            {"output_admitted", output_admitted},
            {"output_charged", output_charged}};
  return {{"admitted", admitted}, {"charged", charged}, {"prompt", input_charged}, {"completion", output_charged}};
}

Limiter::Limiter(LimiterOptions opts, const WallClock& clock)
    : opts_(opts), clock_(clock), requests_(opts.limit, opts.window), rng_(opts.seed) {
  if (is_token_style(opts_.style)) tokens_ = std::make_unique<TokenQuota>(opts_, WallTime{});
}

Limiter::~Limiter() = default;

void Limiter::set_record(std::ostream* out) {
  detail::MutexLock lock(mu_);
  record_ = out;
}

void Limiter::flush_record() {
  detail::MutexLock lock(mu_);
  if (record_ != nullptr) record_->flush();
}

Answer Limiter::handle(const RequestInfo& req) {
  detail::MutexLock lock(mu_);
  const WallTime now = advance_time();
  const std::int64_t k = enter_window(now);
  std::optional<TokenRequest> tr;
  if (tokens_) {
    const auto dialect = opts_.style == Style::kOpenaiTokens ? BodyDialect::kOpenai : BodyDialect::kAnthropic;
    auto read = read_token_request(dialect, req.path, req.body);
    if (!read) return refuse_body(now, k, req, read.error().status, read.error().message);
    tr = std::move(*read);
  }

  const std::string id = client_key(req.client);
  Client& client = clients_.try_emplace(id, now).first->second;
  client.last_seen = now;
  Answer a;
  a.window = k;
  a.premature = is_premature(client, req.connection, now);
  a.headers.emplace_back("Date", format_imf_fixdate(now));
  if (draw() < opts_.fail_rate) {
    a.outcome = Outcome::kFailed;
    a.status = 503;
  }
  TokenCounts used;
  if (tokens_) used = tokens_->decide(now, *tr, totals_.requests, a);
  else decide_requests(now, req, id, a);
  if (a.outcome == Outcome::kLimited && a.permitted) remember_limited(client, req.connection, now, *a.permitted);
  account(k, client, a, used);
  record(now, req, id, a);
  return a;
}

std::int64_t Limiter::enter_window(WallTime now) {
  if (!anchor_) anchor_ = opts_.align == Align::kEpoch ? floor_to_window(now) : now;
  const std::int64_t k = (now - *anchor_) / opts_.window;
  if (k != window_) {
    window_ = k;
    used_ = 0;
  }
  return k;
}

void Limiter::decide_requests(WallTime now, const RequestInfo& req, const std::string& id, Answer& a) {
  if (a.outcome != Outcome::kFailed) {
    if (opts_.style == Style::kOpenai) requests_.refill(now);
    if (opts_.style == Style::kOpenai ? requests_.holds(1) : used_ < opts_.limit) {
      if (opts_.style == Style::kOpenai) requests_.take(1);
      ++used_;
      a.outcome = Outcome::kAccepted;
      a.status = 200;
    } else {
      a.outcome = Outcome::kLimited;
      a.status = opts_.limited_status;
    }
  }
  Context ctx{now, *anchor_ + opts_.window * (window_ + 1), 0, used_};
  if (opts_.style == Style::kOpenai) {
    requests_.refill(now);  // after a take, a no-op; a failed answer skipped the take
    ctx.remaining = static_cast<std::uint32_t>(requests_.available());
    ctx.until_full = requests_.until_full();
    ctx.until_next = requests_.until(1);
  } else {
    ctx.remaining = opts_.limit - used_;
  }
  quota_headers(ctx, a.outcome == Outcome::kAccepted, a.headers);
  if (a.outcome == Outcome::kLimited) a.permitted = wait_signal(ctx, a.headers);
  a.body = body(a, ctx, req, id);
}

Answer Limiter::refuse_body(WallTime now, std::int64_t k, const RequestInfo& req, int status,
                            const std::string& message) {
  Answer a;
  a.status = status;
  a.outcome = Outcome::kInvalid;
  a.window = k;
  a.headers.emplace_back("Date", format_imf_fixdate(now));
  if (opts_.style == Style::kOpenaiTokens) a.body = openai_error(message, "invalid_request_error", "");
  else a.body = anthropic_error(status == 413 ? "request_too_large" : "invalid_request_error", message);
  TokenCounts invalid;
  invalid.invalid = 1;
  windows_.at(k);  // the windows of the counts and of the tokens stay side by side
  token_totals_.add(invalid);
  token_windows_.at(k).add(invalid);
  record(now, req, client_key(req.client), a);
  return a;
}

void Limiter::account(std::int64_t k, Client& client, const Answer& a, const TokenCounts& tokens) {
  totals_.add(a.outcome, a.premature);
  windows_.at(k).add(a.outcome, a.premature);
  client.totals.add(a.outcome, a.premature);
  client.windows.at(k).add(a.outcome, a.premature);
  if (tokens_) {
    token_totals_.add(tokens);
    token_windows_.at(k).add(tokens);
  }
}

void Limiter::reset() {
  detail::MutexLock lock(mu_);
  const WallTime now = advance_time();
  anchor_.reset();
  window_ = -1;
  used_ = 0;
  requests_.reset(now);
  if (tokens_) tokens_->reset(now);
  totals_ = {};
  windows_ = WindowHistory{kMaxWindows};
  token_totals_ = {};
  token_windows_ = WindowSeries<TokenCounts>{kMaxWindows};
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
  detail::MutexLock lock(mu_);
  return totals_;
}

TokenCounts Limiter::token_totals() const {
  detail::MutexLock lock(mu_);
  return token_totals_;
}

nlohmann::ordered_json Limiter::server_json(WallTime now) const {
  nlohmann::ordered_json j{
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
  if (is_token_style(opts_.style)) j["token_limit"] = opts_.token_limit;
  if (opts_.style == Style::kAnthropicTokens) j["output_token_limit"] = opts_.output_token_limit;
  return j;
}

nlohmann::ordered_json Limiter::stats() const {
  detail::MutexLock lock(mu_);
  const WallTime now = std::max(clock_.now(), last_now_);
  const bool tokens = tokens_ != nullptr;
  nlohmann::ordered_json j;
  j["server"] = server_json(now);
  j["totals"] = counts_json(totals_, tokens ? &token_totals_ : nullptr);
  j["windows"] = windows_json(windows_, tokens ? &token_windows_ : nullptr);
  j["windows_dropped"] = windows_.dropped();
  nlohmann::ordered_json clients = nlohmann::ordered_json::object();
  for (const auto& [id, c] : clients_) {
    nlohmann::ordered_json cj = c.totals.json();
    cj["first_unix"] = unix_seconds(c.first_seen);
    cj["last_unix"] = unix_seconds(c.last_seen);
    cj["not_before_unix"] = c.last ? nlohmann::ordered_json(unix_seconds(c.last->permitted)) : nlohmann::ordered_json();
    cj["windows"] = windows_json(c.windows, nullptr);
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
    case Style::kNone:
    case Style::kGemini: break;  // Gemini sends no quota field at all
    case Style::kOpenaiTokens:
    case Style::kAnthropicTokens: break;  // their own (mock_token_quota.h)
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
    case Style::kGemini: return after_t;  // the RetryInfo retryDelay of its body
    case Style::kNone:
    case Style::kOpenaiTokens:
    case Style::kAnthropicTokens: return std::nullopt;
  }
  return std::nullopt;
}

std::string Limiter::dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string Limiter::body(const Answer& a, const Context& ctx, const RequestInfo& req, const std::string& id) const {
  if (opts_.style == Style::kGemini) {
    switch (a.outcome) {
      case Outcome::kAccepted: return gemini_content();
      case Outcome::kLimited:
        return gemini_error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).",
                            ceil_seconds(ctx.window_end - ctx.now));
      case Outcome::kFailed:
      case Outcome::kInvalid:
        return gemini_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.", -1);
    }
  }
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
    case Outcome::kFailed:
    case Outcome::kInvalid: j = {{"error", "unavailable"}, {"message", "simulated failure (--fail-rate)"}}; break;
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

nlohmann::ordered_json Limiter::counts_json(const Counts& c, const TokenCounts* tokens) const {
  nlohmann::ordered_json j = c.json();
  if (tokens != nullptr) {
    j["invalid"] = tokens->invalid;
    j["tokens"] = tokens->json(opts_.style);
  }
  return j;
}

nlohmann::ordered_json Limiter::windows_json(const WindowHistory& w, const WindowSeries<TokenCounts>* tokens) const {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  std::int64_t k = w.first();
  const TokenCounts none;
  for (const Counts& c : w.counts()) {
    nlohmann::ordered_json cj{{"index", k}};
    if (anchor_) cj["start_unix"] = unix_seconds(*anchor_ + opts_.window * k);
    const TokenCounts* t = tokens == nullptr ? nullptr : tokens->find(k);
    cj.update(counts_json(c, tokens == nullptr ? nullptr : t != nullptr ? t : &none));
    out.push_back(std::move(cj));
    ++k;
  }
  return out;
}

}  // namespace abide::mock
