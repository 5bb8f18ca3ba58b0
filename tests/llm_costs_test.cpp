// Token costs of language-model requests (src/llm): the estimate before
// sending (OpenAI's documented admission rule, Anthropic's generous one, the
// small fallback), the caller's Abide-Cost, the usage an answer states (whole
// JSON and event streams split anywhere), and error events in a stream.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "llm/cost_estimate.h"
#include "llm/usage.h"

namespace abide::detail {
namespace {

using namespace std::chrono_literals;

std::optional<std::int64_t> amount(const std::vector<UnitCost>& costs, std::string_view unit) {
  for (const auto& c : costs) {
    if (c.unit == unit) return c.amount;
  }
  return std::nullopt;
}

std::optional<std::int64_t> amount(const std::optional<std::vector<UnitCost>>& costs, std::string_view unit) {
  return costs ? amount(*costs, unit) : std::nullopt;
}

std::int64_t tokens(CostRule rule, std::string_view path, std::string_view body) {
  const CostEstimate e = estimate_costs(rule, path, body);
  EXPECT_FALSE(e.fallback) << e.why;
  return amount(e.costs, "tokens").value_or(-1);
}

// JSON string contents (quotes and backslashes escaped; the texts below have no control bytes).
std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

std::string chat(std::string_view text, std::string_view extra = "") {
  return R"({"model":"gpt-4o","messages":[{"role":"user","content":)" + quoted(text) + "}]" + std::string(extra) + "}";
}

std::int64_t ceil_div(std::size_t n, std::size_t d) { return static_cast<std::int64_t>((n + d - 1) / d); }

bool printable_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
}

constexpr std::string_view kChat = "/v1/chat/completions";

// ---- the OpenAI rule ------------------------------------------------------------------------

// Admitted on "the maximum of max_tokens and the estimated number of tokens
// based on the character count", then charged the usage, up to text / 4 +
// max_tokens: the sum is reserved, never less than the admission.
TEST(OpenAIEstimate, TextOverFourPlusMaxTokens) {
  EXPECT_EQ(tokens(CostRule::kOpenAI, kChat, chat("hello", R"(,"max_tokens":300)")), 302);
  const std::string text(4001, 'a');
  EXPECT_EQ(tokens(CostRule::kOpenAI, kChat, chat(text, R"(,"max_tokens":300)")), 1301);
  const CostEstimate e = estimate_costs(CostRule::kOpenAI, kChat, chat(text, R"(,"max_tokens":300)"));
  EXPECT_EQ(e.costs.size(), 1u);
  EXPECT_TRUE(printable_ascii(e.why)) << e.why;
  EXPECT_NE(e.why.find("max_tokens 300"), std::string::npos) << e.why;
}

TEST(OpenAIEstimate, MaxTokensThenMaxCompletionTokensThenMaxOutputTokensThenTheDefault) {
  // "hi" is one token by the character rule.
  EXPECT_EQ(tokens(CostRule::kOpenAI, kChat, chat("hi", R"(,"max_completion_tokens":700)")), 701);
  EXPECT_EQ(tokens(CostRule::kOpenAI, kChat, chat("hi", R"(,"max_tokens":500,"max_completion_tokens":700)")), 501);
  EXPECT_EQ(tokens(CostRule::kOpenAI, kChat, chat("hi", R"(,"max_tokens":null,"max_completion_tokens":700)")), 701);
  EXPECT_EQ(tokens(CostRule::kOpenAI, "/v1/responses", R"({"input":"hi","max_output_tokens":900})"), 901);
  EXPECT_EQ(tokens(CostRule::kOpenAI, kChat, chat("hi")), kDefaultMaxTokens + 1);
}

// The property the pacer relies on: a server counting ceil(chars / 4) over the
// same text never counts more than was reserved, whatever the text and maximum.
TEST(OpenAIEstimate, NeverBelowTheDocumentedCharacterRule) {
  std::mt19937 rng(28);
  const std::vector<std::string> pieces = {"a", " ", "é", "日本", "🙂", "\\\"", "xyz", "\\n"};
  for (int round = 0; round < 300; ++round) {
    std::string text;
    const int n = static_cast<int>(rng() % 3000);
    for (int i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
    const int max = static_cast<int>(rng() % 2000);
    const std::string body =
        R"({"messages":[{"role":"system","content":")" + text +
        R"("},{"role":"user","content":[{"type":"text","text":")" + text +
        R"("},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}],"max_tokens":)" +
        std::to_string(max) + "}";
    // The text as the server sees it: JSON escapes decoded (\" is one byte, \n one byte).
    std::string decoded;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\\') ++i;
      decoded.push_back(text[i]);
    }
    std::size_t chars = 0;  // code points: never more than bytes
    for (const char c : decoded) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
    const std::int64_t server = std::max<std::int64_t>(max, ceil_div(2 * chars, 4));
    const std::int64_t reserved = tokens(CostRule::kOpenAI, kChat, body);
    ASSERT_GE(reserved, server) << body.substr(0, 200);
    ASSERT_GE(reserved, ceil_div(2 * decoded.size(), 4));
  }
}

