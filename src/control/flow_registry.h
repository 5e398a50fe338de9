// The passive's flows: ADD_FLOW creates one, IDENTIFY on a data connection (or the first
// datagram of a UDP peer, or a stream of an SCTP association or a QUIC connection) binds its
// transport to it,
// UDP datagrams are demultiplexed by their source, REMOVE_FLOW and the end of a session
// remove it. Data connections that have not identified themselves wait in pending tables.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "control/flow_mapping.h"
#include "control/pending_table.h"
#include "measure/flow.h"
#include "measure/statistics.h"
#include "npmp/messages.h"
#include "sctp/association.h"
#include "transport/data_channel.h"
#include "transport/data_transport.h"
#ifdef NPM_QUIC_BUILT
#include "quic/connection.h"
#endif
#include "transport/io_threads.h"
#include "transport/sockets.h"

namespace npm::control {

struct FlowKey {
  std::uint64_t measurementId;
  std::uint32_t flowId;
  std::uint16_t streamId;
  auto operator<=>(const FlowKey&) const = default;
};
std::string keyName(const FlowKey& key);

// What the registry needs of whoever added a flow (the passive's session of that control
// connection): the registry is below the session and knows it only through this.
class FlowOwner {
public:
  virtual ~FlowOwner() = default;
  virtual std::string peerName() const = 0;
  virtual const asio::ip::address& peerAddress() const = 0;
  // How often flows that ask for per-path vectors are sampled (--path-interval).
  virtual std::chrono::milliseconds pathInterval() const = 0;
  // What the owner's result files may take while they wait for upload.
  virtual const std::shared_ptr<measure::SpoolBudget>& spool() const = 0;
  // The measurement was started, and no STOP for it has come yet.
  virtual bool measuring(std::uint64_t measurementId) const = 0;
  // A flow of the measurement lost its data connection.
  virtual void flowFailed(std::uint64_t measurementId) = 0;
  // Sends an ACKNOWLEDGE on the owner's control connection.
  virtual void acknowledge(std::uint32_t flowId, std::uint64_t measurementId, std::uint16_t streamId,
                           std::uint32_t status) = 0;
};

// Everything the passive knows about one flow.
struct FlowEntry {
  std::shared_ptr<measure::Flow> flow;
  std::weak_ptr<FlowOwner> session;  // whose control connection added it
  FlowRequest request;               // socket options, SCTP tuning and policy from ADD_FLOW
  bool identified = false;
  std::optional<asio::ip::udp::endpoint> udpPeer;
};

// Data connections accepted, not identified yet (PendingTable): the limits of each kind's table.
using FlowLimits = PendingLimits;

struct FlowTraffic {
  measure::Counters transmitted, received;
};

class FlowRegistry : public std::enable_shared_from_this<FlowRegistry> {
public:
  // `transports`: what the passive can serve (app/transports), each of them asked whether it
  // admits an ADD_FLOW. `allow`: the peers that may send data (empty: everyone).
  // `threads`: where the flows of transports that may move are spread (nullptr: all on `io`,
  // the control thread's).
  FlowRegistry(asio::io_context& io, transport::Registry transports, FlowLimits limits,
               std::vector<transport::AddressPrefix> allow, transport::IoThreads* threads = nullptr);

  // A transport the passive has, but no listener for: its flows are refused with `why` (one it
  // does not have keeps its own reason, e.g. not built).
  void unserved(npmp::Protocol protocol, std::string why) {
    if (transports_.find(protocol) != nullptr) transports_.absent(protocol, std::move(why));
  }
  // The passive's shared UDP socket.
  void setUdpSocket(asio::ip::udp::socket* socket) { udp_ = socket; }

  // ADD_FLOW of `session`: the acknowledgement status.
  std::uint32_t add(const std::shared_ptr<FlowOwner>& session, const npmp::AddFlow& m);
  std::shared_ptr<FlowEntry> find(const FlowKey& key) const;
  void remove(const FlowKey& key);

  // A new TCP, MPTCP or DCCP data connection, or SCTP data association: it must identify its
  // flow (its streams' flows) before anything else.
  void adoptConnection(std::shared_ptr<transport::DataChannel> channel, npmp::Protocol protocol);
  void adoptAssociation(std::shared_ptr<sctp::Association> association);
#ifdef NPM_QUIC_BUILT
  // A QUIC connection (handshake done): each stream the active opens announces its flow with
  // IDENTIFY (its first message, the stream number its StreamID).
  void adoptQuic(std::shared_ptr<quic::Connection> connection);
#endif
  // A datagram on the shared UDP socket.
  void deliverDatagram(std::span<const std::uint8_t> message, const asio::ip::udp::endpoint& from, std::uint64_t now);

  void closeAll();
  std::size_t size() const { return flows_.size(); }
  std::vector<std::shared_ptr<measure::Flow>> flowPointers() const;
  // What all flows have sent and received so far, asked on their own threads.
  [[nodiscard]] asio::awaitable<FlowTraffic> traffic() const;

private:
  void identify(const npmp::IdentifyFlow& id, std::shared_ptr<transport::DataChannel> channel, npmp::Protocol protocol,
                const asio::ip::address& from, std::optional<asio::ip::udp::endpoint> udpPeer);

  bool refuse(const asio::ip::address& peer, const std::string& what);
  // An IDENTIFY this passive cannot serve: said in the log and acknowledged with `status`.
  void refuseIdentify(const FlowKey& key, const FlowEntry& entry, const std::string& why, std::uint32_t status);

  asio::io_context& io_;
  transport::Registry transports_;
  transport::IoThreads* threads_;
  std::vector<transport::AddressPrefix> allow_;
  log::Repeated refused_{"Refused data from outside the --allow list"}, rejected_{"Rejected IDENTIFYs"};
  log::Repeated refusedFlows_{"Refused ADD_FLOWs"};
  log::Repeated brokenConnections_{"Closed data connections that did not identify a flow"};
  asio::ip::udp::socket* udp_ = nullptr;
  std::map<FlowKey, std::shared_ptr<FlowEntry>> flows_;
  std::map<asio::ip::udp::endpoint, FlowKey> udpFlows_;
  PendingTable<transport::DataChannel> pendingConnections_;
  PendingTable<sctp::Association> pendingAssociations_;
#ifdef NPM_QUIC_BUILT
  PendingTable<quic::Connection> pendingQuic_;  // until a stream of it has identified its flow
#endif
  log::Repeated udpGarbage_{"Ignored UDP datagrams not from an identified flow"};
};

}  // namespace npm::control
