#include "measure/json_report.h"

#include <cinttypes>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <map>
#include <string_view>
#include <utility>

#include "common/fileio.h"
#include "common/json.h"
#include "common/scalar_line.h"
#include "common/text.h"
#include "measure/path_counters.h"

namespace npm::measure {

namespace {

using Rows = std::map<std::pair<std::string, std::string>, std::string>;  // (object, name) -> value

Rows index(const std::vector<ScalarRow>* rows) {
  Rows out;
  if (rows != nullptr) {
    for (const auto& r : *rows) out[{r.object, r.name}] = r.value;
  }
  return out;
}

std::string paddedHex64(std::uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof(b), "%016" PRIx64, v);
  return b;
}

std::string isoTime(std::uint64_t micros) {
  const std::time_t seconds = static_cast<std::time_t>(micros / 1000000);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char b[64];
  const std::size_t n = std::strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(b + n, sizeof(b) - n, ".%06uZ", static_cast<unsigned>(micros % 1000000));
  return b;
}

// "Hardware Interrupts" -> "hardware_interrupts"
std::string keyOf(const std::string& name) {
  std::string key;
  for (char c : name) key += c == ' ' ? '_' : static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return key;
}

// One side's scalar object (e.g. "netPerfMeter.passive.flow[3]") as JSON members.
class Side {
public:
  Side(const Rows& rows, std::string object) : rows_(rows), object_(std::move(object)) {}
  bool has(const std::string& name) const { return rows_.count({object_, name}) != 0; }
  // "key": the printed value (null if the row is missing or not a number, e.g. nan).
  void field(json::Writer& w, std::string_view key, const std::string& name) const {
    const auto it = rows_.find({object_, name});
    w.key(key);
    if (it == rows_.end())
      w.null();
    else
      w.printedNumber(it->second);
  }

private:
  const Rows& rows_;
  std::string object_;
};

// Counts and rates of `what` ("Transmitted", "Received", "Lost") at one side; null if absent.
void counts(json::Writer& w, const char* key, const Side& side, const std::string& what, bool bitRate, bool rates,
            const char* first = nullptr, const char* last = nullptr) {
  w.key(key);
  if (!side.has(what + " Bytes")) {
    w.null();
    return;
  }
  w.beginObject();
  if (first != nullptr) {
    side.field(w, "first_us", first);
    side.field(w, "last_us", last);
  }
  side.field(w, "bytes", what + " Bytes");
  side.field(w, "packets", what + " Packets");
  side.field(w, "frames", what + " Frames");
  if (rates) {
    if (bitRate) side.field(w, "bit_rate", what + " Bit Rate");
    side.field(w, "byte_rate", what + " Byte Rate");
    side.field(w, "packet_rate", what + " Packet Rate");
    side.field(w, "frame_rate", what + " Frame Rate");
  }
  w.endObject();
}

// One direction of a flow: the sender's transmission, the receiver's reception, loss,
// jitter and delay (both measured by the receiver).
void direction(json::Writer& w, const char* key, const Side& sender, const Side& receiver) {
  w.key(key).beginObject();
  counts(w, "transmitted", sender, "Transmitted", true, true, "First Transmission", "Last Transmission");
  counts(w, "received", receiver, "Received", true, true, "First Reception", "Last Reception");
  counts(w, "lost", receiver, "Lost", false, false);
  receiver.field(w, "jitter_ms", "Jitter");
  receiver.field(w, "mean_delay_ms", "Mean Delay");
  w.endObject();
}

// The figures of one path's (or, `scope` kInConnection, the whole connection's) summary that
// its stack told: kPathCounters' means, then its counters, as the scalar file has them.
void pathFigures(json::Writer& w, const Side& path, PathScope scope) {
  path.field(w, "samples", "Samples");
  for (const PathSummaryKind kind : {PathSummaryKind::kMean, PathSummaryKind::kCounter}) {
    forEachPathCounter(kind, [&](std::size_t, const PathCounter& c) {
      const std::string name(c.scalar);
      if ((c.scope & scope) != 0 && path.has(name)) path.field(w, c.json, name);
    });
  }
}

// The whole MPTCP connection or SCTP association at one side (object "<flow>.connection"),
// null if there is none.
void connection(json::Writer& w, const char* key, const Rows& rows, const std::string& flowObject) {
  const Side whole(rows, flowObject + ".connection");
  w.key(key);
  if (!whole.has("Samples")) {
    w.null();
    return;
  }
  w.beginObject();
  pathFigures(w, whole, kInConnection);
  w.endObject();
}

// The per-path summaries of one side's flow (objects "<flow>.path[ID]"), in path order.
void paths(json::Writer& w, const char* key, const Rows& rows, const std::vector<ScalarRow>* list,
           const std::string& flowObject) {
  w.key(key).beginArray();
  if (list != nullptr) {
    const std::string prefix = flowObject + ".path[";
    std::string current;
    for (const auto& r : *list) {
      if (r.object.compare(0, prefix.size(), prefix) != 0 || r.object == current) continue;
      current = r.object;
      const auto id = scalarOrigin(current).path;
      if (!id) continue;  // "<flow>.path[x]": not a path's object
      const Side path(rows, current);
      w.beginObject();
      w.key("path_id").value(std::uint64_t{*id});
      pathFigures(w, path, kInPath);
      w.endObject();
    }
  }
  w.endArray();
}

void totals(json::Writer& w, const char* key, const Rows& rows, const std::string& base) {
  const Side total(rows, base + ".total");
  w.key(key);
  if (!total.has("First Statistics Event")) {
    w.null();
    return;
  }
  w.beginObject();
  total.field(w, "first_us", "First Statistics Event");
  total.field(w, "last_us", "Last Statistics Event");
  counts(w, "transmitted", total, "Transmitted", false, true);
  counts(w, "received", total, "Received", false, true);
  counts(w, "lost", total, "Lost", false, true);
  w.endObject();
}

// CPU use of one side: per state in percent, total and per core (CPU[1..n]).
void cpu(json::Writer& w, const char* key, const std::vector<ScalarRow>* list, const std::string& base) {
  w.key(key);
  if (list == nullptr) {
    w.null();
    return;
  }
  std::vector<std::vector<const ScalarRow*>> cores;  // [0] = total
  cores.emplace_back();
  const std::string corePrefix = base + ".CPU[";
  for (const auto& r : *list) {
    if (r.object == base + ".totalCPU") {
      cores[0].push_back(&r);
    } else if (r.object.compare(0, corePrefix.size(), corePrefix) == 0) {
      const std::size_t n = std::strtoul(r.object.c_str() + corePrefix.size(), nullptr, 10);
      if (n == 0 || n > 65536) continue;
      if (cores.size() <= n) cores.resize(n + 1);
      cores[n].push_back(&r);
    }
  }
  auto states = [&](const std::vector<const ScalarRow*>& rows) {
    w.beginObject();
    for (const ScalarRow* r : rows) w.key(keyOf(r->name)).printedNumber(r->value);
    w.endObject();
  };
  w.beginObject().key("total");
  if (cores[0].empty())
    w.null();
  else
    states(cores[0]);
  w.key("cores").beginArray();
  for (std::size_t i = 1; i < cores.size(); ++i) states(cores[i]);
  w.endArray();
  // The process's own CPU (object "<base>.process"), null where the side wrote none (a reference).
  std::vector<const ScalarRow*> process;
  for (const auto& r : *list) {
    if (r.object == base + ".process") process.push_back(&r);
  }
  w.key("process");
  if (process.empty()) {
    w.null();
  } else {
    w.beginObject();
    for (const ScalarRow* r : process) {
      const char* key = r->name == "User Time" ? "user_s" : r->name == "System Time" ? "system_s" : "utilisation";
      w.key(key).printedNumber(r->value);
    }
    w.endObject();
  }
  w.endObject();
}

// "key": the text, or null if it is empty.
void textOrNull(json::Writer& w, const char* key, const std::string& text) {
  w.key(key);
  if (text.empty())
    w.null();
  else
    w.value(text);
}

void hostMembers(json::Writer& w, const JsonHost& host) {
  w.key("host").beginObject();
  textOrNull(w, "name", host.name);
  textOrNull(w, "kernel", host.kernel);
  textOrNull(w, "machine", host.machine);
  w.endObject();
}

// How the run was asked for: the command line, the passive, the control connection, the
// local addresses and the SCTP stack (the same members in the document and the stream's start).
void parameterMembers(json::Writer& w, const JsonRunInfo& info) {
  w.key("command_line").beginArray();
  for (const auto& arg : info.commandLine) w.value(arg);
  w.endArray();
  w.key("remote").value(info.remote);
  w.key("control").beginObject();
  textOrNull(w, "protocol", info.controlProtocol);
  textOrNull(w, "local", info.controlLocal);
  textOrNull(w, "remote", info.controlRemote);
  w.endObject();
  w.key("local_addresses").beginArray();
  for (const auto& address : info.localAddresses) w.value(address);
  w.endArray();
  textOrNull(w, "sctp_stack", info.sctpStack);
}

// What a flow is: its IDs, protocol, description, FLOWSPEC and congestion control.
void flowMembers(json::Writer& w, const JsonFlowInfo& f) {
  w.key("flow_id").value(std::uint64_t{f.flowId});
  w.key("stream_id").value(std::uint64_t{f.streamId});
  w.key("protocol").value(f.protocol);
  w.key("description").value(f.description);
  textOrNull(w, "flowspec", f.flowspec);
  textOrNull(w, "congestion_control", f.congestionControl);
  if (f.hasSctpAddresses) {
    w.key("sctp_addresses").beginObject();
    w.key("local").beginArray();
    for (const auto& a : f.sctpLocalAddresses) w.value(a);
    w.endArray();
    w.key("peer").beginArray();
    for (const auto& a : f.sctpPeerAddresses) w.value(a);
    w.endArray();
    w.endObject();
  }
}

// What every stream record starts with: its type, the schema's version, the measurement, when.
void recordHead(json::Writer& w, const char* type, std::uint64_t measurementId, std::uint64_t time) {
  w.key("type").value(type);
  w.key("schema_version").value(kJsonSchemaVersion);
  w.key("measurement_id").value(paddedHex64(measurementId));
  w.key("time_us").value(time);
}

void runtimeMembers(json::Writer& w, const JsonRunInfo& info) {
  w.key("runtime_s");
  if (info.runtime)
    w.value(*info.runtime);
  else
    w.null();
  w.key("warmup_s").value(info.warmup);
  w.key("seed").value(info.seed);
  w.key("start_at_us");
  if (info.startAt)
    w.value(*info.startAt);
  else
    w.null();
}

}  // namespace

