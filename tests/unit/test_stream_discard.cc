// A stream channel discards the unread payload of large DATA messages in the kernel (recv with
// MSG_TRUNC) instead of copying it: over a real loopback connection (TCP, and MPTCP where the
// kernel has it) every message still arrives whole in length, header and order, and the
// receiver's counts equal the sender's.
#include <catch2/catch.hpp>

#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "loopback.h"
#include "measure/flow.h"
#include "measure/flow_receiver.h"
#include "measure/frame_cutter.h"
#include "npmp/messages.h"
#include "transport/data_channel.h"

using namespace npm;
namespace asio = boost::asio;

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

namespace {

constexpr std::uint64_t kMeasurement = 77;
constexpr std::uint32_t kFlow = 3;

// The byte stream a sender writes for frames of these sizes, cut into messages of at most
// 65535 bytes, and the sender's counts.
struct SentStream {
  std::vector<std::uint8_t> bytes;
  measure::TransmitStatistics tx;
};

SentStream sendStream(const std::vector<double>& frames) {
  SentStream sent;
  measure::FrameCutter cutter(measure::FrameLabels{kMeasurement, kFlow, 0, 65535}, true);
  std::uint64_t stamp = 1;
  for (double frame : frames) cutter.addFrame(frame, stamp++);
  std::vector<asio::const_buffer> iov;
  while (const std::size_t n = cutter.prepareWrite({1 << 20, 1 << 30}, true, iov)) {
    for (const auto& b : iov) {
      const auto* p = static_cast<const std::uint8_t*>(b.data());
      sent.bytes.insert(sent.bytes.end(), p, p + b.size());
    }
    cutter.completeWrite(n, 0, sent.tx, stamp);
  }
  return sent;
}

// Frames from a few bytes to several messages of the largest size, small ones between large
// ones (their payload must arrive intact after a discarded one) and a run of 16000-byte ones.
std::vector<double> mixedFrames() {
  std::vector<double> frames = {1400, 16000, 65535, 48, 9000, 3000, 8191, 8192, 8241, 200000, 100, 40000};
  for (int i = 0; i < 200; ++i) frames.push_back(i % 10 == 9 ? 700 : 16000);
  frames.push_back(1400);
  return frames;
}

struct Received {
  measure::Counters counts;
  std::uint64_t messages = 0, read = 0, discarded = 0;
  // Large messages whose last payload byte is not the pattern's (which never has a 0): the
  // kernel dropped it, nothing copied it.
  std::uint64_t largeUncopied = 0;
  bool allAccepted = true, headersInOrder = true, smallPayloadsIntact = true, ended = false;
};

// Writes `sent` into `writer` (blocking, on a thread of its own) and receives it through a
// stream channel on `reader` until all of it has arrived (at most 20 s). Nothing in the handler
// throws, and the writer cannot block the end: a failure is reported, not a crash or a hang.
Received transfer(asio::io_context& io, asio::ip::tcp::socket writer, asio::ip::tcp::socket reader,
                  const SentStream& sent) {
  auto channel = transport::makeStreamChannel(std::move(reader));
  channel->expect(npmp::MessageSet::Data);
  measure::FlowParameters params;
  params.measurementId = kMeasurement;
  params.flowId = kFlow;
  measure::FlowReceiver receiver(params);
  Received r;
  std::uint64_t nextSeq = 0, bytes = 0;
  std::vector<std::uint8_t> pattern(65535);
  npmp::fillPayload(pattern.data(), pattern.size(), true);
  channel->receive(
      [&](std::span<const std::uint8_t> message, std::uint64_t now) {
        const auto header = npmp::decodeData(message);
        if (!header || !receiver.accept(message, now)) {
          r.allAccepted = false;
          return;
        }
        if (header->seqNumber != nextSeq++) r.headersInOrder = false;
        const std::size_t payload = message.size() - npmp::kDataHeaderSize;
        if (message.size() < 8192 &&
            std::memcmp(message.data() + npmp::kDataHeaderSize, pattern.data(), payload) != 0) {
          r.smallPayloadsIntact = false;
        }
        if (message.size() >= 8192 + npmp::kDataHeaderSize && message.back() == 0) ++r.largeUncopied;
        ++r.messages;
        bytes += message.size();
      },
      [&](const transport::ChannelEnd&) { r.ended = true; });
  std::thread thread([&writer, &sent] {
    boost::system::error_code ec;
    asio::write(writer, asio::buffer(sent.bytes), ec);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (bytes < sent.bytes.size() && !r.ended && std::chrono::steady_clock::now() < deadline) {
    io.run_one_for(std::chrono::milliseconds(100));
  }
  r.counts = receiver.statistics().received();
  r.read = channel->bytesRead();
  r.discarded = channel->bytesDiscarded();
  channel->close();  // a writer still blocked (the transfer failed) gets an error and ends
  thread.join();
  return r;
}

void checkSameCounts(const Received& r, const SentStream& sent) {
  CHECK_FALSE(r.ended);
  CHECK(r.allAccepted);
  CHECK(r.headersInOrder);
  CHECK(r.smallPayloadsIntact);
  CHECK(r.counts.bytes == sent.tx.total.bytes);
  CHECK(r.counts.packets == sent.tx.total.packets);
  CHECK(r.counts.frames == sent.tx.total.frames);
  CHECK(r.messages == sent.tx.total.packets);
  CHECK(r.read == sent.bytes.size());
}

// A connected pair of sockets of `protocol` on loopback (-1s where the kernel lacks it).
std::pair<int, int> loopbackPair(int protocol) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, protocol);
  if (listener < 0) return {-1, -1};
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(listener, 1) == 0);
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  const int client = ::socket(AF_INET, SOCK_STREAM, protocol);
  REQUIRE(client >= 0);
  REQUIRE(::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  const int server = ::accept(listener, nullptr, nullptr);
  ::close(listener);
  REQUIRE(server >= 0);
  return {client, server};
}

}  // namespace