TEST(OpenAIEstimate, TextPartsCountImagesDoNot) {
  const std::string image(40000, 'A');
  const std::string body = R"({"messages":[{"role":"user","content":[{"type":"text","text":")" + std::string(400, 'x') +
                           R"("},{"type":"image_url","image_url":{"url":"data:image/png;base64,)" + image +
                           R"("}}]}],"max_tokens":10})";
  EXPECT_EQ(tokens(CostRule::kOpenAI, kChat, body), 110);
}

TEST(OpenAIEstimate, ToolCallsAndToolDefinitionsCount) {
  const std::string args(800, 'q');
  const std::string body =
      R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function",)"
      R"("function":{"name":"f","arguments":")" +
      args + R"("}}]}],"max_tokens":1})";
  EXPECT_GE(tokens(CostRule::kOpenAI, kChat, body), 200);
  const std::string tools = R"({"messages":[],"tools":[{"type":"function","function":{"name":"f","description":")" +
                            std::string(1200, 'd') + R"("}}],"max_tokens":1})";
  EXPECT_GE(tokens(CostRule::kOpenAI, kChat, tools), 300);
}

TEST(OpenAIEstimate, ResponsesInstructionsAndInputItems) {
  const std::string body = R"({"instructions":")" + std::string(400, 'i') +
                           R"(","input":[{"role":"user","content":[{"type":"input_text","text":")" +
                           std::string(400, 't') + R"("}]},{"type":"function_call_output","call_id":"x","output":")" +
                           std::string(400, 'o') + R"("}],"max_output_tokens":1})";
  EXPECT_EQ(tokens(CostRule::kOpenAI, "/v1/responses", body), 301);
}

TEST(OpenAIEstimate, CompletionsPromptAndEmbeddingsInput) {
  EXPECT_EQ(tokens(CostRule::kOpenAI, "/v1/completions",
                   R"({"prompt":")" + std::string(8000, 'p') + R"(","max_tokens":5})"),
            2005);
  EXPECT_EQ(tokens(CostRule::kOpenAI, "/v1/completions", R"({"prompt":["ab","cd"],"max_tokens":5})"), 6);
  // Embeddings generate nothing: only the text counts, however long max_tokens says.
  EXPECT_EQ(tokens(CostRule::kOpenAI, "/v1/embeddings",
                   R"({"input":")" + std::string(40, 'e') + R"(","max_tokens":999})"),
            10);
  EXPECT_EQ(tokens(CostRule::kOpenAI, "/v1/embeddings", R"({"input":["abcd","efgh"]})"), 2);
  // Token ids count one each.
  EXPECT_EQ(tokens(CostRule::kOpenAI, "/v1/embeddings", R"({"input":[[1,2,3],[4,5]]})"), 5);
}

