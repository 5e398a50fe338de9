// Result writers against expected text: file names, scalars, vectors, config.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "common/fileio.h"
#include "flowspec/flowspec.h"
#include "measure/results.h"

using namespace npm;
using namespace npm::measure;

namespace {
std::string render(const std::function<void(OutputFile&)>& write) {
  auto out = OutputFile::anonymous(false);
  write(out);
  const UniqueFile f = out.takeForReading();
  std::string text;
  char b[4096];
  std::size_t n;
  while ((n = std::fread(b, 1, sizeof(b), f.get())) > 0) text.append(b, n);
  return text;
}
}  // namespace

TEST_CASE("result file names: role, hex flow/stream IDs, .bz2 suffixes") {
  CHECK(resultFileName("run.sca", "active") == "run-active.sca");
  CHECK(resultFileName("run.vec.bz2", "passive") == "run-passive.vec.bz2");
  CHECK(resultFileName("run.vec.bz2", "active", 10u, 0) == "run-active-0000000a-0000.vec.bz2");
  CHECK(resultFileName("dir.x/run.vec", "passive", 255u, 17) == "dir.x/run-passive-000000ff-0011.vec");
  CHECK(resultFileName("dir.x/run", "active") == "dir.x/run-active");
  CHECK(resultFileName("run.bz2", "active") == "run-active.bz2");
  CHECK(resultFileName("run.vec.gz", "active", 10u, 0) == "run-active-0000000a-0000.vec.gz");
  CHECK(resultFileName("run.sca.gz", "passive") == "run-passive.sca.gz");
  CHECK(measure::resultCompression("run-active.vec.gz") == Compression::kGzip);
  CHECK(measure::resultCompression("run-active.vec.bz2") == Compression::kBzip2);
  CHECK(measure::resultCompression("run-active.vec") == Compression::kNone);
  CHECK(measure::resultCompression("run.vec.GZ") == Compression::kNone);  // as ".bz2": case matters
  CHECK(resultFileName("", "active").empty());
}

TEST_CASE("config values are escaped so that sourcing them runs nothing") {
  CHECK(shellQuote("plain") == "\"plain\"");
  CHECK(shellQuote("a\"b$c`d\\e") == "\"a\\\"b\\$c\\`d\\\\e\"");
}

TEST_CASE("scalar file in the reference format") {
  MeasurementResult r;
  r.firstStatisticsEvent = 1000000;
  r.lastStatisticsEvent = 3000000;
  FlowResult f;
  f.flowId = 3;
  f.transmitted.first = 1000000;
  f.transmitted.last = 2000000;
  f.transmitted.total = {1000, 10, 5};
  f.received = {500, 5, 2};
  f.firstReception = 1500000;
  f.lastReception = 2000000;
  f.lost = {100, 1, 1};
  f.meanDelayMs = 12.5;
  r.flows.push_back(f);
  r.cpu.percent = {{10, 0, 10, 80, 0, 0, 0, 0}, {20, 0, 0, 80, 0, 0, 0, 0}, {0, 0, 20, 80, 0, 0, 0, 0}};
  const std::string text = render([&](OutputFile& o) { writeScalars(o, "active", r); });
  CHECK_THAT(text, Catch::StartsWith("scalar \"netPerfMeter.active.flow[3]\" \"First Transmission\"      1000000\n"));
  CHECK_THAT(text, Catch::Contains("scalar \"netPerfMeter.active.flow[3]\" \"Transmitted Bytes\"       1000\n"));
  CHECK_THAT(text, Catch::Contains("\"Transmitted Bit Rate\"    8000.000000\n"));
  CHECK_THAT(text, Catch::Contains("\"Received Byte Rate\"      1000.000000\n"));
  CHECK_THAT(text, Catch::Contains("scalar \"netPerfMeter.active.flow[3]\" \"Lost Packets\"            1\n"));
  CHECK_THAT(text, Catch::Contains("scalar \"netPerfMeter.active.total\" \"First Statistics Event\"  1000000\n"));
  CHECK_THAT(text, Catch::Contains("scalar \"netPerfMeter.active.total\" \"Transmitted Byte Rate\"   500.000000\n"));
  CHECK_THAT(text, Catch::Contains("scalar \"netPerfMeter.active.CPU[1]\" \"User\" 20.000\n"));
  CHECK_THAT(text, Catch::Contains("scalar \"netPerfMeter.active.CPU[2]\" \"System\" 20.000\n"));
  CHECK_THAT(text, Catch::EndsWith("scalar \"netPerfMeter.active.totalCPU\" \"Hypervisor\" 0.000\n"));
  // 18 reference lines + 4 loss/jitter lines + the mean delay per flow, 20 total lines, 8 per CPU and total
  CHECK_THAT(text, Catch::Contains("scalar \"netPerfMeter.active.flow[3]\" \"Mean Delay\"              12.500000\n"));
  CHECK(std::count(text.begin(), text.end(), '\n') == 23 + 20 + 3 * 8);
}

