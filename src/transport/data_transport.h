// One interface per transport for flows' data connections: how the active connects a flow
// (Connector), and what the passive admits of an ADD_FLOW (DataTransport::admit). Implemented beside each stack: TCP,
// MPTCP, UDP and DCCP here (stream_transports), SCTP in sctp/data_transport, QUIC in quic/data_transport; registered
// once by app/ (app/transports), which hands each stack its own options (the SCTP stack and its UDP ports, QUIC's TLS
// files). control/ finds a flow's transport by its protocol in the Registry and knows nothing else of it.
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
#include <string>
#include <vector>

#include "common/result.h"
#include "npmp/messages.h"
#include "transport/data_channel.h"
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
  asio::io_context* owner = nullptr;  // the thread that owns the flow's channel (DataTransport::activeOnAnyThread)
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

// ---- A transport ----

class DataTransport {
public:
  virtual ~DataTransport() = default;
  virtual npmp::Protocol protocol() const = 0;

  // Where a flow's channel lives on the active: any network thread, or the control thread
  // (connections that flows share: SCTP associations, QUIC connections).
  virtual bool activeOnAnyThread() const { return true; }
  virtual std::unique_ptr<Connector> connector(const ActiveSide& side) const = 0;

  // Whether the passive can run the flow an ADD_FLOW asks for, by this transport's rules (its
  // settings: the congestion control, CMT and its tuning); a refusal is the line for the log,
  // with the status of the ACKNOWLEDGE.
  struct Refusal {
    std::string why;
    std::uint32_t status = npmp::kStatusError;
  };
  virtual std::optional<Refusal> admit(const npmp::AddFlow& m) const = 0;
  // On the passive: whether an identified connection moves to its flow's thread (TCP, MPTCP),
  // or stays on the control thread where it was accepted (UDP's shared socket, DCCP, and the
  // connections whose streams are flows: SCTP, QUIC).
  virtual bool passiveOnAnyThread() const { return false; }
};

// The transports this process has, by protocol: filled by app/ (app/transports.h); the passive
// then marks those it has no listener for as absent, with why.
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
  std::map<npmp::Protocol, std::shared_ptr<DataTransport>> transports_;
  std::map<npmp::Protocol, std::string> absent_;
};

}  // namespace npm::transport