TEST(OpenAIEstimate, AzureDeploymentPathsAndQueryStrings) {
  const std::string body = chat("hi", R"(,"max_tokens":77)");
  EXPECT_EQ(tokens(CostRule::kOpenAI, "/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21", body), 78);
  EXPECT_EQ(tokens(CostRule::kOpenAI, "/openai/deployments/ada/embeddings?api-version=2024-10-21",
                   R"({"input":"abcdefgh"})"),
            2);
  EXPECT_EQ(tokens(CostRule::kOpenAI, "/openai/v1/responses/", R"({"input":"x","max_output_tokens":3})"), 4);
  EXPECT_EQ(tokens(CostRule::kOpenAI, "https://x.openai.azure.com/openai/deployments/d/completions?a=b",
                   R"({"prompt":"x","max_tokens":4})"),
            5);
}

// ---- the Anthropic rule -----------------------------------------------------------------------

TEST(AnthropicEstimate, InputOverThreeOutputMaxTokensAndTheirSum) {
  const std::string body = R"({"model":"claude","max_tokens":1024,"system":")" + std::string(300, 's') +
                           R"(","messages":[{"role":"user","content":")" + std::string(301, 'u') +
                           R"("},{"role":"assistant","content":[{"type":"text","text":")" + std::string(299, 'a') +
                           R"("},{"type":"image","source":{"type":"base64","data":")" + std::string(9000, 'B') +
                           R"("}}]}]})";
  const CostEstimate e = estimate_costs(CostRule::kAnthropic, "/v1/messages", body);
  EXPECT_FALSE(e.fallback) << e.why;
  EXPECT_EQ(amount(e.costs, "input-tokens"), 300);
  EXPECT_EQ(amount(e.costs, "output-tokens"), 1024);
  EXPECT_EQ(amount(e.costs, "tokens"), 1324);
  EXPECT_TRUE(printable_ascii(e.why)) << e.why;
}

TEST(AnthropicEstimate, SystemBlocksToolUseAndToolResultsCount) {
  const std::string body = R"({"max_tokens":1,"system":[{"type":"text","text":")" + std::string(30, 's') +
                           R"("}],"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n",)"
                           R"("input":{"q":")" +
                           std::string(30, 'q') +
                           R"("}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[)"
                           R"({"type":"text","text":")" +
                           std::string(30, 'r') + R"("}]}]}]})";
  const CostEstimate e = estimate_costs(CostRule::kAnthropic, "/v1/messages", body);
  EXPECT_GE(amount(e.costs, "input-tokens").value_or(0), 30);
}

TEST(AnthropicEstimate, NeverBelowCharsOverFour) {
  for (std::size_t n : {0u, 1u, 2u, 3u, 4u, 5u, 11u, 12u, 13u, 1000u, 99999u}) {
    const std::string body = R"({"max_tokens":1,"messages":[{"role":"user","content":")" + std::string(n, 'x') +
                             R"("}]})";
    const CostEstimate e = estimate_costs(CostRule::kAnthropic, "/v1/messages", body);
    EXPECT_GE(amount(e.costs, "input-tokens").value_or(-1), ceil_div(n, 4)) << n;
    EXPECT_EQ(amount(e.costs, "input-tokens").value_or(-1), ceil_div(n, 3)) << n;
  }
}

TEST(AnthropicEstimate, OnlyMessagesIsPriced) {
  const std::string body = R"({"max_tokens":5,"messages":[]})";
  EXPECT_TRUE(estimate_costs(CostRule::kAnthropic, "/v1/messages/count_tokens", body).costs.empty());
  EXPECT_TRUE(estimate_costs(CostRule::kAnthropic, "/v1/messages/batches", body).costs.empty());
  EXPECT_FALSE(estimate_costs(CostRule::kAnthropic, "/v1/messages?beta=true", body).costs.empty());
}

// ---- what is not priced, and the fallback --------------------------------------------------------

