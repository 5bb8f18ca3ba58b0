// The proxy's rules that need no socket (see proxy_rules.h).
#include "proxy/proxy_rules.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascii.h"
#include "decimal.h"
#include "http1/response_framing.h"
#include "llm/cost_estimate.h"

namespace abide::proxy {
namespace proxy_rules_cpp {  // private to this file (the tool is compiled in unity batches)

constexpr std::size_t kShownUrl = 128;               // of a URL in an error message
constexpr std::size_t kShownValue = 32;              // of a caller's field value in an error message
constexpr std::size_t kShownReason = 256;            // of the engine's reason in an answer body
constexpr std::int64_t kMaxWaitSeconds = 2'678'400;  // 31 days: longer is a mistake, not a budget

bool starts_with_ci(std::string_view s, std::string_view prefix) noexcept {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

bool is_abide_field(std::string_view name) noexcept { return starts_with_ci(name, "abide-"); }

// The field names that every Connection field lists (RFC 9110 7.6.1): they
// are this hop's and never go further. Kept lower-cased and sorted, so that a
// head with many options and many fields (either side may send one) costs
// n log n, not n times m.
class ConnectionOptions {
 public:
  explicit ConnectionOptions(const HeaderList& headers) {
    for (const std::string_view value : headers.all("Connection")) {
      std::string_view rest = value;
      while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        const std::string_view item = ascii::trim_ows(rest.substr(0, comma));
        if (!item.empty()) names_.push_back(lower(item));
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
    }
    std::sort(names_.begin(), names_.end());
    names_.erase(std::unique(names_.begin(), names_.end()), names_.end());
  }

  bool lists(std::string_view field) const {
    return !names_.empty() && std::binary_search(names_.begin(), names_.end(), lower(field));
  }

 private:
  static std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = ascii::to_lower(c);
    return out;
  }
  std::vector<std::string> names_;
};

bool one_of(std::string_view name, std::initializer_list<std::string_view> names) noexcept {
  return std::any_of(names.begin(), names.end(), [&](std::string_view n) { return iequals(n, name); });
}

// Hop-by-hop in either direction (RFC 9110 7.6.1), besides Connection's options.
bool hop_by_hop(std::string_view name) noexcept {
  return one_of(name,
                {"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding", "Upgrade"});
}

// Whole seconds for Retry-After: rounded up, so that a caller waiting them is
// never early; 0 only when the time has come.
std::int64_t whole_seconds_up(Duration left) noexcept {
  if (left <= Duration::zero()) return 0;
  const std::int64_t ns = left.count();
  constexpr std::int64_t kNs = 1'000'000'000;
  return ns / kNs + (ns % kNs != 0 ? 1 : 0);
}

// Seconds with three decimals ("1.250"), rounded to the nearest millisecond.
std::string seconds_3(Duration d) {
  if (d < Duration::zero()) d = Duration::zero();
  const std::int64_t ms = d.count() / 1'000'000 + (d.count() % 1'000'000 >= 500'000 ? 1 : 0);
  std::array<char, 48> buf{};
  std::snprintf(buf.data(), buf.size(), "%lld.%03lld", static_cast<long long>(ms / 1000),
                static_cast<long long>(ms % 1000));
  return buf.data();
}

using http1::content_length;

// What of an upstream answer's fields reaches the caller.
struct AnswerFilter {
  bool keep_content_length = false;  // a HEAD's, a 204's or a 304's: kept as sent
  bool drop_content = false;         // the body is the proxy's own: the representation fields go
  bool drop_retry_after = false;     // replaced by the proxy's (with the dialect's delays)
  bool drop_date = false;            // a kept answer's: its time is past
  const Dialect* dialect = nullptr;  // set: the answer is not the last word; its verdicts go
};

// The verdict fields every answer that says "later" drops, whatever the
// dialect: an upstream's "true" never reaches a caller the proxy holds back.
constexpr std::array<std::string_view, 2> kKnownVerdicts = {"x-should-retry", "stripe-should-retry"};

bool names_in(std::string_view name, const std::vector<std::string>& names) noexcept {
  return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return iequals(n, name); });
}

bool verdict_field(std::string_view name, const Dialect& d) noexcept {
  return names_in(name, d.verdicts) ||
         std::any_of(kKnownVerdicts.begin(), kKnownVerdicts.end(), [&](std::string_view n) { return iequals(n, name); });
}

bool representation_field(std::string_view name) noexcept {
  return starts_with_ci(name, "content-") || one_of(name, {"Digest", "ETag", "Last-Modified"});
}

void copy_answer_fields(const HeaderList& server, const AnswerFilter& filter, HeaderList& out) {
  const ConnectionOptions options(server);
  out.reserve(server.size() + 5);
  for (const Header& h : server.lines()) {
    if (hop_by_hop(h.name) || options.lists(h.name) || is_abide_field(h.name)) continue;
    if (filter.drop_content && representation_field(h.name)) continue;
    if (!filter.drop_content && iequals(h.name, "Content-Length") && !filter.keep_content_length) continue;
    if (filter.drop_retry_after && iequals(h.name, "Retry-After")) continue;
    if (filter.drop_date && iequals(h.name, "Date")) continue;
    if (filter.dialect != nullptr) {
      if (verdict_field(h.name, *filter.dialect)) continue;
      if (filter.drop_retry_after && names_in(h.name, filter.dialect->delays)) continue;
    }
    out.add(h.name, h.value);
  }
}

// Abide-Outcome, Abide-Attempts, Abide-Waited, and for a request that did
// not end done with a known permitted time, its Retry-After and
// Abide-Not-Before.
void add_outcome_fields(HeaderList& out, std::string_view outcome_name, std::size_t attempts, Duration waited,
                        std::optional<WallTime> not_before, WallTime now) {
  out.add("Abide-Outcome", outcome_name);
  out.add("Abide-Attempts", std::to_string(attempts));
  out.add("Abide-Waited", seconds_3(waited));
  if (not_before) {
    out.add("Retry-After",
            std::to_string(whole_seconds_up(saturating_sub(not_before->time_since_epoch(), now.time_since_epoch()))));
    out.add("Abide-Not-Before", rfc3339_millis(*not_before));
  }
}

// The caller may not repeat the request yet: the dialect's verdicts, and its
// millisecond delays to the permitted time (rounded up: never before it).
void add_dialect_fields(HeaderList& out, const Dialect& dialect, std::optional<WallTime> not_before, WallTime now) {
  for (const std::string& v : dialect.verdicts) out.add(v, "false");
  if (!not_before) return;
  const Duration left = saturating_sub(not_before->time_since_epoch(), now.time_since_epoch());
  const auto ms = left > Duration::zero() ? std::chrono::ceil<std::chrono::milliseconds>(left).count() : 0;
  for (const std::string& d : dialect.delays_ms) out.add(d, std::to_string(ms));
}

// Whether a server's answer with this status, to this method, has no body (RFC 9110 6.4.1).
bool bodiless(int status, bool head_request) noexcept {
  return head_request || status == 204 || status == 304 || (status >= 100 && status < 200);
}

// The status of an answer the proxy makes in place of the upstream's (see
// outcome_answer in the header).
int own_status(const RequestOutcome& o) {
  if (o.ambiguous) return 502;  // cancelled after sending too: it may have been applied
  if (o.kind == OutcomeKind::kCancelled) return 503;
  // The upstream stalled past the read timeout (nginx: 504 Gateway Timeout).
  if (!o.attempts.empty() && o.attempts.back().timed_out) return 504;
  const bool later = o.kind == OutcomeKind::kDeferred || o.kind == OutcomeKind::kDeadlineExceeded;
  const bool exhausted = o.kind == OutcomeKind::kExhausted;
  if (o.response) {
    const int s = o.response->status;
    if ((later || exhausted) && (s == 429 || s == 503)) return s;
    if (later) return 429;  // limited in a status of the vendor's (GitHub's 403)
    return 502;
  }
  if ((later || exhausted) && o.attempts.empty()) return 429;  // nothing was sent: the wait is the proxy's own
  return 502;  // transport failures, and not_retryable without an answer
}

// Abide-Max-Wait's value: decimal seconds, at most three fraction digits,
// 0 to 31 days. The message names the field and quotes at most 32 bytes of it.
Result<Duration, ErrorMessage> parse_max_wait(std::string_view v) {
  const auto quoted = [&] { return "Abide-Max-Wait \"" + printable(v, kShownValue) + "\""; };
  if (!v.empty() && (v.front() == '-' || v.front() == '+')) {
    return fail(quoted() + " has a sign: it wants seconds from 0 to 2678400 (31 days)");
  }
  // Saturated just past the largest wait: too long is told below, whatever its length.
  const auto whole_read = abide::detail::read_decimal<std::int64_t, kMaxWaitSeconds + 1>(v);
  std::size_t i = whole_read.digits;
  const std::int64_t whole = whole_read.value;
  if (i == 0) return fail(quoted() + " is not decimal seconds (such as 2 or 0.5)");
  std::int64_t fraction_ns = 0;
  if (i < v.size() && v[i] == '.') {
    ++i;
    std::size_t digits = 0;
    std::int64_t scale = 100'000'000;
    while (i < v.size() && ascii::is_digit(v[i])) {
      if (++digits > 3) return fail(quoted() + " has more than three digits after the point");
      fraction_ns += (v[i] - '0') * scale;
      scale /= 10;
      ++i;
    }
    if (digits == 0) return fail(quoted() + " has no digit after the point");
  }
  if (i != v.size()) return fail(quoted() + " is not decimal seconds (such as 2 or 0.5)");
  if (whole > kMaxWaitSeconds || (whole == kMaxWaitSeconds && fraction_ns > 0)) {
    return fail(quoted() + " is more than 2678400 seconds (31 days)");
  }
  return Duration{std::chrono::seconds{whole}} + Duration{fraction_ns};
}

// The credential fields that make separate quotas (lower case).
constexpr std::array<std::string_view, 6> kCredentialFields = {"authorization", "x-api-key",     "api-key",
                                                               "x-auth-token",  "private-token", "x-goog-api-key"};

// RFC 3986 2.3: the characters a URI may hold unescaped without meaning.
bool unreserved(char c) {
  return ascii::is_alpha(c) || ascii::is_digit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The path with each %XX that encodes an unreserved character decoded;
// nullopt when a '%' does not start an escape (then decoding could make a new
// one: "%%32e" would read "%2e").
std::optional<std::string> decode_unreserved(std::string_view path) {
  std::string out;
  out.reserve(path.size());
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '%') {
      out.push_back(path[i]);
      continue;
    }
    const int hi = i + 2 < path.size() ? hex_value(path[i + 1]) : -1;
    const int lo = hi >= 0 ? hex_value(path[i + 2]) : -1;
    if (lo < 0) return std::nullopt;
    const char c = static_cast<char>(hi * 16 + lo);
    if (unreserved(c)) {
      out.push_back(c);
    } else {
      out.append(path.substr(i, 3));
    }
    i += 2;
  }
  return out;
}

