// The parts of a flow that need no socket: the frame cutter (frames into NPMP DATA messages
// and the buffers of one write), the receiver's checks and the recorder's scalar window.
#include <catch2/catch.hpp>

#include <boost/asio/buffer.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "measure/flow.h"
#include "measure/frame_cutter.h"

using namespace npm::measure;
using npm::npmp::DataHeader;
namespace asio = boost::asio;

namespace {

constexpr std::uint8_t B = npm::npmp::kDataFrameBegin, E = npm::npmp::kDataFrameEnd;

// The messages of a write, joined and split again at their length fields (each must be a
// valid DATA message: headerOf).
std::vector<std::vector<std::uint8_t>> messagesOf(const std::vector<asio::const_buffer>& iov) {
  std::vector<std::uint8_t> bytes;
  for (const auto& b : iov) {
    const auto* p = static_cast<const std::uint8_t*>(b.data());
    bytes.insert(bytes.end(), p, p + b.size());
  }
  std::vector<std::vector<std::uint8_t>> out;
  std::size_t at = 0;
  while (at < bytes.size()) {
    REQUIRE(at + npm::npmp::kDataHeaderSize <= bytes.size());
    const std::size_t length = std::size_t{bytes[at + 2]} << 8 | bytes[at + 3];  // network byte order
    REQUIRE(length >= npm::npmp::kDataHeaderSize);
    REQUIRE(at + length <= bytes.size());
    out.emplace_back(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                     bytes.begin() + static_cast<std::ptrdiff_t>(at + length));
    at += length;
  }
  return out;
}

DataHeader headerOf(const std::vector<std::uint8_t>& message) {
  auto h = npm::npmp::decodeData(message);
  REQUIRE(h);
  return *h;
}

constexpr WriteLimit kWide{1024, 1 << 20};

}  // namespace

TEST_CASE("a frame is cut into messages of at most the message size, with begin and end flags") {
  FrameCutter cutter(FrameLabels{7, 3, 2, 16000}, true);
  REQUIRE(cutter.addFrame(40000.0, 123456) == 40000);
  std::vector<asio::const_buffer> iov;
  REQUIRE(cutter.prepareWrite(kWide, false, iov) == 3);
  CHECK(iov.size() == 6);  // header and payload per message, on a message transport
  const auto messages = messagesOf(iov);
  REQUIRE(messages.size() == 3);
  const std::uint16_t lengths[] = {16000, 16000, 8000};
  const std::uint8_t flags[] = {B, 0, E};
  std::uint64_t byteSeq = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const DataHeader h = headerOf(messages[i]);
    CHECK(h.length == lengths[i]);
    CHECK(h.flags == flags[i]);
    CHECK(h.measurementId == 7);
    CHECK(h.flowId == 3);
    CHECK(h.streamId == 2);
    CHECK(h.frameId == 0);
    CHECK(h.seqNumber == i);
    CHECK(h.byteSeqNumber == byteSeq);
    CHECK(h.timeStamp == 123456);
    byteSeq += h.length;
  }
  TransmitStatistics tx;
  cutter.completeWrite(3, 0, tx, 99);
  CHECK(tx.total.packets == 3);
  CHECK(tx.total.bytes == 40000);
  CHECK(tx.total.frames == 1);
  CHECK(tx.first == 99);
  CHECK(cutter.idle());
}

TEST_CASE("frames of no bytes are not sent, frames smaller than a header are padded to one") {
  FrameCutter cutter(FrameLabels{}, false);
  CHECK(cutter.addFrame(0.4, 1) == 0);
  CHECK(cutter.addFrame(std::nan(""), 1) == 0);
  CHECK(cutter.idle());
  REQUIRE(cutter.addFrame(10.0, 1) == 10);
  std::vector<asio::const_buffer> iov;
  REQUIRE(cutter.prepareWrite(kWide, false, iov) == 1);
  const auto messages = messagesOf(iov);
  REQUIRE(messages.size() == 1);
  CHECK(headerOf(messages[0]).length == npm::npmp::kDataHeaderSize);
  CHECK(headerOf(messages[0]).flags == (B | E));
}

