// Random distributions of FLOWSPEC: frame rates, frame sizes and on/off times.
#pragma once

#include <cstdint>
#include <random>

#include "npmp/messages.h"

namespace npm::flowspec {

enum class Rng : std::uint8_t {
  Constant = 0,
  Uniform = 1,
  Exponential = 2,
  Pareto = 3,
  Normal = 4,
  TruncNormal = 5,
};

// Name in a FLOWSPEC ("const", "exp", ...) and in the config file ("constant", "exponential", ...).
const char* specName(std::uint8_t rng);
const char* configName(std::uint8_t rng);
// Number of parameters the distribution takes (1 or 2).
int parameterCount(std::uint8_t rng);

class Random {
public:
  Random();                                   // seeded from the system's entropy
  explicit Random(std::uint64_t seed) : engine_(seed) {}
  std::uint64_t next64() { return engine_(); }
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }         // [0,1)
  double uniformOpen() { return (static_cast<double>(engine_() >> 11) + 0.5) * 0x1.0p-53; }  // (0,1)
  double normal();

private:
  std::mt19937_64 engine_;
  double spare_ = 0.0;
  bool hasSpare_ = false;
};

// Draws one value of the distribution.
double sample(const npmp::RandomSpec& spec, Random& random);
// Expected value (for reporting and tests); NaN where undefined (pareto shape ≤ 1).
double expectedValue(const npmp::RandomSpec& spec);

}  // namespace npm::flowspec
