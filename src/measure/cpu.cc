#include "measure/cpu.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>

#include <cstdlib>
#include <sstream>

namespace npm::measure {

const std::array<const char*, kCpuStates> kCpuStateNames = {
    "User", "Nice", "System", "Idle", "IOWait", "Hardware Interrupts", "Software Interrupts", "Hypervisor"};

CpuSampler::CpuSampler() : fd_(::open("/proc/stat", O_RDONLY | O_CLOEXEC)) {}

CpuTimes CpuSampler::sample() const {
  if (!fd_) return {};
  std::string text;
  char buffer[16384];
  off_t offset = 0;
  for (;;) {
    const ssize_t n = ::pread(fd_.get(), buffer, sizeof(buffer), offset);
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    offset += n;
  }
  return parseProcStat(text);
}

CpuTimes parseProcStat(const std::string& text) {
  CpuTimes times;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 3, "cpu") != 0) continue;
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    std::array<std::uint64_t, kCpuStates> t{};
    for (auto& v : t) {
      if (!(fields >> v)) v = 0;
    }
    if (name == "cpu") {
      times.ticks.insert(times.ticks.begin(), t);
    } else {
      times.ticks.push_back(t);
    }
  }
  return times;
}

ProcessTimes processTimes() {
  ProcessTimes t;
  rusage u{};
  if (::getrusage(RUSAGE_SELF, &u) == 0) {
    auto micros = [](const timeval& v) {
      return static_cast<std::uint64_t>(v.tv_sec) * 1000000 + static_cast<std::uint64_t>(v.tv_usec);
    };
    t.userMicros = micros(u.ru_utime);
    t.systemMicros = micros(u.ru_stime);
  }
  t.wallMicros = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
  return t;
}

ProcessUsage processUsage(const ProcessTimes& from, const ProcessTimes& to) {
  auto seconds = [](std::uint64_t a, std::uint64_t b) { return b > a ? static_cast<double>(b - a) / 1e6 : 0.0; };
  return {seconds(from.userMicros, to.userMicros), seconds(from.systemMicros, to.systemMicros),
          seconds(from.wallMicros, to.wallMicros)};
}

CpuUsage cpuUsage(const CpuTimes& from, const CpuTimes& to) {
  CpuUsage usage;
  const std::size_t n = std::min(from.ticks.size(), to.ticks.size());
  usage.percent.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t sum = 0;
    std::array<std::uint64_t, kCpuStates> delta{};
    for (std::size_t s = 0; s < kCpuStates; ++s) {
      delta[s] = to.ticks[i][s] >= from.ticks[i][s] ? to.ticks[i][s] - from.ticks[i][s] : 0;
      sum += delta[s];
    }
    for (std::size_t s = 0; s < kCpuStates; ++s) {
      usage.percent[i][s] = sum == 0 ? (s == kCpuIdleState ? 100.0 : 0.0)
                                     : 100.0 * static_cast<double>(delta[s]) / static_cast<double>(sum);
    }
  }
  return usage;
}

}  // namespace npm::measure
