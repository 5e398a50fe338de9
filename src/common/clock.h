// The one wall clock of measurements: microseconds since the epoch (CLOCK_REALTIME), the time
// base of NPMP DATA time stamps and of the vector files (the reference uses the same).
#pragma once

#include <time.h>

#include <cstdint>

namespace npm {

inline std::uint64_t nowMicros() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000ULL + static_cast<std::uint64_t>(ts.tv_nsec) / 1000;
}

}  // namespace npm
