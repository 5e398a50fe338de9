#include "control/display.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <cstdio>

#include "common/clock.h"
#include "common/text.h"

namespace npm::control {

// The terminal's columns (at least 80 where it says fewer or is no terminal, e.g. a file).
std::size_t StatusLine::terminalWidth() const {
  winsize w{};
  if (colour_ && ::ioctl(::fileno(out_), TIOCGWINSZ, &w) == 0 && w.ws_col > 0)
    return std::max<std::size_t>(w.ws_col, 40);
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
    if (extra == &sentTotal)
      line.insert(line.find(received), *extra);
    else if (extra == &receivedTotal)
      line.insert(line.find(received) + received.size(), *extra);
    else
      line.insert(line.find(selfText), *extra);
  }
  if (line.size() > width - 1) line.resize(width - 1);
  // On a terminal the line rewrites itself; into a file or pipe it is one line per second.
  std::fprintf(out_, "%s%s%s%s%s", colour_ ? "\r" : "", colour_ ? "\x1b[34m" : "", line.c_str(),
               colour_ ? "\x1b[0m" : "", colour_ ? "\x1b[0K" : "\n");
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

// ------------------------------------------------------------------ interval lines

namespace {

std::uint64_t minus(std::uint64_t now, std::uint64_t before) { return now >= before ? now - before : 0; }

std::string number(double v, const char* format) {
  if (std::isnan(v)) return "-";
  char b[64];
  std::snprintf(b, sizeof(b), format, v);
  return b;
}

// Flow 4, Dir 3, Interval 13, Bytes 9, Rate 12, Frames 8, then three of 7, 9 and 6: 79 columns.
std::string row(const std::string& flow, const std::string& dir, const std::string& interval, const std::string& bytes,
                const std::string& rate, const std::string& frames, const std::string& a, const std::string& b,
                const std::string& c) {
  char line[160];
  std::snprintf(line, sizeof(line), "%4s %-3s %-13s %9s %12s %8s %7s %9s %6s\n", flow.c_str(), dir.c_str(),
                interval.c_str(), bytes.c_str(), rate.c_str(), frames.c_str(), a.c_str(), b.c_str(), c.c_str());
  return line;
}

}  // namespace

std::string IntervalLines::header() {
  return row("Flow", "Dir", "Interval (s)", "Bytes", "Rate", "Frames", "RTT ms", "Cwnd", "Retr") +
         row("", "in:", "", "", "", "", "Lost", "Loss", "Jitter");
}

std::string IntervalLines::format(std::uint64_t now, std::uint64_t start,
                                  const std::vector<measure::FlowSnapshot>& flows) {
  std::string out;
  if (last_ == 0) {  // the start: the first interval's times begin here, its counts at zero
    // What arrived between START and this first snapshot (the passive sends from START on;
    // the vector's block at 0 s) is in the first line, so that the lines add up to the totals.
    previous_.assign(flows.size(), measure::FlowSnapshot{});
    last_ = now;
    return out;
  }
  if (!headed_) {
    out += header();
    headed_ = true;
  }
  if (previous_.size() != flows.size()) previous_.assign(flows.size(), measure::FlowSnapshot{});
  const double seconds = static_cast<double>(minus(now, last_)) / 1e6;
  char interval[48];
  std::snprintf(interval, sizeof(interval), "%.2f-%.2f", static_cast<double>(minus(last_, start)) / 1e6,
                static_cast<double>(minus(now, start)) / 1e6);
  for (std::size_t i = 0; i < flows.size() && i < flows_.size(); ++i) {
    const measure::FlowSnapshot& f = flows[i];
    const measure::FlowSnapshot& p = previous_[i];
    const std::string id = std::to_string(flows_[i].flowId);
    auto rate = [seconds](std::uint64_t bytes) {
      return seconds > 0.0 ? scaledBitRate(8.0 * static_cast<double>(bytes) / seconds) : std::string("-");
    };
    if (flows_[i].out) {
      const std::uint64_t bytes = minus(f.sent.bytes, p.sent.bytes);
      const double retransmissions =
          std::isnan(f.retransmissions) ? f.retransmissions
                                        : f.retransmissions - (std::isnan(p.retransmissions) ? 0.0 : p.retransmissions);
      out +=
          row(id, "out", interval, scaledBytes(bytes), rate(bytes), std::to_string(minus(f.sent.frames, p.sent.frames)),
              number(f.srttMs, "%.2f"), std::isnan(f.cwnd) ? "-" : scaledBytes(static_cast<std::uint64_t>(f.cwnd)),
              number(std::max(retransmissions, 0.0), "%.0f"));
    }
    if (flows_[i].in) {
      const std::uint64_t bytes = minus(f.received.bytes, p.received.bytes);
      const std::uint64_t frames = minus(f.received.frames, p.received.frames);
      const std::uint64_t lost = minus(f.lost.frames, p.lost.frames);
      const double share =
          frames + lost > 0 ? 100.0 * static_cast<double>(lost) / static_cast<double>(frames + lost) : 0.0;
      out += row(id, "in", interval, scaledBytes(bytes), rate(bytes), std::to_string(frames), std::to_string(lost),
                 number(share, "%.2f%%"), number(f.jitterMs, "%.2f"));
    }
  }
  previous_ = flows;
  last_ = now;
  return out;
}

}  // namespace npm::control
