#include "sctp/data_transport.h"

#include <boost/asio/ip/udp.hpp>
#include <sys/socket.h>

#include <algorithm>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include "common/log.h"
#include "flowspec/flowspec.h"
#include "sctp/flow_settings.h"
#include "sctp/sockaddr.h"
#include "transport/accepting.h"
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

// The passive's data listeners, one per stack it serves (--sctp-stack=auto on a kernel with
// SCTP: both, the kernel's for what actives send by default, the userland one over UDP for the
// flows that need it, CMT; the userland stack reads no raw SCTP, so it never sees the kernel's
// packets). Each stream of an association announces its flow with IDENTIFY (PPID 36); the
// association waits in its own table until one has.
class SctpListener final : public transport::Listener, public std::enable_shared_from_this<SctpListener> {
public:
  SctpListener(const TransportOptions& options, const transport::PassiveSide& side)
      : options_(options),
        side_(side),
        pending_(
            std::make_shared<transport::PendingTable<Association>>(*side.control, "SCTP association", side.pending)) {}

  void open() {
    const std::vector<Stack> stacks = passiveStacks(options_.stack);
    std::string why;
    for (const Stack stack : stacks) {
      try {
        open(stack);
      } catch (const transport::TransportError& e) {
        const bool besideKernel = stack == Stack::Userland && stacks.size() > 1;
        log::warning(
            std::string(besideKernel ? "No userland SCTP data listener (for CMT flows): " : "No SCTP data listener: ") +
            e.what());
        why = e.what();
      }
    }
    if (listeners_.empty()) throw transport::TransportError(why);
  }

  std::string name() const override { return "SCTP"; }
  std::uint16_t port() const override { return side_.basePort; }
  void close() override {
    closed_ = true;
    for (auto& l : listeners_) l->close();
    pending_->closeAll();
  }

private:
  void open(Stack stack) {
    const int family = transport::listeningFamily(side_.locals);
    SocketOptions o;
    // Data associations carry up to 65535 flows. Every stream costs the stack memory for the
    // association's lifetime (65535 cost ~4 MB).
    o.streams = 65535;
    o.noDelay = true;
    if (family == AF_INET6) o.v6only = side_.v6only;
    o.rcvBufferSize = side_.rcvBufferSize;
    o.sndBufferSize = side_.sndBufferSize;
    // Offered to every active: an association uses NR-SACK exactly when its active offers it too
    // (nrsack=on), which this passive cannot know before the INIT. The same for packet-drop
    // reporting (pktdrop=on).
    if (stack == Stack::Userland) {
      o.nrSack = true;
      o.pktDrop = true;
    }
    auto listener = listenOn(stack, *side_.control, family, options_.settings, o, side_.locals, side_.basePort);
    listeners_.push_back(listener);
    accept(listener);
  }

  void accept(std::shared_ptr<Socket> listener) {
    std::weak_ptr<SctpListener> weak = weak_from_this();
    acceptAssociations(
        *side_.control, std::move(listener),
        [weak] {
          auto self = weak.lock();
          return self && !self->closed_;
        },
        [weak](std::shared_ptr<Association> association, const asio::ip::address& peer) {
          if (auto self = weak.lock()) self->adopt(std::move(association), peer);
        });
  }

  void adopt(std::shared_ptr<Association> association, const asio::ip::address& peer) {
    if (!side_.flows->admits(peer, "an SCTP data association")) return association->close();
    if (!pending_->add(association, peer)) return;
    Association* raw = association.get();
    std::weak_ptr<transport::PendingTable<Association>> table = pending_;
    std::weak_ptr<transport::PassiveFlows> weakFlows = side_.flows;
    std::weak_ptr<Association> weakAssociation = association;
    association->start(
        [table, weakFlows, weakAssociation, raw, peer](std::uint16_t stream, std::uint32_t,
                                                       std::span<const std::uint8_t> message, std::uint64_t) {
          auto flows = weakFlows.lock();
          auto association = weakAssociation.lock();
          if (!flows || !association) return;
          const auto id = transport::identifyOf(message);
          if (!id || id->streamId != stream) {
            flows->broken("Closing SCTP association from " + association->peerName() +
                          ": expected IDENTIFY_FLOW on stream " + std::to_string(stream) + ", got " +
                          (id ? "one for stream " + std::to_string(id->streamId) : id.error()));
            association->close();
            if (auto pending = table.lock()) pending->take(raw);
            return;
          }
          const npmp::AddFlow* wire = flows->waiting(*id, npmp::Protocol::SCTP);
          if (wire != nullptr && !settle(*flows, *association, *id, *wire)) return;
          flows->identify(
              *id,
              association->stream(stream, wire != nullptr ? policyOf(*wire, flowspec::Side::Passive) : StreamPolicy{}),
              npmp::Protocol::SCTP, peer);
          // Identified at least once: no longer pending; closed with its last flow.
          if (association->hasClaims()) {
            if (auto pending = table.lock()) pending->take(raw);
          }
        },
        [table, raw](const transport::ChannelEnd& end) {
          auto pending = table.lock();
          if (pending && pending->take(raw)) log::debug("SCTP association from " + raw->peerName() + ": " + end.text());
        });
  }

