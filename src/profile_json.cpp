// One vendor profile from its JSON text (abide/profiles.h, profiles/README.md):
// every field checked, every rejection naming the file and the field.
#include "abide/profiles.h"

#include <algorithm>
#include <string>
#include <utility>

#include "ascii.h"
#include "json_reader.h"
#include "profile_values.h"
#include "profiles_internal.h"

namespace abide {

using detail::to_lower;

std::string ProfileError::what() const {
  std::string s = file.empty() ? "<profile>" : file;
  if (!field.empty()) s.append(": ").append(field);
  s.append(": ").append(message);
  if (line > 0) s.append(" (line ").append(std::to_string(line)).append(")");
  return s;
}

// ---- cost rules and body hints -------------------------------------------------------

std::string_view to_string(CostRule r) noexcept {
  switch (r) {
    case CostRule::kNone: return "none";
    case CostRule::kOpenAI: return "openai";
    case CostRule::kAnthropic: return "anthropic";
  }
  return "none";
}

std::string_view to_string(BodyHintKind k) noexcept {
  switch (k) {
    case BodyHintKind::kGoogleRetryInfo: return "google_retry_info";
    case BodyHintKind::kTryAgainSentence: return "try_again_sentence";
  }
  return "";
}

// "none" is not accepted: a profile without a rule leaves the field out.
std::optional<CostRule> cost_rule_from_string(std::string_view s) noexcept {
  for (CostRule r : {CostRule::kOpenAI, CostRule::kAnthropic}) {
    if (s == to_string(r)) return r;
  }
  return std::nullopt;
}

std::optional<BodyHintKind> body_hint_kind_from_string(std::string_view s) noexcept {
  for (BodyHintKind k : {BodyHintKind::kGoogleRetryInfo, BodyHintKind::kTryAgainSentence}) {
    if (s == to_string(k)) return k;
  }
  return std::nullopt;
}

// ---- loading ----------------------------------------------------------------------

namespace {

using detail::JsonValue;

// Thrown nowhere: every check returns a ProfileError through this context.
class Loader {
 public:
  explicit Loader(std::string_view file) : file_(file) {}

  std::optional<ProfileError> error;

  bool fail(const std::string& path, const JsonValue& v, std::string message) {
    if (!error) error = ProfileError{std::string(file_), path, std::move(message), v.line};
    return false;
  }

  bool expect(const std::string& path, const JsonValue& v, JsonValue::Kind kind) {
    if (v.kind == kind) return true;
    return fail(path, v,
                "expected " + std::string(detail::to_string(kind)) + ", found " +
                    std::string(detail::to_string(v.kind)));
  }

  bool only_members(const std::string& path, const JsonValue& obj, std::initializer_list<std::string_view> allowed) {
    for (const auto& m : obj.members) {
      if (std::find(allowed.begin(), allowed.end(), m.key) == allowed.end()) {
        return fail(join(path, m.key), m.value, "unknown field");
      }
    }
    return true;
  }

  static std::string join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }
  static std::string index(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

  bool string(const std::string& path, const JsonValue& v, std::string& out, bool non_empty = true) {
    if (!expect(path, v, JsonValue::Kind::kString)) return false;
    if (non_empty && v.string.empty()) return fail(path, v, "must not be empty");
    if (v.string.size() > 1024) return fail(path, v, "longer than 1024 bytes");
    out = v.string;
    return true;
  }

  bool boolean(const std::string& path, const JsonValue& v, bool& out) {
    if (!expect(path, v, JsonValue::Kind::kBool)) return false;
    out = v.boolean;
    return true;
  }

  bool header_name(const std::string& path, const JsonValue& v, std::string& out) {
    if (!string(path, v, out)) return false;
    if (!std::all_of(out.begin(), out.end(), ascii::is_tchar)) return fail(path, v, "not a valid header name");
    out = to_lower(out);
    return true;
  }

  bool string_list(const std::string& path, const JsonValue& v, std::vector<std::string>& out, bool headers) {
    if (!expect(path, v, JsonValue::Kind::kArray)) return false;
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      std::string s;
      if (headers ? !header_name(index(path, i), v.items[i], s) : !string(index(path, i), v.items[i], s)) return false;
      out.push_back(std::move(s));
    }
    return true;
  }

  bool status_list(const std::string& path, const JsonValue& v, std::vector<int>& out) {
    if (!expect(path, v, JsonValue::Kind::kArray)) return false;
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      const auto& item = v.items[i];
      if (item.kind != JsonValue::Kind::kNumber || !item.integer || *item.integer < 100 || *item.integer > 999) {
        return fail(index(path, i), item, "expected an HTTP status (an integer from 100 to 999)");
      }
      out.push_back(static_cast<int>(*item.integer));
    }
    return true;
  }

