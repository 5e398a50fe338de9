#include "control/json_output.h"

#include <sys/utsname.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/log.h"
#include "common/clock.h"
#include "control/flow_mapping.h"
#include "measure/scalar_rows.h"

namespace npm::control {

namespace {

measure::JsonHost thisHost() {
  measure::JsonHost host;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) == 0) host.name = name;
  struct utsname u {};
  if (::uname(&u) == 0) {
    host.kernel = std::string(u.sysname) + " " + u.release;
    host.machine = u.machine;
  }
  return host;
}

}  // namespace

std::string congestionControlOf(const flowspec::FlowSpec& f, const transport::Registry& transports) {
  const transport::DataTransport* transport = transports.find(f.protocol);
  return transport != nullptr ? transport->congestionControl(toAddFlow(f, 0)) : std::string();
}

JsonOutput::JsonOutput(const ActiveOptions& o, const transport::Registry& transports) : options_(o) {
  info_.version = NPM_VERSION;
  info_.host = thisHost();
  info_.commandLine.push_back("netperfmeter");
  info_.commandLine.insert(info_.commandLine.end(), o.commandLine.begin(), o.commandLine.end());
  info_.runtime = o.runtime;
  info_.warmup = static_cast<double>(o.warmup.count()) / 1000.0;
  info_.seed = o.seed;
  info_.startAt = o.startAt;
  info_.remote = o.remoteName;
  for (const auto& a : o.localAddresses) info_.localAddresses.push_back(a.to_string());
  for (const auto& f : o.flows) {
    info_.flows.push_back({*f.flowId, f.streamId, npmp::protocolName(f.protocol), f.description, f.text,
                           congestionControlOf(f, transports)});
  }
}

void JsonOutput::sctpAddresses(std::uint32_t flowId, const std::vector<asio::ip::address>& local,
                               const std::vector<asio::ip::address>& peer) {
  for (auto& f : info_.flows) {
    if (f.flowId != flowId) continue;
    f.hasSctpAddresses = true;
    f.sctpLocalAddresses.clear();
    f.sctpPeerAddresses.clear();
    for (const auto& a : local) f.sctpLocalAddresses.push_back(a.to_string());
    for (const auto& a : peer) f.sctpPeerAddresses.push_back(a.to_string());
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
  s.info.flowId = f.flowId();
  s.info.streamId = f.streamId();
  s.info.protocol = npmp::protocolName(f.parameters().protocol);
  s.info.description = f.parameters().description;
  s.transmitted = f.transmitted().total;
  s.received = f.received().received();
  s.lost = f.received().lost();
  s.jitterMs = f.received().jitterMs();
  return s;
}

void JsonOutput::start(std::uint64_t measurementId, std::uint64_t start) {
  if (!options_.jsonStream) return;
  info_.measurementId = measurementId;
  const std::string line = measure::streamStartLine(info_, start);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

void JsonOutput::tick(std::uint64_t measurementId, std::uint64_t now, std::uint64_t start,
                      const std::vector<measure::JsonFlowSample>& samples, const measure::CpuUsage& cpu) {
  if (!options_.jsonStream) return;
  if (!stream_) stream_ = std::make_unique<measure::JsonStream>(measurementId, start);
  const std::string line = stream_->line(now, samples, cpu);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

const std::vector<measure::ScalarRow>* JsonOutput::passiveRows() {
  if (!passiveParsed_ && !passiveScalars_.empty()) {
    try {
      passiveRows_ = measure::parseScalarRows(measure::bzip2Text(std::move(passiveScalars_)));
    } catch (const std::exception& e) {
      error(std::string("the passive's scalar file: ") + e.what());
      passiveUnreadable_ = true;
    }
  }
  passiveParsed_ = true;
  return passiveRows_ ? &*passiveRows_ : nullptr;
}

void JsonOutput::printTable(const measure::MeasurementResult* own) {
  if (!log::enabled(log::Info)) return;
  std::vector<measure::ScalarRow> activeRows;
  if (own != nullptr) activeRows = measure::scalarRows("active", *own);
  const std::string table = measure::endOfRunTable(info_.flows, own != nullptr ? &activeRows : nullptr, passiveRows());
  std::fwrite(table.data(), 1, table.size(), humanOut());
  std::fflush(humanOut());
}

int JsonOutput::finish(int exitCode, std::uint64_t measurementId, const measure::MeasurementResult* own) {
  if (options_.jsonFile.empty() && !options_.jsonStream) return exitCode;
  if (exitCode != 0 && !error_) error_ = "the measurement failed (see the log)";
  info_.measurementId = measurementId;
  std::vector<measure::ScalarRow> activeRows;
  if (own != nullptr) activeRows = measure::scalarRows("active", *own);
  const auto* passive = passiveRows();
  if (passiveUnreadable_) exitCode = 1;
  auto document = [&](bool indent) {
    return measure::resultDocument(info_, own != nullptr ? &activeRows : nullptr, passive, error_, indent);
  };
  // The document is written to a file (indented), to standard output (indented, unless the
  // stream's end line carries it there) and in the stream's end line (one line).
  const bool toFile = !options_.jsonFile.empty() && options_.jsonFile != "-";
  const bool toStdout = options_.jsonFile == "-" && !options_.jsonStream;
  int written = exitCode;
  try {
    if (toFile) {
      OutputFile out(options_.jsonFile, false, 9);
      out.write(document(true));
      out.commit();
    }
  } catch (const std::exception& e) {
    log::error(e.what());
    written = 1;
  }
  std::string line;
  if (toStdout)
    line = document(true);
  else if (options_.jsonStream)
    line = measure::streamEndLine(measurementId, nowMicros(), written, error_, document(false));
  if (!line.empty()) {
    std::fwrite(line.data(), 1, line.size(), stdout);
    if (std::fflush(stdout) != 0) {
      log::error("cannot write the JSON output to standard output");
      return 1;
    }
  }
  return written;
}

}  // namespace npm::control