TEST_CASE("measurement vector: header, three rows per flow and three totals per block") {
  const std::string text = render([](OutputFile& o) {
    MeasurementVectorWriter w(std::move(o));
    FlowSnapshot f;
    f.flowId = 1;
    f.description = "Voice \"HD\"";
    f.sent = {100, 2, 1};
    w.writeBlock(5000000, 5000000, {f});
    f.sent = {300, 6, 3};
    f.received = {50, 1, 1};
    f.jitterMs = 0.25;
    w.writeBlock(6000000, 5000000, {f});
    o = std::move(w.file());
  });
  const char* expected =
      "AbsTime\tRelTime\tInterval\tFlowID\tDescription\tJitter\tAction\tAbsBytes\tAbsPackets\tAbsFrames\t"
      "RelBytes\tRelPackets\tRelFrames\n"
      "000001\t5000000\t0.000000\t0.000000\t1\t\"Voice \\\"HD\\\"\"\t0.000\t\"Sent\"\t100\t2\t1\t100\t2\t1\n"
      "000002\t5000000\t0.000000\t0.000000\t1\t\"Voice \\\"HD\\\"\"\t0.000\t\"Received\"\t0\t0\t0\t0\t0\t0\n"
      "000003\t5000000\t0.000000\t0.000000\t1\t\"Voice \\\"HD\\\"\"\t0.000\t\"Lost\"\t0\t0\t0\t0\t0\t0\n"
      "000004\t5000000\t0.000000\t0.000000\t-1\t\"Total\"\t0.000\t\"Sent\"\t100\t2\t1\t100\t2\t1\n"
      "000005\t5000000\t0.000000\t0.000000\t-1\t\"Total\"\t0.000\t\"Received\"\t0\t0\t0\t0\t0\t0\n"
      "000006\t5000000\t0.000000\t0.000000\t-1\t\"Total\"\t0.000\t\"Lost\"\t0\t0\t0\t0\t0\t0\n"
      "000007\t6000000\t1.000000\t1.000000\t1\t\"Voice \\\"HD\\\"\"\t0.250\t\"Sent\"\t300\t6\t3\t200\t4\t2\n"
      "000008\t6000000\t1.000000\t1.000000\t1\t\"Voice \\\"HD\\\"\"\t0.250\t\"Received\"\t50\t1\t1\t50\t1\t1\n"
      "000009\t6000000\t1.000000\t1.000000\t1\t\"Voice \\\"HD\\\"\"\t0.250\t\"Lost\"\t0\t0\t0\t0\t0\t0\n"
      "000010\t6000000\t1.000000\t1.000000\t-1\t\"Total\"\t0.000\t\"Sent\"\t300\t6\t3\t200\t4\t2\n"
      "000011\t6000000\t1.000000\t1.000000\t-1\t\"Total\"\t0.000\t\"Received\"\t50\t1\t1\t50\t1\t1\n"
      "000012\t6000000\t1.000000\t1.000000\t-1\t\"Total\"\t0.000\t\"Lost\"\t0\t0\t0\t0\t0\t0\n";
  CHECK(text == expected);
}

