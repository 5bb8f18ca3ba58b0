// Internal: the decimal number reader every parser in the library uses.
//
// Numbers arrive from servers and users, and each parser once had its own
// "v * 10 + d" loop that had to get overflow, digit limits and "no digits at
// all" right by itself. Here each caller states the largest value it wants
// and at most how many digits it reads, and learns what it got: the value
// (never above that largest value), how many bytes were digits, and whether
// they named more. What overflow means stays the caller's: a saturating caller
// uses `value`, a rejecting one checks `over`. No digits is `digits == 0`,
// never a 0 to act on ("send now"). Standard library only; not installed.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "always_inline.h"

namespace abide::detail {

// No limit on how many digits are read.
inline constexpr std::size_t kAnyDigits = static_cast<std::size_t>(-1);

// What read_decimal found at the start of a text.
template <class T>
struct DecimalRead {
  T value{};               // the number; max when the digits name more (saturated)
  std::size_t digits = 0;  // how many bytes were read, all digits; 0: no number at all
  bool over = false;       // the digits name a number above max
};

namespace decimal_detail {

// True when no run of max_digits digits can name more than max: the reader
// then needs no overflow check (a date's 2 digits, a structured field's 15).
template <class T>
consteval bool never_over(T max, std::size_t max_digits) {
  unsigned long long nines = 0;
  for (std::size_t k = 0; k < max_digits; ++k) {
    if (nines > (static_cast<unsigned long long>(-1) - 9) / 10) return false;
    nines = nines * 10 + 9;
    if (nines > static_cast<unsigned long long>(max)) return false;
  }
  return true;
}

template <bool kCheck, class T>
ABIDE_ALWAYS_INLINE constexpr DecimalRead<T> read(std::string_view s, T max, std::size_t max_digits) noexcept {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  const std::size_t n = s.size() < max_digits ? s.size() : max_digits;
  // value * 10 + d <= max exactly when value < cut, or value == cut and d <= last.
  const T cut = static_cast<T>(max / 10);
  const auto last = static_cast<unsigned>(max % 10);
  DecimalRead<T> r;
  std::size_t i = 0;
  for (; i < n; ++i) {
    const unsigned d = static_cast<unsigned>(static_cast<unsigned char>(s[i])) - unsigned{'0'};
    if (d > 9) break;
    if (!kCheck || r.value < cut || (r.value == cut && d <= last)) [[likely]] {
      r.value = static_cast<T>(r.value * 10 + static_cast<T>(d));
    } else {
      // Once above max it stays there (max >= cut, and max > cut unless max is 0).
      r.value = max;
      r.over = true;
    }
  }
  r.digits = i;
  return r;
}

}  // namespace decimal_detail

// The run of ASCII digits at the start of `s`, at most MaxDigits of them; it
// stops at the first other byte. T is an integer type and Max >= 0. Leading
// zeros are digits like any other; every digit is read however large the
// number gets, so `digits` always says where the run ends (or where MaxDigits
// cut it). The limits are template arguments so that a reader whose digits
// can never exceed Max compiles to the bare loop.
template <class T, T Max, std::size_t MaxDigits = kAnyDigits>
[[nodiscard]] ABIDE_ALWAYS_INLINE constexpr DecimalRead<T> read_decimal(std::string_view s) noexcept {
  static_assert(std::cmp_greater_equal(Max, 0));
  return decimal_detail::read<!decimal_detail::never_over(Max, MaxDigits)>(s, Max, MaxDigits);
}

// The same reading with limits known only at run time (the overflow check is
// always on).
template <class T>
[[nodiscard]] ABIDE_ALWAYS_INLINE constexpr DecimalRead<T> read_decimal(std::string_view s, T max,
                                                                        std::size_t max_digits = kAnyDigits) noexcept {
  return decimal_detail::read<true>(s, max, max_digits);
}

// The whole of `s` as a number from 0 to Max: nullopt when it is empty, holds
// anything but digits, or names more than Max (an overflow is an error here).
template <class T, T Max>
[[nodiscard]] ABIDE_ALWAYS_INLINE constexpr std::optional<T> parse_decimal(std::string_view s) noexcept {
  const DecimalRead<T> r = read_decimal<T, Max>(s);
  if (r.digits == 0 || r.digits != s.size() || r.over) return std::nullopt;
  return r.value;
}

}  // namespace abide::detail