// RFC 3986 5.2.4 on an absolute path; nullopt when a ".." climbs above the root.
std::optional<std::string> remove_dot_segments(std::string_view path) {
  std::vector<std::string_view> kept;
  bool slash_after = false;  // the last segment was a dot segment: the path ends with "/"
  std::string_view rest = path.substr(1);
  while (true) {
    const std::size_t slash = rest.find('/');
    const std::string_view seg = rest.substr(0, slash);
    slash_after = seg == "." || seg == "..";
    if (seg == "..") {
      if (kept.empty()) return std::nullopt;
      kept.pop_back();
    } else if (seg != ".") {
      kept.push_back(seg);
    }
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  std::string out = "/";
  for (std::size_t i = 0; i < kept.size(); ++i) {
    if (i > 0) out.push_back('/');
    out.append(kept[i]);
  }
  if (slash_after && out.back() != '/') out.push_back('/');
  return out;
}

}  // namespace proxy_rules_cpp


Result<Route, ErrorMessage> parse_upstream(std::string_view spec) {
  using namespace proxy_rules_cpp;
  std::string_view url = spec;
  std::string profile;
  if (const std::size_t named = url.rfind(",profile="); named != std::string_view::npos) {
    profile = std::string(url.substr(named + 9));
    url = url.substr(0, named);
    const bool name_ok = !profile.empty() && std::all_of(profile.begin(), profile.end(), [](char c) {
      return ascii::is_lower(c) || ascii::is_digit(c) || c == '-' || c == '_';
    });
    if (profile.empty()) return fail("\",profile=\" names no profile");
    if (!name_ok) {
      return fail("profile name \"" + printable(profile, kShownValue) +
                  "\" is not lower-case letters, digits, '-' and '_'");
    }
  }
  const auto quoted = [&] { return "upstream URL \"" + printable(url, kShownUrl) + "\""; };
  std::optional<UrlOrigin> origin = parse_origin(url);
  if (!origin) return fail(quoted() + " is not an absolute http:// or https:// URL with a host");
  if (url.find_first_of("?#") != std::string_view::npos) return fail(quoted() + " has a query or fragment");
  const std::size_t authority = url.find("://") + 3;
  const std::string_view authority_text = url.substr(authority, url.find('/', authority) - authority);
  if (authority_text.find('@') != std::string_view::npos) {
    return fail(quoted() + " has userinfo: callers send their own credentials");
  }
  std::string_view path = origin->target;  // "/" at least
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  Route route;
  route.base = origin->origin + std::string(path);
  route.origin = std::move(*origin);
  route.profile = std::move(profile);
  return route;
}

