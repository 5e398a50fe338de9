// Receiver accounting: frames reassembled by BEGIN/END, losses from sequence gaps,
// frames finalised at STOP, delay and RFC 3550 jitter.
#include <catch2/catch.hpp>

#include <cmath>

#include "measure/statistics.h"

using namespace npm::measure;
using npm::npmp::DataHeader;

namespace {
DataHeader message(std::uint32_t frame, std::uint64_t seq, std::uint64_t byteSeq, std::uint8_t flags,
                   std::uint64_t sent = 0) {
  DataHeader h;
  h.frameId = frame;
  h.seqNumber = seq;
  h.byteSeqNumber = byteSeq;
  h.flags = flags;
  h.timeStamp = sent;
  return h;
}
constexpr std::uint8_t B = npm::npmp::kDataFrameBegin, E = npm::npmp::kDataFrameEnd;
}  // namespace

TEST_CASE("single-message frames count at once") {
  ReceiveStatistics rx;
  auto r = rx.onMessage(message(0, 0, 0, B | E), 100, 1000);
  CHECK(r.framesCompleted == 1);
  CHECK(rx.received().frames == 1);
  CHECK(rx.received().bytes == 100);
}

TEST_CASE("multi-message frames complete at their END, and losses are counted per message") {
  ReceiveStatistics rx;
  rx.onMessage(message(0, 0, 0, B), 1000, 1000);
  rx.onMessage(message(0, 1, 1000, 0), 1000, 1001);
  CHECK(rx.received().frames == 0);
  rx.onMessage(message(0, 2, 2000, E), 500, 1002);
  CHECK(rx.received().frames == 1);
  // frame 1 loses its middle message
  rx.onMessage(message(1, 3, 2500, B), 1000, 1003);
  rx.onMessage(message(1, 5, 4500, E), 1000, 1004);
  CHECK(rx.received().frames == 1);
  CHECK(rx.lost().packets == 1);
  CHECK(rx.lost().bytes == 1000);  // one message of 1000 bytes, not the whole frame twice
  CHECK(rx.lost().frames == 0);    // still being reassembled
  rx.finalize();                   // STOP: the incomplete frame is lost
  CHECK(rx.lost().frames == 1);
  CHECK(rx.received().frames == 1);
}

TEST_CASE("skipped frame IDs are lost; incomplete frames expire after defragtimeout") {
  ReceiveStatistics rx(100);  // 100 ms
  rx.onMessage(message(0, 0, 0, B | E), 100, 1000000);
  rx.onMessage(message(3, 3, 300, B | E), 100, 1000100);
  CHECK(rx.lost().frames == 2);
  CHECK(rx.lost().packets == 2);
  rx.onMessage(message(4, 4, 400, B), 100, 1000200);
  rx.expire(1050000);
  CHECK(rx.lost().frames == 2);
  rx.expire(1200300);
  CHECK(rx.lost().frames == 3);
}

TEST_CASE("one-way delay and RFC 3550 jitter") {
  ReceiveStatistics rx;
  auto a = rx.onMessage(message(0, 0, 0, B | E, 1000), 48, 3000);
  CHECK(a.delayMs == Approx(2.0));
  CHECK(a.jitterMs == 0.0);
  auto b = rx.onMessage(message(1, 1, 48, B | E, 2000), 48, 5600);  // delay 3.6 ms
  CHECK(b.delayDiffMs == Approx(1.6));
  CHECK(b.jitterMs == Approx(1.6 / 16));
  auto c = rx.onMessage(message(2, 2, 96, B | E, 3000), 48, 5800);  // delay 2.8 ms
  CHECK(c.jitterMs == Approx(0.1 + (0.8 - 0.1) / 16));
  CHECK(rx.meanDelayMs() == Approx((2.0 + 3.6 + 2.8) / 3));
}

TEST_CASE("the mean delay of a flow that received nothing is not a number") {
  ReceiveStatistics rx;
  CHECK(std::isnan(rx.meanDelayMs()));
}

TEST_CASE("frames begun and never ended do not grow the reassembly table without bound") {
  ReceiveStatistics rx(60000);  // a long defragtimeout: nothing expires during the test
  const std::uint32_t begun = 200000;
  for (std::uint32_t i = 0; i < begun; ++i) rx.onMessage(message(i, i, i * 100ull, B), 100, 1000 + i);
  CHECK(rx.framesInReassembly() <= 65536);
  // A frame already in reassembly still completes.
  rx.onMessage(message(5, 6, 600, E), 100, 900000);
  CHECK(rx.received().frames == 1);
  rx.finalize();
  CHECK(rx.lost().frames == begun - 1);
}
