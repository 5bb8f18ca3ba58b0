// Internal: an index of a HeaderList's field lines by name length, so that
// looking a field up compares only the lines whose names could match. Built
// once per response (one pass, no allocation); lookups then cost a few
// comparisons instead of one per line. Exact for the first 255 lines; lines
// beyond are scanned one by one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "abide/headers.h"
#include "ascii.h"

namespace abide::detail {

class LineIndex {
 public:
  static constexpr std::size_t kIndexed = 255;
  static constexpr std::size_t kBuckets = 64;  // names of 63 bytes and more share the last one
  static constexpr std::uint8_t kNone = 0xFF;

  explicit LineIndex(const HeaderList& headers) noexcept : headers_(headers) {
    head_.fill(kNone);
    const auto& lines = headers.lines();
    const std::size_t n = lines.size() < kIndexed ? lines.size() : kIndexed;
    for (std::size_t i = n; i-- > 0;) {  // backwards: chains come out in line order
      const std::size_t b = bucket(lines[i].name.size());
      next_[i] = head_[b];
      head_[b] = static_cast<std::uint8_t>(i);
    }
  }

  const HeaderList& headers() const noexcept { return headers_; }

  // Calls f(index, header) for every line named `name` (any case), in order;
  // stops early when f returns false.
  template <class F>
  void for_each(std::string_view name, F&& f) const {
    const auto& lines = headers_.lines();
    for (std::uint8_t i = head_[bucket(name.size())]; i != kNone; i = next_[i]) {
      if (ascii::iequals(lines[i].name, name) && !f(std::size_t{i}, lines[i])) return;
    }
    for (std::size_t i = kIndexed; i < lines.size(); ++i) {
      if (ascii::iequals(lines[i].name, name) && !f(i, lines[i])) return;
    }
  }

  // The first line named `name`, or nullptr.
  const Header* first(std::string_view name) const noexcept {
    const Header* found = nullptr;
    for_each(name, [&](std::size_t, const Header& h) {
      found = &h;
      return false;
    });
    return found;
  }

 private:
  static std::size_t bucket(std::size_t size) noexcept { return size < kBuckets ? size : kBuckets - 1; }

  const HeaderList& headers_;
  std::array<std::uint8_t, kBuckets> head_;  // filled by the constructor
  std::array<std::uint8_t, kIndexed> next_;  // only entries of indexed lines are ever read
};

}  // namespace abide::detail
