// Internal: readers over language-model JSON bodies (json_fields.h).
#include "llm/json_fields.h"

#include <array>
#include <utility>

namespace abide::detail {

bool object_sizes_within(std::string_view text, std::size_t max_members) noexcept {
  constexpr std::size_t kMaxDepth = 64;
  constexpr std::size_t kArray = static_cast<std::size_t>(-1);  // an open array, not an object
  std::array<std::size_t, kMaxDepth> open{};
  std::size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '{':
      case '[':
        if (depth == kMaxDepth) return false;
        open[depth++] = c == '{' ? 0 : kArray;
        break;
      case '}':
      case ']':
        // Unbalanced text is the parser's to reject; the scan only bounds it.
        if (depth > 0) --depth;
        break;
      case ':':
        if (depth > 0 && open[depth - 1] != kArray && ++open[depth - 1] > max_members) return false;
        break;
      default: break;
    }
  }
  return true;
}

std::optional<JsonValue> parse_bounded_json(std::string_view text, std::size_t max_bytes) {
  if (text.size() > max_bytes || !object_sizes_within(text, kMaxObjectMembers)) return std::nullopt;
  auto parsed = parse_json(text, JsonLimits{.max_bytes = max_bytes, .max_depth = 32, .max_nodes = 100'000});
  if (!parsed) return std::nullopt;
  return std::move(*parsed);
}

const JsonValue* member(const JsonValue* v, std::string_view key) noexcept {
  if (v == nullptr || v->kind != JsonValue::Kind::kObject) return nullptr;
  return v->find(key);
}

std::optional<std::int64_t> whole_number(const JsonValue* v, std::int64_t max) noexcept {
  if (v == nullptr || v->kind != JsonValue::Kind::kNumber || !v->integer) return std::nullopt;
  if (*v->integer < 0 || *v->integer > max) return std::nullopt;
  return *v->integer;
}

std::optional<std::string_view> string_member(const JsonValue* v, std::string_view key) noexcept {
  const JsonValue* m = member(v, key);
  if (m == nullptr || m->kind != JsonValue::Kind::kString) return std::nullopt;
  return std::string_view(m->string);
}

std::uint64_t all_text_bytes(const JsonValue& v) noexcept {
  switch (v.kind) {
    case JsonValue::Kind::kString: return v.string.size();
    case JsonValue::Kind::kArray: {
      std::uint64_t n = 0;
      for (const auto& item : v.items) n += all_text_bytes(item);
      return n;
    }
    case JsonValue::Kind::kObject: {
      std::uint64_t n = 0;
      for (const auto& m : v.members) n += m.key.size() + all_text_bytes(m.value);
      return n;
    }
    case JsonValue::Kind::kNumber:
    case JsonValue::Kind::kBool:
    case JsonValue::Kind::kNull: return 0;
  }
  return 0;
}

std::uint64_t content_bytes(const JsonValue& v) noexcept {
  // Recursion is bounded by the reader's nesting limit.
  switch (v.kind) {
    case JsonValue::Kind::kString: return v.string.size();
    case JsonValue::Kind::kNumber: return 4;
    case JsonValue::Kind::kArray: {
      std::uint64_t n = 0;
      for (const auto& item : v.items) n += content_bytes(item);
      return n;
    }
    case JsonValue::Kind::kObject: {
      std::uint64_t n = 0;
      for (const auto& m : v.members) {
        const std::string_view k = m.key;
        if ((k == "input" || k == "arguments") && m.value.kind == JsonValue::Kind::kObject) {
          n += all_text_bytes(m.value);
        } else if (k == "text" || k == "content" || k == "arguments" || k == "output" || k == "thinking" ||
                   k == "refusal" || k == "input" || k == "function" || k == "tool_calls") {
          n += content_bytes(m.value);
        }
      }
      return n;
    }
    case JsonValue::Kind::kBool:
    case JsonValue::Kind::kNull: return 0;
  }
  return 0;
}

}  // namespace abide::detail