TEST(Estimate, NotAPostToAKnownPathCostsNothing) {
  const std::string body = chat("hi");
  for (const auto& [rule, path] :
       std::vector<std::pair<CostRule, std::string_view>>{{CostRule::kOpenAI, "/v1/models"},
                                                          {CostRule::kOpenAI, "/v1/chat/completions/abc"},
                                                          {CostRule::kOpenAI, "/v1/responses/resp_1/cancel"},
                                                          {CostRule::kOpenAI, "/v1/messages"},
                                                          {CostRule::kAnthropic, "/v1/chat/completions"},
                                                          {CostRule::kNone, "/v1/chat/completions"}}) {
    const CostEstimate e = estimate_costs(rule, path, body);
    EXPECT_TRUE(e.costs.empty()) << path;
    EXPECT_FALSE(e.fallback) << path;
  }
  EXPECT_TRUE(estimate_costs(CostRule::kOpenAI, "GET", kChat, "").costs.empty());
  EXPECT_FALSE(estimate_costs(CostRule::kOpenAI, "GET", kChat, "").fallback);
  EXPECT_EQ(amount(estimate_costs(CostRule::kOpenAI, "POST", kChat, chat("x", R"(,"max_tokens":9)")).costs, "tokens"),
            10);
}

void expect_fallback(std::string_view body, std::string_view what) {
  const CostEstimate o = estimate_costs(CostRule::kOpenAI, kChat, body);
  EXPECT_TRUE(o.fallback) << what;
  EXPECT_EQ(amount(o.costs, "tokens"), kFallbackTokens) << what;
  EXPECT_TRUE(printable_ascii(o.why)) << what << ": " << o.why;
  const CostEstimate a = estimate_costs(CostRule::kAnthropic, "/v1/messages", body);
  EXPECT_TRUE(a.fallback) << what;
  EXPECT_EQ(amount(a.costs, "input-tokens"), kFallbackTokens) << what;
  EXPECT_EQ(amount(a.costs, "output-tokens"), kFallbackTokens) << what;
  EXPECT_EQ(amount(a.costs, "tokens"), 2 * kFallbackTokens) << what;
  EXPECT_TRUE(printable_ascii(a.why)) << what << ": " << a.why;
}

TEST(EstimateFallback, UnreadableBodiesGetTheSmallDefault) {
  expect_fallback("", "empty");
  expect_fallback("not json", "text");
  expect_fallback(R"({"messages":[)", "truncated");
  expect_fallback(R"([{"messages":[]}])", "an array");
  expect_fallback(R"({"model":"x"})", "no messages");
  expect_fallback("{\"messages\":[{\"content\":\"\xff\xfe\"}],\"max_tokens\":5}", "invalid UTF-8");
  expect_fallback(R"({"messages":[],"max_tokens":1e400})", "a number out of range");
  expect_fallback(R"({"messages":[],"max_tokens":99999999999999999999999})", "beyond int64");
  expect_fallback(R"({"messages":[],"max_tokens":-5})", "negative");
  expect_fallback(R"({"messages":[],"max_tokens":1.5})", "a fraction");
  expect_fallback(R"({"messages":[],"max_tokens":"100"})", "a string");
  expect_fallback(R"({"messages":[],"max_tokens":100000000000})", "huge");
  expect_fallback(R"({"messages":[],"max_tokens":5,"max_tokens":6})", "a duplicate key");
  expect_fallback(R"({"messages":)" + std::string(100, '[') + std::string(100, ']') + "}", "deep");
  std::string wide = R"({"messages":[],"max_tokens":5)";
  for (int i = 0; i < 2000; ++i) wide += ",\"k" + std::to_string(i) + "\":0";
  expect_fallback(wide + "}", "an object with thousands of members");
}

TEST(EstimateFallback, TooLargeBodies) {
  std::string body = chat(std::string(kMaxEstimatedBody, 'x'), R"(,"max_tokens":5)");
  ASSERT_GT(body.size(), kMaxEstimatedBody);
  expect_fallback(body, "over 4 MiB");
}

// Anthropic requires max_tokens: a body without it is not priced as if it had none.
TEST(EstimateFallback, AnthropicWithoutMaxTokens) {
  const CostEstimate a = estimate_costs(CostRule::kAnthropic, "/v1/messages",
                                        R"({"messages":[{"role":"user","content":"hi"}]})");
  EXPECT_TRUE(a.fallback);
  EXPECT_EQ(amount(a.costs, "input-tokens"), kFallbackTokens);
  EXPECT_EQ(amount(a.costs, "output-tokens"), kFallbackTokens);
}

