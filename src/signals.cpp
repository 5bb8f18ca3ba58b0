// One response to Signals (abide/signals.h): docs/RULES.md rules 1-3 and 8.
//
// Order of trust: Retry-After (authoritative, never shortened by anything
// else), then the IETF RateLimit fields, then vendor headers read through the
// profile of the API that sent them, and only with an explicit opt-in a
// low-confidence heuristic for vendor headers from an API without a profile.
#include "abide/signals.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "abide/http_date.h"
#include "abide/profiles.h"
#include "abide/ratelimit.h"
#include "abide/retry_after.h"
#include "ascii.h"
#include "field_index.h"
#include "profile_select.h"
#include "profiles_internal.h"
#include "ratelimit_internal.h"

namespace abide {

const QuotaObservation* Signals::most_restrictive() const noexcept {
  const auto i = abide::most_restrictive(quota);
  return i ? &quota[*i] : nullptr;
}

namespace {

constexpr std::size_t kShownValue = 64;

// A server's value inside a warning: escaped where the text is made (a control
// byte never reaches a terminal), bounded, and quoted.
std::string shown(std::string_view v) {
  std::string s = "\"";
  s.append(printable(v, kShownValue));
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

// The server's clock at receipt: its Date, or a learned floor that lies within
// the second the Date names. A floor at or past the Date's second contradicts
// it (another clock, or a clock set back) and is not used; one below says less.
WallTime server_time_at_receipt(WallTime date, WallTime floor) noexcept {
  // saturating: a Date in year 9999 reads as WallTime's last instant
  return floor > date && floor < saturating_add(date, Duration{std::chrono::seconds{1}}) ? floor : date;
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
  // saturating: a Date in year 1 is valid syntax
  s.clock_skew = saturating_sub(parsed->time.time_since_epoch(), received.time_since_epoch());
}

void read_retry_after(const detail::FieldIndex& index, WallTime received, std::optional<WallTime> server_now,
                      const ObserveOptions& options, Signals& s) {
  // Most responses have none or one line: keep them on the stack.
  std::array<std::string_view, 8> few{};
  std::vector<std::string_view> many;
  std::size_t n = 0;
  const auto& all = index.lines();
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (index.kind(i) != FieldKind::kRetryAfter) continue;
    const Header& h = all[i];
    if (n < few.size()) {
      few[n] = h.value;
    } else {
      if (many.empty()) many.assign(few.begin(), few.end());
      many.push_back(h.value);
    }
    ++n;
  }
  if (n == 0) return;
  const std::span<const std::string_view> lines = many.empty() ? std::span<const std::string_view>(few.data(), n)
                                                               : std::span<const std::string_view>(many);
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
    s.warnings.push_back("Retry-After " + shown(lines[parsed->line]) +
                         " has a fraction, which the grammar does not allow; read rounded up");
  }
  if (!ra.date.deviations.empty()) {
    s.warnings.push_back("Retry-After " + shown(lines[parsed->line]) +
                         " accepted with deviations: " + to_string(ra.date.deviations));
  }
  if (ra.saturated) {
    s.warnings.push_back("Retry-After " + shown(lines[parsed->line]) +
                         " is too large to represent; read as the longest wait");
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

const Profile* select_profile(const ObserveOptions& options, Signals& s) {
  const Profile* p = detail::selected_profile(options);
  if (p == nullptr && !options.profile.empty() && options.profile != "none") {
    s.warnings.push_back("no profile named \"" + std::string(options.profile) + "\"");
  }
  return p;
}

constexpr std::string_view kHeuristicFamilies[] = {"x-ratelimit-", "x-rate-limit-"};

bool heuristic_reads(std::string_view name) noexcept {
  for (std::string_view family : kHeuristicFamilies) {
    if (name.size() <= family.size() || !ascii::iequals(name.substr(0, family.size()), family)) continue;
    const std::string_view what = name.substr(family.size());
    return ascii::iequals(what, "limit") || ascii::iequals(what, "remaining") || ascii::iequals(what, "used") ||
           ascii::iequals(what, "reset");
  }
  return ascii::iequals(name, "retry-after-ms") || ascii::iequals(name, "x-ms-retry-after-ms");
}

bool contains(const std::vector<int>& v, int x) noexcept { return std::find(v.begin(), v.end(), x) != v.end(); }

// The profile's fields (its IETF-syntax prefixes, then its own headers), or
// the opt-in heuristic. Out of line: observe()'s common path stays small.
[[gnu::noinline]] void read_vendor_fields(const detail::FieldIndex& index, const Profile* profile,
                                          const RateLimitOptions& rl, Signals& s, detail::LineMask& read) {
  // Read straight into the result's vectors (no copies).
  detail::VendorReading vendor;
  vendor.quota = std::move(s.quota);
  vendor.warnings = std::move(s.warnings);
  if (profile != nullptr) {
    for (const auto& prefix : profile->ietf_prefixes) {
      RateLimitOptions pre = rl;
      pre.prefix = prefix;
      pre.profile = profile->name;
      pre.skip_separate_fields = false;
      detail::read_ratelimit(index, vendor.quota, vendor.warnings, pre);
    }
    detail::read_vendor(*profile, index, rl.received, rl.server_date, vendor, read);
  } else {
    detail::read_heuristic(index, rl.received, rl.server_date, vendor);
  }
  s.quota = std::move(vendor.quota);
  s.warnings = std::move(vendor.warnings);
  s.should_retry = vendor.should_retry;
  s.should_retry_source = std::move(vendor.should_retry_source);
  merge_retry_delay(vendor.retry_delay, s);
}

// True when the response carries any unprefixed IETF RateLimit field.
bool has_ietf_fields(const detail::FieldIndex& index) noexcept {
  return index.has(FieldKind::kRateLimit) || index.has(FieldKind::kRateLimitPolicy) ||
         index.has(FieldKind::kRateLimitLimit) || index.has(FieldKind::kRateLimitRemaining) ||
         index.has(FieldKind::kRateLimitReset) || index.has(FieldKind::kRateLimitPartition);
}

// Vendor-style headers nobody interpreted: reported, never used (rule 8).
void report_uninterpreted(const detail::FieldIndex& index, const Profile* profile, const ObserveOptions& options,
                          const detail::LineMask& read, Signals& s) {
  if (index.has(FieldKind::kVendorQuota)) {
    const auto& lines = index.lines();
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const auto& h = lines[i];
      if (index.kind(i) != FieldKind::kVendorQuota) continue;
      if (read.test(i)) continue;
      if (profile != nullptr && profile->knows(h.name)) continue;
      if (profile == nullptr && options.heuristic && heuristic_reads(h.name)) continue;
      s.uninterpreted.push_back(h);
    }
  }
  if (s.uninterpreted.empty()) return;
  std::string w = std::to_string(s.uninterpreted.size()) + " vendor-style quota header";
  if (s.uninterpreted.size() > 1) w += "s";
  w += profile != nullptr ? " not read by profile \"" + profile->name + "\"" : " not interpreted (no vendor profile)";
  w += ": ";
  for (std::size_t i = 0; i < s.uninterpreted.size() && i < 8; ++i) {
    if (i > 0) w += ", ";
    w += printable(s.uninterpreted[i].name, kShownValue);  // a name is the server's bytes too
  }
  if (s.uninterpreted.size() > 8) w += ", ...";
  s.warnings.push_back(std::move(w));
}

}  // namespace

const Profile* detail::selected_profile(const ObserveOptions& options) {
  if (options.profile == "none") return nullptr;
  const ProfileRegistry& registry = options.registry != nullptr ? *options.registry : ProfileRegistry::builtin();
  if (!options.profile.empty()) return registry.find(options.profile);
  if (!options.host.empty()) return detail::cached_for_host(registry, options.host);
  return nullptr;
}

Signals observe(int status, const HeaderList& headers, WallTime received_wall, MonoTime received_mono,
                const ObserveOptions& options) {
  Signals s;
  s.status = status;
  s.received_wall = received_wall;
  s.received_mono = received_mono;
  // The one index of the lines every reader below shares.
  const detail::FieldIndex index(headers);
  const Header* date = index.first(FieldKind::kDate);
  const bool ietf = has_ietf_fields(index);

  // Rule 3: the server's Date, for skew, and for dates in other fields.
  read_date(date != nullptr ? &date->value : nullptr, received_wall, s);
  // The server's time at receipt is at least its Date; a floor learned from
  // earlier responses may say more, within the second that Date names.
  if (s.server_date && options.server_time_floor &&
      server_time_at_receipt(*s.server_date, *options.server_time_floor) == *options.server_time_floor) {
    s.server_time_floor = options.server_time_floor;
  }
  const std::optional<WallTime> server_now = s.server_time_floor ? s.server_time_floor : s.server_date;
  // Rule 1: Retry-After first, authoritative.
  if (index.has(FieldKind::kRetryAfter)) read_retry_after(index, received_wall, server_now, options, s);

  const Profile* profile = select_profile(options, s);
  if (profile != nullptr) s.profile = profile->name;

  // Rule 8: the IETF fields, then the vendor's.
  RateLimitOptions rl;
  rl.skip_separate_fields = profile != nullptr && profile->overrides_ietf_fields;
  rl.heuristic = options.heuristic;
  rl.received = received_wall;
  rl.server_date = server_now;
  if (ietf || profile != nullptr || options.heuristic) s.quota.reserve(4);  // one allocation, usually
  if (ietf) detail::read_ratelimit(index, s.quota, s.warnings, rl);
  detail::LineMask read;  // lines the profile read
  if (profile != nullptr || options.heuristic) read_vendor_fields(index, profile, rl, s, read);
  report_uninterpreted(index, profile, options, read, s);

  // Does the status mean "rate limited"?
  if (profile != nullptr) {
    const bool signal = s.retry_after.has_value() ||
                        std::any_of(s.quota.begin(), s.quota.end(), [](const QuotaObservation& q) {
                          return q.confidence == Confidence::kHigh && q.remaining && *q.remaining <= 0;
                        });
    s.limited = contains(profile->limited_statuses, status) ||
                (signal && contains(profile->limited_statuses_with_signal, status));
    s.unprocessed = s.limited && !profile->limited_unprocessed.empty();
  } else {
    s.limited = status == 429;
  }
  return s;
}

namespace {

Duration non_negative(Duration d) noexcept { return d < Duration::zero() ? Duration::zero() : d; }

// The wait a full-refill reset bounds when the server gave no retry delay: the
// units the next request needs (its cost, one when unknown, plus any overdraft)
// refill at limit per reset, so they are back after reset x needed / limit.
// Never longer than the reset; the reset itself when the limit is unknown.
Duration refill_wait(const QuotaObservation& q) noexcept {
  const Duration reset = non_negative(*q.reset);
  if (!q.limit || *q.limit <= 0) return reset;
  const double cost = q.cost && *q.cost > 0 ? static_cast<double>(*q.cost) : 1.0;
  const double needed = cost - static_cast<double>(std::min<std::int64_t>(*q.remaining, 0));
  const double ns = static_cast<double>(reset.count()) * needed / static_cast<double>(*q.limit);
  if (!(ns < static_cast<double>(reset.count()))) return reset;
  return Duration{static_cast<Duration::rep>(std::ceil(ns))};
}

}  // namespace

PermittedWait permitted_wait(const Signals& s, bool use_low_confidence) noexcept {
  PermittedWait p;
  if (s.retry_after) {
    const RetryHint& h = *s.retry_after;
    Duration w = non_negative(h.wait);
    if (h.kind == RetryHint::Kind::kDate && h.date) {
      // Rule 3, once, for everyone: a hand-built or skewed hint cannot be early.
      const Duration from_local = saturating_sub(h.date->time_since_epoch(), s.received_wall.time_since_epoch());
      w = std::max(w, from_local);
      if (s.server_date) {
        const WallTime server_now = s.server_time_floor ? server_time_at_receipt(*s.server_date, *s.server_time_floor)
                                                        : *s.server_date;
        const Duration from_server = saturating_sub(h.date->time_since_epoch(), server_now.time_since_epoch());
        if (from_server > non_negative(from_local) && from_server > Duration::zero()) p.skew_lengthened = true;
        w = std::max(w, from_server);
      }
      if (w <= Duration::zero()) p.retry_after_in_past = true;
    }
    p.retry_after = w;
  }
  for (std::size_t i = 0; i < s.quota.size(); ++i) {
    const QuotaObservation& q = s.quota[i];
    if (!q.exhausted()) {
      if (q.remaining && *q.remaining <= 0) {
        p.zero_without_reset = true;
      } else if (q.remaining) {
        p.room_left = true;
      }
      continue;
    }
    if (q.confidence == Confidence::kLow && !use_low_confidence) {
      p.low_confidence_ignored = true;
      continue;
    }
    Duration r = non_negative(*q.reset);
    if (q.reset_is_full_refill) {
      // Not the next permitted time: the server's own retry delay decides when
      // it gave one (the quota adds nothing), else the refill of one request.
      p.full_refill = true;
      if (s.retry_after) continue;
      r = refill_wait(q);
    }
    // Strictly longer: on a tie the earlier (more trusted: IETF before vendor) wins.
    if (!p.quota || r > *p.quota) {
      p.quota = r;
      p.quota_index = i;
    }
  }
  // The longest valid hint.
  if (p.retry_after && (!p.quota || *p.retry_after >= *p.quota)) {
    p.wait = p.retry_after;
  } else {
    p.wait = p.quota;
  }
  return p;
}

}  // namespace abide
