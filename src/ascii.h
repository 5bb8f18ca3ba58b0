// Internal: ASCII character classes and comparisons for parsing header bytes.
//
// HTTP field syntax is defined over octets, not the C locale: <cctype> answers
// by locale and is undefined for negative char values, so every parser in the
// library uses these instead. All of them are constexpr, noexcept and total
// (any char value, bytes >= 0x80 included, is simply "not in the class").
// Standard library only; not installed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace abide::ascii {

// DIGIT (RFC 5234): 0-9.
constexpr bool is_digit(char c) noexcept { return static_cast<unsigned char>(c - '0') < 10; }

// ALPHA (RFC 5234): A-Z / a-z.
constexpr bool is_alpha(char c) noexcept { return static_cast<unsigned char>((c | 0x20) - 'a') < 26; }

// lcalpha (RFC 9651): a-z.
constexpr bool is_lower(char c) noexcept { return static_cast<unsigned char>(c - 'a') < 26; }

// OWS characters (RFC 9110 5.6.3): SP / HTAB.
constexpr bool is_ows(char c) noexcept { return c == ' ' || c == '\t'; }

namespace detail {

constexpr std::array<bool, 256> make_tchar_table() noexcept {
  std::array<bool, 256> t{};
  for (unsigned c = 0; c < 256; ++c) {
    const char ch = static_cast<char>(c);
    t[c] = is_digit(ch) || is_alpha(ch);
  }
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}

inline constexpr std::array<bool, 256> kTchar = make_tchar_table();

}  // namespace detail

// tchar (RFC 9110 5.6.2): the characters of a token, e.g. a field name.
constexpr bool is_tchar(char c) noexcept { return detail::kTchar[static_cast<unsigned char>(c)]; }

// A-Z to a-z; every other byte unchanged.
constexpr char to_lower(char c) noexcept {
  return static_cast<unsigned char>(c - 'A') < 26 ? static_cast<char>(c | 0x20) : c;
}

// v without leading and trailing OWS.
constexpr std::string_view trim_ows(std::string_view v) noexcept {
  while (!v.empty() && is_ows(v.front())) v.remove_prefix(1);
  while (!v.empty() && is_ows(v.back())) v.remove_suffix(1);
  return v;
}

// True when a and b are equal ignoring ASCII case (only A-Z and a-z fold;
// bytes >= 0x80 compare exactly). At run time it compares eight bytes at a
// time: lookups run it for every field line they pass.
#if defined(__GNUC__)
[[gnu::always_inline]]
#endif
constexpr bool
iequals(std::string_view a, std::string_view b) noexcept {
  const std::size_t n = a.size();
  if (n != b.size()) return false;
  // Case differs only in bit 0x20, and only for letters.
  const auto same = [](char x, char y) { return x == y || (is_alpha(x) && (x ^ y) == 0x20); };
  std::size_t i = 0;
  if (!std::is_constant_evaluated()) {
    for (; i + 8 <= n; i += 8) {
      std::uint64_t x;
      std::uint64_t y;
      std::memcpy(&x, a.data() + i, 8);
      std::memcpy(&y, b.data() + i, 8);
      const std::uint64_t d = x ^ y;
      if (d == 0) continue;
      if ((d & ~std::uint64_t{0x2020202020202020}) != 0) return false;
      for (std::size_t k = i; k < i + 8; ++k) {
        if (!same(a[k], b[k])) return false;
      }
    }
  }
  for (; i < n; ++i) {
    if (!same(a[i], b[i])) return false;
  }
  return true;
}

// True when s begins with prefix, ignoring ASCII case.
constexpr bool istarts_with(std::string_view s, std::string_view prefix) noexcept {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

}  // namespace abide::ascii
