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
  Random();  // seeded from the system's entropy
  explicit Random(std::uint64_t seed) : engine_(seed) {}
  // Seeded with `seed`, or from the system's entropy when it is 0 (no seed).
  static Random seededOrEntropy(std::uint64_t seed) { return seed != 0 ? Random(seed) : Random(); }
  std::uint64_t next64() { return engine_(); }
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }              // [0,1)
  double uniformOpen() { return (static_cast<double>(engine_() >> 11) + 0.5) * 0x1.0p-53; }  // (0,1)
  double normal();

private:
  std::mt19937_64 engine_;
  double spare_ = 0.0;
  bool hasSpare_ = false;
};

// -seed: a run's seed N makes every random choice of the run repeat. Each use of randomness on
// each side of each flow draws from its own generator, seeded from (N, side, flow, stream, use),
// so that one flow's draws do not depend on how many another flow made, nor on the order in
// which the threads ran. Run seeds are below 2^53, so that every JSON reader holds them exactly.
constexpr std::uint64_t kMaxRunSeed = (std::uint64_t{1} << 53) - 1;
enum class Side : std::uint8_t { Active = 1, Passive = 2 };
enum class SeedUse : std::uint8_t {
  Traffic = 1,   // frame rates, frame sizes, on/off times (measure::FlowSender)
  Messages = 2,  // SCTP's per-message ordered/reliable choice (sctp::StreamPolicy)
};
// The seed of one use; never 0 (which means "no seed"). `runSeed` must not be 0.
std::uint64_t deriveSeed(std::uint64_t runSeed, Side side, std::uint32_t flowId, std::uint16_t streamId, SeedUse use);
// The same for a run that may have no seed: 0 (draw from entropy) when `runSeed` is 0.
inline std::uint64_t flowSeed(std::uint64_t runSeed, Side side, std::uint32_t flowId, std::uint16_t streamId,
                              SeedUse use) {
  return runSeed == 0 ? 0 : deriveSeed(runSeed, side, flowId, streamId, use);
}
// A run seed from the system's entropy, 1..kMaxRunSeed: recorded, it repeats the run.
std::uint64_t entropyRunSeed();

// Draws one value of the distribution.
double sample(const npmp::RandomSpec& spec, Random& random);
// Expected value (for reporting and tests); NaN where undefined (pareto shape ≤ 1).
double expectedValue(const npmp::RandomSpec& spec);

}  // namespace npm::flowspec
