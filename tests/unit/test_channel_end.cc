// How a channel ends: the reason is decided where the end happens (a stream channel's read,
// an SCTP association's event), and its text is the line the log and the JSON document print.
#include <catch2/catch.hpp>

#include <boost/asio/error.hpp>
#include <boost/asio/write.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>

#include "loopback.h"
#include "transport/channel_end.h"
#include "transport/data_channel.h"

using namespace npm;
namespace asio = boost::asio;
using transport::ChannelEnd;
using Reason = ChannelEnd::Reason;

namespace {

// A stream channel on one end of a loopback TCP connection; `peer` is the other end.
struct StreamEnd : test::LoopbackConnection {
  std::shared_ptr<transport::DataChannel> channel = transport::makeStreamChannel(std::move(local));

  // Reads until the channel ends (at most 5 s); how it ended.
  ChannelEnd wait() {
    std::optional<ChannelEnd> end;
    channel->receive([](std::span<const std::uint8_t>, std::uint64_t) {}, [&end](const ChannelEnd& e) { end = e; });
    while (!end && io.run_one_for(std::chrono::seconds(5)) > 0) {}
    REQUIRE(end);
    return *end;
  }
};

void checkEnd(const ChannelEnd& end, Reason reason, bool byPeer, const std::string& text) {
  CHECK(end.reason() == reason);
  CHECK(end.byPeer() == byPeer);
  CHECK(end.text() == text);
}

}  // namespace

TEST_CASE("a stream's end of file is the peer's orderly close") {
  StreamEnd stream;
  stream.peer.close();
  checkEnd(stream.wait(), Reason::kClosedByPeer, true, "connection closed by the peer");
}

TEST_CASE("bytes that are not NPMP end a stream as a protocol violation, not as the peer's close") {
  StreamEnd stream;
  const std::uint8_t tooShort[] = {0x05, 0, 0, 2};
  asio::write(stream.peer, asio::buffer(tooShort));
  checkEnd(stream.wait(), Reason::kProtocolViolation, false, "not NPMP: message length 2 is below the header size");
}

TEST_CASE("a reset connection is a failure in the socket error's words") {
  StreamEnd stream;
  stream.peer.set_option(asio::socket_base::linger(true, 0));  // close() sends RST
  stream.peer.close();
  checkEnd(stream.wait(), Reason::kFailed, false, boost::system::error_code(asio::error::connection_reset).message());
}

TEST_CASE("an end of file within a message is no orderly close") {
  checkEnd(ChannelEnd::ofRead(asio::error::eof, true), Reason::kClosedByPeerMidMessage, false,
           "connection closed by the peer in the middle of a message");
}

TEST_CASE("an SCTP association ends by the peer with its EOF or SHUTDOWN only") {
  for (const auto& [reason, byPeer, text] : {
           std::tuple{Reason::kAssociationClosedByPeer, true, "association closed by the peer"},
           std::tuple{Reason::kAssociationShutDownByPeer, true, "association shut down by the peer"},
           std::tuple{Reason::kAssociationLost, false, "association lost (COMM_LOST)"},
           std::tuple{Reason::kAssociationCannotStart, false, "cannot start the association"},
       }) {
    checkEnd(ChannelEnd(reason), reason, byPeer, text);
  }
}
