#include "sctp/data_transport.h"

#include <boost/asio/ip/udp.hpp>
#include <sys/socket.h>

#include <algorithm>
#include <functional>
#include <map>

#include "common/log.h"
#include "flowspec/flowspec.h"
#include "sctp/flow_settings.h"
#include "sctp/sockaddr.h"
#include "transport/async.h"
#include "transport/sockets.h"

namespace npm::sctp {

namespace {

// A datagram without payload (which usrsctp drops unread) to the peer's UDP port of userland
// SCTP, from a connected socket: when nothing listens there, the ICMP port unreachable that
// comes back within a round trip reports the refusal. The probe ends when its socket is closed.
std::shared_ptr<asio::ip::udp::socket> probeRefusal(asio::io_context& io, const asio::ip::udp::endpoint& to,
                                                    std::function<void(Result<void>)> report) {
  auto socket = std::make_shared<asio::ip::udp::socket>(io);
  boost::system::error_code ec;
  socket->open(to.protocol(), ec);
  if (!ec) socket->connect(to, ec);
  if (!ec) socket->send(asio::const_buffer(nullptr, 0), 0, ec);
  if (ec) return socket;  // no probe: the association's own outcome decides
  auto byte = std::make_shared<char>();
  socket->async_receive(
      asio::buffer(byte.get(), 1), [socket, byte, to, report](const boost::system::error_code& e, std::size_t) {
        if (e == asio::error::connection_refused) {
          report(Failure{"nothing listens on UDP port " + std::to_string(to.port()) + " (userland SCTP) there"});
        }
      });
  return socket;
}

}  // namespace

asio::awaitable<void> waitConnected(asio::io_context& io, Association& association, Clock::duration timeout,
                                    const std::string& ifTimedOut,
                                    std::optional<asio::ip::udp::endpoint> encapsulation) {
  Completion<Result<void>> connected(io.get_executor());
  association.onConnected(connected.reporter());
  const auto probe = encapsulation ? probeRefusal(io, *encapsulation, connected.reporter()) : nullptr;
  const auto outcome = co_await connected.wait(Clock::now() + timeout);
  if (probe) {
    boost::system::error_code ignored;
    probe->close(ignored);
  }
  if (!outcome) {
    association.onConnected(nullptr);
    association.close();
    throw transport::TransportError("cannot connect to " + association.peerName() + ": timed out" + ifTimedOut);
  }
  if (!*outcome) {
    association.onConnected(nullptr);
    association.close();
    throw transport::TransportError("cannot connect to " + association.peerName() + ": " + outcome->error());
  }
}

namespace {

// The active's associations, one per FLOWSPEC option, made at its first flow.
class SctpConnector final : public transport::Connector {
public:
  SctpConnector(const TransportOptions& options, const transport::ActiveSide& side) : options_(options), side_(side) {}

  asio::awaitable<std::shared_ptr<transport::DataChannel>> connect(const transport::FlowConnect& flow) override {
    auto a = co_await association(flow);
    co_return a->stream(flow.wire->streamId, policyOf(*flow.wire, flowspec::Side::Active));
  }