  // The flow's settings on this side too: its buffers (this side receives what the active sends)
  // and CMT with its tuning (for what this side sends). False (the IDENTIFY refused) where the
  // stack does not take them.
  static bool settle(transport::PassiveFlows& flows, Association& association, const npmp::IdentifyFlow& id,
                     const npmp::AddFlow& wire) {
    const Tuning tuning = tuningOf(wire);
    try {
      const transport::SocketOptions options = transport::socketOptionsOf(wire);
      association.socket().setBufferSizes(options.rcvBufferSize, options.sndBufferSize);
      association.socket().tune(tuning);
      if (const auto held = association.socket().tuningInForce()) {
        log::info("Flow #" + std::to_string(id.flowId) + ": SCTP association from " + association.peerName() +
                  ", the stack holds " + describe(*held));
      }
      return true;
    } catch (const transport::TransportError& e) {
      // The system's usrsctp: settings another CMT association holds process-wide; any stack: an
      // option the stack refused, or does not hold after setting it.
      const bool conflict = !processWideCompatible(tuning);
      flows.refuse(id, std::string("SCTP association from ") + association.peerName() + ": " + e.what(),
                   conflict ? npmp::kStatusProcessWideConflict : npmp::kStatusError);
      return false;
    }
  }

  TransportOptions options_;
  transport::PassiveSide side_;
  std::vector<std::shared_ptr<Socket>> listeners_;
  std::shared_ptr<transport::PendingTable<Association>> pending_;
  bool closed_ = false;
};

class SctpTransport final : public transport::DataTransport {
public:
  explicit SctpTransport(const TransportOptions& options) : options_(options) {}
  npmp::Protocol protocol() const override { return npmp::Protocol::SCTP; }
  bool flowsShareConnection() const override { return true; }
  std::string congestionControl(const npmp::AddFlow& wire) const override {
    return ccModuleName(tuningOf(wire).ccModule);
  }
  std::string whyUnsupported() const override {
    return "it has no SCTP listener, or its SCTP stack lacks a mechanism the flow asks for (see its log)";
  }
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
  std::shared_ptr<transport::Listener> listen(const transport::PassiveSide& side) const override {
    auto listener = std::make_shared<SctpListener>(options_, side);
    listener->open();
    return listener;
  }

private:
  TransportOptions options_;
};

}  // namespace

std::shared_ptr<transport::DataTransport> dataTransport(const TransportOptions& options) {
  return std::make_shared<SctpTransport>(options);
}

std::vector<Stack> passiveStacks(StackChoice choice) {
  if (choice != StackChoice::Auto) return {resolve(choice, false)};
  std::vector<Stack> stacks;
  if (kernelAvailable()) stacks.push_back(Stack::Kernel);
  stacks.push_back(Stack::Userland);
  return stacks;
}

void acceptAssociations(asio::io_context& io, std::shared_ptr<Socket> listener, std::function<bool()> accepting,
                        std::function<void(std::shared_ptr<Association>, const asio::ip::address&)> handOn) {
  auto raw = listener.get();
  raw->asyncWait(false, [&io, listener = std::move(listener), accepting = std::move(accepting),
                         handOn = std::move(handOn)]() mutable {
    if (!accepting()) return;
    while (auto socket = listener->accept()) {
      const auto peers = socket->peerAddresses();
      const asio::ip::address peer = peers.empty() ? asio::ip::address() : transport::unmapped(peers.front());
      const std::string name = (peer.is_v6() ? "[" + peer.to_string() + "]" : peer.to_string()) + " (SCTP)";
      handOn(std::make_shared<Association>(io, std::move(socket), name), peer);
    }
    acceptAssociations(io, std::move(listener), std::move(accepting), std::move(handOn));
  });
}

std::shared_ptr<Socket> listenOn(Stack stack, asio::io_context& io, int family, const StackSettings& settings,
                                 const SocketOptions& options, const std::vector<asio::ip::address>& addresses,
                                 std::uint16_t port) {
  std::shared_ptr<Socket> listener = open(stack, io, family, settings);
  try {
    listener->configure(options);
    listener->bind(addresses, port);
    listener->listen();
  } catch (const transport::TransportError&) {
    listener->close();
    throw;
  }
  return listener;
}

}  // namespace npm::sctp
