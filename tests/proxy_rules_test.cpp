// `abide proxy`'s rules without sockets: routes, forwarded fields, quota
// keys, the caller's budget, the answers and their Abide-* fields, the
// pages' counters; and the keyed hash behind the keys, its secret and the
// state directory that keeps it (key_secret.h, state_dir.h), in temporary
// directories, never the real home.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "abide/testing/manual_clock.h"
#include "key_secret.h"
#include "proxy/proxy_rules.h"
#include "proxy/proxy_server.h"
#include "proxy/proxy_stats.h"
#include "state_dir.h"

namespace abide::proxy {
namespace {

using namespace std::chrono_literals;

// 2026-12-01T14:03:12Z
const WallTime kNow{std::chrono::seconds{1796133792}};

std::vector<std::string> names(const HeaderList& h) {
  std::vector<std::string> out;
  for (const Header& line : h.lines()) out.push_back(line.name);
  return out;
}

std::string field(const HeaderList& h, std::string_view name) { return std::string(h.first(name).value_or("<none>")); }

struct Final {
  engine::Response response;
  engine::RequestOutcome outcome;
  FinalHead head(OutcomeKind kind) const { return FinalHead{response, kind, outcome}; }
};

Route route(std::string_view spec) {
  auto r = spec.front() == '/' ? parse_route(spec) : parse_upstream(spec);
  EXPECT_TRUE(r.has_value()) << spec;
  return r.has_value() ? *r : Route{};
}

cli::KeySecret secret_of(char c) {
  auto s = cli::KeySecret::from_bytes(std::string(32, c), "test");
  EXPECT_TRUE(s.has_value());
  return s.has_value() ? *s : cli::KeySecret();
}

const cli::KeySecret kSecret = secret_of('k');

std::string hex(const cli::KeySecret::Mac& mac) {
  std::string out;
  for (const std::uint8_t b : mac) {
    out.push_back("0123456789abcdef"[b >> 4]);
    out.push_back("0123456789abcdef"[b & 0xf]);
  }
  return out;
}

// ---- HMAC-SHA-256 ----

TEST(KeySecretMac, Rfc4231Vector) {
  // RFC 4231 test case 1: a key of 20 bytes 0x0b, "Hi There".
  auto s = cli::KeySecret::from_bytes(std::string(20, '\x0b'), "test");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(hex(s->mac("Hi There")), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

// ---- routes ----

TEST(Routes, UpstreamIsNormalised) {
  const Route r = route("https://API.x.com:443/v1/");
  EXPECT_EQ(r.prefix, "");
  EXPECT_EQ(r.base, "https://api.x.com/v1");
  EXPECT_EQ(r.origin.origin, "https://api.x.com");
  EXPECT_EQ(r.origin.host, "api.x.com");
}

TEST(Routes, UpstreamRejectsQueryFragmentUserinfoAndOtherSchemes) {
  for (std::string_view bad : {"https://api.x.com/v1?key=1", "https://api.x.com/#f", "https://user:pw@api.x.com/",
                               "ftp://api.x.com/", "api.x.com", "", "https://"}) {
    auto r = parse_upstream(bad);
    EXPECT_FALSE(r.has_value()) << bad;
  }
  // The message never holds a credential's bytes unescaped beyond its bound.
  auto r = parse_upstream("https://a.com/\x1b[31m?x");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().text.find('\x1b'), std::string::npos);
}

TEST(Routes, RouteSpec) {
  const Route r = route("/openai/=https://api.openai.com/v1");
  EXPECT_EQ(r.prefix, "/openai");
  EXPECT_EQ(r.base, "https://api.openai.com/v1");
  EXPECT_EQ(r.profile, "");
  const Route named = route("/llm=http://127.0.0.1:9/v1,profile=openai");
  EXPECT_EQ(named.base, "http://127.0.0.1:9/v1");
  EXPECT_EQ(named.profile, "openai");
  EXPECT_EQ(route("https://api.x.com,profile=github").profile, "github");
  EXPECT_FALSE(parse_upstream("https://api.x.com,profile=").has_value());
  for (std::string_view bad : {"openai=https://a.com", "/a?b=https://a.com", "/a b=https://a.com", "/a#=https://a.com",
                               "/a", "/a=notaurl", "/a=https://a.com,profile=", "/a=https://a.com,profile=Open AI"}) {
    auto bad_route = parse_route(bad);
    EXPECT_FALSE(bad_route.has_value()) << bad;
  }
}

TEST(Routes, LongestPrefixOnASegmentBoundary) {
  const std::vector<Route> routes = {route("https://default.com"), route("/a=https://a.com"),
                                     route("/a/b=https://ab.com")};
  auto host_of = [&](std::string_view target) -> std::string {
    const Route* r = match_route(routes, target);
    return r == nullptr ? "none" : r->origin.host;
  };
  EXPECT_EQ(host_of("/a"), "a.com");
  EXPECT_EQ(host_of("/a/x"), "a.com");
  EXPECT_EQ(host_of("/a?q=1"), "a.com");
  EXPECT_EQ(host_of("/ab"), "default.com");  // not a segment of /a
  EXPECT_EQ(host_of("/a/b"), "ab.com");
  EXPECT_EQ(host_of("/a/b/c?d"), "ab.com");
  EXPECT_EQ(host_of("/a/bc"), "a.com");
  EXPECT_EQ(host_of("/"), "default.com");

  const std::vector<Route> only_a = {route("/a=https://a.com")};
  EXPECT_EQ(match_route(only_a, "/b"), nullptr);
  EXPECT_EQ(match_route(only_a, "/ab"), nullptr);
  EXPECT_EQ(match_route({}, "/a"), nullptr);
}

// Routes are matched on the normalized path and it is what goes upstream:
// no dot segment, plain or percent-encoded, walks out of a route's base.
TEST(Routes, TargetsAreNormalizedAndNeverClimbOutOfTheirRoute) {
  const std::vector<Route> ai = {route("/ai=https://u.com/v1")};
  const auto norm = [&](const std::vector<Route>& routes, std::string_view t) -> std::string {
    auto r = normalize_target(routes, t);
    return r ? *r : "400: " + r.error().text;
  };
  EXPECT_EQ(norm(ai, "/ai/chat?x=/../y"), "/ai/chat?x=/../y");  // the query is not a path
  EXPECT_EQ(norm(ai, "/ai/./x/../chat"), "/ai/chat");
  EXPECT_EQ(norm(ai, "/ai/x/%2e%2E/chat"), "/ai/chat");
  EXPECT_EQ(norm(ai, "/ai/%7Euser/%41b"), "/ai/~user/Ab");  // unreserved escapes decoded
  EXPECT_EQ(norm(ai, "/ai/a%2Fb"), "/ai/a%2Fb");            // a reserved one kept
  EXPECT_EQ(norm(ai, "/ai/x/."), "/ai/x/");
  EXPECT_EQ(norm(ai, "/ai/x/.."), "/ai/");
  EXPECT_EQ(norm(ai, "/ai//../x"), "/ai/x");
  EXPECT_EQ(norm(ai, "*"), "*");
  for (const char* escape : {"/ai/../admin", "/ai/x/../../admin", "/ai/..", "/ai/%2e%2e/admin", "/ai/.%2E/admin?q"}) {
    EXPECT_EQ(norm(ai, escape), "400: the target's dot segments climb out of its route") << escape;
  }
  EXPECT_EQ(norm(ai, "/ai/%%32e%%32e/x"), "400: the target's path holds a % that does not start an escape");
  EXPECT_EQ(norm(ai, "/ai/x%2"), "400: the target's path holds a % that does not start an escape");
  EXPECT_EQ(norm(ai, "/ai/x?q=%zz"), "/ai/x?q=%zz");  // the query is the upstream's to read
  EXPECT_EQ(norm(ai, "/../ai/x"), "400: the target's dot segments climb above the root");
  EXPECT_EQ(norm(ai, "/ai/../../x"), "400: the target's dot segments climb above the root");
  // Under a catch-all upstream too: /ai/../admin names /ai, and would reach the other.
  const std::vector<Route> both = {route("https://default.com"), route("/ai=https://u.com/v1")};
  EXPECT_EQ(norm(both, "/ai/../admin"), "400: the target's dot segments climb out of its route");
  EXPECT_EQ(norm(both, "/x/../admin"), "/admin");  // within the catch-all
}

TEST(Routes, UpstreamUrl) {
  const Route plain = route("https://api.x.com");
  EXPECT_EQ(upstream_url(plain, "/"), "https://api.x.com/");
  EXPECT_EQ(upstream_url(plain, "/chat?x=1&y"), "https://api.x.com/chat?x=1&y");

  const Route based = route("https://api.x.com/v1");
  EXPECT_EQ(upstream_url(based, "/chat/completions?stream=true"), "https://api.x.com/v1/chat/completions?stream=true");
  EXPECT_EQ(upstream_url(based, "/"), "https://api.x.com/v1/");

  const Route prefixed = route("/ai=https://api.x.com/v1");
  EXPECT_EQ(upstream_url(prefixed, "/ai/chat?q=2"), "https://api.x.com/v1/chat?q=2");
  EXPECT_EQ(upstream_url(prefixed, "/ai?q=2"), "https://api.x.com/v1?q=2");
  EXPECT_EQ(upstream_url(prefixed, "/ai"), "https://api.x.com/v1");

  const Route prefixed_root = route("/ai=https://api.x.com");
  EXPECT_EQ(upstream_url(prefixed_root, "/ai"), "https://api.x.com/");
  EXPECT_EQ(upstream_url(prefixed_root, "/ai?q"), "https://api.x.com/?q");
  EXPECT_EQ(upstream_url(plain, "*"), "https://api.x.com/");  // OPTIONS *: the upstream itself
}

// ---- forwarded fields ----

// ---- URLs back through the proxy (proxy_redirect) ----

TEST(ProxiedUrl, UnderARoutesBaseTheUrlPointsAtTheProxy) {
  const std::vector<Route> routes = {route("/ai=https://api.x.com/v1"), route("/gh=https://API.github.com"),
                                     route("/ai/old=https://api.x.com/v0")};
  const std::string p = "http://127.0.0.1:8080";
  const auto via = [&](std::string_view url, const Route& served) {
    return proxied_url(url, routes, served, p).value_or("<unchanged>");
  };
  EXPECT_EQ(via("https://api.x.com/v1/items?page=2", routes[0]), p + "/ai/items?page=2");
  EXPECT_EQ(via("https://api.x.com:443/v1/items#top", routes[0]), p + "/ai/items#top");
  EXPECT_EQ(via("https://api.x.com/v1", routes[0]), p + "/ai");
  EXPECT_EQ(via("https://api.x.com/v1?q", routes[0]), p + "/ai?q");
  EXPECT_EQ(via("https://api.x.com/v0/a", routes[0]), p + "/ai/old/a");  // another route's base, absolute
  EXPECT_EQ(via("https://api.github.com/repos?page=3", routes[1]), p + "/gh/repos?page=3");
  EXPECT_EQ(via("https://api.github.com", routes[1]), p + "/gh");
  // Not under a base: as it was.
  EXPECT_EQ(via("https://api.x.com/v10/items", routes[0]), "<unchanged>");  // not on a segment boundary
  EXPECT_EQ(via("https://api.x.com/other", routes[0]), "<unchanged>");
  EXPECT_EQ(via("http://api.x.com/v1/items", routes[0]), "<unchanged>");  // another origin
  EXPECT_EQ(via("https://elsewhere.example/v1", routes[0]), "<unchanged>");
  EXPECT_EQ(via("mailto:a@b", routes[0]), "<unchanged>");
  EXPECT_EQ(via("", routes[0]), "<unchanged>");
  // Path-absolute references are the answering upstream's.
  EXPECT_EQ(via("/v1/items?page=2", routes[0]), "/ai/items?page=2");
  EXPECT_EQ(via("/v1", routes[0]), "/ai");
  EXPECT_EQ(via("/v2/items", routes[0]), "<unchanged>");
  EXPECT_EQ(via("/repos", routes[1]), "/gh/repos");
  EXPECT_EQ(via("//api.x.com/v1/items", routes[0]), "<unchanged>");  // network-path: not guessed
  const Route whole = route("https://api.x.com");
  EXPECT_EQ(proxied_url("/items", {whole}, whole, p), std::nullopt);  // the same path through the proxy
  EXPECT_EQ(proxied_url("https://api.x.com/items", {whole}, whole, p), p + "/items");
  EXPECT_EQ(proxied_url("https://api.x.com", {whole}, whole, p), p + "/");
}

TEST(ProxiedUrl, LocationContentLocationAndEveryLinkAreRewritten) {
  const std::vector<Route> routes = {route("/gh=https://api.github.com")};
  const HeaderList fields = {
      {"Location", "https://api.github.com/repos/a/b"},
      {"Content-Location", " /user "},
      {"Link", "<https://api.github.com/repos?page=2>; rel=\"next\", <https://api.github.com/repos?page=9>; "
               "rel=\"last\"; title=\"a <quoted> \\\" one\", <https://cdn.example/x>; rel=\"alt\""},
      {"X-Other", "https://api.github.com/keep"}};
  HeaderList out = fields;
  proxy_locations(out, routes, routes[0], {{"Host", "localhost:9"}}, "127.0.0.1:1");
  EXPECT_EQ(field(out, "Location"), "http://localhost:9/gh/repos/a/b");
  EXPECT_EQ(field(out, "Content-Location"), "/gh/user");
  EXPECT_EQ(field(out, "Link"),
            "<http://localhost:9/gh/repos?page=2>; rel=\"next\", <http://localhost:9/gh/repos?page=9>; "
            "rel=\"last\"; title=\"a <quoted> \\\" one\", <https://cdn.example/x>; rel=\"alt\"");
  EXPECT_EQ(field(out, "X-Other"), "https://api.github.com/keep");
  // Unterminated: as it was.
  HeaderList unterminated = {{"Link", "<https://api.github.com/x"}};
  proxy_locations(unterminated, routes, routes[0], {{"Host", "p"}}, "127.0.0.1:1");
  EXPECT_EQ(field(unterminated, "Link"), "<https://api.github.com/x");
}

TEST(ProxiedUrl, TheProxysOriginIsTheCallersHostWhenPlain) {
  EXPECT_EQ(proxy_origin_of({{"Host", "127.0.0.1:8080"}}, "0.0.0.0:1"), "http://127.0.0.1:8080");
  EXPECT_EQ(proxy_origin_of({{"Host", "[::1]:8080"}}, "0.0.0.0:1"), "http://[::1]:8080");
  EXPECT_EQ(proxy_origin_of({}, "127.0.0.1:9"), "http://127.0.0.1:9");
  for (const char* odd : {"a b", "evil.com/path", "user@host", "", "x\x01"}) {
    EXPECT_EQ(proxy_origin_of({{"Host", odd}}, "127.0.0.1:9"), "http://127.0.0.1:9") << odd;
  }
  EXPECT_EQ(proxy_origin_of({{"Host", "a"}, {"Host", "b"}}, "127.0.0.1:9"), "http://127.0.0.1:9");
}

TEST(Forward, HopByHopAndFramingFieldsStay) {
  const HeaderList caller = {{"Host", "127.0.0.1:8080"},
                             {"Accept", "text/event-stream"},
                             {"connection", "keep-alive, X-Secret-Hop , close"},
                             {"Keep-Alive", "timeout=5"},
                             {"X-SECRET-HOP", "1"},
                             {"Proxy-Connection", "keep-alive"},
                             {"Proxy-Authorization", "Basic eHg6eXk="},
                             {"TE", "trailers"},
                             {"Trailer", "X-T"},
                             {"Transfer-Encoding", "chunked"},
                             {"Upgrade", "h2c"},
                             {"Content-Length", "5"},
                             {"Expect", "100-continue"},
                             {"Authorization", "Bearer sk-1"},
                             {"X-Dup", "1"},
                             {"X-Dup", "2"}};
  const HeaderList out = forward_headers(caller);
  EXPECT_EQ(names(out), (std::vector<std::string>{"Accept", "Authorization", "X-Dup", "X-Dup"}));
  EXPECT_EQ(out.all("X-Dup"), (std::vector<std::string_view>{"1", "2"}));
}

TEST(Forward, FieldsNamedByAnyConnectionFieldAreDropped) {
  const HeaderList caller = {{"Connection", "x-a"}, {"X-A", "1"}, {"Connection", "X-B"}, {"x-b", "2"}, {"X-C", "3"}};
  EXPECT_EQ(names(forward_headers(caller)), (std::vector<std::string>{"X-C"}));
}

TEST(Forward, ManyConnectionOptionsAndFields) {
  // A hostile head: every other field is named by a long Connection list.
  HeaderList caller;
  std::string listed;
  for (int i = 0; i < 20000; ++i) {
    caller.add("X-F" + std::to_string(i), "v");
    if (i % 2 == 0) listed += (listed.empty() ? "" : ", ") + std::string("x-f") + std::to_string(i);
  }
  caller.add("Connection", listed);
  const HeaderList out = forward_headers(caller);
  ASSERT_EQ(out.size(), 10000u);
  for (const Header& h : out.lines()) EXPECT_EQ((std::stoi(h.name.substr(3)) % 2), 1) << h.name;
  // The same rule for an upstream's answer.
  Final f;
  f.response.status = 200;
  f.response.headers = caller;
  EXPECT_EQ(answer_head(f.head(OutcomeKind::kDone), kNow).headers.size(), 10000u + 3);
}

TEST(Forward, AbideFieldsInAnyCaseAreDropped) {
  const HeaderList caller = {{"Abide-Max-Wait", "3"},
                             {"ABIDE-Anything", "x"},
                             {"abide-outcome", "done"},
                             {"Abider", "kept"},
                             {"X-Abide-Trace", "kept"}};
  EXPECT_EQ(names(forward_headers(caller)), (std::vector<std::string>{"Abider", "X-Abide-Trace"}));
}

// ---- the caller's budget ----

TEST(MaxWait, FallbackWhenAbsent) {
  auto d = caller_max_wait({{"Accept", "*/*"}}, 42s);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(*d, 42s);
}

TEST(MaxWait, DecimalSeconds) {
  const std::vector<std::pair<std::string, Duration>> good = {
      {"2", 2s}, {"0", 0s}, {"0.5", 500ms}, {"1.25", 1250ms}, {"0.001", 1ms}, {"007", 7s}, {"2678400", 2678400s}};
  for (const auto& [text, want] : good) {
    auto d = caller_max_wait({{"Abide-Max-Wait", text}}, 1s);
    ASSERT_TRUE(d.has_value()) << text;
    EXPECT_EQ(*d, want) << text;
  }
  // The same value twice (two lines, or a list) is one value.
  auto twice = caller_max_wait({{"abide-max-wait", "3"}, {"Abide-Max-Wait", "3.0, 3"}}, 1s);
  ASSERT_TRUE(twice.has_value());
  EXPECT_EQ(*twice, 3s);
}

TEST(MaxWait, MalformedIsAnErrorNamingTheField) {
  for (std::string_view bad : {"abc", "-1", "+1", "1e3", "", "1.", ".5", "1.2345", "2678400.001",
                               "99999999999999999999", "1 s", "0x10", "inf"}) {
    auto d = caller_max_wait({{"Abide-Max-Wait", std::string(bad)}}, 1s);
    ASSERT_FALSE(d.has_value()) << bad;
    EXPECT_NE(d.error().text.find("Abide-Max-Wait"), std::string::npos) << d.error().text;
  }
  auto negative = caller_max_wait({{"Abide-Max-Wait", "-1"}}, 1s);
  ASSERT_FALSE(negative.has_value());
  EXPECT_NE(negative.error().text.find("sign"), std::string::npos);
  auto large = caller_max_wait({{"Abide-Max-Wait", "2678401"}}, 1s);
  ASSERT_FALSE(large.has_value());
  EXPECT_NE(large.error().text.find("31 days"), std::string::npos);
  auto empty = caller_max_wait({{"Abide-Max-Wait", ""}}, 1s);
  ASSERT_FALSE(empty.has_value());
  EXPECT_NE(empty.error().text.find("empty"), std::string::npos);
}

// An SDK that states its timeout gets its answer before it: the hold leaves
// half the timeout, at most 5 s, for the upstream's answer.
TEST(MaxWait, TheCallersStatedTimeoutBoundsTheHold) {
  const auto budget = [](HeaderList h, Duration fallback = 60s) {
    auto d = caller_max_wait(h, fallback);
    EXPECT_TRUE(d.has_value());
    return d ? *d : Duration::zero();
  };
  EXPECT_EQ(budget({{"X-Stainless-Timeout", "600"}}), 60s);  // the longer timeout does not lengthen it
  EXPECT_EQ(budget({{"X-Stainless-Timeout", "20"}}), 15s);
  EXPECT_EQ(budget({{"X-Stainless-Timeout", "4"}}), 2s);
  EXPECT_EQ(budget({{"X-Stainless-Timeout", "1.5"}}), 750ms);
  EXPECT_EQ(budget({{"X-Stainless-Timeout", "20"}, {"Abide-Max-Wait", "30"}}), 15s);
  EXPECT_EQ(budget({{"X-Stainless-Timeout", "20"}, {"Abide-Max-Wait", "3"}}), 3s);
  // Garbage, zero or negative is the SDK's business: the budget stands.
  for (const char* odd : {"soon", "0", "-5", "", "1e9"}) EXPECT_EQ(budget({{"X-Stainless-Timeout", odd}}), 60s) << odd;
}

TEST(MaxWait, TwoDifferentValuesAreAnError) {
  auto lines = caller_max_wait({{"Abide-Max-Wait", "2"}, {"Abide-Max-Wait", "3"}}, 1s);
  ASSERT_FALSE(lines.has_value());
  EXPECT_NE(lines.error().text.find("two different values"), std::string::npos);
  auto list = caller_max_wait({{"Abide-Max-Wait", "2, 3"}}, 1s);
  EXPECT_FALSE(list.has_value());
}

TEST(MaxWait, TheMessageQuotesAtMost32PrintableBytes) {
  const std::string value = std::string(100, 'x') + "\x1b";
  auto d = caller_max_wait({{"Abide-Max-Wait", value}}, 1s);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().text.find(std::string(33, 'x')), std::string::npos);
  EXPECT_NE(d.error().text.find(std::string(32, 'x') + "..."), std::string::npos);
  auto controls = caller_max_wait({{"Abide-Max-Wait", "1\x07"}}, 1s);
  ASSERT_FALSE(controls.has_value());
  EXPECT_EQ(controls.error().text.find('\x07'), std::string::npos);
  EXPECT_NE(controls.error().text.find("\\x07"), std::string::npos);
}

// ---- quota keys ----

TEST(QuotaKey, NoCredentialIsTheOrigin) {
  const Route r = route("https://api.x.com/v1");
  EXPECT_EQ(quota_key(r.origin, {{"Accept", "*/*"}}, kSecret), "https://api.x.com");
  EXPECT_FALSE(carries_credential({{"Accept", "*/*"}}));
  EXPECT_TRUE(carries_credential({{"Accept", "*/*"}, {"x-goog-api-key", "k"}}));
}

TEST(QuotaKey, SameCredentialInAnyCaseOfNameIsOneKey) {
  const Route r = route("https://api.x.com");
  const std::string a = quota_key(r.origin, {{"Authorization", "Bearer sk-live-123"}}, kSecret);
  const std::string b = quota_key(r.origin, {{"authorization", "Bearer sk-live-123"}, {"Accept", "x"}}, kSecret);
  const std::string c = quota_key(r.origin, {{"AUTHORIZATION", "Bearer sk-live-123"}}, kSecret);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  ASSERT_EQ(a.size(), std::string("https://api.x.com#").size() + 16);
  EXPECT_EQ(a.substr(0, 18), "https://api.x.com#");
  // Pinned: the HMAC-SHA-256 under 32 'k's of "https://api.x.com\nauthorization:Bearer sk-live-123\n"
  // (`openssl dgst -sha256 -mac HMAC`), its first 8 bytes. Every version and machine with one secret
  // must make the same keys, or a fleet stops sharing quota.
  EXPECT_EQ(a.substr(18), "1b57732f1c585ec8");
}

TEST(QuotaKey, DifferentValuesOrFieldsOrOriginsAreDifferentKeys) {
  const Route r = route("https://api.x.com");
  const Route other = route("https://api.y.com");
  const std::string a = quota_key(r.origin, {{"Authorization", "Bearer sk-1"}}, kSecret);
  EXPECT_NE(a, quota_key(r.origin, {{"Authorization", "Bearer sk-2"}}, kSecret));
  EXPECT_NE(a, quota_key(r.origin, {{"Authorization", "bearer sk-1"}}, kSecret));  // values are case-sensitive
  EXPECT_NE(a, quota_key(r.origin, {{"X-Api-Key", "Bearer sk-1"}}, kSecret));
  const std::string elsewhere = quota_key(other.origin, {{"Authorization", "Bearer sk-1"}}, kSecret);
  // The origin is hashed too: one credential at two origins leaves no common mark.
  EXPECT_NE(a.substr(a.find('#')), elsewhere.substr(elsewhere.find('#')));
  for (std::string_view name : {"X-Api-Key", "Api-Key", "X-Auth-Token", "Private-Token", "X-Goog-Api-Key"}) {
    EXPECT_NE(quota_key(r.origin, {{std::string(name), "k"}}, kSecret), r.origin.origin) << name;
  }
}

TEST(QuotaKey, SeveralCredentialsInAnyOrderAreOneKey) {
  const Route r = route("https://api.x.com");
  const std::string a = quota_key(r.origin, {{"X-Api-Key", "k1"}, {"Authorization", "t1"}}, kSecret);
  const std::string b = quota_key(r.origin, {{"authorization", "t1"}, {"x-api-key", "k1"}}, kSecret);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, quota_key(r.origin, {{"X-Api-Key", "k1"}}, kSecret));
}

TEST(QuotaKey, ADifferentSecretIsADifferentKey) {
  const Route r = route("https://api.x.com");
  const HeaderList h{{"X-Api-Key", "1234"}};
  EXPECT_EQ(quota_key(r.origin, h, secret_of('k')), quota_key(r.origin, h, secret_of('k')));
  EXPECT_NE(quota_key(r.origin, h, secret_of('k')), quota_key(r.origin, h, secret_of('j')));
  // A reader of key names without the secret cannot test guesses: a four-digit token tried
  // under a guessed secret never gives back the key (it did, in 0.02 s, under plain SHA-256).
  const std::string key = quota_key(r.origin, h, kSecret);
  const cli::KeySecret guessed = secret_of('g');
  for (int n = 0; n < 10000; ++n) {
    char token[8];
    std::snprintf(token, sizeof token, "%04d", n);
    ASSERT_NE(quota_key(r.origin, {{"X-Api-Key", token}}, guessed), key) << token;
  }
}

TEST(QuotaKey, TheKeyHoldsNeitherTheCredentialNorItsSha256) {
  const Route r = route("https://api.x.com");
  for (std::string_view secret : {"sk-ant-api03-abcdef", "0123456789abcdef", "Bearer sk-proj-XYZ"}) {
    const std::string key = quota_key(r.origin, {{"X-Api-Key", std::string(secret)}}, kSecret);
    EXPECT_EQ(key.find(secret, std::string("https://api.x.com#").size()), std::string::npos) << key;
  }
  const std::string key = quota_key(r.origin, {{"Authorization", "Bearer sk-live-123"}}, kSecret);
  const std::string hashed = key.substr(key.find('#') + 1);
  // SHA-256 (`sha256sum`) of what the keys hashed before, of the field's value and of the token.
  for (std::string_view digest : {"6b61da9a4739eb8b8f71965d59e35a4efc248a22930b0263881e1e8e24d0f3dd",
                                  "af7d7507705053d592e6bec2cfecd9b706c02369f4c2f44b3e3d8e00c7bad5c6",
                                  "9418b81169b79003fd8c4481e61b79a762e996a0c172cda188c927714b5ee05b"}) {
    EXPECT_EQ(digest.find(hashed), std::string_view::npos) << key;
    EXPECT_EQ(key.find(digest.substr(0, 8)), std::string::npos) << key;
  }
}

// ---- the upstream request ----

TEST(UpstreamRequest, MethodUrlFieldsBodyAndKey) {
  const Route r = route("/ai=https://api.x.com/v1");
  RequestHead head;
  head.method = "POST";
  head.target = "/ai/chat?stream=1";
  head.headers = {{"Host", "localhost:9000"}, {"Authorization", "Bearer t"}, {"Idempotency-Key", "abc-1"},
                  {"Abide-Max-Wait", "5"},    {"Content-Length", "2"},       {"Content-Type", "application/json"}};
  const engine::Request req = upstream_request(head, r, "{}", kSecret);
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.url, "https://api.x.com/v1/chat?stream=1");
  EXPECT_EQ(names(req.headers), (std::vector<std::string>{"Authorization", "Idempotency-Key", "Content-Type"}));
  EXPECT_EQ(req.body, "{}");
  EXPECT_EQ(req.pacer_key, quota_key(r.origin, head.headers, kSecret));
  EXPECT_NE(req.pacer_key, r.origin.origin);
  EXPECT_FALSE(req.idempotency_key.has_value());
  EXPECT_FALSE(req.non_idempotent);
}

