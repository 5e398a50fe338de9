#include "control/passive_listeners.h"

#include <boost/asio/steady_timer.hpp>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/clock.h"
#include "common/handle.h"
#include "common/log.h"
#include "transport/sockets.h"

namespace npm::control {

namespace {

using asio::ip::tcp;
using asio::ip::udp;
using npmp::Protocol;
using transport::unmapped;

asio::ip::address anyAddress(int family) {
  return family == AF_INET6 ? asio::ip::address(asio::ip::address_v6::any())
                            : asio::ip::address(asio::ip::address_v4::any());
}

// An accept that failed for want of resources (EMFILE, ENFILE, ENOBUFS) would fail again at
// once: wait a little before the next one, and say so only now and then.
class AcceptBackoff {
public:
  void failed(const char* what, const boost::system::error_code& ec) {
    if (failures_.next()) {
      log::warning(std::string("Accepting ") + what + " failed: " + ec.message() + " (" +
                   std::to_string(failures_.count()) + " times so far)");
    }
  }
  static constexpr auto kPause = std::chrono::milliseconds(100);

private:
  log::Repeated failures_{"Failed accepts"};
};

AcceptBackoff& backoff() {
  static AcceptBackoff b;
  return b;
}

// Runs `next` now, or after a pause when the last accept failed.
template <class F>
void acceptAgain(asio::io_context& io, bool failed, F next) {
  if (!failed) return next();
  auto timer = std::make_shared<asio::steady_timer>(io, AcceptBackoff::kPause);
  timer->async_wait([timer, next](const boost::system::error_code& ec) {
    if (!ec) next();
  });
}

}  // namespace

Listeners::Listeners(asio::io_context& io, const PassiveOptions& options, ListenerHandlers handlers)
    : io_(io), options_(options), handlers_(std::move(handlers)), udp_(io) {}

void Listeners::open() {
  const std::uint16_t base = options_.port;
  std::vector<std::string> control;
  if (options_.controlOverTcp || options_.controlOverMptcp) {
    openStream(Protocol::TCP, static_cast<std::uint16_t>(base + 1), options_.controlAddresses, true,
               options_.controlOverMptcp);
    control.push_back(options_.controlOverMptcp ? "MPTCP/TCP" : "TCP");
  }
  openStream(Protocol::TCP, base, options_.localAddresses, false, false);
  std::string data = "TCP/UDP";
  openUdp();
  openDccp();
  if (dccp_) data += "/DCCP";
  if (options_.controlOverSctp) openSctp();
  if (!sctpListeners_.empty()) {
    control.insert(control.begin(), "SCTP");
    data = "SCTP/" + data;
  }
  if (control.empty()) {
    throw transport::TransportError("no control listener could be opened (SCTP is not available and -Y was given)");
  }
  std::string mptcp;
  try {
    openStream(Protocol::MPTCP, static_cast<std::uint16_t>(base - 1), options_.localAddresses, false, false);
    mptcp = "MPTCP";
  } catch (const transport::TransportError& e) {
    log::info(std::string("No MPTCP data listener: ") + e.what());
  }
  if (openQuic()) mptcp += mptcp.empty() ? "QUIC" : "/QUIC";
  if (!mptcp.empty()) mptcp = ", and " + mptcp + " on port " + std::to_string(base - 1);
  std::string controlNames;
  for (const auto& c : control) controlNames += (controlNames.empty() ? "" : "/") + c;
  log::info("Passive mode: waiting for incoming connections: control channel = " + controlNames + " on port " +
            std::to_string(base + 1) + ", data channel = " + data + " on port " + std::to_string(base) + mptcp);
}

void Listeners::close() {
  closed_ = true;
  boost::system::error_code ec;
  for (auto& a : acceptors_) a->close(ec);
  udp_.close(ec);
  if (dccp_) dccp_->close(ec);
  for (auto& l : sctpListeners_) l->close();
#ifdef NPM_QUIC_BUILT
  if (quic_) quic_->close();
#endif
}

// The QUIC server stays on this (the control) thread, as the SCTP associations and the shared
// UDP socket do: a QUIC connection carries the flows of one -quic option on the one socket of
// the server, and neither can move to another thread (quic/README.md).
bool Listeners::openQuic() {
  if (options_.tlsKeyFile.empty() || options_.tlsCertFile.empty()) {
#ifdef NPM_QUIC_BUILT
    log::info("No QUIC data listener: it needs -tls-key and -tls-cert (QUIC flows are refused)");
#endif
    return false;
  }
#ifdef NPM_QUIC_BUILT
  const int family = this->family(options_.localAddresses);
  const asio::ip::address address =
      options_.localAddresses.empty() ? anyAddress(family) : options_.localAddresses.front();
  quic::ServerOptions o;
  o.keyFile = options_.tlsKeyFile;
  o.certFile = options_.tlsCertFile;
  o.maxConnections = options_.limits.quicConnections;
  o.retryAbove = options_.limits.quicRetryAbove;
  o.maxPerPrefix = options_.limits.quicPerPrefix;
  o.prefixV4 = options_.limits.prefixV4;
  o.prefixV6 = options_.limits.prefixV6;
  o.v6only = family == AF_INET6 && options_.v6only;  // -6, as the other listeners
  auto server = quic::Server::listen(io_, udp::endpoint(address, static_cast<std::uint16_t>(options_.port - 1)), o);
  if (!server) throw transport::TransportError("QUIC data listener: " + server.error());
  quic_ = *server;
  quic_->onConnection([weak = weak_from_this()](std::shared_ptr<quic::Connection> connection) {
    auto self = weak.lock();
    if (!self || self->closed_) return connection->close();
    self->handlers_.quic(std::move(connection));
  });
  return true;
#else
  log::warning("-tls-key and -tls-cert: this build has no QUIC; no QUIC data listener");
  return false;
#endif
}

int Listeners::family(const std::vector<asio::ip::address>& addresses) const {
  if (!addresses.empty()) return addresses.front().is_v6() ? AF_INET6 : AF_INET;
  return UniqueFd(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0)) ? AF_INET6 : AF_INET;
}

