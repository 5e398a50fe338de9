// The seam between the controller and the transports (transport/data_transport): the registry
// of a program's transports, what the passive admits of an ADD_FLOW, a connector that sets its
// socket up from the ADD_FLOW the active sends (the fields the passive reads), checked on the
// connected socket, and the passive's listeners: what they hand the flow registry.
#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/write.hpp>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "app/transports.h"
#include "npmp/messages.h"
#include "transport/data_transport.h"
#include "transport/pending_table.h"
#include "transport/sockets.h"
#include "transport/stream_transports.h"

using namespace npm;
namespace asio = boost::asio;
using npmp::Protocol;

namespace {

// Runs `connector.connect(flow)` on `io` to its end; the channel, or the exception's line.
struct Outcome {
  std::shared_ptr<transport::DataChannel> channel;
  std::string error;
};

Outcome connectOn(asio::io_context& io, transport::Connector& connector, const transport::FlowConnect& flow) {
  Outcome outcome;
  asio::co_spawn(io, connector.connect(flow),
                 [&](std::exception_ptr e, std::shared_ptr<transport::DataChannel> channel) {
                   if (e) {
                     try {
                       std::rethrow_exception(e);
                     } catch (const std::exception& x) {
                       outcome.error = x.what();
                     }
                   }
                   outcome.channel = std::move(channel);
                 });
  io.run();
  io.restart();
  return outcome;
}

transport::ActiveSide sideTo(asio::io_context& io, const asio::ip::address& remote, std::uint16_t port) {
  transport::ActiveSide side;
  side.control = &io;
  side.remote = remote;
  side.remotes = {remote};
  side.basePort = port;
  side.timeout = std::chrono::seconds(2);
  return side;
}

int intOption(int fd, int level, int name) {
  int value = -1;
  socklen_t length = sizeof(value);
  REQUIRE(::getsockopt(fd, level, name, &value, &length) == 0);
  return value;
}

}  // namespace

TEST_CASE("data transports: the registry finds what was added and says why the rest is absent") {
  transport::Registry registry;
  registry.add(transport::tcpTransport());
  registry.add(transport::udpTransport());
  registry.absent(Protocol::QUIC, "QUIC support is not compiled in");
  REQUIRE(registry.find(Protocol::TCP) != nullptr);
  CHECK(registry.find(Protocol::TCP)->protocol() == Protocol::TCP);
  CHECK(registry.find(Protocol::UDP)->protocol() == Protocol::UDP);
  CHECK(registry.find(Protocol::QUIC) == nullptr);
  CHECK(registry.whyAbsent(Protocol::QUIC) == "QUIC support is not compiled in");
  CHECK(registry.find(Protocol::DCCP) == nullptr);
  CHECK(registry.whyAbsent(Protocol::DCCP).find("DCCP") != std::string::npos);
  CHECK(registry.all().size() == 2);
  // Added after being said absent: present, and the reason is gone with its absence.
  registry.add(transport::dccpTransport());
  CHECK(registry.find(Protocol::DCCP) != nullptr);
  registry.absent(Protocol::TCP, "no TCP here");
  CHECK(registry.find(Protocol::TCP) == nullptr);
  CHECK(registry.whyAbsent(Protocol::TCP) == "no TCP here");
  CHECK(registry.all().size() == 2);
  // The kernel's byte streams and datagrams may live on any thread; nothing is shared.
  CHECK_FALSE(registry.find(Protocol::UDP)->flowsShareConnection());  // its flows may live on any thread
}

TEST_CASE("data transports: a TCP flow's socket has the options of the ADD_FLOW it was asked with") {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  auto tcp = transport::tcpTransport();
  auto connector = tcp->connector(sideTo(io, asio::ip::make_address("127.0.0.1"), acceptor.local_endpoint().port()));

  npmp::AddFlow wire;
  wire.flowId = 7;
  wire.protocol = Protocol::TCP;
  wire.flags = npmp::kAddFlowNoDelay;
  wire.sndBufferSize = 96 * 1024;
  wire.congestionControl = "reno";
  transport::FlowConnect flow;
  flow.wire = &wire;
  flow.owner = &io;
  flow.tos = 0x28;
  const Outcome made = connectOn(io, *connector, flow);
  INFO(made.error);
  REQUIRE(made.channel);
  const int fd = made.channel->fd();
  CHECK(intOption(fd, IPPROTO_TCP, TCP_NODELAY) == 1);
  CHECK(intOption(fd, SOL_SOCKET, SO_SNDBUF) == 2 * 96 * 1024);  // Linux doubles what it is given
  CHECK(intOption(fd, IPPROTO_IP, IP_TOS) == 0x28);
  char cc[16] = {};
  socklen_t length = sizeof(cc);
  REQUIRE(::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &length) == 0);
  CHECK(std::string(cc) == "reno");
  made.channel->close();

  // Without the flag and the congestion control: the kernel's defaults.
  npmp::AddFlow plain;
  plain.flowId = 8;
  plain.protocol = Protocol::TCP;
  flow.wire = &plain;
  flow.tos.reset();
  const Outcome second = connectOn(io, *connector, flow);
  REQUIRE(second.channel);
  CHECK(intOption(second.channel->fd(), IPPROTO_TCP, TCP_NODELAY) == 0);
  second.channel->close();
}