// Anthropic's fallback keeps a readable max_tokens as the output.
TEST(EstimateFallback, AnthropicKeepsAReadableMaxTokens) {
  const CostEstimate a = estimate_costs(CostRule::kAnthropic, "/v1/messages", R"({"max_tokens":333})");
  EXPECT_TRUE(a.fallback);
  EXPECT_EQ(amount(a.costs, "output-tokens"), 333);
  EXPECT_EQ(amount(a.costs, "tokens"), kFallbackTokens + 333);
}

// ---- Abide-Cost ---------------------------------------------------------------------------------

TEST(AbideCost, UnitsAndAmounts) {
  auto c = parse_cost_header("tokens=1200, input-tokens=800");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(*c, (std::vector<UnitCost>{{"tokens", 1200}, {"input-tokens", 800}}));
  c = parse_cost_header(" \tcontent-bytes=0\t,x2=1000000000000 ");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->size(), 2u);
  EXPECT_EQ((*c)[1].amount, 1'000'000'000'000);
}

TEST(AbideCost, PreciseErrors) {
  const auto error = [](std::string_view v) {
    auto c = parse_cost_header(v);
    EXPECT_FALSE(c) << v;
    return c ? std::string() : c.error();
  };
  EXPECT_EQ(error(""), "Abide-Cost is empty");
  EXPECT_EQ(error("Tokens=5"), "Abide-Cost member 1 \"Tokens=5\": the unit may hold only a-z, 0-9 and '-'");
  EXPECT_EQ(error("tokens=5,"), "Abide-Cost member 2 \"\": empty member");
  EXPECT_EQ(error("tokens"), "Abide-Cost member 1 \"tokens\": expected unit=amount");
  EXPECT_EQ(error("=5"), "Abide-Cost member 1 \"=5\": the unit is empty");
  EXPECT_EQ(error("tokens="), "Abide-Cost member 1 \"tokens=\": the amount is empty");
  EXPECT_EQ(error("tokens=-5"), "Abide-Cost member 1 \"tokens=-5\": the amount is not a whole number");
  EXPECT_EQ(error("tokens=1.5"), "Abide-Cost member 1 \"tokens=1.5\": the amount is not a whole number");
  EXPECT_EQ(error("tokens = 5"), "Abide-Cost member 1 \"tokens = 5\": the unit may hold only a-z, 0-9 and '-'");
  EXPECT_EQ(error("tokens=1000000000001"),
            "Abide-Cost member 1 \"tokens=1000000000001\": the amount is above 1000000000000");
  EXPECT_EQ(error("tokens=99999999999999999999999999"),
            "Abide-Cost member 1 \"tokens=99999999999999999999999999\": the amount is above 1000000000000");
  EXPECT_EQ(error("a=1,b=2,a=3"), "Abide-Cost member 3 \"a=3\": the unit is given twice");
  EXPECT_EQ(error("a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1"), "Abide-Cost has more than 8 members");
  EXPECT_EQ(error(std::string(65, 'u') + "=1").substr(0, 20), "Abide-Cost member 1 ");
  // Control bytes never reach the message.
  EXPECT_TRUE(printable_ascii(error("tok\x1b[2Jens=1")));
}

// ---- usage from a whole answer ---------------------------------------------------------------------

TEST(UsageFromJson, OpenAITotalElsePartsElseResponsesParts) {
  EXPECT_EQ(amount(usage_from_json(CostRule::kOpenAI,
                                   R"({"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":17}})"),
                   "tokens"),
            17);
  EXPECT_EQ(amount(usage_from_json(CostRule::kOpenAI, R"({"usage":{"prompt_tokens":10,"completion_tokens":5}})"),
                   "tokens"),
            15);
  EXPECT_EQ(amount(usage_from_json(CostRule::kOpenAI,
                                   R"({"object":"response","usage":{"input_tokens":8,"output_tokens":4}})"),
                   "tokens"),
            12);
  EXPECT_EQ(usage_from_json(CostRule::kOpenAI, R"({"usage":null})"), std::nullopt);
  EXPECT_EQ(usage_from_json(CostRule::kOpenAI, R"({"choices":[]})"), std::nullopt);
}

