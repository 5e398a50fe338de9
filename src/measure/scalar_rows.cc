#include "measure/scalar_rows.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

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
  void add(const std::string& object, const char* name, std::uint64_t v) {
    rows_.push_back({object, name, std::to_string(v), true});
  }
  void add(const std::string& object, const char* name, double v) { rows_.push_back({object, name, format("%1.6f", v), true}); }
  void cpu(const std::string& object, const char* name, double v) { rows_.push_back({object, name, format("%1.3f", v), false}); }

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
    out.add(object, "Transmitted Bytes", tx.total.bytes);
    out.add(object, "Transmitted Packets", tx.total.packets);
    out.add(object, "Transmitted Frames", tx.total.frames);
    out.add(object, "Transmitted Bit Rate", rate(tx.total.bytes, tx.first, tx.last, 8.0));
    out.add(object, "Transmitted Byte Rate", rate(tx.total.bytes, tx.first, tx.last));
    out.add(object, "Transmitted Packet Rate", rate(tx.total.packets, tx.first, tx.last));
    out.add(object, "Transmitted Frame Rate", rate(tx.total.frames, tx.first, tx.last));
    const auto from = f.firstReception, to = f.lastReception;
    out.add(object, "Received Bytes", f.received.bytes);
    out.add(object, "Received Packets", f.received.packets);
    out.add(object, "Received Frames", f.received.frames);
    out.add(object, "Received Bit Rate", rate(f.received.bytes, from, to, 8.0));
    out.add(object, "Received Byte Rate", rate(f.received.bytes, from, to));
    out.add(object, "Received Packet Rate", rate(f.received.packets, from, to));
    out.add(object, "Received Frame Rate", rate(f.received.frames, from, to));
    // Not in the reference: per-flow loss.
    out.add(object, "Lost Bytes", f.lost.bytes);
    out.add(object, "Lost Packets", f.lost.packets);
    out.add(object, "Lost Frames", f.lost.frames);
    out.add(object, "Jitter", f.jitterMs);
    out.add(object, "Mean Delay", f.meanDelayMs);
    for (const auto& p : f.paths) {
      const std::string path = object + ".path[" + std::to_string(p.id) + "]";
      out.add(path, "Samples", p.samples);
      if (p.cwndSamples > 0) out.add(path, "Mean Cwnd", p.cwndSum / static_cast<double>(p.cwndSamples));
      if (p.rttSamples > 0) out.add(path, "Mean RTT", p.rttSum / static_cast<double>(p.rttSamples));
      for (auto [name, value] : {std::pair{"Bytes Sent", p.bytesSent}, std::pair{"Bytes Acked", p.bytesAcked},
                                 std::pair{"Bytes Received", p.bytesReceived},
                                 std::pair{"Retransmissions", p.retransmissions}}) {
        if (!std::isnan(value)) out.add(path, name, static_cast<std::uint64_t>(value));
      }
    }
    totalTx += tx.total;
    totalRx += f.received;
    totalLost += f.lost;
  }
  const std::string total = base + ".total";
  const auto from = r.firstStatisticsEvent, to = r.lastStatisticsEvent;
  out.add(total, "First Statistics Event", from);
  out.add(total, "Last Statistics Event", to);
  out.add(total, "Transmitted Bytes", totalTx.bytes);
  out.add(total, "Transmitted Packets", totalTx.packets);
  out.add(total, "Transmitted Frames", totalTx.frames);
  out.add(total, "Transmitted Byte Rate", rate(totalTx.bytes, from, to));
  out.add(total, "Transmitted Packet Rate", rate(totalTx.packets, from, to));
  out.add(total, "Transmitted Frame Rate", rate(totalTx.frames, from, to));
  out.add(total, "Received Bytes", totalRx.bytes);
  out.add(total, "Received Packets", totalRx.packets);
  out.add(total, "Received Frames", totalRx.frames);
  out.add(total, "Received Byte Rate", rate(totalRx.bytes, from, to));
  out.add(total, "Received Packet Rate", rate(totalRx.packets, from, to));
  out.add(total, "Received Frame Rate", rate(totalRx.frames, from, to));
  out.add(total, "Lost Bytes", totalLost.bytes);
  out.add(total, "Lost Packets", totalLost.packets);
  out.add(total, "Lost Frames", totalLost.frames);
  out.add(total, "Lost Byte Rate", rate(totalLost.bytes, from, to));
  out.add(total, "Lost Packet Rate", rate(totalLost.packets, from, to));
  out.add(total, "Lost Frame Rate", rate(totalLost.frames, from, to));
  // Per CPU first (CPU[1..n]), then the total, as the reference.
  for (std::size_t i = 1; i <= r.cpu.cpus(); ++i) {
    const std::string object = base + ".CPU[" + std::to_string(i) + "]";
    for (std::size_t s = 0; s < kCpuStates; ++s) out.cpu(object, kCpuStateNames[s], r.cpu.percent[i][s]);
  }
  if (!r.cpu.percent.empty()) {
    const std::string object = base + ".totalCPU";
    for (std::size_t s = 0; s < kCpuStates; ++s) out.cpu(object, kCpuStateNames[s], r.cpu.percent[0][s]);
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
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++number;
    std::string word;
    std::string_view rest = line;
    if (!nextQuotedWord(rest, word) || word != "scalar") continue;
    ScalarRow row;
    if (!nextQuotedWord(rest, row.object) || !nextQuotedWord(rest, row.name) || !nextQuotedWord(rest, row.value)) {
      throw std::runtime_error("scalar file line " + std::to_string(number) + ": expected scalar \"object\" \"name\" value");
    }
    if (!row.value.empty() && row.value.back() == '\r') row.value.pop_back();
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace npm::measure