std::string resultDocument(const JsonRunInfo& info, const std::vector<ScalarRow>* active,
                           const std::vector<ScalarRow>* passive, const std::optional<std::string>& error,
                           bool indent) {
  const Rows a = index(active), p = index(passive);
  const std::string activeBase = "netPerfMeter.active", passiveBase = "netPerfMeter.passive";
  json::Writer w(indent);
  w.beginObject();
  w.key("type").value("result");
  w.key("schema_version").value(kJsonSchemaVersion);
  w.key("program").value("netperfmeter");
  w.key("version").value(info.version);
  hostMembers(w, info.host);
  w.key("measurement_id").value(paddedHex64(info.measurementId));
  const auto first = a.find({activeBase + ".total", "First Statistics Event"});
  const auto last = a.find({activeBase + ".total", "Last Statistics Event"});
  w.key("start_time");
  if (first != a.end())
    w.value(isoTime(std::strtoull(first->second.c_str(), nullptr, 10)));
  else
    w.null();
  w.key("start_time_us");
  if (first != a.end())
    w.printedNumber(first->second);
  else
    w.null();
  runtimeMembers(w, info);
  w.key("duration_s");
  if (first != a.end() && last != a.end()) {
    const std::uint64_t from = std::strtoull(first->second.c_str(), nullptr, 10);
    const std::uint64_t to = std::strtoull(last->second.c_str(), nullptr, 10);
    w.value(to > from ? static_cast<double>(to - from) / 1e6 : 0.0);
  } else {
    w.null();
  }
  parameterMembers(w, info);

  w.key("flows").beginArray();
  for (const auto& f : info.flows) {
    const std::string suffix = ".flow[" + std::to_string(f.flowId) + "]";
    const Side activeSide(a, activeBase + suffix), passiveSide(p, passiveBase + suffix);
    w.beginObject();
    flowMembers(w, f);
    direction(w, "active_to_passive", activeSide, passiveSide);
    direction(w, "passive_to_active", passiveSide, activeSide);
    w.key("paths").beginObject();
    paths(w, "active", a, active, activeBase + suffix);
    paths(w, "passive", p, passive, passiveBase + suffix);
    w.endObject();
    w.key("connection").beginObject();
    connection(w, "active", a, activeBase + suffix);
    connection(w, "passive", p, passiveBase + suffix);
    w.endObject();
    w.endObject();
  }
  w.endArray();
  w.key("totals").beginObject();
  totals(w, "active", a, activeBase);
  totals(w, "passive", p, passiveBase);
  w.endObject();
  w.key("cpu").beginObject();
  cpu(w, "active", active, activeBase);
  cpu(w, "passive", passive, passiveBase);
  w.endObject();
  w.key("error");
  if (error)
    w.value(*error);
  else
    w.null();
  w.endObject();
  return w.text() + "\n";
}