TEST(UsageFromJson, AnthropicCacheCreationCountsCacheReadsDoNot) {
  const auto u = usage_from_json(CostRule::kAnthropic,
                                 R"({"type":"message","usage":{"input_tokens":100,"cache_creation_input_tokens":50,)"
                                 R"("cache_read_input_tokens":4000,"output_tokens":20}})");
  ASSERT_TRUE(u);
  EXPECT_EQ(amount(u, "input-tokens"), 150);
  EXPECT_EQ(amount(u, "output-tokens"), 20);
  EXPECT_EQ(amount(u, "tokens"), 170);
  const auto no_cache = usage_from_json(
      CostRule::kAnthropic, R"({"usage":{"input_tokens":7,"cache_creation_input_tokens":null,"output_tokens":3}})");
  EXPECT_EQ(amount(no_cache, "tokens"), 10);
}

TEST(UsageFromJson, HostileValuesStateNothing) {
  for (const std::string_view body :
       {R"({"usage":{"total_tokens":-1}})", R"({"usage":{"total_tokens":1e400}})", R"({"usage":{"total_tokens":"5"}})",
        R"({"usage":{"total_tokens":1000000000001}})", R"({"usage":{"total_tokens":99999999999999999999}})",
        R"({"usage":{"total_tokens":1.5}})", "{\"usage\":{\"total_tokens\":5},\"x\":\"\xff\"}", "not json",
        R"([{"usage":{"total_tokens":5}}])"}) {
    EXPECT_EQ(usage_from_json(CostRule::kOpenAI, body), std::nullopt) << body;
  }
  EXPECT_EQ(usage_from_json(CostRule::kAnthropic, R"({"usage":{"input_tokens":5,"output_tokens":-1}})"), std::nullopt);
  EXPECT_EQ(usage_from_json(CostRule::kAnthropic,
                            R"({"usage":{"input_tokens":5,"cache_creation_input_tokens":-3,"output_tokens":1}})"),
            std::nullopt);
  EXPECT_EQ(usage_from_json(CostRule::kNone, R"({"usage":{"total_tokens":5}})"), std::nullopt);
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  EXPECT_EQ(usage_from_json(CostRule::kOpenAI, deep), std::nullopt);
}

// ---- usage from an event stream -------------------------------------------------------------------

const std::string kOpenAIStream =
    "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\n"
    ": keep-alive comment\n\n"
    "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3,\"total_tokens\":12}}\n\n"
    "data: [DONE]\n\n";

const std::string kAnthropicStream =
    "event: message_start\r\n"
    "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,"
    "\"cache_creation_input_tokens\":5,\"cache_read_input_tokens\":900,\"output_tokens\":1}}}\r\n\r\n"
    "event: content_block_delta\r\n"
    "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\r\n\r\n"
    "event: message_delta\r\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":null},\"usage\":{\"output_tokens\":8}}\r\n\r\n"
    "event: message_delta\r\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\r\n\r\n"
    "event: message_stop\r\n"
    "data: {\"type\":\"message_stop\"}\r\n\r\n";

// Feeds `stream` in pieces cut at the given offsets.
SseUsageReader read_split(CostRule rule, std::string_view stream, std::vector<std::size_t> cuts) {
  SseUsageReader r(rule);
  std::sort(cuts.begin(), cuts.end());
  std::size_t at = 0;
  for (std::size_t cut : cuts) {
    cut = std::min(cut, stream.size());
    r.feed(stream.substr(at, cut - at));
    at = cut;
  }
  r.feed(stream.substr(at));
  return r;
}

TEST(SseUsage, OpenAITheLastChunkCarryingUsage) {
  SseUsageReader r(CostRule::kOpenAI);
  r.feed(kOpenAIStream);
  EXPECT_EQ(amount(r.usage(), "tokens"), 12);
  EXPECT_FALSE(r.error());
  EXPECT_EQ(r.events(), 3u);
}