TEST_CASE("data transports: a refused TCP connect is one line that names the peer") {
  asio::io_context io;
  std::uint16_t port = 0;
  {
    asio::ip::tcp::acceptor closed(io, {asio::ip::make_address("127.0.0.1"), 0});
    port = closed.local_endpoint().port();
  }
  auto connector = transport::tcpTransport()->connector(sideTo(io, asio::ip::make_address("127.0.0.1"), port));
  npmp::AddFlow wire;
  wire.flowId = 1;
  transport::FlowConnect flow;
  flow.wire = &wire;
  flow.owner = &io;
  const Outcome refused = connectOn(io, *connector, flow);
  CHECK_FALSE(refused.channel);
  CHECK(refused.error.find("cannot connect to 127.0.0.1:" + std::to_string(port)) == 0);
  CHECK(refused.error.find('\n') == std::string::npos);
}

TEST_CASE("data transports: a UDP flow's socket is connected to the passive's BASE port") {
  asio::io_context io;
  asio::ip::udp::socket passive(io, {asio::ip::make_address("127.0.0.1"), 0});
  auto connector = transport::udpTransport()->connector(
      sideTo(io, asio::ip::make_address("127.0.0.1"), passive.local_endpoint().port()));
  npmp::AddFlow wire;
  wire.flowId = 3;
  wire.protocol = Protocol::UDP;
  wire.rcvBufferSize = 200 * 1024;
  transport::FlowConnect flow;
  flow.wire = &wire;
  flow.owner = &io;
  const Outcome made = connectOn(io, *connector, flow);
  INFO(made.error);
  REQUIRE(made.channel);
  CHECK_FALSE(made.channel->isByteStream());
  CHECK(intOption(made.channel->fd(), SOL_SOCKET, SO_RCVBUF) == 2 * 200 * 1024);
  sockaddr_storage peer{};
  socklen_t length = sizeof(peer);
  REQUIRE(::getpeername(made.channel->fd(), reinterpret_cast<sockaddr*>(&peer), &length) == 0);
  CHECK(ntohs(reinterpret_cast<sockaddr_in&>(peer).sin_port) == passive.local_endpoint().port());
  made.channel->close();
}

TEST_CASE("data transports: what the passive admits of an ADD_FLOW, and the status it refuses with") {
  const transport::Registry passive = app::passiveTransports(control::PassiveOptions{});
  auto addFlow = [](Protocol protocol) {
    npmp::AddFlow m;
    m.protocol = protocol;
    m.flowId = 1;
    return m;
  };
  for (Protocol p : {Protocol::TCP, Protocol::MPTCP, Protocol::UDP, Protocol::DCCP, Protocol::SCTP}) {
    INFO(npmp::protocolName(p));
    const transport::DataTransport* t = passive.find(p);
    REQUIRE(t != nullptr);
    CHECK_FALSE(t->admit(addFlow(p)));
    // A congestion control this kernel does not have: refused, naming it.
    auto unknown = addFlow(p);
    unknown.congestionControl = "no-such-cc";
    const auto refused = t->admit(unknown);
    REQUIRE(refused);
    CHECK(refused->status == npmp::kStatusError);
    CHECK(refused->why.find("no-such-cc") != std::string::npos);
  }
  // CMT: SCTP's, and MPTCP's "like MPTCP" (the reference's value 4) only.
  auto likeMptcp = addFlow(Protocol::MPTCP);
  likeMptcp.cmt = npmp::kCmtLikeMptcp;
  CHECK_FALSE(passive.find(Protocol::MPTCP)->admit(likeMptcp));
  likeMptcp.protocol = Protocol::TCP;
  const auto onTcp = passive.find(Protocol::TCP)->admit(likeMptcp);
  REQUIRE(onTcp);
  CHECK(onTcp->why == "CMT applies to SCTP flows only");
  auto cmtOnUdp = addFlow(Protocol::UDP);
  cmtOnUdp.cmt = 1;
  CHECK(passive.find(Protocol::UDP)->admit(cmtOnUdp));
  auto cmt = addFlow(Protocol::SCTP);
  cmt.cmt = 1;
  CHECK_FALSE(passive.find(Protocol::SCTP)->admit(cmt));
  // Where TCP and MPTCP connections are served: on any thread; the others where accepted.
  CHECK(passive.find(Protocol::TCP)->passiveOnAnyThread());
  CHECK(passive.find(Protocol::MPTCP)->passiveOnAnyThread());
  CHECK_FALSE(passive.find(Protocol::UDP)->passiveOnAnyThread());
  CHECK_FALSE(passive.find(Protocol::DCCP)->passiveOnAnyThread());
  CHECK_FALSE(passive.find(Protocol::SCTP)->passiveOnAnyThread());
  // QUIC: present where built (its sender's congestion control is its connection's, so any
  // name is admitted), said absent otherwise.
  if (const transport::DataTransport* quic = passive.find(Protocol::QUIC)) {
    auto m = addFlow(Protocol::QUIC);
    m.congestionControl = "no-such-cc";
    CHECK_FALSE(quic->admit(m));
    m.cmt = 1;
    CHECK(quic->admit(m));
    CHECK_FALSE(quic->passiveOnAnyThread());
  } else {
    CHECK(passive.whyAbsent(Protocol::QUIC) == "this passive was built without QUIC");
  }
}

