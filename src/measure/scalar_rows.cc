#include "measure/scalar_rows.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>

#include "common/scalar_line.h"
#include "common/text.h"
#include "measure/results.h"

namespace npm::measure {

namespace {

double rate(std::uint64_t count, std::uint64_t from, std::uint64_t to, double factor = 1.0) {
  if (to <= from) return 0.0;
  return factor * static_cast<double>(count) / (static_cast<double>(to - from) / 1e6);
}

class Rows {
public:
  explicit Rows(std::vector<ScalarRow>& rows) : rows_(rows) {}
  void add(const std::string& object, std::string name, std::uint64_t v) {
    rows_.push_back({object, std::move(name), std::to_string(v), true});
  }
  void add(const std::string& object, std::string name, double v) {
    rows_.push_back({object, std::move(name), format("%1.6f", v), true});
  }
  // "<what> Bytes/Packets/Frames", then (with `rates`) their rates over from..to, the bit rate
  // first if asked for.
  void counts(const std::string& object, const std::string& what, const Counters& c, std::uint64_t from,
              std::uint64_t to, bool bitRate, bool rates) {
    add(object, what + " Bytes", c.bytes);
    add(object, what + " Packets", c.packets);
    add(object, what + " Frames", c.frames);
    if (!rates) return;
    if (bitRate) add(object, what + " Bit Rate", rate(c.bytes, from, to, 8.0));
    add(object, what + " Byte Rate", rate(c.bytes, from, to));
    add(object, what + " Packet Rate", rate(c.packets, from, to));
    add(object, what + " Frame Rate", rate(c.frames, from, to));
  }
  void cpu(const std::string& object, const char* name, double v) {
    rows_.push_back({object, name, format("%1.3f", v), false});
  }

private:
  static std::string format(const char* f, double v) {
    char b[512];  // %f of the largest double has 309 digits
    std::snprintf(b, sizeof(b), f, v);
    return b;
  }
  std::vector<ScalarRow>& rows_;
};

}  // namespace

std::vector<ScalarRow> scalarRows(std::string_view role, const MeasurementResult& r) {
  std::vector<ScalarRow> rows;
  Rows out(rows);
  const std::string base = "netPerfMeter." + std::string(role);
  Counters totalTx, totalRx, totalLost;
  for (const FlowResult& f : r.flows) {
    const std::string object = base + ".flow[" + std::to_string(f.flowId) + "]";
    const auto& tx = f.transmitted;
    out.add(object, "First Transmission", tx.first);
    out.add(object, "Last Transmission", tx.last);
    out.add(object, "First Reception", f.firstReception);
    out.add(object, "Last Reception", f.lastReception);
    out.counts(object, "Transmitted", tx.total, tx.first, tx.last, true, true);
    out.counts(object, "Received", f.received, f.firstReception, f.lastReception, true, true);
    // Not in the reference: per-flow loss.
    out.counts(object, "Lost", f.lost, 0, 0, false, false);
    out.add(object, "Jitter", f.jitterMs);
    out.add(object, "Mean Delay", f.meanDelayMs);
    for (const auto& p : f.paths) {
      const std::string path = p.id == transport::PathSample::kConnection
                                   ? object + ".connection"
                                   : object + ".path[" + std::to_string(p.id) + "]";
      out.add(path, "Samples", p.samples);
      forEachPathCounter(PathSummaryKind::kMean, [&](std::size_t i, const PathCounter& c) {
        if (!p.mean(i).empty()) out.add(path, std::string(c.scalar), p.mean(i).value());
      });
      forEachPathCounter(PathSummaryKind::kCounter, [&](std::size_t i, const PathCounter& c) {
        const double counted = p.counted(i);
        if (!std::isnan(counted)) out.add(path, std::string(c.scalar), static_cast<std::uint64_t>(counted));
      });
    }
    totalTx += tx.total;
    totalRx += f.received;
    totalLost += f.lost;
  }
  const std::string total = base + ".total";
  const auto from = r.firstStatisticsEvent, to = r.lastStatisticsEvent;
  out.add(total, "First Statistics Event", from);
  out.add(total, "Last Statistics Event", to);
  out.counts(total, "Transmitted", totalTx, from, to, false, true);
  out.counts(total, "Received", totalRx, from, to, false, true);
  out.counts(total, "Lost", totalLost, from, to, false, true);
  // Per CPU first (CPU[1..n]), then the total, as the reference.
  for (std::size_t i = 1; i <= r.cpu.cpus(); ++i) {
    const std::string object = base + ".CPU[" + std::to_string(i) + "]";
    for (std::size_t s = 0; s < kCpuStates; ++s) out.cpu(object, kCpuStateNames[s], r.cpu.percent[i][s]);
  }
  if (!r.cpu.percent.empty()) {
    const std::string object = base + ".totalCPU";
    for (std::size_t s = 0; s < kCpuStates; ++s) out.cpu(object, kCpuStateNames[s], r.cpu.percent[0][s]);
  }
  // Not in the reference: this process's own CPU, beside the host's (which reads 100 % on a busy host).
  if (r.process.seconds > 0.0) {
    const std::string object = base + ".process";
    out.add(object, "User Time", r.process.userSeconds);
    out.add(object, "System Time", r.process.systemSeconds);
    out.cpu(object, "CPU Utilisation", r.process.utilisation());
  }
  return rows;
}

std::string formatScalarRow(const ScalarRow& row) {
  std::string line = "scalar \"" + row.object + "\" ";
  const std::string quoted = "\"" + row.name + "\"";
  line += quoted;
  if (row.aligned && quoted.size() < 25) line.append(25 - quoted.size(), ' ');
  line += ' ';
  line += row.value;
  line += '\n';
  return line;
}

std::vector<ScalarRow> parseScalarRows(std::string_view text) {
  std::vector<ScalarRow> rows;
  std::size_t number = 0;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++number;
    std::optional<ScalarLine> scalar;
    try {
      scalar = scalarLine(line);
    } catch (const ScalarLineError& e) {
      throw std::runtime_error("scalar file line " + std::to_string(number) + ": " + e.what());
    }
    if (scalar) rows.push_back({std::move(scalar->object), std::move(scalar->name), std::move(scalar->value), true});
  }
  return rows;
}

}  // namespace npm::measure
