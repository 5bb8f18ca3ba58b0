// Structured Field Values (RFC 9651 section 4.2): the streaming parser and the
// decoders of raw values. No allocation on the parsing path.
#include "abide/structured_fields.h"

#include <array>
#include <cstring>

namespace abide::sf {
namespace {

// Character classes, one bit each, looked up in a 256-entry table.
enum : std::uint8_t {
  kDigit = 1U << 0,
  kTokenFirst = 1U << 1,   // ALPHA / "*"
  kTokenChar = 1U << 2,    // tchar / ":" / "/"
  kKeyFirst = 1U << 3,     // lcalpha / "*"
  kKeyChar = 1U << 4,      // lcalpha / DIGIT / "_" / "-" / "." / "*"
  kBase64 = 1U << 5,       // ALPHA / DIGIT / "+" / "/"
  kStringPlain = 1U << 6,  // %x20-7E except DQUOTE and "\"
  kLowerHex = 1U << 7,     // 0-9 a-f
};

constexpr std::array<std::uint8_t, 256> make_classes() {
  std::array<std::uint8_t, 256> t{};
  auto add = [&t](unsigned char c, std::uint8_t bits) { t[c] = static_cast<std::uint8_t>(t[c] | bits); };
  for (unsigned char c = '0'; c <= '9'; ++c) add(c, kDigit | kTokenChar | kKeyChar | kBase64 | kLowerHex);
  for (unsigned char c = 'a'; c <= 'z'; ++c) add(c, kTokenFirst | kTokenChar | kKeyFirst | kKeyChar | kBase64);
  for (unsigned char c = 'A'; c <= 'Z'; ++c) add(c, kTokenFirst | kTokenChar | kBase64);
  for (unsigned char c = 'a'; c <= 'f'; ++c) add(c, kLowerHex);
  for (char c : std::string_view("!#$%&'*+-.^_`|~:/")) add(static_cast<unsigned char>(c), kTokenChar);
  add('*', kTokenFirst | kKeyFirst | kKeyChar);
  for (char c : std::string_view("_-.")) add(static_cast<unsigned char>(c), kKeyChar);
  add('+', kBase64);
  add('/', kBase64);
  for (unsigned c = 0x20; c <= 0x7E; ++c) {
    if (c != '"' && c != '\\') add(static_cast<unsigned char>(c), kStringPlain);
  }
  return t;
}

constexpr std::array<std::uint8_t, 256> kClass = make_classes();

inline bool is(char c, std::uint8_t bits) noexcept {
  return (kClass[static_cast<unsigned char>(c)] & bits) != 0;
}

constexpr int hex_value(char c) noexcept {
  return c <= '9' ? c - '0' : c - 'a' + 10;
}

// base64 alphabet value of a character known to be in it.
constexpr std::array<std::uint8_t, 256> make_base64_values() {
  std::array<std::uint8_t, 256> t{};
  constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (std::size_t i = 0; i < alphabet.size(); ++i) t[static_cast<unsigned char>(alphabet[i])] = static_cast<std::uint8_t>(i);
  return t;
}
constexpr std::array<std::uint8_t, 256> kBase64Value = make_base64_values();

constexpr std::int64_t kPow10[] = {1, 10, 100, 1000};

}  // namespace

std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::field_too_long: return "field value too long";
    case ErrorCode::too_many_members: return "too many members";
    case ErrorCode::too_many_params: return "too many parameters";
    case ErrorCode::too_many_inner_items: return "too many inner list items";
    case ErrorCode::missing_item: return "missing item";
    case ErrorCode::invalid_bare_item: return "invalid bare item";
    case ErrorCode::invalid_number: return "invalid number";
    case ErrorCode::number_too_long: return "number too long";
    case ErrorCode::invalid_string: return "invalid string";
    case ErrorCode::invalid_token: return "invalid token";
    case ErrorCode::invalid_byte_sequence: return "invalid byte sequence";
    case ErrorCode::invalid_boolean: return "invalid boolean";
    case ErrorCode::invalid_date: return "invalid date";
    case ErrorCode::invalid_display_string: return "invalid display string";
    case ErrorCode::invalid_key: return "invalid key";
    case ErrorCode::invalid_inner_list: return "invalid inner list (expected a space or ')')";
    case ErrorCode::expected_comma: return "expected ',' or the end of the field";
    case ErrorCode::trailing_comma: return "trailing ','";
    case ErrorCode::trailing_characters: return "characters after the item";
  }
  return "unknown error";
}

std::string describe(const Error& error) {
  std::string s(to_string(error.code));
  s += " at byte ";
  s += std::to_string(error.offset);
  return s;
}