Result<Route, ErrorMessage> parse_route(std::string_view spec) {
  using namespace proxy_rules_cpp;
  const auto quoted = [&] { return "route \"" + printable(spec, kShownUrl) + "\""; };
  const std::size_t eq = spec.find('=');
  if (eq == std::string_view::npos) return fail(quoted() + " is not /PREFIX=URL");
  std::string_view prefix = spec.substr(0, eq);
  if (prefix.empty() || prefix.front() != '/') return fail(quoted() + ": the prefix does not start with '/'");
  for (const char c : prefix) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '?' || c == '#' || u <= 0x20 || u >= 0x7f) {
      return fail(quoted() + ": the prefix has a '?', '#', space or control character");
    }
  }
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  auto route = parse_upstream(spec.substr(eq + 1));
  if (!route) return fail(quoted() + ": " + route.error().text);
  route->prefix = std::string(prefix);
  return route;
}

const Route* match_route(const std::vector<Route>& routes, std::string_view target) noexcept {
  const Route* best = nullptr;
  for (const Route& r : routes) {
    const std::string_view p = r.prefix;
    if (target.substr(0, p.size()) != p) continue;
    // A segment boundary: "/a" covers "/a", "/a/..." and "/a?...", never "/ab".
    if (!p.empty() && target.size() > p.size() && target[p.size()] != '/' && target[p.size()] != '?') continue;
    if (best == nullptr || p.size() > best->prefix.size()) best = &r;
  }
  return best;
}