// ---- answers ----

Final final_answer(int status, HeaderList headers) {
  Final f;
  f.response.status = status;
  f.response.headers = std::move(headers);
  f.outcome.attempts.resize(1);
  return f;
}

TEST(AnswerHead, DoneKeepsFieldsMovesLengthAndAddsAbideFields) {
  Final f = final_answer(200, {{"Content-Type", "application/json"},
                               {"Content-Length", "17"},
                               {"Connection", "keep-alive, X-Hop"},
                               {"X-Hop", "1"},
                               {"Keep-Alive", "timeout=5"},
                               {"Transfer-Encoding", "chunked"},
                               {"Trailer", "X-T"},
                               {"Upgrade", "h2"},
                               {"Proxy-Connection", "close"},
                               {"TE", "trailers"},
                               {"RateLimit", "\"default\";r=5;t=30"},
                               {"x-ratelimit-remaining", "5"},
                               {"Retry-After", "7"},
                               {"Abide-Outcome", "deferred"}});
  f.outcome.attempts.resize(2);
  f.outcome.waited = 1250ms;
  const AnswerHead a = answer_head(f.head(OutcomeKind::kDone), kNow);
  EXPECT_EQ(a.status, 200);
  EXPECT_FALSE(a.content_length.has_value());  // beside Transfer-Encoding (RFC 9112 6.3)
  EXPECT_EQ(names(a.headers),
            (std::vector<std::string>{"Content-Type", "RateLimit", "x-ratelimit-remaining", "Retry-After",
                                      "Abide-Outcome", "Abide-Attempts", "Abide-Waited"}));
  EXPECT_EQ(field(a.headers, "Retry-After"), "7");  // done: the server's own
  EXPECT_EQ(field(a.headers, "Abide-Outcome"), "done");
  EXPECT_EQ(field(a.headers, "Abide-Attempts"), "2");
  EXPECT_EQ(field(a.headers, "Abide-Waited"), "1.250");
  EXPECT_EQ(a.headers.count("Abide-Not-Before"), 0u);
}

