// Reading a response's headers through a vendor profile (profiles_internal.h):
// quotas, the retry delay and the server's retry verdict.
#include "abide/profiles.h"

#include <algorithm>
#include <string>
#include <utility>

#include "ascii.h"
#include "profile_values.h"
#include "profiles_internal.h"

namespace abide {

using detail::parse_digits;
using detail::shown;
using detail::to_lower;
using detail::VendorReading;

// ---- reading headers through a profile ------------------------------------------------

namespace {

// The value of a field spec in headers (its first line; the member `key` if given).
struct Found {
  std::string_view value;
  std::string_view name;  // as the server spelled it
  bool present = false;
  bool repeated_differently = false;
};

Found lookup(const detail::FieldIndex& index, const FieldSpec& spec, detail::LineMask& read) {
  Found f;
  index.for_each(spec.header, [&](std::size_t i, const Header& h) {
    read.set(i);
    if (!f.present) {
      f.present = true;
      f.value = h.value;
      f.name = h.name;
    } else if (h.value != f.value) {
      f.repeated_differently = true;
    }
    return true;
  });
  if (f.present && !spec.key.empty()) {
    auto member = find_member(f.value, spec.key);
    if (!member) {
      f.present = false;
    } else {
      f.value = *member;
    }
  } else if (f.present && spec.first_member) {
    f.value = ascii::trim_ows(f.value.substr(0, f.value.find(';')));
  }
  return f;
}


class VendorReader {
 public:
  VendorReader(const Profile& p, const detail::FieldIndex& index, WallTime received, std::optional<WallTime> date,
               VendorReading& out, detail::LineMask& read)
      : p_(p), index_(index), h_(index.headers()), received_(received), date_(date), out_(out), read_(read) {}

  void warn_bad(const Found& f, std::string_view what) {
    out_.warnings.push_back(p_.name + ": " + std::string(f.name) + " " + shown(f.value) +
                            " ignored: " + std::string(what));
  }

  Found get(const FieldSpec& spec) {
    Found f = lookup(index_, spec, read_);
    if (f.repeated_differently) {
      out_.warnings.push_back(p_.name + ": " + std::string(f.name) +
                              " has several different values; the first is used");
    }
    return f;
  }

  std::optional<std::int64_t> count(const std::optional<FieldSpec>& spec, bool round_up) {
    if (!spec) return std::nullopt;
    const Found f = get(*spec);
    if (!f.present) return std::nullopt;
    auto v = parse_count(f.value, spec->count, round_up);
    if (!v) warn_bad(f, "not a non-negative count");
    return v;
  }

