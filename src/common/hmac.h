// SHA-256 and HMAC-SHA-256, for the optional authentication of NPMP-CONTROL, and a
// constant-time comparison — all three from OpenSSL's libcrypto; random bytes from the kernel.
// Pure except randomBytes().
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace npm {

using Digest = std::array<std::uint8_t, 32>;

Digest sha256(std::span<const std::uint8_t> data);
Digest hmacSha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> message);
// Equal contents, in time that does not depend on where they differ (the lengths are not secret).
bool constantTimeEqual(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b);
// Fills `out` from getrandom(); throws std::runtime_error if the kernel has none.
void randomBytes(std::span<std::uint8_t> out);

}  // namespace npm