std::string_view to_string(Type type) noexcept {
  switch (type) {
    case Type::integer: return "integer";
    case Type::decimal: return "decimal";
    case Type::string: return "string";
    case Type::token: return "token";
    case Type::byte_sequence: return "byte sequence";
    case Type::boolean: return "boolean";
    case Type::date: return "date";
    case Type::display_string: return "display string";
  }
  return "unknown";
}

// ---- Parser -----------------------------------------------------------------

Parser::Parser(std::string_view field, const Limits& limits) noexcept
    : begin_(field.data()), size_(field.size()), limits_(limits) {}

bool Parser::fail(ErrorCode code, std::size_t at) noexcept {
  error_ = {code, at};
  state_ = State::failed;
  return false;
}

bool Parser::check_length() noexcept {
  if (size_ > limits_.max_field_length) return fail(ErrorCode::field_too_long, limits_.max_field_length);
  while (pos_ < size_ && begin_[pos_] == ' ') ++pos_;
  return true;
}

bool Parser::parse_number(BareView& out) noexcept {
  const std::size_t start = pos_;
  const char* s = begin_;
  std::size_t p = pos_;
  bool negative = false;
  if (s[p] == '-') {
    negative = true;
    ++p;
  }
  if (p == size_ || !is(s[p], kDigit)) return fail(ErrorCode::invalid_number, p);
  std::int64_t value = 0;
  const std::size_t digits_start = p;
  while (p < size_ && is(s[p], kDigit)) {
    if (p - digits_start == 15) return fail(ErrorCode::number_too_long, p);
    value = value * 10 + (s[p] - '0');
    ++p;
  }
  if (p < size_ && s[p] == '.') {
    if (p - digits_start > 12) return fail(ErrorCode::number_too_long, p);
    ++p;
    const std::size_t frac_start = p;
    std::int64_t frac = 0;
    while (p < size_ && is(s[p], kDigit)) {
      if (p - frac_start == 3) return fail(ErrorCode::number_too_long, p);
      frac = frac * 10 + (s[p] - '0');
      ++p;
    }
    const std::size_t frac_digits = p - frac_start;
    if (frac_digits == 0) return fail(ErrorCode::invalid_number, p);
    value = value * 1000 + frac * kPow10[3 - frac_digits];
    out.type = Type::decimal;
  } else {
    out.type = Type::integer;
  }
  out.number = negative ? -value : value;
  out.raw = std::string_view(s + start, p - start);
  out.escaped = false;
  pos_ = p;
  return true;
}

bool Parser::parse_string(BareView& out) noexcept {
  const char* s = begin_;
  std::size_t p = pos_ + 1;  // after the opening quote
  const std::size_t start = p;
  bool escaped = false;
  for (;;) {
    while (p < size_ && is(s[p], kStringPlain)) ++p;
    if (p == size_) return fail(ErrorCode::invalid_string, p);
    const char c = s[p];
    if (c == '"') break;
    if (c != '\\') return fail(ErrorCode::invalid_string, p);
    ++p;
    if (p == size_ || (s[p] != '"' && s[p] != '\\')) return fail(ErrorCode::invalid_string, p);
    escaped = true;
    ++p;
  }
  out.type = Type::string;
  out.number = 0;
  out.raw = std::string_view(s + start, p - start);
  out.escaped = escaped;
  pos_ = p + 1;
  return true;
}

bool Parser::parse_token(BareView& out) noexcept {
  const char* s = begin_;
  std::size_t p = pos_ + 1;
  while (p < size_ && is(s[p], kTokenChar)) ++p;
  out.type = Type::token;
  out.number = 0;
  out.raw = std::string_view(s + pos_, p - pos_);
  out.escaped = false;
  pos_ = p;
  return true;
}

// base64 text: alphabet characters, then at most two '=' that complete a
// group of four. Missing padding and non-zero pad bits are accepted, as RFC
// 9651 section 4.2.7 recommends.
bool Parser::parse_byte_sequence(BareView& out) noexcept {
  const char* s = begin_;
  std::size_t p = pos_ + 1;
  const std::size_t start = p;
  while (p < size_ && is(s[p], kBase64)) ++p;
  const std::size_t chars = p - start;
  const std::size_t pad_start = p;
  while (p < size_ && s[p] == '=') ++p;
  const std::size_t pad = p - pad_start;
  if (p == size_ || s[p] != ':') return fail(ErrorCode::invalid_byte_sequence, p);
  if (chars % 4 == 1) return fail(ErrorCode::invalid_byte_sequence, pad_start);
  if (pad != 0 && (pad > 2 || (chars + pad) % 4 != 0)) return fail(ErrorCode::invalid_byte_sequence, pad_start);
  out.type = Type::byte_sequence;
  out.number = 0;
  out.raw = std::string_view(s + start, p - start);
  out.escaped = false;
  pos_ = p + 1;
  return true;
}