TEST(AnswerHead, ContentLengthOfHeadAnd204And304IsKeptAsAField) {
  Final f = final_answer(200, {{"Content-Length", "17"}});
  const AnswerHead head = answer_head(f.head(OutcomeKind::kDone), kNow, /*head_request=*/true);
  EXPECT_FALSE(head.content_length.has_value());
  EXPECT_EQ(field(head.headers, "Content-Length"), "17");
  for (int status : {204, 304}) {
    Final g = final_answer(status, {{"Content-Length", "3"}});
    const AnswerHead a = answer_head(g.head(OutcomeKind::kDone), kNow);
    EXPECT_FALSE(a.content_length.has_value()) << status;
    EXPECT_EQ(field(a.headers, "Content-Length"), "3") << status;
  }
}

// RFC 9112 6.3: Transfer-Encoding overrides Content-Length, and an
// intermediary removes the length before forwarding: a body longer than the
// stated length is never cut to it.
TEST(AnswerHead, ContentLengthBesideTransferEncodingIsDropped) {
  Final f = final_answer(200, {{"Content-Length", "5"}, {"Transfer-Encoding", "chunked"}});
  const AnswerHead a = answer_head(f.head(OutcomeKind::kDone), kNow);
  EXPECT_FALSE(a.content_length.has_value());
  EXPECT_EQ(a.headers.count("Content-Length"), 0u);
  EXPECT_EQ(a.headers.count("Transfer-Encoding"), 0u);
  const AnswerHead head = answer_head(f.head(OutcomeKind::kDone), kNow, /*head_request=*/true);
  EXPECT_EQ(head.headers.count("Content-Length"), 0u);
}

