// Structured Field Values: the owning tree (built on the streaming parser) and
// the canonical serializer of RFC 9651 section 4.1.
#include "abide/sf_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "ascii.h"
#include "base64.h"
#include "decimal.h"
#include "utf8.h"

namespace abide::sf {
namespace {

constexpr std::int64_t kMaxInteger = 999'999'999'999'999;
constexpr std::int64_t kMaxDecimalInteger = 999'999'999'999;

// ---- tree building ----

bool read_params(Parser& p, Parameters& out) {
  while (auto param = p.next_param()) {
    if (out.empty()) out.reserve(4);  // typical fields have a few; saves regrowth
    set(out, param->key, to_bare_item(param->value));
  }
  return !p.failed();
}

ListMember read_member(Parser& p, const MemberView& m) {
  if (!m.inner_list) {
    Item item{to_bare_item(m.item), {}};
    read_params(p, item.params);
    return item;
  }
  InnerList list;
  while (auto bare = p.next_inner_item()) {
    Item item{to_bare_item(*bare), {}};
    if (!read_params(p, item.params)) break;
    if (list.items.empty()) list.items.reserve(4);
    list.items.push_back(std::move(item));
  }
  if (!p.failed()) read_params(p, list.params);
  return list;
}

// Parses a single-line field, or each line joined when there are several.
template <class F>
auto with_lines(std::span<const std::string_view> lines, const Limits& limits, F&& parse)
    -> decltype(parse(std::string_view{})) {
  if (lines.size() == 1) return parse(lines[0]);
  auto joined = join_field_lines(lines, limits);
  if (!joined) return fail(joined.error());
  return parse(std::string_view(*joined));
}

// ---- serialization ----

using ascii::is_alpha;
using ascii::is_digit;
using ascii::is_tchar;

struct Writer {
  std::string out;
  std::optional<Error> error;

  bool fail(ErrorCode code) {
    if (!error) error = Error{code, out.size()};
    return false;
  }

  bool integer(std::int64_t v) {
    if (v > kMaxInteger || v < -kMaxInteger) return fail(ErrorCode::number_too_long);
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
    return true;
  }

  bool decimal(Decimal d) {
    const std::int64_t t = d.thousandths;
    const std::int64_t whole = t / 1000;
    if (whole > kMaxDecimalInteger || whole < -kMaxDecimalInteger) return fail(ErrorCode::number_too_long);
    if (t < 0) out += '-';
    const std::int64_t mag = t < 0 ? -t : t;
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, mag / 1000);
    out.append(buf, r.ptr);
    out += '.';
    std::int64_t frac = mag % 1000;
    if (frac == 0) {
      out += '0';
      return true;
    }
    char digits[3] = {static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                      static_cast<char>('0' + frac % 10)};
    std::size_t n = 3;
    while (digits[n - 1] == '0') --n;
    out.append(digits, n);
    return true;
  }

  bool string(const std::string& s) {
    for (char c : s) {
      if (c < 0x20 || c > 0x7E) return fail(ErrorCode::invalid_string);
    }
    out += '"';
    for (char c : s) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
    return true;
  }

  bool token(const std::string& s) {
    if (s.empty() || !(is_alpha(s[0]) || s[0] == '*')) return fail(ErrorCode::invalid_token);
    for (char c : s) {
      if (!is_tchar(c) && c != ':' && c != '/') return fail(ErrorCode::invalid_token);
    }
    out += s;
    return true;
  }

