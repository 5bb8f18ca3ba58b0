// abide mock-server's token styles and gemini with a manual clock: what each
// request is charged and given back, streams, and the mock's helpers.
#include "support/mock_server_fixture.h"

namespace abide::mock {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using fixture::kT0;
using fixture::header;
using fixture::header_names;
using fixture::options;
using fixture::get;
using fixture::chat;
using fixture::embedding;
using fixture::message;

// ---- the token styles and gemini, with a manual clock ------------------------

LimiterOptions token_options(Style style, std::uint32_t limit, Duration window, std::uint64_t tokens,
                             std::uint64_t output_tokens = 8000) {
  LimiterOptions o = options(style, limit, window);
  o.token_limit = tokens;
  o.output_token_limit = output_tokens;
  return o;
}

Answer post(Limiter& l, std::string_view path, const std::string& body, std::string_view client = "c",
            std::string_view conn = "127.0.0.1:1000") {
  return l.handle({"POST", path, client, conn, body});
}

std::uint64_t header_u64(const Answer& a, std::string_view name) {
  const auto v = header(a, name);
  return v ? std::stoull(*v) : ~std::uint64_t{0};
}

// The tokens taken at admission show as the bucket's remaining tokens on the
// answer: the charge is max(max_tokens, ceil(bytes / 4)), bytes of UTF-8 text.
TEST(MockTokens, OpenaiAdmissionChargeIsTheLargerOfMaxTokensAndTheEstimate) {
  const auto charged = [](const std::string& path, const std::string& body) {
    ManualClock clock(kT0);
    Limiter l(token_options(Style::kOpenaiTokens, 10, 60s, 100000), clock.wall());
    const Answer a = post(l, path, body);
    EXPECT_EQ(a.status, 200) << body;
    return 100000 - header_u64(a, "x-ratelimit-remaining-tokens");
  };
  EXPECT_EQ(charged("/v1/chat/completions", chat(400, {{"max_tokens", 50}})), 100u);  // estimate 100 > 50
  EXPECT_EQ(charged("/v1/chat/completions", chat(401, {{"max_tokens", 50}})), 101u);  // ceil(401 / 4)
  EXPECT_EQ(charged("/v1/chat/completions", chat(400, {{"max_tokens", 300}})), 300u);
  EXPECT_EQ(charged("/v1/chat/completions", chat(4, {{"max_completion_tokens", 70}})), 70u);
  EXPECT_EQ(charged("/v1/responses", json{{"input", "abcdefgh"}, {"max_output_tokens", 9}}.dump()), 9u);
  EXPECT_EQ(charged("/v1/chat/completions", chat(4, {{"max_tokens", 5}, {"max_completion_tokens", 70}})), 5u);
  EXPECT_EQ(charged("/v1/chat/completions", chat(4)), 4096u);  // OpenAI's default
  EXPECT_EQ(charged("/v1/embeddings", embedding(40)), 10u);    // embeddings: no output
  // UTF-8 bytes, not characters: "é" is two.
  const std::string accents = json{
      {"messages", json::array({{{"role", "user"}, {"content", "\u00e9\u00e9\u00e9\u00e9\u00e9"}}})},
      {"max_tokens", 1}}.dump();
  EXPECT_EQ(charged("/v1/chat/completions", accents), 3u);  // 10 bytes
  // Parts' text, a completions prompt and an embeddings array count too.
  const std::string parts = json{
      {"messages", json::array({{{"role", "user"},
                                 {"content", json::array({{{"type", "text"}, {"text", std::string(20, 'p')}},
                                                          {{"type", "image_url"}, {"image_url", "x"}}})}}})},
      {"max_tokens", 1}}.dump();
  EXPECT_EQ(charged("/v1/chat/completions", parts), 5u);
  EXPECT_EQ(charged("/v1/completions", json{{"prompt", std::string(12, 'p')}, {"max_tokens", 1}}.dump()), 3u);
  EXPECT_EQ(charged("/v1/embeddings", json{{"input", {"abcd", "efgh", "i"}}}.dump()), 3u);
}

// After the answer, the tokens bucket holds the charge less what the answer
// used (prompt + completion); a usage above the charge is taken too.
TEST(MockTokens, OpenaiReconciliationGivesBackWhatTheAnswerDidNotUse) {
  ManualClock clock(kT0);
  LimiterOptions o = token_options(Style::kOpenaiTokens, 10, 60s, 100000);
  o.seed = 5;
  Limiter l(o, clock.wall());
  const Answer a = post(l, "/v1/chat/completions", chat(40, {{"max_tokens", 400}}));  // P = 10, charge 400
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(header_u64(a, "x-ratelimit-remaining-tokens"), 100000u - 400);  // stated at admission
  const std::uint64_t c = TokenQuota::output_tokens(5, 0, 400);
  EXPECT_GE(c, 100u);
  EXPECT_LT(c, 390u);  // this seed leaves some of the reservation unused
  const json usage = json::parse(a.body)["usage"];
  EXPECT_EQ(usage, (json{{"prompt_tokens", 10}, {"completion_tokens", c}, {"total_tokens", 10 + c}}));
  // The next request (same instant: no refill) sees the first one charged P + C only.
  const Answer b = post(l, "/v1/embeddings", embedding(4));  // charge 1
  EXPECT_EQ(header_u64(b, "x-ratelimit-remaining-tokens"), 100000u - (10 + c) - 1);
  // A prompt larger than max_tokens: the charge is the prompt, the usage prompt + completion, the excess taken.
  const Answer big = post(l, "/v1/chat/completions", chat(4000, {{"max_tokens", 100}}));  // P = 1000
  const std::uint64_t c2 = TokenQuota::output_tokens(5, 2, 100);
  EXPECT_EQ(json::parse(big.body)["usage"]["completion_tokens"], c2);
  const Answer after = post(l, "/v1/embeddings", embedding(4));
  EXPECT_EQ(header_u64(after, "x-ratelimit-remaining-tokens"), 100000u - (10 + c) - 1 - (1000 + c2) - 1);
  // Determinism: the same seed and request number give the same draw; others differ somewhere.
  EXPECT_EQ(TokenQuota::output_tokens(5, 0, 400), c);
  bool differs = false;
  for (std::uint64_t n = 1; n < 20; ++n) differs = differs || TokenQuota::output_tokens(5, n, 400) != c;
  EXPECT_TRUE(differs);
  for (std::uint64_t n = 0; n < 200; ++n) {
    const std::uint64_t v = TokenQuota::output_tokens(9, n, 7);
    EXPECT_GE(v, 1u);
    EXPECT_LE(v, 7u);
  }
}

TEST(MockTokens, OpenaiLimitsOnTokensWhileRequestsHaveRoom) {
  ManualClock clock(kT0);
  Limiter l(token_options(Style::kOpenaiTokens, 100, 10s, 1000), clock.wall());  // one token back per 10 ms
  const Answer first = post(l, "/v1/embeddings", embedding(3200));               // 800 tokens
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(header(first, "x-ratelimit-remaining-tokens"), "200");
  const Answer limited = post(l, "/v1/embeddings", embedding(3200));
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(limited.outcome, Outcome::kLimited);
  EXPECT_EQ(header(limited, "x-ratelimit-remaining-requests"), "99");  // room for requests
  EXPECT_EQ(header(limited, "x-ratelimit-limit-tokens"), "1000");
  EXPECT_EQ(header(limited, "x-ratelimit-remaining-tokens"), "200");
  EXPECT_EQ(header(limited, "x-ratelimit-reset-tokens"), "8s");
  EXPECT_EQ(header(limited, "retry-after-ms"), "6000");  // 600 more tokens
  EXPECT_EQ(header(limited, "retry-after"), "6");
  const json e = json::parse(limited.body)["error"];
  EXPECT_EQ(e["type"], "tokens");
  EXPECT_EQ(e["code"], "rate_limit_exceeded");
  EXPECT_TRUE(e["param"].is_null());
  const std::string msg = e["message"];
  EXPECT_NE(msg.find("on tokens per min (TPM): Limit 1000, Used 800, Requested 800. Please try again in 6s."),
            std::string::npos)
      << msg;
  // A smaller request fits now: the limit is by tokens, not by requests.
  EXPECT_EQ(post(l, "/v1/embeddings", embedding(800), "other").status, 200);
  // A request larger than the bucket never fits: limited, with no wait stated.
  const Answer huge = post(l, "/v1/chat/completions", chat(4, {{"max_tokens", 1001}}), "other");
  EXPECT_EQ(huge.status, 429);
  EXPECT_FALSE(header(huge, "retry-after-ms"));
  EXPECT_FALSE(huge.permitted);
  EXPECT_NE(huge.body.find("Request too large"), std::string::npos);
}

// retry-after-ms is the time until this request's tokens are back, rounded up
// to the ms: one ns before the tokens are back the bucket still refuses, and
// a request at the stated time is accepted and on time.
TEST(MockTokens, OpenaiRetryAfterMsIsExactAndNeverEarly) {
  const auto limited_one = [](Limiter& l) {
    EXPECT_EQ(post(l, "/v1/embeddings", embedding(28)).status, 200);  // all 7 tokens
    return post(l, "/v1/embeddings", embedding(4));                   // 1 token: back after 1/7 s
  };
  ManualClock clock(kT0);
  LimiterOptions o = token_options(Style::kOpenaiTokens, 100, 1s, 7);
  o.grace = 0ms;
  Limiter l(o, clock.wall());
  const Answer limited = limited_one(l);
  ASSERT_EQ(limited.status, 429);
  EXPECT_EQ(header(limited, "retry-after-ms"), "143");  // 142.857... ms, up
  EXPECT_EQ(header(limited, "retry-after"), "1");
  ASSERT_TRUE(limited.permitted);
  EXPECT_EQ(*limited.permitted, kT0 + 143ms);
  clock.set_wall(kT0 + 142'857'142ns);  // 1 ns before the token is back
  const Answer probe = post(l, "/v1/embeddings", embedding(4), "probe");
  EXPECT_EQ(probe.status, 429);
  EXPECT_EQ(header(probe, "retry-after-ms"), "1");
  clock.set_wall(kT0 + 143ms);  // P
  const Answer on_time = post(l, "/v1/embeddings", embedding(4));
  EXPECT_EQ(on_time.status, 200);
  EXPECT_FALSE(on_time.premature);

  // The same, retried 1 ns before P: a token is back, but the client was told 143 ms.
  ManualClock clock2(kT0);
  Limiter l2(o, clock2.wall());
  ASSERT_EQ(limited_one(l2).status, 429);
  clock2.set_wall(kT0 + 143ms - 1ns);
  const Answer early = post(l2, "/v1/embeddings", embedding(4));
  EXPECT_TRUE(early.premature);
  EXPECT_EQ(l2.totals().premature, 1u);
}

// Anthropic: the input is charged at admission, max_tokens reserved from the
// output bucket, and the unused part of the reservation comes back.
TEST(MockTokens, AnthropicSplitsInputAndOutputAndGivesBackUnusedOutput) {
  ManualClock clock(kT0);
  LimiterOptions o = token_options(Style::kAnthropicTokens, 100, 60s, 1000, 1000);
  o.seed = 3;
  Limiter l(o, clock.wall());
  const Answer a = post(l, "/v1/messages", message(40, 400, {{"max_tokens", 400}}));  // input 10 + 100
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(header(a, "anthropic-ratelimit-input-tokens-remaining"), "890");
  EXPECT_EQ(header(a, "anthropic-ratelimit-output-tokens-remaining"), "600");  // reserved at admission
  EXPECT_EQ(header(a, "anthropic-ratelimit-tokens-remaining"), "600");         // the more restrictive
  EXPECT_EQ(header(a, "anthropic-ratelimit-tokens-limit"), "1000");
  EXPECT_EQ(header(a, "anthropic-ratelimit-requests-remaining"), "99");
  // Full again 6.6 s from 00:00:00.25 for the input (110 of 1000 per minute), 24 s for the output.
  EXPECT_EQ(header(a, "anthropic-ratelimit-input-tokens-reset"), "2026-01-01T00:00:07Z");
  EXPECT_EQ(header(a, "anthropic-ratelimit-output-tokens-reset"), "2026-01-01T00:00:25Z");
  EXPECT_FALSE(header(a, "retry-after"));
  const std::uint64_t out = TokenQuota::output_tokens(3, 0, 400);
  ASSERT_LT(out, 400u);
  const json body = json::parse(a.body);
  EXPECT_EQ(body["type"], "message");
  EXPECT_EQ(body["usage"], (json{{"input_tokens", 110},
                                 {"output_tokens", out},
                                 {"cache_read_input_tokens", 0},
                                 {"cache_creation_input_tokens", 0}}));
  // The next request sees only the output actually used taken.
  const Answer b = post(l, "/v1/messages", message(0, 4, {{"max_tokens", 1}}));
  EXPECT_EQ(header_u64(b, "anthropic-ratelimit-output-tokens-remaining"), 1000 - out - 1);
  EXPECT_EQ(header_u64(b, "anthropic-ratelimit-input-tokens-remaining"), 1000u - 110 - 1);
  // Output short while input and requests have room: limited, retry-after in whole seconds up.
  const std::uint64_t left = 1000 - out - 1 + (1 - TokenQuota::output_tokens(3, 1, 1));
  const Answer limited = post(l, "/v1/messages", message(0, 4, {{"max_tokens", left + 10}}));
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(header(limited, "retry-after"), "1");  // 10 output tokens: 0.6 s at 1000 per minute
  EXPECT_EQ(json::parse(limited.body),
            json::parse(
                anthropic_error("rate_limit_error", json::parse(limited.body)["error"]["message"].get<std::string>())));
  EXPECT_NE(limited.body.find("output tokens per minute"), std::string::npos) << limited.body;
}

std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
  return out;
}

