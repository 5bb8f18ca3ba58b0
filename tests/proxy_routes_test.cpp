// `abide proxy`'s rules for a request, without sockets: routes and the URLs
// back through the proxy, forwarded fields, the caller's budget, quota keys
// and the upstream request.
#include "support/proxy_rules_fixture.h"

namespace abide::proxy {
namespace {

using namespace std::chrono_literals;
using test::kNow;
using test::names;
using test::field;
using test::Final;
using test::route;

cli::KeySecret secret_of(char c) {
  auto s = cli::KeySecret::from_bytes(std::string(32, c), "test");
  EXPECT_TRUE(s.has_value());
  return s.has_value() ? *s : cli::KeySecret();
}

const cli::KeySecret kSecret = secret_of('k');

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
  // Built in place: GCC 12 at -O1 warns of an out-of-bounds copy (a false
  // positive, -Warray-bounds) in std::string(100, 'x') + "\x1b".
  std::string value(100, 'x');
  value += "\x1b";
  auto d = caller_max_wait({{"Abide-Max-Wait", value}}, 1s);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().text.find(std::string(33, 'x')), std::string::npos);
  EXPECT_NE(d.error().text.find(std::string(32, 'x').append("...")), std::string::npos);
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

}  // namespace
}  // namespace abide::proxy