void Listeners::openStream(Protocol protocol, std::uint16_t port, const std::vector<asio::ip::address>& addresses,
                           bool control, bool mptcpControl) {
  const int family = this->family(addresses);
  const Protocol socketProtocol = mptcpControl ? Protocol::MPTCP : protocol;
  UniqueFd fd(transport::openSocket(socketProtocol, family));
  transport::SocketOptions o;
  o.reuseAddress = true;
  if (family == AF_INET6) o.v6only = options_.v6only;
  if (!control) {
    o.rcvBufferSize = options_.rcvBufferSize;
    o.sndBufferSize = options_.sndBufferSize;
  } else {
    o.noDelay = socketProtocol == Protocol::TCP || socketProtocol == Protocol::MPTCP;
  }
  transport::configureSocket(fd.get(), socketProtocol, family, o);
  transport::bindSocket(fd.get(), addresses.empty() ? anyAddress(family) : addresses.front(), port);
  // Data connections may come by the thousand (--max-flows, several actives): the kernel's
  // whole backlog (net.core.somaxconn caps it).
  if (::listen(fd.get(), control ? 128 : SOMAXCONN) != 0) {
    throw transport::TransportError("cannot listen on port " + std::to_string(port) + ": " + std::strerror(errno));
  }
  auto acceptor = std::make_shared<tcp::acceptor>(io_);
  acceptor->assign(family == AF_INET6 ? tcp::v6() : tcp::v4(), fd.release());
  acceptors_.push_back(acceptor);
  if (control) {
    acceptControl(acceptor);
  } else {
    acceptData(acceptor, protocol);
  }
}

void Listeners::acceptControl(std::shared_ptr<tcp::acceptor> acceptor) {
  acceptor->async_accept([weak = weak_from_this(), acceptor](const boost::system::error_code& ec, tcp::socket socket) {
    auto self = weak.lock();
    if (!self || self->closed_ || ec == asio::error::operation_aborted) return;
    if (!ec) {
      boost::system::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      const auto remote = socket.remote_endpoint(ignored);
      self->handlers_.control(std::make_shared<ControlChannel>(
          self->io_.get_executor(),
          tcpControl(std::move(socket), npmp::MessageSet::ControlToPassive, self->options_.controlOverMptcp),
          transport::endpointName(remote.address(), remote.port()), remote.address()));
    } else {
      backoff().failed("a control connection", ec);
    }
    acceptAgain(self->io_, ec.failed(), [weak, acceptor] {
      if (auto self = weak.lock()) self->acceptControl(acceptor);
    });
  });
}