TEST(AnswerHead, ContentLengthThatDoesNotParseIsDropped) {
  for (std::string_view bad : {"abc", "-1", "5, 6", "", "99999999999999999999"}) {
    Final f = final_answer(200, {{"Content-Length", std::string(bad)}});
    const AnswerHead a = answer_head(f.head(OutcomeKind::kDone), kNow);
    EXPECT_FALSE(a.content_length.has_value()) << bad;
    EXPECT_EQ(a.headers.count("Content-Length"), 0u) << bad;
  }
  Final same = final_answer(200, {{"Content-Length", "5, 5"}});
  const AnswerHead a = answer_head(same.head(OutcomeKind::kDone), kNow);
  ASSERT_TRUE(a.content_length.has_value());
  EXPECT_EQ(*a.content_length, 5u);
}

TEST(AnswerHead, NotDoneReplacesRetryAfterByThePermittedTime) {
  Final f = final_answer(429, {{"Retry-After", "1"}, {"RateLimit", "\"q\";r=0;t=30"}, {"X-RateLimit-Reset", "30"}});
  f.outcome.not_before_wall = kNow + 29s + 345ms;
  const AnswerHead a = answer_head(f.head(OutcomeKind::kDeferred), kNow);
  EXPECT_EQ(a.status, 429);
  EXPECT_EQ(a.headers.all("Retry-After"), (std::vector<std::string_view>{"30"}));
  EXPECT_EQ(field(a.headers, "Abide-Not-Before"), "2026-12-01T14:03:41.345Z");
  EXPECT_EQ(field(a.headers, "Abide-Outcome"), "deferred");
  EXPECT_EQ(field(a.headers, "RateLimit"), "\"q\";r=0;t=30");
  EXPECT_EQ(field(a.headers, "X-RateLimit-Reset"), "30");
}

TEST(AnswerHead, NotDoneWithoutAPermittedTimeKeepsTheServersRetryAfter) {
  Final f = final_answer(429, {{"Retry-After", "12"}});
  const AnswerHead a = answer_head(f.head(OutcomeKind::kNotRetryable), kNow);
  EXPECT_EQ(field(a.headers, "Retry-After"), "12");
  EXPECT_EQ(a.headers.count("Abide-Not-Before"), 0u);
  EXPECT_EQ(field(a.headers, "Abide-Outcome"), "not_retryable");
}

TEST(AnswerHead, RetryAfterRoundsUpAndIsNeverBeforeThePermittedTime) {
  const std::vector<std::pair<Duration, std::string>> cases = {{200ms, "1"}, {3s, "3"},  {3001ms, "4"},      {1ns, "1"},
                                                               {0s, "0"},    {-5s, "0"}, {2999999999ns, "3"}};
  for (const auto& [left, want] : cases) {
    Final f = final_answer(503, {});
    f.outcome.not_before_wall = kNow + left;
    const AnswerHead a = answer_head(f.head(OutcomeKind::kExhausted), kNow);
    EXPECT_EQ(field(a.headers, "Retry-After"), want) << left.count();
  }
}