  void bytes(const std::vector<std::uint8_t>& b) {
    out += ':';
    detail::append_base64(out, std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
    out += ':';
  }

  bool display(const std::string& s) {
    if (!detail::valid_utf8(s)) return fail(ErrorCode::invalid_display_string);
    static constexpr char kHex[] = "0123456789abcdef";
    out += "%\"";
    for (char c : s) {
      const auto u = static_cast<unsigned char>(c);
      if (u == '%' || u == '"' || u < 0x20 || u > 0x7E) {
        out += '%';
        out += kHex[u >> 4];
        out += kHex[u & 15];
      } else {
        out += c;
      }
    }
    out += '"';
    return true;
  }

  bool bare(const BareItem& b) {
    switch (type_of(b)) {
      case Type::integer: return integer(std::get<std::int64_t>(b));
      case Type::decimal: return decimal(std::get<Decimal>(b));
      case Type::string: return string(std::get<std::string>(b));
      case Type::token: return token(std::get<Token>(b).value);
      case Type::byte_sequence: bytes(std::get<ByteSequence>(b).bytes); return true;
      case Type::boolean: out += std::get<bool>(b) ? "?1" : "?0"; return true;
      case Type::date: {
        const std::int64_t s = std::get<Date>(b).seconds;
        if (s > kMaxInteger || s < -kMaxInteger) return fail(ErrorCode::invalid_date);
        out += '@';
        return integer(s);
      }
      case Type::display_string: return display(std::get<DisplayString>(b).value);
    }
    return fail(ErrorCode::invalid_bare_item);
  }

  bool key(const std::string& k) {
    if (k.empty() || !(ascii::is_lower(k[0]) || k[0] == '*')) return fail(ErrorCode::invalid_key);
    for (char c : k) {
      if (!ascii::is_lower(c) && !is_digit(c) && c != '_' && c != '-' && c != '.' && c != '*') {
        return fail(ErrorCode::invalid_key);
      }
    }
    out += k;
    return true;
  }

  template <class Pairs>
  bool unique_keys(const Pairs& pairs) {
    const std::size_t n = pairs.size();
    bool dup = false;
    if (n <= 16) {
      for (std::size_t i = 0; i < n && !dup; ++i) {
        for (std::size_t j = i + 1; j < n && !dup; ++j) dup = pairs[i].first == pairs[j].first;
      }
    } else {
      std::vector<std::string_view> keys;
      keys.reserve(n);
      for (const auto& kv : pairs) keys.emplace_back(kv.first);
      std::sort(keys.begin(), keys.end());
      dup = std::adjacent_find(keys.begin(), keys.end()) != keys.end();
    }
    return dup ? fail(ErrorCode::invalid_key) : true;
  }

  bool params(const Parameters& ps) {
    if (!unique_keys(ps)) return false;
    for (const auto& [k, v] : ps) {
      out += ';';
      if (!key(k)) return false;
      if (const bool* t = std::get_if<bool>(&v); t != nullptr && *t) continue;
      out += '=';
      if (!bare(v)) return false;
    }
    return true;
  }

  bool item(const Item& i) { return bare(i.bare) && params(i.params); }

  bool inner(const InnerList& l) {
    out += '(';
    for (std::size_t i = 0; i < l.items.size(); ++i) {
      if (i != 0) out += ' ';
      if (!item(l.items[i])) return false;
    }
    out += ')';
    return params(l.params);
  }

  bool member(const ListMember& m) {
    if (const auto* i = std::get_if<Item>(&m)) return item(*i);
    return inner(std::get<InnerList>(m));
  }

  Result<std::string, Error> result(bool ok) {
    if (!ok) return abide::fail(*error);
    return std::move(out);
  }
};

}  // namespace

std::optional<Decimal> Decimal::from_double(double d) noexcept {
  if (!std::isfinite(d) || std::fabs(d) >= 1e15) return std::nullopt;
  // Shortest decimal form "D.DDDDe+XX": digits and a power of ten.
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(d), std::chars_format::scientific);
  if (r.ec != std::errc{}) return std::nullopt;
  std::string_view text(buf, static_cast<std::size_t>(r.ptr - buf));
  const std::size_t e = text.find('e');
  if (e == std::string_view::npos) return std::nullopt;
  int exponent = 0;
  std::from_chars(text.data() + e + 1 + (text[e + 1] == '+' ? 1 : 0), text.data() + text.size(), exponent);
  char digits[40];
  std::size_t n = 0;
  for (std::size_t i = 0; i < e; ++i) {
    if (text[i] != '.') digits[n++] = text[i];
  }
  // value * 1000 = 0.digits * 10^(exponent + 4): the first k digits are whole thousandths.
  const int k = exponent + 4;
  const std::size_t taken = k <= 0 ? 0 : std::min(n, static_cast<std::size_t>(k));
  std::int64_t whole =
      abide::detail::read_decimal<std::int64_t, std::numeric_limits<std::int64_t>::max()>({digits, taken}).value;
  for (int i = static_cast<int>(taken); i < k; ++i) whole *= 10;  // the zeros the shortest form left off
  // Round the remaining digits half to even.
  if (k >= 0 && static_cast<std::size_t>(k) < n) {
    const std::size_t first = static_cast<std::size_t>(k);
    const int next = digits[first] - '0';
    bool rest_nonzero = false;
    for (std::size_t i = first + 1; i < n; ++i) rest_nonzero = rest_nonzero || digits[i] != '0';
    if (next > 5 || (next == 5 && (rest_nonzero || whole % 2 == 1))) ++whole;
  } else if (k < 0) {
    whole = 0;  // below 0.0001: rounds to zero
  }
  return Decimal{d < 0 ? -whole : whole};
}

