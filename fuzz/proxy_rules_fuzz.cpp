// libFuzzer target for the proxy's routing rules (tools/abide/proxy/
// proxy_rules.cpp): `--route` / `--upstream` parsing, route matching, the
// upstream URL of a caller's target, the fields forwarded, and Abide-Max-Wait.
// The input is lines: route specs ("/PREFIX=URL", or a bare URL for
// --upstream), then "> TARGET" lines, then "NAME: VALUE" caller fields.
// Invariants beyond "never crash": an accepted route's prefix is "" or starts
// with '/' without a trailing one, and its base is an http(s) URL without
// query, fragment or userinfo; the route matched is the longest prefix on a
// segment boundary; the upstream URL starts with the base and never leaves
// the route's origin; no hop-by-hop, Host, Content-Length, Expect or Abide-*
// field goes upstream, and every other goes in order; a max wait is 0 to 31
// days, or the fallback, and a rejection is printable. The "NAME: VALUE"
// lines are also an upstream answer's fields: proxy_locations keeps every
// field's name and order, changes nothing but Location, Content-Location and
// Link, and grows a value by at most one proxy origin and prefix per URL.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "abide/engine.h"
#include "abide/headers.h"
#include "ascii.h"
#include "proxy/proxy_rules.h"

namespace {

using abide::proxy::Route;

void check(bool ok) {
  if (!ok) std::abort();
}

constexpr std::size_t kMaxRoutes = 16;
constexpr std::size_t kMaxFields = 64;
constexpr auto kFallback = std::chrono::seconds{7};
constexpr auto kLongestWait = std::chrono::hours{24 * 31};

bool printable_ascii(std::string_view s) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return false;
  }
  return true;
}

bool visible_ascii(std::string_view s) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return false;
  }
  return true;
}

// A value as the proxy's request reader passes it on: no NUL or CR (it
// rejects those; HeaderList would change them to spaces).
bool read_as_sent(std::string_view value) {
  return value.find_first_of(std::string_view("\0\r", 2)) == std::string_view::npos;
}

void check_route(const Route& r) {
  check(r.prefix.empty() || (r.prefix.front() == '/' && r.prefix.back() != '/'));
  check(r.base.rfind(r.origin.origin, 0) == 0);
  check(r.base.find_first_of("?#") == std::string::npos);
  check(r.base.empty() || r.base.back() != '/');
}

// The route match_route must pick: the longest prefix on a segment boundary.
bool covers(std::string_view prefix, std::string_view target) {
  if (target.substr(0, prefix.size()) != prefix) return false;
  return prefix.empty() || target.size() == prefix.size() || target[prefix.size()] == '/' ||
         target[prefix.size()] == '?';
}

void check_target(const std::vector<Route>& routes, std::string_view target) {
  const Route* r = abide::proxy::match_route(routes, target);
  for (const Route& other : routes) {
    if (covers(other.prefix, target)) check(r != nullptr && r->prefix.size() >= other.prefix.size());
  }
  if (r == nullptr) return;
  check(covers(r->prefix, target));
  const std::string url = abide::proxy::upstream_url(*r, target);
  check(url.rfind(r->base, 0) == 0);
  // Whatever the target holds ("//evil", "@evil", "/.."), the request stays at the route's origin.
  if (visible_ascii(target)) {
    const auto origin = abide::parse_origin(url);
    check(origin.has_value());
    check(origin->origin == r->origin.origin);
  }
}