TEST_CASE("per-flow vector: one row per received message") {
  const std::string text = render([](OutputFile& o) {
    FlowVectorWriter w(std::move(o));
    Reception r;
    r.now = 1000500;
    r.seqNumber = 7;
    r.bytes = 1460;
    r.framesCompleted = 1;
    r.delayMs = 0.072;
    r.delayDiffMs = 0.072;
    r.jitterMs = 0.0045;
    w.row(r, 1000000, Counters{1460, 1, 1});
    w.flush();
    o = std::move(w.file());
  });
  CHECK(text ==
        "AbsTime\tRelTime\tSeqNumber\tAbsBytes\tAbsPackets\tAbsFrames\tRelBytes\tRelPackets\tRelFrames\tDelay\t"
        "PrevPacketDelayDiff\tJitter\n"
        "000001\t1000500\t0.000500\t7\t1460\t1\t1\t1460\t1\t1\t0.072\t0.072\t0.004\n");
}

namespace {
// A row as the writer formatted each one on arrival before rows were spooled (printf).
std::string printfRow(std::uint64_t line, const Reception& r, std::uint64_t start, const Counters& c) {
  char b[512];
  std::snprintf(b, sizeof(b), "%06llu\t%llu\t%.6f\t%llu\t%llu\t%llu\t%llu\t%llu\t1\t%llu\t%.3f\t%.3f\t%.3f\n",
                static_cast<unsigned long long>(line), static_cast<unsigned long long>(r.now),
                r.now > start ? static_cast<double>(r.now - start) / 1e6 : 0.0,
                static_cast<unsigned long long>(r.seqNumber), static_cast<unsigned long long>(c.bytes),
                static_cast<unsigned long long>(c.packets), static_cast<unsigned long long>(c.frames),
                static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.framesCompleted), r.delayMs,
                r.delayDiffMs, r.jitterMs);
  return b;
}
}  // namespace

TEST_CASE("per-flow vector: spooled rows format exactly as rows formatted on arrival") {
  // Enough rows to spill the record buffer many times and to compress on several threads.
  const std::uint64_t start = 1700000000000000;
  std::string expected;
  std::uint64_t rows = 0;
  auto out = OutputFile::anonymous(true);
  FlowVectorWriter w(std::move(out));
  Counters c;
  for (std::uint64_t i = 0; i < 150000; ++i) {
    Reception r;
    r.now = start - 3 + i * 7;  // the first rows before the start: RelTime 0
    r.seqNumber = i * 2;
    r.bytes = 1400 + i % 3;
    r.framesCompleted = i % 2;
    r.delayMs = static_cast<double>(i % 1000) * 0.0375 + 0.0005;  // halfway cases too
    r.delayDiffMs = -static_cast<double>(i % 17) / 3.0;
    r.jitterMs = static_cast<double>(i) / 7.0;
    c.bytes += r.bytes;
    c.packets += 1;
    c.frames += r.framesCompleted;
    w.row(r, start, c);
    expected += printfRow(++rows, r, start, c);
    if (i == 99999) w.flush(3);  // a flush in between: later rows continue the numbering
  }
  CHECK(w.rowCount() == rows);
  w.flush(3);
  CHECK(w.spooledBytes() == rows * sizeof(FlowVectorWriter::Record));
  const UniqueFile f = w.file().takeForReading();
  InputFile in(f.get(), "vector");
  std::string text, line;
  REQUIRE(in.getline(line));
  CHECK(line.substr(0, 16) == "AbsTime\tRelTime\t");
  while (in.getline(line)) text += line + "\n";
  CHECK(text.size() == expected.size());
  CHECK(text == expected);
}

TEST_CASE("per-flow vector: the spool budget bounds the recorded rows") {
  auto budget = std::make_shared<SpoolBudget>(1 << 20, "per session (--max-spool)");
  FlowVectorWriter w(OutputFile::anonymous(false));
  w.setBudget(budget);
  Reception r;
  bool refused = false;
  std::string message;
  for (int i = 0; i < 100000 && !refused; ++i) {
    try {
      w.row(r, 0, Counters{});
    } catch (const FileError& e) {
      refused = true;
      message = e.what();
    }
  }
  CHECK(refused);
  CHECK_THAT(message, Catch::Contains("spool is full") && Catch::Contains("1 MiB per session (--max-spool)"));
  CHECK(budget->used() <= (1u << 20));
}