const BareItem* find(const Parameters& params, std::string_view key) noexcept {
  for (const auto& [k, v] : params) {
    if (k == key) return &v;
  }
  return nullptr;
}

const ListMember* find(const Dictionary& dict, std::string_view key) noexcept {
  for (const auto& [k, v] : dict) {
    if (k == key) return &v;
  }
  return nullptr;
}

void set(Parameters& params, std::string_view key, BareItem value) {
  for (auto& [k, v] : params) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  params.emplace_back(std::string(key), std::move(value));
}

void set(Dictionary& dict, std::string_view key, ListMember value) {
  for (auto& [k, v] : dict) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  dict.emplace_back(std::string(key), std::move(value));
}

BareItem to_bare_item(const BareView& view) {
  switch (view.type) {
    case Type::integer: return view.number;
    case Type::decimal: return Decimal{view.number};
    case Type::string: {
      if (!view.escaped) return std::string(view.raw);
      std::string s;
      append_unescaped_string(view.raw, s);
      return s;
    }
    case Type::token: return Token{std::string(view.raw)};
    case Type::byte_sequence: {
      ByteSequence b;
      append_decoded_byte_sequence(view.raw, b.bytes);
      return b;
    }
    case Type::boolean: return view.number != 0;
    case Type::date: return Date{view.number};
    case Type::display_string: {
      DisplayString s;
      if (view.escaped) {
        append_decoded_display_string(view.raw, s.value);
      } else {
        s.value = std::string(view.raw);
      }
      return s;
    }
  }
  return false;
}

Result<Item, Error> parse_item(std::string_view field, const Limits& limits) {
  Parser p(field, limits);
  auto bare = p.item();
  if (!bare) return fail(p.error());
  Item item{to_bare_item(*bare), {}};
  read_params(p, item.params);
  if (!p.finish()) return fail(p.error());
  return item;
}

Result<List, Error> parse_list(std::string_view field, const Limits& limits) {
  Parser p(field, limits);
  List list;
  while (auto m = p.next_list_member()) {
    auto member = read_member(p, *m);
    if (p.failed()) break;
    if (list.empty()) list.reserve(4);
    list.push_back(std::move(member));
  }
  if (p.failed()) return fail(p.error());
  return list;
}

Result<Dictionary, Error> parse_dictionary(std::string_view field, const Limits& limits) {
  Parser p(field, limits);
  Dictionary dict;
  while (auto m = p.next_dict_member()) {
    auto member = read_member(p, *m);
    if (p.failed()) break;
    if (dict.empty()) dict.reserve(4);
    set(dict, m->key, std::move(member));
  }
  if (p.failed()) return fail(p.error());
  return dict;
}

Result<Item, Error> parse_item(std::span<const std::string_view> lines, const Limits& limits) {
  return with_lines(lines, limits, [&](std::string_view f) { return parse_item(f, limits); });
}

Result<List, Error> parse_list(std::span<const std::string_view> lines, const Limits& limits) {
  return with_lines(lines, limits, [&](std::string_view f) { return parse_list(f, limits); });
}

Result<Dictionary, Error> parse_dictionary(std::span<const std::string_view> lines, const Limits& limits) {
  return with_lines(lines, limits, [&](std::string_view f) { return parse_dictionary(f, limits); });
}

Result<std::string, Error> serialize_bare_item(const BareItem& bare) {
  Writer w;
  return w.result(w.bare(bare));
}

Result<std::string, Error> serialize_item(const Item& item) {
  Writer w;
  return w.result(w.item(item));
}

Result<std::string, Error> serialize_list(const List& list) {
  Writer w;
  bool ok = true;
  for (std::size_t i = 0; i < list.size() && ok; ++i) {
    if (i != 0) w.out += ", ";
    ok = w.member(list[i]);
  }
  return w.result(ok);
}

Result<std::string, Error> serialize_dictionary(const Dictionary& dict) {
  Writer w;
  bool ok = w.unique_keys(dict);
  for (std::size_t i = 0; i < dict.size() && ok; ++i) {
    if (i != 0) w.out += ", ";
    const auto& [k, m] = dict[i];
    ok = w.key(k);
    if (!ok) break;
    const auto* item = std::get_if<Item>(&m);
    if (item != nullptr) {
      if (const bool* t = std::get_if<bool>(&item->bare); t != nullptr && *t) {
        ok = w.params(item->params);
        continue;
      }
    }
    w.out += '=';
    ok = w.member(m);
  }
  return w.result(ok);
}

}  // namespace abide::sf