Result<std::string, ErrorMessage> normalize_target(const std::vector<Route>& routes, std::string_view target) {
  using namespace proxy_rules_cpp;
  if (target.empty() || target.front() != '/') return std::string(target);
  const std::size_t q = target.find('?');
  const std::optional<std::string> unescaped = decode_unreserved(target.substr(0, q));
  if (!unescaped) return fail(ErrorMessage{"the target's path holds a % that does not start an escape"});
  const std::string& decoded = *unescaped;
  const std::optional<std::string> path = remove_dot_segments(decoded);
  if (!path) return fail(ErrorMessage{"the target's dot segments climb above the root"});
  if (*path != decoded && match_route(routes, decoded) != match_route(routes, *path)) {
    return fail(ErrorMessage{"the target's dot segments climb out of its route"});
  }
  std::string out = *path;
  if (q != std::string_view::npos) out.append(target.substr(q));
  return out;
}

std::string upstream_url(const Route& route, std::string_view target) {
  using namespace proxy_rules_cpp;
  std::string_view rest = target;
  if (rest.substr(0, route.prefix.size()) == route.prefix) rest.remove_prefix(route.prefix.size());
  // Only a path or a query can follow: anything else ("*" of OPTIONS) asks for the base itself.
  if (!rest.empty() && rest.front() != '/' && rest.front() != '?') rest = {};
  const bool base_has_path = route.base.size() > route.origin.origin.size();
  std::string url;
  url.reserve(route.base.size() + rest.size() + 1);
  url.append(route.base);
  if (!base_has_path && (rest.empty() || rest.front() == '?')) url.push_back('/');
  url.append(rest);
  return url;
}

