// One interface per transport for flows' data connections: how the active connects a flow
// (Connector), what the passive admits of an ADD_FLOW (DataTransport::admit), and how the passive
// listens for and accepts the connections of its flows (Listener). Implemented beside each stack:
// TCP, MPTCP, UDP and DCCP here (stream_transports), SCTP in sctp/data_transport, QUIC in
// quic/data_transport; registered once by app/ (app/transports), which hands each stack its own
// options (the SCTP stack and its UDP ports, QUIC's TLS files). control/ finds a flow's transport
// by its protocol in the Registry and knows nothing else of it.
#pragma once

#include "common/asio_awaitable.h"  // first: Boost 1.74 (see there)

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "npmp/messages.h"
#include "transport/data_channel.h"
#include "transport/pending_table.h"
#include "transport/sockets.h"

namespace npm::transport {

// ---- The active ----

// What the active's flows share: where the passive is, from where it is reached, and who is
// told what a connection found out.
struct ActiveSide {
  asio::io_context* control = nullptr;     // the control thread's: connections that flows share live there
  asio::ip::address remote;                // the passive (the address the control connection uses)
  std::vector<asio::ip::address> remotes;  // every address of the passive's name (SCTP's connectx)
  std::uint16_t basePort = 0;              // the passive's BASE port
  std::vector<asio::ip::address> locals;   // -L: the first binds a single-homed socket; SCTP binds all
  bool v6only = false;                     // -6
  std::chrono::steady_clock::duration timeout = std::chrono::seconds(10);  // a connect, or a handshake
  // The stack that carries a flow (said once per run in the JSON document), and a multi-homed
  // connection's addresses at both ends (its paths).
  std::function<void(const char* stack)> stackUsed;  // a name with static storage ("kernel", "userland")
  std::function<void(std::uint32_t flowId, const std::vector<asio::ip::address>& local,
                     const std::vector<asio::ip::address>& peer)>
      addresses;
};

// One flow's data connection, as the active asks for it. Its settings are those of the
// ADD_FLOW it sent (the one mapping from its FLOWSPEC, control/flow_mapping), read with the
// same functions as the passive reads them (socketOptionsOf, sctp::tuningOf, sctp::policyOf).
struct FlowConnect {
  const npmp::AddFlow* wire = nullptr;
  // The flows of one SCTP association or QUIC connection (one FLOWSPEC option) share it: its
  // number, and how many flows it carries (an association's outgoing streams).
  std::uint32_t group = 0;
  std::size_t groupSize = 1;
  // The active's own, not on the wire.
  std::optional<std::uint8_t> tos;
  bool v6only = false;
  asio::io_context* owner = nullptr;  // the thread that owns the flow's channel (DataTransport::flowsShareConnection)
};

// The active's data connections of one transport, for one run.
class Connector {
public:
  virtual ~Connector() = default;
  // The flow's channel, connected; throws TransportError with a line that says why not.
  virtual asio::awaitable<std::shared_ptr<DataChannel>> connect(const FlowConnect& flow) = 0;
  // The run's end: the connections that flows share are closed (their flows are closed already).
  virtual void close() {}
};

// ---- The passive ----

// Whom a transport's listener hands its connections' flows to: the passive's flow registry
// (control/), which knows what the sessions added. The listener accepts, keeps what has not
// identified its flow in a PendingTable (the lockout limits), reads each flow's IDENTIFY and hands
// the flow's channel on; the registry checks it against its ADD_FLOW and binds it.
class PassiveFlows {
public:
  virtual ~PassiveFlows() = default;
  // Whether `peer` may send data (the --allow list); a refusal is said (rate-limited), `what`
  // naming what was refused ("a data connection").
  virtual bool admits(const asio::ip::address& peer, const std::string& what) = 0;
  // The ADD_FLOW of the flow `id` names while it was added for `protocol` and has no channel yet
  // (what a transport sets on a connection that flows share before handing a stream on);
  // nullptr otherwise. Valid until the listener's handler returns.
  virtual const npmp::AddFlow* waiting(const npmp::IdentifyFlow& id, npmp::Protocol protocol) const = 0;
  // The transport cannot give the flow `id` names the settings its ADD_FLOW asks for: said, and
  // acknowledged with `status`.
  virtual void refuse(const npmp::IdentifyFlow& id, const std::string& why, std::uint32_t status) = 0;
  // `channel`, from `from`, began with the IDENTIFY `id`: bound to its flow (true), or closed with
  // the reason said (false). `shared`: a channel of a socket that all flows share (UDP), which
  // serves only the host that controls the flow (no traffic reflection).
  virtual bool identify(const npmp::IdentifyFlow& id, std::shared_ptr<DataChannel> channel, npmp::Protocol protocol,
                        const asio::ip::address& from, bool shared = false) = 0;
  // A connection closed because it did not begin with an IDENTIFY: the line (said rate-limited).
  virtual void broken(const std::string& line) = 0;
};

// A connection's first message as the IDENTIFY it must be; otherwise what it was, for the line
// "expected IDENTIFY_FLOW, got ..." (its type's name, or why it could not be decoded).
Result<npmp::IdentifyFlow> identifyOf(std::span<const std::uint8_t> message);

// What the passive's listeners share.
struct PassiveSide {
  asio::io_context* control = nullptr;                 // the control thread's: listeners and what waits for IDENTIFY
  std::uint16_t basePort = 0;                          // data on BASE (MPTCP and QUIC: BASE-1)
  std::vector<asio::ip::address> locals;               // -L: the first binds the listeners; SCTP binds all
  bool v6only = false;                                 // -6
  std::uint32_t rcvBufferSize = 0, sndBufferSize = 0;  // -i, -o
  PendingLimits pending;                               // each kind's table of connections without IDENTIFY
  // The one table of the connections that carry one flow each (TCP, MPTCP, DCCP): its limits
  // hold over all of them.
  std::shared_ptr<PendingTable<DataChannel>> connections;
  std::shared_ptr<PassiveFlows> flows;
};

// A listener the passive cannot do without (TCP, UDP: every passive serves them; QUIC when
// -tls-key and -tls-cert were given) cannot be had: the passive does not start.
class ListenError : public TransportError {
public:
  using TransportError::TransportError;
};

// A transport's listening on the passive, from DataTransport::listen until close().
class Listener {
public:
  virtual ~Listener() = default;
  // For the passive's "waiting for incoming connections" line: the name it serves ("TCP") and
  // on which port.
  virtual std::string name() const = 0;
  virtual std::uint16_t port() const = 0;
  // Stops accepting and closes what has not identified its flow yet (flows keep theirs).
  virtual void close() = 0;
};

// ---- A transport ----

class DataTransport {
public:
  virtual ~DataTransport() = default;
  virtual npmp::Protocol protocol() const = 0;