TEST(SseUsage, OpenAIResponsesCompletedEvent) {
  SseUsageReader r(CostRule::kOpenAI);
  r.feed("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":"
         "{\"input_tokens\":4,\"output_tokens\":6,\"total_tokens\":10}}}\n\n");
  EXPECT_EQ(amount(r.usage(), "tokens"), 10);
}

TEST(SseUsage, AnthropicStartInputAndTheLastDeltaOutput) {
  SseUsageReader r(CostRule::kAnthropic);
  r.feed(kAnthropicStream);
  const auto u = r.usage();
  ASSERT_TRUE(u);
  EXPECT_EQ(amount(u, "input-tokens"), 30);
  EXPECT_EQ(amount(u, "output-tokens"), 15);
  EXPECT_EQ(amount(u, "tokens"), 45);
}

// Every split point, one and two cuts, and CR-only and LF line ends.
TEST(SseUsage, AnySplitReadsTheSame) {
  for (std::string_view eol : {"\r\n", "\n", "\r"}) {
    std::string stream = kAnthropicStream;
    std::string converted;
    for (std::size_t i = 0; i < stream.size(); ++i) {
      if (stream.compare(i, 2, "\r\n") == 0) {
        converted += eol;
        ++i;
      } else {
        converted += stream[i];
      }
    }
    for (std::size_t cut = 0; cut <= converted.size(); ++cut) {
      const auto r = read_split(CostRule::kAnthropic, converted, {cut});
      ASSERT_EQ(amount(r.usage(), "tokens"), 45) << "cut " << cut;
    }
  }
  std::mt19937 rng(7);
  for (int round = 0; round < 500; ++round) {
    std::vector<std::size_t> cuts;
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) cuts.push_back(rng() % (kOpenAIStream.size() + 1));
    ASSERT_EQ(amount(read_split(CostRule::kOpenAI, kOpenAIStream, cuts).usage(), "tokens"), 12);
  }
  // One byte at a time.
  SseUsageReader bytes(CostRule::kOpenAI);
  for (const char c : kOpenAIStream) bytes.feed(std::string_view(&c, 1));
  EXPECT_EQ(amount(bytes.usage(), "tokens"), 12);
}

TEST(SseUsage, AByteOrderMarkSplitAcrossChunks) {
  const std::string stream = "\xEF\xBB\xBF" + kOpenAIStream;
  for (std::size_t cut = 0; cut <= 4; ++cut) {
    EXPECT_EQ(amount(read_split(CostRule::kOpenAI, stream, {cut}).usage(), "tokens"), 12) << cut;
  }
}

TEST(SseUsage, AnEventWithoutItsBlankLineIsNotDispatched) {
  SseUsageReader r(CostRule::kOpenAI);
  r.feed("data: {\"usage\":{\"total_tokens\":5}}\n");
  EXPECT_EQ(r.usage(), std::nullopt);
  r.feed("\n");
  EXPECT_EQ(amount(r.usage(), "tokens"), 5);
}

TEST(SseUsage, MultiLineDataIsJoined) {
  SseUsageReader r(CostRule::kOpenAI);
  r.feed("data: {\"usage\":\ndata: {\"total_tokens\":6}}\n\n");
  EXPECT_EQ(amount(r.usage(), "tokens"), 6);
  // CRLF is one line end, also when a chunk ends between its two bytes.
  SseUsageReader crlf(CostRule::kOpenAI);
  crlf.feed("data: {\"usage\":\r");
  crlf.feed("\ndata: {\"total_tokens\":8}}\r\n\r\n");
  EXPECT_EQ(amount(crlf.usage(), "tokens"), 8);
  // The event name belongs to its data.
  SseUsageReader named(CostRule::kAnthropic);
  named.feed("event: error\r\ndata: not json\r\n\r\n");
  EXPECT_TRUE(named.error());
}

TEST(SseUsage, TheLastUsageWins) {
  SseUsageReader r(CostRule::kOpenAI);
  r.feed("data: {\"usage\":{\"total_tokens\":5}}\n\n");
  r.feed("data: {\"usage\":{\"total_tokens\":12}}\n\n");
  EXPECT_EQ(amount(r.usage(), "tokens"), 12);
}

