// The proxy's counters and its two pages (see proxy_stats.h).
#include "proxy/proxy_stats.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <string>

#include "abide/headers.h"
#include "proxy/proxy_rules.h"

namespace abide::proxy {
namespace proxy_stats_cpp {  // private to this file (the tool is compiled in unity batches)

constexpr std::size_t kShownOrigin = 256;

bool deferral(OutcomeKind k) noexcept { return k == OutcomeKind::kDeferred || k == OutcomeKind::kDeadlineExceeded; }

// A label value in the text exposition format: backslash, double quote and
// line feed escaped.
std::string label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size() + 2);
  for (const char c : v) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

// The shortest text that reads back as x (Prometheus takes Go's float syntax).
std::string number(double x) {
  std::array<char, 32> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), x);
  return std::string(buf.data(), r.ptr);
}

double seconds_left(WallTime until, WallTime now) noexcept {
  return to_seconds(saturating_sub(until.time_since_epoch(), now.time_since_epoch()));
}

void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void sample(std::string& out, std::string_view name, std::string_view value) {
  out.append(name).append(" ").append(value).append("\n");
}

void labelled(std::string& out, std::string_view name, std::string_view label, std::string_view label_text,
              std::string_view value) {
  out.append(name).append("{").append(label).append("=\"").append(label_value(label_text)).append("\"} ");
  out.append(value).append("\n");
}

}  // namespace proxy_stats_cpp

Stats::Stats(const WallClock* wall) noexcept : wall_(wall != nullptr ? wall : &system_wall_clock()) {}

void Stats::request_received() {
  const detail::MutexLock lock(mu_);
  ++requests_;
}

void Stats::request_answered(std::string_view origin, int status, const RequestOutcome* outcome) {
  using namespace proxy_stats_cpp;
  const WallTime now = wall_->now();
  const detail::MutexLock lock(mu_);
  ++answered_[status];
  if (outcome == nullptr) return;
  const std::uint64_t n = outcome->attempts.size();
  attempts_ += n;
  retries_ += n > 0 ? n - 1 : 0;
  // Each attempt after the first followed a retry wait; any attempt may have waited for the pacer too.
  waits_ += n > 0 ? n - 1 : 0;
  waits_ += static_cast<std::uint64_t>(std::count_if(outcome->attempts.begin(), outcome->attempts.end(),
                                                     [](const Attempt& a) { return a.paced > Duration::zero(); }));
  if (outcome->waited > Duration::zero()) waited_s_ += to_seconds(outcome->waited);
  for (const Attempt& a : outcome->attempts) {
    if (!a.held) continue;
    QuotaHolds& h = holds_locked(*a.held);
    ++h.paced;
    h.waited_s += to_seconds(a.paced);
  }
  if (outcome->held && deferral(outcome->kind)) ++holds_locked(*outcome->held).deferred;
  auto count = [&](std::string_view name) ABIDE_REQUIRES(mu_) {
    auto it = outcomes_.find(name);
    if (it == outcomes_.end()) it = outcomes_.emplace(std::string(name), 0).first;
    ++it->second;
  };
  count(to_string(outcome->kind));
  if (outcome->ambiguous) count("ambiguous");
  if (deferral(outcome->kind)) ++deferrals_;
  if (!origin.empty() && outcome->not_before_wall) cooldown_locked(origin, *outcome->not_before_wall, now);
}

Stats::QuotaHolds& Stats::holds_locked(const QuotaHeld& held) {
  std::string unit = held.unit.empty() ? std::string("requests") : printable(held.unit, 64);
  auto it = quota_held_.find(unit);
  if (it == quota_held_.end()) {
    if (quota_held_.size() >= kMaxQuotaUnits) unit = "other";
    it = quota_held_.try_emplace(std::move(unit)).first;
  }
  it->second.last = printable(describe(held), 256);
  return it->second;
}

void Stats::cooldown(std::string_view origin, WallTime until) {
  const WallTime now = wall_->now();
  const detail::MutexLock lock(mu_);
  cooldown_locked(origin, until, now);
}

void Stats::cooldown_locked(std::string_view origin, WallTime until, WallTime now) {
  using namespace proxy_stats_cpp;
  // Keys are shown on both pages: printable, so that JSON and labels stay valid text.
  std::string key = printable(origin, kShownOrigin);
  auto it = cooldowns_.find(key);
  if (until <= now) {
    if (it != cooldowns_.end() && it->second <= now) cooldowns_.erase(it);
    return;
  }
  if (it != cooldowns_.end()) {
    it->second = std::max(it->second, until);
    return;
  }
  if (cooldowns_.size() >= kMaxCooldowns) {
    std::erase_if(cooldowns_, [&](const auto& kv) { return kv.second <= now; });
  }
  if (cooldowns_.size() >= kMaxCooldowns) {
    const auto soonest = std::min_element(cooldowns_.begin(), cooldowns_.end(),
                                          [](const auto& a, const auto& b) { return a.second < b.second; });
    if (soonest->second >= until) return;  // the new one is the soonest to end: it is the one dropped
    cooldowns_.erase(soonest);
  }
  cooldowns_.emplace(std::move(key), until);
}

void Stats::set_in_flight(std::int64_t held, std::int64_t transfers) {
  const detail::MutexLock lock(mu_);
  held_ = held;
  transfers_ = transfers;
}