TEST(MockTokens, StreamsCarryTheUsageInTheVendorsEvents) {
  ManualClock clock(kT0);
  Limiter l(token_options(Style::kOpenaiTokens, 100, 60s, 100000), clock.wall());
  const Answer s = post(l, "/v1/chat/completions",
                        chat(40,
                             {{"max_tokens", 64}, {"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(s.status, 200);
  EXPECT_EQ(s.content_type, "text/event-stream");
  const auto events = sse_data(s.body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json last = json::parse(events[events.size() - 2]);
  EXPECT_EQ(last["choices"], json::array());
  const std::uint64_t c = TokenQuota::output_tokens(1, 0, 64);
  EXPECT_EQ(last["usage"], (json{{"prompt_tokens", 10}, {"completion_tokens", c}, {"total_tokens", 10 + c}}));
  std::string text;
  for (std::size_t i = 0; i + 2 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    EXPECT_TRUE(chunk["usage"].is_null());
    text += chunk["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(text, kMockAnswerText);
  // Without include_usage: no usage chunk at all.
  const Answer plain = post(l, "/v1/chat/completions", chat(4, {{"max_tokens", 8}, {"stream", true}}));
  EXPECT_EQ(plain.body.find("usage"), std::string::npos);
  EXPECT_EQ(sse_data(plain.body).back(), "[DONE]");

  Limiter a(token_options(Style::kAnthropicTokens, 100, 60s, 100000, 100000), clock.wall());
  const Answer m = post(a, "/v1/messages", message(8, 32, {{"max_tokens", 100}, {"stream", true}}));
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.content_type, "text/event-stream");
  std::vector<std::string> names;
  std::istringstream in(m.body);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("event: ", 0) == 0) names.push_back(line.substr(7));
  EXPECT_EQ(names, (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                             "content_block_delta", "content_block_delta", "content_block_stop",
                                             "message_delta", "message_stop"}));
  const auto data = sse_data(m.body);
  ASSERT_EQ(data.size(), names.size());
  EXPECT_EQ(json::parse(data[0])["message"]["usage"]["input_tokens"], 10);
  EXPECT_EQ(json::parse(data[6])["usage"]["output_tokens"], TokenQuota::output_tokens(1, 0, 100));
}

// Gemini states its wait only in the body: RetryInfo's retryDelay, the whole
// seconds left in the window, rounded up; a retry before it is premature.
TEST(MockTokens, GeminiRetryDelayIsTheWaitAndAnEarlierRetryIsPremature) {
  ManualClock clock(kT0);
  LimiterOptions o = options(Style::kGemini, 1, 60s);
  o.grace = 0ms;
  Limiter l(o, clock.wall());
  const Answer ok = get(l);
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(header_names(ok), std::vector<std::string>{"Date"});
  EXPECT_TRUE(json::parse(ok.body).contains("candidates"));
  clock.advance(10500ms);  // 49.5 s left
  const Answer limited = get(l);
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(header_names(limited), std::vector<std::string>{"Date"});  // no rate-limit field, no Retry-After
  const json e = json::parse(limited.body)["error"];
  EXPECT_EQ(e["code"], 429);
  EXPECT_EQ(e["status"], "RESOURCE_EXHAUSTED");
  EXPECT_EQ(e["message"], "Resource has been exhausted (e.g. check quota).");
  EXPECT_EQ(e["details"][0]["@type"], "type.googleapis.com/google.rpc.RetryInfo");
  EXPECT_EQ(e["details"][0]["retryDelay"], "50s");
  ASSERT_TRUE(limited.permitted);
  EXPECT_EQ(*limited.permitted, kT0 + 60500ms);
  clock.set_wall(kT0 + 60500ms - 1ns);
  const Answer early = get(l);
  EXPECT_TRUE(early.premature);
  EXPECT_EQ(early.status, 200);  // window 1 had begun: the quota was back, the client was told 50 s
  clock.set_wall(kT0 + 60500ms);
  EXPECT_FALSE(get(l).premature);
  EXPECT_EQ(l.totals().premature, 1u);
}

// A body a token style cannot read is a 400 (413 over 1 MiB) in the vendor's
// error shape: no crash, no quota used, counted as invalid and not as a request.
TEST(MockTokens, UnreadableBodiesAre400AndUseNoQuota) {
  ManualClock clock(kT0);
  Limiter l(token_options(Style::kOpenaiTokens, 1, 60s, 1000), clock.wall());
  const std::vector<std::string> bad{"{bad",
                                     "",
                                     "[]",
                                     "null",
                                     "\"text\"",
                                     std::string(100, '[') + std::string(100, ']'),
                                     chat(4, {{"max_tokens", "ten"}}),
                                     chat(4, {{"max_tokens", -1}}),
                                     chat(4, {{"max_tokens", 1.5}}),
                                     chat(4, {{"stream", "yes"}}),
                                     chat(4, {{"stream_options", {{"include_usage", 1}}}}),
                                     "{\"messages\": [{\"content\": \"\xff\xfe\"}]}"};
  for (const auto& body : bad) {
    const Answer a = post(l, "/v1/chat/completions", body);
    EXPECT_EQ(a.status, 400) << body;
    EXPECT_EQ(a.outcome, Outcome::kInvalid) << body;
    const json e = json::parse(a.body, nullptr, false);
    ASSERT_FALSE(e.is_discarded()) << a.body;
    EXPECT_EQ(e["error"]["type"], "invalid_request_error") << body;
    EXPECT_FALSE(e["error"]["message"].get<std::string>().empty());
  }
  const Answer big = post(l, "/v1/chat/completions", std::string(kMaxBodyBytes + 1, ' '));
  EXPECT_EQ(big.status, 413);
  const Counts t = l.totals();
  EXPECT_EQ(t.requests, 0u);
  EXPECT_EQ(l.token_totals().invalid, bad.size() + 1);
  // The one request of the quota is still there.
  EXPECT_EQ(post(l, "/v1/chat/completions", chat(4, {{"max_tokens", 10}})).status, 200);

  Limiter a(token_options(Style::kAnthropicTokens, 10, 60s, 1000, 1000), clock.wall());
  for (const auto& body : {message(0, 4), message(0, 4, {{"max_tokens", 0}}), std::string("{")}) {
    const Answer r = post(a, "/v1/messages", body);
    EXPECT_EQ(r.status, 400) << body;
    const json e = json::parse(r.body);
    EXPECT_EQ(e["type"], "error");
    EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  }
  EXPECT_NE(post(a, "/v1/messages", message(0, 4)).body.find("max_tokens"), std::string::npos);
  EXPECT_EQ(post(a, "/v1/messages", std::string(kMaxBodyBytes + 1, ' ')).status, 413);
  EXPECT_EQ(a.totals().requests, 0u);
}

// /__stats counts, per window and in total, the tokens admitted and charged
// after reconciliation (input and output apart for anthropic).
TEST(MockTokens, StatsCountTokensPerWindowAndInTotal) {
  ManualClock clock(kT0);
  Limiter l(token_options(Style::kOpenaiTokens, 100, 10s, 100000), clock.wall());
  post(l, "/v1/chat/completions", chat(40, {{"max_tokens", 100}}));  // window 0: admitted 100, charged 10 + C0
  post(l, "/v1/embeddings", embedding(80));                          // window 0: 20, 20
  post(l, "/v1/chat/completions", "{");                              // invalid
  clock.advance(10s);
  post(l, "/v1/chat/completions", chat(400, {{"max_tokens", 8}}));  // window 1: admitted 100, charged 100 + C2
  post(l, "/v1/embeddings", embedding(4000000), "x");               // 413
  const std::uint64_t c0 = TokenQuota::output_tokens(1, 0, 100);
  const std::uint64_t c2 = TokenQuota::output_tokens(1, 2, 8);
  const json s = json::parse(l.stats().dump());
  EXPECT_EQ(s["server"]["token_limit"], 100000);
  EXPECT_FALSE(s["server"].contains("output_token_limit"));
  EXPECT_EQ(s["totals"]["requests"], 3);
  EXPECT_EQ(s["totals"]["invalid"], 2);
  EXPECT_EQ(s["totals"]["tokens"],
            (json{{"admitted", 220}, {"charged", 10 + c0 + 20 + 100 + c2}, {"prompt", 130}, {"completion", c0 + c2}}));
  ASSERT_EQ(s["windows"].size(), 2u);
  EXPECT_EQ(s["windows"][0]["invalid"], 1);
  EXPECT_EQ(s["windows"][0]["tokens"],
            (json{{"admitted", 120}, {"charged", 30 + c0}, {"prompt", 30}, {"completion", c0}}));
  EXPECT_EQ(s["windows"][1]["invalid"], 1);
  EXPECT_EQ(s["windows"][1]["tokens"],
            (json{{"admitted", 100}, {"charged", 100 + c2}, {"prompt", 100}, {"completion", c2}}));
  EXPECT_FALSE(s["clients"]["c"].contains("tokens"));  // per client: the request counts only

  Limiter a(token_options(Style::kAnthropicTokens, 100, 10s, 1000, 500), clock.wall());
  post(a, "/v1/messages", message(4, 36, {{"max_tokens", 50}}));
  const std::uint64_t o0 = TokenQuota::output_tokens(1, 0, 50);
  const json sa = json::parse(a.stats().dump());
  EXPECT_EQ(sa["server"]["output_token_limit"], 500);
  const json want{{"input_admitted", 10}, {"input_charged", 10}, {"output_admitted", 50}, {"output_charged", o0}};
  EXPECT_EQ(sa["totals"]["tokens"], want);
  EXPECT_EQ(sa["windows"][0]["tokens"], want);
  // A style without tokens has none of these keys.
  Limiter d(options(Style::kDraft11, 1, 1s), clock.wall());
  get(d);
  const json sd = json::parse(d.stats().dump());
  EXPECT_FALSE(sd["totals"].contains("tokens"));
  EXPECT_FALSE(sd["totals"].contains("invalid"));
  EXPECT_FALSE(sd["windows"][0].contains("tokens"));
}

TEST(MockTokens, BucketIsExactInIntegers) {
  Bucket b(3, 1s, kT0);  // one unit per 333.333... ms
  EXPECT_EQ(b.available(), 3u);
  EXPECT_TRUE(b.holds(3));
  EXPECT_FALSE(b.holds(4));
  EXPECT_EQ(b.until(4), Duration::max());
  b.take(3);
  EXPECT_EQ(b.until(1), 333'333'334ns);  // rounded up
  EXPECT_EQ(b.until_full(), 1s);
  b.refill(kT0 + 333'333'333ns);
  EXPECT_FALSE(b.holds(1));
  b.refill(kT0 + 333'333'334ns);
  EXPECT_TRUE(b.holds(1));
  b.refill(kT0);  // time never goes back
  EXPECT_TRUE(b.holds(1));
  b.take(3);  // overdrawn by two
  EXPECT_EQ(b.available(), 0u);
  EXPECT_FALSE(b.holds(0));
  b.give(1000);  // never beyond full
  EXPECT_EQ(b.available(), 3u);
  EXPECT_EQ(b.until_full(), Duration::zero());
  b.take(2);
  b.refill(kT0 + 1h);
  EXPECT_EQ(b.available(), 3u);
}

TEST(MockHelpers, GoDurations) {
  EXPECT_EQ(go_duration(0s), "0s");
  EXPECT_EQ(go_duration(-3s), "0s");
  EXPECT_EQ(go_duration(1ns), "1ms");
  EXPECT_EQ(go_duration(12ms), "12ms");
  EXPECT_EQ(go_duration(1s), "1s");
  EXPECT_EQ(go_duration(1500ms), "1.5s");
  EXPECT_EQ(go_duration(1010ms), "1.01s");
  EXPECT_EQ(go_duration(6min), "6m0s");
  EXPECT_EQ(go_duration(61250ms), "1m1.25s");
  EXPECT_EQ(go_duration(1h), "1h0m0s");
}

TEST(MockHelpers, LoopbackOnly) {
  for (const char* ok : {"127.0.0.1", "127.1.2.3", "localhost"}) EXPECT_TRUE(is_loopback_address(ok)) << ok;
  for (const char* no :
       {"0.0.0.0", "10.0.0.1", "192.168.1.1", "::1", "::", "example.com", "", "127.0.0.1 ", "128.0.0.1", "127.0.0.256"})
    EXPECT_FALSE(is_loopback_address(no)) << no;
}

TEST(MockHelpers, Styles) {
  for (const auto& [style, name] : kStyleNames) EXPECT_EQ(parse_style(name), style);
  EXPECT_FALSE(parse_style("Draft11"));
  LimiterOptions o;
  EXPECT_EQ(validate(o), "");
  o.limited_status = 500;
  EXPECT_NE(validate(o), "");
  for (const Style s : {Style::kOpenaiTokens, Style::kAnthropicTokens, Style::kGemini}) {
    LimiterOptions v;
    v.style = s;
    EXPECT_EQ(validate(v), "") << to_string(s);
    v.limited_status = 503;  // their bodies are 429s
    EXPECT_NE(validate(v).find("429"), std::string::npos) << to_string(s);
  }
  LimiterOptions t;
  t.style = Style::kAnthropicTokens;
  t.token_limit = 0;
  EXPECT_NE(validate(t).find("--token-limit"), std::string::npos);
  t.token_limit = 1;
  t.output_token_limit = kMaxTokenLimit + 1;
  EXPECT_NE(validate(t).find("--output-token-limit"), std::string::npos);
}

}  // namespace
}  // namespace abide::mock
