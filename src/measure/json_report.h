// The machine-readable output of the active (--json, --json-stream), documented by the JSON
// Schemas in src/app/schema/ and in netperfmeter(1):
//  * the result document: the run's metadata and, per flow and direction, the figures of both
//    sides' scalar files — taken from their rows (scalar_rows.h) as printed, never re-derived;
//  * the stream: one line (NDJSON) per status interval with the status line's figures per flow.
// Pure: times are passed in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "measure/cpu.h"
#include "measure/scalar_rows.h"
#include "measure/statistics.h"

namespace npm::measure {

constexpr int kJsonSchemaVersion = 1;

struct JsonFlowInfo {
  std::uint32_t flowId = 0;
  std::uint16_t streamId = 0;
  std::string protocol;  // "TCP", "UDP", ...
  std::string description;
  std::string flowspec;           // as given on the command line; empty: not known (a stream sample)
  std::string congestionControl;  // at the active; empty: none (UDP) or not known
  // SCTP: the addresses of the association at the active once it is up (its paths: one per
  // peer address; without -L both sides bind every address of their host, so an association
  // to loopback has more). hasSctpAddresses false: not SCTP, or it never came up.
  bool hasSctpAddresses = false;
  std::vector<std::string> sctpLocalAddresses{}, sctpPeerAddresses{};
};

// The host the active ran on.
struct JsonHost {
  std::string name;     // gethostname()
  std::string kernel;   // uname: sysname and release, e.g. "Linux 6.18.0"
  std::string machine;  // uname: e.g. "x86_64"
};

struct JsonRunInfo {
  std::string version;  // of netperfmeter
  JsonHost host;
  std::uint64_t measurementId = 0;
  std::vector<std::string> commandLine;     // argv, program name first
  std::optional<double> runtime;            // requested (-T), seconds
  double warmup = 0.0;                      // --warmup, seconds (0: none)
  std::uint64_t seed = 0;                   // -seed, given or drawn (0: none, as before)
  std::optional<std::uint64_t> startAt;     // --start-at, µs since the epoch
  std::string remote;                       // as given: "host:port"
  std::string controlProtocol;              // "TCP", "MPTCP", "SCTP (kernel)"; empty: not connected
  std::string controlLocal, controlRemote;  // "address:port"; empty if unknown
  std::vector<std::string> localAddresses;  // -L
  std::string sctpStack;                    // "kernel", "userland"; empty: no SCTP used
  std::vector<JsonFlowInfo> flows;
};

// The result document (one JSON object, with its final newline). `active` and `passive` are
// the rows of each side's scalar file, null where that side has none (a failed run); `error`
// is the run's error, none for a run without one.
std::string resultDocument(const JsonRunInfo& info, const std::vector<ScalarRow>* active,
                           const std::vector<ScalarRow>* passive, const std::optional<std::string>& error, bool indent);

// The stream's first line (with its '\n'): the run's parameters, as the result document has
// them, at START (`start`, microseconds since the epoch).
std::string streamStartLine(const JsonRunInfo& info, std::uint64_t start);
// The stream's last line: how the run ended and, where the active got that far, the result
// document (`document`: compact, as resultDocument(..., false) writes it; empty: null).
std::string streamEndLine(std::uint64_t measurementId, std::uint64_t now, int exitCode,
                          const std::optional<std::string>& error, const std::string& document);

// The end of a run on the console, as iperf3's sender and receiver lines: per flow and
// direction what the sender sent and what the receiver received (bytes and frames), the goodput
// at the receiver and the frames the receiver lost, with their share of those sent; then the
// totals per direction. Taken from the same printed rows as the result document (never
// re-derived), so the console and --json say the same; "n/a" where a side has no rows (a failed
// run, or a passive that sent none). Lines of at most 80 characters for figures of the usual
// size, each with its '\n'.
std::string endOfRunTable(const std::vector<JsonFlowInfo>& flows, const std::vector<ScalarRow>* active,
                          const std::vector<ScalarRow>* passive);

// Decompresses a bzip2 or gzip text (the passive's upload when -scalar ends in .bz2 or .gz);
// plain text as is.
std::string bzip2Text(std::string data);

// What a flow has done so far, for a stream line.
struct JsonFlowSample {
  JsonFlowInfo info;
  Counters transmitted, received, lost;
  double jitterMs = 0.0;
};

// The stream lines of one measurement; rates are over the time since the previous line.
class JsonStream {
public:
  JsonStream(std::uint64_t measurementId, std::uint64_t start)
      : measurementId_(measurementId), start_(start), last_(start) {}
  // One line (with its '\n').
  std::string line(std::uint64_t now, const std::vector<JsonFlowSample>& flows, const CpuUsage& cpu);

private:
  std::uint64_t measurementId_, start_, last_;
  std::vector<JsonFlowSample> previous_;
};

}  // namespace npm::measure