std::optional<std::string> proxied_url(std::string_view url, const std::vector<Route>& routes, const Route& served,
                                       std::string_view proxy_origin) {
  // The part of a target under a base path: "" when the base is the root,
  // nullopt when the target is not under it (on a segment boundary).
  const auto rest_under = [](std::string_view target, std::string_view base_path) -> std::optional<std::string_view> {
    if (!target.starts_with(base_path)) return std::nullopt;
    const std::string_view rest = target.substr(base_path.size());
    if (!rest.empty() && rest.front() != '/' && rest.front() != '?') return std::nullopt;
    return rest;
  };
  const auto base_path = [](const Route& r) { return std::string_view(r.base).substr(r.origin.origin.size()); };
  const std::size_t hash = url.find('#');
  const std::string_view fragment = hash == std::string_view::npos ? std::string_view() : url.substr(hash);
  if (url.starts_with("/") && !url.starts_with("//")) {
    const auto rest = rest_under(url.substr(0, hash), base_path(served));
    if (!rest || (served.prefix.empty() && base_path(served).empty())) return std::nullopt;
    std::string out = served.prefix + std::string(*rest);
    if (out.empty() || out.front() == '?') out.insert(0, "/");
    return out + std::string(fragment);
  }
  const std::optional<UrlOrigin> o = parse_origin(url);
  if (!o) return std::nullopt;
  const Route* best = nullptr;
  std::string_view best_rest;
  for (const Route& r : routes) {
    if (r.origin.origin != o->origin) continue;
    const auto rest = rest_under(o->target == "/" ? std::string_view() : std::string_view(o->target), base_path(r));
    if (rest && (best == nullptr || base_path(r).size() > base_path(*best).size())) {
      best = &r;
      best_rest = *rest;
    }
  }
  if (best == nullptr) return std::nullopt;
  std::string out = std::string(proxy_origin) + best->prefix + std::string(best_rest);
  if (out.size() == proxy_origin.size() || out[proxy_origin.size()] == '?') out.insert(proxy_origin.size(), "/");
  return out + std::string(fragment);
}

void proxy_locations(HeaderList& fields, const std::vector<Route>& routes, const Route& served,
                     const HeaderList& caller, std::string_view listening) {
  const auto is_url_field = [](std::string_view name) {
    return iequals(name, "Location") || iequals(name, "Content-Location") || iequals(name, "Link");
  };
  // Most answers carry none of them: nothing to build.
  if (std::none_of(fields.lines().begin(), fields.lines().end(),
                   [&](const Header& h) { return is_url_field(h.name); })) {
    return;
  }
  const std::string proxy_origin = proxy_origin_of(caller, listening);
  const auto one = [&](std::string_view url) {
    auto p = proxied_url(ascii::trim_ows(url), routes, served, proxy_origin);
    return p ? *p : std::string(url);
  };
  // Link (RFC 8288): each <URI-reference> outside a quoted string.
  const auto links = [&](std::string_view v) {
    std::string out;
    out.reserve(v.size());
    bool quoted = false;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const char c = v[i];
      if (quoted) {
        out += c;
        if (c == '\\' && i + 1 < v.size()) out += v[++i];
        else if (c == '"') quoted = false;
      } else if (c == '"') {
        quoted = true;
        out += c;
      } else if (c == '<') {
        const std::size_t end = v.find('>', i + 1);
        if (end == std::string_view::npos) {
          out.append(v.substr(i));
          break;
        }
        out += '<';
        out += one(v.substr(i + 1, end - i - 1));
        out += '>';
        i = end;
      } else {
        out += c;
      }
    }
    return out;
  };
  std::vector<Header> lines;
  lines.reserve(fields.size());
  for (const Header& h : fields.lines()) {
    if (iequals(h.name, "Location") || iequals(h.name, "Content-Location")) {
      lines.push_back({h.name, one(h.value)});
    } else if (iequals(h.name, "Link")) {
      lines.push_back({h.name, links(h.value)});
    } else {
      lines.push_back(h);
    }
  }
  fields = HeaderList(std::move(lines));
}

std::string proxy_origin_of(const HeaderList& caller, std::string_view listening) {
  const auto host = caller.first("Host");
  const auto plain = [](std::string_view h) {
    return !h.empty() && h.size() <= 255 && std::all_of(h.begin(), h.end(), [](char c) {
      return ascii::is_alpha(c) || ascii::is_digit(c) || c == '-' || c == '.' || c == ':' || c == '[' || c == ']';
    });
  };
  if (host && caller.count("Host") == 1 && plain(ascii::trim_ows(*host))) {
    return "http://" + std::string(ascii::trim_ows(*host));
  }
  return "http://" + std::string(listening);
}

