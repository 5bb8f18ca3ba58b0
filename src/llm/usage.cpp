// Internal: usage stated by a language-model answer (usage.h).
#include "llm/usage.h"

#include <algorithm>
#include <utility>

#include "ascii.h"
#include "llm/json_fields.h"

namespace abide::detail {

namespace {

constexpr std::size_t kMaxErrorType = 64;

std::optional<std::int64_t> sum(std::optional<std::int64_t> a, std::optional<std::int64_t> b) noexcept {
  if (!a || !b) return std::nullopt;
  // Each is at most kMaxUnitAmount: no overflow.
  return *a + *b;
}

// OpenAI's usage object: total_tokens, else its parts (Chat Completions names
// them prompt and completion tokens, the Responses API input and output tokens).
std::optional<std::vector<UnitCost>> openai_usage(const JsonValue* usage) {
  if (usage == nullptr || usage->kind != JsonValue::Kind::kObject) return std::nullopt;
  auto total = whole_number(usage->find("total_tokens"));
  if (!total) total = sum(whole_number(usage->find("prompt_tokens")), whole_number(usage->find("completion_tokens")));
  if (!total) total = sum(whole_number(usage->find("input_tokens")), whole_number(usage->find("output_tokens")));
  if (!total) return std::nullopt;
  return std::vector<UnitCost>{{"tokens", *total}};
}

// Anthropic's input tokens as its input tokens quota counts them: cache
// creation counts, cache reads do not. A null or absent cache field is none.
std::optional<std::int64_t> anthropic_input(const JsonValue* usage) {
  const auto input = whole_number(member(usage, "input_tokens"));
  if (!input) return std::nullopt;
  const JsonValue* created = member(usage, "cache_creation_input_tokens");
  if (created == nullptr || created->kind == JsonValue::Kind::kNull) return input;
  return sum(input, whole_number(created));
}

// A server's error type as a short identifier: at most kMaxErrorType bytes,
// any byte that is not a letter, digit, '_', '-', '.' or ':' shown as '?'.
std::string error_type(std::string_view type) {
  std::string out(type.substr(0, kMaxErrorType));
  for (char& c : out) {
    if (!ascii::is_alpha(c) && !ascii::is_digit(c) && c != '_' && c != '-' && c != '.' && c != ':') c = '?';
  }
  return out.empty() ? std::string("error") : out;
}

std::vector<UnitCost> anthropic_costs(std::int64_t input, std::int64_t output) {
  return {{"input-tokens", input}, {"output-tokens", output}, {"tokens", input + output}};
}

// The usage object of a body or event: top-level, or in the response object a
// Responses API event carries (response.completed).
const JsonValue* openai_usage_object(const JsonValue& v) {
  const JsonValue* u = member(&v, "usage");
  if (u != nullptr && u->kind == JsonValue::Kind::kObject) return u;
  return member(member(&v, "response"), "usage");
}

}  // namespace

std::optional<std::vector<UnitCost>> usage_from_json(CostRule rule, std::string_view body) {
  if (rule == CostRule::kNone || body.size() > kMaxUsageBody) return std::nullopt;
  const auto json = parse_bounded_json(body, kMaxUsageBody);
  if (!json || json->kind != JsonValue::Kind::kObject) return std::nullopt;
  if (rule == CostRule::kOpenAI) return openai_usage(openai_usage_object(*json));
  const JsonValue* usage = json->find("usage");
  const auto input = anthropic_input(usage);
  const auto output = whole_number(member(usage, "output_tokens"));
  if (!input || !output) return std::nullopt;
  return anthropic_costs(*input, *output);
}

// ---- the event stream -------------------------------------------------------------------

SseUsageReader::SseUsageReader(CostRule rule, std::span<const BodyHintKind> hints)
    : rule_(rule), hints_(hints.begin(), hints.end()) {}

// Lines end in CRLF, LF or CR (the event-stream format allows all three), and
// a chunk may end between the CR and the LF of one line end.
void SseUsageReader::feed(std::string_view chunk) {
  if (at_start_) chunk = skip_bom(chunk);
  for (const char c : chunk) {
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') continue;
    }
    if (c == '\r' || c == '\n') {
      after_cr_ = c == '\r';
      end_line();
      continue;
    }
    ++line_length_;
    if (oversize_) continue;  // the rest of a dropped event is not kept
    if (line_.size() + data_.size() >= kMaxEvent) {
      drop();
      continue;
    }
    line_.push_back(c);
  }
}

