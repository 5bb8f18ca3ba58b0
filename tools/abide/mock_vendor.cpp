#include "mock_vendor.h"

#include <array>
#include <nlohmann/json.hpp>

namespace abide::mock {
namespace mock_vendor {  // private to this file (the tools are compiled in batches)

using Json = nlohmann::ordered_json;

// The answer text in the pieces a stream sends it in.
constexpr std::array<std::string_view, 3> kPieces{"This is ", "a simulated ", "answer."};

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::uint64_t sum(Usage u) noexcept { return sat_add(u.input, u.output); }

Json openai_usage(Usage u) {
  return {{"prompt_tokens", u.input}, {"completion_tokens", u.output}, {"total_tokens", sum(u)}};
}

// "length" when the answer used every token it could have.
std::string_view openai_finish(const TokenRequest& r, Usage u) { return u.output >= r.max_tokens ? "length" : "stop"; }

Json openai_chunk(const std::string& id, std::int64_t created, const TokenRequest& r, Json choices) {
  Json c{{"id", id},
         {"object", "chat.completion.chunk"},
         {"created", created},
         {"model", r.model},
         {"choices", std::move(choices)}};
  if (r.include_usage) c["usage"] = nullptr;  // as OpenAI: null on every chunk but the last
  return c;
}

Json openai_delta(Json delta, Json finish) {
  return Json::array({{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", std::move(finish)}}});
}

std::string openai_stream(const std::string& id, std::int64_t created, const TokenRequest& r, Usage u) {
  std::string out;
  const auto event = [&out](const Json& j) { out += "data: " + dump(j) + "\n\n"; };
  event(openai_chunk(id, created, r, openai_delta({{"role", "assistant"}, {"content", ""}}, nullptr)));
  for (const auto piece : kPieces) event(openai_chunk(id, created, r, openai_delta({{"content", piece}}, nullptr)));
  event(openai_chunk(id, created, r, openai_delta(Json::object(), openai_finish(r, u))));
  if (r.include_usage) {
    Json last = openai_chunk(id, created, r, Json::array());
    last["usage"] = openai_usage(u);
    event(last);
  }
  return out + "data: [DONE]\n\n";
}

Json anthropic_usage(Usage u) {
  return {{"input_tokens", u.input},
          {"output_tokens", u.output},
          {"cache_read_input_tokens", 0},
          {"cache_creation_input_tokens", 0}};
}

std::string_view anthropic_stop(const TokenRequest& r, Usage u) {
  return u.output >= r.max_tokens ? "max_tokens" : "end_turn";
}

std::string anthropic_stream(const std::string& id, const TokenRequest& r, Usage u) {
  std::string out;
  const auto event = [&out](std::string_view name, const Json& j) {
    out += "event: " + std::string(name) + "\ndata: " + dump(j) + "\n\n";
  };
  // message_start reports the input, and the output so far (none); message_delta the output.
  Json start{{"id", id},
             {"type", "message"},
             {"role", "assistant"},
             {"model", r.model},
             {"content", Json::array()},
             {"stop_reason", nullptr},
             {"stop_sequence", nullptr},
             {"usage", anthropic_usage({u.input, 0})}};
  event("message_start", {{"type", "message_start"}, {"message", std::move(start)}});
  event("content_block_start",
        {{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}});
  for (const auto piece : kPieces)
    event("content_block_delta",
          {{"type", "content_block_delta"}, {"index", 0}, {"delta", {{"type", "text_delta"}, {"text", piece}}}});
  event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
  event("message_delta", {{"type", "message_delta"},
                          {"delta", {{"stop_reason", anthropic_stop(r, u)}, {"stop_sequence", nullptr}}},
                          {"usage", {{"output_tokens", u.output}}}});
  event("message_stop", {{"type", "message_stop"}});
  return out;
}

}  // namespace mock_vendor

std::string openai_completion(const std::string& id, std::int64_t created, const TokenRequest& r, Usage u) {
  using namespace mock_vendor;
  if (r.stream) return openai_stream(id, created, r, u);
  Json message{{"role", "assistant"}, {"content", kMockAnswerText}};
  Json choice{{"index", 0}, {"message", std::move(message)}, {"finish_reason", openai_finish(r, u)}};
  return dump({{"id", id},
               {"object", "chat.completion"},
               {"created", created},
               {"model", r.model},
               {"choices", Json::array({std::move(choice)})},
               {"usage", openai_usage(u)}}) +
         "\n";
}

std::string openai_error(std::string_view message, std::string_view type, std::string_view code) {
  using namespace mock_vendor;
  Json e{{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!code.empty()) e["code"] = code;
  return dump({{"error", std::move(e)}}) + "\n";
}

std::string anthropic_message(const std::string& id, const TokenRequest& r, Usage u) {
  using namespace mock_vendor;
  if (r.stream) return anthropic_stream(id, r, u);
  return dump({{"id", id},
               {"type", "message"},
               {"role", "assistant"},
               {"model", r.model},
               {"content", Json::array({{{"type", "text"}, {"text", kMockAnswerText}}})},
               {"stop_reason", anthropic_stop(r, u)},
               {"stop_sequence", nullptr},
               {"usage", anthropic_usage(u)}}) +
         "\n";
}

std::string anthropic_error(std::string_view type, std::string_view message) {
  using namespace mock_vendor;
  return dump({{"type", "error"}, {"error", {{"type", type}, {"message", message}}}}) + "\n";
}

std::string gemini_content() {
  using namespace mock_vendor;
  Json content{{"parts", Json::array({{{"text", kMockAnswerText}}})}, {"role", "model"}};
  Json candidate{{"content", std::move(content)}, {"finishReason", "STOP"}, {"index", 0}};
  return dump({{"candidates", Json::array({std::move(candidate)})}, {"modelVersion", "gemini-mock"}}) + "\n";
}

std::string gemini_error(int code, std::string_view status, std::string_view message, std::int64_t retry_delay_s) {
  using namespace mock_vendor;
  Json e{{"code", code}, {"message", message}, {"status", status}};
  if (retry_delay_s >= 0) {
    e["details"] = Json::array(
        {{{"@type", "type.googleapis.com/google.rpc.RetryInfo"}, {"retryDelay", std::to_string(retry_delay_s) + "s"}}});
  }
  return dump({{"error", std::move(e)}}) + "\n";
}

}  // namespace abide::mock