TEST(AnswerHead, FarPermittedTimesDoNotOverflow) {
  Final f = final_answer(429, {});
  f.outcome.not_before_wall = WallTime::max();
  const AnswerHead a = answer_head(f.head(OutcomeKind::kDeferred), WallTime{} - std::chrono::hours{24 * 365 * 200});
  EXPECT_EQ(field(a.headers, "Retry-After"), std::to_string(Duration::max().count() / 1'000'000'000 + 1));
  EXPECT_EQ(field(a.headers, "Abide-Not-Before").substr(0, 5), "2262-");
}

TEST(NotBeforeFormat, Rfc3339UtcWithMillisecondsRoundedUp) {
  EXPECT_EQ(rfc3339_millis(kNow), "2026-12-01T14:03:12.000Z");
  EXPECT_EQ(rfc3339_millis(kNow + 345ms), "2026-12-01T14:03:12.345Z");
  EXPECT_EQ(rfc3339_millis(kNow + 345ms + 1ns), "2026-12-01T14:03:12.346Z");  // never before the time
  EXPECT_EQ(rfc3339_millis(kNow + 999999001ns), "2026-12-01T14:03:13.000Z");
  EXPECT_EQ(rfc3339_millis(WallTime{}), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(rfc3339_millis(WallTime{} - 1ms), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(rfc3339_millis(WallTime{std::chrono::seconds{951782400}}), "2000-02-29T00:00:00.000Z");
}

// ---- answers made by the proxy ----

RequestOutcome outcome_of(OutcomeKind kind, std::string reason) {
  RequestOutcome o;
  o.kind = kind;
  o.reason = std::move(reason);
  return o;
}

TEST(OutcomeAnswer, DeferredBeforeAnySendIs429WithThePermittedTime) {
  RequestOutcome o = outcome_of(OutcomeKind::kDeferred, "the quota permits the next send only later");
  o.not_before_wall = kNow + 200ms;
  o.waited = 2s;
  const MadeAnswer a = outcome_answer(o, kNow);
  EXPECT_EQ(a.head.status, 429);
  EXPECT_EQ(field(a.head.headers, "Retry-After"), "1");
  EXPECT_EQ(field(a.head.headers, "Abide-Not-Before"), "2026-12-01T14:03:12.200Z");
  EXPECT_EQ(field(a.head.headers, "Abide-Outcome"), "deferred");
  EXPECT_EQ(field(a.head.headers, "Abide-Attempts"), "0");
  EXPECT_EQ(field(a.head.headers, "Abide-Waited"), "2.000");
  EXPECT_EQ(field(a.head.headers, "Content-Type"), "application/problem+json");
  const nlohmann::json j = nlohmann::json::parse(a.body);
  EXPECT_EQ(j["type"], "about:blank");
  EXPECT_EQ(j["title"], "Too Many Requests");
  EXPECT_EQ(j["status"], 429);
  EXPECT_EQ(j["outcome"], "deferred");
  EXPECT_EQ(j["not_before"], "2026-12-01T14:03:12.200Z");
  EXPECT_EQ(j["retry_after"], 1);
  const std::string detail =
      "abide proxy: deferred: the quota permits the next send only later; permitted at 2026-12-01T14:03:12.200Z";
  EXPECT_EQ(j["detail"], detail);
  // Where the SDKs of OpenAI, Anthropic and Stripe look for the message.
  EXPECT_EQ(j["error"]["message"], detail);
  EXPECT_EQ(j["error"]["type"], "abide_deferred");
  EXPECT_EQ(a.body.back(), '\n');
  ASSERT_TRUE(a.head.content_length.has_value());
  EXPECT_EQ(*a.head.content_length, a.body.size());
  // No dialect given: no verdict; a route's dialect always has one (see Dialect).
  EXPECT_EQ(a.head.headers.count("x-should-retry"), 0u);
  for (OutcomeKind k : {OutcomeKind::kDeadlineExceeded, OutcomeKind::kExhausted}) {
    EXPECT_EQ(outcome_answer(outcome_of(k, "x"), kNow).head.status, 429) << to_string(k);
  }
}

TEST(OutcomeAnswer, TheLastUpstreamAnswerKeepsItsStatusAndHints) {
  RequestOutcome o = outcome_of(OutcomeKind::kExhausted, "no attempts left");
  o.response.emplace();
  o.response->status = 503;
  o.response->headers = {{"Retry-After", "2"},     {"Content-Type", "application/json"},
                         {"Content-Length", "40"}, {"Content-Encoding", "gzip"},
                         {"ETag", "\"x\""},        {"RateLimit", "\"q\";r=0;t=9"},
                         {"Connection", "close"},  {"Date", "Tue, 01 Dec 2026 14:03:12 GMT"}};
  o.response->body = "dropped";
  o.attempts.resize(3);
  o.not_before_wall = kNow + 9s;
  const MadeAnswer a = outcome_answer(o, kNow, dialect_of(nullptr));
  EXPECT_EQ(a.head.status, 503);
  EXPECT_EQ(names(a.head.headers),
            (std::vector<std::string>{"RateLimit", "Date", "Abide-Outcome", "Abide-Attempts", "Abide-Waited",
                                      "Retry-After", "Abide-Not-Before", "x-should-retry", "Content-Type"}));
  EXPECT_EQ(field(a.head.headers, "Retry-After"), "9");
  EXPECT_EQ(field(a.head.headers, "Abide-Attempts"), "3");
  EXPECT_EQ(field(a.head.headers, "x-should-retry"), "false");
  EXPECT_EQ(field(a.head.headers, "Content-Type"), "application/problem+json");
  EXPECT_EQ(nlohmann::json::parse(a.body)["detail"],
            "abide proxy: exhausted: no attempts left; permitted at 2026-12-01T14:03:21.000Z");
}

// The upstream's status never goes with a body of the proxy's: a limited
// answer of a vendor's own status (GitHub's 403) whose body was not kept is
// answered 429, with its quota fields.
TEST(OutcomeAnswer, ALimitedAnswerWhoseBodyIsGoneGetsTheProxysOwnStatus) {
  RequestOutcome o = outcome_of(OutcomeKind::kDeferred, "the pacer holds the send for the quota");
  o.response.emplace();
  o.response->status = 403;
  o.response->headers = {{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1796133822"},
                         {"Content-Type", "application/json"}};
  o.attempts.resize(1);
  o.not_before_wall = kNow + 30s;
  const MadeAnswer a = outcome_answer(o, kNow, dialect_of(nullptr));
  EXPECT_EQ(a.head.status, 429);
  EXPECT_EQ(field(a.head.headers, "x-ratelimit-remaining"), "0");
  EXPECT_EQ(field(a.head.headers, "x-ratelimit-reset"), "1796133822");
  EXPECT_EQ(a.head.headers.all("Content-Type"), (std::vector<std::string_view>{"application/problem+json"}));
  EXPECT_EQ(nlohmann::json::parse(a.body)["status"], 429);
}

// The key's last limited answer, given again: the vendor's status, fields
// and body, with this request's times and verdict.
TEST(OutcomeAnswer, TheKeysLastLimitedAnswerIsGivenAgainWithFreshTimes) {
  const Profile* openai = ProfileRegistry::builtin().find("openai");
  ASSERT_NE(openai, nullptr);
  const Dialect d = dialect_of(openai);
  Final f = final_answer(429, {{"Content-Type", "application/json"},
                               {"Content-Length", "77"},
                               {"Date", "Tue, 01 Dec 2026 14:02:00 GMT"},
                               {"Retry-After", "20"},
                               {"retry-after-ms", "20000"},
                               {"x-should-retry", "true"},
                               {"x-ratelimit-remaining-requests", "0"}});
  f.outcome.not_before_wall = kNow + 20s;
  const auto kept = limited_answer(f.head(OutcomeKind::kDeferred), d);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->status, 429);
  EXPECT_EQ(names(kept->headers), (std::vector<std::string>{"Content-Type", "x-ratelimit-remaining-requests"}));
  LimitedAnswer replay = *kept;
  replay.body = R"({"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}})";

  RequestOutcome later = outcome_of(OutcomeKind::kDeferred, "the pacer holds the send for the quota");
  later.not_before_wall = kNow + 12s + 1ns;
  later.waited = 500ms;
  const MadeAnswer a = outcome_answer(later, kNow, d, &replay);
  EXPECT_EQ(a.head.status, 429);
  EXPECT_EQ(a.body, replay.body);
  EXPECT_EQ(*a.head.content_length, replay.body.size());
  EXPECT_EQ(field(a.head.headers, "Content-Type"), "application/json");
  EXPECT_EQ(field(a.head.headers, "Retry-After"), "13");
  EXPECT_EQ(field(a.head.headers, "retry-after-ms"), "12001");
  EXPECT_EQ(field(a.head.headers, "x-ms-retry-after-ms"), "12001");
  EXPECT_EQ(a.head.headers.all("x-should-retry"), (std::vector<std::string_view>{"false"}));
  EXPECT_EQ(field(a.head.headers, "Abide-Outcome"), "deferred");
  EXPECT_EQ(field(a.head.headers, "Abide-Waited"), "0.500");
  EXPECT_EQ(a.head.headers.count("Date"), 0u);

  // Not for an answer that says something else: an ambiguous request, or a
  // last upstream answer of another status.
  RequestOutcome ambiguous = later;
  ambiguous.kind = OutcomeKind::kNotRetryable;
  ambiguous.ambiguous = true;
  EXPECT_EQ(outcome_answer(ambiguous, kNow, d, &replay).head.status, 502);
  RequestOutcome other = later;
  other.response.emplace();
  other.response->status = 503;
  other.attempts.resize(1);
  const MadeAnswer o = outcome_answer(other, kNow, d, &replay);
  EXPECT_EQ(o.head.status, 503);
  EXPECT_EQ(field(o.head.headers, "Content-Type"), "application/problem+json");

  // A final answer that ended done, or below 400, is not kept.
  EXPECT_FALSE(limited_answer(f.head(OutcomeKind::kDone), d).has_value());
  Final moved = final_answer(304, {});
  EXPECT_FALSE(limited_answer(moved.head(OutcomeKind::kDeferred), d).has_value());
}

TEST(OutcomeAnswer, AmbiguousIs502) {
  RequestOutcome o = outcome_of(OutcomeKind::kNotRetryable, "connection reset after the request was sent");
  o.ambiguous = true;
  o.attempts.resize(1);
  o.attempts[0].sent = true;
  const MadeAnswer a = outcome_answer(o, kNow);
  EXPECT_EQ(a.head.status, 502);
  EXPECT_EQ(field(a.head.headers, "Abide-Outcome"), "ambiguous");
  EXPECT_EQ(nlohmann::json::parse(a.body)["detail"],
            "abide proxy: ambiguous: connection reset after the request was sent");
}

TEST(OutcomeAnswer, TransportFailuresAndNotRetryableWithoutAnswerAre502) {
  RequestOutcome sent = outcome_of(OutcomeKind::kExhausted, "connection refused");
  sent.attempts.resize(2);
  EXPECT_EQ(outcome_answer(sent, kNow).head.status, 502);
  RequestOutcome refused = outcome_of(OutcomeKind::kNotRetryable, "a header value holds a line break");
  const MadeAnswer a = outcome_answer(refused, kNow);
  EXPECT_EQ(a.head.status, 502);
  EXPECT_EQ(nlohmann::json::parse(a.body)["detail"], "abide proxy: not_retryable: a header value holds a line break");
}

TEST(OutcomeAnswer, AStalledUpstreamIs504AndAmbiguousBefore) {
  RequestOutcome o = outcome_of(OutcomeKind::kExhausted, "Timeout was reached");
  o.attempts.resize(1);
  o.attempts[0].sent = true;
  o.attempts[0].timed_out = true;
  EXPECT_EQ(outcome_answer(o, kNow).head.status, 504);
  o.kind = OutcomeKind::kNotRetryable;
  o.ambiguous = true;
  EXPECT_EQ(outcome_answer(o, kNow).head.status, 502);
}

TEST(OutcomeAnswer, CancelledIs503WithItsPermittedTime) {
  RequestOutcome o = outcome_of(OutcomeKind::kCancelled, "cancelled while waiting for the pacer");
  o.not_before_wall = kNow + 3001ms;
  const MadeAnswer a = outcome_answer(o, kNow);
  EXPECT_EQ(a.head.status, 503);
  EXPECT_EQ(field(a.head.headers, "Abide-Outcome"), "cancelled");
  EXPECT_EQ(field(a.head.headers, "Retry-After"), "4");
}

TEST(OutcomeAnswer, TheReasonIsMadePrintable) {
  const MadeAnswer a = outcome_answer(outcome_of(OutcomeKind::kNotRetryable, "bad \x1b[2J\r\nX-Injected: 1"), kNow);
  EXPECT_EQ(a.body.find('\x1b'), std::string::npos);
  EXPECT_EQ(a.body.find('\r'), std::string::npos);
  EXPECT_EQ(a.body.find('\n'), a.body.size() - 1);  // one line
  EXPECT_EQ(a.body.find("\\u001b"), std::string::npos);  // made printable, not only escaped
}

TEST(ErrorAnswer, ProblemDetailsWithoutOutcomeExceptFor503) {
  const MadeAnswer bad = error_answer(400, "Abide-Max-Wait \"x\" is not decimal seconds");
  EXPECT_EQ(bad.head.status, 400);
  const nlohmann::json j = nlohmann::json::parse(bad.body);
  EXPECT_EQ(j["detail"], "abide proxy: Abide-Max-Wait \"x\" is not decimal seconds");
  EXPECT_EQ(j["title"], "Bad Request");
  EXPECT_FALSE(j.contains("outcome"));
  EXPECT_EQ(field(bad.head.headers, "Content-Type"), "application/problem+json");
  EXPECT_EQ(bad.head.headers.count("Abide-Outcome"), 0u);
  EXPECT_EQ(bad.head.headers.count("Retry-After"), 0u);
  EXPECT_EQ(field(bad.head.headers, "Abide-Attempts"), "0");
  EXPECT_EQ(field(bad.head.headers, "Abide-Waited"), "0.000");
  ASSERT_TRUE(bad.head.content_length.has_value());
  EXPECT_EQ(*bad.head.content_length, bad.body.size());

  const MadeAnswer full = error_answer(503, "the queue is full", 1500ms);
  EXPECT_EQ(full.head.status, 503);
  EXPECT_EQ(field(full.head.headers, "Retry-After"), "2");
  EXPECT_EQ(field(full.head.headers, "Abide-Outcome"), "deferred");
  EXPECT_EQ(full.head.headers.count("Abide-Not-Before"), 0u);

  const MadeAnswer stopping = error_answer(503, "stopping", 1s, kNow + 4500ms, kNow);
  EXPECT_EQ(field(stopping.head.headers, "Retry-After"), "5");  // never before the permitted time
  EXPECT_EQ(field(stopping.head.headers, "Abide-Not-Before"), "2026-12-01T14:03:16.500Z");

  const MadeAnswer odd = error_answer(404, "no route for \"/\x01\"");
  EXPECT_EQ(odd.body.find('\x01'), std::string::npos);
  EXPECT_EQ(odd.body.find("\\u0001"), std::string::npos);
}

// ---- the callers' dialects ----

TEST(Dialect, TheProfilesVerdictsAndDelaysElseXShouldRetry) {
  const ProfileRegistry& builtin = ProfileRegistry::builtin();
  const Dialect openai = dialect_of(builtin.find("openai"));
  EXPECT_EQ(openai.verdicts, (std::vector<std::string>{"x-should-retry"}));
  EXPECT_EQ(openai.delays_ms, (std::vector<std::string>{"retry-after-ms", "x-ms-retry-after-ms"}));
  EXPECT_EQ(dialect_of(builtin.find("anthropic")).verdicts, (std::vector<std::string>{"x-should-retry"}));
  const Dialect stripe = dialect_of(builtin.find("stripe"));
  EXPECT_EQ(stripe.verdicts, (std::vector<std::string>{"stripe-should-retry"}));
  EXPECT_TRUE(stripe.delays_ms.empty());
  const Dialect none = dialect_of(nullptr);
  EXPECT_EQ(none.verdicts, (std::vector<std::string>{"x-should-retry"}));
  EXPECT_TRUE(none.delays.empty());
}

// An answer that holds the caller back says "do not retry" in its SDK's
// words, and never passes on the upstream's "true"; a done answer is the
// upstream's own.
TEST(Dialect, AnAnswerThatIsNotDoneSaysDoNotRetry) {
  const Dialect stripe = dialect_of(ProfileRegistry::builtin().find("stripe"));
  Final f = final_answer(429, {{"Stripe-Should-Retry", "true"}, {"X-Should-Retry", "true"}, {"Retry-After", "1"}});
  f.outcome.not_before_wall = kNow + 40s;
  const AnswerHead a = answer_head(f.head(OutcomeKind::kDeferred), kNow, false, stripe);
  EXPECT_EQ(a.headers.all("Stripe-Should-Retry"), (std::vector<std::string_view>{"false"}));
  EXPECT_EQ(a.headers.count("X-Should-Retry"), 0u);
  EXPECT_EQ(field(a.headers, "Retry-After"), "40");

  const AnswerHead done = answer_head(f.head(OutcomeKind::kDone), kNow, false, stripe);
  EXPECT_EQ(field(done.headers, "Stripe-Should-Retry"), "true");
  EXPECT_EQ(field(done.headers, "Retry-After"), "1");

  // Without a permitted time the server's delays stay; its verdict does not.
  const Dialect openai = dialect_of(ProfileRegistry::builtin().find("openai"));
  Final g = final_answer(429, {{"retry-after-ms", "1500"}, {"x-should-retry", "true"}});
  const AnswerHead n = answer_head(g.head(OutcomeKind::kNotRetryable), kNow, false, openai);
  EXPECT_EQ(field(n.headers, "retry-after-ms"), "1500");
  EXPECT_EQ(n.headers.all("x-should-retry"), (std::vector<std::string_view>{"false"}));

  // A 503 of the proxy's own (a full queue, the drain) says it too.
  MadeAnswer full = error_answer(503, "too many callers are waiting", 1s, kNow + 1s, kNow);
  speak_dialect(full, openai, kNow + 1s, kNow);
  EXPECT_EQ(field(full.head.headers, "x-should-retry"), "false");
  EXPECT_EQ(field(full.head.headers, "retry-after-ms"), "1000");
}

// The proxy's pages go to callers on its own machine only (docs/SECURITY.md).
TEST(Pages, WhoIsOnThisMachine) {
  for (const char* yes : {"127.0.0.1", "127.9.8.7", "::1", "::ffff:127.0.0.1", "localhost"}) {
    EXPECT_TRUE(is_loopback(yes)) << yes;
  }
  for (const char* no : {"10.0.0.1", "192.168.1.1", "::ffff:10.0.0.1", "fe80::1", "0.0.0.0", "", "127.0.0.1.evil"}) {
    EXPECT_FALSE(is_loopback(no)) << no;
  }
  // A real peer on loopback, a Unix socket pair, and a socket with no peer.
  const int server = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(server, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(server, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(server, 1), 0);
  ASSERT_EQ(::getsockname(server, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int client = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const int accepted = ::accept(server, nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  EXPECT_TRUE(peer_is_loopback(accepted));
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  EXPECT_TRUE(peer_is_loopback(pair[0]));
  const int lone = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_FALSE(peer_is_loopback(lone));
  for (int fd : {server, client, accepted, pair[0], pair[1], lone}) ::close(fd);
}

TEST(ReasonPhrase, Rfc9110AndTheOthersTheProxyAnswers) {
  EXPECT_EQ(reason_phrase(200), "OK");
  EXPECT_EQ(reason_phrase(413), "Content Too Large");
  EXPECT_EQ(reason_phrase(422), "Unprocessable Content");
  EXPECT_EQ(reason_phrase(429), "Too Many Requests");
  EXPECT_EQ(reason_phrase(431), "Request Header Fields Too Large");
  EXPECT_EQ(reason_phrase(505), "HTTP Version Not Supported");
  EXPECT_EQ(reason_phrase(306), "");
  EXPECT_EQ(reason_phrase(599), "");
  EXPECT_EQ(reason_phrase(-1), "");
  for (int s :
       {100, 101, 200, 201, 202, 203, 204, 205, 206, 300, 301, 302, 303, 304, 305, 307, 308, 400, 401, 402, 403, 404,
        405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417, 421, 422, 426, 500, 501, 502, 503, 504, 505}) {
    EXPECT_FALSE(reason_phrase(s).empty()) << s;
  }
}

// ---- stats ----

Attempt attempt(Duration paced) {
  Attempt a;
  a.paced = paced;
  return a;
}

TEST(Stats, CountsRequestsAnswersAttemptsWaitsAndOutcomes) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  stats.request_received();
  stats.request_received();
  stats.request_received();
  stats.request_answered("", 400, nullptr);

  RequestOutcome done = outcome_of(OutcomeKind::kDone, "");
  done.attempts = {attempt(100ms), attempt(0s), attempt(0s)};  // one pacer wait, two retry waits
  done.waited = 1500ms;
  stats.request_answered("https://api.x.com", 200, &done);

  RequestOutcome deferred = outcome_of(OutcomeKind::kDeferred, "");
  deferred.waited = 500ms;
  stats.request_answered("https://api.x.com", 429, &deferred);

  RequestOutcome ambiguous = outcome_of(OutcomeKind::kNotRetryable, "");
  ambiguous.ambiguous = true;
  ambiguous.attempts = {attempt(0s)};
  stats.request_answered("https://api.x.com", 502, &ambiguous);
  stats.set_in_flight(7, 3);

  const nlohmann::ordered_json j = stats.json(kNow);
  EXPECT_EQ(j["requests"], 3);
  EXPECT_EQ(j["answered"], nlohmann::ordered_json({{"200", 1}, {"400", 1}, {"429", 1}, {"502", 1}}));
  EXPECT_EQ(j["attempts"], 4);
  EXPECT_EQ(j["retries"], 2);
  EXPECT_EQ(j["waits"], 3);
  EXPECT_DOUBLE_EQ(j["waited_s"].get<double>(), 2.0);
  EXPECT_EQ(j["outcomes"]["done"], 1);
  EXPECT_EQ(j["outcomes"]["deferred"], 1);
  EXPECT_EQ(j["outcomes"]["not_retryable"], 1);
  EXPECT_EQ(j["outcomes"]["ambiguous"], 1);
  EXPECT_EQ(j["deferrals"], 1);
  EXPECT_EQ(j["held"], 7);
  EXPECT_EQ(j["transfers"], 3);
  EXPECT_TRUE(j["cooldowns"].empty());
  // The documented order of the keys.
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"requests", "answered", "attempts", "retries", "waits", "waited_s",
                                            "outcomes", "deferrals", "held", "transfers", "cooldowns",
                                            "quota_held"}));
}

// Which announced quota held requests back, on both pages: attempts it paced
// (and for how long), requests it deferred, the last one's counts in words.
TEST(Stats, SayWhichQuotaHeldRequestsBack) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  RequestOutcome done = outcome_of(OutcomeKind::kDone, "");
  Attempt paced = attempt(1500ms);
  paced.held = QuotaHeld{"tokens", 1'850, 40'000, 4'100};
  done.attempts = {paced, attempt(0s)};
  stats.request_answered("https://api.x.com", 200, &done);
  RequestOutcome deferred = outcome_of(OutcomeKind::kDeferred, "");
  deferred.held = QuotaHeld{"tokens", 10, 40'000, 900};
  stats.request_answered("https://api.x.com", 429, &deferred);
  RequestOutcome by_requests = outcome_of(OutcomeKind::kDone, "");
  Attempt one = attempt(250ms);
  one.held = QuotaHeld{"", 0, 500, 1};
  by_requests.attempts = {one};
  stats.request_answered("https://api.x.com", 200, &by_requests);

  const nlohmann::ordered_json j = stats.json(kNow);
  EXPECT_EQ(j["quota_held"]["tokens"]["paced"], 1);
  EXPECT_EQ(j["quota_held"]["tokens"]["deferred"], 1);
  EXPECT_DOUBLE_EQ(j["quota_held"]["tokens"]["waited_s"].get<double>(), 1.5);
  EXPECT_EQ(j["quota_held"]["tokens"]["last"], "tokens: 10 of 40,000 left, 900 needed");
  EXPECT_EQ(j["quota_held"]["requests"]["paced"], 1);
  const std::string text = stats.prometheus(kNow);
  EXPECT_NE(text.find("abide_proxy_quota_held_total{quota=\"tokens\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("abide_proxy_quota_held_seconds_total{quota=\"tokens\"} 1.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("abide_proxy_quota_held_total{quota=\"requests\"} 1\n"), std::string::npos) << text;
}

// A server's units are its own words: a few are kept, the rest are "other".
TEST(Stats, QuotaUnitsAreBounded) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  for (int i = 0; i < 100; ++i) {
    RequestOutcome deferred = outcome_of(OutcomeKind::kDeferred, "");
    deferred.held = QuotaHeld{"unit-" + std::to_string(i) + "\x1b[31m", 0, 10, 20};
    stats.request_answered("https://api.x.com", 429, &deferred);
  }
  const nlohmann::ordered_json j = stats.json(kNow);
  EXPECT_LE(j["quota_held"].size(), 33u);
  EXPECT_EQ(j["quota_held"]["other"]["deferred"], 100 - 32);
  EXPECT_EQ(stats.prometheus(kNow).find('\x1b'), std::string::npos);
}

TEST(Stats, CooldownsShowWhileTheyLast) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  RequestOutcome deferred = outcome_of(OutcomeKind::kDeadlineExceeded, "");
  deferred.not_before_wall = kNow + 30s;
  stats.request_answered("https://api.x.com", 429, &deferred);
  stats.cooldown("https://api.y.com", kNow + 5s);
  stats.cooldown("https://api.y.com", kNow + 2s);  // the later one stays
  stats.cooldown("https://api.z.com", kNow - 1s);  // already over

  const nlohmann::ordered_json j = stats.json(kNow + 10s);
  EXPECT_EQ(j["deferrals"], 1);
  ASSERT_EQ(j["cooldowns"].size(), 1u);
  EXPECT_EQ(j["cooldowns"]["https://api.x.com"]["until"], "2026-12-01T14:03:42.000Z");
  EXPECT_DOUBLE_EQ(j["cooldowns"]["https://api.x.com"]["left_s"].get<double>(), 20.0);
  EXPECT_EQ(stats.json(kNow)["cooldowns"]["https://api.y.com"]["left_s"], 5.0);
  EXPECT_TRUE(stats.json(kNow + 31s)["cooldowns"].empty());
}

TEST(Stats, CooldownsAreBounded) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  for (int i = 0; i < 4096; ++i) stats.cooldown("https://h" + std::to_string(i) + ".com", kNow + 1s + i * 1ms);
  // Full: a later cooldown pushes out the soonest, a sooner one is not kept.
  stats.cooldown("https://late.com", kNow + 1h);
  stats.cooldown("https://early.com", kNow + 1ms);
  nlohmann::ordered_json j = stats.json(kNow);
  EXPECT_EQ(j["cooldowns"].size(), 4096u);
  EXPECT_TRUE(j["cooldowns"].contains("https://late.com"));
  EXPECT_FALSE(j["cooldowns"].contains("https://h0.com"));
  EXPECT_FALSE(j["cooldowns"].contains("https://early.com"));
  // Once some have ended, they are the ones dropped.
  clock.advance(2s + 500ms);
  stats.cooldown("https://next.com", kNow + 2h);
  j = stats.json(kNow + 2500ms);
  EXPECT_TRUE(j["cooldowns"].contains("https://next.com"));
  EXPECT_TRUE(j["cooldowns"].contains("https://h4095.com"));
  EXPECT_TRUE(j["cooldowns"].contains("https://late.com"));
}

TEST(Stats, JsonIsValidWhateverTheOrigin) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  stats.cooldown(std::string("https://\xff\xfe") + '\0' + ".com", kNow + 1s);
  EXPECT_NO_THROW((void)stats.json(kNow).dump());
  EXPECT_NE(stats.json(kNow).dump().find("\\\\xff"), std::string::npos);
}

