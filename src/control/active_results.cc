// The active's result files: the config file, its own scalars and vectors, the passive's files
// downloaded after STOP and at each REMOVE_FLOW, and the per-flow statistics printed at the end.
#include "control/active_internal.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "common/clock.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/text.h"

namespace npm::control {

void Active::writeConfig() {
  if (options_.configFile.empty()) return;
  measure::ConfigInfo info;
  info.activeNodeName = options_.activeNodeName;
  info.passiveNodeName = options_.passiveNodeName;
  info.scalarPattern = options_.scalarPattern;
  info.vectorPattern = options_.vectorPattern;
  info.pathVectors = options_.pathInterval.count() > 0;
  info.warmup = options_.warmup;
  info.seed = options_.seed;
  for (const auto& f : flows_) {
    info.flows.push_back(f.spec);
    // What the flow uses (the kernel's default where the FLOWSPEC names none), as in the JSON.
    const transport::DataTransport* transport = transports_.find(f.spec.protocol);
    if (transport != nullptr && transport->congestionControlByName()) {
      info.flows.back().congestionControl = congestionControlOf(f.spec, transports_);
    }
  }
  OutputFile out(options_.configFile, false, 9);
  measure::writeConfig(out, info);
  out.commit();
}

asio::awaitable<void> Active::openOwnFiles() {
  if (!options_.vectorPattern.empty()) {
    measurement_->setVector(measure::MeasurementVectorWriter(
        measure::openResultFile(measure::resultFileName(options_.vectorPattern, "active"))));
  }
  // On each flow's own thread, which may already be receiving.
  const auto flows = flowPointers();
  co_await measure::onOwners(flows, [this](measure::Flow& f, std::size_t) {
    if (samplesPaths(f.parameters().protocol)) f.samplePathsEvery(options_.pathInterval);
    if (options_.vectorPattern.empty()) return;
    f.setVector(measure::FlowVectorWriter(
        measure::openResultFile(measure::resultFileName(options_.vectorPattern, "active", f.flowId(), f.streamId()))));
    if (recordsPaths(f.parameters().protocol)) {
      f.setPathVector(measure::PathVectorWriter(measure::openResultFile(
          measure::pathVectorFileName(options_.vectorPattern, "active", f.flowId(), f.streamId()))));
    }
  });
}

// Without --max-download, a file of the passive may have what this run could make it write, with
// room to spare: a row is at most kRowBytes (the longest rows are the per-message ones, about
// 120 characters), the passive's per-second rows at most kFlowSecondBytes per flow, each flow's
// scalars at most kFlowScalarBytes (a dozen paths included), one per-path vector at most
// kPathsPerFlow paths sampled each --path-interval; one MiB more for headers and what the
// passive adds after the measurement (the drain, the clocks of two hosts).
std::uint64_t Active::downloadLimit(Download kind, const FlowRun* flow) const {
  if (options_.maxDownloadBytes != 0) return options_.maxDownloadBytes;
  constexpr std::uint64_t kBase = 1 << 20, kRowBytes = 512, kFlowSecondBytes = 8 << 10, kFlowScalarBytes = 256 << 10,
                          kPathsPerFlow = 64, kSlackSeconds = 60;
  const std::uint64_t seconds =
      (nowMicros() - std::min(nowMicros(), measurement_->startTime())) / 1000000 + kSlackSeconds;
  switch (kind) {
    case Download::Scalars: return kBase + flows_.size() * kFlowScalarBytes;
    case Download::Vector: return kBase + seconds * flows_.size() * kFlowSecondBytes;
    case Download::FlowVector: {
      // A row per message the passive received (at most what was sent to it), and per message it sent.
      const auto rows = flow->flow->transmitted().total.packets + flow->flow->received().received().packets;
      return kBase + rows * kRowBytes;
    }
    case Download::PathVector: {
      const auto interval = std::max<std::int64_t>(1, options_.pathInterval.count());
      return kBase + (seconds * 1000 / interval + 1) * kPathsPerFlow * kRowBytes;
    }
  }
  return kBase;
}

asio::awaitable<void> Active::download(const std::string& fileName, const char* what, std::uint64_t limit,
                                       std::string* keep) {
  // No file name: kept in memory only (`keep`).
  log::info(std::string("Downloading ") + what + " results" +
            (fileName.empty() ? std::string() : " [" + fileName + "]"));
  // The passive compresses as the name asks (START, IDENTIFY); a reference passive has no gzip
  // and uploads such a file uncompressed, which is compressed here as it arrives.
  OutputFile out;
  const Compression wanted = measure::resultCompression(fileName);
  bool decided = fileName.empty();
  auto open = [&](std::span<const std::uint8_t> first) {
    const bool gzip = first.size() >= 2 && first[0] == 0x1f && first[1] == 0x8b;
    const bool bzip2 = first.size() >= 3 && first[0] == 'B' && first[1] == 'Z' && first[2] == 'h';
    const bool asWanted = wanted == Compression::kNone || (wanted == Compression::kGzip && gzip) ||
                          (wanted == Compression::kBzip2 && bzip2);
    out = asWanted ? OutputFile(fileName, Compression::kNone, 9) : measure::openResultFile(fileName);
    decided = true;
  };
  const std::string name = fileName.empty() ? std::string("the passive's ") + what + " results" : fileName;
  // A passive is a peer like any other: a file may not exceed `limit` (checked before a byte
  // beyond it is written), and one trickled in more slowly than kMinDownloadRate (after a grace
  // period) is given up.
  const auto begin = Clock::now();
  std::uint64_t bytes = 0;
  for (;;) {
    std::optional<npmp::Bytes> message;
    try {
      message = co_await control_->next(kResultsTimeout);
    } catch (const ControlError& e) {
      throw ActiveError(std::string("lost the control connection while downloading ") + name + ": " + e.what());
    }
    if (!message) throw ActiveError("the passive stopped sending " + name);
    const auto decoded = npmp::decode(*message);
    const auto* r = decoded ? std::get_if<npmp::Results>(&*decoded) : nullptr;
    if (r == nullptr) {
      throw ActiveError("expected RESULTS for " + name + ", got " +
                        (decoded ? npmp::typeName((*message)[0]) : decoded.error()));
    }
    if (bytes + r->data.size() > limit) {
      const std::string mib =
          limit % (1 << 20) == 0 ? std::to_string(limit >> 20) + " MiB" : std::to_string(limit) + " bytes";
      throw ActiveError(
          "the passive sends more than " + mib + " for " + name +
          (options_.maxDownloadBytes != 0
               ? std::string(" (--max-download)")
               : std::string(", more than this run could make it write (--max-download=MIB raises the limit)")));
    }
    if (!decided) open(r->data);
    if (out.isOpen()) out.write(r->data.data(), r->data.size());
    if (keep != nullptr) keep->append(reinterpret_cast<const char*>(r->data.data()), r->data.size());
    bytes += r->data.size();
    if (r->eof()) break;
    const double seconds = std::chrono::duration<double>(Clock::now() - begin).count();
    if (seconds > kDownloadGrace.count() && static_cast<double>(bytes) / seconds < kMinDownloadRate) {
      throw ActiveError("the passive sends " + name + " too slowly (" + std::to_string(bytes) + " bytes in " +
                        std::to_string(static_cast<int>(seconds)) + " s)");
    }
  }
  if (out.isOpen()) out.commit();
}

// After STOP: the passive's vector and scalar files, then per flow REMOVE_FLOW and (with
// -vector) its per-flow and per-path vectors. True if the passive lost a per-flow vector.
asio::awaitable<bool> Active::downloadPassiveResults() {
  bool passiveVectorLost = false;
  if (!options_.vectorPattern.empty()) {
    co_await download(measure::resultFileName(options_.vectorPattern, "passive"), "vector",
                      downloadLimit(Download::Vector, nullptr));
  }
  if (!options_.scalarPattern.empty() || json_.wantsPassiveScalars()) {
    co_await download(measure::resultFileName(options_.scalarPattern, "passive"), "scalar",
                      downloadLimit(Download::Scalars, nullptr), &json_.passiveScalars());
  }
  for (auto& f : flows_) {
    npmp::Bytes remove;
    npmp::encode(npmp::RemoveFlow{f.flow->flowId(), measurementId_, f.flow->streamId()}, remove);
    control_->send(std::move(remove));
    if (!options_.vectorPattern.empty()) {
      // The passive answers once it has written the flow's vector: a row per message it
      // received, formatted and compressed after the measurement (a few µs per row on a
      // small host), so the wait grows with what was sent.
      const std::uint64_t rows = f.flow->transmitted().total.packets;
      const auto formatting = std::chrono::microseconds(rows * kPassiveMicrosPerVectorRow);
      if (formatting > std::chrono::seconds(5)) {
        log::info("Waiting for the passive to write the per-flow vector of flow #" + std::to_string(f.flow->flowId()) +
                  " (up to " + std::to_string(rows) + " rows)");
      }
      const auto a = co_await awaitAck(f.flow->flowId(), f.flow->streamId(), "REMOVE_FLOW", kAckTimeout + formatting);
      if (a.status == npmp::kStatusOk || a.status == npmp::kStatusOkPathVectorFollows) {
        co_await download(
            measure::resultFileName(options_.vectorPattern, "passive", f.flow->flowId(), f.flow->streamId()),
            "per-flow vector", downloadLimit(Download::FlowVector, &f));
        if (a.status == npmp::kStatusOkPathVectorFollows) {
          co_await download(
              measure::pathVectorFileName(options_.vectorPattern, "passive", f.flow->flowId(), f.flow->streamId()),
              "per-path vector", downloadLimit(Download::PathVector, &f));
        } else if (recordsPaths(f.flow->parameters().protocol) && !pathsUnsupportedSaid_) {
          pathsUnsupportedSaid_ = true;
          log::info("The passive records no per-path vectors (an older NetPerfMeter?)");
        }
      } else {
        json_.error("Flow #" + std::to_string(f.flow->flowId()) +
                    ": the passive could not keep its per-flow vector (a full disk or its spool limit; see the "
                    "passive's log)");
        passiveVectorLost = true;
      }
    }
  }
  co_return passiveVectorLost;
}

void Active::writeOwnResults(const measure::MeasurementResult& result) {
  if (!options_.scalarPattern.empty()) {
    OutputFile out = measure::openResultFile(measure::resultFileName(options_.scalarPattern, "active"));
    measure::writeScalars(out, "active", result);
    out.commit();
  }
  if (auto* v = measurement_->vector()) v->file().commit();
  for (auto& f : flows_) {
    if (const auto& error = f.flow->vectorError()) throw ActiveError(*error);
    if (auto* v = f.flow->vector()) {
      measure::formatFlowVector(*v, "Flow #" + std::to_string(f.flow->flowId()));
      v->file().commit();
    }
    if (const auto& error = f.flow->pathVectorError()) throw ActiveError(*error);
    if (auto* v = f.flow->pathVector()) {
      v->flush();
      v->file().commit();
    }
  }
}

// The active's own view of each flow, in the debug log (the console's table of both sides is
// JsonOutput::printTable).
void Active::printStatistics(const measure::MeasurementResult& own) const {
  std::map<std::uint32_t, const flowspec::FlowSpec*> specs;  // by flow ID: thousands of flows
  for (const auto& r : flows_) specs.emplace(*r.spec.flowId, &r.spec);
  for (const auto& f : own.flows) {
    const auto& spec = *specs.at(f.flowId);
    auto line = [](const char* what, const measure::Counters& c, std::uint64_t from, std::uint64_t to) {
      const double seconds = to > from ? static_cast<double>(to - from) / 1e6 : 0.0;
      const double s = seconds > 0 ? seconds : 1.0;
      char b[512];
      std::snprintf(
          b, sizeof(b), "  - %-12s %llu bytes (%s, %s), %llu packets (%1.1f/s), %llu frames (%1.1f/s) in %1.3f s", what,
          static_cast<unsigned long long>(c.bytes), scaledBytes(c.bytes).c_str(),
          scaledBitRate(seconds > 0 ? 8.0 * static_cast<double>(c.bytes) / s : 0.0).c_str(),
          static_cast<unsigned long long>(c.packets), seconds > 0 ? static_cast<double>(c.packets) / s : 0.0,
          static_cast<unsigned long long>(c.frames), seconds > 0 ? static_cast<double>(c.frames) / s : 0.0, seconds);
      return std::string(b);
    };
    log::debug("Flow #" + std::to_string(f.flowId) + " (" + npmp::protocolName(spec.protocol) + ", \"" + f.description +
               "\") at the active:");
    log::debug(line("Transmission", f.transmitted.total, f.transmitted.first, f.transmitted.last));
    log::debug(line("Reception", f.received, f.firstReception, f.lastReception));
    log::debug(line("Loss", f.lost, own.firstStatisticsEvent, own.lastStatisticsEvent));
  }
}

}  // namespace npm::control
