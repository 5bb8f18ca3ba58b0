// The opt-in heuristic for vendor-style headers from a host without a
// profile (profiles_internal.h): low confidence, never a wait of decades.
#include "abide/profiles.h"

#include <algorithm>
#include <string>

#include "ascii.h"
#include "field_index.h"
#include "profile_values.h"
#include "profiles_internal.h"

namespace abide {

using detail::parse_digits;
using detail::shown;

// ---- heuristic -------------------------------------------------------------------------

namespace {

constexpr std::string_view kHeuristicFamilies[] = {"x-ratelimit-", "x-rate-limit-"};
constexpr std::string_view kHeuristicDelays[] = {"retry-after-ms", "x-ms-retry-after-ms"};

// Guesses what a reset value means; nullopt when nothing fits.
std::optional<TimeValue> guess_time(std::string_view v, WallTime received, std::optional<WallTime> date) {
  v = ascii::trim_ows(v);
  if (v.empty()) return std::nullopt;
  const bool numeric = std::all_of(v.begin(), v.end(), [](char c) { return ascii::is_digit(c) || c == '.'; });
  if (numeric) {
    const std::size_t dot = v.find('.');
    const auto whole = parse_digits(v.substr(0, dot));
    if (whole && *whole >= 1'000'000'000) {
      return parse_time_value(v, TimeFormat::kUnixSecondsFraction, received, date);
    }
    return parse_time_value(v, TimeFormat::kFloatSeconds, received, date);
  }
  if (auto d = parse_go_duration(v)) return TimeValue{*d, std::nullopt, go_duration_step(v)};
  if (auto t = parse_time_value(v, TimeFormat::kRfc3339, received, date)) return t;
  return parse_time_value(v, TimeFormat::kHttpDate, received, date);
}

}  // namespace

void detail::read_heuristic(const FieldIndex& index, WallTime received, std::optional<WallTime> server_date,
                            VendorReading& out) {
  const auto& lines = index.lines();
  for (std::string_view family : kHeuristicFamilies) {
    QuotaObservation q;
    q.source = QuotaSource::kHeuristic;
    q.confidence = Confidence::kLow;
    std::optional<std::int64_t> used;
    bool any = false;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      // Both families are vendor-style names ("ratelimit", "rate-limit" in them).
      if (index.kind(i) != FieldKind::kVendorQuota) continue;
      const Header& h = lines[i];
      if (!ascii::istarts_with(h.name, family)) continue;
      const std::string_view what = std::string_view(h.name).substr(family.size());
      auto bad = [&] { out.warnings.push_back("heuristic: " + h.name + " " + shown(h.value) + " not understood"); };
      // As for a profile: a reset beyond a year (a Date centuries back, a
      // Unix time centuries ahead) is garbage, never a wait of decades.
      auto too_far = [&] {
        out.warnings.push_back("heuristic: " + h.name + " " + shown(h.value) + " ignored: more than a year ahead");
      };
      if (ascii::iequals(what, "limit")) {
        if (auto n = parse_count(h.value, CountFormat::kNumber, false)) q.limit = n;
        else bad();
      } else if (ascii::iequals(what, "remaining")) {
        if (auto n = parse_count(h.value, CountFormat::kNumber, false)) q.remaining = n;
        else bad();
      } else if (ascii::iequals(what, "used")) {
        if (auto n = parse_count(h.value, CountFormat::kNumber, true)) used = n;
        else bad();
      } else if (ascii::iequals(what, "reset")) {
        if (auto t = guess_time(h.value, received, server_date); t && t->from_receipt > kMaxAhead) {
          too_far();
        } else if (t) {
          q.reset = t->from_receipt;
          q.reset_resolution = t->resolution;
        } else {
          bad();
        }
      } else {
        continue;
      }
      any = true;
    }
    if (!any) continue;
    if (used && !q.remaining && q.limit) q.remaining = std::max<std::int64_t>(0, *q.limit - *used);
    if (q.limit || q.remaining || q.reset) out.quota.push_back(std::move(q));
  }
  for (std::string_view name : kHeuristicDelays) {
    const Header* line = index.first(name);
    if (line == nullptr) continue;
    const std::string_view v = line->value;
    const auto t = parse_time_value(v, TimeFormat::kMilliseconds, received, server_date);
    if (!t) {
      out.warnings.push_back("heuristic: " + std::string(name) + " " + shown(v) + " not understood");
      continue;
    }
    if (t->from_receipt > kMaxAhead) {
      out.warnings.push_back("heuristic: " + std::string(name) + " " + shown(v) + " ignored: more than a year ahead");
      continue;
    }
    if (!out.retry_delay || t->from_receipt > out.retry_delay->wait) {
      out.retry_delay = RetryHint{RetryHint::Kind::kDelay, t->from_receipt, std::nullopt, std::string(name)};
    }
  }
}

bool detail::looks_like_vendor_quota_header(std::string_view name) noexcept {
  return classify_field(name) == FieldKind::kVendorQuota;
}
}  // namespace abide
