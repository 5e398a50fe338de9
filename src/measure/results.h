// Result files in the reference formats: name expansion of -S/-V patterns, scalar files,
// measurement vectors (1 s table), per-flow vectors (one row per received message), and
// the config file (KEY="value", escaped so that sourcing it runs nothing).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/fileio.h"
#include "flowspec/flowspec.h"
#include "measure/cpu.h"
#include "measure/path_counters.h"
#include "measure/statistics.h"
#include "transport/path_sample.h"

namespace npm::measure {

// "run.vec.bz2" -> name("run.vec.bz2", "active") = "run-active.vec.bz2";
// with a flow: "run-active-0000000a-0000.vec.bz2". Empty pattern -> empty name.
std::string resultFileName(std::string_view pattern, std::string_view role,
                           std::optional<std::uint32_t> flowId = std::nullopt, std::uint16_t streamId = 0);

// How a result file is compressed, by its name: ".bz2" bzip2 (the reference's), ".gz" gzip at a
// fast level (this implementation's: several times faster to write than bzip2, somewhat larger),
// anything else not at all.
constexpr int kResultGzipLevel = 1;
Compression resultCompression(std::string_view name);
int resultLevel(Compression compression);  // bzip2 9, gzip kResultGzipLevel
// A result file named `path`, compressed as its name asks.
OutputFile openResultFile(const std::string& path);
// An anonymous one (the passive's files before their upload).
OutputFile anonymousResultFile(Compression compression);
// What an active asked for in a flag byte of START or IDENTIFY: gzip, bzip2 or neither.
inline Compression compressionAsked(std::uint8_t flags, std::uint8_t gzipBit, std::uint8_t bzip2Bit) {
  return (flags & gzipBit) ? Compression::kGzip : (flags & bzip2Bit) ? Compression::kBzip2 : Compression::kNone;
}

// Escapes a value for KEY="value" lines: \ " $ ` are backslash-escaped.
std::string shellQuote(std::string_view value);

// What the samples of one path came to (written as scalars of ".flow[N].path[ID]", of
// ".flow[N].connection" for the whole MPTCP connection or SCTP association): per figure of
// kPathCounters (path_counters.h), by its index there, the mean (PathSummaryKind::kMean) or
// the count since the end of the warm-up (kCounter).
struct PathSummary {
  // The mean over the samples that had the value.
  struct Mean {
    double sum = 0.0;
    std::uint64_t samples = 0;
    void add(double v);
    bool empty() const { return samples == 0; }
    double value() const { return sum / static_cast<double>(samples); }
  };
  std::int64_t id = 0;  // transport::PathSample::kConnection: the connection or association
  std::uint64_t samples = 0;
  void add(const transport::PathSample& s);
  // The end of a warm-up: the means start afresh, the counters count from here.
  void restart();
  // Figure `index` of kPathCounters: its mean (kMean; empty if no sample had it).
  const Mean& mean(std::size_t index) const { return means_[index]; }
  // ... or its count since the warm-up's end (kCounter; NaN if the stack does not tell).
  double counted(std::size_t index) const;

private:
  std::array<Mean, kPathCounterCount> means_{};
  // The last sample's cumulative counters and their values at restart() (NaN: none then, the
  // counter counts from 0).
  std::array<double, kPathCounterCount> last_ = nones(), base_ = nones();
  static constexpr std::array<double, kPathCounterCount> nones() {
    std::array<double, kPathCounterCount> a{};
    a.fill(transport::PathSample::kNone);
    return a;
  }
};

struct FlowResult {
  std::uint32_t flowId = 0;
  std::uint16_t streamId = 0;
  std::string description;
  TransmitStatistics transmitted;
  Counters received;
  std::uint64_t firstReception = 0, lastReception = 0;
  Counters lost;
  double jitterMs = 0.0;
  double meanDelayMs = 0.0;        // NaN if nothing was received
  std::vector<PathSummary> paths;  // by path ID; empty without per-path sampling
};

struct MeasurementResult {
  std::uint64_t firstStatisticsEvent = 0;  // µs at START
  std::uint64_t lastStatisticsEvent = 0;   // µs at STOP
  std::vector<FlowResult> flows;
  CpuUsage cpu;  // over exactly START..STOP
  // This process's own CPU over the same interval (the passive's: all its sessions').
  ProcessUsage process;
};

// Writes the scalar file of one side ("active" or "passive").
void writeScalars(OutputFile& out, std::string_view role, const MeasurementResult& result);

struct FlowSnapshot {
  std::uint32_t flowId = 0;
  std::string description;
  double jitterMs = 0.0;
  Counters sent, received, lost;
  // The sending side's transport state now (Flow::snapshot(true); NaN: not asked, or the stack
  // does not tell): the smoothed RTT (ms), the congestion window (bytes) and the cumulative
  // retransmissions; of several paths (MPTCP subflows, SCTP peer addresses) the mean RTT, the
  // sum of the windows and the connection's (else the paths' summed) retransmissions.
  double srttMs = transport::PathSample::kNone, cwnd = transport::PathSample::kNone,
         retransmissions = transport::PathSample::kNone;
};

// Fills a snapshot's srttMs, cwnd and retransmissions from the samples of a flow's paths (see
// FlowSnapshot); leaves them NaN where no sample tells.
void summarisePaths(const std::vector<transport::PathSample>& samples, FlowSnapshot& out);

// The measurement vector: a block of rows (Sent/Received/Lost per flow, then the totals)
// every second and a final block at STOP.
class MeasurementVectorWriter {
public:
  explicit MeasurementVectorWriter(OutputFile file);
  void writeBlock(std::uint64_t now, std::uint64_t start, const std::vector<FlowSnapshot>& flows);
  OutputFile& file() { return file_; }

private:
  void row(std::uint64_t now, double relTime, double interval, long long flowId, const std::string& description,
           double jitter, const char* action, const Counters& abs, const Counters& delta);

