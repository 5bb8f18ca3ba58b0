// `abide proxy`'s answers, without sockets: the upstream answer's head and its
// Abide-* fields, the answers the proxy makes itself, the callers' dialects
// and its pages.
#include "support/proxy_rules_fixture.h"

namespace abide::proxy {
namespace {

using namespace std::chrono_literals;
using test::kNow;
using test::names;
using test::field;
using test::Final;
using test::route;
using test::outcome_of;

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
  o.body = "dropped";
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

}  // namespace
}  // namespace abide::proxy
