#include "fetch/fetch_progress.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string_view>
#include <vector>

#include "abide/engine.h"
#include "abide/headers.h"
#include "abide/planner.h"
#include "abide/profiles.h"
#include "abide/signals.h"

namespace abide::cli {
namespace fetch_progress {  // private to this file (the CLI is compiled in unity batches)

using namespace std::chrono_literals;

// Longest progress line: a wide origin must not make it wrap (a wrapped line
// cannot be redrawn in place with \r).
constexpr std::size_t kMaxLineBytes = 160;

std::int64_t ceil_seconds(Duration d) {
  if (d <= Duration::zero()) return 0;
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(d);
  return s.count() + (std::chrono::duration_cast<Duration>(s) < d ? 1 : 0);
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string origin_text(const Request* r) {
  if (r == nullptr) return "(unknown origin)";
  // origin_of() leaves out any user name and password the URL carries.
  if (auto o = origin_of(r->url)) return abide::printable(*o, 256);
  return "(a URL without an http or https origin)";
}

// "x-ratelimit-*" when the names share a prefix up to a '-', else the names.
std::string header_names_text(const std::vector<Header>& headers) {
  if (headers.empty()) return "vendor quota";
  std::string_view first = headers.front().name;
  std::size_t common = first.size();
  for (const Header& h : headers) {
    std::size_t n = 0;
    while (n < common && n < h.name.size() && lower(h.name[n]) == lower(first[n])) ++n;
    common = n;
  }
  const std::size_t dash = first.substr(0, common).rfind('-');
  if (headers.size() > 1 && dash != std::string_view::npos && dash >= 2)
    return abide::printable(first.substr(0, dash + 1), 64) + "*";
  std::string out;
  for (std::size_t i = 0; i < headers.size() && i < 3; ++i) {
    if (i > 0) out += ", ";
    out += abide::printable(headers[i].name, 64);
  }
  if (headers.size() > 3) out += ", ...";
  return out;
}

// The profiles that know every one of these headers, by name.
std::vector<std::string> profiles_reading(const ProfileRegistry& registry, const std::vector<Header>& headers) {
  std::vector<std::string> names;
  for (const Profile* p : registry.all()) {
    const bool all = std::all_of(headers.begin(), headers.end(), [&](const Header& h) { return p->knows(h.name); });
    if (all) names.push_back(p->name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace fetch_progress

using namespace fetch_progress;

std::string reason_text(const WaitReason& c) {
  using K = WaitReason::Kind;
  switch (c.kind) {
    case K::kRetryAfter: return "the Retry-After of " + c.origin;
    case K::kQuota: return "the quota reset of " + c.origin + (c.detail.empty() ? "" : " (" + c.detail + " headers)");
    case K::kBackoff: return "backoff after " + (c.detail.empty() ? "an error" : c.detail) + " from " + c.origin;
    case K::kPacer: return "the pacer's spacing of requests to " + c.origin;
    case K::kNotBefore: return "the permitted time the resume file keeps for " + c.origin;
  }
  return "a wait";
}

std::string human_duration(Duration d) {
  std::int64_t s = ceil_seconds(d);
  char buf[64];
  if (s < 120) {
    std::snprintf(buf, sizeof buf, "%lld s", static_cast<long long>(s));
  } else if (s < 3600) {
    const long long m = s / 60, r = s % 60;
    if (r == 0) std::snprintf(buf, sizeof buf, "%lld min", m);
    else std::snprintf(buf, sizeof buf, "%lld min %lld s", m, r);
  } else if (s < 86400) {
    const long long mins = (s + 59) / 60;  // up: never announce less than it is
    const long long h = mins / 60, m = mins % 60;
    if (m == 0) std::snprintf(buf, sizeof buf, "%lld h", h);
    else std::snprintf(buf, sizeof buf, "%lld h %lld min", h, m);
  } else {
    const long long hours = (s + 3599) / 3600;
    const long long days = hours / 24, h = hours % 24;
    if (h == 0) std::snprintf(buf, sizeof buf, "%lld d", days);
    else std::snprintf(buf, sizeof buf, "%lld d %lld h", days, h);
  }
  return buf;
}

std::string local_time_text(WallTime until, WallTime now) {
  const auto to_tm = [](WallTime t, std::tm& out) {
    const std::time_t secs = static_cast<std::time_t>(
        std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count());
    return localtime_r(&secs, &out) != nullptr;
  };
  std::tm u{}, n{};
  if (!to_tm(until, u) || !to_tm(now, n)) return "a time past the calendar";
  char buf[64];
  const bool today = u.tm_year == n.tm_year && u.tm_yday == n.tm_yday;
  const std::size_t len = std::strftime(buf, sizeof buf, today ? "%H:%M:%S" : "%Y-%m-%d %H:%M:%S", &u);
  return len == 0 ? std::string("a time past the calendar") : std::string(buf, len);
}

Progress::Progress(std::size_t total, const ProgressOptions& options)
    : total_(total),
      options_(options),
      enabled_(options.terminal && !options.stdout_same_terminal && !options.silent && !options.verbose),
      mono_(options.mono != nullptr ? *options.mono : system_monotonic_clock()),
      wall_(options.wall != nullptr ? *options.wall : system_wall_clock()),
      out_(options.out != nullptr ? options.out : stderr),
      start_(mono_.now()) {}

Progress::~Progress() { stop(); }

void Progress::start() {
  if (!enabled_ || thread_.joinable()) return;
  thread_ = std::thread([this] {
    detail::UniqueLock lock(mu_);
    while (!stopping_) {
      draw_locked();
      cv_.wait_for(lock.native(), std::chrono::milliseconds(250), [this]() ABIDE_REQUIRES(mu_) { return stopping_; });
    }
    erase_locked();
  });
}

void Progress::stop() {
  {
    detail::MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Progress::on_event(const ClientEvent& e) {
  using K = ClientEvent::Kind;
  switch (e.kind) {
    case K::kWaitStarted: waiting_.fetch_add(1); break;
    case K::kWaitEnded: waiting_.fetch_sub(1); break;
    case K::kAttemptStarted: in_flight_.fetch_add(1); break;
    case K::kResponseObserved:
    case K::kTransportError: in_flight_.fetch_sub(1); break;
    case K::kDecision:
    case K::kFinished: break;
  }
  // Nothing to say and nothing to draw: no bookkeeping either.
  if (options_.silent && !enabled_) return;
  if (e.kind == K::kAttemptStarted) return;
  detail::MutexLock lock(mu_);
  if (e.kind == K::kFinished) {
    active_.erase(e.index);
    return;
  }
  Active& a = active_locked(e);
  switch (e.kind) {
    case K::kResponseObserved: observe_locked(a, e); break;
    case K::kTransportError: break;
    case K::kDecision: decision_locked(a, e); break;
    case K::kWaitStarted: wait_started_locked(a, e); break;
    case K::kWaitEnded:
      a.waiting = false;
      a.until.reset();
      break;
    case K::kAttemptStarted:
    case K::kFinished: break;
  }
}

Progress::Active& Progress::active_locked(const ClientEvent& e) {
  auto it = active_.find(e.index);
  if (it != active_.end()) return it->second;
  Active fresh;
  fresh.origin = origin_text(e.request);
  fresh.key = e.request != nullptr && !e.request->pacer_key.empty() ? e.request->pacer_key : fresh.origin;
  fresh.decided.origin = fresh.origin;
  fresh.cause.origin = fresh.origin;
  if (active_.size() >= kMaxActive) {
    // Beyond the bound a request is followed event by event only.
    overflow_ = std::move(fresh);
    return overflow_;
  }
  return active_.emplace(e.index, std::move(fresh)).first->second;
}

Progress::KeyState* Progress::key_locked(const std::string& key, MonoTime now) {
  auto it = keys_.find(key);
  if (it != keys_.end()) return &it->second;
  if (keys_.size() >= kMaxKeys) {
    // Keys whose cooldown and last announcement are over hold nothing of use.
    std::erase_if(keys_, [&](const auto& kv) {
      return kv.second.cooldown_until <= now && (!kv.second.announced || kv.second.announced_until <= now);
    });
    if (keys_.size() >= kMaxKeys) return nullptr;
  }
  return &keys_.emplace(key, KeyState{}).first->second;
}

void Progress::observe_locked(Active& a, const ClientEvent& e) {
  if (e.signals == nullptr) return;
  const Signals& s = *e.signals;
  // The same computation as the pacer's cooldown (signals.h): the requests of
  // this key that come next wait for it.
  const PermittedWait pw = permitted_wait(s);
  a.quota_source.clear();
  if (pw.quota_index && *pw.quota_index < s.quota.size())
    a.quota_source = abide::printable(s.quota[*pw.quota_index].source_name(), 64);
  if (pw.wait && *pw.wait > Duration::zero()) {
    const MonoTime until = saturating_add(s.received_mono, *pw.wait);
    if (KeyState* k = key_locked(a.key, e.at); k != nullptr && until > k->cooldown_until) {
      k->cooldown_until = until;
      const bool by_retry_after = pw.retry_after && *pw.retry_after >= pw.quota.value_or(Duration::zero());
      k->cooldown_cause = WaitReason{by_retry_after ? WaitReason::Kind::kRetryAfter : WaitReason::Kind::kQuota,
                                     a.origin, by_retry_after ? std::string() : a.quota_source};
    }
  }
  if (!options_.burst && !s.quota.empty()) {
    if (KeyState* k = key_locked(a.key, e.at)) spacing_locked(*k, s, e.at);
  }
  if (!s.uninterpreted.empty() && s.profile.empty()) report_vendor_locked(a, s);
}

void Progress::spacing_locked(KeyState& k, const Signals& s, MonoTime now) {
  // As the smooth pacer spaces sends (pacer.h): what remains spread over the
  // time to its reset, or a policy alone as its window over its limit. An
  // estimate for people (the pacer adds a small margin); it decides nothing.
  Duration spacing{};
  Duration span{};
  std::string quota;
  for (const QuotaObservation& q : s.quota) {
    if (q.confidence != Confidence::kHigh || q.reset_is_full_refill) continue;
    if (q.remaining && *q.remaining > 0 && q.reset && *q.reset > Duration::zero()) {
      const Duration d = *q.reset / *q.remaining;
      if (d <= spacing) continue;
      spacing = d;
      span = *q.reset;
      quota = std::to_string(*q.remaining) + " left, resets in " + human_duration(*q.reset);
    } else if (!q.remaining && q.limit && *q.limit > 0 && q.window && *q.window > Duration::zero()) {
      const Duration d = *q.window / *q.limit;
      if (d <= spacing) continue;
      spacing = d;
      span = *q.window;
      quota = std::to_string(*q.limit) + " per " + human_duration(*q.window);
    }
  }
  if (spacing <= Duration::zero()) return;
  // A new window of the quota is said anew; within one, once, and the widest
  // spacing holds (the pacer keeps the lowest remaining count of a window).
  if (k.spacing_until <= now) {
    k.spacing_announced = false;
  } else if (spacing < k.spacing) {
    return;
  }
  k.spacing = spacing;
  k.spacing_quota = std::move(quota);
  k.spacing_until = saturating_add(s.received_mono, span);
}

void Progress::announce_spacing_locked(const Active& a, KeyState& k, MonoTime now) {
  if (options_.silent || options_.burst || k.spacing_announced || k.spacing_until <= now) return;
  if (k.spacing < options_.announce_after || k.spacing > options_.max_wait) return;
  k.spacing_announced = true;
  emit_locked("abide fetch: spacing requests to " + a.origin + " about " + human_duration(k.spacing) +
              " apart, so that its quota (" + k.spacing_quota + ") lasts" + resume_hint());
}

std::string Progress::resume_hint() const {
  std::string s = "; Ctrl-C stops and saves what is left";
  if (!options_.resume_file.empty()) s += " to " + abide::printable(options_.resume_file, 256);
  return s + " for --resume";
}

void Progress::decision_locked(Active& a, const ClientEvent& e) {
  if (e.plan == nullptr) return;
  const Plan& p = *e.plan;
  WaitReason c;
  c.origin = a.origin;
  switch (p.basis) {
    case Basis::kRetryAfter: c.kind = WaitReason::Kind::kRetryAfter; break;
    case Basis::kRateLimit:
      c.kind = WaitReason::Kind::kQuota;
      c.detail = "RateLimit";
      break;
    case Basis::kVendor:
      c.kind = WaitReason::Kind::kQuota;
      c.detail = a.quota_source;
      break;
    case Basis::kBackoff:
    case Basis::kNone:
      c.kind = WaitReason::Kind::kBackoff;
      c.detail = p.status > 0 ? "HTTP " + std::to_string(p.status) : "a transport error";
      break;
  }
  a.decided = std::move(c);
}

void Progress::wait_started_locked(Active& a, const ClientEvent& e) {
  using W = ClientEvent::WaitKind;
  const MonoTime now = e.at;
  a.waiting = true;
  a.until.reset();
  switch (e.wait_kind) {
    case W::kRetry:
      a.until = saturating_add(now, e.wait);
      a.cause = a.decided;
      break;
    case W::kNotBefore:
      a.until = saturating_add(now, e.wait);
      a.cause = WaitReason{WaitReason::Kind::kNotBefore, a.origin, {}};
      break;
    case W::kPacer: {
      a.cause = WaitReason{WaitReason::Kind::kPacer, a.origin, {}};
      // The pacer does not say how long it holds a request; a cooldown known
      // from an answer does. It holds the request only if the cooldown ends
      // within the longest acceptable wait and before the request's deadline
      // (else the request ends at once, deferred or past its deadline).
      auto it = keys_.find(a.key);
      if (it == keys_.end()) break;
      if (it->second.cooldown_until <= now) {
        // No cooldown: what holds it is the pacer's spacing (its length unknown here).
        announce_spacing_locked(a, it->second, now);
        break;
      }
      const MonoTime until = it->second.cooldown_until;
      if (until - now > options_.max_wait) break;
      if (e.request != nullptr && e.request->deadline && *e.request->deadline < until) break;
      if (e.request != nullptr && e.request->send_by && *e.request->send_by < until) break;
      a.until = until;
      a.cause = it->second.cooldown_cause;
      break;
    }
  }
  if (a.until && *a.until - now >= options_.announce_after) announce_locked(a, now, *a.until, a.cause);
}

void Progress::announce_locked(const Active& a, MonoTime now, MonoTime until, const WaitReason& cause) {
  if (options_.silent) return;
  KeyState* k = key_locked(a.key, now);
  // One line per cause: the other requests that one cooldown (or one run of
  // backoff) holds end their waits close to the announced end.
  if (k != nullptr && k->announced && k->announced_kind == cause.kind &&
      until <= saturating_add(k->announced_until, options_.announce_after))
    return;
  if (k != nullptr) {
    k->announced = true;
    k->announced_kind = cause.kind;
    k->announced_until = until;
  }
  const WallTime wall_now = wall_.now();
  const WallTime wall_until = saturating_add(wall_now, until - now);
  std::string s = "abide fetch: waiting " + human_duration(until - now) + " (until " +
                  local_time_text(wall_until, wall_now) + ") for " + reason_text(cause) + resume_hint();
  emit_locked(s);
}

void Progress::report_vendor_locked(const Active& a, const Signals& s) {
  if (options_.silent) return;
  if (vendor_reported_.contains(a.origin) || vendor_reported_.size() >= kMaxReportedOrigins) return;
  vendor_reported_.insert(a.origin);
  const ProfileRegistry& registry = options_.registry != nullptr ? *options_.registry : ProfileRegistry::builtin();
  const std::vector<std::string> names = profiles_reading(registry, s.uninterpreted);
  std::string line = "abide fetch: " + a.origin + " sends " + header_names_text(s.uninterpreted) +
                     " headers that no profile reads; ";
  if (names.empty()) {
    line += "a --profile-file describing them would let abide use them";
  } else {
    for (std::size_t i = 0; i < names.size() && i < 3; ++i)
      line += (i == 0 ? "--profile " : " or --profile ") + abide::printable(names[i], 64);
    line += " (or a --profile-file) would use them";
  }
  emit_locked(line);
}

void Progress::decision_said(std::size_t index, std::string_view reason) {
  detail::MutexLock lock(mu_);
  decision_said_[index] = std::string(reason);
}

bool Progress::outcome_said(std::size_t index, std::string_view reason) {
  detail::MutexLock lock(mu_);
  const auto it = decision_said_.find(index);
  if (it == decision_said_.end()) return false;
  const bool same = it->second == reason;
  decision_said_.erase(it);
  return same;
}

void Progress::on_done() { done_.fetch_add(1); }

std::string Progress::line() const { return line(mono_.now()); }

std::string Progress::line(MonoTime now) const {
  detail::MutexLock lock(mu_);
  return line_locked(now);
}

std::string Progress::line_locked(MonoTime now) const {
  const std::size_t done = done_.load();
  char buf[96];
  if (total_ == kUnknownTotal)
    std::snprintf(buf, sizeof buf, "[%zu] %ld in flight, %ld waiting", done, std::max(0L, in_flight_.load()),
                  std::max(0L, waiting_.load()));
  else
    std::snprintf(buf, sizeof buf, "[%zu/%zu] %ld in flight, %ld waiting", done, total_,
                  std::max(0L, in_flight_.load()), std::max(0L, waiting_.load()));
  std::string s = buf;

  // The longest current wait, and the latest end of a wait that what remains
  // must sit out: the request waiting, or its key's cooldown.
  const Active* longest = nullptr;
  const Active* held = nullptr;  // a wait of unknown end (the pacer's spacing)
  std::optional<MonoTime> latest;
  for (const auto& [index, a] : active_) {
    if (a.waiting && !a.until && held == nullptr) held = &a;
    if (a.waiting && a.until && *a.until > now) {
      if (longest == nullptr || *a.until > *longest->until) longest = &a;
      if (!latest || *a.until > *latest) latest = a.until;
    }
    if (auto k = keys_.find(a.key);
        k != keys_.end() && k->second.cooldown_until > now && k->second.cooldown_until - now <= options_.max_wait) {
      if (!latest || k->second.cooldown_until > *latest) latest = k->second.cooldown_until;
    }
  }
  if (longest != nullptr)
    s += ", longest wait " + human_duration(*longest->until - now) + ": " + reason_text(longest->cause);
  else if (held != nullptr) s += ", held by " + reason_text(held->cause);

  if (done < total_ && total_ != kUnknownTotal) {
    std::optional<Duration> eta;
    if (done > 0) {
      const double per = to_seconds(now - start_) / static_cast<double>(done);
      eta = std::chrono::duration_cast<Duration>(
          std::chrono::duration<double>(per * static_cast<double>(total_ - done)));
    }
    // A request waiting until T cannot finish before T.
    if (latest && (!eta || *latest - now > *eta)) eta = *latest - now;
    if (eta) s += ", ETA " + human_duration(*eta);
  }
  if (s.size() > kMaxLineBytes) s = s.substr(0, kMaxLineBytes - 3) + "...";
  return s;
}

void Progress::print_line(const std::string& line) {
  detail::MutexLock lock(mu_);
  emit_locked(line);
}

void Progress::emit_locked(const std::string& line) {
  erase_locked();
  std::fputs(line.c_str(), out_);
  std::fputc('\n', out_);
  std::fflush(out_);
  if (enabled_ && !stopping_ && thread_.joinable()) draw_locked();
}

void Progress::draw_locked() {
  if (!enabled_) return;
  std::fprintf(out_, "\r\033[K%s", line_locked(mono_.now()).c_str());
  std::fflush(out_);
  drawn_ = true;
}

void Progress::erase_locked() {
  if (!drawn_) return;
  std::fputs("\r\033[K", out_);
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace abide::cli
