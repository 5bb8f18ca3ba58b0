// One response to Signals (abide/signals.h): DESIGN.md rules 1-3 and 8.
//
// Order of trust: Retry-After (authoritative, never shortened by anything
// else), then the IETF RateLimit fields, then vendor headers read through the
// profile of the API that sent them, and only with an explicit opt-in a
// low-confidence heuristic for vendor headers from an API without a profile.
#include "abide/signals.h"

#include <algorithm>
#include <array>
#include <string>

#include "abide/http_date.h"
#include "abide/profiles.h"
#include "abide/ratelimit.h"
#include "abide/retry_after.h"
#include "line_index.h"
#include "profiles_internal.h"
#include "ratelimit_internal.h"

namespace abide {

std::optional<Duration> Signals::quota_wait() const noexcept {
  std::optional<Duration> longest;
  for (const auto& q : quota) {
    if (q.confidence != Confidence::kHigh || !q.exhausted()) continue;
    if (!longest || *q.reset > *longest) longest = *q.reset;
  }
  return longest;
}

const QuotaObservation* Signals::most_restrictive() const noexcept {
  const auto i = abide::most_restrictive(quota);
  return i ? &quota[*i] : nullptr;
}

namespace {

constexpr std::size_t kShownValue = 64;

std::string shown(std::string_view v) {
  std::string s = "\"";
  s.append(v.substr(0, kShownValue));
  if (v.size() > kShownValue) s.append("...");
  s.append("\"");
  return s;
}

std::string seconds_text(Duration d) {
  const double s = to_seconds(d);
  std::string out = std::to_string(s);
  // "2.500000" -> "2.5", "30.000000" -> "30"
  while (!out.empty() && out.back() == '0') out.pop_back();
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out + " s";
}

void read_date(const std::string* date, WallTime received, Signals& s) {
  if (date == nullptr) return;
  auto parsed = parse_http_date(*date, received, ParseMode::kRobust);
  if (!parsed) {
    s.warnings.push_back("Date " + shown(*date) + " ignored: " + parsed.error().message());
    return;
  }
  if (!parsed->deviations.empty()) {
    s.warnings.push_back("Date " + shown(*date) + " accepted with deviations: " + to_string(parsed->deviations));
  }
  s.server_date = parsed->time;
  s.clock_skew = parsed->time - received;
}

void read_retry_after(const HeaderList& headers, WallTime received, std::optional<WallTime> server_now,
                      const ObserveOptions& options, Signals& s) {
  // Most responses have none or one line: keep them on the stack.
  std::array<std::string_view, 8> few{};
  std::vector<std::string_view> many;
  std::size_t n = 0;
  for (const auto& h : headers.lines()) {
    if (!iequals(h.name, "retry-after")) continue;
    if (n < few.size()) {
      few[n] = h.value;
    } else {
      if (many.empty()) many.assign(few.begin(), few.end());
      many.push_back(h.value);
    }
    ++n;
  }
  if (n == 0) return;
  const std::span<const std::string_view> lines =
      many.empty() ? std::span<const std::string_view>(few.data(), n) : std::span<const std::string_view>(many);
  const ParseMode mode = options.robust ? ParseMode::kRobust : ParseMode::kStrict;
  auto parsed = parse_retry_after_lines(lines, received, mode);
  if (!parsed) {
    s.retry_after_rejected = true;
    s.warnings.push_back("Retry-After " + shown(lines.front()) + " rejected: " + parsed.error().message() +
                         "; it does not mean \"retry now\"");
    return;
  }
  for (auto& w : parsed->warnings) s.warnings.push_back("Retry-After: " + std::move(w));
  const RetryAfter& ra = parsed->value;
  if (ra.rounded_up) {
    s.warnings.push_back("Retry-After " + shown(lines[parsed->line]) + " has a fraction, which the grammar does not allow; read rounded up");
  }
  if (!ra.date.deviations.empty()) {
    s.warnings.push_back("Retry-After " + shown(lines[parsed->line]) +
                         " accepted with deviations: " + to_string(ra.date.deviations));
  }
  if (ra.saturated) {
    s.warnings.push_back("Retry-After " + shown(lines[parsed->line]) + " is too large to represent; read as the longest wait");
  }
  RetryHint hint;
  hint.source = "retry-after";
  hint.wait = remaining(ra, received, server_now);
  if (ra.kind == RetryAfter::Kind::kDate) {
    hint.kind = RetryHint::Kind::kDate;
    hint.date = ra.date.time;
  }
  s.retry_after = std::move(hint);
}

// A vendor retry-delay header (retry-after-ms, ...) never shortens Retry-After:
// it is used when Retry-After is absent or rejected, or when it asks for longer.
void merge_retry_delay(std::optional<RetryHint>& delay, Signals& s) {
  if (!delay) return;
  if (!s.retry_after) {
    if (s.retry_after_rejected) {
      s.warnings.push_back("using " + delay->source + " (" + seconds_text(delay->wait) +
                           ") since Retry-After was rejected");
    }
    s.retry_after = std::move(delay);
    return;
  }
  if (delay->wait > s.retry_after->wait) {
    s.warnings.push_back(delay->source + " (" + seconds_text(delay->wait) + ") asks for longer than Retry-After (" +
                         seconds_text(s.retry_after->wait) + "); the longer wait is used");
    s.retry_after = std::move(delay);
  }
}

const Profile* select_profile(const ObserveOptions& options, const ProfileRegistry& registry, Signals& s) {
  if (options.profile == "none") return nullptr;
  if (!options.profile.empty()) {
    const Profile* p = registry.find(options.profile);
    if (p == nullptr) s.warnings.push_back("no profile named \"" + std::string(options.profile) + "\"");
    return p;
  }
  if (!options.host.empty()) return detail::cached_for_host(registry, options.host);
  return nullptr;
}

constexpr std::string_view kHeuristicFamilies[] = {"x-ratelimit-", "x-rate-limit-"};

bool heuristic_reads(std::string_view name) noexcept {
  for (std::string_view family : kHeuristicFamilies) {
    if (name.size() <= family.size() || !iequals(name.substr(0, family.size()), family)) continue;
    const std::string_view what = name.substr(family.size());
    return iequals(what, "limit") || iequals(what, "remaining") || iequals(what, "used") || iequals(what, "reset");
  }
  return iequals(name, "retry-after-ms") || iequals(name, "x-ms-retry-after-ms");
}

bool contains(const std::vector<int>& v, int x) noexcept { return std::find(v.begin(), v.end(), x) != v.end(); }

// One pass over the field lines: which fields are there at all, so that
// observe() only looks further for what a response actually carries.
struct Seen {
  const std::string* date = nullptr;  // the first Date line
  bool retry_after = false;
  bool ietf = false;         // any unprefixed IETF RateLimit field
  bool vendor_like = false;  // any vendor-style quota header
};

Seen classify(const HeaderList& headers) noexcept {
  Seen seen;
  if (headers.has(FieldKind::kDate)) {
    const auto& kinds = headers.kinds();
    for (std::size_t i = 0; i < kinds.size(); ++i) {
      if (kinds[i] == FieldKind::kDate) {
        seen.date = &headers.lines()[i].value;
        break;
      }
    }
  }
  seen.retry_after = headers.has(FieldKind::kRetryAfter);
  seen.ietf = headers.has(FieldKind::kRateLimit) || headers.has(FieldKind::kRateLimitPolicy) ||
              headers.has(FieldKind::kRateLimitLimit) || headers.has(FieldKind::kRateLimitRemaining) ||
              headers.has(FieldKind::kRateLimitReset);
  seen.vendor_like = headers.has(FieldKind::kVendorQuota);
  return seen;
}

// The profile's fields (its IETF-syntax prefixes, then its own headers), or
// the opt-in heuristic. Out of line: the line index it builds is not needed
// for responses from APIs without a profile.
[[gnu::noinline]] void read_vendor_fields(const HeaderList& headers, const Profile* profile,
                                          const RateLimitOptions& rl, Signals& s,
                                          detail::LineMask& read) {
  // Read straight into the result's vectors (no copies).
  VendorReading vendor;
  vendor.quota = std::move(s.quota);
  vendor.warnings = std::move(s.warnings);
  if (profile != nullptr) {
    // Vendor headers are found through an index of the lines by name length.
    const detail::LineIndex index(headers);
    for (const auto& prefix : profile->ietf_prefixes) {
      RateLimitOptions pre = rl;
      pre.prefix = prefix;
      pre.source = profile->name;
      pre.skip_separate_fields = false;
      detail::read_ratelimit(headers, &index, vendor.quota, vendor.warnings, pre);
    }
    detail::read_vendor(*profile, index, rl.received, rl.server_date, vendor, read);
  } else {
    read_heuristic(headers, rl.received, rl.server_date, vendor);
  }
  s.quota = std::move(vendor.quota);
  s.warnings = std::move(vendor.warnings);
  s.should_retry = vendor.should_retry;
  s.should_retry_source = std::move(vendor.should_retry_source);
  merge_retry_delay(vendor.retry_delay, s);
}

}  // namespace

Signals observe(int status, const HeaderList& headers, WallTime received_wall, MonoTime received_mono,
                const ObserveOptions& options) {
  Signals s;
  s.status = status;
  s.received_wall = received_wall;
  s.received_mono = received_mono;
  const Seen seen = classify(headers);

  // Rule 3: the server's Date, for skew, and for dates in other fields.
  read_date(seen.date, received_wall, s);
  // The server's time at receipt is at least its Date; a floor learned from
  // earlier responses may say more, within the second that Date names.
  std::optional<WallTime> server_now = s.server_date;
  if (s.server_date && options.server_time_floor && *options.server_time_floor > *s.server_date &&
      *options.server_time_floor < *s.server_date + std::chrono::seconds{1}) {
    server_now = options.server_time_floor;
  }
  // Rule 1: Retry-After first, authoritative.
  if (seen.retry_after) read_retry_after(headers, received_wall, server_now, options, s);

  const ProfileRegistry& registry = options.registry != nullptr ? *options.registry : ProfileRegistry::builtin();
  const Profile* profile = select_profile(options, registry, s);
  if (profile != nullptr) s.profile = profile->name;

  // Rule 8: the IETF fields, then the vendor's.
  RateLimitOptions rl;
  rl.skip_separate_fields = profile != nullptr && profile->overrides_ietf_fields;
  rl.heuristic = options.heuristic;
  rl.received = received_wall;
  rl.server_date = server_now;
  if (seen.ietf || profile != nullptr || options.heuristic) s.quota.reserve(4);  // one allocation, usually
  if (seen.ietf) detail::read_ratelimit(headers, nullptr, s.quota, s.warnings, rl);
  detail::LineMask read;  // lines the profile read
  if (profile != nullptr || options.heuristic) read_vendor_fields(headers, profile, rl, s, read);

  // Vendor-style headers nobody interpreted: reported, never used (rule 8).
  if (seen.vendor_like) {
    const auto& lines = headers.lines();
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const auto& h = lines[i];
      if (headers.kinds()[i] != FieldKind::kVendorQuota) continue;
      if (read.test(i)) continue;
      if (profile != nullptr && profile->knows(h.name)) continue;
      if (profile == nullptr && options.heuristic && heuristic_reads(h.name)) continue;
      s.uninterpreted.push_back(h);
    }
  }
  if (!s.uninterpreted.empty()) {
    std::string w = std::to_string(s.uninterpreted.size()) + " vendor-style quota header";
    if (s.uninterpreted.size() > 1) w += "s";
    w += profile != nullptr ? " not read by profile \"" + profile->name + "\"" : " not interpreted (no vendor profile)";
    w += ": ";
    for (std::size_t i = 0; i < s.uninterpreted.size() && i < 8; ++i) {
      if (i > 0) w += ", ";
      w += s.uninterpreted[i].name;
    }
    if (s.uninterpreted.size() > 8) w += ", ...";
    s.warnings.push_back(std::move(w));
  }

