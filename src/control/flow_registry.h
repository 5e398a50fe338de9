// The passive's flows: ADD_FLOW creates one; the transports' listeners (DataTransport::listen)
// hand on each data connection (or UDP peer, SCTP or QUIC stream) that identified its flow with
// IDENTIFY, and the registry binds it (transport::PassiveFlows); REMOVE_FLOW and the end of a
// session remove it.
#pragma once

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "control/flow_mapping.h"
#include "measure/flow.h"
#include "measure/statistics.h"
#include "npmp/messages.h"
#include "transport/data_channel.h"
#include "transport/data_transport.h"
#include "transport/io_threads.h"
#include "transport/pending_table.h"
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
  npmp::AddFlow wire;                // as it came: its transport reads the connection's settings from it
  FlowRequest request;               // what the passive runs of it (its parameters, its runtime)
  bool identified = false;
};

// Data connections accepted, not identified yet (transport::PendingTable): the limits of each
// kind's table.
using FlowLimits = transport::PendingLimits;

struct FlowTraffic {
  measure::Counters transmitted, received;
};

class FlowRegistry final : public transport::PassiveFlows, public std::enable_shared_from_this<FlowRegistry> {
public:
  // `transports`: what the passive can serve (app/transports), each of them asked whether it
  // admits an ADD_FLOW. `allow`: the peers that may send data (empty: everyone).
  // `threads`: where the flows of transports that may move are spread (nullptr: all on `io`,
  // the control thread's).
  FlowRegistry(asio::io_context& io, transport::Registry transports, FlowLimits limits,
               std::vector<transport::AddressPrefix> allow, transport::IoThreads* threads = nullptr);

  const transport::Registry& transports() const { return transports_; }
  // A transport the passive has, but no listener for: its flows are refused with `why` (one it
  // does not have keeps its own reason, e.g. not built).
  void unserved(npmp::Protocol protocol, std::string why) {
    if (transports_.find(protocol) != nullptr) transports_.absent(protocol, std::move(why));
  }
  // What the transports' listeners share of the registry: the limits of the tables of
  // connections without IDENTIFY, and the one table of the connections that carry one flow each.
  const FlowLimits& pendingLimits() const { return limits_; }
  const std::shared_ptr<transport::PendingTable<transport::DataChannel>>& connections() const { return connections_; }

  // ADD_FLOW of `session`: the acknowledgement status.
  std::uint32_t add(const std::shared_ptr<FlowOwner>& session, const npmp::AddFlow& m);
  std::shared_ptr<FlowEntry> find(const FlowKey& key) const;
  void remove(const FlowKey& key);

  // transport::PassiveFlows: what the listeners hand on.
  bool admits(const asio::ip::address& peer, const std::string& what) override;
  const npmp::AddFlow* waiting(const npmp::IdentifyFlow& id, npmp::Protocol protocol) const override;
  void refuse(const npmp::IdentifyFlow& id, const std::string& why, std::uint32_t status) override;
  bool identify(const npmp::IdentifyFlow& id, std::shared_ptr<transport::DataChannel> channel, npmp::Protocol protocol,
                const asio::ip::address& from, bool shared = false) override;
  void broken(const std::string& line) override { brokenConnections_.say(line); }

  void closeAll();
  std::size_t size() const { return flows_.size(); }
  std::vector<std::shared_ptr<measure::Flow>> flowPointers() const;
  // What all flows have sent and received so far, asked on their own threads.
  [[nodiscard]] asio::awaitable<FlowTraffic> traffic() const;

private:
  asio::io_context& io_;
  transport::Registry transports_;
  transport::IoThreads* threads_;
  FlowLimits limits_;
  std::vector<transport::AddressPrefix> allow_;
  log::Repeated refused_{"Refused data from outside the --allow list"}, rejected_{"Rejected IDENTIFYs"};
  log::Repeated refusedFlows_{"Refused ADD_FLOWs"};
  log::Repeated brokenConnections_{"Closed data connections that did not identify a flow"};
  std::map<FlowKey, std::shared_ptr<FlowEntry>> flows_;
  std::shared_ptr<transport::PendingTable<transport::DataChannel>> connections_;
};

}  // namespace npm::control
