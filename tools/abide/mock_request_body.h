// What `abide mock-server`'s token styles read from a request body: the text
// a vendor counts, the tokens asked for, and whether to stream. The counting
// follows what the vendors document, not a tokenizer: OpenAI estimates a
// request's tokens "based on the character count of your request", and the
// server uses ceil(bytes / 4) for both vendors, where bytes is the UTF-8
// length of the text content. A body that cannot be read is an error value
// (answered 400 or 413), never an exception.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "abide/result.h"

namespace abide::mock {

// Whose request format the body is in.
enum class BodyDialect : std::uint8_t { kOpenai, kAnthropic };

// Bodies longer than this are refused (413), before they are parsed.
inline constexpr std::size_t kMaxBodyBytes = std::size_t{1} << 20;

// Arrays and objects nested deeper than this are refused (400): no request
// of either API needs more, and it bounds what the parser builds.
inline constexpr std::size_t kMaxBodyDepth = 64;

// The model name is echoed back at most this long.
inline constexpr std::size_t kMaxModelName = 64;

// OpenAI's default when a request names no limit of its output tokens.
inline constexpr std::uint64_t kOpenaiDefaultMaxTokens = 4096;

struct TokenRequest {
  std::uint64_t text_bytes = 0;  // UTF-8 bytes of the text content counted
  std::uint64_t estimate = 0;    // ceil(text_bytes / 4): the prompt's tokens
  std::uint64_t max_tokens = 0;  // as asked, else the default (embeddings: 0)
  bool stream = false;           // "stream": true
  bool include_usage = false;    // "stream_options": {"include_usage": true} (OpenAI)
  std::string model;             // as asked (at most kMaxModelName bytes), else "mock-model"
};

struct BodyError {
  int status = 400;     // 400, or 413 for a body over kMaxBodyBytes
  std::string message;  // says what is wrong, for the error JSON
};

// a + b, saturating: every count the mock server keeps stops at the top.
constexpr std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) noexcept {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

// ceil(bytes / 4), without overflow.
constexpr std::uint64_t estimate_tokens(std::uint64_t bytes) noexcept { return bytes / 4 + (bytes % 4 != 0 ? 1 : 0); }

// Reads a request body of `dialect` sent to `path`. OpenAI's text is found by
// endpoint (the path's end): /embeddings `input` (a string or strings, default
// max 0); /responses `input` (a string, or items with a `text` or a
// `content`); /completions `prompt` (a string or strings); anything else is a
// chat completion: `messages[].content` (a string, or parts with a `text`).
// Its max_tokens is `max_tokens`, else `max_completion_tokens`, else
// `max_output_tokens`, else 4096. Anthropic's text is `system` and
// `messages[].content` (strings or blocks with a `text`), and its `max_tokens`
// is required (>= 1). Fields of the wrong type are errors where they decide
// the charge (the max_tokens fields, stream); text of an unknown shape is not
// counted.
Result<TokenRequest, BodyError> read_token_request(BodyDialect dialect, std::string_view path, std::string_view body);

}  // namespace abide::mock
