// abide profiles [--json] [--profile-file FILE]... [NAME]
//
// Lists the vendor profiles (built in, plus any loaded with --profile-file), one
// line each, sorted by name: name, hosts, the headers it reads. With NAME, one
// profile in detail: hosts, statuses, each header with what its value means,
// the cost rule and the body hints. --json prints the same as JSON. A profile
// file is user input, so every string a profile carries is printed through
// safe_text.
//
// Exit status: 0 listed; 1 a profile file rejected, or no profile NAME; 2 usage.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "abide/profiles.h"
#include "command.h"
#include "common.h"

namespace abide::cli {
namespace cmd_profiles {  // private to this file (the CLI is compiled as one unit)

using ojson = nlohmann::ordered_json;

struct Options {
  std::vector<std::string> profile_files;
  bool json = false;
  std::string name;
};

// Widest list line before the header names are cut short (a terminal's worth).
constexpr std::size_t kLineWidth = 120;

std::string joined(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += safe_text(s, 256);
  }
  return out;
}

std::string_view time_meaning(TimeFormat f) {
  switch (f) {
    case TimeFormat::kUnixSeconds: return "Unix seconds";
    case TimeFormat::kUnixSecondsFraction: return "Unix seconds, fraction allowed";
    case TimeFormat::kDeltaSeconds: return "whole seconds from receipt";
    case TimeFormat::kFloatSeconds: return "seconds from receipt, fraction allowed";
    case TimeFormat::kMilliseconds: return "milliseconds from receipt";
    case TimeFormat::kGoDuration: return "a duration such as 1m30s, from receipt";
    case TimeFormat::kRfc3339: return "an RFC 3339 time";
    case TimeFormat::kHttpDate: return "an HTTP-date";
    case TimeFormat::kUnixMilliseconds: return "Unix milliseconds";
  }
  return "?";
}

std::string_view count_meaning(CountFormat f) {
  switch (f) {
    case CountFormat::kInteger: return "a whole number";
    case CountFormat::kNumber: return "a number, fraction allowed";
    case CountFormat::kUsedLimit: return "used/limit";
    case CountFormat::kPolicyList: return "name;count list, one quota each";
  }
  return "?";
}

// What a field's value is read as.
enum class Kind : std::uint8_t { kText, kCount, kTime };

// One header a profile reads, with its role ("limit", "reset", ...).
struct Field {
  std::string role;
  const FieldSpec* spec;
  Kind kind;
};

std::vector<Field> quota_fields(const QuotaSpec& q) {
  std::vector<Field> out;
  auto add = [&out](std::string role, const std::optional<FieldSpec>& f, Kind k) {
    if (f) out.push_back({std::move(role), &*f, k});
  };
  add("policy", q.policy_from, Kind::kText);
  add("limit", q.limit, Kind::kCount);
  add("remaining", q.remaining, Kind::kCount);
  add("used", q.used, Kind::kCount);
  add("used/limit", q.used_limit, Kind::kCount);
  for (const auto& r : q.reset) out.push_back({"reset", &r, Kind::kTime});
  add("window", q.window_from, Kind::kTime);
  add("partition", q.partition_key, Kind::kText);
  add("cost", q.cost, Kind::kCount);
  return out;
}

std::string format_name(const Field& f) {
  switch (f.kind) {
    case Kind::kCount: return std::string(to_string(f.spec->count));
    case Kind::kTime: return std::string(to_string(f.spec->time));
    case Kind::kText: break;
  }
  return "text";
}

std::string meaning(const Field& f) {
  switch (f.kind) {
    case Kind::kCount: return std::string(count_meaning(f.spec->count));
    case Kind::kTime: return std::string(time_meaning(f.spec->time));
    case Kind::kText: break;
  }
  return "a name, kept as is";
}

// "x-ratelimit-reset", "sforce-limit-info [api-usage]", "docker-ratelimit-source [first member]".
std::string field_header(const FieldSpec& f) {
  std::string s = safe_text(f.header, 256);
  if (!f.key.empty()) s += " [" + safe_text(f.key, 256) + "]";
  if (f.first_member) s += " [first member]";
  return s;
}

std::string host_words(const std::string& host) {
  const std::string h = safe_text(host, 256);
  if (!host.empty() && host.front() == '.') return h + " (" + h.substr(1) + " and its subdomains)";
  return h;
}

std::string statuses(const std::vector<int>& s) {
  std::string out;
  for (int v : s) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

std::string_view cost_meaning(CostRule r) {
  switch (r) {
    case CostRule::kOpenAI:
      return "tokens = the larger of the maximum output and the text bytes / 4; usage read from the answer";
    case CostRule::kAnthropic:
      return "input tokens = text bytes / 3, output tokens = max_tokens, tokens = both; usage read from the answer";
    case CostRule::kNone: break;
  }
  return "none";
}

std::string_view body_hint_meaning(BodyHintKind k) {
  switch (k) {
    case BodyHintKind::kGoogleRetryInfo: return "error.details[] google.rpc.RetryInfo retryDelay (\"52s\")";
    case BodyHintKind::kTryAgainSentence: return "\"try again in 1.5s\" in the error message";
  }
  return "?";
}

ojson body_hints_json(const std::vector<BodyHintKind>& kinds) {
  ojson a = ojson::array();
  for (const BodyHintKind k : kinds) a.push_back(std::string(to_string(k)));
  return a;
}

// ---- the list -----------------------------------------------------------------------

std::vector<const Profile*> sorted(const ProfileRegistry& registry) {
  std::vector<const Profile*> all = registry.all();
  std::sort(all.begin(), all.end(), [](const Profile* a, const Profile* b) { return a->name < b->name; });
  return all;
}

std::string list_line(const Profile& p, std::size_t name_width) {
  std::string line = safe_text(p.name, 256);
  line.resize(std::max(line.size(), name_width), ' ');
  line += "  ";
  line += p.hosts.empty() ? std::string("(no hosts: --profile ") + safe_text(p.name, 256) + ")" : joined(p.hosts, ", ");
  line += "  ";
  // Header names while they fit; the rest is counted, `abide profiles NAME` shows it.
  std::size_t shown = 0;
  std::string headers;
  for (const auto& h : p.known_headers) {
    const std::string name = safe_text(h, 256);
    const std::size_t more = p.known_headers.size() - shown - 1;
    const std::string tail = more > 0 ? " +" + std::to_string(more) + " more" : "";
    if (shown > 0 && line.size() + headers.size() + 1 + name.size() + tail.size() > kLineWidth) break;
    headers += (headers.empty() ? "" : " ") + name;
    ++shown;
  }
  if (shown < p.known_headers.size()) headers += " +" + std::to_string(p.known_headers.size() - shown) + " more";
  // Such a profile still says which statuses mean "limited" (Retry-After is read for every host).
  if (headers.empty()) headers = "(no vendor headers)";
  return line + headers + "\n";
}

ojson strings_json(const std::vector<std::string>& v) {
  ojson a = ojson::array();
  for (const auto& s : v) a.push_back(safe_text(s, 256));
  return a;
}

ojson summary_json(const Profile& p) {
  ojson j;
  j["name"] = safe_text(p.name, 256);
  j["description"] = safe_text(p.description);
  j["file"] = safe_text(p.file);
  j["hosts"] = strings_json(p.hosts);
  j["headers"] = strings_json(p.known_headers);
  return j;
}

// ---- one profile ----------------------------------------------------------------------

ojson field_json(const Field& f) {
  ojson j;
  j["role"] = f.role;
  j["header"] = safe_text(f.spec->header, 256);
  j["key"] = f.spec->key.empty() ? ojson(nullptr) : ojson(safe_text(f.spec->key, 256));
  j["first_member"] = f.spec->first_member;
  j["format"] = format_name(f);
  j["meaning"] = meaning(f);
  return j;
}

ojson detail_json(const Profile& p) {
  ojson j = summary_json(p);
  j["limited_statuses"] = p.limited_statuses;
  j["limited_statuses_with_signal"] = p.limited_statuses_with_signal;
  ojson delays = ojson::array();
  for (const auto& d : p.retry_delays) delays.push_back(field_json({"retry delay", &d, Kind::kTime}));
  j["retry_delays"] = delays;
  j["retry_verdicts"] = strings_json(p.retry_verdicts);
  j["ietf_prefixes"] = strings_json(p.ietf_prefixes);
  j["informational"] = strings_json(p.informational);
  j["costs"] = p.costs == CostRule::kNone ? ojson(nullptr) : ojson(std::string(to_string(p.costs)));
  j["body_hints"] = body_hints_json(p.body_hints);
  ojson quotas = ojson::array();
  for (const auto& q : p.quotas) {
    ojson qj;
    qj["policy"] = q.policy.empty() ? ojson(nullptr) : ojson(safe_text(q.policy, 256));
    qj["unit"] = safe_text(q.unit, 256);
    qj["window_s"] = q.window ? ojson(std::chrono::duration<double>(*q.window).count()) : ojson(nullptr);
    qj["header_prefix"] = q.header_prefix.empty() ? ojson(nullptr) : ojson(safe_text(q.header_prefix, 256));
    qj["reset_is_full_refill"] = q.reset_is_full_refill;
    qj["window_bounds_wait"] = q.window_bounds_wait;
    ojson fields = ojson::array();
    for (const auto& f : quota_fields(q)) fields.push_back(field_json(f));
    qj["fields"] = fields;
    quotas.push_back(qj);
  }
  j["quotas"] = quotas;
  return j;
}

std::string field_text(const Field& f) {
  std::string role = f.role;
  role.resize(std::max<std::size_t>(role.size(), 11), ' ');
  return "    " + role + " " + field_header(*f.spec) + ": " + meaning(f) + " (" + format_name(f) + ")\n";
}

std::string detail_text(const Profile& p) {
  std::string out = safe_text(p.name, 256);
  if (!p.description.empty()) out += ": " + safe_text(p.description);
  out += "\n  file: " + safe_text(p.file) + "\n";
  if (p.hosts.empty()) {
    out += "  hosts: none (selected with --profile " + safe_text(p.name, 256) + " only)\n";
  } else {
    out += "  hosts:\n";
    for (const auto& h : p.hosts) out += "    " + host_words(h) + "\n";
  }
  out += "  limited statuses: " + statuses(p.limited_statuses);
  if (!p.limited_statuses_with_signal.empty()) {
    out += "; with a Retry-After or an exhausted quota: " + statuses(p.limited_statuses_with_signal);
  }
  out += "\n";
  if (!p.retry_delays.empty()) {
    out += "  retry delays (the longest valid one counts):\n";
    for (const auto& d : p.retry_delays) out += field_text({"delay", &d, Kind::kTime});
  }
  if (!p.retry_verdicts.empty()) out += "  retry verdict (true or false): " + joined(p.retry_verdicts, ", ") + "\n";
  if (!p.ietf_prefixes.empty()) {
    out += "  IETF RateLimit fields also read under the prefixes: " + joined(p.ietf_prefixes, ", ") + "\n";
  }
  for (std::size_t i = 0; i < p.quotas.size(); ++i) {
    const QuotaSpec& q = p.quotas[i];
    out += "  quota " + std::to_string(i + 1);
    if (!q.policy.empty()) out += " \"" + safe_text(q.policy, 256) + "\"";
    out += ", in " + safe_text(q.unit, 256);
    if (q.window) out += ", window " + std::to_string(std::chrono::duration<double>(*q.window).count()) + " s";
    out += ":\n";
    if (!q.header_prefix.empty()) {
      out += "    every header starting with " + safe_text(q.header_prefix, 256) +
             ": remaining count of the quota its name ends with\n";
    }
    for (const auto& f : quota_fields(q)) out += field_text(f);
    if (q.reset_is_full_refill) out += "    (the reset is when the quota is full again, not the next request)\n";
    if (q.window_bounds_wait) out += "    (no reset sent: the window is the longest wait)\n";
  }
  if (!p.informational.empty()) out += "  known, not used: " + joined(p.informational, ", ") + "\n";
  if (p.costs != CostRule::kNone) {
    out += "  costs: " + std::string(to_string(p.costs)) + " (" + std::string(cost_meaning(p.costs)) + ")\n";
  }
  if (!p.body_hints.empty()) {
    out += "  waits in a limited answer's body (the first found counts):\n";
    for (const BodyHintKind k : p.body_hints) {
      out += "    " + std::string(to_string(k)) + ": " + std::string(body_hint_meaning(k)) + "\n";
    }
  }
  return out;
}

int run(const Options& o) {
  auto profiles = load_profiles(o.profile_files);
  if (!profiles) return reject("profile rejected: " + safe_text(profiles.error().error.what()));
  ProfileRegistry& registry = *profiles;
  // Strings are printable ASCII by now; the handler is the last guard against a
  // throw on invalid UTF-8.
  const auto dump = [](const ojson& j) { return j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n"; };
  if (!o.name.empty()) {
    const Profile* p = registry.find(o.name);
    if (p == nullptr) return reject("unknown profile " + safe_text(o.name, 256) + " (abide profiles lists them)");
    std::cout << (o.json ? dump(detail_json(*p)) : detail_text(*p));
    return kExitOk;
  }
  const auto all = sorted(registry);
  if (o.json) {
    ojson a = ojson::array();
    for (const Profile* p : all) a.push_back(summary_json(*p));
    std::cout << dump(a);
    return kExitOk;
  }
  std::size_t width = 0;
  for (const Profile* p : all) width = std::max(width, safe_text(p->name, 256).size());
  for (const Profile* p : all) std::cout << list_line(*p, width);
  return kExitOk;
}

const Registration profiles_cmd{
    {"profiles"},
    "List the vendor profiles with their hosts and headers, or show one in detail",
    [](CLI::App& app) -> Run {
      auto o = std::make_shared<Options>();
      app.add_option("--profile-file", o->profile_files,
                     "Load a profile from this JSON file first, to check it (repeat the flag for more)")
          ->allow_extra_args(false);
      app.add_flag("--json", o->json, "Print JSON instead of words");
      app.add_option("name", o->name, "A profile to show in detail (default: list them all)");
      return [o] { return run(*o); };
    }};

}  // namespace cmd_profiles
}  // namespace abide::cli
