// Each distribution's sample mean and variance against theory, with a fixed seed.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "flowspec/random.h"

using namespace npm::flowspec;
using npm::npmp::RandomSpec;

namespace {
struct Moments {
  double mean, variance;
};
Moments sampleMoments(const RandomSpec& spec, int n = 400000) {
  Random random(20261121);
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double x = sample(spec, random);
    sum += x;
    sum2 += x * x;
  }
  const double mean = sum / n;
  return {mean, sum2 / n - mean * mean};
}
}  // namespace

TEST_CASE("const") {
  auto m = sampleMoments(RandomSpec{0, {42.0, 0, 0, 0}}, 1000);
  CHECK(m.mean == 42.0);
  CHECK(m.variance == Approx(0.0).margin(1e-9));
}

TEST_CASE("uniform a,b: mean (a+b)/2, variance (b-a)^2/12") {
  auto m = sampleMoments(RandomSpec{1, {100, 200, 0, 0}});
  CHECK(m.mean == Approx(150).epsilon(0.005));
  CHECK(m.variance == Approx(10000.0 / 12).epsilon(0.02));
}

TEST_CASE("exp mean: mean m, variance m^2") {
  auto m = sampleMoments(RandomSpec{2, {5, 0, 0, 0}});
  CHECK(m.mean == Approx(5).epsilon(0.01));
  CHECK(m.variance == Approx(25).epsilon(0.03));
}

TEST_CASE("pareto location,shape: mean shape*x/(shape-1), variance x^2 shape/((shape-1)^2 (shape-2))") {
  // shape 5 keeps the fourth moment finite, so the sample variance converges.
  auto m = sampleMoments(RandomSpec{3, {2, 5, 0, 0}}, 2000000);
  CHECK(m.mean == Approx(2.5).epsilon(0.005));
  CHECK(m.variance == Approx(4.0 * 5 / (16.0 * 3)).epsilon(0.05));
  CHECK(expectedValue(RandomSpec{3, {2, 5, 0, 0}}) == Approx(2.5));
}

TEST_CASE("normal mean,stddev") {
  auto m = sampleMoments(RandomSpec{4, {10, 3, 0, 0}});
  CHECK(m.mean == Approx(10).epsilon(0.005));
  CHECK(m.variance == Approx(9).epsilon(0.02));
}

TEST_CASE("truncnormal: the normal conditioned on x >= 0") {
  // mean 1, stddev 2: alpha = -0.5
  const double alpha = -0.5;
  const double phi = std::exp(-alpha * alpha / 2) / std::sqrt(2 * M_PI);
  const double tail = 0.5 * std::erfc(alpha / std::sqrt(2.0));
  const double lambda = phi / tail;
  const double mean = 1 + 2 * lambda;
  const double variance = 4 * (1 + alpha * lambda - lambda * lambda);
  auto m = sampleMoments(RandomSpec{5, {1, 2, 0, 0}});
  CHECK(m.mean == Approx(mean).epsilon(0.01));
  CHECK(m.variance == Approx(variance).epsilon(0.03));
  CHECK(expectedValue(RandomSpec{5, {1, 2, 0, 0}}) == Approx(mean));
}

TEST_CASE("distribution names for FLOWSPEC and config files") {
  CHECK(std::string(specName(2)) == "exp");
  CHECK(std::string(configName(2)) == "exponential");
  CHECK(std::string(configName(4)) == "normal");  // the reference wrote "(invalid!)"
  CHECK(std::string(configName(5)) == "truncnormal");
}

TEST_CASE("option -seed: derived seeds repeat, differ per side, flow, stream and use, and are never 0") {
  std::set<std::uint64_t> seen;
  for (std::uint64_t run : {std::uint64_t{1}, std::uint64_t{2}, kMaxRunSeed}) {
    for (Side side : {Side::Active, Side::Passive}) {
      for (std::uint32_t flow : {0U, 1U, 0xFFFFFFFFU}) {
        for (std::uint16_t stream : {std::uint16_t{0}, std::uint16_t{1}}) {
          for (SeedUse use : {SeedUse::Traffic, SeedUse::Messages}) {
            const std::uint64_t s = deriveSeed(run, side, flow, stream, use);
            CHECK(s != 0);
            CHECK(s == deriveSeed(run, side, flow, stream, use));
            seen.insert(s);
          }
        }
      }
    }
  }
  CHECK(seen.size() == 3 * 2 * 3 * 2 * 2);
  // The same seed draws the same values; 0 draws from entropy.
  auto a = Random::seededOrEntropy(42), b = Random::seededOrEntropy(42);
  const RandomSpec exp{static_cast<std::uint8_t>(Rng::Exponential), {5.0, 0, 0, 0}};
  for (int i = 0; i < 1000; ++i) REQUIRE(sample(exp, a) == sample(exp, b));
  auto c = Random::seededOrEntropy(0), d = Random::seededOrEntropy(0);
  CHECK(c.next64() != d.next64());
  // Run seeds drawn from entropy are in 1..2^53-1 (exact in every JSON reader).
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t run = entropyRunSeed();
    REQUIRE(run >= 1);
    REQUIRE(run <= kMaxRunSeed);
  }
}
