// Internal: token costs of a language-model request (cost_estimate.h).
#include "llm/cost_estimate.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "abide/headers.h"
#include "ascii.h"
#include "decimal.h"
#include "llm/json_fields.h"

namespace abide::detail {

namespace {

enum class Endpoint : std::uint8_t { kNone, kChat, kResponses, kCompletions, kEmbeddings, kMessages };

// The path without query or fragment, and without a trailing '/'.
std::string_view bare_path(std::string_view target) noexcept {
  target = target.substr(0, target.find_first_of("?#"));
  while (!target.empty() && target.back() == '/') target.remove_suffix(1);
  return target;
}

// Matched by the path's end, so that a gateway's prefix (/openai/deployments/NAME,
// /api/v1) still prices the request: the profile has already said which API it is.
Endpoint endpoint(CostRule rule, std::string_view target) noexcept {
  const std::string_view path = bare_path(target);
  switch (rule) {
    case CostRule::kOpenAI:
      if (path.ends_with("/chat/completions")) return Endpoint::kChat;
      if (path.ends_with("/responses")) return Endpoint::kResponses;
      if (path.ends_with("/completions")) return Endpoint::kCompletions;
      if (path.ends_with("/embeddings")) return Endpoint::kEmbeddings;
      return Endpoint::kNone;
    case CostRule::kAnthropic: return path.ends_with("/v1/messages") ? Endpoint::kMessages : Endpoint::kNone;
    case CostRule::kNone: return Endpoint::kNone;
  }
  return Endpoint::kNone;
}

std::int64_t ceil_div(std::uint64_t bytes, std::uint64_t per_token) noexcept {
  return static_cast<std::int64_t>((bytes + per_token - 1) / per_token);
}

std::string num(std::int64_t v) { return std::to_string(v); }

// What a body's maximum output says: absent (or null), a valid count, or a
// value no server accepts.
struct MaxTokens {
  std::optional<std::int64_t> value;
  bool invalid = false;
  std::string_view field;
};

MaxTokens max_tokens(const JsonValue& body, std::initializer_list<std::string_view> fields) {
  for (const std::string_view f : fields) {
    const JsonValue* v = body.find(f);
    if (v == nullptr || v->kind == JsonValue::Kind::kNull) continue;
    const auto n = whole_number(v, kMaxOutputTokens);
    return MaxTokens{n, !n.has_value(), f};
  }
  return {};
}

CostEstimate openai_fallback(std::string why) {
  return CostEstimate{{{"tokens", kFallbackTokens}},
                      true,
                      why + ": reserved the default " + num(kFallbackTokens) + " tokens"};
}

CostEstimate anthropic_fallback(std::string why, std::optional<std::int64_t> output) {
  const std::int64_t out = output.value_or(kFallbackTokens);
  return CostEstimate{{{"input-tokens", kFallbackTokens}, {"output-tokens", out}, {"tokens", kFallbackTokens + out}},
                      true,
                      why + ": reserved the default " + num(kFallbackTokens) + " input tokens and " + num(out) +
                          " output tokens"};
}

// The text an OpenAI request sends to the model, in bytes.
std::uint64_t openai_text(const JsonValue& body) {
  std::uint64_t bytes = 0;
  for (const std::string_view key : {"messages", "input", "prompt", "instructions"}) {
    if (const JsonValue* v = body.find(key)) bytes += content_bytes(*v);
  }
  // Tool and output schemas reach the model as text too.
  for (const std::string_view key : {"tools", "functions", "response_format", "text"}) {
    if (const JsonValue* v = body.find(key)) bytes += all_text_bytes(*v);
  }
  return bytes;
}

CostEstimate openai_estimate(Endpoint ep, const JsonValue& body) {
  if (body.find("messages") == nullptr && body.find("input") == nullptr && body.find("prompt") == nullptr) {
    return openai_fallback("the body has no messages, input or prompt");
  }
  const std::uint64_t bytes = openai_text(body);
  const std::int64_t text_tokens = ceil_div(bytes, 4);
  std::int64_t output = 0;
  std::string output_why = "no output";
  if (ep != Endpoint::kEmbeddings) {
    const MaxTokens m = max_tokens(body, {"max_tokens", "max_completion_tokens", "max_output_tokens"});
    if (m.invalid)
      return openai_fallback(std::string(m.field) + " is not a whole number from 0 to " + num(kMaxOutputTokens));
    output = m.value.value_or(kDefaultMaxTokens);
    output_why = m.value ? std::string(m.field) + " " + num(output) : "the default maximum " + num(output);
  }
  // OpenAI admits a request on max(max_tokens, text / 4), but the quota is
  // then charged its usage, prompt and completion, which reaches up to their
  // sum: that is reserved (the answer's usage gives the rest back), so that
  // sends in flight together cannot overrun the window by what they used
  // beyond their admission.
  const std::int64_t tokens = output + text_tokens;  // at most 1e6 + 1e7: the body and max_tokens are bounded
  return CostEstimate{{{"tokens", tokens}},
                      false,
                      "tokens = " + std::to_string(bytes) + " text bytes / 4 = " + num(text_tokens) + " + " +
                          output_why + " = " + num(tokens) + " (admitted on the larger, charged up to the sum)"};
}

CostEstimate anthropic_estimate(const JsonValue& body) {
  const MaxTokens m = max_tokens(body, {"max_tokens"});
  if (m.invalid) return anthropic_fallback("max_tokens is not a whole number from 0 to " + num(kMaxOutputTokens), {});
  const JsonValue* messages = body.find("messages");
  if (messages == nullptr || messages->kind != JsonValue::Kind::kArray) {
    return anthropic_fallback("the body has no messages array", m.value);
  }
  if (!m.value) return anthropic_fallback("the body has no max_tokens", {});
  std::uint64_t bytes = content_bytes(*messages);
  if (const JsonValue* system = body.find("system")) bytes += content_bytes(*system);
  if (const JsonValue* tools = body.find("tools")) bytes += all_text_bytes(*tools);
  const std::int64_t input = ceil_div(bytes, 3);
  const std::int64_t output = *m.value;
  return CostEstimate{{{"input-tokens", input}, {"output-tokens", output}, {"tokens", input + output}},
                      false,
                      "input-tokens = " + std::to_string(bytes) + " text bytes / 3 = " + num(input) +
                          ", output-tokens = max_tokens " + num(output) + ", tokens = " + num(input + output)};
}

}  // namespace

CostEstimate estimate_costs(CostRule rule, std::string_view path, std::string_view body) {
  const Endpoint ep = endpoint(rule, path);
  if (ep == Endpoint::kNone) return CostEstimate{{}, false, "not a request the cost rule prices"};
  const bool anthropic = rule == CostRule::kAnthropic;
  const auto fallback = [&](std::string why) {
    return anthropic ? anthropic_fallback(std::move(why), {}) : openai_fallback(std::move(why));
  };
  if (body.size() > kMaxEstimatedBody)
    return fallback("the body is longer than " + std::to_string(kMaxEstimatedBody) + " bytes");
  const auto json = parse_bounded_json(body, kMaxEstimatedBody);
  if (!json) return fallback("the body is not JSON abide reads");
  if (json->kind != JsonValue::Kind::kObject) return fallback("the body is not a JSON object");
  return anthropic ? anthropic_estimate(*json) : openai_estimate(ep, *json);
}

CostEstimate estimate_costs(CostRule rule, std::string_view method, std::string_view path, std::string_view body) {
  if (method != "POST") return CostEstimate{{}, false, "only a POST is priced"};
  return estimate_costs(rule, path, body);
}

// ---- Abide-Cost ---------------------------------------------------------------------

namespace {

constexpr std::size_t kMaxUnitName = 64;

bool unit_char(char c) noexcept { return ascii::is_lower(c) || ascii::is_digit(c) || c == '-'; }

// One "unit=amount" member, or why not.
Result<UnitCost, std::string> cost_member(std::string_view m) {
  const std::size_t eq = m.find('=');
  if (eq == std::string_view::npos) return fail(std::string("expected unit=amount"));
  const std::string_view unit = m.substr(0, eq);
  const std::string_view amount = m.substr(eq + 1);
  if (unit.empty()) return fail(std::string("the unit is empty"));
  if (unit.size() > kMaxUnitName) return fail("the unit is longer than " + std::to_string(kMaxUnitName) + " bytes");
  for (const char c : unit) {
    if (!unit_char(c)) return fail(std::string("the unit may hold only a-z, 0-9 and '-'"));
  }
  if (amount.empty()) return fail(std::string("the amount is empty"));
  // Too large is named first when the digits before any other byte already are.
  const auto v = read_decimal<std::int64_t, kMaxUnitAmount>(amount);
  if (v.over) return fail("the amount is above " + std::to_string(kMaxUnitAmount));
  if (v.digits != amount.size()) return fail(std::string("the amount is not a whole number"));
  return UnitCost{std::string(unit), v.value};
}

}  // namespace

Result<std::vector<UnitCost>, std::string> parse_cost_header(std::string_view value) {
  value = ascii::trim_ows(value);
  if (value.empty()) return fail(std::string("Abide-Cost is empty"));
  std::vector<UnitCost> out;
  std::size_t start = 0;
  for (std::size_t n = 1;; ++n) {
    const std::size_t comma = value.find(',', start);
    const std::string_view raw = value.substr(start,
                                              comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const std::string_view m = ascii::trim_ows(raw);
    const std::string where = "Abide-Cost member " + std::to_string(n) + " \"" + printable(m, 48) + "\": ";
    if (n > kMaxCostMembers) return fail("Abide-Cost has more than " + std::to_string(kMaxCostMembers) + " members");
    if (m.empty()) return fail(where + "empty member");
    auto c = cost_member(m);
    if (!c) return fail(where + c.error());
    for (const auto& earlier : out) {
      if (earlier.unit == c->unit) return fail(where + "the unit is given twice");
    }
    out.push_back(std::move(*c));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace abide::detail