std::string streamStartLine(const JsonRunInfo& info, std::uint64_t start) {
  json::Writer w;
  w.beginObject();
  recordHead(w, "start", info.measurementId, start);
  w.key("program").value("netperfmeter");
  w.key("version").value(info.version);
  hostMembers(w, info.host);
  runtimeMembers(w, info);
  parameterMembers(w, info);
  w.key("flows").beginArray();
  for (const auto& f : info.flows) {
    w.beginObject();
    flowMembers(w, f);
    w.endObject();
  }
  w.endArray();
  w.endObject();
  return w.text() + "\n";
}

std::string streamEndLine(std::uint64_t measurementId, std::uint64_t now, int exitCode,
                          const std::optional<std::string>& error, const std::string& document) {
  json::Writer w;
  w.beginObject();
  recordHead(w, "end", measurementId, now);
  w.key("exit_code").value(exitCode);
  w.key("error");
  if (error)
    w.value(*error);
  else
    w.null();
  w.key("result");
  std::string_view body(document);
  while (!body.empty() && body.back() == '\n') body.remove_suffix(1);
  if (body.empty())
    w.null();
  else
    w.embedded(body);
  w.endObject();
  return w.text() + "\n";
}

namespace {

// One side's figure as a number (NaN: no such row).
double figure(const Rows& rows, const std::string& object, const std::string& name) {
  const auto it = rows.find({object, name});
  if (it == rows.end()) return std::nan("");
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  return end != nullptr && *end == '\0' ? v : std::nan("");
}

std::string tableRow(const char* label, const Rows& sender, const std::string& from, const Rows& receiver,
                     const std::string& to, bool total) {
  auto amount = [](double bytes, double frames) {
    if (std::isnan(bytes) || std::isnan(frames)) return std::string("n/a");
    return scaledBytes(static_cast<std::uint64_t>(bytes)) + " " + std::to_string(static_cast<std::uint64_t>(frames)) +
           " fr";
  };
  const double sentBytes = figure(sender, from, "Transmitted Bytes"),
               sentFrames = figure(sender, from, "Transmitted Frames");
  const double gotBytes = figure(receiver, to, "Received Bytes"), gotFrames = figure(receiver, to, "Received Frames");
  const double lost = figure(receiver, to, "Lost Frames");
  // A flow's goodput is its receiver's Received Bit Rate (first to last reception); the totals'
  // is eight times the receiver's total Received Byte Rate (over the measurement).
  const double goodput =
      total ? 8.0 * figure(receiver, to, "Received Byte Rate") : figure(receiver, to, "Received Bit Rate");
  std::string lostText = "n/a";
  if (!std::isnan(lost)) {
    char b[64];
    if (!std::isnan(sentFrames) && sentFrames > 0) {
      std::snprintf(b, sizeof(b), "%llu (%.2f %%)", static_cast<unsigned long long>(lost), 100.0 * lost / sentFrames);
    } else {
      std::snprintf(b, sizeof(b), "%llu", static_cast<unsigned long long>(lost));
    }
    lostText = b;
  }
  char line[512];
  std::snprintf(line, sizeof(line), "  %-4s %-20s %-20s %-13s %s\n", label, amount(sentBytes, sentFrames).c_str(),
                amount(gotBytes, gotFrames).c_str(), std::isnan(goodput) ? "n/a" : scaledBitRate(goodput).c_str(),
                lostText.c_str());
  return line;
}

}  // namespace

