// The passive's listening sockets: NPMP-CONTROL on BASE+1 (TCP or MPTCP, SCTP), NPMP-DATA
// on BASE (TCP, UDP, DCCP where the kernel has it, SCTP) and BASE-1 (MPTCP; QUIC over UDP with
// -tls-key and -tls-cert). They accept and hand on; what a connection is for is decided by the
// handlers.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "control/control_channel.h"
#include "control/passive_options.h"
#include "sctp/association.h"
#include "transport/data_channel.h"
#ifdef NPM_QUIC_BUILT
#include "quic/server.h"
#endif

namespace npm::control {

struct ListenerHandlers {
  // A new control connection (TCP, MPTCP or SCTP association).
  std::function<void(std::shared_ptr<ControlChannel>)> control;
  // A new data connection (TCP, MPTCP, DCCP) or SCTP data association.
  std::function<void(std::shared_ptr<transport::DataChannel>, npmp::Protocol)> connection;
  std::function<void(std::shared_ptr<sctp::Association>)> association;
  // A datagram on the shared UDP socket.
  std::function<void(std::span<const std::uint8_t>, const asio::ip::udp::endpoint&, std::uint64_t now)> datagram;
#ifdef NPM_QUIC_BUILT
  // A QUIC connection whose handshake is done.
  std::function<void(std::shared_ptr<quic::Connection>)> quic;
#endif
};

class Listeners : public std::enable_shared_from_this<Listeners> {
public:
  Listeners(asio::io_context& io, const PassiveOptions& options, ListenerHandlers handlers);

  // Opens every listener; throws transport::TransportError when no control listener works.
  void open();
  void close();

  bool servesSctp() const { return !sctpListeners_.empty(); }
  bool servesDccp() const { return dccp_ != nullptr; }
  // Why there is no DCCP listener (the kernel's refusal), once open() has tried.
  const std::string& whyNoDccp() const { return whyNoDccp_; }
  bool servesQuic() const {
#ifdef NPM_QUIC_BUILT
    return quic_ != nullptr;
#else
    return false;
#endif
  }
  asio::ip::udp::socket& udp() { return udp_; }

private:
  int family(const std::vector<asio::ip::address>& addresses) const;
  void openStream(npmp::Protocol protocol, std::uint16_t port, const std::vector<asio::ip::address>& addresses,
                  bool control, bool mptcpControl);
  void openUdp();
  void openDccp();
  void openDccp(int family);
  void openSctp();
  void openSctp(sctp::Stack stack);  // throws transport::TransportError
  // With -tls-key and -tls-cert: QUIC on UDP BASE-1; throws transport::TransportError where the
  // key, the certificate or the port cannot be used. Nothing without them.
  bool openQuic();
  void acceptControl(std::shared_ptr<asio::ip::tcp::acceptor> acceptor);
  void acceptData(std::shared_ptr<asio::ip::tcp::acceptor> acceptor, npmp::Protocol protocol);
  void acceptDccp();
  void acceptSctp(std::shared_ptr<sctp::Socket> listener, bool control);
  void receiveUdp();
  void drainUdp();

  asio::io_context& io_;
  const PassiveOptions& options_;
  ListenerHandlers handlers_;
  std::vector<std::shared_ptr<asio::ip::tcp::acceptor>> acceptors_;
  asio::ip::udp::socket udp_;
  std::vector<std::uint8_t> udpBuffer_;
  std::unique_ptr<asio::posix::stream_descriptor> dccp_;
  std::string whyNoDccp_;
  std::vector<std::shared_ptr<sctp::Socket>> sctpListeners_;
#ifdef NPM_QUIC_BUILT
  std::shared_ptr<quic::Server> quic_;
#endif
  bool closed_ = false;
};

}  // namespace npm::control