  // Does the status mean "rate limited"?
  if (profile != nullptr) {
    const bool signal = s.retry_after.has_value() ||
                        std::any_of(s.quota.begin(), s.quota.end(), [](const QuotaObservation& q) {
                          return q.confidence == Confidence::kHigh && q.remaining && *q.remaining <= 0;
                        });
    s.limited = contains(profile->limited_statuses, status) ||
                (signal && contains(profile->limited_statuses_with_signal, status));
  } else {
    s.limited = status == 429;
  }
  return s;
}

}  // namespace abide

namespace abide {

namespace {
constexpr double kDriftAllowance = 1e-4;  // 100 ppm between the server's clock and ours
constexpr Duration kSetBack = std::chrono::seconds{2};
}  // namespace

Duration ServerClock::decayed_locked(MonoTime at) const noexcept {
  const Duration since = at > sample_ ? at - sample_ : Duration::zero();
  const auto drift = static_cast<Duration::rep>(static_cast<double>(since.count()) * kDriftAllowance);
  return offset_ - Duration{drift};
}

void ServerClock::learn(const Signals& s) noexcept {
  if (!s.server_date) return;
  const Duration offset = s.server_date->time_since_epoch() - s.received_mono.time_since_epoch();
  std::lock_guard lock(mu_);
  if (known_) {
    const Duration best = decayed_locked(s.received_mono);
    // A tighter bound replaces the old; a Date far behind it means the server's
    // clock was set back (or another server answered): start afresh.
    if (offset <= best && offset + kSetBack >= best) return;
  }
  known_ = true;
  offset_ = offset;
  sample_ = s.received_mono;
}

std::optional<WallTime> ServerClock::floor_at(MonoTime at) const noexcept {
  std::lock_guard lock(mu_);
  if (!known_) return std::nullopt;
  return WallTime{at.time_since_epoch() + decayed_locked(at)};
}

}  // namespace abide
