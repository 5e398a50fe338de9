// CPU utilisation from /proc/stat, read with pread() on every sample (the reference read
// it through stdio after fseek and saw frozen counters: always 100 % idle).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/handle.h"

namespace npm::measure {

// The eight Linux states, in /proc/stat order, with their scalar names.
constexpr std::size_t kCpuStates = 8;
extern const std::array<const char*, kCpuStates> kCpuStateNames;
constexpr std::size_t kCpuIdleState = 3;

struct CpuTimes {
  // [0] = all CPUs, [1..n] = each CPU; jiffies per state.
  std::vector<std::array<std::uint64_t, kCpuStates>> ticks;
};

// Percentages per state, [0] total, [1..n] per CPU.
struct CpuUsage {
  std::vector<std::array<double, kCpuStates>> percent;
  std::size_t cpus() const { return percent.empty() ? 0 : percent.size() - 1; }
  double utilisation(std::size_t index) const { return 100.0 - percent[index][kCpuIdleState]; }
};

class CpuSampler {
public:
  CpuSampler();  // opens /proc/stat; an unreadable /proc gives empty samples
  CpuSampler(const CpuSampler&) = delete;
  CpuSampler& operator=(const CpuSampler&) = delete;
  CpuTimes sample() const;

private:
  UniqueFd fd_;
};

// This process's own CPU time (getrusage RUSAGE_SELF: every thread) and the steady clock, µs.
struct ProcessTimes {
  std::uint64_t userMicros = 0, systemMicros = 0, wallMicros = 0;
};
ProcessTimes processTimes();

// This process's CPU between two samples: user and system seconds over `seconds` of wall time.
struct ProcessUsage {
  double userSeconds = 0.0, systemSeconds = 0.0, seconds = 0.0;
  // In % of one core (above 100 where several threads computed at once).
  double utilisation() const { return seconds > 0.0 ? 100.0 * (userSeconds + systemSeconds) / seconds : 0.0; }
};
ProcessUsage processUsage(const ProcessTimes& from, const ProcessTimes& to);

// Parses the text of /proc/stat.
CpuTimes parseProcStat(const std::string& text);
// Usage between two samples (100 % idle where no time passed).
CpuUsage cpuUsage(const CpuTimes& from, const CpuTimes& to);

}  // namespace npm::measure
