// utf8.h: UTF-8 validation byte by byte (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), for a whole string or for bytes that
// arrive decoded one at a time (a Display String's %XX escapes).
#pragma once

#include <string_view>

namespace abide::detail {

class Utf8Validator {
 public:
  // Takes the next byte; false when the bytes so far cannot begin UTF-8.
  constexpr bool feed(unsigned char b) noexcept {
    if (need_ != 0) {
      if (b < lo_ || b > hi_) return false;
      --need_;
      lo_ = 0x80;
      hi_ = 0xBF;
      return true;
    }
    if (b < 0x80) return true;
    // The lead byte: how many continuation bytes follow, and the range of the
    // first one (narrowed where it would make an overlong form, a surrogate
    // or a code point past U+10FFFF).
    if (b >= 0xC2 && b <= 0xDF) {
      need_ = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      need_ = 2;
      if (b == 0xE0) lo_ = 0xA0;
      if (b == 0xED) hi_ = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      need_ = 3;
      if (b == 0xF0) lo_ = 0x90;
      if (b == 0xF4) hi_ = 0x8F;
    } else {
      return false;
    }
    return true;
  }
  // True when no character is left open.
  constexpr bool complete() const noexcept { return need_ == 0; }

 private:
  int need_ = 0;
  unsigned lo_ = 0x80;
  unsigned hi_ = 0xBF;
};

// True when `s` is UTF-8 as a whole.
constexpr bool valid_utf8(std::string_view s) noexcept {
  Utf8Validator v;
  for (const char c : s) {
    if (!v.feed(static_cast<unsigned char>(c))) return false;
  }
  return v.complete();
}

}  // namespace abide::detail