  void close() override {
    for (auto& [group, a] : associations_) a->close();
  }

private:
  asio::awaitable<std::shared_ptr<Association>> association(const transport::FlowConnect& flow) {
    const std::uint32_t flowId = flow.wire->flowId;
    const std::string id = "Flow #" + std::to_string(flowId);
    if (auto it = associations_.find(flow.group); it != associations_.end()) {
      if (side_.addresses)
        side_.addresses(flowId, it->second->socket().localAddresses(), it->second->socket().peerAddresses());
      co_return it->second;
    }
    const Tuning tuning = tuningOf(*flow.wire);
    const Stack stack = resolve(options_.stack, tuning.needsUserland());
    if (options_.stack == StackChoice::Auto && stack == Stack::Userland && kernelAvailable()) {
      log::info(id + ": CMT-SCTP needs the userland SCTP stack; using it");
    }
    const int family = side_.remote.is_v6() ? AF_INET6 : AF_INET;
    if (side_.stackUsed) side_.stackUsed(stackName(stack));
    auto socket = open(stack, *side_.control, family, options_.settings);
    SocketOptions options;
    options.streams = static_cast<std::uint16_t>(flow.groupSize);
    const transport::SocketOptions wire = transport::socketOptionsOf(*flow.wire);
    options.rcvBufferSize = wire.rcvBufferSize;
    options.sndBufferSize = wire.sndBufferSize;
    options.noDelay = wire.noDelay.value_or(false);
    if (stack == Stack::Userland) {
      options.nrSack = tuning.nrSack;
      if (tuning.pktDrop) options.pktDrop = true;
    }
    if (family == AF_INET6) options.v6only = flow.v6only || side_.v6only;
    socket->configure(options);
    socket->tune(tuning);
    // Multi-homing: bind every local address given with -L (bindx), connect to the peer (connectx).
    // Without -L both sides offer every address of their host: an association to a passive on
    // loopback has a path to each of the passive's addresses, said below. (Binding loopback alone
    // here does not help: the passive still offers its others, and that path from 127.0.0.1 fails.)
    if (!side_.locals.empty()) socket->bind(side_.locals, 0);
    const bool onLoopback = std::all_of(side_.remotes.begin(), side_.remotes.end(), [](const asio::ip::address& a) {
      return transport::unmapped(a).is_loopback();
    });
    const std::string name = transport::endpointName(side_.remote, side_.basePort);
    log::info(id + ": connecting SCTP association (" + stackName(stack) + " stack" +
              (tuning.cmt != 0 ? std::string(", CMT ") + flowspec::cmtName(tuning.cmt) : std::string()) + ") to " +
              name + " from " + (side_.locals.empty() ? std::string("(any)") : addressList(side_.locals)));
    socket->connect(side_.remotes, side_.basePort);  // connectx: every address the peer's name has
    auto association = std::make_shared<Association>(*side_.control, std::move(socket), name);
    co_await waitConnected(*side_.control, *association, side_.timeout);
    const auto peers = association->socket().peerAddresses();
    if (side_.addresses) side_.addresses(flowId, association->socket().localAddresses(), peers);
    if (onLoopback && peers.size() > 1) {
      // The passive bound more than loopback and offered its other addresses: said, as they are
      // paths of their own in the per-path results.
      log::warning(id + ": the SCTP association to " + name + " has " + std::to_string(peers.size()) +
                   " paths, to the passive's addresses " + addressList(peers) +
                   " (both sides bind every address of their host; give both -L 127.0.0.1 to keep to loopback)");
    }
    if (const auto nrSack = association->socket().nrSackNegotiated(); tuning.nrSack && nrSack && !*nrSack) {
      // Offered by this side and not by the peer (e.g. a passive on another SCTP stack).
      log::warning(id +
                   ": nrsack=on was asked for, but the passive's SCTP "
                   "stack did not agree to NR-SACK; the association uses plain SACKs");
    }
    if (const auto held = association->socket().tuningInForce()) {
      log::info(id + ": SCTP association up, the stack holds " + describe(*held));
      if (tuning.pktDrop && !held->pktDrop) {
        log::warning(id +
                     ": pktdrop=on was asked for, but the passive's SCTP "
                     "stack did not agree to packet-drop reporting");
      }
    }
    association->start(nullptr, nullptr);
    associations_[flow.group] = association;
    co_return association;
  }

  TransportOptions options_;
  transport::ActiveSide side_;
  std::map<std::uint32_t, std::shared_ptr<Association>> associations_;  // by FLOWSPEC option
};

class SctpTransport final : public transport::DataTransport {
public:
  explicit SctpTransport(const TransportOptions& options) : options_(options) {}
  npmp::Protocol protocol() const override { return npmp::Protocol::SCTP; }
  bool activeOnAnyThread() const override { return false; }
  std::unique_ptr<transport::Connector> connector(const transport::ActiveSide& side) const override {
    return std::make_unique<SctpConnector>(options_, side);
  }
  // The tuning this stack can hold (the system's usrsctp lacks the series' mechanisms, and holds
  // some settings process-wide), and the congestion-control name as for every flow.
  std::optional<Refusal> admit(const npmp::AddFlow& m) const override {
    const Tuning tuning = tuningOf(m);
    if (auto supported = userlandSupports(tuning); !supported) {
      return Refusal{supported.error(), npmp::kStatusUnsupported};
    }
    if (auto compatible = processWideCompatible(tuning); !compatible) {
      return Refusal{compatible.error(), npmp::kStatusProcessWideConflict};
    }
    if (auto usable = transport::checkCongestionControl(m.congestionControl); !usable) {
      return Refusal{usable.error(), npmp::kStatusError};
    }
    return std::nullopt;
  }

private:
  TransportOptions options_;
};

}  // namespace

std::shared_ptr<transport::DataTransport> dataTransport(const TransportOptions& options) {
  return std::make_shared<SctpTransport>(options);
}

}  // namespace npm::sctp
