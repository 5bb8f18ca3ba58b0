// Internal: strict, bounded JSON reader (json_reader.h).
#include "json_reader.h"

#include <charconv>
#include <cstdint>
#include <string>
#include <system_error>

namespace abide::detail {

const JsonValue* JsonValue::find(std::string_view key) const noexcept {
  for (const auto& m : members) {
    if (m.key == key) return &m.value;
  }
  return nullptr;
}

std::string_view to_string(JsonValue::Kind kind) noexcept {
  switch (kind) {
    case JsonValue::Kind::kNull: return "null";
    case JsonValue::Kind::kBool: return "boolean";
    case JsonValue::Kind::kNumber: return "number";
    case JsonValue::Kind::kString: return "string";
    case JsonValue::Kind::kArray: return "array";
    case JsonValue::Kind::kObject: return "object";
  }
  return "value";
}

namespace {

class Reader {
 public:
  Reader(std::string_view text, const JsonLimits& limits) : text_(text), limits_(limits) {}

  Result<JsonValue, JsonError> run() {
    if (text_.size() > limits_.max_bytes) {
      return fail(JsonError{"file longer than " + std::to_string(limits_.max_bytes) + " bytes", 1, 1});
    }
    JsonValue v;
    skip_ws();
    if (!value(v, 0)) return fail(error_);
    skip_ws();
    if (pos_ != text_.size()) {
      set_error("unexpected characters after the JSON value");
      return fail(error_);
    }
    return v;
  }

 private:
  bool set_error(std::string message) {
    // Line and column of pos_ (computed on error only).
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    error_ = JsonError{std::move(message), line, col};
    return false;
  }

  void position(JsonValue& v) const {
    std::size_t line = 1, col = 1;
    // Incremental: remember the last computed position to keep this linear.
    std::size_t i = 0;
    if (cache_pos_ <= pos_) {
      i = cache_pos_;
      line = cache_line_;
      col = cache_col_;
    }
    for (; i < pos_; ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    cache_pos_ = pos_;
    cache_line_ = line;
    cache_col_ = col;
    v.line = line;
    v.column = col;
  }

  void skip_ws() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return set_error("invalid literal");
    pos_ += word.size();
    return true;
  }

  bool value(JsonValue& v, std::size_t depth) {
    if (++nodes_ > limits_.max_nodes) return set_error("too many values");
    if (pos_ >= text_.size()) return set_error("unexpected end of input");
    position(v);
    const char c = text_[pos_];
    switch (c) {
      case '{': return object(v, depth + 1);
      case '[': return array(v, depth + 1);
      case '"': v.kind = JsonValue::Kind::kString; return string(v.string);
      case 't':
        v.kind = JsonValue::Kind::kBool;
        v.boolean = true;
        return literal("true");
      case 'f':
        v.kind = JsonValue::Kind::kBool;
        v.boolean = false;
        return literal("false");
      case 'n': v.kind = JsonValue::Kind::kNull; return literal("null");
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return number(v);
        return set_error(std::string("unexpected character '") + c + "'");
    }
  }

  bool object(JsonValue& v, std::size_t depth) {
    if (depth > limits_.max_depth) return set_error("nesting deeper than " + std::to_string(limits_.max_depth));
    v.kind = JsonValue::Kind::kObject;
    ++pos_;  // '{'
    skip_ws();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_ws();
      if (pos_ >= text_.size() || text_[pos_] != '"') return set_error("expected a member name in double quotes");
      const std::size_t key_pos = pos_;
      std::string key;
      if (!string(key)) return false;
      for (const auto& m : v.members) {
        if (m.key == key) {
          pos_ = key_pos;
          return set_error("duplicate member \"" + key + "\"");
        }
      }
      skip_ws();
      if (pos_ >= text_.size() || text_[pos_] != ':') return set_error("expected ':'");
      ++pos_;
      skip_ws();
      v.members.push_back(JsonMember{std::move(key), JsonValue{}});
      if (!value(v.members.back().value, depth)) return false;
      skip_ws();
      if (pos_ >= text_.size()) return set_error("expected ',' or '}'");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return set_error("expected ',' or '}'");
    }
  }