TEST_CASE("a byte stream's messages of one size go out as one buffer, the same bytes as one per message") {
  FrameCutter stream(FrameLabels{1, 1, 0, 1400}, true), messages(FrameLabels{1, 1, 0, 1400}, true);
  for (int i = 0; i < 5; ++i) {
    REQUIRE(stream.addFrame(1400.0, 5) == 1400);
    REQUIRE(messages.addFrame(1400.0, 5) == 1400);
  }
  std::vector<asio::const_buffer> a, b;
  REQUIRE(stream.prepareWrite(WriteLimit{4, 1 << 20}, true, a) == 4);  // the write limit holds
  REQUIRE(messages.prepareWrite(WriteLimit{4, 1 << 20}, false, b) == 4);
  CHECK(a.size() == 1);
  CHECK(b.size() == 8);
  CHECK(messagesOf(a) == messagesOf(b));
  TransmitStatistics tx;
  stream.completeWrite(4, 0, tx, 1);
  REQUIRE(stream.prepareWrite(kWide, true, a) == 1);  // the fifth, a batch of one
  const auto last = messagesOf(a);
  REQUIRE(last.size() == 1);
  CHECK(headerOf(last[0]).seqNumber == 4);
  CHECK(headerOf(last[0]).frameId == 4);
}

TEST_CASE("dropped and unsent messages are not counted as transmitted") {
  FrameCutter cutter(FrameLabels{1, 1, 0, 1000}, false);
  REQUIRE(cutter.addFrame(3000.0, 1) == 3000);
  REQUIRE(cutter.addFrame(3000.0, 1) == 3000);
  std::vector<asio::const_buffer> iov;
  REQUIRE(cutter.prepareWrite(WriteLimit{4, 1 << 20}, false, iov) == 4);
  TransmitStatistics tx;
  cutter.completeWrite(1, 1, tx, 5);  // one taken, one given up by the transport
  CHECK(tx.total.packets == 1);
  CHECK(tx.total.frames == 0);
  cutter.dropUnsent(2);  // a write of two under way: the rest of the frames go
  CHECK_FALSE(cutter.idle());
  cutter.completeWrite(2, 0, tx, 6);
  CHECK(tx.total.packets == 3);
  CHECK(tx.total.frames == 1);
  CHECK(cutter.idle());
}

TEST_CASE("the receiver takes only DATA messages of its own flow") {
  FlowParameters params;
  params.measurementId = 9;
  params.flowId = 4;
  params.streamId = 1;
  FlowReceiver receiver(params);
  FrameCutter own(FrameLabels{9, 4, 1, 1000}, true), other(FrameLabels{9, 5, 1, 1000}, true);
  REQUIRE(own.addFrame(500.0, 1) == 500);
  REQUIRE(other.addFrame(500.0, 1) == 500);
  std::vector<asio::const_buffer> iov;
  REQUIRE(own.prepareWrite(kWide, false, iov) == 1);
  const auto mine = messagesOf(iov);
  REQUIRE(other.prepareWrite(kWide, false, iov) == 1);
  const auto theirs = messagesOf(iov);

  const auto r = receiver.accept(mine[0], 1000);
  REQUIRE(r);
  CHECK(r->bytes == 500);
  CHECK(receiver.statistics().received().frames == 1);
  const auto wrong = receiver.accept(theirs[0], 1001);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error() == "DATA for flow 5 on the data channel of flow 4");
  const std::uint8_t garbage[] = {1, 2, 3};
  CHECK_FALSE(receiver.accept(garbage, 1002));
  CHECK(receiver.statistics().received().packets == 1);
  receiver.finish();
  CHECK(receiver.finished());
}

