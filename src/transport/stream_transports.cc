#include "transport/stream_transports.h"

#include <boost/asio/ip/udp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/handle.h"
#include "common/log.h"
#include "transport/async.h"

namespace npm::transport {

namespace {

using asio::ip::tcp;
using asio::ip::udp;
using npmp::Protocol;

// A flow's own socket, opened, configured as its ADD_FLOW asks (and the active's own options)
// and bound to -L's first address.
UniqueFd flowSocket(Protocol protocol, const ActiveSide& side, const FlowConnect& flow, std::uint16_t port) {
  const int family = side.remote.is_v6() ? AF_INET6 : AF_INET;
  UniqueFd fd(openSocket(protocol, family));
  SocketOptions options = socketOptionsOf(*flow.wire);
  options.reuseAddress = !side.locals.empty();
  options.tos = flow.tos;
  if (family == AF_INET6) options.v6only = flow.v6only || side.v6only;
  configureSocket(fd.get(), protocol, family, options);
  if (!side.locals.empty()) bindSocket(fd.get(), side.locals.front(), 0);
  log::info("Flow #" + std::to_string(flow.wire->flowId) + ": connecting " + npmp::protocolName(protocol) +
            " socket to " + endpointName(side.remote, port) + " from " +
            (side.locals.empty() ? std::string("(any)") : side.locals.front().to_string()));
  return fd;
}

// TCP and MPTCP: connected on the control thread, with its timers; then handed to the flow's.
class StreamConnector final : public Connector {
public:
  StreamConnector(Protocol protocol, const ActiveSide& side, std::uint16_t port)
      : protocol_(protocol), side_(side), port_(port) {}

  asio::awaitable<std::shared_ptr<DataChannel>> connect(const FlowConnect& flow) override {
    const auto v = side_.remote.is_v6() ? tcp::v6() : tcp::v4();
    UniqueFd fd = flowSocket(protocol_, side_, flow, port_);
    tcp::socket socket(*side_.control);
    socket.assign(v, fd.release());
    co_await connectWithin(socket, tcp::endpoint(side_.remote, port_), side_.timeout);
    if (flow.owner == side_.control) co_return makeStreamChannel(std::move(socket));
    tcp::socket moved(*flow.owner);
    moved.assign(v, socket.release());
    co_return makeStreamChannel(std::move(moved));
  }

private:
  Protocol protocol_;
  ActiveSide side_;
  std::uint16_t port_;
};

class UdpConnector final : public Connector {
public:
  explicit UdpConnector(const ActiveSide& side) : side_(side) {}

  asio::awaitable<std::shared_ptr<DataChannel>> connect(const FlowConnect& flow) override {
    UniqueFd fd = flowSocket(Protocol::UDP, side_, flow, side_.basePort);
    udp::socket socket(*flow.owner);  // connected at once: no waiting on this thread
    socket.assign(side_.remote.is_v6() ? udp::v6() : udp::v4(), fd.release());
    boost::system::error_code ec;
    socket.connect(udp::endpoint(side_.remote, side_.basePort), ec);
    if (ec) {
      throw TransportError("cannot connect the UDP socket to " + endpointName(side_.remote, side_.basePort) + ": " +
                           ec.message());
    }
    co_return makeUdpChannel(std::move(socket));
  }

private:
  ActiveSide side_;
};

class DccpConnector final : public Connector {
public:
  explicit DccpConnector(const ActiveSide& side) : side_(side) {}

  asio::awaitable<std::shared_ptr<DataChannel>> connect(const FlowConnect& flow) override {
    const std::string name = endpointName(side_.remote, side_.basePort);
    UniqueFd fd = flowSocket(Protocol::DCCP, side_, flow, side_.basePort);
    udp::endpoint to(side_.remote, side_.basePort);  // only for its sockaddr
    if (::connect(fd.get(), to.data(), static_cast<socklen_t>(to.size())) != 0 && errno != EINPROGRESS) {
      throw TransportError("cannot connect the DCCP socket to " + name + ": " + std::strerror(errno));
    }
    asio::posix::stream_descriptor waiter(*side_.control, fd.release());  // owns it while it waits
    boost::system::error_code ec;
    {
      Deadline deadline(side_.control->get_executor(), side_.timeout, [&waiter] { waiter.cancel(); });
      co_await waiter.async_wait(asio::posix::stream_descriptor::wait_write,
                                 asio::redirect_error(asio::use_awaitable, ec));
    }
    fd.reset(waiter.release());
    int error = 0;
    socklen_t len = sizeof(error);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len);
    if (ec || error != 0) {
      throw TransportError("cannot connect the DCCP socket to " + name + ": " +
                           (error != 0 ? std::strerror(error) : "timed out"));
    }
    co_return makeDccpChannel(*flow.owner, fd.release(), name);
  }

private:
  ActiveSide side_;
};

class KernelTransport final : public DataTransport {
public:
  explicit KernelTransport(Protocol protocol) : protocol_(protocol) {}
  Protocol protocol() const override { return protocol_; }
  bool passiveOnAnyThread() const override { return protocol_ == Protocol::TCP || protocol_ == Protocol::MPTCP; }

  std::optional<Refusal> admit(const npmp::AddFlow& m) const override {
    if (auto usable = checkCongestionControl(m.congestionControl); !usable)
      return Refusal{usable.error(), npmp::kStatusError};
    if (m.cmt != 0 && !(m.cmt == npmp::kCmtLikeMptcp && protocol_ == Protocol::MPTCP)) {
      return Refusal{"CMT applies to SCTP flows only", npmp::kStatusError};
    }
    return std::nullopt;
  }

  std::unique_ptr<Connector> connector(const ActiveSide& side) const override {
    switch (protocol_) {
      case Protocol::TCP: return std::make_unique<StreamConnector>(protocol_, side, side.basePort);
      case Protocol::MPTCP:
        return std::make_unique<StreamConnector>(protocol_, side, static_cast<std::uint16_t>(side.basePort - 1));
      case Protocol::UDP: return std::make_unique<UdpConnector>(side);
      default: return std::make_unique<DccpConnector>(side);
    }
  }

private:
  Protocol protocol_;
};

}  // namespace

std::shared_ptr<DataTransport> tcpTransport() { return std::make_shared<KernelTransport>(Protocol::TCP); }
std::shared_ptr<DataTransport> mptcpTransport() { return std::make_shared<KernelTransport>(Protocol::MPTCP); }
std::shared_ptr<DataTransport> udpTransport() { return std::make_shared<KernelTransport>(Protocol::UDP); }
std::shared_ptr<DataTransport> dccpTransport() { return std::make_shared<KernelTransport>(Protocol::DCCP); }

asio::awaitable<void> connectWithin(tcp::socket& socket, const tcp::endpoint& to,
                                    std::chrono::steady_clock::duration timeout, const std::string& ifRefused) {
  Deadline deadline(socket.get_executor(), timeout, [&socket] {
    boost::system::error_code ignored;
    socket.cancel(ignored);
  });
  boost::system::error_code ec;
  co_await socket.async_connect(to, asio::redirect_error(asio::use_awaitable, ec));
  const std::string name = "cannot connect to " + endpointName(to.address(), to.port()) + ": ";
  if (deadline.expired()) throw TransportError(name + "timed out");
  if (ec == asio::error::connection_refused && !ifRefused.empty()) throw TransportError(name + ifRefused);
  if (ec) throw TransportError(name + ec.message());
}

}  // namespace npm::transport