  bool cost_rule(const JsonValue& v, CostRule& out) {
    if (!expect("costs", v, JsonValue::Kind::kString)) return false;
    const auto r = cost_rule_from_string(v.string);
    if (!r) {
      return fail("costs", v,
                  "unknown cost rule " + detail::shown(v.string) + " (expected \"openai\" or \"anthropic\")");
    }
    out = *r;
    return true;
  }

  bool body_hints(const JsonValue& v, std::vector<BodyHintKind>& out) {
    if (!expect("body_hints", v, JsonValue::Kind::kArray)) return false;
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      const JsonValue& item = v.items[i];
      if (!expect(index("body_hints", i), item, JsonValue::Kind::kString)) return false;
      const auto k = body_hint_kind_from_string(item.string);
      if (!k) {
        return fail(index("body_hints", i), item,
                    "unknown body hint " + detail::shown(item.string) +
                        " (expected \"google_retry_info\" or \"try_again_sentence\")");
      }
      if (std::find(out.begin(), out.end(), *k) != out.end()) {
        return fail(index("body_hints", i), item, detail::shown(item.string) + " is listed twice");
      }
      out.push_back(*k);
    }
    return true;
  }

  enum class Role { kCount, kRemaining, kUsedLimit, kTime, kWindow, kText };

  // A field spec: "header-name" or {"header": ..., "key": ..., "format": ...}.
  bool field(const std::string& path, const JsonValue& v, Role role, FieldSpec& out) {
    if (role == Role::kUsedLimit) out.count = CountFormat::kUsedLimit;
    if (v.kind == JsonValue::Kind::kString) return header_name(path, v, out.header);
    if (v.kind != JsonValue::Kind::kObject) {
      return fail(path, v, "expected a header name or an object with \"header\"");
    }
    if (!only_members(path, v, {"header", "key", "format", "first_member"})) return false;
    const JsonValue* header = v.find("header");
    if (header == nullptr) return fail(join(path, "header"), v, "missing");
    if (!header_name(join(path, "header"), *header, out.header)) return false;
    if (const JsonValue* key = v.find("key")) {
      if (!string(join(path, "key"), *key, out.key)) return false;
    }
    if (const JsonValue* fm = v.find("first_member")) {
      if (!boolean(join(path, "first_member"), *fm, out.first_member)) return false;
      if (out.first_member && !out.key.empty()) {
        return fail(join(path, "first_member"), *fm, "give key or first_member, not both");
      }
    }
    if (const JsonValue* format = v.find("format")) {
      const std::string fpath = join(path, "format");
      if (!expect(fpath, *format, JsonValue::Kind::kString)) return false;
      switch (role) {
        case Role::kTime:
        case Role::kWindow: {
          auto f = time_format_from_string(format->string);
          if (!f) return fail(fpath, *format, "unknown time format \"" + format->string + "\"");
          if (role == Role::kWindow && is_absolute(*f)) {
            return fail(fpath, *format, "a window is a length; \"" + format->string + "\" is a point in time");
          }
          out.time = *f;
          break;
        }
        case Role::kCount:
        case Role::kRemaining:
        case Role::kUsedLimit: {
          auto f = count_format_from_string(format->string);
          if (!f) return fail(fpath, *format, "unknown count format \"" + format->string + "\"");
          const bool ok = role == Role::kUsedLimit   ? *f == CountFormat::kUsedLimit
                          : role == Role::kRemaining ? (*f == CountFormat::kInteger || *f == CountFormat::kNumber ||
                                                        *f == CountFormat::kPolicyList)
                                                     : (*f == CountFormat::kInteger || *f == CountFormat::kNumber);
          if (!ok) return fail(fpath, *format, "format \"" + format->string + "\" is not allowed here");
          out.count = *f;
          break;
        }
        case Role::kText: return fail(fpath, *format, "this field takes no format");
      }
    }
    return true;
  }

  bool quota(const std::string& path, const JsonValue& v, QuotaSpec& q) {
    if (!expect(path, v, JsonValue::Kind::kObject)) return false;
    if (!only_members(path, v,
                      {"policy", "policy_from", "limit", "remaining", "used", "used_limit", "reset", "window_s",
                       "window", "partition_key", "cost", "unit", "header_prefix", "reset_meaning",
                       "window_bounds_wait"})) {
      return false;
    }
    auto opt_field = [&](std::string_view key, Role role, std::optional<FieldSpec>& out) {
      const JsonValue* f = v.find(key);
      if (f == nullptr) return true;
      FieldSpec spec;
      if (!field(join(path, key), *f, role, spec)) return false;
      out = std::move(spec);
      return true;
    };
    if (const JsonValue* p = v.find("policy")) {
      if (!string(join(path, "policy"), *p, q.policy, false)) return false;
    }
    if (!opt_field("policy_from", Role::kText, q.policy_from) || !opt_field("limit", Role::kCount, q.limit) ||
        !opt_field("remaining", Role::kRemaining, q.remaining) || !opt_field("used", Role::kCount, q.used) ||
        !opt_field("used_limit", Role::kUsedLimit, q.used_limit) ||
        !opt_field("window", Role::kWindow, q.window_from) ||
        !opt_field("partition_key", Role::kText, q.partition_key) || !opt_field("cost", Role::kCount, q.cost)) {
      return false;
    }
    if (const JsonValue* r = v.find("reset")) {
      const std::string rpath = join(path, "reset");
      if (r->kind == JsonValue::Kind::kArray) {
        if (r->items.empty()) return fail(rpath, *r, "must not be empty");
        for (std::size_t i = 0; i < r->items.size(); ++i) {
          FieldSpec spec;
          if (!field(index(rpath, i), r->items[i], Role::kTime, spec)) return false;
          q.reset.push_back(std::move(spec));
        }
      } else {
        FieldSpec spec;
        if (!field(rpath, *r, Role::kTime, spec)) return false;
        q.reset.push_back(std::move(spec));
      }
    }
    if (const JsonValue* w = v.find("window_s")) {
      const std::string wpath = join(path, "window_s");
      if (w->kind != JsonValue::Kind::kNumber || !(w->number > 0) || w->number > 1e9) {
        return fail(wpath, *w, "expected a number of seconds greater than 0");
      }
      q.window = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(w->number));
    }
    if (q.window && q.window_from) return fail(join(path, "window"), v, "give window or window_s, not both");
    if (const JsonValue* u = v.find("unit")) {
      if (!string(join(path, "unit"), *u, q.unit)) return false;
    }
    if (const JsonValue* hp = v.find("header_prefix")) {
      if (!header_name(join(path, "header_prefix"), *hp, q.header_prefix)) return false;
    }
    if (const JsonValue* m = v.find("reset_meaning")) {
      const std::string mpath = join(path, "reset_meaning");
      if (!expect(mpath, *m, JsonValue::Kind::kString)) return false;
      if (m->string == "full_refill") {
        q.reset_is_full_refill = true;
      } else if (m->string != "next_request") {
        return fail(mpath, *m, "expected \"next_request\" or \"full_refill\"");
      }
      if (q.reset.empty()) return fail(mpath, *m, "the quota reads no reset");
    }
    if (const JsonValue* b = v.find("window_bounds_wait")) {
      const std::string bpath = join(path, "window_bounds_wait");
      if (!boolean(bpath, *b, q.window_bounds_wait)) return false;
      if (q.window_bounds_wait && !q.window && !q.window_from) return fail(bpath, *b, "the quota has no window");
    }
    if (!q.limit && !q.remaining && !q.used && !q.used_limit && q.reset.empty() && q.header_prefix.empty()) {
      return fail(path, v,
                  "a quota must read at least one of limit, remaining, used, used_limit, reset, header_prefix");
    }
    return true;
  }

  bool profile(const JsonValue& root, Profile& p) {
    if (!expect("", root, JsonValue::Kind::kObject)) return false;
    if (!only_members("", root,
                      {"name", "description", "docs", "hosts", "limited_statuses", "limited_statuses_with_signal",
                       "retry_delays", "retry_verdicts", "limited_unprocessed", "ietf_prefixes", "informational",
                       "quotas", "costs", "body_hints"})) {
      return false;
    }
    const JsonValue* name = root.find("name");
    if (name == nullptr) return fail("name", root, "missing");
    if (!string("name", *name, p.name)) return false;
    if (!std::all_of(p.name.begin(), p.name.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || ascii::is_digit(c) || c == '-' || c == '_'; })) {
      return fail("name", *name, "use lower-case letters, digits, '-' and '_'");
    }
    if (p.name == "none") return fail("name", *name, "\"none\" is reserved (it disables profiles)");
    if (const JsonValue* d = root.find("description")) {
      if (!string("description", *d, p.description, false)) return false;
    }
    if (const JsonValue* d = root.find("docs")) {
      std::string ignored;
      if (!string("docs", *d, ignored, false)) return false;
    }
    if (const JsonValue* h = root.find("hosts")) {
      if (!string_list("hosts", *h, p.hosts, false)) return false;
      for (std::size_t i = 0; i < p.hosts.size(); ++i) {
        auto& host = p.hosts[i];
        host = to_lower(host);
        const bool ok = host != "." && std::all_of(host.begin(), host.end(), [](char c) {
                          return (c >= 'a' && c <= 'z') || ascii::is_digit(c) || c == '-' || c == '.' || c == ':';
                        });
        if (!ok) return fail(index("hosts", i), h->items[i], "not a host name (or .domain suffix)");
      }
    }
    if (const JsonValue* s = root.find("limited_statuses")) {
      if (!status_list("limited_statuses", *s, p.limited_statuses)) return false;
    } else {
      p.limited_statuses = {429};
    }
    if (const JsonValue* s = root.find("limited_statuses_with_signal")) {
      if (!status_list("limited_statuses_with_signal", *s, p.limited_statuses_with_signal)) return false;
    }
    if (const JsonValue* r = root.find("retry_delays")) {
      if (!expect("retry_delays", *r, JsonValue::Kind::kArray)) return false;
      for (std::size_t i = 0; i < r->items.size(); ++i) {
        FieldSpec spec;
        if (!field(index("retry_delays", i), r->items[i], Role::kTime, spec)) return false;
        p.retry_delays.push_back(std::move(spec));
      }
    }
    if (const JsonValue* x = root.find("retry_verdicts")) {
      if (!string_list("retry_verdicts", *x, p.retry_verdicts, true)) return false;
    }
    if (const JsonValue* x = root.find("limited_unprocessed")) {
      // The citation itself: a claim that lets a POST repeat must say where it comes from.
      if (!string("limited_unprocessed", *x, p.limited_unprocessed)) return false;
    }
    if (const JsonValue* x = root.find("ietf_prefixes")) {
      if (!string_list("ietf_prefixes", *x, p.ietf_prefixes, true)) return false;
    }
    if (const JsonValue* x = root.find("informational")) {
      if (!string_list("informational", *x, p.informational, true)) return false;
    }
    if (const JsonValue* q = root.find("quotas")) {
      if (!expect("quotas", *q, JsonValue::Kind::kArray)) return false;
      for (std::size_t i = 0; i < q->items.size(); ++i) {
        QuotaSpec spec;
        if (!quota(index("quotas", i), q->items[i], spec)) return false;
        p.quotas.push_back(std::move(spec));
      }
    }
    if (const JsonValue* c = root.find("costs")) {
      if (!cost_rule(*c, p.costs)) return false;
    }
    if (const JsonValue* b = root.find("body_hints")) {
      if (!body_hints(*b, p.body_hints)) return false;
    }
    if (p.quotas.empty() && p.retry_delays.empty() && p.retry_verdicts.empty() && p.limited_statuses.empty() &&
        p.limited_statuses_with_signal.empty()) {
      return fail("quotas", root, "the profile reads nothing");
    }
    return true;
  }

 private:
  std::string_view file_;
};