std::string endOfRunTable(const std::vector<JsonFlowInfo>& flows, const std::vector<ScalarRow>* active,
                          const std::vector<ScalarRow>* passive) {
  const Rows a = index(active), p = index(passive);
  const std::string activeBase = "netPerfMeter.active", passiveBase = "netPerfMeter.passive";
  std::string out = "       sent                 received             goodput       lost frames\n";
  auto directions = [&](const std::string& suffix, bool total) {
    std::string rows;
    // A direction that carried nothing at either side (e.g. a flow that only sends) is left out.
    const bool toPassive = !(figure(a, activeBase + suffix, "Transmitted Frames") == 0 &&
                             figure(p, passiveBase + suffix, "Received Frames") == 0 &&
                             figure(p, passiveBase + suffix, "Lost Frames") == 0);
    const bool toActive =
        !(figure(p, passiveBase + suffix, "Transmitted Frames") == 0 &&
          figure(a, activeBase + suffix, "Received Frames") == 0 && figure(a, activeBase + suffix, "Lost Frames") == 0);
    if (toPassive || total) rows += tableRow("A->P", a, activeBase + suffix, p, passiveBase + suffix, total);
    if (toActive || total) rows += tableRow("P->A", p, passiveBase + suffix, a, activeBase + suffix, total);
    return rows;
  };
  for (const auto& f : flows) {
    out += "Flow #" + std::to_string(f.flowId) + " (" + f.protocol +
           (f.description.empty() ? std::string() : ", \"" + f.description + "\"") + "):\n";
    out += directions(".flow[" + std::to_string(f.flowId) + "]", false);
  }
  out += "Total (A->P: active to passive, P->A: passive to active):\n";
  out += directions(".total", true);
  return out;
}

