// Internal: small readers over the JSON bodies of language-model APIs, shared
// by the cost estimate (cost_estimate.h), the usage readers (usage.h) and the
// wait hints in a limited answer's body (body_hint.h). Not installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "json_reader.h"

namespace abide::detail {

// The largest amount of one unit abide takes from a server, a request or a
// caller: far above any real token count, far below int64 overflow when a few
// are summed.
inline constexpr std::int64_t kMaxUnitAmount = 1'000'000'000'000;

// The most members one object of such a body may have. The JSON reader checks
// each new member's name against the earlier ones, so an object's cost grows
// with the square of its size; no request or answer of these APIs comes near.
inline constexpr std::size_t kMaxObjectMembers = 1024;

// True when no object in `text` has more than `max_members` members (counted
// as ':' outside strings) and nesting stays within 64 levels. A linear scan
// that decides whether `text` may be given to parse_json at all; it does not
// validate (parse_json does).
[[nodiscard]] bool object_sizes_within(std::string_view text, std::size_t max_members) noexcept;

// parse_json with the bounds these bodies get: `max_bytes`, depth 32,
// 100,000 values, and at most kMaxObjectMembers members per object.
[[nodiscard]] std::optional<JsonValue> parse_bounded_json(std::string_view text, std::size_t max_bytes);

// The member `key` of `v` when `v` is an object, else nullptr.
[[nodiscard]] const JsonValue* member(const JsonValue* v, std::string_view key) noexcept;

// A whole number from 0 to `max`; nullopt for anything else (a fraction, a
// negative, a string, an integer beyond int64).
[[nodiscard]] std::optional<std::int64_t> whole_number(const JsonValue* v, std::int64_t max = kMaxUnitAmount) noexcept;

// A string member's text, or nullopt.
[[nodiscard]] std::optional<std::string_view> string_member(const JsonValue* v, std::string_view key) noexcept;

// The bytes of text a message-like value sends to the model: a string's
// bytes; an array's items; an object's text-bearing members (text, content,
// arguments, output, thinking, refusal, input, function, tool_calls), where a
// tool's input or arguments given as an object count all their text. A number
// counts as one token, 4 bytes (a prompt or input given as token ids). Images,
// audio and files are not text and do not count.
[[nodiscard]] std::uint64_t content_bytes(const JsonValue& v) noexcept;

// The bytes of every string and member name under v (tool definitions and
// schemas, which reach the model as text).
[[nodiscard]] std::uint64_t all_text_bytes(const JsonValue& v) noexcept;

}  // namespace abide::detail
