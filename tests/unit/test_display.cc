// The per-interval lines of --interval (control/display.h): the figures of each interval from
// two snapshots, the header, the width.
#include <catch2/catch.hpp>

#include <sstream>

#include "common/text.h"
#include "control/display.h"

using npm::control::IntervalLines;
using npm::measure::FlowSnapshot;

namespace {

FlowSnapshot snapshot(std::uint64_t sentBytes, std::uint64_t sentFrames, std::uint64_t receivedBytes,
                      std::uint64_t receivedFrames, std::uint64_t lostFrames) {
  FlowSnapshot s;
  s.sent = {sentBytes, sentFrames, sentFrames};
  s.received = {receivedBytes, receivedFrames, receivedFrames};
  s.lost = {0, lostFrames, lostFrames};
  return s;
}

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("interval lines: per flow and direction the interval's bytes, rate, frames, loss and the sender's state") {
  IntervalLines lines({{0, true, false}, {7, true, true}});
  const std::uint64_t start = 1000000000;
  FlowSnapshot tcp = snapshot(0, 0, 0, 0, 0);
  tcp.srttMs = 0.25;
  tcp.cwnd = 65536;
  CHECK(lines.format(start, start, {tcp, snapshot(0, 0, 0, 0, 0)}).empty());  // the base
  FlowSnapshot tcp2 = snapshot(1250000, 1000, 0, 0, 0);
  tcp2.srttMs = 0.5;
  tcp2.cwnd = 131072;
  tcp2.retransmissions = 3;
  const std::string text = lines.format(start + 1000000, start, {tcp2, snapshot(500000, 500, 300000, 300, 100)});
  const auto rows = linesOf(text);
  REQUIRE(rows.size() == 5);  // two header lines, flow 0 out, flow 7 out and in
  CHECK(rows[0].find("Interval (s)") != std::string::npos);
  CHECK(rows[1].find("Lost") != std::string::npos);
  for (const auto& row : rows) CHECK(row.size() <= 79);
  CHECK(npm::collapseBlanks(rows[2]) == "0 out 0.00-1.00 1.192 MiB 10.00 Mbit/s 1000 0.50 128.0 KiB 3");
  CHECK(npm::collapseBlanks(rows[3]) == "7 out 0.00-1.00 488.3 KiB 4.000 Mbit/s 500 - - -");
  CHECK(npm::collapseBlanks(rows[4]) == "7 in 0.00-1.00 293.0 KiB 2.400 Mbit/s 300 100 25.00% 0.00");
  // The next interval: differences to this one, no header again; a half-second interval's rate.
  const auto next = linesOf(lines.format(start + 1500000, start, {tcp2, snapshot(500000, 500, 400000, 400, 100)}));
  REQUIRE(next.size() == 3);
  CHECK(npm::collapseBlanks(next[0]) == "0 out 1.00-1.50 0.000 B 0.000 bit/s 0 0.50 128.0 KiB 0");
  CHECK(npm::collapseBlanks(next[2]) == "7 in 1.00-1.50 97.66 KiB 1.600 Mbit/s 100 0 0.00% 0.00");
}

TEST_CASE("interval lines: the first line counts what arrived before the first snapshot") {
  // The passive sends from START on: what arrived before the measurement's first snapshot (the
  // vector's block at 0 s) is in the first line, so that a flow's lines add up to its totals.
  IntervalLines lines({{3, false, true}});
  const std::uint64_t start = 1000000000;
  CHECK(lines.format(start, start, {snapshot(0, 0, 1400, 1, 2)}).empty());
  const auto rows = linesOf(lines.format(start + 1000000, start, {snapshot(0, 0, 140000, 100, 10)}));
  REQUIRE(rows.size() == 3);
  CHECK(npm::collapseBlanks(rows[2]) == "3 in 0.00-1.00 136.7 KiB 1.120 Mbit/s 100 10 9.09% 0.00");
}