namespace {

// The passive's flow registry as a listener sees it: what it was handed, and one flow (`wire`)
// whose IDENTIFY it binds.
class RecordingFlows final : public transport::PassiveFlows {
public:
  struct Identified {
    npmp::IdentifyFlow id;
    std::shared_ptr<transport::DataChannel> channel;
    Protocol protocol;
    bool shared;
  };

  bool admits(const asio::ip::address&, const std::string&) override { return true; }
  const npmp::AddFlow* waiting(const npmp::IdentifyFlow& id, Protocol protocol) const override {
    return id.flowId == wire.flowId && protocol == wire.protocol ? &wire : nullptr;
  }
  void refuse(const npmp::IdentifyFlow&, const std::string& why, std::uint32_t) override { refusals.push_back(why); }
  bool identify(const npmp::IdentifyFlow& id, std::shared_ptr<transport::DataChannel> channel, Protocol protocol,
                const asio::ip::address&, bool shared) override {
    if (id.flowId != wire.flowId) {
      channel->close();
      return false;
    }
    identified.push_back({id, std::move(channel), protocol, shared});
    return true;
  }
  void broken(const std::string& line) override { brokenLines.push_back(line); }

  npmp::AddFlow wire;
  std::vector<Identified> identified;
  std::vector<std::string> refusals, brokenLines;
};

transport::PassiveSide passiveSide(asio::io_context& io, std::uint16_t port, std::shared_ptr<RecordingFlows> flows) {
  transport::PassiveSide side;
  side.control = &io;
  side.basePort = port;
  side.locals = {asio::ip::make_address("127.0.0.1")};
  side.connections =
      std::make_shared<transport::PendingTable<transport::DataChannel>>(io, "data connection", side.pending);
  side.flows = std::move(flows);
  return side;
}

npmp::Bytes identifyMessage(std::uint32_t flowId) {
  npmp::IdentifyFlow id;
  id.flowId = flowId;
  id.measurementId = 0x1234;
  npmp::Bytes out;
  npmp::encode(id, out);
  return out;
}

// Runs `io` until `done` holds (at most 5 s).
template <class Done>
bool runUntil(asio::io_context& io, Done done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done() && std::chrono::steady_clock::now() < until) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
  return done();
}

}  // namespace

