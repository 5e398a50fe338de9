// The one-second status line of both roles: the time, the flows, what was sent and received
// per second (and in all, where it fits), the host's CPU use and this process's own (user and
// system, in % of one core), and per core where it fits; never wider than the terminal.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "measure/cpu.h"
#include "measure/statistics.h"

namespace npm::control {

class StatusLine {
public:
  // Prints to `out`: standard output, or standard error when standard output carries JSON.
  explicit StatusLine(bool enabled, std::FILE* out = stdout);
  // Prints the line for the totals given (cumulative), rates over the time since the last call.
  void update(std::size_t flows, std::size_t measurements, const measure::Counters& transmitted,
              const measure::Counters& received);
  // Ends the line (newline) if anything was printed.
  void finish();
  bool enabled() const { return enabled_; }
  // The CPU use over the interval of the last update().
  const measure::CpuUsage& cpuUsage() const { return usage_; }

private:
  bool enabled_;
  std::FILE* out_;
  bool colour_;
  bool printed_ = false;
  std::uint64_t started_ = 0, last_ = 0;
  std::uint64_t lastTx_ = 0, lastRx_ = 0;
  measure::ProcessTimes lastSelf_;
  std::size_t terminalWidth() const;
  measure::CpuSampler cpu_;
  measure::CpuTimes lastCpu_;
  measure::CpuUsage usage_;
};

}  // namespace npm::control
