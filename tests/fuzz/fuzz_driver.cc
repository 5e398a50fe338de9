// Deterministic mutation driver for fuzz_targets.cc (no libFuzzer needed): valid seeds of
// every NPMP message type and of FLOWSPEC strings, and the corpus kept in the tree
// (tests/fuzz/corpus/<target>/: seed files of every target and the regression inputs of crashes
// found, each run first as it is), mutated by bit flips, truncation, extension, length-field
// rewrites and splices, plus pure random inputs.
//   npm_fuzz_smoke [--corpus DIR] [iterations]
//   npm_fuzz_smoke --seeds DIR   writes the built-in seeds as libFuzzer corpora: DIR/npmp, DIR/flowspec
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "fuzz_targets.h"
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
      default:  // switch the target: npmp <-> flowspec, or among the files' readers
        x[0] = x[0] < 2 ? static_cast<std::uint8_t>(x[0] ^ 1)
                        : static_cast<std::uint8_t>(2 + rng() % (npm::fuzz::kTargetCount - 2));
        break;
    }
  }
  return x;
}

// Each seed without its target byte, in the corpus folder of its target.
int writeSeeds(const std::filesystem::path& dir) {
  const auto all = seeds();
  for (std::size_t k = 0; k < all.size(); ++k) {
    const auto folder = dir / npm::fuzz::kTargetNames[all[k][0]];
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

// The files of DIR/<target>/, each prefixed with its target's index.
bool readCorpus(const std::filesystem::path& dir, std::vector<Input>& out) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    std::fprintf(stderr, "npm_fuzz_smoke: no corpus directory %s\n", dir.c_str());
    return false;
  }
  for (std::size_t t = 0; t < npm::fuzz::kTargetCount; ++t) {
    const auto folder = dir / npm::fuzz::kTargetNames[t];
    if (!std::filesystem::is_directory(folder, ec)) continue;
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(folder)) files.push_back(entry.path());
    std::sort(files.begin(), files.end());  // the same order every run
    for (const auto& file : files) {
      std::ifstream in(file, std::ios::binary);
      Input x{static_cast<std::uint8_t>(t)};
      x.insert(x.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (!in.eof() && in.fail()) {
        std::fprintf(stderr, "npm_fuzz_smoke: cannot read %s\n", file.c_str());
        return false;
      }
      out.push_back(std::move(x));
    }
  }
  return true;
}

// The seeds as they are, then `iterations` inputs: mutated seeds, every tenth one random bytes
// for one of `targets` (picked by the first byte).
void run(const std::vector<Input>& seeds, long iterations, std::mt19937_64& rng, std::uint8_t firstTarget,
         std::uint8_t targets) {
  for (const auto& s : seeds) LLVMFuzzerTestOneInput(s.data(), s.size());
  for (long i = 0; i < iterations; ++i) {
    Input x;
    if (i % 10 == 0) {
      x.resize(1 + rng() % 300);
      for (auto& c : x) c = static_cast<std::uint8_t>(rng());
      x[0] = static_cast<std::uint8_t>(firstTarget + x[0] % targets);
    } else {
      x = mutate(seeds[rng() % seeds.size()], rng, seeds);
    }
    LLVMFuzzerTestOneInput(x.data(), x.size());
  }
}

}  // namespace

// npm_fuzz_smoke [ITERATIONS] [--corpus DIR [--corpus-iterations N]]: ITERATIONS (300000) over
// the built-in NPMP and FLOWSPEC seeds, then N (ITERATIONS / 50) over the corpus (its files go
// through a FILE and 512 KiB of buffers each: about 20 times the cost of an NPMP message).
int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--seeds") == 0) return writeSeeds(argv[2]);
  long iterations = 300000, corpusIterations = -1;
  const char* corpusDir = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--corpus") == 0 && i + 1 < argc) {
      corpusDir = argv[++i];
    } else if (std::strcmp(argv[i], "--corpus-iterations") == 0 && i + 1 < argc) {
      corpusIterations = std::atol(argv[++i]);
    } else if (argv[i][0] >= '0' && argv[i][0] <= '9') {
      iterations = std::atol(argv[i]);
    } else {
      std::fprintf(stderr, "usage: npm_fuzz_smoke [ITERATIONS] [--corpus DIR [--corpus-iterations N]] | --seeds DIR\n");
      return 1;
    }
  }
  if (corpusIterations < 0) corpusIterations = iterations / 50;
  std::mt19937_64 rng(20261121);
  const auto builtIn = seeds();
  run(builtIn, iterations, rng, 0, 2);
  long total = iterations + static_cast<long>(builtIn.size());
  std::size_t files = 0;
  if (corpusDir != nullptr) {
    std::vector<Input> corpus;
    if (!readCorpus(corpusDir, corpus)) return 1;
    if (corpus.empty()) {
      std::fprintf(stderr, "npm_fuzz_smoke: the corpus %s is empty\n", corpusDir);
      return 1;
    }
    files = corpus.size();
    run(corpus, corpusIterations, rng, 2, static_cast<std::uint8_t>(npm::fuzz::kTargetCount - 2));
    total += corpusIterations + static_cast<long>(files);
  }
  std::printf("%ld inputs (%zu corpus files and %ld mutations of them), no crash, no sanitizer report\n", total, files,
              corpusDir != nullptr ? corpusIterations : 0L);
  return 0;
}