std::string bzip2Text(std::string data) {
  const bool gzip =
      data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f && static_cast<unsigned char>(data[1]) == 0x8b;
  if (data.compare(0, 3, "BZh") != 0 && !gzip) return data;
  const UniqueFile memory(::fmemopen(data.data(), data.size(), "r"));
  if (!memory) throw FileError("cannot read the compressed scalar file in memory");
  std::string text;
  InputFile in(memory.get(), "the passive's scalar file");
  char buffer[65536];
  for (std::size_t n; (n = in.read(buffer, sizeof(buffer))) > 0;) text.append(buffer, n);
  return text;
}

std::string JsonStream::line(std::uint64_t now, const std::vector<JsonFlowSample>& flows, const CpuUsage& usage) {
  const double interval = now > last_ ? static_cast<double>(now - last_) / 1e6 : 0.0;
  const double elapsed = now > start_ ? static_cast<double>(now - start_) / 1e6 : 0.0;
  last_ = now;
  if (previous_.size() != flows.size()) previous_.assign(flows.size(), JsonFlowSample{});
  auto perSecond = [&](std::uint64_t value, std::uint64_t before, double factor = 1.0) {
    return interval > 0.0 && value >= before ? factor * static_cast<double>(value - before) / interval : 0.0;
  };
  json::Writer w;
  w.beginObject();
  recordHead(w, "interval", measurementId_, now);
  w.key("elapsed_s").value(elapsed);
  w.key("interval_s").value(interval);
  auto counters = [&](const char* key, const Counters& c, const Counters& before, bool rates) {
    w.key(key).beginObject();
    w.key("bytes").value(c.bytes);
    w.key("packets").value(c.packets);
    w.key("frames").value(c.frames);
    if (rates) {
      w.key("bit_rate").value(perSecond(c.bytes, before.bytes, 8.0));
      w.key("packet_rate").value(perSecond(c.packets, before.packets));
      w.key("frame_rate").value(perSecond(c.frames, before.frames));
    }
    w.endObject();
  };
  JsonFlowSample total, totalBefore;
  w.key("flows").beginArray();
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const auto& f = flows[i];
    const auto& before = previous_[i];
    w.beginObject();
    w.key("flow_id").value(std::uint64_t{f.info.flowId});
    w.key("stream_id").value(std::uint64_t{f.info.streamId});
    w.key("protocol").value(f.info.protocol);
    w.key("description").value(f.info.description);
    counters("transmitted", f.transmitted, before.transmitted, true);
    counters("received", f.received, before.received, true);
    counters("lost", f.lost, before.lost, false);
    w.key("jitter_ms").value(f.jitterMs);
    w.endObject();
    total.transmitted += f.transmitted;
    total.received += f.received;
    total.lost += f.lost;
    totalBefore.transmitted += before.transmitted;
    totalBefore.received += before.received;
  }
  w.endArray();
  w.key("total").beginObject();
  w.key("flows").value(std::uint64_t{flows.size()});
  counters("transmitted", total.transmitted, totalBefore.transmitted, true);
  counters("received", total.received, totalBefore.received, true);
  counters("lost", total.lost, total.lost, false);
  w.endObject();
  w.key("cpu");
  if (usage.percent.empty()) {
    w.null();
  } else {
    w.beginObject().key("utilisation").value(usage.utilisation(0));
    w.key("cores").beginArray();
    for (std::size_t i = 1; i <= usage.cpus(); ++i) w.value(usage.utilisation(i));
    w.endArray().endObject();
  }
  w.endObject();
  previous_ = flows;
  return w.text() + "\n";
}

}  // namespace npm::measure