HeaderList forward_headers(const HeaderList& caller) {
  using namespace proxy_rules_cpp;
  const ConnectionOptions options(caller);
  HeaderList out;
  out.reserve(caller.size());
  for (const Header& h : caller.lines()) {
    if (hop_by_hop(h.name) || options.lists(h.name) || is_abide_field(h.name)) continue;
    if (one_of(h.name, {"Proxy-Authorization", "Host", "Content-Length", "Expect"})) continue;
    out.add(h.name, h.value);
  }
  return out;
}

Result<Duration, ErrorMessage> caller_max_wait(const HeaderList& caller, Duration fallback) {
  using namespace proxy_rules_cpp;
  std::optional<Duration> found;
  bool any_line = false;
  for (const std::string_view line : caller.all("Abide-Max-Wait")) {
    any_line = true;
    // A list of values across lines and commas (RFC 9110 5.3): all must agree.
    std::string_view rest = line;
    while (true) {
      const std::size_t comma = rest.find(',');
      const std::string_view item = ascii::trim_ows(rest.substr(0, comma));
      if (!item.empty()) {
        auto d = parse_max_wait(item);
        if (!d) return fail(std::move(d.error()));
        if (found && *found != *d) return fail("Abide-Max-Wait has two different values");
        found = *d;
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  if (any_line && !found) return fail("Abide-Max-Wait is empty: it wants seconds from 0 to 2678400 (31 days)");
  Duration budget = found.value_or(fallback);
  // The caller's own timeout, as Stainless-made SDKs state it: the answer
  // must reach the caller before it, so the hold leaves room for the
  // upstream's answer (half the timeout, at most 5 s). A value that does not
  // parse is the SDK's business, not a reason to refuse the request.
  if (const auto stated = caller.first("X-Stainless-Timeout")) {
    if (auto t = parse_max_wait(ascii::trim_ows(*stated)); t && *t > Duration::zero()) {
      const Duration room = std::min<Duration>(*t / 2, std::chrono::seconds{5});
      budget = std::min(budget, *t - room);
    }
  }
  return budget;
}

Result<std::vector<UnitCost>, ErrorMessage> caller_costs(const HeaderList& caller) {
  using namespace proxy_rules_cpp;
  std::string list;
  bool any = false;
  for (const std::string_view line : caller.all("Abide-Cost")) {
    if (any) list += ", ";
    list += line;
    any = true;
  }
  if (!any) return std::vector<UnitCost>{};
  auto costs = detail::parse_cost_header(list);
  if (!costs) return fail("Abide-Cost: " + costs.error());
  return std::move(*costs);
}

bool carries_credential(const HeaderList& caller) noexcept {
  using namespace proxy_rules_cpp;
  return std::any_of(caller.lines().begin(), caller.lines().end(), [](const Header& h) {
    return std::any_of(kCredentialFields.begin(), kCredentialFields.end(),
                       [&](std::string_view n) { return iequals(n, h.name); });
  });
}

std::string quota_key(const UrlOrigin& origin, const HeaderList& caller, const cli::KeySecret& secret) {
  using namespace proxy_rules_cpp;
  std::vector<std::pair<std::string, std::string_view>> credentials;
  for (const Header& h : caller.lines()) {
    const auto known = std::find_if(kCredentialFields.begin(), kCredentialFields.end(),
                                    [&](std::string_view n) { return iequals(n, h.name); });
    if (known != kCredentialFields.end()) credentials.emplace_back(std::string(*known), h.value);
  }
  if (credentials.empty()) return origin.origin;
  // A fixed order, so that the same fields sent in another order or case share a key.
  std::sort(credentials.begin(), credentials.end());
  // The origin is hashed too: one credential used at two origins leaves no common mark in their keys.
  std::string text = origin.origin;
  text.push_back('\n');
  for (const auto& [name, value] : credentials) text.append(name).append(":").append(value).append("\n");
  const cli::KeySecret::Mac mac = secret.mac(text);
  // 64 bits: a keyed hash cannot be searched offline, so its length only has to keep credentials apart.
  constexpr std::size_t kKeyBytes = 8;
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string key = origin.origin;
  key.push_back('#');
  for (std::size_t i = 0; i < kKeyBytes; ++i) {
    key.push_back(kHex[mac[i] >> 4]);
    key.push_back(kHex[mac[i] & 0xf]);
  }
  return key;
}

engine::Request upstream_request(const RequestHead& head, const Route& route, std::string body,
                                 const cli::KeySecret& secret) {
  engine::Request r;
  r.method = head.method;
  r.url = upstream_url(route, head.target);
  r.headers = forward_headers(head.headers);
  r.body = std::move(body);
  r.pacer_key = quota_key(route.origin, head.headers, secret);
  // Idempotency-Key stays among the headers, where the engine looks for it;
  // whether a retry is safe is the engine's method rule, not the proxy's.
  return r;
}

std::string rfc3339_millis(WallTime t) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(t);  // never before t
  const auto day = std::chrono::floor<std::chrono::days>(ms);
  const std::chrono::year_month_day ymd{day};
  const std::chrono::hh_mm_ss<std::chrono::milliseconds> hms{ms - day};
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()), static_cast<int>(hms.subseconds().count()));
  return buf.data();
}

