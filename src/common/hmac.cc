#include "common/hmac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace npm {

namespace {

// libcrypto fails only where it cannot work at all (no memory, no SHA-256 provider): the
// authentication cannot go on without it, so that is an exception, not a wrong digest.
[[noreturn]] void libcryptoFailed(const char* what) {
  throw std::runtime_error(std::string("OpenSSL libcrypto: ") + what + " failed");
}

}  // namespace

Digest sha256(std::span<const std::uint8_t> data) {
  Digest d{};
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), d.data(), &length, EVP_sha256(), nullptr) != 1 || length != d.size())
    libcryptoFailed("SHA-256");
  return d;
}

Digest hmacSha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> message) {
  // A key longer than SHA-256's block is replaced by its digest (RFC 2104, as HMAC() itself
  // does), which keeps its length within HMAC()'s int; HMAC() wants a non-null key pointer.
  constexpr std::size_t kBlock = 64;
  const Digest hashedKey = key.size() > kBlock ? sha256(key) : Digest{};
  if (key.size() > kBlock) key = hashedKey;
  static const std::uint8_t kNoKey = 0;
  Digest d{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key.empty() ? &kNoKey : key.data(), static_cast<int>(key.size()), message.data(),
           message.size(), d.data(), &length) == nullptr ||
      length != d.size())
    libcryptoFailed("HMAC-SHA-256");
  return d;
}

bool constantTimeEqual(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
  return a.size() == b.size() && (a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0);
}

void randomBytes(std::span<std::uint8_t> out) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("no random numbers from the kernel: ") + std::strerror(errno));
    }
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace npm
