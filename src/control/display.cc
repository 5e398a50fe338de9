#include "control/display.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

#include <cstdio>

#include "common/clock.h"
#include "common/text.h"

namespace npm::control {

// The terminal's columns (at least 80 where it says fewer or is no terminal, e.g. a file).
std::size_t StatusLine::terminalWidth() const {
  winsize w{};
  if (colour_ && ::ioctl(::fileno(out_), TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return std::max<std::size_t>(w.ws_col, 40);
  return 80;
}

StatusLine::StatusLine(bool enabled, std::FILE* out) : enabled_(enabled), out_(out), colour_(::isatty(::fileno(out))) {
  started_ = last_ = nowMicros();
  lastCpu_ = cpu_.sample();
  lastSelf_ = measure::processTimes();
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

  // This process's own CPU (user and system), in % of one core, beside the host's.
  const measure::ProcessTimes self = measure::processTimes();
  const double selfPercent = measure::processUsage(lastSelf_, self).utilisation();
  lastSelf_ = self;
  const std::uint64_t elapsed = (now - started_) / 1000000;
  char b[160];
  // The parts in the order they are dropped when the terminal is too narrow: last first.
  std::snprintf(b, sizeof(b), "%llu:%02llu:%02llu", static_cast<unsigned long long>(elapsed / 3600),
                static_cast<unsigned long long>(elapsed / 60 % 60), static_cast<unsigned long long>(elapsed % 60));
  std::string line = b;
  std::snprintf(b, sizeof(b), "  %zu flow%s", flows, flows == 1 ? "" : "s");
  line += b;
  if (measurements != 1) line += "  " + std::to_string(measurements) + " measurements";
  const std::string sent = "  tx " + scaledBitRate(txRate), received = "  rx " + scaledBitRate(rxRate);
  const std::string sentTotal = " (" + scaledBytes(tx.bytes) + ")", receivedTotal = " (" + scaledBytes(rx.bytes) + ")";
  std::string host;
  if (!usage.percent.empty()) {
    std::snprintf(b, sizeof(b), "  CPU host %.0f%%", usage.utilisation(0));
    host = b;
  }
  std::snprintf(b, sizeof(b), "%sself %.0f%%", host.empty() ? "  CPU " : " ", selfPercent);
  const std::string selfText = b;
  std::string cores;
  if (usage.cpus() > 1 && usage.cpus() <= 8) {
    cores = " (cores";
    for (std::size_t i = 1; i <= usage.cpus(); ++i) {
      std::snprintf(b, sizeof(b), "%s%.0f", i > 1 ? "/" : " ", usage.utilisation(i));
      cores += b;
    }
    cores += "%)";
  }
  const std::size_t width = terminalWidth();
  line += sent + received + host + selfText;
  // Extras where they fit: totals, then the cores.
  for (const std::string* extra : {&sentTotal, &receivedTotal, static_cast<const std::string*>(&cores)}) {
    if (line.size() + extra->size() > width - 1) continue;
    if (extra == &sentTotal) line.insert(line.find(received), *extra);
    else if (extra == &receivedTotal) line.insert(line.find(received) + received.size(), *extra);
    else line.insert(line.find(selfText), *extra);
  }
  if (line.size() > width - 1) line.resize(width - 1);
  // On a terminal the line rewrites itself; into a file or pipe it is one line per second.
  std::fprintf(out_, "%s%s%s%s%s", colour_ ? "\r" : "", colour_ ? "\x1b[34m" : "", line.c_str(), colour_ ? "\x1b[0m" : "",
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
