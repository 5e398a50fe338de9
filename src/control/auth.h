// The optional authentication of NPMP-CONTROL by a shared key (--auth-key-file on both
// sides): an HMAC-SHA-256 challenge–response in which both sides prove the key, over fresh
// nonces of both sides on every connection (nothing can be replayed), compared in constant
// time. Without a key nothing of it is on the wire, so reference actives and passives keep
// working with ours. Sequence (before anything else on the control connection):
//   active  → AUTH_HELLO(Na)
//   passive → AUTH_CHALLENGE(Np, HMAC(key, "NPMP passive" | Na | Np))
//   active  → AUTH_RESPONSE(HMAC(key, "NPMP active" | Np | Na))
//   passive → ACKNOWLEDGE(status 0, or 2 if the proof is wrong)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "npmp/messages.h"

namespace npm::control {

using AuthKey = std::vector<std::uint8_t>;

// Reads the key: a regular file that only its owner may read or write, of at least 16
// bytes (a trailing newline is not part of the key).
Result<AuthKey> readAuthKey(const std::string& path);

npmp::AuthBlock newNonce();
npmp::AuthBlock passiveProof(const AuthKey& key, const npmp::AuthBlock& activeNonce,
                             const npmp::AuthBlock& passiveNonce);
npmp::AuthBlock activeProof(const AuthKey& key, const npmp::AuthBlock& passiveNonce,
                            const npmp::AuthBlock& activeNonce);
bool sameProof(const npmp::AuthBlock& a, const npmp::AuthBlock& b);  // constant time

}  // namespace npm::control