Dialect dialect_of(const Profile* profile) {
  Dialect d;
  const auto lower = [](std::string_view v) {
    std::string out(v);
    for (char& c : out) c = ascii::to_lower(c);
    return out;
  };
  if (profile != nullptr) {
    for (const std::string& v : profile->retry_verdicts) d.verdicts.push_back(lower(v));
    for (const FieldSpec& f : profile->retry_delays) {
      d.delays.push_back(lower(f.header));
      if (f.time == TimeFormat::kMilliseconds) d.delays_ms.push_back(lower(f.header));
    }
  }
  if (d.verdicts.empty()) d.verdicts.emplace_back("x-should-retry");
  return d;
}

AnswerHead answer_head(const FinalHead& final_head, WallTime now, bool head_request, const Dialect& dialect) {
  using namespace proxy_rules_cpp;
  const engine::Response& response = final_head.response;
  const bool done = final_head.kind == OutcomeKind::kDone;
  const std::optional<WallTime> not_before = done ? std::nullopt : final_head.outcome.not_before_wall;
  AnswerHead out;
  out.status = response.status;
  AnswerFilter filter;
  // Transfer-Encoding overrides Content-Length (RFC 9112 6.3): an
  // intermediary removes the length and frames the decoded body itself.
  const bool encoded = response.headers.count("Transfer-Encoding") > 0;
  filter.keep_content_length = bodiless(response.status, head_request) && !encoded;
  filter.drop_retry_after = not_before.has_value();
  if (!done) filter.dialect = &dialect;
  copy_answer_fields(response.headers, filter, out.headers);
  if (!bodiless(response.status, head_request) && !encoded) out.content_length = content_length(response.headers);
  add_outcome_fields(out.headers, to_string(final_head.kind), final_head.outcome.attempts.size(),
                     final_head.outcome.waited, not_before, now);
  if (!done) add_dialect_fields(out.headers, dialect, not_before, now);
  return out;
}

std::optional<LimitedAnswer> limited_answer(const FinalHead& final_head, const Dialect& dialect) {
  using namespace proxy_rules_cpp;
  if (final_head.kind == OutcomeKind::kDone || final_head.response.status < 400) return std::nullopt;
  LimitedAnswer kept;
  kept.status = final_head.response.status;
  AnswerFilter filter;
  filter.drop_retry_after = true;
  filter.drop_date = true;
  filter.dialect = &dialect;
  copy_answer_fields(final_head.response.headers, filter, kept.headers);
  return kept;
}

