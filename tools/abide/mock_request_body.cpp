#include "mock_request_body.h"

#include <exception>
#include <nlohmann/json.hpp>
#include <optional>

namespace abide::mock {
namespace mock_request_body {  // private to this file (the tools are compiled in batches)

using nlohmann::json;

// True when no array or object in `s` is nested deeper than `max`; checked on
// the text, before a parser builds anything from it.
bool depth_within(std::string_view s, std::size_t max) noexcept {
  std::size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if ((c == '[' || c == '{') && ++depth > max) return false;
    else if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return true;
}

// The member `name` of an object, or null when absent (or not an object).
const json* member(const json& obj, const char* name) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(name);
  return it == obj.end() ? nullptr : &*it;
}

std::uint64_t string_bytes(const json* j) {
  return j != nullptr && j->is_string() ? j->get_ref<const std::string&>().size() : 0;
}

// A string, or an array of parts (content blocks) each with a string `text`.
std::uint64_t content_bytes(const json* c) {
  if (c == nullptr) return 0;
  if (c->is_string()) return string_bytes(c);
  std::uint64_t n = 0;
  if (c->is_array())
    for (const json& part : *c) n = sat_add(n, string_bytes(member(part, "text")));
  return n;
}

// A string, or an array of strings.
std::uint64_t strings_bytes(const json* j) {
  if (j == nullptr || !j->is_array()) return string_bytes(j);
  std::uint64_t n = 0;
  for (const json& s : *j) n = sat_add(n, string_bytes(&s));
  return n;
}

// The text of `messages[].content`.
std::uint64_t messages_bytes(const json& body) {
  const json* messages = member(body, "messages");
  std::uint64_t n = 0;
  if (messages != nullptr && messages->is_array())
    for (const json& m : *messages) n = sat_add(n, content_bytes(member(m, "content")));
  return n;
}

// The Responses API's `input`: a string, or items that are parts (`text`) or
// messages (`content`).
std::uint64_t responses_input_bytes(const json* input) {
  if (input == nullptr || !input->is_array()) return string_bytes(input);
  std::uint64_t n = 0;
  for (const json& item : *input)
    n = sat_add(n, sat_add(string_bytes(member(item, "text")), content_bytes(member(item, "content"))));
  return n;
}

BodyError bad(std::string message) { return BodyError{400, std::move(message)}; }

// A non-negative integer field: nullopt when absent or null.
Result<std::optional<std::uint64_t>, BodyError> count_field(const json& body, const char* name) {
  const json* j = member(body, name);
  if (j == nullptr || j->is_null()) return std::optional<std::uint64_t>{};
  if (!j->is_number_unsigned()) return fail(bad(std::string(name) + " must be a non-negative integer"));
  return std::optional<std::uint64_t>{j->get<std::uint64_t>()};
}

// A boolean field: false when absent or null.
Result<bool, BodyError> flag_field(const json* obj, const char* name) {
  const json* j = obj == nullptr ? nullptr : member(*obj, name);
  if (j == nullptr || j->is_null()) return false;
  if (!j->is_boolean()) return fail(bad(std::string(name) + " must be a boolean"));
  return j->get<bool>();
}

std::string model_of(const json& body) {
  const json* m = member(body, "model");
  if (m == nullptr || !m->is_string() || m->get_ref<const std::string&>().empty()) return "mock-model";
  return m->get_ref<const std::string&>().substr(0, kMaxModelName);
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// The OpenAI text by endpoint; embeddings have no output (their default max is 0).
std::uint64_t openai_text_bytes(std::string_view path, const json& body, bool& embeddings) {
  embeddings = ends_with(path, "/embeddings");
  if (embeddings) return strings_bytes(member(body, "input"));
  if (ends_with(path, "/responses")) return responses_input_bytes(member(body, "input"));
  if (ends_with(path, "/completions") && !ends_with(path, "/chat/completions"))
    return strings_bytes(member(body, "prompt"));
  return messages_bytes(body);
}

// OpenAI's limit of the output: the first of its three names that is present.
Result<std::uint64_t, BodyError> openai_max_tokens(const json& body, bool embeddings) {
  for (const char* name : {"max_tokens", "max_completion_tokens", "max_output_tokens"}) {
    auto v = count_field(body, name);
    if (!v) return fail(v.error());
    if (*v) return **v;
  }
  return embeddings ? 0 : kOpenaiDefaultMaxTokens;
}

Result<TokenRequest, BodyError> read_openai(std::string_view path, const json& body) {
  TokenRequest r;
  bool embeddings = false;
  r.text_bytes = openai_text_bytes(path, body, embeddings);
  auto max = openai_max_tokens(body, embeddings);
  if (!max) return fail(max.error());
  r.max_tokens = *max;
  auto stream = flag_field(&body, "stream");
  if (!stream) return fail(stream.error());
  r.stream = *stream;
  auto usage = flag_field(member(body, "stream_options"), "include_usage");
  if (!usage) return fail(usage.error());
  r.include_usage = *usage;
  return r;
}

Result<TokenRequest, BodyError> read_anthropic(const json& body) {
  TokenRequest r;
  r.text_bytes = sat_add(content_bytes(member(body, "system")), messages_bytes(body));
  auto max = count_field(body, "max_tokens");
  if (!max) return fail(max.error());
  if (!*max) return fail(bad("max_tokens: Field required"));
  if (**max < 1) return fail(bad("max_tokens: must be at least 1"));
  r.max_tokens = **max;
  auto stream = flag_field(&body, "stream");
  if (!stream) return fail(stream.error());
  r.stream = *stream;
  return r;
}

Result<TokenRequest, BodyError> read_json(BodyDialect dialect, std::string_view path, std::string_view body) {
  const json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) return fail(bad("the body is not valid JSON"));
  if (!j.is_object()) return fail(bad("the body must be a JSON object"));
  auto r = dialect == BodyDialect::kOpenai ? read_openai(path, j) : read_anthropic(j);
  if (!r) return r;
  r->estimate = estimate_tokens(r->text_bytes);
  r->model = model_of(j);
  return r;
}

}  // namespace mock_request_body

Result<TokenRequest, BodyError> read_token_request(BodyDialect dialect, std::string_view path, std::string_view body) {
  using namespace mock_request_body;
  if (body.size() > kMaxBodyBytes)
    return fail(BodyError{413, "the body is larger than " + std::to_string(kMaxBodyBytes) + " bytes"});
  if (body.empty()) return fail(bad("the body is empty: a JSON object is expected"));
  if (!depth_within(body, kMaxBodyDepth))
    return fail(bad("the body nests deeper than " + std::to_string(kMaxBodyDepth) + " levels"));
  try {
    return read_json(dialect, path, body);
  } catch (const std::exception&) {  // the parser's allocations; nothing in bad input reaches here
    return fail(bad("the body could not be read"));
  }
}

}  // namespace abide::mock
