// The fuzz targets of fuzz_targets.cc, by index: the first byte of an input of the combined
// entry point picks one (modulo their number); a binary built with NPM_FUZZ_ONLY=index gives
// the whole input to that one. The corpus of a target is tests/fuzz/corpus/<its name>/.
#pragma once

#include <cstddef>

namespace npm::fuzz {

inline constexpr const char* kTargetNames[] = {"npmp",   "flowspec", "scalar", "vector", "json",
                                               "config", "table",    "quic",   "cli"};
inline constexpr std::size_t kTargetCount = sizeof(kTargetNames) / sizeof(kTargetNames[0]);

}  // namespace npm::fuzz