  bool array(JsonValue& v, std::size_t depth) {
    if (depth > limits_.max_depth) return set_error("nesting deeper than " + std::to_string(limits_.max_depth));
    v.kind = JsonValue::Kind::kArray;
    ++pos_;  // '['
    skip_ws();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_ws();
      v.items.emplace_back();
      if (!value(v.items.back(), depth)) return false;
      skip_ws();
      if (pos_ >= text_.size()) return set_error("expected ',' or ']'");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return set_error("expected ',' or ']'");
    }
  }

  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  bool hex4(std::uint32_t& out) {
    if (pos_ + 4 > text_.size()) return set_error("truncated \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = hex(text_[pos_ + static_cast<std::size_t>(i)]);
      if (h < 0) return set_error("invalid \\u escape");
      out = (out << 4) | static_cast<std::uint32_t>(h);
    }
    pos_ += 4;
    return true;
  }

  static void append_utf8(std::string& s, std::uint32_t cp) {
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  // Validates one UTF-8 sequence starting at pos_ and appends it.
  bool utf8(std::string& s) {
    const auto b0 = static_cast<unsigned char>(text_[pos_]);
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
      cp = b0 & 0x1Fu;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3;
      cp = b0 & 0x0Fu;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4;
      cp = b0 & 0x07u;
    } else {
      return set_error("invalid UTF-8");
    }
    if (pos_ + len > text_.size()) return set_error("invalid UTF-8");
    for (std::size_t i = 1; i < len; ++i) {
      const auto b = static_cast<unsigned char>(text_[pos_ + i]);
      if ((b & 0xC0) != 0x80) return set_error("invalid UTF-8");
      cp = (cp << 6) | (b & 0x3Fu);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
      return set_error("invalid UTF-8");
    }
    s.append(text_.substr(pos_, len));
    pos_ += len;
    return true;
  }

  bool string(std::string& out) {
    ++pos_;  // '"'
    for (;;) {
      if (pos_ >= text_.size()) return set_error("unterminated string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return set_error("control character in string");
      if (static_cast<unsigned char>(c) >= 0x80) {
        if (!utf8(out)) return false;
        continue;
      }
      if (c != '\\') {
        out.push_back(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= text_.size()) return set_error("unterminated string");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          std::uint32_t cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return set_error("unpaired surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            std::uint32_t lo = 0;
            if (text_.substr(pos_, 2) != "\\u") return set_error("unpaired surrogate in \\u escape");
            pos_ += 2;
            if (!hex4(lo)) return false;
            if (lo < 0xDC00 || lo > 0xDFFF) return set_error("unpaired surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default: --pos_; return set_error("invalid escape");
      }
    }
  }

  bool number(JsonValue& v) {
    const std::size_t start = pos_;
    auto digit = [&](std::size_t i) { return i < text_.size() && text_[i] >= '0' && text_[i] <= '9'; };
    if (text_[pos_] == '-') ++pos_;
    if (!digit(pos_)) return set_error("invalid number");
    if (text_[pos_] == '0') {
      ++pos_;
      if (digit(pos_)) return set_error("leading zero in number");
    } else {
      while (digit(pos_)) ++pos_;
    }
    bool integral = true;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (!digit(pos_)) return set_error("invalid number");
      while (digit(pos_)) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!digit(pos_)) return set_error("invalid number");
      while (digit(pos_)) ++pos_;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    v.kind = JsonValue::Kind::kNumber;
    double d = 0;
    const auto r = std::from_chars(first, last, d);
    if (r.ec != std::errc{} || r.ptr != last) {
      pos_ = start;
      return set_error("number out of range");
    }
    v.number = d;
    if (integral) {
      std::int64_t i = 0;
      const auto ri = std::from_chars(first, last, i);
      if (ri.ec == std::errc{} && ri.ptr == last) v.integer = i;
    }
    return true;
  }

  std::string_view text_;
  JsonLimits limits_;
  std::size_t pos_ = 0;
  std::size_t nodes_ = 0;
  mutable std::size_t cache_pos_ = 0;
  mutable std::size_t cache_line_ = 1;
  mutable std::size_t cache_col_ = 1;
  JsonError error_;
};

}  // namespace

Result<JsonValue, JsonError> parse_json(std::string_view text, const JsonLimits& limits) {
  return Reader(text, limits).run();
}

}  // namespace abide::detail