void Stats::set_loop_connections(std::size_t loop, std::uint64_t connections) {
  if (loop >= kMaxLoops) return;
  const detail::MutexLock lock(mu_);
  if (loop_connections_.size() <= loop) loop_connections_.resize(loop + 1, 0);
  loop_connections_[loop] = connections;
}

nlohmann::ordered_json Stats::json(WallTime now) const {
  using namespace proxy_stats_cpp;
  const detail::MutexLock lock(mu_);
  nlohmann::ordered_json j;
  j["requests"] = requests_;
  nlohmann::ordered_json answered = nlohmann::ordered_json::object();
  for (const auto& [status, n] : answered_) answered[std::to_string(status)] = n;
  j["answered"] = std::move(answered);
  j["attempts"] = attempts_;
  j["retries"] = retries_;
  j["waits"] = waits_;
  j["waited_s"] = waited_s_;
  nlohmann::ordered_json outcomes = nlohmann::ordered_json::object();
  for (const auto& [name, n] : outcomes_) outcomes[name] = n;
  j["outcomes"] = std::move(outcomes);
  j["deferrals"] = deferrals_;
  j["held"] = held_;
  j["transfers"] = transfers_;
  std::uint64_t connections = 0;
  nlohmann::ordered_json loops = nlohmann::ordered_json::array();
  for (const std::uint64_t n : loop_connections_) {
    connections += n;
    loops.push_back({{"connections", n}});
  }
  j["connections"] = connections;
  j["loops"] = std::move(loops);
  nlohmann::ordered_json cooldowns = nlohmann::ordered_json::object();
  for (const auto& [origin, until] : cooldowns_) {
    if (until <= now) continue;
    cooldowns[origin] = {{"until", rfc3339_millis(until)}, {"left_s", seconds_left(until, now)}};
  }
  j["cooldowns"] = std::move(cooldowns);
  nlohmann::ordered_json held = nlohmann::ordered_json::object();
  for (const auto& [unit, h] : quota_held_) {
    held[unit] = {{"paced", h.paced}, {"deferred", h.deferred}, {"waited_s", h.waited_s}, {"last", h.last}};
  }
  j["quota_held"] = std::move(held);
  return j;
}

std::string Stats::prometheus(WallTime now) const {
  using namespace proxy_stats_cpp;
  const detail::MutexLock lock(mu_);
  std::string out;
  family(out, "abide_proxy_requests_total", "counter", "Requests read from callers.");
  sample(out, "abide_proxy_requests_total", std::to_string(requests_));
  family(out, "abide_proxy_answers_total", "counter", "Answers sent to callers, by status.");
  for (const auto& [status, n] : answered_) {
    labelled(out, "abide_proxy_answers_total", "status", std::to_string(status), std::to_string(n));
  }
  family(out, "abide_proxy_attempts_total", "counter", "Attempts sent upstream.");
  sample(out, "abide_proxy_attempts_total", std::to_string(attempts_));
  family(out, "abide_proxy_retries_total", "counter", "Attempts after a request's first.");
  sample(out, "abide_proxy_retries_total", std::to_string(retries_));
  family(out, "abide_proxy_waits_total", "counter", "Waits for the pacer or before a retry.");
  sample(out, "abide_proxy_waits_total", std::to_string(waits_));
  family(out, "abide_proxy_waited_seconds_total", "counter", "Time requests spent waiting, in seconds.");
  sample(out, "abide_proxy_waited_seconds_total", number(waited_s_));
  family(out, "abide_proxy_outcomes_total", "counter", "Requests ended, by outcome.");
  for (const auto& [name, n] : outcomes_)
    labelled(out, "abide_proxy_outcomes_total", "outcome", name, std::to_string(n));
  family(out, "abide_proxy_deferrals_total", "counter", "Requests deferred (deferred or deadline_exceeded).");
  sample(out, "abide_proxy_deferrals_total", std::to_string(deferrals_));
  family(out, "abide_proxy_held", "gauge", "Callers held for pacing, retries or a transfer slot.");
  sample(out, "abide_proxy_held", std::to_string(held_));
  family(out, "abide_proxy_transfers", "gauge", "Transfers running upstream.");
  sample(out, "abide_proxy_transfers", std::to_string(transfers_));
  family(out, "abide_proxy_connections", "gauge", "Caller connections open, by event loop.");
  for (std::size_t i = 0; i < loop_connections_.size(); ++i)
    labelled(out, "abide_proxy_connections", "loop", std::to_string(i), std::to_string(loop_connections_[i]));
  family(out, "abide_proxy_cooldown_seconds", "gauge", "Seconds left of each upstream's current cooldown.");
  for (const auto& [origin, until] : cooldowns_) {
    if (until <= now) continue;
    labelled(out, "abide_proxy_cooldown_seconds", "upstream", origin, number(seconds_left(until, now)));
  }
  family(out, "abide_proxy_quota_held_total", "counter",
         "Requests an announced quota held back (attempts paced, or deferred), by the quota's unit.");
  for (const auto& [unit, h] : quota_held_)
    labelled(out, "abide_proxy_quota_held_total", "quota", unit, std::to_string(h.paced + h.deferred));
  family(out, "abide_proxy_quota_held_seconds_total", "counter",
         "Time attempts waited for an announced quota, by the quota's unit, in seconds.");
  for (const auto& [unit, h] : quota_held_)
    labelled(out, "abide_proxy_quota_held_seconds_total", "quota", unit, number(h.waited_s));
  return out;
}

}  // namespace abide::proxy
