// Internal: base64 encoding (RFC 4648, section 4: the standard alphabet, with
// padding). Structured-field Byte Sequences, their JSON form in the CLI, and
// HTTP Basic credentials all use it. Standard library only; not installed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace abide::detail {

// Appends the base64 form of `bytes` to `out`.
inline void append_base64(std::string& out, std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto byte = [&](std::size_t k) { return std::uint32_t{static_cast<unsigned char>(bytes[k])}; };
  out.reserve(out.size() + (bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  const std::size_t left = bytes.size() - i;
  if (left == 0) return;
  const std::uint32_t v = (byte(i) << 16) | (left == 2 ? byte(i + 1) << 8 : std::uint32_t{0});
  out += kAlphabet[v >> 18];
  out += kAlphabet[(v >> 12) & 63];
  out += left == 2 ? kAlphabet[(v >> 6) & 63] : '=';
  out += '=';
}

}  // namespace abide::detail
