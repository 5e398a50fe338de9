// The stop's drains (control/stop_flows): the wait for unread data does not end while a read
// that emptied the socket still has its completion queued; the waits give up on a peer that
// takes nothing, and keep waiting for one that keeps taking data.
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
// socket ioctls would report them, `taken` as the bytes its reads have taken.
struct ScriptedChannel final : transport::DataChannel {
  long unsentNow = 0, unreadNow = 0;
  std::uint64_t taken = 0;
  void send(const std::vector<asio::const_buffer>&, std::size_t, transport::SendHandler) override {}
  void receive(transport::MessageHandler, transport::ErrorHandler) override {}
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
  void spawn(control::Held what, std::chrono::milliseconds stall, std::chrono::seconds cap) {
    asio::co_spawn(
        io,
        [this, what, stall, cap]() -> asio::awaitable<void> {
          result = co_await control::waitUntilEmpty(io.get_executor(), flows, what, stall, cap);
        },
        asio::detached);
  }
};

}  // namespace

TEST_CASE("the wait for unread data lets a queued read completion run before it ends") {
  DrainFixture f;
  bool deliveredBeforeEnd = false;
  f.spawn(control::Held::kUnread, std::chrono::milliseconds(500), std::chrono::seconds(10));
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

TEST_CASE("the wait for unsent data gives up on a peer that takes nothing and says what is left") {
  DrainFixture f;
  f.channel->unsentNow = 5000;
  const auto begin = std::chrono::steady_clock::now();
  f.spawn(control::Held::kUnsent, std::chrono::milliseconds(50), std::chrono::seconds(10));
  f.io.run_for(std::chrono::seconds(8));
  REQUIRE(f.result.has_value());
  CHECK(*f.result == 5000);
  // It gave up for the stall, not at the cap.
  CHECK(std::chrono::steady_clock::now() - begin < std::chrono::seconds(8));
}

TEST_CASE("the wait for unsent data keeps waiting while the peer keeps taking data") {
  DrainFixture f;
  f.channel->unsentNow = 400;
  f.spawn(control::Held::kUnsent, std::chrono::milliseconds(50), std::chrono::seconds(10));
  // 100 bytes taken every 30 ms: 120 ms in all, more than the 50-ms stall limit.
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
