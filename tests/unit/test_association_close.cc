// Association::close() after the peer's SHUTDOWN: the socket stays open until the association
// has ended (SHUTDOWN COMPLETE, ABORT, end of file) or kFinishWait has passed. Closing it at
// once let usrsctp 0.9.5 free the socket while its receive thread still worked on the
// association's last packets (a corrupted heap in the passive every few hundred measurements).
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <cerrno>
#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include "sctp/association.h"
#include "sctp/socket.h"

using namespace npm;
using sctp::AssociationEvent;
namespace asio = boost::asio;

namespace {

// A socket whose receive() plays a script; a notification's event is its first byte.
struct Script {
  struct Read {
    long n;  // bytes, 0 = end of file, -1 = EAGAIN
    bool notification = false;
    AssociationEvent event = AssociationEvent::Other;
  };
  std::deque<Read> reads;
  std::function<void()> waiting;  // the read waiting for more of the script
  int closes = 0;
};

class ScriptedSocket : public sctp::Socket {
public:
  ScriptedSocket(asio::io_context& io, std::shared_ptr<Script> script) : io_(io), script_(std::move(script)) {}
  sctp::Stack stack() const override { return sctp::Stack::Userland; }
  void configure(const sctp::SocketOptions&) override {}
  void tune(const sctp::Tuning&) override {}
  void setBufferSizes(std::uint32_t, std::uint32_t) override {}
  std::optional<bool> nrSackNegotiated() override { return std::nullopt; }
  std::optional<sctp::Tuning> tuningInForce() override { return std::nullopt; }
  void releaseProcessWide() override {}
  void bind(const std::vector<asio::ip::address>&, std::uint16_t) override {}
  void listen() override {}
  std::unique_ptr<Socket> accept() override { return nullptr; }
  void connect(const std::vector<asio::ip::address>&, std::uint16_t) override {}
  int connectError() override { return 0; }
  long send(const std::uint8_t*, std::size_t length, const sctp::SendInfo&) override {
    return static_cast<long>(length);
  }
  long receive(std::uint8_t* buffer, std::size_t, sctp::ReceiveInfo& info) override {
    if (script_->reads.empty() || script_->reads.front().n < 0) {
      if (!script_->reads.empty()) script_->reads.pop_front();
      errno = EAGAIN;
      return -1;
    }
    const auto read = script_->reads.front();
    script_->reads.pop_front();
    info.notification = read.notification;
    if (read.n > 0) buffer[0] = static_cast<std::uint8_t>(read.event);
    return read.n;
  }
  AssociationEvent notification(const std::uint8_t* data, std::size_t) override {
    return static_cast<AssociationEvent>(data[0]);
  }
  void asyncWait(bool, std::function<void()> handler) override {
    if (script_->closes > 0) return;
    if (script_->reads.empty()) {
      script_->waiting = std::move(handler);
    } else {
      asio::post(io_, std::move(handler));
    }
  }
  long unsentChunks() override { return 0; }
  std::vector<asio::ip::address> peerAddresses() override { return {}; }
  void samplePaths(std::vector<transport::PathSample>&) override {}
  std::vector<asio::ip::address> localAddresses() override { return {}; }
  std::uint16_t localPort() override { return 0; }
  void shutdownWrite() override {}
  void close() override { ++script_->closes; }

private:
  asio::io_context& io_;
  std::shared_ptr<Script> script_;
};

Script::Read event(AssociationEvent e) { return {16, true, e}; }  // the size is not looked at
Script::Read data() { return {100}; }
Script::Read nothing() { return {-1}; }

// More for the script: the waiting read runs.
void feed(asio::io_context& io, Script& script, std::deque<Script::Read> reads) {
  script.reads = std::move(reads);
  if (auto waiting = std::exchange(script.waiting, nullptr)) asio::post(io, std::move(waiting));
  io.poll();
}

// An association that has read the peer's SHUTDOWN and been closed by its user in response.
std::shared_ptr<sctp::Association> closedAfterPeerShutdown(asio::io_context& io,
                                                           const std::shared_ptr<Script>& script) {
  auto association = std::make_shared<sctp::Association>(io, std::make_unique<ScriptedSocket>(io, script), "peer");
  std::weak_ptr<sctp::Association> weak = association;
  std::optional<transport::ChannelEnd> end;
  association->start([](std::uint16_t, std::uint32_t, std::span<const std::uint8_t>, std::uint64_t) {},
                     [weak, &end](const transport::ChannelEnd& why) {
                       end = why;
                       if (auto a = weak.lock()) a->close();  // what a control channel does
                     });
  io.poll();
  REQUIRE(association->closed());
  REQUIRE(end);
  CHECK(end->reason() == transport::ChannelEnd::Reason::kAssociationShutDownByPeer);
  CHECK(end->byPeer());
  CHECK(end->text() == "association shut down by the peer");
  return association;
}

}  // namespace

TEST_CASE("after the peer's SHUTDOWN the socket is closed once SHUTDOWN COMPLETE is read") {
  asio::io_context io;
  auto script = std::make_shared<Script>();
  script->reads = {data(), event(AssociationEvent::Shutdown), nothing(), data(), nothing()};
  auto association = closedAfterPeerShutdown(io, script);
  association.reset();  // the user lets go; the wait holds it
  io.poll();
  CHECK(script->closes == 0);  // still waiting for the end, reading (and dropping) what comes
  feed(io, *script, {event(AssociationEvent::Other), event(AssociationEvent::ShutdownComplete)});
  CHECK(script->closes == 1);
  CHECK(script->reads.empty());
}

TEST_CASE("after the peer's SHUTDOWN an ABORT or the end of file closes the socket too") {
  for (const auto last : {event(AssociationEvent::CommLost), Script::Read{0}}) {
    asio::io_context io;
    auto script = std::make_shared<Script>();
    script->reads = {event(AssociationEvent::Shutdown), nothing()};
    auto association = closedAfterPeerShutdown(io, script);
    CHECK(script->closes == 0);
    feed(io, *script, {last});
    CHECK(script->closes == 1);
  }
}

TEST_CASE("after the peer's SHUTDOWN without an end the socket is closed after kFinishWait") {
  asio::io_context io;
  auto script = std::make_shared<Script>();
  script->reads = {event(AssociationEvent::Shutdown)};
  auto association = closedAfterPeerShutdown(io, script);
  association.reset();
  io.run_for(sctp::Association::kFinishWait / 2);
  CHECK(script->closes == 0);
  io.run_for(sctp::Association::kFinishWait);
  CHECK(script->closes == 1);
  CHECK(io.stopped());  // nothing left behind: the association is gone
}

TEST_CASE("without the peer's SHUTDOWN close() closes the socket at once") {
  asio::io_context io;
  auto script = std::make_shared<Script>();
  auto association = std::make_shared<sctp::Association>(io, std::make_unique<ScriptedSocket>(io, script), "peer");
  association->close();
  CHECK(script->closes == 1);
  association.reset();
  CHECK(script->closes == 1);  // not twice
}

TEST_CASE("when SHUTDOWN COMPLETE has been read, close() closes the socket at once") {
  asio::io_context io;
  auto script = std::make_shared<Script>();
  script->reads = {event(AssociationEvent::ShutdownComplete)};
  closedAfterPeerShutdown(io, script);
  CHECK(script->closes == 1);
}
