// `abide proxy`'s rules without sockets: routes, forwarded fields, quota
// keys, the caller's budget, the answers and their Abide-* fields, the
// pages' counters, and the SHA-256 behind the keys.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "abide/testing/manual_clock.h"
#include "proxy/proxy_rules.h"
#include "proxy/proxy_stats.h"
#include "proxy/sha256.h"

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

// ---- SHA-256 ----

TEST(Sha256, NistVectors) {
  EXPECT_EQ(to_hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(to_hex(sha256(std::string(1'000'000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingAtBlockEdges) {
  // 55 bytes fit one padded block, 56 need two; 64 is exactly one block of data.
  EXPECT_EQ(to_hex(sha256(std::string(55, 'a'))), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(to_hex(sha256(std::string(56, 'a'))), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(to_hex(sha256(std::string(64, 'a'))), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
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
  for (std::string_view bad :
       {"openai=https://a.com", "/a?b=https://a.com", "/a b=https://a.com", "/a#=https://a.com", "/a", "/a=notaurl"}) {
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
  EXPECT_EQ(quota_key(r.origin, {{"Accept", "*/*"}}), "https://api.x.com");
}

TEST(QuotaKey, SameCredentialInAnyCaseOfNameIsOneKey) {
  const Route r = route("https://api.x.com");
  const std::string a = quota_key(r.origin, {{"Authorization", "Bearer sk-live-123"}});
  const std::string b = quota_key(r.origin, {{"authorization", "Bearer sk-live-123"}, {"Accept", "x"}});
  const std::string c = quota_key(r.origin, {{"AUTHORIZATION", "Bearer sk-live-123"}});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  ASSERT_EQ(a.size(), std::string("https://api.x.com#").size() + 16);
  EXPECT_EQ(a.substr(0, 18), "https://api.x.com#");
  // The digest of "authorization:Bearer sk-live-123\n", its first 8 bytes.
  EXPECT_EQ(a.substr(18), to_hex(sha256("authorization:Bearer sk-live-123\n")).substr(0, 16));
}

TEST(QuotaKey, DifferentValuesOrFieldsOrOriginsAreDifferentKeys) {
  const Route r = route("https://api.x.com");
  const Route other = route("https://api.y.com");
  const std::string a = quota_key(r.origin, {{"Authorization", "Bearer sk-1"}});
  EXPECT_NE(a, quota_key(r.origin, {{"Authorization", "Bearer sk-2"}}));
  EXPECT_NE(a, quota_key(r.origin, {{"Authorization", "bearer sk-1"}}));  // values are case-sensitive
  EXPECT_NE(a, quota_key(r.origin, {{"X-Api-Key", "Bearer sk-1"}}));
  EXPECT_NE(a, quota_key(other.origin, {{"Authorization", "Bearer sk-1"}}));
  for (std::string_view name : {"X-Api-Key", "Api-Key", "X-Auth-Token", "Private-Token", "X-Goog-Api-Key"}) {
    EXPECT_NE(quota_key(r.origin, {{std::string(name), "k"}}), r.origin.origin) << name;
  }
}

TEST(QuotaKey, SeveralCredentialsInAnyOrderAreOneKey) {
  const Route r = route("https://api.x.com");
  const std::string a = quota_key(r.origin, {{"X-Api-Key", "k1"}, {"Authorization", "t1"}});
  const std::string b = quota_key(r.origin, {{"authorization", "t1"}, {"x-api-key", "k1"}});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.substr(18), to_hex(sha256("authorization:t1\nx-api-key:k1\n")).substr(0, 16));
  EXPECT_NE(a, quota_key(r.origin, {{"X-Api-Key", "k1"}}));
}

TEST(QuotaKey, TheKeyNeverHoldsTheCredential) {
  const Route r = route("https://api.x.com");
  for (std::string_view secret : {"sk-ant-api03-abcdef", "0123456789abcdef", "Bearer sk-proj-XYZ"}) {
    const std::string key = quota_key(r.origin, {{"X-Api-Key", std::string(secret)}});
    EXPECT_EQ(key.find(secret, std::string("https://api.x.com#").size()), std::string::npos) << key;
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
  const engine::Request req = upstream_request(head, r, "{}");
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.url, "https://api.x.com/v1/chat?stream=1");
  EXPECT_EQ(names(req.headers), (std::vector<std::string>{"Authorization", "Idempotency-Key", "Content-Type"}));
  EXPECT_EQ(req.body, "{}");
  EXPECT_EQ(req.pacer_key, quota_key(r.origin, head.headers));
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
  ASSERT_TRUE(a.content_length.has_value());
  EXPECT_EQ(*a.content_length, 17u);
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
  EXPECT_EQ(field(a.head.headers, "Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(a.body, "abide proxy: deferred: the quota permits the next send only later\n");
  ASSERT_TRUE(a.head.content_length.has_value());
  EXPECT_EQ(*a.head.content_length, a.body.size());
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
  const MadeAnswer a = outcome_answer(o, kNow);
  EXPECT_EQ(a.head.status, 503);
  EXPECT_EQ(names(a.head.headers),
            (std::vector<std::string>{"RateLimit", "Date", "Abide-Outcome", "Abide-Attempts", "Abide-Waited",
                                      "Retry-After", "Abide-Not-Before", "Content-Type"}));
  EXPECT_EQ(field(a.head.headers, "Retry-After"), "9");
  EXPECT_EQ(field(a.head.headers, "Abide-Attempts"), "3");
  EXPECT_EQ(field(a.head.headers, "Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(a.body, "abide proxy: exhausted: no attempts left\n");
}

TEST(OutcomeAnswer, AmbiguousIs502) {
  RequestOutcome o = outcome_of(OutcomeKind::kNotRetryable, "connection reset after the request was sent");
  o.ambiguous = true;
  o.attempts.resize(1);
  o.attempts[0].sent = true;
  const MadeAnswer a = outcome_answer(o, kNow);
  EXPECT_EQ(a.head.status, 502);
  EXPECT_EQ(field(a.head.headers, "Abide-Outcome"), "ambiguous");
  EXPECT_EQ(a.body, "abide proxy: ambiguous: connection reset after the request was sent\n");
}

TEST(OutcomeAnswer, TransportFailuresAndNotRetryableWithoutAnswerAre502) {
  RequestOutcome sent = outcome_of(OutcomeKind::kExhausted, "connection refused");
  sent.attempts.resize(2);
  EXPECT_EQ(outcome_answer(sent, kNow).head.status, 502);
  RequestOutcome refused = outcome_of(OutcomeKind::kNotRetryable, "a header value holds a line break");
  const MadeAnswer a = outcome_answer(refused, kNow);
  EXPECT_EQ(a.head.status, 502);
  EXPECT_EQ(a.body, "abide proxy: not_retryable: a header value holds a line break\n");
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
}

TEST(ErrorAnswer, PlainTextWithoutOutcomeExceptFor503) {
  const MadeAnswer bad = error_answer(400, "Abide-Max-Wait \"x\" is not decimal seconds");
  EXPECT_EQ(bad.head.status, 400);
  EXPECT_EQ(bad.body, "abide proxy: Abide-Max-Wait \"x\" is not decimal seconds\n");
  EXPECT_EQ(field(bad.head.headers, "Content-Type"), "text/plain; charset=utf-8");
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
                                            "outcomes", "deferrals", "held", "transfers", "cooldowns"}));
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
  EXPECT_EQ(helps, 11u);
  EXPECT_EQ(types, 11u);
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