TEST(Stats, ConnectionThreadsRecordIntoOne) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  RequestOutcome done = outcome_of(OutcomeKind::kDone, "");
  done.attempts = {attempt(0s)};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) {
        stats.request_received();
        stats.request_answered("https://api.x.com", 200, &done);
        stats.cooldown("https://h" + std::to_string(t) + ".com", kNow + 1s);
        if (i % 100 == 0) (void)stats.prometheus(kNow);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const nlohmann::ordered_json j = stats.json(kNow);
  EXPECT_EQ(j["requests"], 4000);
  EXPECT_EQ(j["answered"]["200"], 4000);
  EXPECT_EQ(j["attempts"], 4000);
  EXPECT_EQ(j["outcomes"]["done"], 4000);
  EXPECT_EQ(j["cooldowns"].size(), 4u);
}

TEST(Stats, PrometheusText) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  stats.request_received();
  RequestOutcome done = outcome_of(OutcomeKind::kDone, "");
  done.attempts = {attempt(0s), attempt(0s)};
  done.waited = 1500ms;
  stats.request_answered("https://api.x.com", 200, &done);
  stats.cooldown("https://api.x.com", kNow + 3s);
  stats.cooldown("https://gone.com", kNow + 1s);
  stats.set_in_flight(2, 1);
  const std::string text = stats.prometheus(kNow + 1s);
  for (std::string_view want :
       {"# HELP abide_proxy_requests_total ", "# TYPE abide_proxy_requests_total counter\n",
        "\nabide_proxy_requests_total 1\n", "abide_proxy_answers_total{status=\"200\"} 1\n",
        "abide_proxy_attempts_total 2\n", "abide_proxy_retries_total 1\n", "abide_proxy_waits_total 1\n",
        "abide_proxy_waited_seconds_total 1.5\n", "abide_proxy_outcomes_total{outcome=\"done\"} 1\n",
        "abide_proxy_deferrals_total 0\n", "# TYPE abide_proxy_held gauge\n", "abide_proxy_held 2\n",
        "abide_proxy_transfers 1\n", "# TYPE abide_proxy_cooldown_seconds gauge\n",
        "abide_proxy_cooldown_seconds{upstream=\"https://api.x.com\"} 2\n"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  EXPECT_EQ(text.find("gone.com"), std::string::npos);  // its cooldown is over
  // Every sample line belongs to a family declared before it.
  std::size_t helps = 0;
  std::size_t types = 0;
  for (std::size_t pos = 0; (pos = text.find("# HELP ", pos)) != std::string::npos; ++pos) ++helps;
  for (std::size_t pos = 0; (pos = text.find("# TYPE ", pos)) != std::string::npos; ++pos) ++types;
  EXPECT_EQ(helps, 13u);
  EXPECT_EQ(types, 13u);
}

TEST(Stats, PrometheusEscapesLabelValues) {
  ManualClock clock(kNow);
  Stats stats(&clock.wall());
  stats.cooldown("https://a\"b\\c\nd", kNow + 1s);
  const std::string text = stats.prometheus(kNow);
  // The quote is escaped; backslash and line feed reached the label already
  // made printable ("\\" and "\x0a"), and their backslashes are escaped again.
  EXPECT_NE(text.find("abide_proxy_cooldown_seconds{upstream=\"https://a\\\"b\\\\\\\\c\\\\x0ad\"} 1\n"),
            std::string::npos)
      << text;
  for (std::size_t pos = 0; (pos = text.find('\n', pos)) != std::string::npos; ++pos) {
    const std::size_t next = text.find('\n', pos + 1);
    if (next == std::string::npos) break;
    const std::string line = text.substr(pos + 1, next - pos - 1);
    EXPECT_TRUE(line.rfind("# ", 0) == 0 || line.rfind("abide_proxy_", 0) == 0) << line;
  }
}

}  // namespace
}  // namespace abide::proxy