void Listeners::acceptData(std::shared_ptr<tcp::acceptor> acceptor, Protocol protocol) {
  acceptor->async_accept(
      [weak = weak_from_this(), acceptor, protocol](const boost::system::error_code& ec, tcp::socket socket) {
        auto self = weak.lock();
        if (!self || self->closed_ || ec == asio::error::operation_aborted) return;
        if (!ec) {
          self->handlers_.connection(transport::makeStreamChannel(std::move(socket)), protocol);
        } else {
          backoff().failed("a data connection", ec);
        }
        acceptAgain(self->io_, ec.failed(), [weak, acceptor, protocol] {
          if (auto self = weak.lock()) self->acceptData(acceptor, protocol);
        });
      });
}

void Listeners::openUdp() {
  const int family = this->family(options_.localAddresses);
  UniqueFd fd(transport::openSocket(Protocol::UDP, family));
  transport::SocketOptions o;
  o.reuseAddress = true;
  if (family == AF_INET6) o.v6only = options_.v6only;
  o.rcvBufferSize = options_.rcvBufferSize;
  o.sndBufferSize = options_.sndBufferSize;
  transport::configureSocket(fd.get(), Protocol::UDP, family, o);
  transport::bindSocket(
      fd.get(), options_.localAddresses.empty() ? anyAddress(family) : options_.localAddresses.front(), options_.port);
  udp_.assign(family == AF_INET6 ? udp::v6() : udp::v4(), fd.release());
  udp_.non_blocking(true);  // drainUdp() reads until would_block
  udpBuffer_.resize(65536);
  receiveUdp();
}

void Listeners::receiveUdp() {
  udp_.async_wait(udp::socket::wait_read, [weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || self->closed_) return;
    self->drainUdp();
    self->receiveUdp();
  });
}

void Listeners::drainUdp() {
  for (int i = 0; i < 64; ++i) {
    udp::endpoint from;
    boost::system::error_code ec;
    const std::size_t n = udp_.receive_from(asio::buffer(udpBuffer_), from, 0, ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) return;
    if (ec) continue;  // ICMP errors of earlier sends
    handlers_.datagram(std::span<const std::uint8_t>(udpBuffer_.data(), n), from, nowMicros());
  }
}

void Listeners::openDccp() { openDccp(this->family(options_.localAddresses)); }

void Listeners::openDccp(int family) {
  UniqueFd fd;
  try {
    fd.reset(transport::openSocket(Protocol::DCCP, family));
    transport::SocketOptions o;
    o.reuseAddress = true;
    if (family == AF_INET6) o.v6only = options_.v6only;
    transport::configureSocket(fd.get(), Protocol::DCCP, family, o);
    transport::bindSocket(fd.get(),
                          options_.localAddresses.empty() ? anyAddress(family) : options_.localAddresses.front(),
                          options_.port);
    if (::listen(fd.get(), SOMAXCONN) != 0) {
      throw transport::TransportError(std::string("listen: ") + std::strerror(errno));
    }
  } catch (const transport::TransportError& e) {
    fd.reset();
    if (family == AF_INET6 && options_.localAddresses.empty()) {
      // DCCP over IPv6 is a module of its own (dccp_ipv6); serve IPv4 when only that is there.
      log::debug(std::string("No DCCP over IPv6: ") + e.what() + "; trying IPv4");
      return openDccp(AF_INET);
    }
    log::info(std::string("No DCCP data listener: ") + e.what());
    whyNoDccp_ = e.what();
    return;
  }
  dccp_ = std::make_unique<asio::posix::stream_descriptor>(io_, fd.release());
  acceptDccp();
}

void Listeners::acceptDccp() {
  dccp_->async_wait(
      asio::posix::stream_descriptor::wait_read, [weak = weak_from_this()](const boost::system::error_code& ec) {
        auto self = weak.lock();
        if (ec || !self || self->closed_) return;
        sockaddr_storage ss{};
        socklen_t len = sizeof(ss);
        const int fd = ::accept4(self->dccp_->native_handle(), reinterpret_cast<sockaddr*>(&ss), &len,
                                 SOCK_NONBLOCK | SOCK_CLOEXEC);
        const bool failed = fd < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED;
        if (fd >= 0) {
          asio::ip::tcp::endpoint peer;
          if (len <= peer.capacity()) {
            std::memcpy(peer.data(), &ss, len);
            peer.resize(len);
          }
          self->handlers_.connection(
              transport::makeDccpChannel(self->io_, fd, transport::endpointName(peer.address(), peer.port())),
              Protocol::DCCP);
        } else if (failed) {
          backoff().failed("a DCCP connection", boost::system::error_code(errno, boost::system::system_category()));
        }
        acceptAgain(self->io_, failed, [weak] {
          if (auto self = weak.lock()) self->acceptDccp();
        });
      });
}