// %"...": printable ASCII except DQUOTE and "%", or "%" and two lowercase hex
// digits; the decoded bytes must be UTF-8 (checked here, without decoding).
bool Parser::parse_display_string(BareView& out) noexcept {
  const char* s = begin_;
  std::size_t p = pos_ + 1;
  if (p == size_ || s[p] != '"') return fail(ErrorCode::invalid_display_string, p);
  ++p;
  const std::size_t start = p;
  bool escaped = false;
  int need = 0;            // continuation bytes still expected
  unsigned lo = 0x80;      // range of the next continuation byte
  unsigned hi = 0xBF;
  for (;;) {
    if (p == size_) return fail(ErrorCode::invalid_display_string, p);
    const char c = s[p];
    if (c == '"') {
      if (need != 0) return fail(ErrorCode::invalid_display_string, p);
      break;
    }
    if (c == '%') {
      if (p + 1 >= size_ || !is(s[p + 1], kLowerHex)) return fail(ErrorCode::invalid_display_string, p + 1);
      if (p + 2 >= size_ || !is(s[p + 2], kLowerHex)) return fail(ErrorCode::invalid_display_string, p + 2);
      const auto b = static_cast<unsigned>(hex_value(s[p + 1]) * 16 + hex_value(s[p + 2]));
      escaped = true;
      if (need != 0) {
        if (b < lo || b > hi) return fail(ErrorCode::invalid_display_string, p);
        --need;
        lo = 0x80;
        hi = 0xBF;
      } else if (b >= 0x80) {
        if (b >= 0xC2 && b <= 0xDF) {
          need = 1;
        } else if (b >= 0xE0 && b <= 0xEF) {
          need = 2;
          if (b == 0xE0) lo = 0xA0;
          if (b == 0xED) hi = 0x9F;
        } else if (b >= 0xF0 && b <= 0xF4) {
          need = 3;
          if (b == 0xF0) lo = 0x90;
          if (b == 0xF4) hi = 0x8F;
        } else {
          return fail(ErrorCode::invalid_display_string, p);
        }
      }
      p += 3;
      continue;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7E || need != 0) return fail(ErrorCode::invalid_display_string, p);
    ++p;
  }
  out.type = Type::display_string;
  out.number = 0;
  out.raw = std::string_view(s + start, p - start);
  out.escaped = escaped;
  pos_ = p + 1;
  return true;
}

bool Parser::parse_bare(BareView& out) noexcept {
  if (pos_ == size_) return fail(ErrorCode::missing_item, pos_);
  const char c = begin_[pos_];
  if (c == '-' || is(c, kDigit)) return parse_number(out);
  if (c == '"') return parse_string(out);
  if (is(c, kTokenFirst)) return parse_token(out);
  switch (c) {
    case ':': return parse_byte_sequence(out);
    case '?': {
      const std::size_t p = pos_ + 1;
      if (p == size_ || (begin_[p] != '0' && begin_[p] != '1')) return fail(ErrorCode::invalid_boolean, p);
      out.type = Type::boolean;
      out.number = begin_[p] == '1' ? 1 : 0;
      out.raw = std::string_view(begin_ + pos_, 2);
      out.escaped = false;
      pos_ = p + 1;
      return true;
    }
    case '@': {
      const std::size_t at = pos_;
      ++pos_;
      if (pos_ == size_ || (begin_[pos_] != '-' && !is(begin_[pos_], kDigit))) {
        return fail(ErrorCode::invalid_date, pos_);
      }
      if (!parse_number(out)) return false;
      if (out.type != Type::integer) {
        return fail(ErrorCode::invalid_date, at + 1 + out.raw.find('.'));
      }
      out.type = Type::date;
      out.raw = std::string_view(begin_ + at, pos_ - at);
      return true;
    }
    case '%': return parse_display_string(out);
    default: return fail(ErrorCode::invalid_bare_item, pos_);
  }
}

bool Parser::parse_key(std::string_view& out) noexcept {
  const char* s = begin_;
  std::size_t p = pos_;
  if (p == size_ || !is(s[p], kKeyFirst)) return fail(ErrorCode::invalid_key, p);
  ++p;
  while (p < size_ && is(s[p], kKeyChar)) ++p;
  out = std::string_view(s + pos_, p - pos_);
  pos_ = p;
  return true;
}

