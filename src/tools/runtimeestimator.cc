// runtimeestimator: estimates when a batch of runs will be done.
//   runtimeestimator start_file total_runs 0   stores "now" (8 bytes, big-endian µs)
//   runtimeestimator start_file total_runs k   extrapolates linearly from start to now
// See runtimeestimator(1).
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/fileio.h"
#include "tools/toolcommon.h"

using namespace npm;
using namespace npm::tools;

namespace {

const char* const kProgram = "runtimeestimator";

void usage(std::FILE* to) {
  std::fprintf(to,
               "Usage: %s start_file total_runs current_run\n"
               "current_run 0 writes the current time into start_file (8 bytes, big-endian\n"
               "microseconds since the epoch); 1..total_runs prints the estimated end time of the\n"
               "batch, extrapolated from start_file.\n\n"
               "Options:\n"
               "  -h, --help               this help\n"
               "  -v, --version            version\n",
               kProgram);
}

std::uint64_t nowMicroseconds() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000ULL + static_cast<std::uint64_t>(ts.tv_nsec) / 1000ULL;
}

// Plausible as a start time: between 2000 and 2200.
bool plausible(std::uint64_t us) { return us > 946684800000000ULL && us < 7258118400000000ULL; }

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
    usage(stdout);
    return 0;
  }
  if (argc == 2 && (std::strcmp(argv[1], "-v") == 0 || std::strcmp(argv[1], "--version") == 0)) {
    std::printf("RuntimeEstimator %s\n", NPM_VERSION);
    return 0;
  }
  if (argc != 4) {
    usage(stderr);
    return 1;
  }
  const std::string startFile = argv[1];
  long totalRuns, currentRun;
  try {
    totalRuns = parseInteger(argv[2], 1, 1000000000L, "total runs");
    currentRun = parseInteger(argv[3], 0, 1000000000L, "current run");
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return 1;
  }
  if (currentRun > totalRuns) {
    std::fprintf(stderr, "%s: current run %ld is larger than total runs %ld\n", kProgram, currentRun, totalRuns);
    return 1;
  }
  const bool colour = ::isatty(STDOUT_FILENO) == 1;
  const char* on = colour ? "\x1b[34m" : "";
  const char* off = colour ? "\x1b[0m" : "";

  try {
    if (currentRun == 0) {
      const std::uint64_t now = nowMicroseconds();
      unsigned char bytes[8];
      for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(now >> (56 - 8 * i));
      OutputFile out(startFile, false, 0);
      out.write(bytes, sizeof(bytes));
      out.commit();
      std::printf("%s##### ESTIMATION: - [0 of %ld - 0.00%%]%s\n", on, totalRuns, off);
      return 0;
    }
    const std::string data = readWholeFile(startFile);
    if (data.size() != 8) {
      throw FileError(startFile + ": expected 8 bytes (a start time), found " + std::to_string(data.size()));
    }
    std::uint64_t be = 0, le = 0;
    for (int i = 0; i < 8; ++i) {
      be = (be << 8) | static_cast<unsigned char>(data[i]);
      le |= static_cast<std::uint64_t>(static_cast<unsigned char>(data[i])) << (8 * i);
    }
    // Files of old versions were written in host byte order (little-endian on x86).
    const std::uint64_t start = (!plausible(be) && plausible(le)) ? le : be;
    if (!plausible(start)) throw FileError(startFile + ": not a start time file");
    const std::uint64_t now = nowMicroseconds();
    const double elapsed = now > start ? static_cast<double>(now - start) : 0.0;
    const double perRun = elapsed / static_cast<double>(currentRun);
    const double remaining = perRun * static_cast<double>(totalRuns - currentRun);
    const std::uint64_t end = now + static_cast<std::uint64_t>(remaining);
    const time_t seconds = static_cast<time_t>(end / 1000000ULL);
    struct tm local {};
    ::localtime_r(&seconds, &local);
    char date[64];
    std::strftime(date, sizeof(date), "%d-%b-%Y %H:%M:%S", &local);
    std::printf("%s##### ESTIMATION: %s.%04u (in %1.2f minutes)  [%ld of %ld - %1.2f%%]%s\n", on, date,
                static_cast<unsigned>((end % 1000000ULL) / 100ULL), remaining / 60000000.0, currentRun, totalRuns,
                100.0 * static_cast<double>(currentRun) / static_cast<double>(totalRuns), off);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, e.what());
    return 1;
  }
  return 0;
}