// With --sctp-stack=auto on a kernel with SCTP, both stacks listen: the kernel's for what
// actives send by default, the userland one (over UDP) for the flows that need it (CMT). The
// userland stack reads no raw SCTP, so it never sees, let alone answers, the kernel's packets.
void Listeners::openSctp() {
  std::vector<sctp::Stack> stacks;
  if (options_.sctpStack == sctp::StackChoice::Auto) {
    if (sctp::kernelAvailable()) stacks.push_back(sctp::Stack::Kernel);
    stacks.push_back(sctp::Stack::Userland);
  } else {
    try {
      stacks.push_back(sctp::resolve(options_.sctpStack, false));
    } catch (const transport::TransportError& e) {
      log::warning(std::string("No SCTP listeners: ") + e.what());
      return;
    }
  }
  for (const sctp::Stack stack : stacks) {
    try {
      openSctp(stack);
    } catch (const transport::TransportError& e) {
      const bool besideKernel = stack == sctp::Stack::Userland && stacks.size() > 1;
      log::warning(std::string(besideKernel ? "No userland SCTP listeners (for CMT flows): " : "No SCTP listeners: ") +
                   e.what());
    }
  }
}

void Listeners::openSctp(sctp::Stack stack) {
  const int family = this->family(options_.localAddresses);
  const sctp::StackSettings settings{options_.sctpUdpPort, sctp::kDefaultUdpEncapsulationPort, options_.sctpInitRate};
  std::vector<std::shared_ptr<sctp::Socket>> opened;
  try {
    for (const bool control : {true, false}) {
      std::shared_ptr<sctp::Socket> listener = sctp::open(stack, io_, family, settings);
      sctp::SocketOptions o;
      // Control needs one stream; data associations carry up to 65535 flows. Every stream
      // costs the stack memory for the association's lifetime (65535 cost ~4 MB).
      o.streams = control ? 1 : 65535;
      if (control) {
        // An active that dies without a word (SIGKILL) is noticed in about half a minute,
        // not after the stacks' default of several minutes.
        o.heartbeatMs = 5000;
        o.maxRetransmissions = 4;
      }
      o.noDelay = true;
      if (family == AF_INET6) o.v6only = options_.v6only;
      if (!control) {
        o.rcvBufferSize = options_.rcvBufferSize;
        o.sndBufferSize = options_.sndBufferSize;
        // Offered to every active: an association uses NR-SACK exactly when its active offers it
        // too (nrsack=on), which this passive cannot know before the INIT.
        // The same for packet-drop reporting (pktdrop=on).
        if (stack == sctp::Stack::Userland) {
          o.nrSack = true;
          o.pktDrop = true;
        }
      }
      listener->configure(o);
      const auto& addresses = control ? options_.controlAddresses : options_.localAddresses;
      listener->bind(addresses, static_cast<std::uint16_t>(control ? options_.port + 1 : options_.port));
      listener->listen();
      opened.push_back(listener);
    }
  } catch (const transport::TransportError&) {
    for (auto& l : opened) l->close();
    throw;
  }
  for (std::size_t i = 0; i < opened.size(); ++i) {
    sctpListeners_.push_back(opened[i]);
    acceptSctp(opened[i], i == 0);
  }
  if (stack == sctp::Stack::Userland) {
    log::info("SCTP: userland stack (usrsctp) over UDP port " + std::to_string(sctp::userlandEncapsulationPort()));
  } else {
    log::info("SCTP: kernel stack");
  }
}

void Listeners::acceptSctp(std::shared_ptr<sctp::Socket> listener, bool control) {
  listener->asyncWait(false, [weak = weak_from_this(), listener, control] {
    auto self = weak.lock();
    if (!self || self->closed_) return;
    while (auto socket = listener->accept()) {
      const auto peers = socket->peerAddresses();
      const asio::ip::address peer = peers.empty() ? asio::ip::address() : unmapped(peers.front());
      const std::string name = (peer.is_v6() ? "[" + peer.to_string() + "]" : peer.to_string()) + " (SCTP)";
      auto association = std::make_shared<sctp::Association>(self->io_, std::move(socket), name);
      if (control) {
        self->handlers_.control(std::make_shared<ControlChannel>(
            self->io_.get_executor(), sctpControl(association, npmp::MessageSet::ControlToPassive), name, peer));
      } else {
        self->handlers_.association(association);
      }
    }
    self->acceptSctp(listener, control);
  });
}

}  // namespace npm::control