// A byte order mark may open the stream, and may arrive split across chunks:
// its bytes are held in line_ until it is whole, or turns out not to be one
// (then they begin the first line).
std::string_view SseUsageReader::skip_bom(std::string_view chunk) {
  static constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (chunk.empty()) return chunk;
  const std::size_t seen = line_.size();
  const std::size_t take = std::min(kBom.size() - seen, chunk.size());
  if (chunk.substr(0, take) != kBom.substr(seen, take)) {
    at_start_ = false;
    line_length_ = line_.size();
    return chunk;
  }
  line_.append(chunk.substr(0, take));
  chunk.remove_prefix(take);
  if (line_.size() == kBom.size()) {
    line_.clear();
    at_start_ = false;
  }
  return chunk;
}

void SseUsageReader::drop() {
  oversize_ = true;
  line_.clear();
  data_.clear();
}

void SseUsageReader::end_line() {
  at_start_ = false;
  const bool blank = line_length_ == 0;
  line_length_ = 0;
  if (blank) return dispatch();
  if (!oversize_) line(line_);
  line_.clear();
}

void SseUsageReader::line(std::string_view text) {
  if (text.front() == ':') return;  // a comment (": OPENROUTER PROCESSING")
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return field(text, {});
  std::string_view value = text.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  field(text.substr(0, colon), value);
}

void SseUsageReader::field(std::string_view name, std::string_view value) {
  if (name == "event") {
    event_name_.assign(value.substr(0, kMaxErrorType));
  } else if (name == "data") {
    if (has_data_) data_.push_back('\n');
    data_.append(value);
    has_data_ = true;
    if (data_.size() > kMaxEvent) drop();
  }
  // id and retry concern reconnection, not usage.
}

void SseUsageReader::dispatch() {
  if (oversize_) {
    ++dropped_;
  } else if (has_data_) {
    ++events_;
    event(event_name_, data_);
  }
  oversize_ = false;
  has_data_ = false;
  data_.clear();
  event_name_.clear();
}

void SseUsageReader::event(std::string_view name, std::string_view data) {
  if (data == "[DONE]") return;
  const auto json = parse_bounded_json(data, kMaxEvent);
  const JsonValue* v = json && json->kind == JsonValue::Kind::kObject ? &*json : nullptr;
  const JsonValue* err = member(v, "error");
  const bool is_error = name == "error" || (err != nullptr && err->kind != JsonValue::Kind::kNull) ||
                        string_member(v, "type") == "error";
  if (is_error) return error_event(v, data);
  if (v == nullptr) return;
  if (rule_ == CostRule::kOpenAI) openai_event(*v);
  if (rule_ == CostRule::kAnthropic) anthropic_event(*v);
}

// The last event carrying usage wins: OpenAI sends it once, in the last chunk.
void SseUsageReader::openai_event(const JsonValue& data) {
  if (auto u = openai_usage(openai_usage_object(data))) openai_usage_ = std::move(u);
}

// message_start carries the input tokens; each message_delta the output so
// far (cumulative: the last one is the total). A delta that restates the
// input is believed when it says more.
void SseUsageReader::anthropic_event(const JsonValue& data) {
  const auto type = string_member(&data, "type");
  if (type == "message_start") {
    const JsonValue* usage = member(member(&data, "message"), "usage");
    if (const auto in = anthropic_input(usage)) input_ = in;
    if (const auto out = whole_number(member(usage, "output_tokens"))) output_ = out;
  } else if (type == "message_delta") {
    const JsonValue* usage = member(&data, "usage");
    if (const auto out = whole_number(member(usage, "output_tokens"))) output_ = out;
    if (const auto in = anthropic_input(usage); in && (!input_ || *in > *input_)) input_ = in;
  }
}

// The first error wins: what follows it is the stream's end.
void SseUsageReader::error_event(const JsonValue* data, std::string_view raw) {
  if (error_) return;
  const JsonValue* err = member(data, "error");
  std::string_view type = "error";
  std::string code;
  if (const auto t = string_member(err, "type")) {
    type = *t;
  } else if (const auto c = string_member(err, "code")) {
    type = *c;
  } else if (const auto n = whole_number(member(err, "code"))) {
    code = std::to_string(*n);  // OpenRouter: the status as a number
    type = code;
  } else if (const auto top = string_member(data, "code")) {
    type = *top;  // the Responses API's error event
  }
  error_ = StreamError{error_type(type), read_body_hint(hints_, raw)};
}

std::optional<std::vector<UnitCost>> SseUsageReader::usage() const {
  if (rule_ == CostRule::kOpenAI) return openai_usage_;
  if (rule_ == CostRule::kAnthropic && input_) return anthropic_costs(*input_, output_.value_or(0));
  return std::nullopt;
}

}  // namespace abide::detail