TEST_CASE("data transports: the passive's UDP listener hands each source's datagrams to the channel it identified") {
  asio::io_context io;
  std::uint16_t port = 0;
  {
    asio::ip::udp::socket probe(io, {asio::ip::make_address("127.0.0.1"), 0});
    port = probe.local_endpoint().port();
  }
  auto flows = std::make_shared<RecordingFlows>();
  flows->wire.flowId = 7;
  flows->wire.protocol = Protocol::UDP;
  auto listener = transport::udpTransport()->listen(passiveSide(io, port, flows));
  CHECK(listener->name() == "UDP");
  CHECK(listener->port() == port);
  const asio::ip::udp::endpoint to(asio::ip::make_address("127.0.0.1"), port);
  asio::ip::udp::socket a(io, {asio::ip::make_address("127.0.0.1"), 0});
  asio::ip::udp::socket b(io, {asio::ip::make_address("127.0.0.1"), 0});

  a.send_to(asio::buffer(identifyMessage(7)), to);
  REQUIRE(runUntil(io, [&] { return flows->identified.size() == 1; }));
  CHECK(flows->identified[0].shared);
  CHECK(flows->identified[0].protocol == Protocol::UDP);
  std::vector<std::size_t> gotA, gotB;
  flows->identified[0].channel->receive(
      [&](std::span<const std::uint8_t> m, std::uint64_t) { gotA.push_back(m.size()); },
      [](const transport::ChannelEnd&) {});
  // An IDENTIFY the registry refuses binds nothing: that source's next datagrams go nowhere.
  b.send_to(asio::buffer(identifyMessage(8)), to);
  b.send_to(asio::buffer(std::string(50, 'x')), to);
  a.send_to(asio::buffer(std::string(100, 'x')), to);
  REQUIRE(runUntil(io, [&] { return gotA.size() == 1; }));
  CHECK(gotA == std::vector<std::size_t>{100});
  CHECK(flows->identified.size() == 1);

  // Another source identifies the flow's twin: its datagrams are its own channel's.
  b.send_to(asio::buffer(identifyMessage(7)), to);
  REQUIRE(runUntil(io, [&] { return flows->identified.size() == 2; }));
  flows->identified[1].channel->receive(
      [&](std::span<const std::uint8_t> m, std::uint64_t) { gotB.push_back(m.size()); },
      [](const transport::ChannelEnd&) {});
  b.send_to(asio::buffer(std::string(60, 'x')), to);
  a.send_to(asio::buffer(std::string(101, 'x')), to);
  REQUIRE(runUntil(io, [&] { return gotA.size() == 2 && gotB.size() == 1; }));
  CHECK(gotA.back() == 101);
  CHECK(gotB == std::vector<std::size_t>{60});

  // A closed channel (its flow removed) no longer gets its source's datagrams.
  flows->identified[0].channel->close();
  a.send_to(asio::buffer(std::string(102, 'x')), to);
  b.send_to(asio::buffer(std::string(61, 'x')), to);
  REQUIRE(runUntil(io, [&] { return gotB.size() == 2; }));
  CHECK(gotA.size() == 2);
  listener->close();
}

TEST_CASE(
    "data transports: the passive's TCP listener hands on a connection by its IDENTIFY, with its flow's options") {
  asio::io_context io;
  std::uint16_t port = 0;
  {
    asio::ip::tcp::acceptor probe(io, {asio::ip::make_address("127.0.0.1"), 0});
    port = probe.local_endpoint().port();
  }
  auto flows = std::make_shared<RecordingFlows>();
  flows->wire.flowId = 5;
  flows->wire.protocol = Protocol::TCP;
  flows->wire.rcvBufferSize = 300 * 1024;
  const transport::PassiveSide side = passiveSide(io, port, flows);
  auto listener = transport::tcpTransport()->listen(side);
  CHECK(listener->name() == "TCP");
  const asio::ip::tcp::endpoint to(asio::ip::make_address("127.0.0.1"), port);

  asio::ip::tcp::socket good(io), bad(io);
  good.connect(to);
  bad.connect(to);
  REQUIRE(runUntil(io, [&] { return side.connections->size() == 2; }));
  asio::write(good, asio::buffer(identifyMessage(5)));
  npmp::Start start;
  npmp::Bytes notIdentify;
  npmp::encode(start, notIdentify);
  asio::write(bad, asio::buffer(notIdentify));
  REQUIRE(runUntil(io, [&] { return flows->identified.size() == 1 && flows->brokenLines.size() == 1; }));
  CHECK_FALSE(flows->identified[0].shared);
  // The flow's receive buffer, set on the accepted connection from its ADD_FLOW.
  CHECK(intOption(flows->identified[0].channel->fd(), SOL_SOCKET, SO_RCVBUF) == 2 * 300 * 1024);
  CHECK(flows->brokenLines[0].find("Closing data connection from 127.0.0.1:") == 0);
  CHECK(side.connections->size() == 0);
  // The one that did not identify its flow is closed.
  bad.non_blocking(true);
  CHECK(runUntil(io, [&] {
    char byte;
    boost::system::error_code ec;
    bad.read_some(asio::buffer(&byte, 1), ec);
    return ec && ec != asio::error::would_block;
  }));
  listener->close();
}