  std::optional<TimeValue> time(const FieldSpec& spec) {
    const Found f = get(spec);
    if (!f.present) return std::nullopt;
    auto v = parse_time_value(f.value, spec.time, received_, date_);
    if (!v) {
      warn_bad(f, "not " + std::string(to_string(spec.time)));
      return v;
    }
    // Unix milliseconds before 2001 are most likely seconds sent under a
    // milliseconds name: as milliseconds they name 1970 ("retry now"), as a
    // delay weeks. Neither is safe: the value is ignored.
    if (v->at && spec.time == TimeFormat::kUnixMilliseconds &&
        v->at->time_since_epoch() < std::chrono::seconds{1'000'000'000}) {
      warn_bad(f, "too small for unix_milliseconds");
      return std::nullopt;
    }
    // A "Unix time" before 2001 is no timestamp: some servers send seconds
    // from now under the same name (a GitLab merge request shows 1800). Read
    // it as seconds from now, which can only make the wait longer.
    if (v->at && (spec.time == TimeFormat::kUnixSeconds || spec.time == TimeFormat::kUnixSecondsFraction) &&
        v->at->time_since_epoch() < std::chrono::seconds{1'000'000'000}) {
      const TimeValue delay{v->at->time_since_epoch(), std::nullopt, v->resolution};
      if (delay.from_receipt > kMaxAhead) {
        warn_bad(f, "more than a year ahead");
        return std::nullopt;
      }
      out_.warnings.push_back(p_.name + ": " + std::string(f.name) + " " + shown(f.value) +
                              " is too small for Unix time; read as seconds from receipt");
      return delay;
    }
    if (v->from_receipt > kMaxAhead) {
      warn_bad(f, "more than a year ahead");
      return std::nullopt;
    }
    return v;
  }

  void quota(const QuotaSpec& spec) {
    if (!spec.header_prefix.empty()) {
      prefixed(spec);
      return;
    }
    if (spec.remaining && spec.remaining->count == CountFormat::kPolicyList) {
      policy_list(spec);
      return;
    }
    // Built in place (no moves); taken back out when the response has none of it.
    QuotaObservation& q = out_.quota.emplace_back();
    q.source = QuotaSource::kVendor;
    q.profile.assign(p_.name);
    if (spec.unit != q.unit) q.unit.assign(spec.unit);
    bool any = false;
    bool named = false;
    if (spec.policy_from) {
      const Found f = get(*spec.policy_from);
      if (f.present && !f.value.empty()) {
        q.policy.assign(f.value);
        named = true;
      }
    }
    if (!named) q.policy.assign(spec.policy);
    q.limit = count(spec.limit, false);
    q.remaining = count(spec.remaining, false);
    const auto used = count(spec.used, true);
    if (spec.used_limit) {
      const Found f = get(*spec.used_limit);
      if (f.present) {
        if (auto ul = parse_used_limit(f.value)) {
          q.limit = ul->limit;
          q.remaining = std::max<std::int64_t>(0, ul->limit - ul->used);
          if (!ul->detail.empty()) q.partition_key = std::string(ul->detail);
          any = true;
        } else {
          warn_bad(f, "not used/limit");
        }
      }
    }
    if (used) {
      any = true;
      if (!q.remaining && q.limit) q.remaining = std::max<std::int64_t>(0, *q.limit - *used);
      if (!q.limit && q.remaining && *q.remaining <= std::numeric_limits<std::int64_t>::max() - *used) {
        q.limit = *q.remaining + *used;
      }
    }
    for (const auto& r : spec.reset) {
      if (auto t = time(r)) {
        q.reset = t->from_receipt;
        q.reset_resolution = t->resolution;
        q.reset_is_full_refill = spec.reset_is_full_refill;
        break;
      }
    }
    Duration window_step = std::chrono::seconds{1};
    if (spec.window) q.window = spec.window;
    if (spec.window_from) {
      if (auto t = time(*spec.window_from); t && t->from_receipt > Duration::zero()) {
        q.window = t->from_receipt;
        window_step = t->resolution;
      }
    }
    // No reset stated: whatever the window's state, all of it has passed by the
    // end of one window, so the quota is back by then at the latest.
    if (!q.reset && spec.window_bounds_wait && q.window && (any || q.limit || q.remaining)) {
      q.reset = q.window;
      q.reset_resolution = window_step;
    }
    if (spec.cost) q.cost = count(spec.cost, true);
    if (spec.partition_key) {
      const Found f = get(*spec.partition_key);
      if (f.present && !f.value.empty()) q.partition_key = std::string(f.value);
    }
    any = any || q.limit || q.remaining || q.reset;
    if (!any) out_.quota.pop_back();
  }

  // Azure resource providers: "Microsoft.Compute/GetVMScaleSet3Min;197,Microsoft.Compute/GetVMScaleSet30Min;1297".
  void policy_list(const QuotaSpec& spec) {
    const Found f = get(*spec.remaining);
    if (!f.present) return;
    std::string_view rest = f.value;
    std::size_t emitted = 0;
    constexpr std::size_t kMaxMembers = 64;
    while (!rest.empty() && emitted < kMaxMembers) {
      const std::size_t comma = rest.find(',');
      const std::string_view member = ascii::trim_ows(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      const std::size_t semi = member.rfind(';');
      const auto n = semi == std::string_view::npos ? std::nullopt
                                                    : parse_digits(ascii::trim_ows(member.substr(semi + 1)));
      if (!n || semi == 0) {
        warn_bad(Found{member, f.name, true, false}, "not name;count");
        continue;
      }
      QuotaObservation q;
      q.source = QuotaSource::kVendor;
      q.profile = p_.name;
      q.unit = spec.unit;
      q.policy = std::string(ascii::trim_ows(member.substr(0, semi)));
      q.remaining = *n;
      out_.quota.push_back(std::move(q));
      ++emitted;
    }
  }

  // Remaining-only counters named by a header prefix (Azure Resource Manager).
  void prefixed(const QuotaSpec& spec) {
    std::size_t emitted = 0;
    constexpr std::size_t kMaxCounters = 64;
    const auto& lines = h_.lines();
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const auto& h = lines[i];
      if (!ascii::istarts_with(h.name, spec.header_prefix) || h.name.size() == spec.header_prefix.size()) continue;
      read_.set(i);
      // A header another quota of the profile reads explicitly is not a counter.
      if (std::binary_search(p_.known_headers.begin(), p_.known_headers.end(), to_lower(h.name))) continue;
      if (emitted >= kMaxCounters) break;
      const Found f{h.value, h.name, true, false};
      const auto n = parse_count(h.value, CountFormat::kInteger, false);
      if (!n) {
        warn_bad(f, "not a non-negative count");
        continue;
      }
      QuotaObservation q;
      q.source = QuotaSource::kVendor;
      q.profile = p_.name;
      q.unit = spec.unit;
      q.policy = to_lower(std::string_view(h.name).substr(spec.header_prefix.size()));
      q.remaining = *n;
      out_.quota.push_back(std::move(q));
      ++emitted;
    }
  }

  // The server's own verdict. A later `false` overrides an earlier `true`: a
  // verdict can end retries, never grant more of them.
  void verdicts() {
    for (const auto& name : p_.retry_verdicts) {
      Found f;
      index_.for_each(name, [&](std::size_t i, const Header& h) {
        read_.set(i);
        if (!f.present) {
          f.present = true;
          f.value = h.value;
          f.name = h.name;
        }
        return true;
      });
      if (!f.present) continue;
      const std::string_view v = ascii::trim_ows(f.value);
      bool verdict = false;
      if (ascii::iequals(v, "true")) {
        verdict = true;
      } else if (!ascii::iequals(v, "false")) {
        warn_bad(f, "not true or false");
        continue;
      }
      if (!out_.should_retry || (*out_.should_retry && !verdict)) {
        out_.should_retry = verdict;
        out_.should_retry_source.assign(name);
      }
    }
  }

  void retry_delays() {
    for (const auto& spec : p_.retry_delays) {
      // Through time(): the same checks as a reset (absurd instants, a Unix
      // value too small to be one).
      const auto t = time(spec);
      if (!t) continue;
      if (!out_.retry_delay || t->from_receipt > out_.retry_delay->wait) {
        RetryHint hint;
        hint.kind = t->at ? RetryHint::Kind::kDate : RetryHint::Kind::kDelay;
        hint.wait = t->from_receipt;
        hint.date = t->at;
        hint.source = spec.header;
        out_.retry_delay = std::move(hint);
      }
    }
  }

 private:
  const Profile& p_;
  const detail::FieldIndex& index_;
  const HeaderList& h_;
  WallTime received_;
  std::optional<WallTime> date_;
  VendorReading& out_;
  detail::LineMask& read_;
};

}  // namespace

void detail::read_vendor(const Profile& profile, const FieldIndex& index, WallTime received,
                         std::optional<WallTime> server_date, VendorReading& out, LineMask& read) {
  VendorReader reader(profile, index, received, server_date, out, read);
  for (const auto& q : profile.quotas) reader.quota(q);
  reader.retry_delays();
  if (!profile.retry_verdicts.empty()) reader.verdicts();
}

}  // namespace abide
