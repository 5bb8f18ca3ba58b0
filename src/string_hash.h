// string_hash.h: the hash of the unordered maps keyed by std::string, which
// also finds a key by std::string_view without making a string of it.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

namespace abide::detail {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

}  // namespace abide::detail