// ---- the secret of the keys, and the state directory ----------------------------------

namespace abide::cli {
namespace {

namespace fs = std::filesystem;

// A temporary directory, removed at the end: it stands for XDG_STATE_HOME or
// HOME, so that no test touches the real home.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "abide-keys-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 ? static_cast<unsigned>(st.st_mode & 07777) : 0xffffu;
}

void write_file(const fs::path& p, const std::string& bytes, mode_t mode) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode);
  ASSERT_GE(fd, 0) << p;
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ::fchmod(fd, mode);
  ::close(fd);
}

SecretEnvironment state_home(const fs::path& dir) {
  SecretEnvironment env;
  env.xdg_state_home = dir.string();
  return env;
}

// Secrets compared by what they make, as the keys do.
std::string made_by(const KeySecret& s) {
  const KeySecret::Mac m = s.mac("probe");
  return std::string(m.begin(), m.end());
}

// Sets (or unsets) an environment variable for one scope, then restores it.
class ScopedVar {
 public:
  ScopedVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedVar() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedVar(const ScopedVar&) = delete;
  ScopedVar& operator=(const ScopedVar&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(StateDir, XdgStateHomeWhenAbsoluteElseHome) {
  auto d = state_dir_from("/srv/state", "/home/u", false);
  ASSERT_TRUE(d.has_value()) << d.error().text;
  EXPECT_EQ(*d, fs::path("/srv/state/abide"));
  for (const std::optional<std::string>& ignored :
       {std::optional<std::string>("relative/state"), std::optional<std::string>(""), std::optional<std::string>()}) {
    d = state_dir_from(ignored, "/home/u/", false);
    ASSERT_TRUE(d.has_value()) << d.error().text;
    EXPECT_EQ(*d, fs::path("/home/u/.local/state/abide"));
  }
  d = state_dir_from("relative", "also-relative", false);
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.error().text.find("XDG_STATE_HOME"), std::string::npos) << d.error().text;
  EXPECT_NE(d.error().text.find("HOME"), std::string::npos) << d.error().text;
  EXPECT_FALSE(state_dir_from(std::nullopt, std::nullopt, true).has_value());
}

TEST(StateDir, ReadsTheEnvironment) {
  TempDir tmp;
  const ScopedVar xdg("XDG_STATE_HOME", (tmp.path() / "xdg").c_str());
  auto d = state_dir(false);
  ASSERT_TRUE(d.has_value()) << d.error().text;
  EXPECT_EQ(*d, tmp.path() / "xdg" / "abide");
  EXPECT_FALSE(fs::exists(tmp.path() / "xdg"));  // nothing made without `create`
  const ScopedVar unset("XDG_STATE_HOME", nullptr);
  const ScopedVar home("HOME", tmp.path().c_str());
  d = state_dir(true);
  ASSERT_TRUE(d.has_value()) << d.error().text;
  EXPECT_EQ(*d, tmp.path() / ".local" / "state" / "abide");
  EXPECT_EQ(mode_of(*d), 0700u);
}

TEST(StateDir, MadeWithItsParents0700) {
  TempDir tmp;
  const fs::path home = tmp.path() / "a" / "b";
  auto d = state_dir_from(home.string(), std::nullopt, true);
  ASSERT_TRUE(d.has_value()) << d.error().text;
  EXPECT_EQ(*d, home / "abide");
  EXPECT_EQ(mode_of(home / "abide"), 0700u);
  EXPECT_EQ(mode_of(home), 0700u);
  EXPECT_EQ(mode_of(tmp.path() / "a"), 0700u);
  // Again: an existing directory is fine as it is.
  EXPECT_TRUE(state_dir_from(home.string(), std::nullopt, true).has_value());
}

TEST(StateDir, AFileInTheWayIsAnErrorNamingIt) {
  TempDir tmp;
  write_file(tmp.path() / "abide", "x", 0600);
  auto d = state_dir_from(tmp.path().string(), std::nullopt, true);
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.error().text.find((tmp.path() / "abide").string()), std::string::npos) << d.error().text;
}

TEST(KeySecretFile, MadeOnce0600InA0700DirectoryAndTheSameOnTheSecondCall) {
  TempDir tmp;
  auto first = resolve_key_secret(KeyScope::kMachine, state_home(tmp.path()));
  ASSERT_TRUE(first.has_value()) << first.error().text;
  EXPECT_TRUE(first->warning.empty()) << first->warning;
  const fs::path file = tmp.path() / "abide" / "key-secret";
  EXPECT_EQ(mode_of(tmp.path() / "abide"), 0700u);
  EXPECT_EQ(mode_of(file), 0600u);
  EXPECT_EQ(fs::file_size(file), kKeySecretBytes);
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path() / "abide"), fs::directory_iterator()), 1)
      << "a temporary was left behind";
  auto second = resolve_key_secret(KeyScope::kFleet, state_home(tmp.path()));
  ASSERT_TRUE(second.has_value()) << second.error().text;
  EXPECT_EQ(made_by(first->secret), made_by(second->secret));
  EXPECT_NE(made_by(first->secret), made_by(KeySecret::per_process()));
}