// A normalized target has no dot segment in its path, plain or encoded as an
// unreserved escape, keeps the query as it was, is stable, and stays in the
// route its path named.
void check_normalized(const std::vector<Route>& routes, std::string_view target) {
  const auto n = abide::proxy::normalize_target(routes, target);
  if (!n) {
    check(!n.error().text.empty());
    return;
  }
  if (target.empty() || target.front() != '/') {
    check(*n == target);
    return;
  }
  const std::string_view path = std::string_view(*n).substr(0, n->find('?'));
  check(!path.empty() && path.front() == '/');
  for (std::size_t at = 0; at < path.size();) {
    const std::size_t end = std::min(path.find('/', at + 1), path.size());
    const std::string_view seg = path.substr(at + 1, end - at - 1);
    check(seg != "." && seg != "..");
    at = end;
  }
  for (const std::string_view escape : {"%2e", "%2E"}) check(path.find(escape) == std::string_view::npos);
  if (const auto q = target.find('?'); q != std::string_view::npos) check(n->ends_with(target.substr(q)));
  const auto again = abide::proxy::normalize_target(routes, *n);
  check(again.has_value() && *again == *n);
  check_target(routes, *n);
}

bool one_of_ci(std::string_view name, std::initializer_list<std::string_view> names) {
  for (const std::string_view n : names) {
    if (abide::ascii::iequals(name, n)) return true;
  }
  return false;
}

void check_fields(const abide::HeaderList& caller) {
  const abide::HeaderList out = abide::proxy::forward_headers(caller);
  std::size_t next = 0;  // forwarded fields keep the caller's order
  for (const auto& h : out.lines()) {
    check(!one_of_ci(h.name, {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer",
                              "transfer-encoding", "upgrade", "host", "content-length", "expect"}));
    check(!abide::ascii::istarts_with(h.name, "abide-"));
    while (next < caller.lines().size() &&
           (caller.lines()[next].name != h.name || caller.lines()[next].value != h.value)) {
      ++next;
    }
    check(next < caller.lines().size());
    ++next;
  }
  const auto wait = abide::proxy::caller_max_wait(caller, kFallback);
  if (wait) {
    check(*wait == kFallback || (*wait >= abide::Duration::zero() && *wait <= kLongestWait));
  } else {
    check(!wait.error().text.empty() && printable_ascii(wait.error().text));
  }
}

void check_locations(const std::vector<Route>& routes, const abide::HeaderList& answer) {
  if (routes.empty()) return;
  constexpr std::string_view kOrigin = "http://127.0.0.1:8080";
  std::size_t longest_prefix = 0;
  for (const Route& r : routes) longest_prefix = std::max(longest_prefix, r.prefix.size());
  for (const Route& served : routes) {
    abide::HeaderList out = answer;
    abide::proxy::proxy_locations(out, routes, served, {{"Host", "127.0.0.1:8080"}}, "127.0.0.1:9");
    check(out.size() == answer.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      const auto& before = answer.lines()[i];
      const auto& after = out.lines()[i];
      check(after.name == before.name);
      if (!one_of_ci(before.name, {"location", "content-location", "link"})) {
        check(after.value == before.value);
        continue;
      }
      std::size_t urls = 1;
      for (const char c : before.value) urls += c == '<' ? 1 : 0;
      check(after.value.size() <= before.value.size() + urls * (kOrigin.size() + longest_prefix + 2));
      if (const auto p = abide::proxy::proxied_url(before.value, routes, served, kOrigin)) {
        check(p->starts_with(kOrigin) || p->starts_with(served.prefix));
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<Route> routes;
  std::vector<std::string_view> targets;
  abide::HeaderList caller;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.starts_with("> ")) {
      targets.push_back(line.substr(2));
    } else if (const std::size_t colon = line.find(": "); colon != std::string_view::npos && !line.starts_with("/")) {
      if (caller.size() < kMaxFields && read_as_sent(line.substr(colon + 2))) {
        caller.add(line.substr(0, colon), line.substr(colon + 2));
      }
    } else if (routes.size() < kMaxRoutes) {
      auto r = line.starts_with("/") ? abide::proxy::parse_route(line) : abide::proxy::parse_upstream(line);
      if (!r) {
        check(!r.error().text.empty() && printable_ascii(r.error().text));
        continue;
      }
      check_route(*r);
      routes.push_back(std::move(*r));
    }
  }
  for (const std::string_view t : targets) {
    check_target(routes, t);
    check_normalized(routes, t);
  }
  check_fields(caller);
  check_locations(routes, caller);
  return 0;
}
