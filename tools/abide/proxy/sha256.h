// SHA-256 (FIPS 180-4), for the proxy's quota keys: a credential is kept only
// as a digest prefix, never as itself. Standard library only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace abide::proxy {

using Sha256Digest = std::array<std::uint8_t, 32>;

// The digest of `data`, in one pass (any length, the empty input too).
[[nodiscard]] Sha256Digest sha256(std::string_view data) noexcept;

// Bytes as lower-case hex, two digits each ("ba7816bf...").
[[nodiscard]] std::string to_hex(std::span<const std::uint8_t> bytes);

}  // namespace abide::proxy