TEST_CASE("config file") {
  auto spec =
      *flowspec::parse("const10:exp1000:const5:const500:description=It's \"$(rm -rf /)\"`x`", npmp::Protocol::UDP);
  spec.flowId = 4;
  ConfigInfo info;
  info.scalarPattern = "run.sca.bz2";
  info.vectorPattern = "run.vec";
  info.flows = {spec};
  const std::string text = render([&](OutputFile& o) { writeConfig(o, info); });
  CHECK_THAT(text,
             Catch::StartsWith("NUM_FLOWS=1\nNAME_ACTIVE_NODE=\"Client\"\nNAME_PASSIVE_NODE=\"Server\"\n"
                               "SCALAR_ACTIVE_NODE=\"run-active.sca.bz2\"\n"
                               "SCALAR_PASSIVE_NODE=\"run-passive.sca.bz2\"\n"
                               "VECTOR_ACTIVE_NODE=\"run-active.vec\"\nVECTOR_PASSIVE_NODE=\"run-passive.vec\"\n\n"));
  CHECK_THAT(text, Catch::Contains("FLOW4_DESCRIPTION=\"It's \\\"\\$(rm -rf /)\\\"\\`x\\`\"\n"));
  CHECK_THAT(text, Catch::Contains("FLOW4_PROTOCOL=\"UDP\"\n"));
  CHECK_THAT(text, Catch::Contains("FLOW4_OUTBOUND_FRAME_RATE_VALUE1=10.000000\n"));
  CHECK_THAT(text, Catch::Contains("FLOW4_OUTBOUND_FRAME_SIZE_RNG=2\n"));
  CHECK_THAT(text, Catch::Contains("FLOW4_INBOUND_FRAME_RATE_RNG_NAME=\"constant\"\n"));
  CHECK_THAT(text, Catch::Contains("FLOW4_VECTOR_PASSIVE_NODE=\"run-passive-00000004-0000.vec\"\n"));
  // Sourcing it in a shell gives the description back verbatim and runs nothing.
  char dir[] = "/tmp/npm-config-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string path = std::string(dir) + "/run.config";
  {
    OutputFile out(path, false, 9);
    writeConfig(out, info);
    out.commit();
  }
  const std::string command = "sh -c '. " + path + " && printf %s \"$FLOW4_DESCRIPTION\"'";
  std::FILE* p = ::popen(command.c_str(), "r");
  char buffer[256] = {};
  std::fread(buffer, 1, sizeof(buffer) - 1, p);
  ::pclose(p);
  CHECK(std::string(buffer) == "It's \"$(rm -rf /)\"`x`");
  std::filesystem::remove_all(dir);
}