MadeAnswer outcome_answer(const RequestOutcome& outcome, WallTime now, const Dialect& dialect,
                          const LimitedAnswer* replay) {
  using namespace proxy_rules_cpp;
  const bool done = outcome.kind == OutcomeKind::kDone;
  const std::optional<WallTime> not_before = done ? std::nullopt : outcome.not_before_wall;
  const std::string_view name = outcome.ambiguous ? std::string_view("ambiguous") : to_string(outcome.kind);
  const bool later = !outcome.ambiguous &&
                     (outcome.kind == OutcomeKind::kDeferred || outcome.kind == OutcomeKind::kDeadlineExceeded ||
                      outcome.kind == OutcomeKind::kExhausted);
  MadeAnswer out;
  if (replay != nullptr && later && (!outcome.response || outcome.response->status == replay->status)) {
    // The vendor's own words, with this request's times.
    out.head.status = replay->status;
    for (const Header& h : replay->headers.lines()) out.head.headers.add(h.name, h.value);
    add_outcome_fields(out.head.headers, name, outcome.attempts.size(), outcome.waited, not_before, now);
    add_dialect_fields(out.head.headers, dialect, not_before, now);
    out.body = replay->body;
    out.head.content_length = out.body.size();
    return out;
  }
  out.head.status = own_status(outcome);
  // The last upstream answer's quota fields say when to come back; after a
  // failure (a refused head, a transport error) they belong to nothing.
  if (outcome.response && later) {
    AnswerFilter filter;
    filter.drop_content = true;
    filter.drop_retry_after = not_before.has_value();
    if (!done) filter.dialect = &dialect;
    copy_answer_fields(outcome.response->headers, filter, out.head.headers);
  }
  add_outcome_fields(out.head.headers, name, outcome.attempts.size(), outcome.waited, not_before, now);
  if (!done) add_dialect_fields(out.head.headers, dialect, not_before, now);
  set_problem_body(out, name, outcome.reason, not_before, now);
  return out;
}

void speak_dialect(MadeAnswer& answer, const Dialect& dialect, std::optional<WallTime> not_before, WallTime now) {
  proxy_rules_cpp::add_dialect_fields(answer.head.headers, dialect, not_before, now);
}

void set_problem_body(MadeAnswer& answer, std::string_view outcome, std::string_view reason,
                      std::optional<WallTime> not_before, WallTime now) {
  using namespace proxy_rules_cpp;
  std::string detail = "abide proxy: ";
  if (!outcome.empty()) detail.append(outcome).append(": ");
  detail += printable(reason, kShownReason);
  nlohmann::ordered_json j;
  j["type"] = "about:blank";
  const std::string_view title = reason_phrase(answer.head.status);
  j["title"] = title.empty() ? std::string("Error") : std::string(title);
  j["status"] = answer.head.status;
  if (not_before) detail += "; permitted at " + rfc3339_millis(*not_before);
  j["detail"] = detail;
  if (!outcome.empty()) j["outcome"] = outcome;
  if (not_before) {
    j["not_before"] = rfc3339_millis(*not_before);
    j["retry_after"] = whole_seconds_up(saturating_sub(not_before->time_since_epoch(), now.time_since_epoch()));
  }
  j["error"] = {{"type", outcome.empty() ? std::string("abide_proxy") : "abide_" + std::string(outcome)},
                {"message", detail}};
  answer.head.headers.add("Content-Type", "application/problem+json");
  answer.body = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  answer.body += '\n';
  answer.head.content_length = answer.body.size();
}

MadeAnswer error_answer(int status, std::string_view reason, std::optional<Duration> retry_after,
                        std::optional<WallTime> not_before, WallTime now) {
  using namespace proxy_rules_cpp;
  MadeAnswer out;
  out.head.status = status;
  if (status == 503) out.head.headers.add("Abide-Outcome", "deferred");
  out.head.headers.add("Abide-Attempts", "0");
  out.head.headers.add("Abide-Waited", "0.000");
  if (retry_after || not_before) {
    std::int64_t seconds = retry_after ? whole_seconds_up(*retry_after) : 0;
    if (not_before) {
      seconds = std::max(seconds,
                         whole_seconds_up(saturating_sub(not_before->time_since_epoch(), now.time_since_epoch())));
    }
    out.head.headers.add("Retry-After", std::to_string(seconds));
  }
  if (not_before) out.head.headers.add("Abide-Not-Before", rfc3339_millis(*not_before));
  set_problem_body(out, status == 503 ? "deferred" : "", reason, not_before, now);
  return out;
}

std::string_view reason_phrase(int status) noexcept {
  switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 103: return "Early Hints";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 203: return "Non-Authoritative Information";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 206: return "Partial Content";
    case 300: return "Multiple Choices";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 305: return "Use Proxy";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 407: return "Proxy Authentication Required";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 511: return "Network Authentication Required";
    default: return "";  // 306 and 418 are reserved (RFC 9110 15.4.7, 15.5.19)
  }
}

}  // namespace abide::proxy
