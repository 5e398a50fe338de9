// The one-second status line of both roles: the time, the flows, what was sent and received
// per second (and in all, where it fits), the host's CPU use and this process's own (user and
// system, in % of one core), and per core where it fits; never wider than the terminal.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "measure/cpu.h"
#include "measure/results.h"
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

// The persistent per-interval lines of --interval, as iperf3's: per flow and direction the
// interval, the bytes and rate in it, its frames, and for what this side sends (out) the
// sending side's RTT, congestion window and retransmissions in the interval where the stack
// tells, for what it receives (in) the frames lost in the interval, their share and the jitter.
// The figures are the measurement vector's for the same interval (the same snapshots). A
// header of two lines, then rows of at most 79 columns. Pure apart from print().
class IntervalLines {
public:
  struct Flow {
    std::uint32_t flowId = 0;
    bool out = false, in = false;  // which directions carry traffic
  };
  explicit IntervalLines(std::vector<Flow> flows) : flows_(std::move(flows)) {}
  // The rows of the interval that ends at `now` (µs), the header before the first; the first
  // call marks the start (its snapshots are the base of the first interval, nothing printed).
  // `start`: the measurement's start (µs).
  std::string format(std::uint64_t now, std::uint64_t start, const std::vector<measure::FlowSnapshot>& flows);
  static std::string header();

private:
  std::vector<Flow> flows_;
  std::vector<measure::FlowSnapshot> previous_;
  std::uint64_t last_ = 0;
  bool headed_ = false;
};

}  // namespace npm::control
