// The one wall clock of measurements: microseconds since the epoch (CLOCK_REALTIME), the time
// base of NPMP DATA time stamps and of the vector files (the reference uses the same).
#pragma once

#include <sys/timex.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace npm {

inline std::uint64_t nowMicros() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000ULL + static_cast<std::uint64_t>(ts.tv_nsec) / 1000;
}

// The clock of a measurement's own timers (the vector blocks, the end of the warm-up): the
// steady clock, which a test moves forward (advance) to make a timer due at once instead of
// sleeping until it is. Its time points are the steady clock's; the offset is 0 unless a test
// moved it.
struct TimerClock {
  using duration = std::chrono::steady_clock::duration;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::steady_clock::time_point;
  static constexpr bool is_steady = true;
  static time_point now() noexcept { return std::chrono::steady_clock::now() + duration(offset().load()); }
  static void advance(duration by) noexcept { offset() += by.count(); }

private:
  static std::atomic<rep>& offset() noexcept {
    static std::atomic<rep> value{0};
    return value;
  }
};

// What the kernel says about the wall clock's discipline (adjtimex(2), read only).
struct ClockStatus {
  bool synchronised = false;  // STA_UNSYNC clear: an NTP/PTP daemon disciplines the clock
  long maxErrorMicros = 0;    // the kernel's maximum error estimate
  long estimatedErrorMicros = 0;
};

inline ClockStatus clockStatus() {
  timex tx{};
  const int state = ::adjtimex(&tx);
  ClockStatus c;
  c.synchronised = state != -1 && state != TIME_ERROR && (tx.status & STA_UNSYNC) == 0;
  c.maxErrorMicros = tx.maxerror;
  c.estimatedErrorMicros = tx.esterror;
  return c;
}

}  // namespace npm
