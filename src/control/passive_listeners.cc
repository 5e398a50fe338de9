#include "control/passive_listeners.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <map>

#include "common/handle.h"
#include "common/log.h"
#include "sctp/association.h"
#include "sctp/data_transport.h"
#include "transport/accepting.h"
#include "transport/sockets.h"

namespace npm::control {

namespace {

using asio::ip::tcp;
using npmp::Protocol;

}  // namespace

Listeners::Listeners(asio::io_context& io, const PassiveOptions& options,
                     std::function<void(std::shared_ptr<ControlChannel>)> control)
    : io_(io), options_(options), control_(std::move(control)) {}

std::vector<std::pair<Protocol, std::string>> Listeners::open(const transport::Registry& transports,
                                                              const transport::PassiveSide& data) {
  const std::uint16_t base = options_.port;
  std::vector<std::string> control;
  if (options_.controlOverTcp || options_.controlOverMptcp) {
    openControl(static_cast<std::uint16_t>(base + 1), options_.controlOverMptcp);
    control.push_back(options_.controlOverMptcp ? "MPTCP/TCP" : "TCP");
  }
  if (options_.controlOverSctp) openSctpControl();
  if (!sctpListeners_.empty()) control.insert(control.begin(), "SCTP");
  if (control.empty()) {
    throw transport::TransportError("no control listener could be opened (SCTP is not available and -Y was given)");
  }
  // The data listeners, in the order the transports were registered (app/transports).
  std::map<std::uint16_t, std::string> served;  // port -> "SCTP/TCP/UDP"
  std::vector<std::pair<Protocol, std::string>> unserved;
  for (const transport::DataTransport* transport : transports.all()) {
    const std::string name = npmp::protocolName(transport->protocol());
    try {
      auto listener = transport->listen(data);
      std::string& names = served[listener->port()];
      names += (names.empty() ? "" : "/") + listener->name();
      data_.push_back(std::move(listener));
    } catch (const transport::ListenError&) {
      throw;
    } catch (const transport::TransportError& e) {
      log::info("No " + name + " data listener: " + e.what());
      unserved.emplace_back(transport->protocol(), "no " + name + " data listener: " + e.what());
    }
  }
  std::string controlNames, dataNames;
  for (const auto& c : control) controlNames += (controlNames.empty() ? "" : "/") + c;
  for (const std::uint16_t port : {base, static_cast<std::uint16_t>(base - 1)}) {
    if (auto it = served.find(port); it != served.end()) {
      dataNames += (dataNames.empty() ? "" : ", and ") + it->second + " on port " + std::to_string(port);
    }
  }
  log::info("Passive mode: waiting for incoming connections: control channel = " + controlNames + " on port " +
            std::to_string(base + 1) + ", data channel = " + dataNames);
  return unserved;
}

void Listeners::close() {
  closed_ = true;
  boost::system::error_code ec;
  for (auto& a : acceptors_) a->close(ec);
  for (auto& l : sctpListeners_) l->close();
  for (auto& l : data_) l->close();
}

void Listeners::openControl(std::uint16_t port, bool mptcp) {
  const int family = transport::listeningFamily(options_.controlAddresses);
  const Protocol protocol = mptcp ? Protocol::MPTCP : Protocol::TCP;
  UniqueFd fd(transport::openSocket(protocol, family));
  transport::SocketOptions o;
  o.reuseAddress = true;
  if (family == AF_INET6) o.v6only = options_.v6only;
  o.noDelay = true;
  transport::configureSocket(fd.get(), protocol, family, o);
  transport::bindSocket(fd.get(), transport::listeningAddress(options_.controlAddresses, family), port);
  if (::listen(fd.get(), 128) != 0) {
    throw transport::TransportError("cannot listen on port " + std::to_string(port) + ": " + std::strerror(errno));
  }
  auto acceptor = std::make_shared<tcp::acceptor>(io_);
  acceptor->assign(family == AF_INET6 ? tcp::v6() : tcp::v4(), fd.release());
  acceptors_.push_back(acceptor);
  acceptControl(acceptor);
}

void Listeners::acceptControl(std::shared_ptr<tcp::acceptor> acceptor) {
  acceptor->async_accept([weak = weak_from_this(), acceptor](const boost::system::error_code& ec, tcp::socket socket) {
    auto self = weak.lock();
    if (!self || self->closed_ || ec == asio::error::operation_aborted) return;
    if (!ec) {
      boost::system::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      const auto remote = socket.remote_endpoint(ignored);
      self->control_(std::make_shared<ControlChannel>(
          self->io_.get_executor(),
          tcpControl(std::move(socket), npmp::MessageSet::ControlToPassive, self->options_.controlOverMptcp),
          transport::endpointName(remote.address(), remote.port()), remote.address()));
    } else {
      transport::acceptFailed("a control connection", ec);
    }
    transport::acceptAgain(self->io_, ec.failed(), [weak, acceptor] {
      if (auto self = weak.lock()) self->acceptControl(acceptor);
    });
  });
}

// Each of the passive's SCTP stacks (sctp::passiveStacks) listens for control associations, as
// the SCTP data listener does.
void Listeners::openSctpControl() {
  std::vector<sctp::Stack> stacks;
  try {
    stacks = sctp::passiveStacks(options_.sctpStack);
  } catch (const transport::TransportError& e) {
    log::warning(std::string("No SCTP listeners: ") + e.what());
    return;
  }
  for (const sctp::Stack stack : stacks) {
    try {
      openSctpControl(stack);
    } catch (const transport::TransportError& e) {
      const bool besideKernel = stack == sctp::Stack::Userland && stacks.size() > 1;
      log::warning(std::string(besideKernel ? "No userland SCTP listeners (for CMT flows): " : "No SCTP listeners: ") +
                   e.what());
    }
  }
}

void Listeners::openSctpControl(sctp::Stack stack) {
  const int family = transport::listeningFamily(options_.localAddresses);
  sctp::SocketOptions o;
  o.streams = 1;
  // An active that dies without a word (SIGKILL) is noticed in about half a minute, not after
  // the stacks' default of several minutes.
  o.heartbeatMs = 5000;
  o.maxRetransmissions = 4;
  o.noDelay = true;
  if (family == AF_INET6) o.v6only = options_.v6only;
  auto listener = sctp::listenOn(stack, io_, family, sctpSettings(options_), o, options_.controlAddresses,
                                 static_cast<std::uint16_t>(options_.port + 1));
  sctpListeners_.push_back(listener);
  acceptSctpControl(listener);
  if (stack == sctp::Stack::Userland) {
    log::info("SCTP: userland stack (usrsctp) over UDP port " + std::to_string(sctp::userlandEncapsulationPort()));
  } else {
    log::info("SCTP: kernel stack");
  }
}

void Listeners::acceptSctpControl(std::shared_ptr<sctp::Socket> listener) {
  std::weak_ptr<Listeners> weak = weak_from_this();
  sctp::acceptAssociations(
      io_, std::move(listener),
      [weak] {
        auto self = weak.lock();
        return self && !self->closed_;
      },
      [weak](std::shared_ptr<sctp::Association> association, const asio::ip::address& peer) {
        auto self = weak.lock();
        if (!self) return association->close();
        const std::string name = association->peerName();
        self->control_(std::make_shared<ControlChannel>(
            self->io_.get_executor(), sctpControl(association, npmp::MessageSet::ControlToPassive), name, peer));
      });
}

}  // namespace npm::control
