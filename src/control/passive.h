// The passive side: a daemon that any number of active instances control at once.
// Listens for NPMP-CONTROL on BASE+1 (TCP, or MPTCP with -w) and for NPMP-DATA on BASE
// (TCP, UDP, DCCP where the kernel has it) and BASE-1 (MPTCP).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "measure/statistics.h"
#include "sctp/socket.h"

namespace npm::control {

namespace asio = boost::asio;

struct PassiveOptions {
  std::uint16_t port = 9000;
  bool controlOverSctp = true;
  bool controlOverTcp = true;
  bool controlOverMptcp = false;
  std::vector<asio::ip::address> localAddresses;    // -L (data)
  std::vector<asio::ip::address> controlAddresses;  // -l (control)
  bool v6only = false;
  std::uint32_t rcvBufferSize = 0, sndBufferSize = 0;  // -i / -o on the data listeners
  sctp::StackChoice sctpStack = sctp::StackChoice::Auto;
  std::uint16_t sctpUdpPort = sctp::kDefaultUdpEncapsulationPort;
};

struct PassiveStatus {
  std::size_t flows = 0, measurements = 0;
  measure::Counters transmitted, received;
};

class PassiveServer {
public:
  PassiveServer(asio::io_context& io, PassiveOptions options);
  ~PassiveServer();
  // Opens the listeners; throws transport::TransportError when no control listener works.
  void start();
  void stop();
  PassiveStatus status() const;

  class Impl;

private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace npm::control
