// The active's JSON output (--json, --json-stream): what the run loop tells it along the way
// (errors, the control connection, the SCTP stack, the passive's scalar file) and the writing
// of the stream lines and the result document. The document itself is measure/json_report.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "control/active_options.h"
#include "measure/flow.h"
#include "measure/json_report.h"
#include "measure/results.h"
#include "transport/data_transport.h"

namespace npm::control {

// The congestion control a flow's sender uses at the active, as its transport tells from the
// flow's ADD_FLOW (DataTransport::congestionControl: what the FLOWSPEC asks for, or the stack's
// default). The JSON document and the config file say this one.
std::string congestionControlOf(const flowspec::FlowSpec& f, const transport::Registry& transports);

class JsonOutput {
public:
  JsonOutput(const ActiveOptions& options, const transport::Registry& transports);

  // Where the human output (status line) goes: standard error if JSON is on standard output.
  std::FILE* humanOut() const;
  // The passive's scalar file is needed (and downloaded into memory) even without -scalar: for
  // the document, and for the end-of-run table unless the log is quieter than info (-quiet).
  bool wantsPassiveScalars() const {
    return !options_.jsonFile.empty() || options_.jsonStream || log::enabled(log::Info);
  }

  // The first error of the run is the document's "error".
  void error(const std::string& message);
  void control(std::string protocol, std::string local, std::string remote);
  void sctpStack(const char* name) { info_.sctpStack = name; }
  // The addresses of flow `flowId`'s SCTP association once it is up (its paths).
  void sctpAddresses(std::uint32_t flowId, const std::vector<asio::ip::address>& local,
                     const std::vector<asio::ip::address>& peer);
  // The passive's scalar file as uploaded (bzip2 or plain).
  std::string& passiveScalars() { return passiveScalars_; }

  // What a stream line says of a flow: taken on the flow's own thread.
  static measure::JsonFlowSample sample(const measure::Flow& f);
  // The stream's start line, at START (nothing without --json-stream).
  void start(std::uint64_t measurementId, std::uint64_t start);
  // A stream line for the flows now (nothing without --json-stream).
  void tick(std::uint64_t measurementId, std::uint64_t now, std::uint64_t start,
            const std::vector<measure::JsonFlowSample>& samples, const measure::CpuUsage& cpu);
  // The end-of-run table of both sides (measure::endOfRunTable) on the human output, unless
  // the log is quieter than info (-quiet). `own` is null if the active has no results.
  void printTable(const measure::MeasurementResult* own);
  // Writes the result document (nothing without --json) and the stream's end line (nothing
  // without --json-stream), which carries the document too: with both on standard output, the
  // document is written once, in the end line. `own` is null if the active has no results.
  // Returns the exit code: 1 if the document could not be written.
  int finish(int exitCode, std::uint64_t measurementId, const measure::MeasurementResult* own);

private:
  const ActiveOptions& options_;
  measure::JsonRunInfo info_;
  std::optional<std::string> error_;  // the run's first
  std::string passiveScalars_;
  // The rows of passiveScalars_, parsed once (none: not uploaded, or not readable: error_ says why).
  const std::vector<measure::ScalarRow>* passiveRows();
  bool passiveParsed_ = false, passiveUnreadable_ = false;
  std::optional<std::vector<measure::ScalarRow>> passiveRows_;
  std::unique_ptr<measure::JsonStream> stream_;
};

}  // namespace npm::control
