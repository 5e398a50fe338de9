// Deterministic mutation driver for fuzz_targets.cc (no libFuzzer needed): valid seeds of
// every NPMP message type and of FLOWSPEC strings, mutated by bit flips, truncation,
// extension, length-field rewrites and splices, plus pure random inputs.
//   npm_fuzz_smoke [iterations]
//   npm_fuzz_smoke --seeds DIR   writes the seeds as libFuzzer corpora: DIR/npmp, DIR/flowspec
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "npmp/messages.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using Input = std::vector<std::uint8_t>;

std::vector<Input> seeds() {
  using namespace npm::npmp;
  std::vector<Input> s;
  auto add = [&](const Bytes& b) {
    Input i{0};
    i.insert(i.end(), b.begin(), b.end());
    s.push_back(i);
  };
  Bytes b;
  encode(Acknowledge{1, 2, 3, 0}, b);
  add(b);
  AddFlow f;
  f.description = "seed";
  f.congestionControl = "reno";
  f.onOffEvents = {OnOffEvent{RandomSpec{2, {1.0, 0, 0, 0}}, true}, OnOffEvent{RandomSpec{1, {1, 2, 0, 0}}, false}};
  encode(f, b = {});
  add(b);
  encode(RemoveFlow{1, 2, 3}, b = {});
  add(b);
  encode(IdentifyFlow{1, 2, 3, 4}, b = {});
  add(b);
  encode(Start{5, 6}, b = {});
  add(b);
  encode(Stop{7}, b = {});
  add(b);
  const std::uint8_t chunk[5] = {1, 2, 3, 4, 5};
  encode(Results{1, chunk}, b = {});
  add(b);
  Bytes data(60);
  DataHeader h;
  h.flags = kDataFrameBegin;
  h.length = 60;
  h.frameId = 3;
  h.seqNumber = 9;
  encodeDataHeader(h, data.data());
  add(data);
  for (const char* spec : {"const0:const1400", "uniform1,2:exp100:pareto1,2:normal5,1:id=3:description=x",
                           "default:onoff=1,+exp2,+uniform1,2,+3,repeat", "const10:const100:cmt=cmtrpv2:nrsack=on",
                           "truncnormal1,2:const5:unreliable=0.5:rtx_timeout=10:maxmsgsize=1200:cc=reno"}) {
    Input i{1};
    i.insert(i.end(), spec, spec + std::char_traits<char>::length(spec));
    s.push_back(i);
  }
  return s;
}

Input mutate(const Input& seed, std::mt19937_64& rng, const std::vector<Input>& all) {
  Input x = seed;
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < steps; ++k) {
    switch (rng() % 7) {
      case 0:  // flip a bit
        if (x.size() > 1) x[1 + rng() % (x.size() - 1)] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // truncate
        if (x.size() > 1) x.resize(1 + rng() % (x.size() - 1));
        break;
      case 2:  // extend with random bytes
        for (int n = static_cast<int>(rng() % 64); n > 0; --n) x.push_back(static_cast<std::uint8_t>(rng()));
        break;
      case 3:  // rewrite the length field
        if (x.size() >= 5) {
          const std::uint16_t l = static_cast<std::uint16_t>(rng() % 2 ? rng() : x.size() - 1 + rng() % 5 - 2);
          x[3] = static_cast<std::uint8_t>(l >> 8);
          x[4] = static_cast<std::uint8_t>(l);
        }
        break;
      case 4:  // a special byte value somewhere
        if (x.size() > 1) x[1 + rng() % (x.size() - 1)] = "\0\xff:,=+\x7f"[rng() % 7];
        break;
      case 5:  // splice with another seed
        if (const Input& o = all[rng() % all.size()]; o.size() > 1 && x.size() > 1) {
          const std::size_t at = 1 + rng() % (x.size() - 1);
          x.insert(x.begin() + static_cast<std::ptrdiff_t>(at), o.begin() + 1, o.end());
        }
        break;
      default:  // switch the target
        x[0] ^= 1;
        break;
    }
  }
  return x;
}

// Each seed without its target byte, in the corpus folder of its target.
int writeSeeds(const std::filesystem::path& dir) {
  const auto all = seeds();
  for (std::size_t k = 0; k < all.size(); ++k) {
    const auto folder = dir / ((all[k][0] & 1) ? "flowspec" : "npmp");
    std::filesystem::create_directories(folder);
    std::ofstream out(folder / ("seed-" + std::to_string(k)), std::ios::binary);
    out.write(reinterpret_cast<const char*>(all[k].data() + 1), static_cast<std::streamsize>(all[k].size() - 1));
    if (!out) {
      std::fprintf(stderr, "npm_fuzz_smoke: cannot write %s\n", folder.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--seeds") == 0) return writeSeeds(argv[2]);
  const long iterations = argc > 1 ? std::atol(argv[1]) : 300000;
  std::mt19937_64 rng(20261121);
  const auto all = seeds();
  for (const auto& s : all) LLVMFuzzerTestOneInput(s.data(), s.size());
  for (long i = 0; i < iterations; ++i) {
    Input x;
    if (i % 10 == 0) {
      x.resize(1 + rng() % 300);
      for (auto& c : x) c = static_cast<std::uint8_t>(rng());
    } else {
      x = mutate(all[rng() % all.size()], rng, all);
    }
    LLVMFuzzerTestOneInput(x.data(), x.size());
  }
  std::printf("%ld inputs, no crash, no sanitizer report\n", iterations + static_cast<long>(all.size()));
  return 0;
}
