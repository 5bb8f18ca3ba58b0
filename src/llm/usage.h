// Internal: what a language-model API's answer says the request used, for
// reconciling the estimate made before sending (cost_estimate.h): from a whole
// JSON body, or from a server-sent event stream read chunk by chunk. Pure
// readers over bytes; memory stays bounded whatever the server sends. Not
// installed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abide/profiles.h"
#include "abide/quota.h"
#include "body_hint.h"

namespace abide::detail {

// Bodies longer than this are not read for usage.
inline constexpr std::size_t kMaxUsageBody = 4 * 1024 * 1024;

// The usage an answer body states, or nullopt when it states none that is
// valid (amounts from 0 to 1e12). openai: usage.total_tokens, else
// prompt_tokens + completion_tokens, else input_tokens + output_tokens (the
// Responses API), as "tokens". anthropic: "input-tokens" = usage.input_tokens +
// cache_creation_input_tokens (cache reads do not count toward the input
// tokens quota), "output-tokens" = usage.output_tokens, "tokens" = their sum.
[[nodiscard]] std::optional<std::vector<UnitCost>> usage_from_json(CostRule rule, std::string_view body);

struct JsonValue;

// An error event seen in the middle of a stream (the status line said 200).
struct StreamError {
  std::string
      type;  // "overloaded_error", "rate_limit_exceeded", ...; "error" when unnamed; at most 64 bytes of [A-Za-z0-9_.:-?]
  std::optional<BodyHint> hint;  // a wait stated in the event's data, when there is one
};

// Reads a text/event-stream answer fed in chunks of any size, split anywhere.
// openai: the usage of the last event carrying one (a chat chunk's usage, a
// Responses event's response.usage). anthropic: message_start's input tokens
// (plus cache creation) and the last message_delta's output tokens. Either:
// the first error event, OpenAI's and OpenRouter's {"error": {...}} data or
// Anthropic's `event: error`. An event longer than kMaxEvent bytes is dropped
// (and counted), so memory never grows past a few times that.
class SseUsageReader {
 public:
  static constexpr std::size_t kMaxEvent = 64 * 1024;
  static constexpr std::array<BodyHintKind, 2> kAllHints = {BodyHintKind::kGoogleRetryInfo,
                                                            BodyHintKind::kTryAgainSentence};

  // `hints`: where an error event's data may state a wait, tried in order.
  explicit SseUsageReader(CostRule rule, std::span<const BodyHintKind> hints = kAllHints);

  // Takes the next bytes of the stream.
  void feed(std::string_view chunk);

  // What the events so far said the request used (nullopt: nothing yet).
  [[nodiscard]] std::optional<std::vector<UnitCost>> usage() const;
  [[nodiscard]] const std::optional<StreamError>& error() const noexcept { return error_; }
  [[nodiscard]] std::size_t events() const noexcept { return events_; }
  [[nodiscard]] std::size_t dropped_events() const noexcept { return dropped_; }

 private:
  std::string_view skip_bom(std::string_view chunk);
  void drop();
  void end_line();
  void line(std::string_view text);
  void field(std::string_view name, std::string_view value);
  void dispatch();
  void event(std::string_view name, std::string_view data);
  void openai_event(const JsonValue& data);
  void anthropic_event(const JsonValue& data);
  void error_event(const JsonValue* data, std::string_view raw);

  CostRule rule_;
  std::vector<BodyHintKind> hints_;
  std::string line_;             // the line being read (bounded)
  std::size_t line_length_ = 0;  // its length, counting bytes not kept (a blank line ends an event)
  std::string event_name_;       // the event's `event:` field
  std::string data_;             // the event's `data:` lines joined by '\n' (bounded)
  bool has_data_ = false;
  bool oversize_ = false;  // the event being read is too long: dropped at its end
  bool after_cr_ = false;  // the last byte was CR: a following LF ends no second line
  bool at_start_ = true;   // a byte order mark may still come
  std::size_t events_ = 0;
  std::size_t dropped_ = 0;
  std::optional<std::vector<UnitCost>> openai_usage_;
  std::optional<std::int64_t> input_;   // anthropic: input + cache creation
  std::optional<std::int64_t> output_;  // anthropic: output so far
  std::optional<StreamError> error_;
};

}  // namespace abide::detail