std::optional<ParamView> Parser::next_param() noexcept {
  if (state_ == State::inner && !skip_inner()) return std::nullopt;
  if (state_ != State::params && state_ != State::inner_params) return std::nullopt;
  if (pos_ < size_ && begin_[pos_] == ';') {
    ++pos_;
    while (pos_ < size_ && begin_[pos_] == ' ') ++pos_;
    if (++params_ > limits_.max_params) {
      fail(ErrorCode::too_many_params, pos_);
      return std::nullopt;
    }
    ParamView param;
    if (!parse_key(param.key)) return std::nullopt;
    if (pos_ < size_ && begin_[pos_] == '=') {
      ++pos_;
      if (!parse_bare(param.value)) return std::nullopt;
    } else {
      param.value.type = Type::boolean;
      param.value.number = 1;
    }
    return param;
  }
  // No more parameters: the item (or inner list) is complete.
  if (state_ == State::inner_params) {
    if (pos_ == size_ || (begin_[pos_] != ' ' && begin_[pos_] != ')')) {
      fail(ErrorCode::invalid_inner_list, pos_);
      return std::nullopt;
    }
    state_ = State::inner;
  } else if (top_ == Top::item) {
    end_item();
  } else {
    state_ = State::after_member;
  }
  return std::nullopt;
}

bool Parser::end_item() noexcept {
  while (pos_ < size_ && begin_[pos_] == ' ') ++pos_;
  if (pos_ != size_) return fail(ErrorCode::trailing_characters, pos_);
  state_ = State::done;
  return true;
}

std::optional<BareView> Parser::next_inner_item() noexcept {
  if (state_ == State::inner_params && !skip_params()) return std::nullopt;
  if (state_ != State::inner) return std::nullopt;
  while (pos_ < size_ && begin_[pos_] == ' ') ++pos_;
  if (pos_ == size_) {
    fail(ErrorCode::invalid_inner_list, pos_);
    return std::nullopt;
  }
  if (begin_[pos_] == ')') {
    ++pos_;
    state_ = State::params;
    params_ = 0;
    return std::nullopt;
  }
  if (++inner_items_ > limits_.max_inner_items) {
    fail(ErrorCode::too_many_inner_items, pos_);
    return std::nullopt;
  }
  BareView item;
  if (!parse_bare(item)) return std::nullopt;
  state_ = State::inner_params;
  params_ = 0;
  return item;
}

bool Parser::skip_params() noexcept {
  while (next_param()) {
  }
  return state_ != State::failed;
}

bool Parser::skip_inner() noexcept {
  while (state_ == State::inner || state_ == State::inner_params) {
    if (!next_inner_item() && state_ != State::params) return false;
  }
  return state_ != State::failed;
}

std::optional<MemberView> Parser::next_member(Top top) noexcept {
  if (top_ == Top::none) top_ = top;
  if (top_ != top) return std::nullopt;
  const char* s = begin_;
  switch (state_) {
    case State::start:
      if (!check_length()) return std::nullopt;
      if (pos_ == size_) {
        state_ = State::done;
        return std::nullopt;
      }
      break;
    case State::inner:
    case State::inner_params:
      if (!skip_inner()) return std::nullopt;
      [[fallthrough]];
    case State::params:
      if (!skip_params()) return std::nullopt;
      [[fallthrough]];
    case State::after_member: {
      while (pos_ < size_ && (s[pos_] == ' ' || s[pos_] == '\t')) ++pos_;
      if (pos_ == size_) {
        state_ = State::done;
        return std::nullopt;
      }
      if (s[pos_] != ',') {
        fail(ErrorCode::expected_comma, pos_);
        return std::nullopt;
      }
      const std::size_t comma = pos_;
      ++pos_;
      while (pos_ < size_ && (s[pos_] == ' ' || s[pos_] == '\t')) ++pos_;
      if (pos_ == size_) {
        fail(ErrorCode::trailing_comma, comma);
        return std::nullopt;
      }
      break;
    }
    case State::done:
    case State::failed:
      return std::nullopt;
  }
  if (++members_ > limits_.max_members) {
    fail(ErrorCode::too_many_members, pos_);
    return std::nullopt;
  }
  MemberView m;
  if (top == Top::dictionary) {
    if (!parse_key(m.key)) return std::nullopt;
    if (pos_ == size_ || s[pos_] != '=') {
      m.item.type = Type::boolean;
      m.item.number = 1;
      state_ = State::params;
      params_ = 0;
      return m;
    }
    ++pos_;
  }
  if (pos_ < size_ && s[pos_] == '(') {
    ++pos_;
    m.inner_list = true;
    state_ = State::inner;
    inner_items_ = 0;
    return m;
  }
  if (!parse_bare(m.item)) return std::nullopt;
  state_ = State::params;
  params_ = 0;
  return m;
}