TEST(SseUsage, AnOversizeEventIsDroppedAndTheRestStillRead) {
  SseUsageReader r(CostRule::kOpenAI);
  r.feed("data: {\"usage\":{\"total_tokens\":5},\"pad\":\"");
  for (int i = 0; i < 100; ++i) r.feed(std::string(4096, 'x'));
  r.feed("\"}\n\n");
  EXPECT_EQ(r.dropped_events(), 1u);
  EXPECT_EQ(r.usage(), std::nullopt);
  // Many data lines that only together pass the bound are dropped too.
  for (int i = 0; i < 20; ++i) r.feed("data: " + std::string(4000, 'y') + "\n");
  r.feed("\n");
  EXPECT_EQ(r.dropped_events(), 2u);
  r.feed(kOpenAIStream);
  EXPECT_EQ(amount(r.usage(), "tokens"), 12);
}

TEST(SseUsage, HostileUsageIsIgnored) {
  SseUsageReader r(CostRule::kOpenAI);
  r.feed("data: {\"usage\":{\"total_tokens\":7}}\n\n");
  r.feed("data: {\"usage\":{\"total_tokens\":-7}}\n\n");
  r.feed("data: {\"usage\":{\"total_tokens\":1e400}}\n\n");
  r.feed("data: \xff\xfe\n\n");
  EXPECT_EQ(amount(r.usage(), "tokens"), 7);
}

// ---- error events in a stream ---------------------------------------------------------------------

TEST(SseErrors, OpenAIErrorDataWithAWait) {
  SseUsageReader r(CostRule::kOpenAI);
  r.feed("data: {\"error\":{\"message\":\"Rate limit reached. Please try again in 1.5s.\","
         "\"type\":\"tokens\",\"code\":\"rate_limit_exceeded\"}}\n\n");
  ASSERT_TRUE(r.error());
  EXPECT_EQ(r.error()->type, "tokens");
  ASSERT_TRUE(r.error()->hint);
  EXPECT_EQ(r.error()->hint->wait, 1500ms);
}

TEST(SseErrors, AnthropicOverloadedErrorEvent) {
  SseUsageReader r(CostRule::kAnthropic);
  r.feed(kAnthropicStream.substr(0, kAnthropicStream.find("event: content_block_delta")));
  r.feed(
      "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n");
  ASSERT_TRUE(r.error());
  EXPECT_EQ(r.error()->type, "overloaded_error");
  EXPECT_FALSE(r.error()->hint);
  // The usage seen before the error is still there.
  EXPECT_EQ(amount(r.usage(), "input-tokens"), 30);
}

TEST(SseErrors, OpenRouterNumericCodeAndTheFirstErrorWins) {
  SseUsageReader r(CostRule::kOpenAI);
  r.feed(": OPENROUTER PROCESSING\n\n");
  r.feed("data: {\"id\":\"x\",\"error\":{\"code\":429,\"message\":\"Rate limited\"},\"choices\":[]}\n\n");
  r.feed("data: {\"error\":{\"type\":\"later\",\"message\":\"try again in 9s\"}}\n\n");
  ASSERT_TRUE(r.error());
  EXPECT_EQ(r.error()->type, "429");
  EXPECT_FALSE(r.error()->hint);
}

TEST(SseErrors, AnUnreadableErrorIsStillAnErrorWithPrintableType) {
  SseUsageReader r(CostRule::kAnthropic);
  r.feed("event: error\ndata: not json, try again in 2s\n\n");
  ASSERT_TRUE(r.error());
  EXPECT_EQ(r.error()->type, "error");
  ASSERT_TRUE(r.error()->hint);
  EXPECT_EQ(r.error()->hint->wait, 2s);
  SseUsageReader esc(CostRule::kOpenAI);
  esc.feed("data: {\"error\":{\"type\":\"\\u001b[2J" + std::string(200, 'z') + "\"}}\n\n");
  ASSERT_TRUE(esc.error());
  EXPECT_TRUE(printable_ascii(esc.error()->type)) << esc.error()->type;
  EXPECT_LE(esc.error()->type.size(), 64u);
}

}  // namespace
}  // namespace abide::detail
