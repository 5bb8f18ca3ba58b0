// The bodies `abide mock-server` answers in a vendor's own shape (its vendor
// styles): OpenAI chat completions and errors, Anthropic messages and errors,
// Gemini generateContent answers and errors; each whole, or as the vendor's
// server-sent events when the request asked for a stream. Small, fixed text:
// what a client reads from them is the usage and the error, not the prose.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "mock_request_body.h"

namespace abide::mock {

// What an answer used, as it reports it.
struct Usage {
  std::uint64_t input = 0;   // prompt / input tokens
  std::uint64_t output = 0;  // completion / output tokens
};

// The text every accepted answer carries, and its pieces when streamed.
inline constexpr std::string_view kMockAnswerText = "This is a simulated answer.";

// A chat completion (`id`, created at Unix second `created`), with `usage`
// {prompt_tokens, completion_tokens, total_tokens}: a JSON object, or for
// r.stream a text/event-stream of chunks ending "data: [DONE]", the last chunk
// before it carrying the usage (and "choices": []) when r.include_usage.
std::string openai_completion(const std::string& id, std::int64_t created, const TokenRequest& r, Usage u);

// {"error": {"message", "type", "param": null, "code"}}; a null code when `code` is empty.
std::string openai_error(std::string_view message, std::string_view type, std::string_view code);

// A Messages API answer with usage {input_tokens, output_tokens,
// cache_read_input_tokens: 0, cache_creation_input_tokens: 0}: a JSON object,
// or for r.stream the events message_start (the input tokens),
// content_block_start/_delta/_stop, message_delta (the output tokens) and
// message_stop.
std::string anthropic_message(const std::string& id, const TokenRequest& r, Usage u);

// {"type": "error", "error": {"type", "message"}}.
std::string anthropic_error(std::string_view type, std::string_view message);

// A small generateContent answer.
std::string gemini_content();

// {"error": {"code", "message", "status"}} and, when `retry_delay_s` >= 0,
// "details": [RetryInfo {"retryDelay": "Ns"}].
std::string gemini_error(int code, std::string_view status, std::string_view message, std::int64_t retry_delay_s);

}  // namespace abide::mock