TEST_CASE("the recorder's scalars count from the end of the warm-up") {
  FlowParameters params;
  params.flowId = 2;
  FlowRecorder recorder;
  TransmitStatistics tx;
  ReceiveStatistics rx;
  FrameCutter cutter(FrameLabels{0, 2, 0, 1000}, true);
  auto sendAndReceive = [&](std::uint64_t now) {
    REQUIRE(cutter.addFrame(1000.0, now - 10) == 1000);
    std::vector<asio::const_buffer> iov;
    REQUIRE(cutter.prepareWrite(kWide, false, iov) == 1);
    const auto message = messagesOf(iov)[0];
    cutter.completeWrite(1, 0, tx, now - 5);
    recorder.transmitted(now - 5);
    recorder.received(rx.onMessage(headerOf(message), message.size(), now), rx.received());
  };
  sendAndReceive(1000);
  sendAndReceive(2000);
  FlowResult whole = recorder.result(params, tx, rx, {});
  CHECK(whole.transmitted.total.packets == 2);
  CHECK(whole.received.packets == 2);
  CHECK(whole.firstReception == 1000);
  recorder.beginScalars(tx, rx);
  FlowResult empty = recorder.result(params, tx, rx, {});
  CHECK(empty.transmitted.total.packets == 0);
  CHECK(empty.transmitted.first == 0);
  CHECK(empty.received.packets == 0);
  CHECK(empty.firstReception == 0);
  CHECK(std::isnan(empty.meanDelayMs));
  sendAndReceive(3000);
  FlowResult window = recorder.result(params, tx, rx, {});
  CHECK(window.flowId == 2);
  CHECK(window.transmitted.total.packets == 1);
  CHECK(window.transmitted.first == 2995);
  CHECK(window.received.packets == 1);
  CHECK(window.received.bytes == 1000);
  CHECK(window.firstReception == 3000);
  CHECK(window.lastReception == 3000);
  CHECK(window.meanDelayMs == Approx(0.010));
}

namespace {

// Everything the cutter holds, written and accounted: what the transport would count.
TransmitStatistics drain(FrameCutter& cutter) {
  TransmitStatistics tx;
  std::vector<asio::const_buffer> iov;
  while (const std::size_t n = cutter.prepareWrite(kWide, false, iov)) cutter.completeWrite(n, 0, tx, 1);
  return tx;
}

}  // namespace

TEST_CASE("a byte limit (transfer=) sends exactly its bytes as counted, whatever the frame sizes") {
  struct Case {
    std::uint16_t maxMsgSize;
    double frame;
    std::uint64_t limit, frames;
  };
  // 10 MiB of 1400-byte frames: 7489 whole and one of 1160; 10010 bytes in 1000-byte messages:
  // 9 frames, then 1010 would end in a 10-byte message (counted as 48), so 962 + 48; a frame
  // larger than the limit; 48 bytes, the least; 40000-byte frames in 16000-byte messages.
  const Case cases[] = {{16000, 1400, 10485760, 7490}, {1000, 1000, 10010, 11},   {16000, 5000, 1234, 1},
                        {16000, 1400, 48, 1},          {16000, 40000, 100000, 3}, {1000, 1000, 1040, 2}};
  for (const auto& c : cases) {
    INFO("message size " << c.maxMsgSize << ", frame " << c.frame << ", limit " << c.limit);
    FrameCutter cutter(FrameLabels{1, 1, 0, c.maxMsgSize}, true);
    cutter.setLimit(c.limit, 0);
    std::uint64_t queued = 0;
    for (int i = 0; i < 100000 && !cutter.exhausted(); ++i) queued += cutter.addFrame(c.frame, 1);
    REQUIRE(cutter.exhausted());
    CHECK(cutter.addFrame(c.frame, 1) == 0);  // nothing after the limit
    const TransmitStatistics tx = drain(cutter);
    CHECK(tx.total.bytes == c.limit);
    CHECK(tx.total.frames == c.frames);
    CHECK(queued <= c.limit);
  }
}

TEST_CASE("a frame limit (frames=) sends exactly its frames; counted bytes pad messages to a header") {
  FrameCutter cutter(FrameLabels{1, 1, 0, 1000}, true);
  cutter.setLimit(0, 3);
  CHECK(cutter.addFrame(1010, 1) == 1010);
  CHECK(cutter.addFrame(1010, 1) == 1010);
  CHECK_FALSE(cutter.exhausted());
  CHECK(cutter.addFrame(1010, 1) == 1010);
  CHECK(cutter.exhausted());
  CHECK(cutter.addFrame(1010, 1) == 0);
  const TransmitStatistics tx = drain(cutter);
  CHECK(tx.total.frames == 3);
  CHECK(tx.total.bytes == 3 * countedBytes(1010, 1000));
  CHECK(countedBytes(1010, 1000) == 1048);
  CHECK(countedBytes(2000, 1000) == 2000);
  CHECK(countedBytes(10, 1000) == 48);
  FrameCutter unlimited(FrameLabels{1, 1, 0, 1000}, true);
  for (int i = 0; i < 1000; ++i) unlimited.addFrame(1000, 1);
  CHECK_FALSE(unlimited.exhausted());
}
