#include "flowspec/random.h"

#include <cmath>
#include <limits>

namespace npm::flowspec {

const char* specName(std::uint8_t rng) {
  switch (static_cast<Rng>(rng)) {
    case Rng::Constant: return "const";
    case Rng::Uniform: return "uniform";
    case Rng::Exponential: return "exp";
    case Rng::Pareto: return "pareto";
    case Rng::Normal: return "normal";
    case Rng::TruncNormal: return "truncnormal";
  }
  return "unknown";
}

const char* configName(std::uint8_t rng) {
  switch (static_cast<Rng>(rng)) {
    case Rng::Constant: return "constant";
    case Rng::Uniform: return "uniform";
    case Rng::Exponential: return "exponential";
    case Rng::Pareto: return "pareto";
    case Rng::Normal: return "normal";
    case Rng::TruncNormal: return "truncnormal";
  }
  return "unknown";
}

int parameterCount(std::uint8_t rng) {
  switch (static_cast<Rng>(rng)) {
    case Rng::Constant:
    case Rng::Exponential: return 1;
    default: return 2;
  }
}

namespace {

// One entropy-seeded source per thread hands every Random its seed: a std::random_device and
// a seed_seq per generator cost more than all else of setting up a flow with thousands of flows.
std::uint64_t nextSeed() {
  thread_local std::mt19937_64 seeds = [] {
    std::random_device device;
    std::seed_seq seq{device(), device(), device(), device(), device(), device(), device(), device()};
    return std::mt19937_64(seq);
  }();
  return seeds();
}

// SplitMix64's finaliser: a bijection of 64-bit words that spreads every input bit over all
// output bits, so that neighbouring keys (flow 1 and 2) give unrelated seeds.
std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

Random::Random() : engine_(nextSeed()) {}

std::uint64_t deriveSeed(std::uint64_t runSeed, Side side, std::uint32_t flowId, std::uint16_t streamId, SeedUse use) {
  const std::uint64_t key = std::uint64_t{flowId} << 32 | std::uint64_t{streamId} << 16 |
                            std::uint64_t{static_cast<std::uint8_t>(side)} << 8 | static_cast<std::uint8_t>(use);
  const std::uint64_t seed = mix(mix(runSeed) ^ key);
  return seed != 0 ? seed : 1;
}

std::uint64_t entropyRunSeed() {
  std::uint64_t seed = 0;
  while (seed == 0) seed = nextSeed() & kMaxRunSeed;
  return seed;
}

double Random::normal() {
  // Marsaglia's polar form of Box–Muller; keeps the second value for the next call.
  if (hasSpare_) {
    hasSpare_ = false;
    return spare_;
  }
  double u, v, s;
  do {
    u = 2.0 * uniform() - 1.0;
    v = 2.0 * uniform() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  const double factor = std::sqrt(-2.0 * std::log(s) / s);
  spare_ = v * factor;
  hasSpare_ = true;
  return u * factor;
}

double sample(const npmp::RandomSpec& spec, Random& random) {
  const auto& p = spec.values;
  switch (static_cast<Rng>(spec.rng)) {
    case Rng::Constant: return p[0];
    case Rng::Uniform: return p[0] + random.uniform() * (p[1] - p[0]);
    case Rng::Exponential: return -p[0] * std::log1p(-random.uniform());
    case Rng::Pareto: return p[0] / std::pow(random.uniformOpen(), 1.0 / p[1]);
    case Rng::Normal: return p[0] + p[1] * random.normal();
    case Rng::TruncNormal:
      // Redraw until non-negative; bounded, for a mean far below zero.
      for (int attempt = 0; attempt < 1000; ++attempt) {
        const double x = p[0] + p[1] * random.normal();
        if (x >= 0.0) return x;
      }
      return 0.0;
  }
  return 0.0;
}

double expectedValue(const npmp::RandomSpec& spec) {
  const auto& p = spec.values;
  switch (static_cast<Rng>(spec.rng)) {
    case Rng::Constant: return p[0];
    case Rng::Uniform: return (p[0] + p[1]) / 2.0;
    case Rng::Exponential: return p[0];
    case Rng::Pareto: return p[1] > 1.0 ? p[1] * p[0] / (p[1] - 1.0) : std::numeric_limits<double>::quiet_NaN();
    case Rng::Normal: return p[0];
    case Rng::TruncNormal: {
      if (p[1] <= 0.0) return std::max(p[0], 0.0);
      const double alpha = -p[0] / p[1];
      const double phi = std::exp(-alpha * alpha / 2.0) / std::sqrt(2.0 * M_PI);
      const double tail = 0.5 * std::erfc(alpha / std::sqrt(2.0));
      return p[0] + p[1] * phi / tail;
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace npm::flowspec
