// The active's control connection: connecting to the passive over SCTP (the default), TCP or
// MPTCP, proving the shared key, waiting for acknowledgements, and the SCTP shutdown at the end.
#include "control/active_internal.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <sys/socket.h>

#include <functional>

#include "common/log.h"
#include "control/auth.h"
#include "sctp/data_transport.h"
#include "sctp/sockaddr.h"
#include "transport/sockets.h"
#include "transport/stream_transports.h"

namespace npm::control {

using asio::ip::tcp;
using npmp::Protocol;

std::optional<std::string> busyText(std::uint32_t status) {
  const char* why = status == npmp::kStatusBusy ? "as many sessions as it admits in all (its --max-sessions)"
                    : status == npmp::kStatusBusyHost
                        ? "as many sessions of this host as it admits (its --max-sessions-per-host)"
                    : status == npmp::kStatusBusyPrefix
                        ? "as many sessions of this host's network as it admits (its --max-sessions-per-prefix)"
                        : nullptr;
  if (why == nullptr) return std::nullopt;
  return std::string("refused the session: it has ") + why + " open, and all of them are working; try again later";
}

asio::awaitable<void> Active::connectControl() {
  ControlProtocol transport = options_.control;
  if (transport == ControlProtocol::Default || transport == ControlProtocol::Sctp) {
    // SCTP is the reference's default. Without -x, a passive without SCTP is not an error.
    try {
      const bool fallback = transport == ControlProtocol::Default;
      co_await connectSctpControl(fallback ? std::chrono::seconds(2) : kConnectTimeout, fallback);
      co_return;
    } catch (const std::exception& e) {
      if (transport == ControlProtocol::Sctp) throw ActiveError(std::string("control over SCTP (-x): ") + e.what());
      log::info(std::string("No SCTP path to the passive (") + e.what() + "); using TCP for the control connection");
    }
    transport = ControlProtocol::Tcp;
  }
  const Protocol protocol = transport == ControlProtocol::Mptcp ? Protocol::MPTCP : Protocol::TCP;
  const int family = options_.remote.is_v6() ? AF_INET6 : AF_INET;
  tcp::socket socket(io_);
  socket.assign(family == AF_INET6 ? tcp::v6() : tcp::v4(), transport::openSocket(protocol, family));
  const int fd = socket.native_handle();  // owned by the socket
  transport::SocketOptions options;
  if (family == AF_INET6) options.v6only = options_.v6only;
  options.noDelay = true;
  transport::configureSocket(fd, protocol, family, options);
  if (!options_.controlAddresses.empty()) transport::bindSocket(fd, options_.controlAddresses.front(), 0);
  const tcp::endpoint to(options_.remote, static_cast<std::uint16_t>(options_.port + 1));
  log::info(std::string("Connecting to the passive at ") + transport::endpointName(to.address(), to.port()) +
            " (control over " + npmp::protocolName(protocol) + ")");
  co_await transport::connectWithin(
      socket, to, kConnectTimeout,
      "connection refused: nothing listens on the passive's control port (PORT+1 = " + std::to_string(to.port()) +
          "); is \"netperfmeter " + std::to_string(options_.port) + "\" running there?");
  boost::system::error_code ignored;
  const auto local = socket.local_endpoint(ignored);
  json_.control(npmp::protocolName(protocol), ignored ? "" : transport::endpointName(local.address(), local.port()),
                transport::endpointName(to.address(), to.port()));
  control_ = std::make_shared<ControlChannel>(
      io_.get_executor(), tcpControl(std::move(socket), npmp::MessageSet::ControlToActive, protocol == Protocol::MPTCP),
      transport::endpointName(to.address(), to.port()), to.address());
  control_->watchFailure(&runEvent_);
  control_->start();
}

// Proves the shared key to the passive, and makes it prove the key too (see auth.h).
asio::awaitable<void> Active::authenticate() {
  const npmp::AuthHello hello{newNonce()};
  npmp::Bytes out;
  npmp::encode(hello, out);
  control_->send(std::move(out));
  const std::string passive = "the passive at " + control_->peerName();
  auto next = [&]() -> asio::awaitable<npmp::Message> {
    std::optional<npmp::Bytes> message;
    try {
      message = co_await control_->next(kAckTimeout);
    } catch (const ControlError& e) {
      throw ActiveError(passive + " closed the control connection when asked to authenticate (" + e.what() +
                        "); it may not know authentication (the reference NetPerfMeter does not)");
    }
    if (!message) throw ActiveError(passive + " did not answer the authentication in time");
    auto decoded = npmp::decode(*message);
    if (!decoded) throw ActiveError(passive + " answered the authentication with garbage: " + decoded.error());
    co_return *decoded;
  };
  auto refused = [&](const npmp::Acknowledge& a) -> ActiveError {
    if (a.status == npmp::kStatusError)
      return ActiveError(passive + " does not use authentication (it has no --auth-key-file)");
    if (a.status == npmp::kStatusNotAllowed)
      return ActiveError(passive + " refused the key (wrong key, or its --allow list)");
    if (const auto busy = busyText(a.status)) return ActiveError(passive + " " + *busy);
    return ActiveError(passive + " refused the authentication (status " + std::to_string(a.status) + ")");
  };
  const npmp::Message first = co_await next();
  if (const auto* a = std::get_if<npmp::Acknowledge>(&first)) throw refused(*a);
  const auto* challenge = std::get_if<npmp::AuthChallenge>(&first);
  if (challenge == nullptr) throw ActiveError(passive + " answered the authentication with something else");
  if (!sameProof(challenge->mac, passiveProof(*options_.authKey, hello.nonce, challenge->nonce))) {
    throw ActiveError(passive + " could not prove the shared key: the keys differ, or it is not the passive you meant");
  }
  npmp::Bytes response;
  npmp::encode(npmp::AuthResponse{activeProof(*options_.authKey, challenge->nonce, hello.nonce)}, response);
  control_->send(std::move(response));
  const npmp::Message result = co_await next();
  const auto* a = std::get_if<npmp::Acknowledge>(&result);
  if (a == nullptr) throw ActiveError(passive + " answered the authentication with something else");
  if (a->status != npmp::kStatusOk) throw refused(*a);
  log::info("Authenticated with the passive (shared key)");
}

asio::awaitable<void> Active::connectSctpControl(Clock::duration timeout, bool fallback) {
  const sctp::Stack stack = sctp::resolve(options_.sctpStack, false);
  const int family = options_.remote.is_v6() ? AF_INET6 : AF_INET;
  auto socket = sctp::open(stack, io_, family, sctpSettings(options_));
  sctp::SocketOptions options;
  options.streams = 1;
  if (family == AF_INET6) options.v6only = options_.v6only;
  socket->configure(options);
  if (!options_.controlAddresses.empty()) socket->bind(options_.controlAddresses, 0);
  const std::uint16_t port = static_cast<std::uint16_t>(options_.port + 1);
  const std::string name = transport::endpointName(options_.remote, port);
  log::info("Connecting to the passive at " + name + " (control over SCTP, " + sctp::stackName(stack) + " stack)");
  socket->connect(options_.remotes, port);
  auto association = std::make_shared<sctp::Association>(io_, std::move(socket), name);
  // Userland SCTP reaches the passive through its UDP encapsulation port. When another
  // userland SCTP process on the passive's host holds that port, the passive serves no SCTP
  // (it says so in its log) and the INIT goes to the other process: a timeout, nothing else.
  // With TCP to follow, the short line: the fallback says what happens instead.
  const std::string ifTimedOut =
      stack != sctp::Stack::Userland || fallback
          ? std::string()
          : " (userland SCTP via UDP port " + std::to_string(options_.sctpRemoteUdpPort) +
                ": does the passive own that port, or did another userland SCTP process take it? See the "
                "passive's log; --sctp-udp-port and --sctp-remote-udp-port choose another)";
  std::optional<asio::ip::udp::endpoint> encapsulation;
  if (stack == sctp::Stack::Userland && fallback) encapsulation.emplace(options_.remote, options_.sctpRemoteUdpPort);
  co_await sctp::waitConnected(io_, *association, timeout, ifTimedOut, encapsulation);
  json_.control(std::string("SCTP (") + sctp::stackName(stack) + ")", "", name);
  json_.sctpStack(sctp::stackName(stack));
  control_ = std::make_shared<ControlChannel>(
      io_.get_executor(), sctpControl(association, npmp::MessageSet::ControlToActive), name, options_.remote);
  control_->watchFailure(&runEvent_);
  control_->start();
}

asio::awaitable<std::optional<npmp::Acknowledge>> Active::nextAck(std::uint32_t flowId, std::uint16_t streamId,
                                                                  const char* what, Clock::duration timeout) {
  std::optional<npmp::Bytes> message;
  try {
    message = co_await control_->next(timeout);
  } catch (const ControlError& e) {
    throw ActiveError(std::string("lost the control connection while waiting for the acknowledgement of ") + what +
                      ": " + e.what());
  }
  if (!message) co_return std::nullopt;
  const auto decoded = npmp::decode(*message);
  const auto* a = decoded ? std::get_if<npmp::Acknowledge>(&*decoded) : nullptr;
  if (a == nullptr) {
    throw ActiveError(std::string("expected the acknowledgement of ") + what + ", got " +
                      (decoded ? npmp::typeName((*message)[0]) : decoded.error()));
  }
  if (a->measurementId != measurementId_ || a->flowId != flowId || a->streamId != streamId) {
    throw ActiveError(std::string("the passive acknowledged something else than ") + what);
  }
  co_return *a;
}

asio::awaitable<npmp::Acknowledge> Active::awaitAck(std::uint32_t flowId, std::uint16_t streamId, const char* what,
                                                    Clock::duration timeout) {
  const auto a = co_await nextAck(flowId, streamId, what, timeout);
  if (!a) throw ActiveError(std::string("the passive did not acknowledge ") + what + " in time");
  co_return *a;
}

// Userland SCTP runs in this process's threads: an association still open when the process
// exits is never shut down, and the passive keeps it (and its session) until heartbeats fail.
// So the control association ends with SHUTDOWN first (at most 2 s); the passive then ends the
// session and closes the data associations itself.
asio::awaitable<void> Active::endAssociations() {
  if (!control_->shutdown()) co_return;
  co_await pollUntil(
      io_.get_executor(), [this] { return control_->failed(); }, std::chrono::seconds(2));
}

}  // namespace npm::control
