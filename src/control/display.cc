#include "control/display.h"

#include <unistd.h>

#include <cstdio>

#include "common/clock.h"
#include "common/text.h"

namespace npm::control {

StatusLine::StatusLine(bool enabled, std::FILE* out) : enabled_(enabled), out_(out), colour_(::isatty(::fileno(out))) {
  started_ = last_ = nowMicros();
  lastCpu_ = cpu_.sample();
}

void StatusLine::update(std::size_t flows, std::size_t measurements, const measure::Counters& tx,
                        const measure::Counters& rx) {
  const std::uint64_t now = nowMicros();
  const double interval = now > last_ ? static_cast<double>(now - last_) / 1e6 : 1.0;
  const double txRate = 8.0 * static_cast<double>(tx.bytes - std::min(tx.bytes, lastTx_)) / interval;
  const double rxRate = 8.0 * static_cast<double>(rx.bytes - std::min(rx.bytes, lastRx_)) / interval;
  const auto cpuNow = cpu_.sample();
  usage_ = measure::cpuUsage(lastCpu_, cpuNow);
  const auto& usage = usage_;
  lastCpu_ = cpuNow;
  last_ = now;
  lastTx_ = tx.bytes;
  lastRx_ = rx.bytes;
  if (!enabled_) return;

  const std::uint64_t elapsed = (now - started_) / 1000000;
  std::string cpu;
  char b[64];
  if (usage.cpus() > 0 && usage.cpus() <= 4) {
    for (std::size_t i = 1; i <= usage.cpus(); ++i) {
      const double u = usage.utilisation(i);
      std::snprintf(b, sizeof(b), "%s%s%5.1f%%%s", i > 1 ? "/" : "", colour_ && u >= 90.0 ? "\x1b[31m" : "", u,
                    colour_ && u >= 90.0 ? "\x1b[34m" : "");
      cpu += b;
    }
    std::snprintf(b, sizeof(b), " [%5.1f%%]", usage.percent.empty() ? 0.0 : usage.utilisation(0));
    cpu += b;
  } else if (!usage.percent.empty()) {
    std::snprintf(b, sizeof(b), "%5.1f%% total", usage.utilisation(0));
    cpu += b;
  }
  // On a terminal the line rewrites itself; into a file or pipe it is one line per second.
  std::fprintf(out_, "%s%s<-- %llu:%02llu:%02llu   Flows: %zu Measurements: %zu   Transmitted: %s at %s   "
              "Received: %s at %s   CPU: %s -->%s%s",
              colour_ ? "\r" : "", colour_ ? "\x1b[34m" : "", static_cast<unsigned long long>(elapsed / 3600),
              static_cast<unsigned long long>(elapsed / 60 % 60), static_cast<unsigned long long>(elapsed % 60),
              flows, measurements, scaledBytes(tx.bytes).c_str(), scaledBitRate(txRate).c_str(),
              scaledBytes(rx.bytes).c_str(), scaledBitRate(rxRate).c_str(), cpu.c_str(), colour_ ? "\x1b[0m" : "",
              colour_ ? "\x1b[0K" : "\n");
  std::fflush(out_);
  printed_ = true;
}

void StatusLine::finish() {
  if (printed_ && colour_) {
    std::fputc('\n', out_);
    std::fflush(out_);
    printed_ = false;
  }
}

}  // namespace npm::control
