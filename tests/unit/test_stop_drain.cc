// The stop's drains (control/stop_flows): the wait for unread data does not end while a read
// that emptied the socket still has its completion queued; a wait ends when the queues are
// empty, or at its limit with what is left.
#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <optional>

#include "control/stop_flows.h"
#include "measure/flow.h"
#include "transport/data_channel.h"

using namespace npm;
namespace asio = boost::asio;

namespace {

// A channel whose queues are whatever the test says: `unsentNow` and `unreadNow` as the
// socket ioctls would report them, `taken` as the bytes its reads have taken. Its writes
// never complete (a peer that does not read); `end` ends it as the peer would.
struct ScriptedChannel final : transport::DataChannel {
  long unsentNow = 0, unreadNow = 0;
  std::uint64_t taken = 0;
  std::size_t writes = 0;
  transport::ErrorHandler end;
  void send(const std::vector<asio::const_buffer>&, std::size_t, transport::SendHandler) override { ++writes; }
  void receive(transport::MessageHandler, transport::ErrorHandler onEnd) override { end = std::move(onEnd); }
  void close() override {}
  int fd() const override { return -1; }
  bool isByteStream() const override { return true; }
  std::string peerName() const override { return "scripted"; }
  long unsent() override { return unsentNow; }
  long unread() override { return unreadNow; }
  std::uint64_t bytesRead() const override { return taken; }
};

struct DrainFixture {
  asio::io_context io;
  std::shared_ptr<ScriptedChannel> channel = std::make_shared<ScriptedChannel>();
  std::vector<std::shared_ptr<measure::Flow>> flows;
  std::optional<long> result;

  DrainFixture() {
    measure::FlowParameters p;
    p.flowId = 7;
    flows.push_back(std::make_shared<measure::Flow>(io, p, true));
    flows.back()->attach(channel);
  }
  void spawn(control::Held what, std::chrono::milliseconds limit) {
    asio::co_spawn(
        io,
        [this, what, limit]() -> asio::awaitable<void> {
          result = co_await control::waitUntilEmpty(io.get_executor(), flows, what, limit);
        },
        asio::detached);
  }
};

}  // namespace

TEST_CASE("the wait for unread data lets a queued read completion run before it ends") {
  DrainFixture f;
  bool deliveredBeforeEnd = false;
  f.spawn(control::Held::kUnread, std::chrono::milliseconds(2000));
  // Queued behind the wait's first look, as a speculative read's completion is: the socket
  // is empty already (unread 0), the bytes are in the read's buffer.
  asio::post(f.io, [&f, &deliveredBeforeEnd] {
    f.channel->taken += 1400;
    deliveredBeforeEnd = !f.result.has_value();
  });
  f.io.run_for(std::chrono::seconds(5));
  REQUIRE(f.result.has_value());
  CHECK(*f.result == 0);
  CHECK(deliveredBeforeEnd);
}

TEST_CASE("the wait for unsent data ends at its limit and says what is left") {
  DrainFixture f;
  f.channel->unsentNow = 5000;
  f.spawn(control::Held::kUnsent, std::chrono::milliseconds(50));
  f.io.run_for(std::chrono::seconds(5));
  REQUIRE(f.result.has_value());
  CHECK(*f.result == 5000);
}

TEST_CASE("the wait for unsent data ends when the peer has taken everything") {
  DrainFixture f;
  f.channel->unsentNow = 400;
  f.spawn(control::Held::kUnsent, std::chrono::milliseconds(3000));
  // 100 bytes taken every 30 ms: empty after 120 ms.
  asio::steady_timer tick(f.io);
  std::function<void()> take = [&] {
    tick.expires_after(std::chrono::milliseconds(30));
    tick.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      f.channel->unsentNow -= 100;
      if (f.channel->unsentNow > 0) take();
    });
  };
  take();
  f.io.run_for(std::chrono::seconds(5));
  REQUIRE(f.result.has_value());
  CHECK(*f.result == 0);
  CHECK(f.channel->unsentNow == 0);
}

// The reference's active ends its data connections, then sends STOP and waits 3 s for the
// acknowledgement. A flow whose connection the peer has shut down while a write of it was
// blocked held the passive's STOP for the sender's bounded wait (2 s) and the unsent drain
// (1 s): the reference gave up (seen with kernel SCTP in tests/vm).
TEST_CASE("a flow whose peer has ended its connection stops at once, with its write still blocked") {
  DrainFixture f;  // for its io_context
  measure::FlowParameters saturated;
  saturated.outbound.size.values[0] = 1400;  // const 0 frames/s: saturated
  auto sender = std::make_shared<measure::Flow>(f.io, saturated, true);
  auto channel = std::make_shared<ScriptedChannel>();
  sender->attach(channel);
  sender->startReceiving();
  sender->start(0, std::chrono::steady_clock::now());
  f.io.poll();
  REQUIRE(channel->writes == 1);  // under way, and it never completes
  REQUIRE(channel->end);
  channel->end(transport::ChannelEnd::failed("association shut down by the peer"));
  REQUIRE(sender->failed());
  bool stopped = false;
  sender->stopSending([&stopped] { stopped = true; });
  f.io.restart();  // the first poll ran out of work
  f.io.poll();     // ready handlers only: no timer has to expire for it
  CHECK(stopped);
}

TEST_CASE("the wait for unsent data leaves out a flow whose peer has ended its connection") {
  DrainFixture f;
  f.flows.front()->startReceiving();
  REQUIRE(f.channel->end);
  f.channel->end(transport::ChannelEnd::failed("association shut down by the peer"));
  f.channel->unsentNow = 5000;  // stays: nothing takes it any more
  f.spawn(control::Held::kUnsent, std::chrono::milliseconds(3000));
  f.io.run_for(std::chrono::seconds(5));
  REQUIRE(f.result.has_value());
  CHECK(*f.result == 0);
}
