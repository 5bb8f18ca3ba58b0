// Internal: string concatenation for the library's messages.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace abide::detail {

// Concatenates by appending into one reserved string. Never `literal +
// std::string`: that form trips GCC 12's -Wrestrict false positive at -O3.
inline std::string cat(std::initializer_list<std::string_view> parts) {
  std::size_t n = 0;
  for (std::string_view x : parts) n += x.size();
  std::string out;
  out.reserve(n);
  for (std::string_view x : parts) out.append(x);
  return out;
}

}  // namespace abide::detail