TEST(KeySecretFile, AFleetStoreWithoutAGivenSecretWarnsInOneLine) {
  TempDir tmp;
  auto r = resolve_key_secret(KeyScope::kFleet, state_home(tmp.path()));
  ASSERT_TRUE(r.has_value()) << r.error().text;
  EXPECT_EQ(r->warning.find('\n'), std::string::npos);
  for (const std::string& text : {std::string("only with processes of this machine"), std::string("ABIDE_KEY_SECRET"),
                                 (tmp.path() / "abide" / "key-secret").string()}) {
    EXPECT_NE(r->warning.find(text), std::string::npos) << text << "\n" << r->warning;
  }
}

TEST(KeySecretFile, TheProcessScopeTouchesNoDisk) {
  TempDir tmp;
  auto r = resolve_key_secret(KeyScope::kProcess, state_home(tmp.path() / "none"));
  ASSERT_TRUE(r.has_value()) << r.error().text;
  EXPECT_TRUE(r->warning.empty());
  EXPECT_EQ(made_by(r->secret), made_by(KeySecret::per_process()));
  EXPECT_FALSE(fs::exists(tmp.path() / "none"));
  // Even with no state directory at all.
  EXPECT_TRUE(resolve_key_secret(KeyScope::kProcess, SecretEnvironment{}).has_value());
  auto none = resolve_key_secret(KeyScope::kMachine, SecretEnvironment{});
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.error().text.find("ABIDE_KEY_SECRET"), std::string::npos) << none.error().text;
}

TEST(KeySecretFile, ThreadsRacingAgree) {
  TempDir tmp;
  const fs::path file = tmp.path() / "key-secret";
  constexpr int kThreads = 8;
  std::vector<std::string> made(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }
      auto s = load_or_create_secret_file(file);
      made[static_cast<std::size_t>(i)] = s.has_value() ? made_by(*s) : "error: " + s.error().text;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<std::string>(made.begin(), made.end()).size(), 1u) << made[0];
  EXPECT_EQ(made[0].rfind("error: ", 0), std::string::npos) << made[0];
}

TEST(KeySecretFile, ProcessesRacingAgree) {
  TempDir tmp;
  const fs::path file = tmp.path() / "key-secret";
  constexpr int kProcesses = 6;
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<std::pair<pid_t, int>> children;
  for (int i = 0; i < kProcesses; ++i) {
    int out[2];
    ASSERT_EQ(::pipe(out), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(go[1]);
      ::close(out[0]);
      char c = 0;
      if (::read(go[0], &c, 1) < 0) _exit(2);  // all start together, when the parent closes the pipe
      auto s = load_or_create_secret_file(file);
      const std::string made = s.has_value() ? made_by(*s) : std::string("error");
      _exit(::write(out[1], made.data(), made.size()) == static_cast<ssize_t>(made.size()) ? 0 : 1);
    }
    ::close(out[1]);
    children.emplace_back(pid, out[0]);
  }
  ::close(go[0]);
  ::close(go[1]);
  std::set<std::string> made;
  for (const auto& [pid, fd] : children) {
    std::string text(64, '\0');
    ssize_t got = 0;
    for (ssize_t n; (n = ::read(fd, text.data() + got, text.size() - static_cast<std::size_t>(got))) > 0;) got += n;
    text.resize(static_cast<std::size_t>(got));
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    made.insert(text);
  }
  EXPECT_EQ(made.size(), 1u);
  EXPECT_EQ(made.count("error"), 0u);
  auto again = load_or_create_secret_file(file);
  ASSERT_TRUE(again.has_value()) << again.error().text;
  EXPECT_EQ(made_by(*again), *made.begin());
}

TEST(KeySecretFile, AWrongSizeIsRefusedNamingThePath) {
  TempDir tmp;
  const fs::path file = tmp.path() / "key-secret";
  for (const std::size_t size : {std::size_t{0}, std::size_t{31}, std::size_t{33}}) {
    write_file(file, std::string(size, 'x'), 0600);
    auto s = load_or_create_secret_file(file);
    ASSERT_FALSE(s.has_value()) << size;
    EXPECT_NE(s.error().text.find(file.string()), std::string::npos) << s.error().text;
    EXPECT_NE(s.error().text.find("not abide's"), std::string::npos) << s.error().text;
    EXPECT_EQ(fs::file_size(file), size) << "a file that is not abide's is left as it is";
  }
}

TEST(KeySecretFile, OpenToGroupOrOthersIsRefusedNamingThePath) {
  TempDir tmp;
  const fs::path file = tmp.path() / "key-secret";
  for (const mode_t mode : {mode_t{0644}, mode_t{0640}, mode_t{0604}}) {
    write_file(file, std::string(32, 'x'), mode);
    auto s = load_or_create_secret_file(file);
    ASSERT_FALSE(s.has_value()) << mode;
    EXPECT_NE(s.error().text.find(file.string()), std::string::npos) << s.error().text;
    EXPECT_NE(s.error().text.find("chmod 600"), std::string::npos) << s.error().text;
    EXPECT_EQ(s.error().text.find("xxxx"), std::string::npos) << "the secret is never shown";
  }
  write_file(file, std::string(32, 'x'), 0600);
  EXPECT_TRUE(load_or_create_secret_file(file).has_value());
}

TEST(KeySecretFile, UnreadableDirectoriesAndLinksAreRefusedNamingThePath) {
  TempDir tmp;
  const fs::path file = tmp.path() / "key-secret";
  fs::create_directory(file);
  auto s = load_or_create_secret_file(file);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().text.find(file.string()), std::string::npos) << s.error().text;
  fs::remove(file);
  write_file(tmp.path() / "elsewhere", std::string(32, 'x'), 0600);
  fs::create_symlink(tmp.path() / "elsewhere", file);
  s = load_or_create_secret_file(file);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().text.find("symbolic link"), std::string::npos) << s.error().text;
  fs::remove(file);
  if (::geteuid() != 0) {  // root reads whatever the mode says
    write_file(file, std::string(32, 'x'), 0200);
    s = load_or_create_secret_file(file);
    ASSERT_FALSE(s.has_value());
    EXPECT_NE(s.error().text.find(file.string()), std::string::npos) << s.error().text;
  }
}

TEST(KeySecretEnv, AGivenSecretWinsAndTouchesNoDisk) {
  TempDir tmp;
  SecretEnvironment env = state_home(tmp.path() / "none");
  env.secret = std::string(20, 's');
  for (const KeyScope scope : {KeyScope::kProcess, KeyScope::kMachine, KeyScope::kFleet}) {
    auto r = resolve_key_secret(scope, env);
    ASSERT_TRUE(r.has_value()) << r.error().text;
    EXPECT_TRUE(r->warning.empty()) << r->warning;
    EXPECT_EQ(made_by(r->secret), made_by(*KeySecret::from_bytes(std::string(20, 's'), "t")));
  }
  EXPECT_FALSE(fs::exists(tmp.path() / "none"));
}

TEST(KeySecretEnv, ATooShortSecretIsRefused) {
  SecretEnvironment env;
  env.secret = "abc123xyz";
  for (const KeyScope scope : {KeyScope::kProcess, KeyScope::kFleet}) {
    auto r = resolve_key_secret(scope, env);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().text.find("ABIDE_KEY_SECRET is too short"), std::string::npos) << r.error().text;
    EXPECT_NE(r.error().text.find("9 bytes"), std::string::npos) << r.error().text;
    EXPECT_NE(r.error().text.find("16"), std::string::npos) << r.error().text;
    EXPECT_EQ(r.error().text.find("abc123xyz"), std::string::npos) << "the secret is never shown";
  }
  env.secret = "";
  EXPECT_FALSE(resolve_key_secret(KeyScope::kProcess, env).has_value());
  env.secret_file = "/x";
  env.secret = std::string(20, 's');
  auto both = resolve_key_secret(KeyScope::kProcess, env);
  ASSERT_FALSE(both.has_value());
  EXPECT_NE(both.error().text.find("ABIDE_KEY_SECRET_FILE"), std::string::npos) << both.error().text;
}

TEST(KeySecretEnv, ASecretFileIsReadWithoutItsFinalNewline) {
  TempDir tmp;
  const fs::path file = tmp.path() / "fleet-secret";
  const std::string hex64(64, 'a');
  write_file(file, hex64 + "\n", 0600);
  SecretEnvironment env = state_home(tmp.path() / "none");
  env.secret_file = file.string();
  auto r = resolve_key_secret(KeyScope::kFleet, env);
  ASSERT_TRUE(r.has_value()) << r.error().text;
  EXPECT_TRUE(r->warning.empty());
  EXPECT_EQ(made_by(r->secret), made_by(*KeySecret::from_bytes(hex64, "t")));
  EXPECT_FALSE(fs::exists(tmp.path() / "none"));

  write_file(file, hex64, 0644);
  r = resolve_key_secret(KeyScope::kFleet, env);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().text.find(file.string()), std::string::npos) << r.error().text;
  write_file(file, "short\n", 0600);
  r = resolve_key_secret(KeyScope::kFleet, env);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().text.find("ABIDE_KEY_SECRET_FILE " + file.string()), std::string::npos) << r.error().text;
  env.secret_file = (tmp.path() / "missing").string();
  r = resolve_key_secret(KeyScope::kFleet, env);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().text.find((tmp.path() / "missing").string()), std::string::npos) << r.error().text;
}

TEST(KeySecretEnv, OfProcessReadsTheVariables) {
  const ScopedVar a("ABIDE_KEY_SECRET", "0123456789abcdef");
  const ScopedVar b("ABIDE_KEY_SECRET_FILE", nullptr);
  const ScopedVar c("XDG_STATE_HOME", "/srv/x");
  const SecretEnvironment env = SecretEnvironment::of_process();
  EXPECT_EQ(env.secret, std::optional<std::string>("0123456789abcdef"));
  EXPECT_FALSE(env.secret_file.has_value());
  EXPECT_EQ(env.xdg_state_home, std::optional<std::string>("/srv/x"));
}

}  // namespace
}  // namespace abide::cli
