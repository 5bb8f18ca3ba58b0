// libFuzzer target for the decimal number reader (src/decimal.h). The first
// bytes choose the largest value and the digit limit, the rest is the text.
// Invariants beyond "never crash": the value equals a reference read in
// 128 bits (capped far above any 64-bit max) and saturated at max; `over`
// says exactly whether the number is above max; the value is never above
// max; `digits` covers exactly the leading run of digits (cut at the limit);
// no digits is never a number; parse_decimal accepts exactly a whole run of
// digits within max. Checked for several integer types, with limits from the
// input and with the limits the library's callers use.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>
#include <type_traits>

#include "decimal.h"

namespace {

using abide::detail::parse_decimal;
using abide::detail::read_decimal;
using u128 = unsigned __int128;

void check(bool ok) {
  if (!ok) std::abort();
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The reference: every digit of the run, in 128 bits, capped at 2^100 (above
// every max below, so a capped value is above max too).
struct Reference {
  u128 value = 0;
  std::size_t digits = 0;
};

Reference reference(std::string_view s, std::size_t max_digits) {
  constexpr u128 kCap = u128{1} << 100;
  Reference r;
  while (r.digits < s.size() && r.digits < max_digits && is_digit(s[r.digits])) {
    r.value = r.value * 10 + static_cast<u128>(s[r.digits] - '0');
    if (r.value > kCap) r.value = kCap;
    ++r.digits;
  }
  return r;
}

// What a reading of `text` with these limits must be.
template <class T>
void verify(const abide::detail::DecimalRead<T>& got, std::string_view text, T max, std::size_t max_digits) {
  const Reference want = reference(text, max_digits);
  check(got.digits == want.digits);
  check(got.digits <= text.size() && got.digits <= max_digits);
  for (std::size_t i = 0; i < got.digits; ++i) check(is_digit(text[i]));
  // The run ends at a non-digit, at the end of the text, or at the limit.
  check(got.digits == text.size() || got.digits == max_digits || !is_digit(text[got.digits]));

  if constexpr (std::is_signed_v<T>) check(got.value >= 0);
  check(got.value <= max);
  check(got.over == (want.value > static_cast<u128>(max)));
  check(static_cast<u128>(got.value) == (got.over ? static_cast<u128>(max) : want.value));
  // No digits: no number, and nothing over.
  if (got.digits == 0) check(got.value == 0 && !got.over);
}

// Limits at run time, from the input.
template <class T>
void check_type(std::string_view text, std::uint64_t max_bits, std::size_t max_digits) {
  const auto top = static_cast<std::uint64_t>(std::numeric_limits<T>::max());
  const T max = static_cast<T>(max_bits % (top == std::numeric_limits<std::uint64_t>::max() ? top : top + 1));
  verify(read_decimal<T>(text, max, max_digits), text, max, max_digits);
}

// Limits as template arguments, as the library's callers give them (the
// overflow check compiled out where it cannot fire); and parse_decimal, which
// takes exactly a whole run of digits within Max.
template <class T, T Max, std::size_t MaxDigits>
void check_fixed(std::string_view text) {
  verify(read_decimal<T, Max, MaxDigits>(text), text, Max, MaxDigits);
  const auto whole = parse_decimal<T, Max>(text);
  const Reference all = reference(text, text.size());
  const bool want_whole = !text.empty() && all.digits == text.size() && all.value <= static_cast<u128>(Max);
  check(whole.has_value() == want_whole);
  if (whole) check(static_cast<u128>(*whole) == all.value);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // 8 bytes of max, 1 byte of digit limit (255: none), then the text.
  if (size < 9) return 0;
  std::uint64_t max_bits = 0;
  std::memcpy(&max_bits, data, sizeof max_bits);
  const std::size_t max_digits = data[8] == 255 ? abide::detail::kAnyDigits : data[8];
  const std::string_view text(reinterpret_cast<const char*>(data + 9), size - 9);

  check_type<std::uint64_t>(text, max_bits, max_digits);
  check_type<std::int64_t>(text, max_bits, max_digits);
  check_type<unsigned>(text, max_bits, max_digits);
  check_type<int>(text, max_bits, max_digits);
  check_type<std::uint8_t>(text, max_bits, max_digits);
  check_type<std::uint64_t>(text, std::numeric_limits<std::uint64_t>::max(), max_digits);
  // The limits the library's callers use.
  check_fixed<unsigned, std::numeric_limits<unsigned>::max(), 1>(text);
  check_fixed<unsigned, std::numeric_limits<unsigned>::max(), 2>(text);
  check_fixed<unsigned, std::numeric_limits<unsigned>::max(), 5>(text);
  check_fixed<unsigned, 99, 2>(text);
  check_fixed<int, 999, 3>(text);
  check_fixed<unsigned, 65535, abide::detail::kAnyDigits>(text);
  check_fixed<std::int64_t, 999, 3>(text);
  check_fixed<std::int64_t, 999'999'999'999'999, 15>(text);
  check_fixed<std::int64_t, std::numeric_limits<std::int64_t>::max(), 18>(text);
  check_fixed<std::int64_t, 1'000'000'000'000, abide::detail::kAnyDigits>(text);
  check_fixed<std::int64_t, 2'678'401, abide::detail::kAnyDigits>(text);
  check_fixed<std::uint64_t, 9'223'372'036, abide::detail::kAnyDigits>(text);
  check_fixed<std::uint64_t, std::numeric_limits<std::int64_t>::max(), abide::detail::kAnyDigits>(text);
  check_fixed<std::uint64_t, std::numeric_limits<std::uint64_t>::max(), 18>(text);
  check_fixed<std::uint64_t, std::numeric_limits<std::uint64_t>::max(), abide::detail::kAnyDigits>(text);
  check_fixed<std::uint64_t, 0, abide::detail::kAnyDigits>(text);
  return 0;
}
