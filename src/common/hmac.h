// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for the optional authentication of
// NPMP-CONTROL; a constant-time comparison; random bytes from the kernel. Pure except
// randomBytes().
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace npm {

using Digest = std::array<std::uint8_t, 32>;

class Sha256 {
public:
  Sha256();
  void update(std::span<const std::uint8_t> data);
  Digest finish();

private:
  void block(const std::uint8_t* p);
  std::array<std::uint32_t, 8> h_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t used_ = 0;
  std::uint64_t length_ = 0;  // bytes
};

Digest sha256(std::span<const std::uint8_t> data);
Digest hmacSha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> message);
// Equal contents, in time that does not depend on where they differ.
bool constantTimeEqual(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b);
// Fills `out` from getrandom(); throws std::runtime_error if the kernel has none.
void randomBytes(std::span<std::uint8_t> out);

}  // namespace npm
