// Structured Field Values (RFC 9651 section 4.2): the streaming parser and the
// decoders of raw values. No allocation on the parsing path.
#include "abide/structured_fields.h"

#include <array>
#include <cstring>

#include "ascii.h"
#include "decimal.h"
#include "utf8.h"

namespace abide::sf {
namespace {

// Character classes, one bit each, looked up in a 256-entry table: one load
// answers any combination of them, which the scanners' inner loops need.
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
  for (unsigned c = 0; c < 256; ++c) {
    if (ascii::is_tchar(static_cast<char>(c))) add(static_cast<unsigned char>(c), kTokenChar);
  }
  add(':', kTokenChar);
  add('/', kTokenChar);
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

inline bool is(char c, std::uint8_t bits) noexcept { return (kClass[static_cast<unsigned char>(c)] & bits) != 0; }

constexpr int hex_value(char c) noexcept { return c <= '9' ? c - '0' : c - 'a' + 10; }

// base64 alphabet value of a character known to be in it.
constexpr std::array<std::uint8_t, 256> make_base64_values() {
  std::array<std::uint8_t, 256> t{};
  constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (std::size_t i = 0; i < alphabet.size(); ++i)
    t[static_cast<unsigned char>(alphabet[i])] = static_cast<std::uint8_t>(i);
  return t;
}
constexpr std::array<std::uint8_t, 256> kBase64Value = make_base64_values();

constexpr std::int64_t kPow10[] = {1, 10, 100, 1000};
constexpr std::int64_t kMax15Digits = 999'999'999'999'999;

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

// ---- scanning bare items -------------------------------------------------------
// Each scan_* starts with p at the item's first byte. On success it fills `out`,
// leaves p after the item and returns kOk; on failure it leaves p at the error's
// offset and returns the error code. Working on locals (not Parser members)
// lets the compiler keep the cursor in a register.

namespace {

using Status = std::uint8_t;
constexpr Status kOk = 0xFF;
constexpr Status bad(ErrorCode code) noexcept { return static_cast<Status>(code); }

using abide::detail::read_decimal;
using ascii::is_digit;

inline std::uint64_t load8(const char* p) noexcept {
  std::uint64_t x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

// Bit 7 of each byte of the result is set where x's byte is not plain string
// text (below 0x20, 0x7F and above, DQUOTE, backslash); the lowest set bit
// marks the first such byte exactly.
inline std::uint64_t string_specials(std::uint64_t x) noexcept {
  constexpr std::uint64_t k01 = 0x0101010101010101ULL;
  constexpr std::uint64_t k80 = 0x8080808080808080ULL;
  auto zero = [](std::uint64_t v) { return (v - k01) & ~v & k80; };
  const std::uint64_t low = (x - 0x20 * k01) & ~x & k80;
  return low | (x & k80) | zero(x ^ (0x7F * k01)) | zero(x ^ (0x22 * k01)) | zero(x ^ (0x5C * k01));
}

inline Status scan_number(const char* s, std::size_t n, std::size_t& p, BareView& out) noexcept {
  const std::size_t start = p;
  std::size_t q = p;
  const bool negative = s[q] == '-';
  q += negative ? 1 : 0;
  if (q == n || !is_digit(s[q])) {
    p = q;
    return bad(ErrorCode::invalid_number);
  }
  // An integer has at most 15 digits, a decimal 12 and 3 (RFC 9651 3.3.1, 3.3.2).
  const auto whole = read_decimal<std::int64_t, kMax15Digits, 15>({s + q, n - q});
  std::int64_t value = whole.value;
  q += whole.digits;
  if (q < n && is_digit(s[q])) {
    p = q;
    return bad(ErrorCode::number_too_long);
  }
  if (q < n && s[q] == '.') [[unlikely]] {
    if (whole.digits > 12) {
      p = q;
      return bad(ErrorCode::number_too_long);
    }
    ++q;
    const auto frac = read_decimal<std::int64_t, 999, 3>({s + q, n - q});
    q += frac.digits;
    if (frac.digits == 0 || (q < n && is_digit(s[q]))) {
      p = q;
      return bad(frac.digits == 0 ? ErrorCode::invalid_number : ErrorCode::number_too_long);
    }
    value = value * 1000 + frac.value * kPow10[3 - frac.digits];
    out.type = Type::decimal;
  } else {
    out.type = Type::integer;
  }
  out.number = negative ? -value : value;
  out.raw = std::string_view(s + start, q - start);
  out.escaped = false;
  p = q;
  return kOk;
}

inline Status scan_string(const char* s, std::size_t n, std::size_t& p, BareView& out) noexcept {
  std::size_t q = p + 1;  // after the opening quote
  const std::size_t start = q;
  bool escaped = false;
  for (;;) {
    while (n - q >= 8) {
      const std::uint64_t m = string_specials(load8(s + q));
      if (m != 0) {
        q += static_cast<std::size_t>(__builtin_ctzll(m)) / 8;
        break;
      }
      q += 8;
    }
    while (q < n && is(s[q], kStringPlain)) ++q;
    if (q == n) break;
    const char c = s[q];
    if (c == '"') {
      out.type = Type::string;
      out.number = 0;
      out.raw = std::string_view(s + start, q - start);
      out.escaped = escaped;
      p = q + 1;
      return kOk;
    }
    if (c != '\\') break;
    ++q;
    if (q == n || (s[q] != '"' && s[q] != '\\')) break;
    escaped = true;
    ++q;
  }
  p = q;
  return bad(ErrorCode::invalid_string);
}

inline Status scan_token(const char* s, std::size_t n, std::size_t& p, BareView& out) noexcept {
  std::size_t q = p + 1;
  while (q < n && is(s[q], kTokenChar)) ++q;
  out.type = Type::token;
  out.number = 0;
  out.raw = std::string_view(s + p, q - p);
  out.escaped = false;
  p = q;
  return kOk;
}

// base64 text: alphabet characters, then at most two '=' that complete a
// group of four. Missing padding and non-zero pad bits are accepted, as RFC
// 9651 section 4.2.7 recommends.
[[gnu::noinline]] Status scan_byte_sequence(const char* s, std::size_t n, std::size_t& p, BareView& out) noexcept {
  std::size_t q = p + 1;
  const std::size_t start = q;
  while (q < n && is(s[q], kBase64)) ++q;
  const std::size_t chars = q - start;
  const std::size_t pad_start = q;
  while (q < n && s[q] == '=') ++q;
  const std::size_t pad = q - pad_start;
  if (q == n || s[q] != ':') {
    p = q;
    return bad(ErrorCode::invalid_byte_sequence);
  }
  if (chars % 4 == 1 || (pad != 0 && (pad > 2 || (chars + pad) % 4 != 0))) {
    p = pad_start;
    return bad(ErrorCode::invalid_byte_sequence);
  }
  out.type = Type::byte_sequence;
  out.number = 0;
  out.raw = std::string_view(s + start, q - start);
  out.escaped = false;
  p = q + 1;
  return kOk;
}

// %"...": printable ASCII except DQUOTE and "%", or "%" and two lowercase hex
// digits; the decoded bytes must be UTF-8 (checked here, without decoding).
[[gnu::noinline]] Status scan_display_string(const char* s, std::size_t n, std::size_t& p, BareView& out) noexcept {
  std::size_t q = p + 1;
  auto failed = [&p](std::size_t at) {
    p = at;
    return bad(ErrorCode::invalid_display_string);
  };
  if (q == n || s[q] != '"') return failed(q);
  ++q;
  const std::size_t start = q;
  bool escaped = false;
  detail::Utf8Validator utf8;  // over the decoded bytes
  for (;;) {
    if (q == n) return failed(q);
    const char c = s[q];
    if (c == '"') {
      if (!utf8.complete()) return failed(q);
      break;
    }
    if (c == '%') {
      if (q + 1 >= n || !is(s[q + 1], kLowerHex)) return failed(q + 1);
      if (q + 2 >= n || !is(s[q + 2], kLowerHex)) return failed(q + 2);
      const auto b = static_cast<unsigned char>(hex_value(s[q + 1]) * 16 + hex_value(s[q + 2]));
      escaped = true;
      if (!utf8.feed(b)) return failed(q);
      q += 3;
      continue;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7E || !utf8.complete()) return failed(q);
    ++q;
  }
  out.type = Type::display_string;
  out.number = 0;
  out.raw = std::string_view(s + start, q - start);
  out.escaped = escaped;
  p = q + 1;
  return kOk;
}

inline Status scan_rare(const char* s, std::size_t n, std::size_t& p, BareView& out) noexcept {
  const std::size_t at = p;
  switch (s[at]) {
    case ':': return scan_byte_sequence(s, n, p, out);
    case '?': {
      const std::size_t q = at + 1;
      if (q == n || (s[q] != '0' && s[q] != '1')) {
        p = q;
        return bad(ErrorCode::invalid_boolean);
      }
      out.type = Type::boolean;
      out.number = s[q] == '1' ? 1 : 0;
      out.raw = std::string_view(s + at, 2);
      out.escaped = false;
      p = q + 1;
      return kOk;
    }
    case '@': {
      p = at + 1;
      if (p == n || (s[p] != '-' && !is_digit(s[p]))) return bad(ErrorCode::invalid_date);
      const Status st = scan_number(s, n, p, out);
      if (st != kOk) return st;
      if (out.type != Type::integer) {
        p = at + 1 + out.raw.find('.');
        return bad(ErrorCode::invalid_date);
      }
      out.type = Type::date;
      out.raw = std::string_view(s + at, p - at);
      return kOk;
    }
    case '%': return scan_display_string(s, n, p, out);
    default: return bad(ErrorCode::invalid_bare_item);
  }
}

// The cursor goes in and out by value so that callers can keep theirs in a
// register (a reference would force it to memory around this call).
struct RareScan {
  std::size_t pos;
  Status status;
};
[[gnu::noinline]] RareScan scan_rare_at(const char* s, std::size_t n, std::size_t p, BareView& out) noexcept {
  const Status st = scan_rare(s, n, p, out);
  return {p, st};
}

inline Status scan_bare(const char* s, std::size_t n, std::size_t& p, BareView& out) noexcept {
  if (p == n) return bad(ErrorCode::missing_item);
  const char c = s[p];
  if (c == '"') return scan_string(s, n, p, out);
  if (is_digit(c) || c == '-') return scan_number(s, n, p, out);
  if (is(c, kTokenFirst)) return scan_token(s, n, p, out);
  const RareScan r = scan_rare_at(s, n, p, out);
  p = r.pos;
  return r.status;
}

inline Status scan_key(const char* s, std::size_t n, std::size_t& p, std::string_view& out) noexcept {
  if (p == n || !is(s[p], kKeyFirst)) return bad(ErrorCode::invalid_key);
  std::size_t q = p + 1;
  while (q < n && is(s[q], kKeyChar)) ++q;
  out = std::string_view(s + p, q - p);
  p = q;
  return kOk;
}

}  // namespace

// ---- Parser -----------------------------------------------------------------

[[gnu::cold]] bool Parser::fail(ErrorCode code, std::size_t at) noexcept {
  error_ = {code, at};
  state_ = State::failed;
  return false;
}

bool Parser::check_length() noexcept {
  if (size_ > limits_.max_field_length) [[unlikely]] {
    return fail(ErrorCode::field_too_long, limits_.max_field_length);
  }
  while (pos_ < size_ && begin_[pos_] == ' ') ++pos_;
  return true;
}

// The walking functions return one named optional on every path, so that it
// is built in place in the caller's return slot (no copy).
// The walking functions return one named optional on every path, so that it
// is built in place in the caller's return slot (no copy).
std::optional<ParamView> Parser::next_param() noexcept {
  std::optional<ParamView> param;
  if (state_ == State::inner) [[unlikely]] {
    skip_inner();  // the inner list's parameters come next
  }
  const char* s = begin_;
  const std::size_t n = size_;
  std::size_t p = pos_;
  // Fast path: a parameter follows. The end of the parameters is out of line.
  if ((state_ != State::params && state_ != State::inner_params) || p == n || s[p] != ';') {
    end_params();
    return param;
  }
  ++p;
  while (p < n && s[p] == ' ') ++p;
  if (++params_ > limits_.max_params) [[unlikely]] {
    fail(ErrorCode::too_many_params, p);
    return param;
  }
  param.emplace();
  Status st = scan_key(s, n, p, param->key);
  if (st == kOk) [[likely]] {
    if (p < n && s[p] == '=') {
      ++p;
      st = scan_bare(s, n, p, param->value);
    } else {
      param->value.type = Type::boolean;
      param->value.number = 1;
    }
  }
  if (st != kOk) [[unlikely]] {
    fail(static_cast<ErrorCode>(st), p);
    param.reset();
    return param;
  }
  pos_ = p;
  return param;
}

// No parameter follows: the item (or inner list) is complete.
[[gnu::noinline]] void Parser::end_params() noexcept {
  if (state_ == State::inner_params) {
    if (pos_ == size_ || (begin_[pos_] != ' ' && begin_[pos_] != ')')) {
      fail(ErrorCode::invalid_inner_list, pos_);
    } else {
      state_ = State::inner;
    }
  } else if (state_ == State::params) {
    if (top_ == Top::item) {
      end_item();
    } else {
      state_ = State::after_member;
    }
  }
}

bool Parser::end_item() noexcept {
  std::size_t p = pos_;
  while (p < size_ && begin_[p] == ' ') ++p;
  if (p != size_) return fail(ErrorCode::trailing_characters, p);
  pos_ = p;
  state_ = State::done;
  return true;
}

std::optional<BareView> Parser::next_inner_item() noexcept {
  std::optional<BareView> item;
  if (state_ == State::inner_params && !skip_params()) return item;
  if (state_ != State::inner) return item;
  std::size_t p = pos_;
  while (p < size_ && begin_[p] == ' ') ++p;
  if (p == size_) {
    fail(ErrorCode::invalid_inner_list, p);
    return item;
  }
  if (begin_[p] == ')') {
    pos_ = p + 1;
    state_ = State::params;
    params_ = 0;
    return item;
  }
  if (++inner_items_ > limits_.max_inner_items) {
    fail(ErrorCode::too_many_inner_items, p);
    return item;
  }
  item.emplace();
  if (const Status st = scan_bare(begin_, size_, p, *item); st != kOk) {
    fail(static_cast<ErrorCode>(st), p);
    item.reset();
    return item;
  }
  pos_ = p;
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

[[gnu::always_inline]] inline std::optional<MemberView> Parser::next_member(Top top) noexcept {
  std::optional<MemberView> m;
  if (top_ != top) [[unlikely]] {
    if (top_ != Top::none) return m;
    top_ = top;
  }
  const char* s = begin_;
  const std::size_t n = size_;
  std::size_t p = pos_;
  switch (state_) {
    case State::start:
      if (!check_length()) return m;
      p = pos_;
      if (p == n) {
        state_ = State::done;
        return m;
      }
      break;
    case State::inner:
    case State::inner_params:
      if (!skip_inner()) return m;
      [[fallthrough]];
    case State::params:
      if (!skip_params()) return m;
      p = pos_;
      [[fallthrough]];
    case State::after_member: {
      while (p < n && (s[p] == ' ' || s[p] == '\t')) ++p;
      if (p == n) {
        pos_ = p;
        state_ = State::done;
        return m;
      }
      if (s[p] != ',') {
        fail(ErrorCode::expected_comma, p);
        return m;
      }
      const std::size_t comma = p;
      ++p;
      while (p < n && (s[p] == ' ' || s[p] == '\t')) ++p;
      if (p == n) {
        fail(ErrorCode::trailing_comma, comma);
        return m;
      }
      break;
    }
    case State::done:
    case State::failed: return m;
  }
  if (++members_ > limits_.max_members) [[unlikely]] {
    fail(ErrorCode::too_many_members, p);
    return m;
  }
  m.emplace();
  Status st = kOk;
  if (top == Top::dictionary) {
    st = scan_key(s, n, p, m->key);
    if (st != kOk) {
      fail(static_cast<ErrorCode>(st), p);
      m.reset();
      return m;
    }
    if (p == n || s[p] != '=') {
      m->item.type = Type::boolean;
      m->item.number = 1;
      pos_ = p;
      state_ = State::params;
      params_ = 0;
      return m;
    }
    ++p;
  }
  if (p < n && s[p] == '(') {
    pos_ = p + 1;
    m->inner_list = true;
    state_ = State::inner;
    inner_items_ = 0;
    return m;
  }
  st = scan_bare(s, n, p, m->item);
  if (st != kOk) [[unlikely]] {
    fail(static_cast<ErrorCode>(st), p);
    m.reset();
    return m;
  }
  pos_ = p;
  state_ = State::params;
  params_ = 0;
  return m;
}

std::optional<MemberView> Parser::next_dict_member() noexcept { return next_member(Top::dictionary); }

std::optional<MemberView> Parser::next_list_member() noexcept { return next_member(Top::list); }

std::optional<BareView> Parser::item() noexcept {
  std::optional<BareView> v;
  if (top_ == Top::none) top_ = Top::item;
  if (top_ != Top::item || state_ != State::start) return v;
  if (!check_length()) return v;
  v.emplace();
  std::size_t p = pos_;
  if (const Status st = scan_bare(begin_, size_, p, *v); st != kOk) {
    fail(static_cast<ErrorCode>(st), p);
    v.reset();
    return v;
  }
  pos_ = p;
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

std::size_t decoded_byte_sequence_size(std::string_view raw) noexcept { return base64_chars(raw) * 6 / 8; }

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