TEST_CASE("per-path vector: a row per path, NA for what the stack does not tell") {
  const std::string text = render([](OutputFile& o) {
    PathVectorWriter w(std::move(o));
    transport::PathSample tcp;
    tcp.id = 3;
    tcp.local = "10.0.1.1:5000";
    tcp.remote = "10.0.1.2:9000";
    tcp.state = "ESTABLISHED";
    tcp.cwnd = 14480;
    tcp.srttMs = 4.25;
    tcp.bytesSent = 123456;
    transport::PathSample sctp;
    sctp.id = 1;
    sctp.remote = "10.0.2.2:9000";
    sctp.state = "active";
    sctp.cwnd = 4380;
    sctp.srttMs = 56;
    sctp.rtoMs = 1000;
    sctp.mtu = 1500;
    sctp.retransmissions = 8;
    sctp.fastRetransmissions = 5;
    sctp.timerRetransmissions = 2;
    sctp.rescheduled = 1;
    sctp.dropReported = 4;
    sctp.smartFrIgnored = 9;
    transport::PathSample association;
    association.id = transport::PathSample::kConnection;
    association.remote = "10.0.2.2:9000";
    association.state = "ESTABLISHED";
    association.unacked = 12;
    association.rwnd = 65536;
    association.pending = 3;
    w.rows(2500000, 1000000, {tcp, sctp, association});
    w.flush();
    CHECK(w.rowCount() == 3);
    o = std::move(w.file());
  });
  CHECK(text ==
        "AbsTime\tRelTime\tPath\tLocal\tRemote\tState\tCwnd\tSsthresh\tRTT\tRTTVar\tRTO\tMTU\tBytesSent\tBytesAcked\t"
        "BytesReceived\tRetransmissions\tLost\tUnacked\tDeliveryRate\tPacingRate\tRwnd\tPending\tFastRetrans\t"
        "TimerRetrans\tRescheduled\tDropReported\tSmartFrIgnored\n"
        "000001\t2500000\t1.500000\t3\t10.0.1.1:5000\t10.0.1.2:9000\tESTABLISHED\t14480\tNA\t4.250\tNA\tNA\tNA\t"
        "123456\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA\n"
        "000002\t2500000\t1.500000\t1\t-\t10.0.2.2:9000\tactive\t4380\tNA\t56.000\tNA\t1000.000\t1500\t"
        "NA\tNA\tNA\t8\tNA\tNA\tNA\tNA\tNA\tNA\t5\t2\t1\t4\t9\n"
        "000003\t2500000\t1.500000\t-1\t-\t10.0.2.2:9000\tESTABLISHED\tNA\tNA\tNA\tNA\tNA\tNA\t"
        "NA\tNA\tNA\tNA\tNA\t12\tNA\tNA\t65536\t3\tNA\tNA\tNA\tNA\tNA\n");
}

TEST_CASE("per-path vector names are not caught by the globs of per-flow vectors") {
  CHECK(pathVectorFileName("run.vec.bz2", "active", 10, 0) == "run-paths-active-0000000a-0000.vec.bz2");
  CHECK(pathVectorFileName("dir/run.vec", "passive", 1, 2) == "dir/run-paths-passive-00000001-0002.vec");
  CHECK(hasPaths(npmp::Protocol::TCP));
  CHECK(hasPaths(npmp::Protocol::MPTCP));
  CHECK(hasPaths(npmp::Protocol::SCTP));
  CHECK_FALSE(hasPaths(npmp::Protocol::UDP));
  CHECK_FALSE(hasPaths(npmp::Protocol::DCCP));
}

TEST_CASE("config file names the per-path vectors of TCP, MPTCP and SCTP flows") {
  auto tcp = *flowspec::parse("const0:const1400", npmp::Protocol::TCP);
  tcp.flowId = 0;
  auto udp = *flowspec::parse("const10:const100", npmp::Protocol::UDP);
  udp.flowId = 1;
  ConfigInfo info;
  info.vectorPattern = "run.vec.bz2";
  info.flows = {tcp, udp};
  info.pathVectors = true;
  const std::string text = render([&](OutputFile& o) { writeConfig(o, info); });
  CHECK_THAT(text, Catch::Contains("FLOW0_PATHS_VECTOR_ACTIVE_NODE=\"run-paths-active-00000000-0000.vec.bz2\"\n"
                                   "FLOW0_PATHS_VECTOR_PASSIVE_NODE=\"run-paths-passive-00000000-0000.vec.bz2\"\n"));
  CHECK_THAT(text, !Catch::Contains("FLOW1_PATHS"));
  info.pathVectors = false;  // --path-interval=0
  CHECK_THAT(render([&](OutputFile& o) { writeConfig(o, info); }), !Catch::Contains("_PATHS_"));
}

