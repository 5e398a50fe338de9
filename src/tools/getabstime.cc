// getabstime: prints the current time (CLOCK_REALTIME) in microseconds since the Unix epoch.
#include <time.h>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc > 1) {
    if (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0) {
      std::printf(
          "Usage: getabstime\nPrints the current time in microseconds since the Unix "
          "epoch (1970-01-01 00:00:00 UTC).\n\nOptions:\n"
          "  -h, --help               this help\n"
          "  -v, --version            version\n");
      return 0;
    }
    if (std::strcmp(argv[1], "-v") == 0 || std::strcmp(argv[1], "--version") == 0) {
      std::printf("GetAbsTime %s\n", NPM_VERSION);
      return 0;
    }
    std::fprintf(stderr, "getabstime: unexpected argument \"%s\"\nUsage: getabstime\n", argv[1]);
    return 1;
  }
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  const unsigned long long us =
      static_cast<unsigned long long>(ts.tv_sec) * 1000000ULL + static_cast<unsigned long long>(ts.tv_nsec) / 1000ULL;
  std::printf("%llu\n", us);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
