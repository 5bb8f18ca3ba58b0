// Internal: a small, strict, bounded JSON reader (RFC 8259) for vendor profile
// files. The core may not use third-party code, and profiles are small, so this
// builds a plain value tree. Strict: no comments, no trailing commas, no
// duplicate object keys, valid UTF-8 only. Bounded: input size, nesting depth
// and node count are limited, so a hostile file cannot exhaust memory or stack.
// Not installed; not part of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abide/result.h"

namespace abide::detail {

struct JsonMember;

// One JSON value with the position where it starts (1-based line and column).
struct JsonValue {
  enum class Kind : std::uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;                    // kNumber
  std::optional<std::int64_t> integer;  // kNumber without fraction or exponent, in range
  std::string string;                   // kString (UTF-8)
  std::vector<JsonValue> items;         // kArray
  std::vector<JsonMember> members;      // kObject, in file order
  std::size_t line = 0;
  std::size_t column = 0;

  // The member named key of an object, or nullptr.
  const JsonValue* find(std::string_view key) const noexcept;
};

struct JsonMember {
  std::string key;
  JsonValue value;
};

// "null", "boolean", "number", "string", "array", "object".
std::string_view to_string(JsonValue::Kind kind) noexcept;

struct JsonError {
  std::string message;  // e.g. "expected ',' or '}'"
  std::size_t line = 0;
  std::size_t column = 0;
};

struct JsonLimits {
  std::size_t max_bytes = 1 << 20;
  std::size_t max_depth = 32;
  std::size_t max_nodes = 100'000;
};

// Parses one JSON text (a single value, surrounded by optional whitespace).
Result<JsonValue, JsonError> parse_json(std::string_view text, const JsonLimits& limits = {});

}  // namespace abide::detail
