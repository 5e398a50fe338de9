// extractvectors: converts an OMNeT++ version-2 vector file into one table
// (Time Event Object Vector Split Value). Reference-compatible command line; see
// extractvectors(1). The input is parsed as it is decompressed; the output is compressed
// in parallel pieces and renamed into place only when complete.
#include <cstdio>
#include <optional>

#include "tools/toolcommon.h"
#include "tools/vectorfile.h"

using namespace npm;
using namespace npm::tools;

namespace {

const char* const kProgram = "extractvectors";

enum OptionId { kSplit, kNoSplit, kHelp, kVersion };

const std::vector<OptionSpec> kOptions = {
    {"compress", 'c', true, kOptCompress},
    {"separator", 's', true, kOptSeparator},
    {"line-numbers", 'l', false, kOptLineNumbers},
    {"no-line-numbers", 'n', false, kOptNoLineNumbers},
    {"split", 'p', false, kSplit},
    {"splitall", 0, false, kSplit},
    {"no-split", 'a', false, kNoSplit},
    {"quiet", 'q', false, kOptQuiet},
    {"jobs", 'j', true, kOptJobs},
    {"help", 'h', false, kHelp},
    {"version", 'v', false, kVersion},
};

void usage(std::FILE* to) {
  std::fprintf(to,
               "Usage: %s input output [[!]prefix ...] [options]\n"
               "Converts an OMNeT++ version-2 vector file (plain, bzip2 or gzip) into a table\n"
               "Time Event Object Vector Split Value (bzip2 if output ends in .bz2, gzip if in .gz).\n"
               "Only vectors whose name starts with one of the prefixes are extracted (all if none);\n"
               "a prefix written !prefix also splits the name at its last space into Split.\n"
               "\n"
               "Options:\n"
               "  -c, --compress N         bzip2/gzip level 1-9 (default 9)\n"
               "  -s, --separator S        column separator (default TAB)\n"
               "  -l, --line-numbers       prefix rows with a line number (R row names)\n"
               "  -n, --no-line-numbers    (default)\n"
               "  -p, --split, --splitall  split every vector name at its last space\n"
               "  -a, --no-split           split only for !prefix (default)\n"
               "  -j, --jobs N             compression threads (default: number of CPUs)\n"
               "  -q, --quiet              no banner and no \"Adding vector\" lines\n"
               "  -h, --help               this help\n"
               "  -v, --version            version\n",
               kProgram);
}

struct Arguments : VectorTableSettings {
  std::string outputName;
};

// The command line; nullopt when --help or --version has answered. Throws UsageError.
std::optional<Arguments> parseArguments(int argc, char** argv) {
  Arguments a;
  std::vector<ParsedOption> options;
  std::vector<std::string> positional;
  parseCommandLine(argc, argv, kOptions, options, positional);
  for (const auto& o : options) {
    if (applyOutputOption(o, a.opt, 1)) continue;
    switch (o.id) {
      case kSplit: a.splitAll = true; break;
      case kNoSplit: a.splitAll = false; break;
      case kHelp: usage(stdout); return std::nullopt;
      case kVersion: std::printf("ExtractVectors %s\n", NPM_VERSION); return std::nullopt;
    }
  }
  if (positional.size() < 2) throw UsageError("input and output file names expected");
  a.inputName = positional[0];
  a.outputName = positional[1];
  for (std::size_t i = 2; i < positional.size(); ++i) {
    const std::string& p = positional[i];
    if (!p.empty() && p[0] == '!') {
      a.prefixes.push_back(VectorPrefix{p.substr(1), true});
    } else {
      a.prefixes.push_back(VectorPrefix{p, false});
    }
  }
  return a;
}

// One line naming the prefixes that matched no vector, if any.
void warnUnmatched(const std::vector<VectorPrefix>& prefixes) {
  std::size_t found = 0;
  for (const auto& p : prefixes) found += p.found ? 1 : 0;
  if (found == prefixes.size()) return;
  std::fprintf(stderr, "%s: warning: found only %zu of %zu specified vector prefixes:", kProgram, found,
               prefixes.size());
  for (const auto& p : prefixes) {
    if (!p.found) std::fprintf(stderr, " \"%s\"", p.text.c_str());
  }
  std::fprintf(stderr, "\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<Arguments> a;
  if (const auto status = parseOrExit(kProgram, a, [&] { return parseArguments(argc, argv); })) return *status;
  if (!a->opt.quiet) std::printf("ExtractVectors %s\n\n", NPM_VERSION);
  installInterruptHandler();
  ThreadPool pool(a->opt.threads());
  try {
    InputFile in(a->inputName);
    OutputFile out(a->outputName, compressionForName(a->outputName), a->opt.level);
    out.compressInParallel(pool);
    VectorExtractor extractor(*a, in, [&out](std::string_view text) { out.write(text); });
    extractor.run();
    out.commit();
    warnUnmatched(a->prefixes);
    if (!a->opt.quiet) printWrote(extractor.rows() + 1, out.bytesWritten(), out.bytesStored());
  } catch (const Interrupted&) {
    std::fprintf(stderr, "%s: interrupted; %s was not written\n", kProgram, a->outputName.c_str());
    return 130;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, e.what());
    return 1;
  }
  return 0;
}