std::optional<MemberView> Parser::next_dict_member() noexcept { return next_member(Top::dictionary); }

std::optional<MemberView> Parser::next_list_member() noexcept { return next_member(Top::list); }

std::optional<BareView> Parser::item() noexcept {
  if (top_ == Top::none) top_ = Top::item;
  if (top_ != Top::item || state_ != State::start) return std::nullopt;
  if (!check_length()) return std::nullopt;
  BareView v;
  if (!parse_bare(v)) return std::nullopt;
  state_ = State::params;
  params_ = 0;
  return v;
}

bool Parser::finish() noexcept {
  if (top_ == Top::none) top_ = Top::item;
  if (top_ == Top::item) {
    if (state_ == State::start && !item()) return false;
    skip_params();
    return state_ == State::done;
  }
  while (next_member(top_)) {
  }
  return state_ == State::done;
}

// ---- decoders -----------------------------------------------------------------

std::optional<std::string_view> unescape_string(std::string_view raw, std::span<char> buf) noexcept {
  std::size_t n = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '\\' && i + 1 < raw.size()) c = raw[++i];
    if (n == buf.size()) return std::nullopt;
    buf[n++] = c;
  }
  return std::string_view(buf.data(), n);
}

void append_unescaped_string(std::string_view raw, std::string& out) {
  out.reserve(out.size() + raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '\\' && i + 1 < raw.size()) c = raw[++i];
    out.push_back(c);
  }
}

namespace {

std::size_t base64_chars(std::string_view raw) noexcept {
  std::size_t n = raw.size();
  while (n > 0 && raw[n - 1] == '=') --n;
  return n;
}

// Decodes the base64 characters of raw (pad bits dropped) through put(byte).
template <class Put>
void decode_base64(std::string_view raw, Put&& put) {
  const std::size_t n = base64_chars(raw);
  std::uint32_t acc = 0;
  int bits = 0;
  for (std::size_t i = 0; i < n; ++i) {
    acc = (acc << 6) | kBase64Value[static_cast<unsigned char>(raw[i])];
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      put(static_cast<std::uint8_t>((acc >> bits) & 0xFFU));
    }
  }
}

inline bool hex_pair(std::string_view raw, std::size_t i) noexcept {
  return i + 2 < raw.size() && is(raw[i + 1], kLowerHex) && is(raw[i + 2], kLowerHex);
}

}  // namespace

std::size_t decoded_byte_sequence_size(std::string_view raw) noexcept {
  return base64_chars(raw) * 6 / 8;
}

std::optional<std::size_t> decode_byte_sequence(std::string_view raw, std::span<std::uint8_t> buf) noexcept {
  if (buf.size() < decoded_byte_sequence_size(raw)) return std::nullopt;
  std::size_t n = 0;
  decode_base64(raw, [&](std::uint8_t b) { buf[n++] = b; });
  return n;
}

void append_decoded_byte_sequence(std::string_view raw, std::vector<std::uint8_t>& out) {
  out.reserve(out.size() + decoded_byte_sequence_size(raw));
  decode_base64(raw, [&](std::uint8_t b) { out.push_back(b); });
}

std::optional<std::string_view> decode_display_string(std::string_view raw, std::span<char> buf) noexcept {
  std::size_t n = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '%' && hex_pair(raw, i)) {
      c = static_cast<char>(hex_value(raw[i + 1]) * 16 + hex_value(raw[i + 2]));
      i += 2;
    }
    if (n == buf.size()) return std::nullopt;
    buf[n++] = c;
  }
  return std::string_view(buf.data(), n);
}

void append_decoded_display_string(std::string_view raw, std::string& out) {
  out.reserve(out.size() + raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '%' && hex_pair(raw, i)) {
      c = static_cast<char>(hex_value(raw[i + 1]) * 16 + hex_value(raw[i + 2]));
      i += 2;
    }
    out.push_back(c);
  }
}

Result<std::string, Error> join_field_lines(std::span<const std::string_view> lines, const Limits& limits) {
  std::size_t total = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    total += lines[i].size() + (i == 0 ? 0 : 2);
    if (total > limits.max_field_length) return fail(Error{ErrorCode::field_too_long, limits.max_field_length});
  }
  std::string out;
  out.reserve(total);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i != 0) out += ", ";
    out += lines[i];
  }
  return out;
}

}  // namespace abide::sf
