// The one-second status line of both roles, as the reference prints it.
#pragma once

#include <cstdint>
#include <string>

#include "measure/cpu.h"
#include "measure/statistics.h"

namespace npm::control {

class StatusLine {
public:
  explicit StatusLine(bool enabled);
  // Prints the line for the totals given (cumulative), rates over the time since the last call.
  void update(std::size_t flows, std::size_t measurements, const measure::Counters& transmitted,
              const measure::Counters& received);
  // Ends the line (newline) if anything was printed.
  void finish();
  bool enabled() const { return enabled_; }

private:
  bool enabled_, colour_;
  bool printed_ = false;
  std::uint64_t started_ = 0, last_ = 0;
  std::uint64_t lastTx_ = 0, lastRx_ = 0;
  measure::CpuSampler cpu_;
  measure::CpuTimes lastCpu_;
};

}  // namespace npm::control
