#include "control/flow_registry.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstring>

#include "common/fileio.h"
#include "common/log.h"
#include "common/text.h"
#include "sctp/flow_settings.h"
#include "transport/sockets.h"

namespace npm::control {

namespace {

using asio::ip::udp;
using npmp::Protocol;
using transport::unmapped;

// The peer of a connected socket; unspecified if it cannot be had.
asio::ip::address peerAddressOf(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  asio::ip::tcp::endpoint peer;
  if (len > peer.capacity()) return {};
  std::memcpy(peer.data(), &ss, len);
  peer.resize(len);
  return peer.address();
}

int localFamilyOf(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (fd < 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return AF_INET;
  return ss.ss_family;
}

}  // namespace

std::string keyName(const FlowKey& k) {
  char b[96];
  std::snprintf(b, sizeof(b), "flow %u (measurement $%llx, stream %u)", k.flowId,
                static_cast<unsigned long long>(k.measurementId), k.streamId);
  return b;
}

FlowRegistry::FlowRegistry(asio::io_context& io, transport::Registry transports, FlowLimits limits,
                           std::vector<transport::AddressPrefix> allow, transport::IoThreads* threads)
    : io_(io),
      transports_(std::move(transports)),
      threads_(threads),
      allow_(std::move(allow)),
      pendingConnections_(io, "data connection", limits),
      pendingAssociations_(io, "SCTP association", limits)
#ifdef NPM_QUIC_BUILT
      ,
      pendingQuic_(io, "QUIC connection", limits)
#endif
{
}

// True (and said in a rate-limited line) when `peer` is not in the --allow list.
bool FlowRegistry::refuse(const asio::ip::address& peer, const std::string& what) {
  if (transport::allowed(allow_, peer)) return false;
  if (refused_.next()) {
    log::warning("Refused " + what + " from " + unmapped(peer).to_string() + ": not in the --allow list (" +
                 std::to_string(refused_.count()) + " refused so far)");
  }
  return true;
}

std::uint32_t FlowRegistry::add(const std::shared_ptr<FlowOwner>& session, const npmp::AddFlow& m) {
  const FlowKey key{m.measurementId, m.flowId, m.streamId};
  const std::string from = " from " + session->peerName();
  auto reject = [&](const std::string& why, std::uint32_t status = npmp::kStatusError) {
    refusedFlows_.say("ADD_FLOW rejected" + from + ": " + why);
    return status;
  };
  if (flows_.count(key)) {
    refusedFlows_.say("ADD_FLOW for existing " + keyName(key) + from);
    return npmp::kStatusError;
  }
  const transport::DataTransport* transport = transports_.find(m.protocol);
  if (transport == nullptr) return reject(transports_.whyAbsent(m.protocol), npmp::kStatusUnsupported);
  if (m.maxMsgSize < npmp::kDataHeaderSize) {
    return reject("MaxMsgSize " + std::to_string(m.maxMsgSize) + " is too small");
  }
  if (const auto refusal = transport->admit(m)) return reject(refusal->why, refusal->status);
  auto entry = std::make_shared<FlowEntry>();
  entry->request = fromAddFlow(m);
  // From the network: no control characters in our files.
  entry->request.parameters.description = printable(entry->request.parameters.description);
  // TCP and MPTCP connections move to their flow's thread at IDENTIFY; the UDP socket, SCTP
  // associations, QUIC connections and DCCP sockets serve their flows where they are, on this
  // thread (DataTransport::passiveOnAnyThread).
  const bool spread = threads_ != nullptr && transport->passiveOnAnyThread();
  entry->flow = std::make_shared<measure::Flow>(spread ? threads_->pick() : io_, entry->request.parameters, false);
  entry->flow->reportTo(io_);
  entry->session = session;
  flows_[key] = entry;
  log::debug("Added " + keyName(key) + " (" + npmp::protocolName(m.protocol) + ")" + from);
  return npmp::kStatusOk;
}

std::shared_ptr<FlowEntry> FlowRegistry::find(const FlowKey& key) const {
  auto it = flows_.find(key);
  return it == flows_.end() ? nullptr : it->second;
}

void FlowRegistry::remove(const FlowKey& key) {
  auto it = flows_.find(key);
  if (it == flows_.end()) return;
  if (it->second->udpPeer) udpFlows_.erase(*it->second->udpPeer);
  measure::tellOwner(it->second->flow, [](measure::Flow& f) { f.close(); });
  flows_.erase(it);
}

void FlowRegistry::adoptConnection(std::shared_ptr<transport::DataChannel> channel, Protocol protocol) {
  const asio::ip::address peer = unmapped(peerAddressOf(channel->fd()));
  if (refuse(peer, "a data connection")) return channel->close();
  if (!pendingConnections_.add(channel, peer)) return;
  transport::DataChannel* raw = channel.get();
  channel->expect(npmp::MessageSet::DataFirst);
  std::weak_ptr<FlowRegistry> weak = shared_from_this();
  channel->receive(
      [weak, raw, protocol](std::span<const std::uint8_t> message, std::uint64_t) {
        auto self = weak.lock();
        if (!self) return;
        auto channel = self->pendingConnections_.take(raw);
        if (!channel) return;
        const auto decoded = npmp::decode(message);
        const auto* id = decoded ? std::get_if<npmp::IdentifyFlow>(&*decoded) : nullptr;
        if (id == nullptr) {
          self->brokenConnections_.say("Closing data connection from " + channel->peerName() +
                                       ": expected IDENTIFY_FLOW, got " +
                                       (decoded ? std::string(npmp::typeName(message[0])) : decoded.error()));
          channel->close();
          return;
        }
        self->identify(*id, channel, protocol, peerAddressOf(channel->fd()), std::nullopt);
      },
      [weak, raw](const transport::ChannelEnd& end) {
        auto self = weak.lock();
        if (!self) return;
        if (auto channel = self->pendingConnections_.take(raw)) {
          self->brokenConnections_.say("Closing data connection from " + channel->peerName() + ": " + end.text());
          channel->close();
        }
      });
}

// An SCTP data association: each stream announces its flow with IDENTIFY (PPID 36).
void FlowRegistry::adoptAssociation(std::shared_ptr<sctp::Association> association) {
  const auto peers = association->socket().peerAddresses();
  const asio::ip::address peer = peers.empty() ? asio::ip::address() : unmapped(peers.front());
  if (refuse(peer, "an SCTP data association")) return association->close();
  if (!pendingAssociations_.add(association, peer)) return;
  sctp::Association* raw = association.get();
  std::weak_ptr<FlowRegistry> weak = shared_from_this();
  std::weak_ptr<sctp::Association> weakAssociation = association;
  association->start(
      [weak, weakAssociation, raw](std::uint16_t stream, std::uint32_t, std::span<const std::uint8_t> message,
                                   std::uint64_t) {
        auto self = weak.lock();
        auto association = weakAssociation.lock();
        if (!self || !association) return;
        const auto decoded = npmp::decode(message);
        const auto* id = decoded ? std::get_if<npmp::IdentifyFlow>(&*decoded) : nullptr;
        if (id == nullptr || id->streamId != stream) {
          self->brokenConnections_.say("Closing SCTP association from " + association->peerName() +
                                       ": expected IDENTIFY_FLOW on stream " + std::to_string(stream) + ", got " +
                                       (decoded ? npmp::typeName(message[0]) : decoded.error()));
          association->close();
          self->pendingAssociations_.take(raw);
          return;
        }
        const FlowKey key{id->measurementId, id->flowId, id->streamId};
        auto entry = self->find(key);
        if (entry && entry->flow->parameters().protocol == Protocol::SCTP && !entry->identified) {
          // The flow's settings on this side too: its buffers (this side receives what the
          // active sends) and CMT with its tuning (for what this side sends).
          try {
            const auto& options = entry->request.socketOptions;
            association->socket().setBufferSizes(options.rcvBufferSize, options.sndBufferSize);
            association->socket().tune(entry->request.sctpTuning);
            if (const auto held = association->socket().tuningInForce()) {
              log::info("Flow #" + std::to_string(key.flowId) + ": SCTP association from " + association->peerName() +
                        ", the stack holds " + sctp::describe(*held));
            }
          } catch (const transport::TransportError& e) {
            // The system's usrsctp: settings another CMT association holds process-wide; any
            // stack: an option the stack refused, or does not hold after setting it.
            const bool conflict = !sctp::processWideCompatible(entry->request.sctpTuning);
            self->refuseIdentify(key, *entry,
                                 std::string("SCTP association from ") + association->peerName() + ": " + e.what(),
                                 conflict ? npmp::kStatusProcessWideConflict : npmp::kStatusError);
            return;
          }
        }
        const auto peers = association->socket().peerAddresses();
        self->identify(*id, association->stream(stream, entry ? entry->request.streamPolicy : sctp::StreamPolicy{}),
                       Protocol::SCTP, peers.empty() ? asio::ip::address() : peers.front(), std::nullopt);
        // Identified at least once: no longer pending; closed with its last flow.
        if (association->hasClaims()) self->pendingAssociations_.take(raw);
      },
      [weak, raw](const transport::ChannelEnd& end) {
        auto self = weak.lock();
        if (!self) return;
        if (self->pendingAssociations_.take(raw)) {
          log::debug("SCTP association from " + raw->peerName() + ": " + end.text());
        }
      });
}

#ifdef NPM_QUIC_BUILT
void FlowRegistry::adoptQuic(std::shared_ptr<quic::Connection> connection) {
  const asio::ip::address peer = unmapped(connection->remote().address());
  if (refuse(peer, "a QUIC data connection")) return connection->close();
  if (!pendingQuic_.add(connection, peer)) return;
  quic::Connection* raw = connection.get();
  std::weak_ptr<FlowRegistry> weak = shared_from_this();
  std::weak_ptr<quic::Connection> weakConnection = connection;
  // The streams that have not identified their flow yet, held by the connection's onChannel
  // handler: the connection drops it when it ends (closed, timed out, or unidentified for too
  // long: the pending table closes it), and with it those streams. A flow holds its own.
  using Unidentified = std::map<std::uint16_t, std::shared_ptr<transport::DataChannel>>;
  auto unidentified = std::make_shared<Unidentified>();
  std::weak_ptr<Unidentified> weakUnidentified = unidentified;
  connection->onChannel([weak, weakConnection, weakUnidentified, unidentified, raw, peer](
                            std::uint16_t stream, std::shared_ptr<transport::DataChannel> channel) {
    auto self = weak.lock();
    auto connection = weakConnection.lock();
    if (!self || !connection) return channel->close();
    channel->expect(npmp::MessageSet::DataFirst);
    channel->receive(
        [weak, weakConnection, weakUnidentified, raw, stream, peer](std::span<const std::uint8_t> message,
                                                                    std::uint64_t) {
          auto self = weak.lock();
          auto connection = weakConnection.lock();
          auto waiting = weakUnidentified.lock();
          if (!self || !connection || !waiting) return;
          auto it = waiting->find(stream);
          if (it == waiting->end()) return;  // identified (or refused) already
          auto channel = std::move(it->second);
          waiting->erase(it);
          const auto decoded = npmp::decode(message);
          const auto* id = decoded ? std::get_if<npmp::IdentifyFlow>(&*decoded) : nullptr;
          if (id == nullptr || id->streamId != stream) {
            self->brokenConnections_.say("Closing stream " + std::to_string(stream) + " of the QUIC connection from " +
                                         connection->peerName() + ": expected IDENTIFY_FLOW with stream " +
                                         std::to_string(stream) + ", got " +
                                         (decoded ? std::string(npmp::typeName(message[0])) : decoded.error()));
            channel->close();
            return;
          }
          self->identify(*id, channel, Protocol::QUIC, peer, std::nullopt);
          // Identified at least once: no longer pending; the active closes it at its end.
          self->pendingQuic_.take(raw);
        },
        [weakConnection, weakUnidentified, stream](const transport::ChannelEnd& end) {
          auto waiting = weakUnidentified.lock();
          if (!waiting || !waiting->count(stream)) return;
          auto channel = std::move((*waiting)[stream]);
          waiting->erase(stream);
          if (auto connection = weakConnection.lock()) {
            log::debug("Stream " + std::to_string(stream) + " of the QUIC connection from " + connection->peerName() +
                       " ended before IDENTIFY: " + end.text());
          }
          channel->close();
        });
    (*unidentified)[stream] = std::move(channel);
  });
}
#endif

void FlowRegistry::refuseIdentify(const FlowKey& key, const FlowEntry& entry, const std::string& why,
                                  std::uint32_t status) {
  rejected_.say("Rejected IDENTIFY for " + keyName(key) + ": " + why);
  if (auto session = entry.session.lock()) session->acknowledge(key.flowId, key.measurementId, key.streamId, status);
}

void FlowRegistry::deliverDatagram(std::span<const std::uint8_t> message, const udp::endpoint& from,
                                   std::uint64_t now) {
  if (auto it = udpFlows_.find(from); it != udpFlows_.end()) {
    if (auto entry = find(it->second)) entry->flow->deliver(message, now);
    return;
  }
  if (message.size() >= 4 && message[0] == static_cast<std::uint8_t>(npmp::Type::IdentifyFlow)) {
    if (refuse(from.address(), "UDP data")) return;
    const auto decoded = npmp::decode(message);
    if (decoded) {
      identify(std::get<npmp::IdentifyFlow>(*decoded), nullptr, Protocol::UDP, from.address(), from);
      return;
    }
  }
  // Rate-limited: a flood of garbage must not flood the log.
  if (udpGarbage_.next()) {
    log::warning("Ignored " + std::to_string(message.size()) + " bytes of UDP from " +
                 transport::endpointName(from.address(), from.port()) + ": not from an identified flow (" +
                 std::to_string(udpGarbage_.count()) + " so far)");
  }
}

void FlowRegistry::identify(const npmp::IdentifyFlow& id, std::shared_ptr<transport::DataChannel> channel,
                            Protocol protocol, const asio::ip::address& from, std::optional<udp::endpoint> udpPeer) {
  const FlowKey key{id.measurementId, id.flowId, id.streamId};
  auto entry = find(key);
  const std::string where =
      " on " + std::string(npmp::protocolName(protocol)) + " from " +
      (channel ? channel->peerName() : transport::endpointName(udpPeer->address(), udpPeer->port()));
  auto reject = [&](const std::string& why) {
    if (rejected_.next()) {
      log::warning("Rejected IDENTIFY for " + keyName(key) + where + ": " + why + " (" +
                   std::to_string(rejected_.count()) + " rejected so far)");
    }
    if (channel) channel->close();
  };
  if (!entry) return reject("no such flow");
  if (entry->identified) return reject("the flow is already identified");
  if (entry->flow->parameters().protocol != protocol) {
    return reject(std::string("the flow was added as ") + npmp::protocolName(entry->flow->parameters().protocol));
  }
  auto session = entry->session.lock();
  if (!session) return reject("its control connection is gone");
  if (udpPeer && unmapped(from) != session->peerAddress()) {
    // No traffic reflection: UDP data goes only to the host that controls the flow (the
    // connection-oriented transports prove their address in the handshake).
    return reject("the control connection came from " + session->peerAddress().to_string());
  }
  if (udpPeer) {
    udpFlows_[*udpPeer] = key;
    entry->udpPeer = udpPeer;
    channel = transport::makeUdpPeerChannel(*udp_, *udpPeer);
  } else if (protocol != Protocol::SCTP && protocol != Protocol::QUIC) {
    // SCTP: the association's stream, tuned by the caller; QUIC: the connection's, shared.
    try {
      auto options = entry->request.socketOptions;
      options.ccid = 0;  // DCCP: the active's socket chose it before connecting; a connected one cannot
      transport::configureSocket(channel->fd(), protocol, localFamilyOf(channel->fd()), options);
    } catch (const transport::TransportError& e) {
      log::warning("Flow " + std::to_string(id.flowId) + ": " + e.what());
    }
  }
  auto flow = entry->flow;
  if (channel && &flow->context() != &io_) {  // accepted on this thread
    // To the flow's thread (the message handler of the pending connection runs here).
    auto moved = channel->moveTo(flow->context());
    if (!moved) return reject("the connection could not be handed to its network thread");
    channel = std::move(moved);
  }
  entry->identified = true;
  flow->attach(channel);
  // The active asks for per-path sampling (for the scalars, and the per-path vector if it
  // records vectors).
  const bool samplePaths =
      (id.flags & npmp::kIdentifyPathVectors) && session->pathInterval().count() > 0 && measure::hasPaths(protocol);
  if (samplePaths) flow->samplePathsEvery(session->pathInterval());
  if (!(id.flags & npmp::kIdentifyNoVectors)) {
    const Compression compression =
        measure::compressionAsked(id.flags, npmp::kIdentifyGzipVectors, npmp::kIdentifyCompressVectors);
    try {
      measure::FlowVectorWriter writer(measure::anonymousResultFile(compression));
      writer.setBudget(session->spool());
      flow->setVector(std::move(writer));
    } catch (const FileError& e) {
      log::error(std::string("Per-flow vector: ") + e.what());
    }
    if (samplePaths) {
      try {
        measure::PathVectorWriter writer(measure::anonymousResultFile(compression));
        writer.setBudget(session->spool());
        flow->setPathVector(std::move(writer));
      } catch (const FileError& e) {
        log::error(std::string("Per-path vector: ") + e.what());
      }
    }
  }
  flow->onFailure(
      [key, peer = channel->peerName(), weak = std::weak_ptr<FlowOwner>(session)](const transport::ChannelEnd& end) {
        // An orderly close is what a reference active does with its data connections just before
        // STOP (the session warns if the measurement is not stopped soon after); and once the
        // measurement is stopped, the peer may end them as it likes. Neither is a warning.
        const auto session = weak.lock();
        const std::string line = "Data connection of " + keyName(key) + " from " + peer + ": " + end.text();
        if (end.byPeer() || (session && !session->measuring(key.measurementId))) {
          log::info(line);
        } else {
          log::warning(line);
        }
        if (session) session->flowFailed(key.measurementId);
      });
  if (!udpPeer) {
    channel->expect(npmp::MessageSet::Data);
    measure::tellOwner(flow, [](measure::Flow& f) { f.startReceiving(); });
  }
  log::debug("Identified " + keyName(key) + where);
  session->acknowledge(id.flowId, id.measurementId, id.streamId, npmp::kStatusOk);
}

void FlowRegistry::closeAll() {
  pendingAssociations_.closeAll();
  pendingConnections_.closeAll();
#ifdef NPM_QUIC_BUILT
  pendingQuic_.closeAll();
#endif
  for (const auto& [key, entry] : flows_) measure::tellOwner(entry->flow, [](measure::Flow& f) { f.close(); });
}

std::vector<std::shared_ptr<measure::Flow>> FlowRegistry::flowPointers() const {
  std::vector<std::shared_ptr<measure::Flow>> flows;
  flows.reserve(flows_.size());
  for (const auto& [key, entry] : flows_) flows.push_back(entry->flow);
  return flows;
}

asio::awaitable<FlowTraffic> FlowRegistry::traffic() const {
  FlowTraffic t;
  const auto flows = flowPointers();
  co_await measure::onOwners(flows, [&t](measure::Flow& f, std::size_t) {
    t.transmitted += f.transmitted().total;
    t.received += f.received().received();
  });
  co_return t;
}

}  // namespace npm::control