void compute_known(Profile& p) {
  auto add = [&](const std::optional<FieldSpec>& f) {
    if (f) p.known_headers.push_back(f->header);
  };
  for (const auto& q : p.quotas) {
    add(q.policy_from);
    add(q.limit);
    add(q.remaining);
    add(q.used);
    add(q.used_limit);
    add(q.window_from);
    add(q.partition_key);
    add(q.cost);
    for (const auto& r : q.reset) p.known_headers.push_back(r.header);
  }
  for (const auto& r : p.retry_delays) p.known_headers.push_back(r.header);
  for (const auto& h : p.retry_verdicts) p.known_headers.push_back(h);
  for (const auto& h : p.informational) p.known_headers.push_back(h);
  for (const auto& prefix : p.ietf_prefixes) {
    for (std::string_view base :
         {"ratelimit", "ratelimit-policy", "ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"}) {
      p.known_headers.push_back(prefix + std::string(base));
    }
  }
  std::sort(p.known_headers.begin(), p.known_headers.end());
  p.known_headers.erase(std::unique(p.known_headers.begin(), p.known_headers.end()), p.known_headers.end());
  p.overrides_ietf_fields = std::any_of(p.known_headers.begin(), p.known_headers.end(), [](const std::string& h) {
    return h == "ratelimit-limit" || h == "ratelimit-remaining" || h == "ratelimit-reset";
  });
}

}  // namespace

Result<Profile, ProfileError> parse_profile(std::string_view text, std::string_view file) {
  auto json = detail::parse_json(text);
  if (!json) {
    const auto& e = json.error();
    return fail(ProfileError{std::string(file), "",
                             "invalid JSON: " + e.message + " at column " + std::to_string(e.column), e.line});
  }
  Loader loader(file);
  Profile p;
  p.file = std::string(file);
  if (!loader.profile(*json, p)) return fail(std::move(*loader.error));
  compute_known(p);
  return p;
}

}  // namespace abide
