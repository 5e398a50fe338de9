// The passive's listening: NPMP-CONTROL on BASE+1 (TCP or MPTCP, SCTP) here, and NPMP-DATA
// through each transport it has (DataTransport::listen: TCP, UDP, DCCP where the kernel has it and
// SCTP on BASE; MPTCP, and QUIC with -tls-key and -tls-cert, on BASE-1). They accept and hand on;
// what a control connection is for is decided by its session, a data connection's flow by the
// flow registry.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "control/control_channel.h"
#include "control/passive_options.h"
#include "sctp/socket.h"
#include "transport/data_transport.h"

namespace npm::control {

class Listeners : public std::enable_shared_from_this<Listeners> {
public:
  // `control`: a new control connection (TCP, MPTCP or SCTP association).
  Listeners(asio::io_context& io, const PassiveOptions& options,
            std::function<void(std::shared_ptr<ControlChannel>)> control);

  // Opens every listener: the control listeners, and the data listener of each of `transports`
  // (`data`: what they share). Returns the transports that cannot listen, with the line their
  // flows are refused with (said already). Throws transport::TransportError when no control
  // listener works, or a data listener the command line asked for cannot be had.
  std::vector<std::pair<npmp::Protocol, std::string>> open(const transport::Registry& transports,
                                                           const transport::PassiveSide& data);
  void close();

private:
  void openControl(std::uint16_t port, bool mptcp);
  void openSctpControl();
  void openSctpControl(sctp::Stack stack);  // throws transport::TransportError
  void acceptControl(std::shared_ptr<asio::ip::tcp::acceptor> acceptor);
  void acceptSctpControl(std::shared_ptr<sctp::Socket> listener);

  asio::io_context& io_;
  const PassiveOptions& options_;
  std::function<void(std::shared_ptr<ControlChannel>)> control_;
  std::vector<std::shared_ptr<asio::ip::tcp::acceptor>> acceptors_;
  std::vector<std::shared_ptr<sctp::Socket>> sctpListeners_;
  std::vector<std::shared_ptr<transport::Listener>> data_;
  bool closed_ = false;
};

}  // namespace npm::control
