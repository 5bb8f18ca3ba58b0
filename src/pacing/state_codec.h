// pacing/state_codec.h: a key's pacing state as bytes, for stores that keep it
// outside the process (the file store).
//
// A versioned little-endian layout of every field of pacing::KeyState. decode
// checks everything it reads: a truncated, over-long or unknown-version blob,
// or a value out of its range, is an error that says which, never a state
// that would let a send go early.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "abide/result.h"
#include "pacing/kernel.h"

namespace abide::pacing {

// The layout's version, the first byte of every blob: 3, times in whole
// microseconds, with units. decode also reads 2 (no units: every policy
// counted requests) and 1 (that layout in nanoseconds).
inline constexpr std::uint8_t kStateFormat = 3;

// The state as bytes.
std::string encode(const KeyState& s);

// The state from encode()'s bytes; an error names what is wrong.
Result<KeyState, std::string> decode(std::string_view bytes);

}  // namespace abide::pacing
