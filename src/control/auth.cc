#include "common/handle.h"
#include "control/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "common/hmac.h"

namespace npm::control {

namespace {

npmp::AuthBlock proof(const AuthKey& key, std::string_view label, const npmp::AuthBlock& first,
                      const npmp::AuthBlock& second) {
  std::vector<std::uint8_t> message(label.begin(), label.end());
  message.insert(message.end(), first.begin(), first.end());
  message.insert(message.end(), second.begin(), second.end());
  const Digest d = hmacSha256(key, message);
  npmp::AuthBlock b;
  std::copy(d.begin(), d.end(), b.begin());
  return b;
}

}  // namespace

Result<AuthKey> readAuthKey(const std::string& path) {
  auto fail = [&](const std::string& why) { return Failure{"--auth-key-file=" + path + ": " + why}; };
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return fail(std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return fail("not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return fail(std::string("its permissions ") + mode + " let others read or change the key (chmod 600 it)");
  }
  AuthKey key;
  std::uint8_t buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(std::strerror(errno));
    if (n == 0) break;
    key.insert(key.end(), buffer, buffer + n);
    if (key.size() > 65536) return fail("longer than 64 KiB; a key of 32 random bytes is plenty");
  }
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  if (key.size() < 16) return fail("a key needs at least 16 bytes (e.g. head -c 32 /dev/urandom | base64)");
  return key;
}

npmp::AuthBlock newNonce() {
  npmp::AuthBlock n;
  randomBytes(n);
  return n;
}

npmp::AuthBlock passiveProof(const AuthKey& key, const npmp::AuthBlock& activeNonce,
                             const npmp::AuthBlock& passiveNonce) {
  return proof(key, "NPMP passive", activeNonce, passiveNonce);
}

npmp::AuthBlock activeProof(const AuthKey& key, const npmp::AuthBlock& passiveNonce,
                            const npmp::AuthBlock& activeNonce) {
  return proof(key, "NPMP active", passiveNonce, activeNonce);
}

bool sameProof(const npmp::AuthBlock& a, const npmp::AuthBlock& b) { return constantTimeEqual(a, b); }

}  // namespace npm::control