  // Whether the flows of one FLOWSPEC option share one connection (an SCTP association, a QUIC
  // connection): one descriptor for them all, and on the active they live where it does, on the
  // control thread; other flows' channels may live on any network thread.
  virtual bool flowsShareConnection() const { return false; }
  // The congestion control a flow's sender uses on this side, from its ADD_FLOW: what it asks
  // for, or what the stack uses by default (TCP and MPTCP: the kernel's, read now); empty where
  // there is none (UDP) or it is not known. The JSON document says it for every flow, and the
  // config file where FLOWSPEC's cc= names it (congestionControlByName).
  virtual std::string congestionControl(const npmp::AddFlow& wire) const {
    (void)wire;
    return {};
  }
  // Whether FLOWSPEC's cc= names this transport's congestion control (TCP, MPTCP, QUIC); SCTP's
  // is its CC module (sctpcc=), DCCP's its CCID (ccid=).
  virtual bool congestionControlByName() const { return false; }
  // Whether a flow's data travels without a connection (UDP): it cannot fail for its peer's
  // going, so the passive does not count it among the flows whose active is gone.
  virtual bool connectionless() const { return false; }
  // Why a passive answers an ADD_FLOW of this transport with kStatusUnsupported, for the
  // active's line ("the passive ... cannot serve X flows (flow #N): why").
  virtual std::string whyUnsupported() const;
  virtual std::unique_ptr<Connector> connector(const ActiveSide& side) const = 0;

  // Whether the passive can run the flow an ADD_FLOW asks for, by this transport's rules (its
  // settings: the congestion control, CMT and its tuning); a refusal is the line for the log,
  // with the status of the ACKNOWLEDGE.
  struct Refusal {
    std::string why;
    std::uint32_t status = npmp::kStatusError;
  };
  virtual std::optional<Refusal> admit(const npmp::AddFlow& m) const = 0;
  // The passive's listener for this transport's flows, accepting on the control thread; throws
  // TransportError with why it cannot listen (the passive then refuses its flows with that line),
  // ListenError where the command line asked for it and it cannot be had (the passive does not
  // start).
  virtual std::shared_ptr<Listener> listen(const PassiveSide& side) const = 0;
  // On the passive: whether an identified connection moves to its flow's thread (TCP, MPTCP),
  // or stays on the control thread where it was accepted (UDP's shared socket, DCCP, and the
  // connections whose streams are flows: SCTP, QUIC).
  virtual bool passiveOnAnyThread() const { return false; }
};

// The transports this process has, by protocol, in the order they were added (the passive's
// startup line lists its listeners so): filled by app/ (app/transports.h); the passive then marks
// those it has no listener for as absent, with why.
class Registry {
public:
  void add(std::shared_ptr<DataTransport> transport);
  // A transport this build or host lacks, and why (a flow of it is refused with that line).
  void absent(npmp::Protocol protocol, std::string why);
  DataTransport* find(npmp::Protocol protocol) const;
  // Why there is none for `protocol` (a generic line if nobody said).
  std::string whyAbsent(npmp::Protocol protocol) const;
  std::vector<DataTransport*> all() const;

private:
  std::vector<std::shared_ptr<DataTransport>>::const_iterator position(npmp::Protocol protocol) const;
  std::vector<std::shared_ptr<DataTransport>> transports_;
  std::map<npmp::Protocol, std::string> absent_;
};

}  // namespace npm::transport