  OutputFile file_;
  std::uint64_t line_ = 0;
  std::uint64_t lastBlock_ = 0;
  std::vector<FlowSnapshot> previous_;
  FlowSnapshot previousTotal_;
};

// The per-flow vector: one row per received DATA message.
// A limit on the bytes (uncompressed) that result files may take while they are spooled —
// the passive's temporary files — shared by the writers that draw from it; a budget may draw
// from a larger one as well (a session's from the passive's), and gives back what it took
// when it goes. Thread-safe (vectors are formatted on worker threads).
class SpoolBudget {
public:
  SpoolBudget(std::uint64_t limit, std::string name, std::shared_ptr<SpoolBudget> parent = nullptr);
  ~SpoolBudget();
  SpoolBudget(const SpoolBudget&) = delete;
  SpoolBudget& operator=(const SpoolBudget&) = delete;
  // Takes `bytes` from this budget and its parents; false (nothing taken) if one is used up.
  bool take(std::uint64_t bytes);
  std::uint64_t used() const;
  // The budget that ran out, e.g. "2048 MiB per session (--max-spool)".
  std::string describe() const;

private:
  bool takeLocked(std::uint64_t bytes);
  void release(std::uint64_t bytes);
  std::uint64_t limit_, used_ = 0;
  std::string name_;
  std::shared_ptr<SpoolBudget> parent_;
  const SpoolBudget* exhausted_ = nullptr;
};

// Rows are recorded as fixed-size binary records (a copy, no formatting, on the receive
// path) and spooled to an unnamed scratch file beside the result (bounded memory: one buffer
// of records); flush() formats them into the file, compressing on several threads — after
// the measurement, so that recording does not disturb it. The formatted rows are exactly
// those that formatting each row on arrival gives.
class FlowVectorWriter {
public:
  explicit FlowVectorWriter(OutputFile file);
  void setBudget(std::shared_ptr<SpoolBudget> budget) { budget_ = std::move(budget); }
  void row(const Reception& r, std::uint64_t start, const Counters& cumulative);
  // Formats the recorded rows into the file (compressed on `threads` threads if it is
  // compressed and has many rows); call before committing or reading it back. Rows recorded
  // later are formatted by the next flush().
  void flush(unsigned threads = 1);
  OutputFile& file() { return file_; }
  std::uint64_t rowCount() const { return recorded_; }
  // Bytes of the binary spool so far (what recording costs on disk).
  std::uint64_t spooledBytes() const { return spooled_; }

  struct Record {
    std::uint64_t now, relTime, seqNumber, bytes, packets, frames;  // relTime: µs since start
    std::uint32_t messageBytes, framesCompleted;
    double delayMs, delayDiffMs, jitterMs;
  };

private:
  void spill();

  OutputFile file_;
  std::uint64_t line_ = 0, recorded_ = 0, spooled_ = 0;
  std::vector<Record> records_;  // not spooled yet
  ScratchFile spool_;
  std::string buffer_;
  std::shared_ptr<SpoolBudget> budget_;
};

// The per-path vector of a flow: a row per path (TCP connection, MPTCP subflow, SCTP peer
// address) at every sampling interval, with the transport's own state (see PathSample).
class PathVectorWriter {
public:
  explicit PathVectorWriter(OutputFile file);
  void setBudget(std::shared_ptr<SpoolBudget> budget) { budget_ = std::move(budget); }
  void rows(std::uint64_t now, std::uint64_t start, const std::vector<transport::PathSample>& paths);
  void flush();
  OutputFile& file() { return file_; }
  std::uint64_t rowCount() const { return line_; }

private:
  OutputFile file_;
  std::uint64_t line_ = 0;
  std::string buffer_;
  std::shared_ptr<SpoolBudget> budget_;
};

// The threads that compress a large vector after the measurement: one per core.
unsigned compressionThreads();
// After the measurement: formats every row of a per-flow vector on all cores; when that took
// longer than half a second, logs "<who>: per-flow vector of N rows written in X s (T threads)".
void formatFlowVector(FlowVectorWriter& vector, const std::string& who);

// Transports with per-path state to sample (TCP, MPTCP, SCTP, QUIC; not UDP, DCCP).
bool hasPaths(npmp::Protocol protocol);

// "run.vec.bz2", "active", flow 10 -> "run-paths-active-0000000a-0000.vec.bz2": not matched by
// the globs of per-flow vectors ("run-active-*.vec*").
std::string pathVectorFileName(std::string_view pattern, std::string_view role, std::uint32_t flowId,
                               std::uint16_t streamId);

struct ConfigInfo {
  std::string activeNodeName = "Client", passiveNodeName = "Server";
  std::string scalarPattern, vectorPattern;
  std::vector<flowspec::FlowSpec> flows;  // with IDs assigned
  bool pathVectors = false;               // FLOW<n>_PATHS_VECTOR_*_NODE lines
  std::chrono::milliseconds warmup{0};    // WARMUP (seconds) when > 0
  std::uint64_t seed = 0;                 // SEED (-seed) when > 0
};

void writeConfig(OutputFile& out, const ConfigInfo& info);

}  // namespace npm::measure