TEST_CASE("large DATA payloads are discarded unread on TCP and every count stays exact") {
  const SentStream sent = sendStream(mixedFrames());
  test::LoopbackConnection tcp;
  const Received r = transfer(tcp.io, std::move(tcp.peer), std::move(tcp.local), sent);
  checkSameCounts(r, sent);
  // 98 % of the stream is the payload of messages of 8192 bytes and more: once the first of
  // them is seen, the channel reads only headers and the small messages whole (the 700-byte
  // ones between the 16000-byte ones included) and discards the rest.
  CHECK(r.discarded > sent.bytes.size() * 9 / 10);
  CHECK(r.discarded < sent.bytes.size());
  CHECK(r.largeUncopied > 150);
}

TEST_CASE("small DATA messages are read, not discarded") {
  const SentStream sent = sendStream(std::vector<double>(500, 1400.0));
  test::LoopbackConnection tcp;
  const Received r = transfer(tcp.io, std::move(tcp.peer), std::move(tcp.local), sent);
  checkSameCounts(r, sent);
  CHECK(r.discarded == 0);
  CHECK(r.largeUncopied == 0);
}

TEST_CASE("large DATA payloads on MPTCP: the counts stay exact, discarded or copied") {
  const auto [client, server] = loopbackPair(IPPROTO_MPTCP);
  if (client < 0) {
    WARN("SKIP: no MPTCP in this kernel");
    return;
  }
  const SentStream sent = sendStream(mixedFrames());
  asio::io_context io;
  asio::ip::tcp::socket writer(io), reader(io);
  writer.assign(asio::ip::tcp::v4(), client);
  reader.assign(asio::ip::tcp::v4(), server);
  const Received r = transfer(io, std::move(writer), std::move(reader), sent);
  checkSameCounts(r, sent);
  // MPTCP's recvmsg honours MSG_TRUNC on this kernel (6.18): the payloads are dropped, not
  // copied. (Where it did not, they would be copied into the channel's scratch message.)
  CHECK(r.discarded > sent.bytes.size() * 9 / 10);
  CHECK(r.largeUncopied > 150);
}
