#include "control/json_output.h"

#include "common/fileio.h"
#include "common/log.h"
#include "measure/scalar_rows.h"

namespace npm::control {

JsonOutput::JsonOutput(const ActiveOptions& o) : options_(o) {
  info_.version = NPM_VERSION;
  info_.commandLine.push_back("netperfmeter");
  info_.commandLine.insert(info_.commandLine.end(), o.commandLine.begin(), o.commandLine.end());
  info_.runtime = o.runtime;
  info_.warmup = static_cast<double>(o.warmup.count()) / 1000.0;
  info_.remote = o.remoteName;
  for (const auto& a : o.localAddresses) info_.localAddresses.push_back(a.to_string());
  for (const auto& f : o.flows) {
    info_.flows.push_back({*f.flowId, f.streamId, npmp::protocolName(f.protocol), f.description});
  }
}

std::FILE* JsonOutput::humanOut() const { return options_.jsonFile == "-" || options_.jsonStream ? stderr : stdout; }

void JsonOutput::error(const std::string& message) {
  log::error(message);
  if (!error_) error_ = message;
}

void JsonOutput::control(std::string protocol, std::string local, std::string remote) {
  info_.controlProtocol = std::move(protocol);
  info_.controlLocal = std::move(local);
  info_.controlRemote = std::move(remote);
}

measure::JsonFlowSample JsonOutput::sample(const measure::Flow& f) {
  measure::JsonFlowSample s;
  s.info = {f.flowId(), f.streamId(), npmp::protocolName(f.parameters().protocol), f.parameters().description};
  s.transmitted = f.transmitted().total;
  s.received = f.received().received();
  s.lost = f.received().lost();
  s.jitterMs = f.received().jitterMs();
  return s;
}

void JsonOutput::tick(std::uint64_t measurementId, std::uint64_t now, std::uint64_t start,
                      const std::vector<measure::JsonFlowSample>& samples, const measure::CpuUsage& cpu) {
  if (!options_.jsonStream) return;
  if (!stream_) stream_ = std::make_unique<measure::JsonStream>(measurementId, start);
  const std::string line = stream_->line(now, samples, cpu);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

int JsonOutput::finish(int exitCode, std::uint64_t measurementId, const measure::MeasurementResult* own) {
  if (options_.jsonFile.empty()) return exitCode;
  if (exitCode != 0 && !error_) error_ = "the measurement failed (see the log)";
  info_.measurementId = measurementId;
  std::vector<measure::ScalarRow> activeRows, passiveRows;
  if (own != nullptr) activeRows = measure::scalarRows("active", *own);
  bool havePassive = false;
  if (!passiveScalars_.empty()) {
    try {
      passiveRows = measure::parseScalarRows(measure::bzip2Text(std::move(passiveScalars_)));
      havePassive = true;
    } catch (const std::exception& e) {
      error(std::string("the passive's scalar file: ") + e.what());
      exitCode = 1;
    }
  }
  const bool toStdout = options_.jsonFile == "-";
  // Indented for a file or a terminal; one line when it follows the stream's lines.
  const std::string document = measure::resultDocument(info_, own != nullptr ? &activeRows : nullptr,
                                                       havePassive ? &passiveRows : nullptr, error_,
                                                       !(toStdout && options_.jsonStream));
  try {
    if (toStdout) {
      std::fwrite(document.data(), 1, document.size(), stdout);
      if (std::fflush(stdout) != 0) throw FileError("cannot write the JSON document to standard output");
    } else {
      OutputFile out(options_.jsonFile, false, 9);
      out.write(document);
      out.commit();
    }
  } catch (const std::exception& e) {
    log::error(e.what());
    return 1;
  }
  return exitCode;
}

}  // namespace npm::control
