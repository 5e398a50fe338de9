#include "control/flow_registry.h"

#include <cstdio>

#include "common/fileio.h"
#include "common/log.h"
#include "common/text.h"
#include "transport/sockets.h"

namespace npm::control {

namespace {

using npmp::Protocol;
using transport::unmapped;

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
      limits_(limits),
      allow_(std::move(allow)),
      connections_(std::make_shared<transport::PendingTable<transport::DataChannel>>(io, "data connection", limits)) {}

bool FlowRegistry::admits(const asio::ip::address& peer, const std::string& what) {
  if (transport::allowed(allow_, peer)) return true;
  if (refused_.next()) {
    log::warning("Refused " + what + " from " + unmapped(peer).to_string() + ": not in the --allow list (" +
                 std::to_string(refused_.count()) + " refused so far)");
  }
  return false;
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
  entry->wire = m;
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
  measure::tellOwner(it->second->flow, [](measure::Flow& f) { f.close(); });
  flows_.erase(it);
}

const npmp::AddFlow* FlowRegistry::waiting(const npmp::IdentifyFlow& id, Protocol protocol) const {
  const auto entry = find({id.measurementId, id.flowId, id.streamId});
  if (!entry || entry->identified || entry->flow->parameters().protocol != protocol) return nullptr;
  return &entry->wire;
}

void FlowRegistry::refuse(const npmp::IdentifyFlow& id, const std::string& why, std::uint32_t status) {
  const FlowKey key{id.measurementId, id.flowId, id.streamId};
  rejected_.say("Rejected IDENTIFY for " + keyName(key) + ": " + why);
  const auto entry = find(key);
  if (!entry) return;
  if (auto session = entry->session.lock()) session->acknowledge(key.flowId, key.measurementId, key.streamId, status);
}

bool FlowRegistry::identify(const npmp::IdentifyFlow& id, std::shared_ptr<transport::DataChannel> channel,
                            Protocol protocol, const asio::ip::address& from, bool shared) {
  const FlowKey key{id.measurementId, id.flowId, id.streamId};
  auto entry = find(key);
  const std::string where = " on " + std::string(npmp::protocolName(protocol)) + " from " + channel->peerName();
  auto reject = [&](const std::string& why) {
    if (rejected_.next()) {
      log::warning("Rejected IDENTIFY for " + keyName(key) + where + ": " + why + " (" +
                   std::to_string(rejected_.count()) + " rejected so far)");
    }
    channel->close();
    return false;
  };
  if (!entry) return reject("no such flow");
  if (entry->identified) return reject("the flow is already identified");
  if (entry->flow->parameters().protocol != protocol) {
    return reject(std::string("the flow was added as ") + npmp::protocolName(entry->flow->parameters().protocol));
  }
  auto session = entry->session.lock();
  if (!session) return reject("its control connection is gone");
  if (shared && unmapped(from) != session->peerAddress()) {
    // No traffic reflection: UDP data goes only to the host that controls the flow (the
    // connection-oriented transports prove their address in the handshake).
    return reject("the control connection came from " + session->peerAddress().to_string());
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
  channel->expect(npmp::MessageSet::Data);
  // On this thread for the flows that stay here (UDP: its next datagram goes to the flow).
  measure::tellOwner(flow, [](measure::Flow& f) { f.startReceiving(); });
  log::debug("Identified " + keyName(key) + where);
  session->acknowledge(id.flowId, id.measurementId, id.streamId, npmp::kStatusOk);
  return true;
}

void FlowRegistry::closeAll() {
  connections_->closeAll();
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