TEST_CASE("per-path scalars: samples, means and the last counters of each path") {
  MeasurementResult r;
  FlowResult f;
  f.flowId = 2;
  PathSummary tcp;
  tcp.id = 1;
  transport::PathSample a;
  a.cwnd = 10000;
  a.srttMs = 2;
  a.bytesSent = 1000;
  a.retransmissions = 0;
  transport::PathSample b = a;
  b.cwnd = 30000;
  b.srttMs = 4;
  b.bytesSent = 5000;
  b.retransmissions = 3;
  tcp.add(a);
  tcp.add(b);
  PathSummary sctp;  // no byte counters per path
  sctp.id = 0;
  transport::PathSample c;
  c.cwnd = 4380;
  c.srttMs = 56;
  sctp.add(c);
  f.paths = {sctp, tcp};
  r.flows.push_back(f);
  const std::string text = render([&](OutputFile& o) { writeScalars(o, "passive", r); });
  const std::string p1 = "scalar \"netPerfMeter.passive.flow[2].path[1]\" ";
  CHECK_THAT(text, Catch::Contains(p1 + "\"Samples\"                 2\n"));
  CHECK_THAT(text, Catch::Contains(p1 + "\"Mean Cwnd\"               20000.000000\n"));
  CHECK_THAT(text, Catch::Contains(p1 + "\"Mean RTT\"                3.000000\n"));
  CHECK_THAT(text, Catch::Contains(p1 + "\"Bytes Sent\"              5000\n"));
  CHECK_THAT(text, Catch::Contains(p1 + "\"Retransmissions\"         3\n"));
  const std::string p0 = "scalar \"netPerfMeter.passive.flow[2].path[0]\" ";
  CHECK_THAT(text, Catch::Contains(p0 + "\"Mean RTT\"                56.000000\n"));
  CHECK_THAT(text, !Catch::Contains(p0 + "\"Bytes Sent\""));
}

TEST_CASE("per-path scalars after a warm-up: fresh means, counters from the end of the warm-up") {
  PathSummary s;
  s.id = 0;
  transport::PathSample early;
  early.cwnd = 1000;
  early.srttMs = 100;
  early.bytesSent = 7000;
  early.retransmissions = 2;
  s.add(early);
  s.restart();
  transport::PathSample late = early;
  late.cwnd = 3000;
  late.srttMs = 10;
  late.bytesSent = 10000;
  s.add(late);
  MeasurementResult r;
  FlowResult f;
  f.paths = {s};
  r.flows.push_back(f);
  const std::string text = render([&](OutputFile& o) { writeScalars(o, "active", r); });
  const std::string p = "scalar \"netPerfMeter.active.flow[0].path[0]\" ";
  CHECK_THAT(text, Catch::Contains(p + "\"Samples\"                 1\n"));
  CHECK_THAT(text, Catch::Contains(p + "\"Mean Cwnd\"               3000.000000\n"));
  CHECK_THAT(text, Catch::Contains(p + "\"Mean RTT\"                10.000000\n"));
  CHECK_THAT(text, Catch::Contains(p + "\"Bytes Sent\"              3000\n"));
  CHECK_THAT(text, Catch::Contains(p + "\"Retransmissions\"         0\n"));
}

TEST_CASE("connection scalars: the whole MPTCP connection or SCTP association as .connection") {
  PathSummary association;
  association.id = transport::PathSample::kConnection;
  transport::PathSample a;
  a.id = transport::PathSample::kConnection;
  a.unacked = 10;
  a.rwnd = 1000;
  a.pending = 0;
  transport::PathSample b = a;
  b.unacked = 20;
  b.rwnd = 3000;
  b.pending = 4;
  association.add(a);
  association.add(b);
  MeasurementResult r;
  FlowResult f;
  f.flowId = 1;
  f.paths = {association};
  r.flows.push_back(f);
  const std::string text = render([&](OutputFile& o) { writeScalars(o, "active", r); });
  const std::string c = "scalar \"netPerfMeter.active.flow[1].connection\" ";
  CHECK_THAT(text, Catch::Contains(c + "\"Samples\"                 2\n"));
  CHECK_THAT(text, Catch::Contains(c + "\"Mean Unacked\"            15.000000\n"));
  CHECK_THAT(text, Catch::Contains(c + "\"Mean Rwnd\"               2000.000000\n"));
  CHECK_THAT(text, Catch::Contains(c + "\"Mean Pending\"            2.000000\n"));
  CHECK_THAT(text, !Catch::Contains("path[-1]"));
  CHECK_THAT(text, !Catch::Contains(c + "\"Mean Cwnd\""));
}
