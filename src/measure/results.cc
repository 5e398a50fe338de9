#include "measure/results.h"

#include <algorithm>
#include <chrono>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "flowspec/random.h"
#include "measure/scalar_rows.h"

namespace npm::measure {

std::string resultFileName(std::string_view pattern, std::string_view role, std::optional<std::uint32_t> flowId,
                           std::uint16_t streamId) {
  if (pattern.empty()) return {};
  // The suffix starts at the last '.' of the file-name part; ".bz2" (and ".gz") extends it to
  // the dot before.
  const std::size_t slash = pattern.rfind('/');
  const std::size_t nameStart = slash == std::string_view::npos ? 0 : slash + 1;
  std::size_t dot = pattern.rfind('.');
  if (dot != std::string_view::npos && dot >= nameStart &&
      (pattern.substr(dot) == ".bz2" || pattern.substr(dot) == ".gz")) {
    const std::size_t before = dot == 0 ? std::string_view::npos : pattern.rfind('.', dot - 1);
    if (before != std::string_view::npos && before >= nameStart) dot = before;
  }
  if (dot == std::string_view::npos || dot < nameStart) dot = pattern.size();
  std::string name(pattern.substr(0, dot));
  name += '-';
  name += role;
  if (flowId) {
    char extension[32];
    std::snprintf(extension, sizeof(extension), "-%08x-%04x", *flowId, streamId);
    name += extension;
  }
  name += pattern.substr(dot);
  return name;
}

Compression resultCompression(std::string_view name) {
  if (hasBz2Suffix(name)) return Compression::kBzip2;
  if (name.size() >= 3 && name.substr(name.size() - 3) == ".gz") return Compression::kGzip;
  return Compression::kNone;
}

int resultLevel(Compression compression) { return compression == Compression::kGzip ? kResultGzipLevel : 9; }

OutputFile openResultFile(const std::string& path) {
  const Compression c = resultCompression(path);
  return OutputFile(path, c, resultLevel(c));
}

OutputFile anonymousResultFile(Compression compression) {
  return OutputFile::anonymous(compression, resultLevel(compression));
}

std::string shellQuote(std::string_view value) {
  std::string out;
  out.reserve(value.size() + 2);
  out += '"';
  for (char c : value) {
    if (c == '\\' || c == '"' || c == '$' || c == '`') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

void writeScalars(OutputFile& out, std::string_view role, const MeasurementResult& r) {
  for (const ScalarRow& row : scalarRows(role, r)) out.write(formatScalarRow(row));
}

// ------------------------------------------------------------ measurement vector

MeasurementVectorWriter::MeasurementVectorWriter(OutputFile file) : file_(std::move(file)) {
  file_.write(
      "AbsTime\tRelTime\tInterval\tFlowID\tDescription\tJitter\tAction\tAbsBytes\tAbsPackets\t"
      "AbsFrames\tRelBytes\tRelPackets\tRelFrames\n");
}

void MeasurementVectorWriter::row(std::uint64_t now, double rel, double interval, long long flowId,
                                  const std::string& description, double jitter, const char* action,
                                  const Counters& abs, const Counters& delta) {
  file_.printf("%06llu\t%llu\t%1.6f\t%1.6f\t%lld\t%s\t%1.3f\t\"%s\"\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\n",
               static_cast<unsigned long long>(++line_), static_cast<unsigned long long>(now), rel, interval, flowId,
               shellQuote(description).c_str(), jitter, action, static_cast<unsigned long long>(abs.bytes),
               static_cast<unsigned long long>(abs.packets), static_cast<unsigned long long>(abs.frames),
               static_cast<unsigned long long>(delta.bytes), static_cast<unsigned long long>(delta.packets),
               static_cast<unsigned long long>(delta.frames));
}

void summarisePaths(const std::vector<transport::PathSample>& samples, FlowSnapshot& out) {
  double rttSum = 0.0, cwndSum = 0.0, retransmissionSum = 0.0, connectionRetransmissions = transport::PathSample::kNone;
  int rtts = 0, cwnds = 0, retransmissions = 0;
  for (const auto& s : samples) {
    if (s.connection()) {
      connectionRetransmissions = s.retransmissions;
      continue;
    }
    if (!std::isnan(s.srttMs)) rttSum += s.srttMs, ++rtts;
    if (!std::isnan(s.cwnd)) cwndSum += s.cwnd, ++cwnds;
    if (!std::isnan(s.retransmissions)) retransmissionSum += s.retransmissions, ++retransmissions;
  }
  out.srttMs = rtts > 0 ? rttSum / rtts : transport::PathSample::kNone;
  out.cwnd = cwnds > 0 ? cwndSum : transport::PathSample::kNone;
  out.retransmissions = !std::isnan(connectionRetransmissions) ? connectionRetransmissions
                        : retransmissions > 0                  ? retransmissionSum
                                                               : transport::PathSample::kNone;
}

void MeasurementVectorWriter::writeBlock(std::uint64_t now, std::uint64_t start,
                                         const std::vector<FlowSnapshot>& flows) {
  const double rel = now > start ? static_cast<double>(now - start) / 1e6 : 0.0;
  const double interval =
      lastBlock_ == 0 ? 0.0 : (now > lastBlock_ ? static_cast<double>(now - lastBlock_) / 1e6 : 0.0);
  FlowSnapshot total;
  total.description = "Total";
  if (previous_.size() != flows.size()) previous_.assign(flows.size(), FlowSnapshot{});
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const FlowSnapshot& f = flows[i];
    const FlowSnapshot& p = previous_[i];
    row(now, rel, interval, f.flowId, f.description, f.jitterMs, "Sent", f.sent, f.sent - p.sent);
    row(now, rel, interval, f.flowId, f.description, f.jitterMs, "Received", f.received, f.received - p.received);
    const Counters lostDelta = {f.lost.bytes >= p.lost.bytes ? f.lost.bytes - p.lost.bytes : 0,
                                f.lost.packets >= p.lost.packets ? f.lost.packets - p.lost.packets : 0,
                                f.lost.frames >= p.lost.frames ? f.lost.frames - p.lost.frames : 0};
    row(now, rel, interval, f.flowId, f.description, f.jitterMs, "Lost", f.lost, lostDelta);
    total.sent += f.sent;
    total.received += f.received;
    total.lost += f.lost;
  }
  const FlowSnapshot& p = previousTotal_;
  row(now, rel, interval, -1, "Total", 0.0, "Sent", total.sent, total.sent - p.sent);
  row(now, rel, interval, -1, "Total", 0.0, "Received", total.received, total.received - p.received);
  const Counters lostDelta = {total.lost.bytes >= p.lost.bytes ? total.lost.bytes - p.lost.bytes : 0,
                              total.lost.packets >= p.lost.packets ? total.lost.packets - p.lost.packets : 0,
                              total.lost.frames >= p.lost.frames ? total.lost.frames - p.lost.frames : 0};
  row(now, rel, interval, -1, "Total", 0.0, "Lost", total.lost, lostDelta);
  previous_ = flows;
  previousTotal_ = total;
  lastBlock_ = now;
}

// ---------------------------------------------------------------- per-flow vector

SpoolBudget::SpoolBudget(std::uint64_t limit, std::string name, std::shared_ptr<SpoolBudget> parent)
    : limit_(limit), name_(std::move(name)), parent_(std::move(parent)) {}

namespace {
// Budgets are drawn from by the network thread and by the workers that format vectors after
// a measurement; one lock for all (they are taken a few times per megabyte).
std::mutex budgetMutex;
}  // namespace

SpoolBudget::~SpoolBudget() {
  std::lock_guard lock(budgetMutex);
  if (parent_) parent_->release(used_);
}

std::uint64_t SpoolBudget::used() const {
  std::lock_guard lock(budgetMutex);
  return used_;
}

bool SpoolBudget::take(std::uint64_t bytes) {
  std::lock_guard lock(budgetMutex);
  return takeLocked(bytes);
}

bool SpoolBudget::takeLocked(std::uint64_t bytes) {
  if (used_ + bytes > limit_) {
    exhausted_ = this;
    return false;
  }
  if (parent_ && !parent_->takeLocked(bytes)) {
    exhausted_ = parent_->exhausted_;
    return false;
  }
  used_ += bytes;
  return true;
}

void SpoolBudget::release(std::uint64_t bytes) { used_ -= std::min(bytes, used_); }

std::string SpoolBudget::describe() const {
  std::lock_guard lock(budgetMutex);
  const SpoolBudget* b = exhausted_ != nullptr ? exhausted_ : this;
  return std::to_string(b->limit_ >> 20) + " MiB " + b->name_;
}

namespace {
constexpr std::size_t kRecordsPerSpill = 8192;  // 640 KiB

void appendUnsigned(std::string& s, std::uint64_t v) {
  char b[24];
  auto [end, ec] = std::to_chars(b, b + sizeof(b), v);
  s.append(b, end);
}
void appendFixed(std::string& s, double v, int precision) {
  char b[64];
  auto [end, ec] = std::to_chars(b, b + sizeof(b), v, std::chars_format::fixed, precision);
  if (ec != std::errc()) {
    s += "nan";
    return;
  }
  s.append(b, end);
}

// Writes a vector writer's buffered rows, drawing them from its spool budget (if it has one).
void flushBuffered(OutputFile& file, std::string& buffer, SpoolBudget* budget, const char* what) {
  if (budget != nullptr && !budget->take(buffer.size())) {
    throw FileError(std::string(what) + ": the passive's result spool is full (" + budget->describe() + ")");
  }
  file.write(buffer);
  buffer.clear();
}

void formatFlowRow(std::string& s, std::uint64_t line, const FlowVectorWriter::Record& r) {
  char number[24];
  std::snprintf(number, sizeof(number), "%06llu\t", static_cast<unsigned long long>(line));
  s += number;
  appendUnsigned(s, r.now);
  s += '\t';
  appendFixed(s, static_cast<double>(r.relTime) / 1e6, 6);
  s += '\t';
  appendUnsigned(s, r.seqNumber);
  s += '\t';
  appendUnsigned(s, r.bytes);
  s += '\t';
  appendUnsigned(s, r.packets);
  s += '\t';
  appendUnsigned(s, r.frames);
  s += '\t';
  appendUnsigned(s, r.messageBytes);
  s += "\t1\t";
  appendUnsigned(s, r.framesCompleted);
  s += '\t';
  appendFixed(s, r.delayMs, 3);
  s += '\t';
  appendFixed(s, r.delayDiffMs, 3);
  s += '\t';
  appendFixed(s, r.jitterMs, 3);
  s += '\n';
}
}  // namespace

FlowVectorWriter::FlowVectorWriter(OutputFile file)
    : file_(std::move(file)), spool_(file_.anonymous() ? std::string() : file_.path()) {
  file_.write(
      "AbsTime\tRelTime\tSeqNumber\tAbsBytes\tAbsPackets\tAbsFrames\tRelBytes\tRelPackets\tRelFrames\t"
      "Delay\tPrevPacketDelayDiff\tJitter\n");
  records_.reserve(kRecordsPerSpill);
}

void FlowVectorWriter::row(const Reception& r, std::uint64_t start, const Counters& c) {
  records_.push_back(Record{r.now, r.now > start ? r.now - start : 0, r.seqNumber, c.bytes, c.packets, c.frames,
                            static_cast<std::uint32_t>(r.bytes), static_cast<std::uint32_t>(r.framesCompleted),
                            r.delayMs, r.delayDiffMs, r.jitterMs});
  ++recorded_;
  if (records_.size() >= kRecordsPerSpill) spill();
}

unsigned compressionThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

void formatFlowVector(FlowVectorWriter& vector, const std::string& who) {
  const auto began = std::chrono::steady_clock::now();
  vector.flush(compressionThreads());
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - began;
  if (took > std::chrono::milliseconds(500)) {
    char line[96];
    std::snprintf(line, sizeof(line), ": per-flow vector of %llu rows written in %.1f s (%u threads)",
                  static_cast<unsigned long long>(vector.rowCount()), took.count(), compressionThreads());
    log::info(who + line);
  }
}

void FlowVectorWriter::spill() {
  if (records_.empty()) return;
  const std::size_t bytes = records_.size() * sizeof(Record);
  if (budget_ != nullptr && !budget_->take(bytes)) {
    throw FileError("per-flow vector: the passive's result spool is full (" + budget_->describe() + ")");
  }
  spool_.append(records_.data(), bytes);
  spooled_ += bytes;
  records_.clear();
}

void FlowVectorWriter::flush(unsigned threads) {
  spill();
  // Many rows are worth several independent bzip2 streams; a short vector stays one stream.
  if (spool_.size() / sizeof(Record) >= 100000) file_.compressInParallel(threads);
  std::vector<Record> chunk(kRecordsPerSpill);
  for (std::uint64_t offset = 0; offset < spool_.size();) {
    const std::size_t n = spool_.read(offset, chunk.data(), chunk.size() * sizeof(Record));
    offset += n;
    for (std::size_t i = 0; i < n / sizeof(Record); ++i) formatFlowRow(buffer_, ++line_, chunk[i]);
    if (buffer_.size() >= 512 * 1024) flushBuffered(file_, buffer_, budget_.get(), "per-flow vector");
  }
  flushBuffered(file_, buffer_, budget_.get(), "per-flow vector");
  spool_.clear();
}

PathVectorWriter::PathVectorWriter(OutputFile file) : file_(std::move(file)) {
  std::string header;
  for (std::string_view column : kPathIdentityColumns) (header += column) += '\t';
  for (const PathCounter& c : kPathCounters) (header += c.column) += '\t';
  header.back() = '\n';
  file_.write(header);
}

namespace {
void appendValue(std::string& s, double v, int precision) {
  if (std::isnan(v)) {
    s += "NA";  // what R reads as missing
  } else {
    appendFixed(s, v, precision);
  }
}
}  // namespace

void PathVectorWriter::rows(std::uint64_t now, std::uint64_t start, const std::vector<transport::PathSample>& paths) {
  std::string& s = buffer_;
  for (const auto& p : paths) {
    char line[16];
    std::snprintf(line, sizeof(line), "%06llu\t", static_cast<unsigned long long>(++line_));
    s += line;
    appendUnsigned(s, now);
    s += '\t';
    appendFixed(s, now > start ? static_cast<double>(now - start) / 1e6 : 0.0, 6);
    s += '\t';
    s += std::to_string(p.id);
    s += '\t' + p.local + '\t' + p.remote + '\t' + p.state;
    for (const PathCounter& c : kPathCounters) {
      s += '\t';
      appendValue(s, p.*c.field, c.decimals);
    }
    s += '\n';
  }
}

void PathVectorWriter::flush() { flushBuffered(file_, buffer_, budget_.get(), "per-path vector"); }

void PathSummary::Mean::add(double v) {
  if (std::isnan(v)) return;
  sum += v;
  ++samples;
}

void PathSummary::add(const transport::PathSample& s) {
  ++samples;
  for (std::size_t i = 0; i < kPathCounterCount; ++i) {
    const double v = s.*kPathCounters[i].field;
    if (kPathCounters[i].kind == PathSummaryKind::kMean) means_[i].add(v);
    if (kPathCounters[i].kind == PathSummaryKind::kCounter) last_[i] = v;
  }
}

void PathSummary::restart() {
  samples = 0;
  means_.fill(Mean{});
  base_ = last_;
}

double PathSummary::counted(std::size_t index) const {
  const double value = last_[index], base = base_[index];
  if (std::isnan(value)) return transport::PathSample::kNone;
  return std::isnan(base) ? value : std::max(0.0, value - base);
}

bool hasPaths(npmp::Protocol protocol) {
  return protocol == npmp::Protocol::TCP || protocol == npmp::Protocol::MPTCP || protocol == npmp::Protocol::SCTP ||
         protocol == npmp::Protocol::QUIC;
}

std::string pathVectorFileName(std::string_view pattern, std::string_view role, std::uint32_t flowId,
                               std::uint16_t streamId) {
  return resultFileName(pattern, "paths-" + std::string(role), flowId, streamId);
}

// ------------------------------------------------------------------- config file

void writeConfig(OutputFile& out, const ConfigInfo& info) {
  out.printf("NUM_FLOWS=%zu\n", info.flows.size());
  out.write("NAME_ACTIVE_NODE=" + shellQuote(info.activeNodeName) + "\n");
  out.write("NAME_PASSIVE_NODE=" + shellQuote(info.passiveNodeName) + "\n");
  out.write("SCALAR_ACTIVE_NODE=" + shellQuote(resultFileName(info.scalarPattern, "active")) + "\n");
  out.write("SCALAR_PASSIVE_NODE=" + shellQuote(resultFileName(info.scalarPattern, "passive")) + "\n");
  out.write("VECTOR_ACTIVE_NODE=" + shellQuote(resultFileName(info.vectorPattern, "active")) + "\n");
  out.write("VECTOR_PASSIVE_NODE=" + shellQuote(resultFileName(info.vectorPattern, "passive")) + "\n");
  // Not in the reference: the warm-up that the scalars leave out (--warmup), in seconds, and
  // the run's seed (-seed, given or drawn), with which -seed repeats its random choices.
  if (info.warmup.count() > 0) out.printf("WARMUP=%.3f\n", static_cast<double>(info.warmup.count()) / 1000.0);
  if (info.seed > 0) out.printf("SEED=%llu\n", static_cast<unsigned long long>(info.seed));
  out.write("\n");
  for (const auto& f : info.flows) {
    const std::string p = "FLOW" + std::to_string(f.flowId.value_or(0));
    auto traffic = [&](const char* direction, const flowspec::Traffic& t) {
      for (int i = 0; i < 4; ++i) {
        out.printf("%s_%s_FRAME_RATE_VALUE%d=%f\n", p.c_str(), direction, i + 1, t.rate.values[i]);
      }
      out.printf("%s_%s_FRAME_RATE_RNG_ID=%u\n", p.c_str(), direction, t.rate.rng);
      out.printf("%s_%s_FRAME_RATE_RNG_NAME=\"%s\"\n", p.c_str(), direction, flowspec::configName(t.rate.rng));
      for (int i = 0; i < 4; ++i) {
        out.printf("%s_%s_FRAME_SIZE_VALUE%d=%f\n", p.c_str(), direction, i + 1, t.size.values[i]);
      }
      out.printf("%s_%s_FRAME_SIZE_RNG=%u\n", p.c_str(), direction, t.size.rng);
      out.printf("%s_%s_FRAME_SIZE_RNG_NAME=\"%s\"\n", p.c_str(), direction, flowspec::configName(t.size.rng));
    };
    out.write(p + "_DESCRIPTION=" + shellQuote(f.description) + "\n");
    out.printf("%s_PROTOCOL=\"%s\"\n", p.c_str(), npmp::protocolName(f.protocol));
    traffic("OUTBOUND", f.outbound);
    traffic("INBOUND", f.inbound);
    out.printf("%s_RELIABLE=%f\n", p.c_str(), f.reliable);
    out.printf("%s_ORDERED=%f\n", p.c_str(), f.ordered);
    out.printf("%s_NODELAY=\"%s\"\n", p.c_str(), f.noDelay ? "on" : "off");
    out.printf("%s_DEBUG=\"%s\"\n", p.c_str(), f.debug ? "on" : "off");
    out.write(p + "_CC=" + shellQuote(f.congestionControl.empty() ? "default" : f.congestionControl) + "\n");
    out.write(p + "_VECTOR_ACTIVE_NODE=" +
              shellQuote(resultFileName(info.vectorPattern, "active", f.flowId, f.streamId)) + "\n");
    out.write(p + "_VECTOR_PASSIVE_NODE=" +
              shellQuote(resultFileName(info.vectorPattern, "passive", f.flowId, f.streamId)) + "\n");
    if (info.pathVectors && !info.vectorPattern.empty() && hasPaths(f.protocol)) {
      const std::uint32_t id = f.flowId.value_or(0);
      out.write(p + "_PATHS_VECTOR_ACTIVE_NODE=" +
                shellQuote(pathVectorFileName(info.vectorPattern, "active", id, f.streamId)) + "\n");
      out.write(p + "_PATHS_VECTOR_PASSIVE_NODE=" +
                shellQuote(pathVectorFileName(info.vectorPattern, "passive", id, f.streamId)) + "\n");
    }
  }
  out.write("\n");
}

}  // namespace npm::measure
