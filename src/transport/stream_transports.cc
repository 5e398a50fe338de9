#include "transport/stream_transports.h"

#include <boost/asio/ip/udp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>

#include "common/clock.h"
#include "common/handle.h"
#include "common/log.h"
#include "transport/accepting.h"
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

// ---- The passive's listeners ----

// A connection that carries one flow (TCP, MPTCP, DCCP): it waits in the passive's table of
// connections until its first message, which must be the IDENTIFY of its flow; then the flow's
// settings are set on its socket and it is handed on.
void adopt(const PassiveSide& side, std::shared_ptr<DataChannel> channel, Protocol protocol) {
  const asio::ip::address peer = unmapped(peerAddressOf(channel->fd()));
  if (!side.flows->admits(peer, "a data connection")) return channel->close();
  if (!side.connections->add(channel, peer)) return;
  DataChannel* raw = channel.get();
  channel->expect(npmp::MessageSet::DataFirst);
  std::weak_ptr<PendingTable<DataChannel>> table = side.connections;
  std::weak_ptr<PassiveFlows> weakFlows = side.flows;
  channel->receive(
      [table, weakFlows, raw, protocol](std::span<const std::uint8_t> message, std::uint64_t) {
        auto pending = table.lock();
        auto flows = weakFlows.lock();
        if (!pending || !flows) return;
        auto channel = pending->take(raw);
        if (!channel) return;
        const auto id = identifyOf(message);
        if (!id) {
          flows->broken("Closing data connection from " + channel->peerName() + ": expected IDENTIFY_FLOW, got " +
                        id.error());
          return channel->close();
        }
        if (const npmp::AddFlow* wire = flows->waiting(*id, protocol)) {
          try {
            SocketOptions options = socketOptionsOf(*wire);
            options.ccid = 0;  // DCCP: the active's socket chose it before connecting; a connected one cannot
            configureSocket(channel->fd(), protocol, localFamilyOf(channel->fd()), options);
          } catch (const TransportError& e) {
            log::warning("Flow " + std::to_string(id->flowId) + ": " + e.what());
          }
        }
        flows->identify(*id, channel, protocol, peerAddressOf(channel->fd()));
      },
      [table, weakFlows, raw](const ChannelEnd& end) {
        auto pending = table.lock();
        auto flows = weakFlows.lock();
        if (!pending || !flows) return;
        if (auto channel = pending->take(raw)) {
          flows->broken("Closing data connection from " + channel->peerName() + ": " + end.text());
          channel->close();
        }
      });
}

// A listener's socket: opened, given the passive's buffers (-i, -o: the accepted connections
// inherit them) and bound.
UniqueFd listeningSocket(Protocol protocol, const PassiveSide& side, std::uint16_t port, int family, bool buffers) {
  UniqueFd fd(openSocket(protocol, family));
  SocketOptions o;
  o.reuseAddress = true;
  if (family == AF_INET6) o.v6only = side.v6only;
  if (buffers) {
    o.rcvBufferSize = side.rcvBufferSize;
    o.sndBufferSize = side.sndBufferSize;
  }
  configureSocket(fd.get(), protocol, family, o);
  bindSocket(fd.get(), listeningAddress(side.locals, family), port);
  return fd;
}

class StreamListener final : public Listener, public std::enable_shared_from_this<StreamListener> {
public:
  StreamListener(Protocol protocol, const PassiveSide& side, std::uint16_t port)
      : protocol_(protocol), side_(side), port_(port), acceptor_(*side.control) {}

  void start() {
    open();
    accept();
  }

  std::string name() const override { return npmp::protocolName(protocol_); }
  std::uint16_t port() const override { return port_; }
  void close() override {
    closed_ = true;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
  }

private:
  void open() {
    const int family = listeningFamily(side_.locals);
    UniqueFd fd = listeningSocket(protocol_, side_, port_, family, true);
    // Data connections may come by the thousand (--max-flows, several actives): the kernel's
    // whole backlog (net.core.somaxconn caps it).
    if (::listen(fd.get(), SOMAXCONN) != 0) {
      throw TransportError("cannot listen on port " + std::to_string(port_) + ": " + std::strerror(errno));
    }
    acceptor_.assign(family == AF_INET6 ? tcp::v6() : tcp::v4(), fd.release());
  }

  void accept() {
    acceptor_.async_accept([weak = weak_from_this()](const boost::system::error_code& ec, tcp::socket socket) {
      auto self = weak.lock();
      if (!self || self->closed_ || ec == asio::error::operation_aborted) return;
      if (!ec) {
        adopt(self->side_, makeStreamChannel(std::move(socket)), self->protocol_);
      } else {
        acceptFailed("a data connection", ec);
      }
      acceptAgain(*self->side_.control, ec.failed(), [weak] {
        if (auto self = weak.lock()) self->accept();
      });
    });
  }

  Protocol protocol_;
  PassiveSide side_;
  std::uint16_t port_;
  tcp::acceptor acceptor_;
  bool closed_ = false;
};

// A listener on a socket of its own at BASE (DCCP, UDP): its name, port and close.
template <class Socket>
class BaseSocketListener : public Listener {
public:
  BaseSocketListener(const char* name, const PassiveSide& side) : name_(name), side_(side), socket_(*side.control) {}
  std::string name() const override { return name_; }
  std::uint16_t port() const override { return side_.basePort; }
  void close() override {
    closed_ = true;
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

protected:
  const char* name_;
  PassiveSide side_;
  Socket socket_;
  bool closed_ = false;
};

class DccpListener final : public BaseSocketListener<asio::posix::stream_descriptor>,
                           public std::enable_shared_from_this<DccpListener> {
public:
  explicit DccpListener(const PassiveSide& side) : BaseSocketListener("DCCP", side) {}

  void start() {
    open(listeningFamily(side_.locals));
    accept();
  }

private:
  void accept() {
    socket_.async_wait(asio::posix::stream_descriptor::wait_read,
                       [weak = weak_from_this()](const boost::system::error_code& ec) {
                         auto self = weak.lock();
                         if (ec || !self || self->closed_) return;
                         self->acceptOne();
                         acceptAgain(*self->side_.control, self->failed_, [weak] {
                           if (auto self = weak.lock()) self->accept();
                         });
                       });
  }

  void open(int family) {
    UniqueFd fd;
    try {
      fd = listeningSocket(Protocol::DCCP, side_, side_.basePort, family, false);
      if (::listen(fd.get(), SOMAXCONN) != 0) throw TransportError(std::string("listen: ") + std::strerror(errno));
    } catch (const TransportError& e) {
      if (family == AF_INET6 && side_.locals.empty()) {
        // DCCP over IPv6 is a module of its own (dccp_ipv6); serve IPv4 when only that is there.
        log::debug(std::string("No DCCP over IPv6: ") + e.what() + "; trying IPv4");
        return open(AF_INET);
      }
      throw;
    }
    socket_.assign(fd.release());
  }

  void acceptOne() {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    const int fd =
        ::accept4(socket_.native_handle(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    failed_ = fd < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED;
    if (fd >= 0) {
      tcp::endpoint peer;
      if (len <= peer.capacity()) {
        std::memcpy(peer.data(), &ss, len);
        peer.resize(len);
      }
      adopt(side_, makeDccpChannel(*side_.control, fd, endpointName(peer.address(), peer.port())), Protocol::DCCP);
    } else if (failed_) {
      acceptFailed("a DCCP connection", boost::system::error_code(errno, boost::system::system_category()));
    }
  }

  bool failed_ = false;
};

// The passive's one UDP socket on BASE: each datagram goes to the flow its source identified
// with its first datagram (IDENTIFY); the flows answer through the same socket.
class UdpListener final : public BaseSocketListener<udp::socket>, public std::enable_shared_from_this<UdpListener> {
public:
  explicit UdpListener(const PassiveSide& side) : BaseSocketListener("UDP", side) {}

  void start() {
    open();
    receive();
  }

private:
  void open() {
    const int family = listeningFamily(side_.locals);
    UniqueFd fd = listeningSocket(Protocol::UDP, side_, side_.basePort, family, true);
    socket_.assign(family == AF_INET6 ? udp::v6() : udp::v4(), fd.release());
    socket_.non_blocking(true);  // drain() reads until would_block
    buffer_.resize(65536);
  }

  void receive() {
    socket_.async_wait(udp::socket::wait_read, [weak = weak_from_this()](const boost::system::error_code& ec) {
      auto self = weak.lock();
      if (ec || !self || self->closed_) return;
      self->drain();
      self->receive();
    });
  }

  void drain() {
    // Up to 64 datagrams per wake-up, so that the control thread's other work is not starved.
    for (int i = 0; i < 64 && !closed_; ++i) {
      udp::endpoint from;
      boost::system::error_code ec;
      const std::size_t n = socket_.receive_from(asio::buffer(buffer_), from, 0, ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) return;
      if (ec) continue;  // ICMP errors of earlier sends
      deliver(std::span<const std::uint8_t>(buffer_.data(), n), from, nowMicros());
    }
  }

  void deliver(std::span<const std::uint8_t> message, const udp::endpoint& from, std::uint64_t now) {
    if (auto it = peers_.find(from); it != peers_.end()) {
      if (it->second->deliver(message, now)) return;
      peers_.erase(it);  // its flow is gone: the peer may identify another
    }
    auto flows = side_.flows;
    if (message.size() >= 4 && message[0] == static_cast<std::uint8_t>(npmp::Type::IdentifyFlow)) {
      if (!flows->admits(from.address(), "UDP data")) return;
      if (const auto id = identifyOf(message)) {
        auto channel = makeUdpPeerChannel(socket_, from);
        if (flows->identify(*id, channel, Protocol::UDP, from.address(), true)) bind(from, std::move(channel));
        return;
      }
    }
    // Rate-limited: a flood of garbage must not flood the log.
    if (garbage_.next()) {
      log::warning("Ignored " + std::to_string(message.size()) + " bytes of UDP from " +
                   endpointName(from.address(), from.port()) + ": not from an identified flow (" +
                   std::to_string(garbage_.count()) + " so far)");
    }
  }

  void bind(const udp::endpoint& peer, std::shared_ptr<UdpPeerChannel> channel) {
    // The peers of flows that are gone leave when they send again, or here, before the table
    // grows past twice what it held after the last sweep.
    if (peers_.size() >= swept_) {
      std::erase_if(peers_, [](const auto& p) { return p.second->closed(); });
      swept_ = 2 * peers_.size() + 64;
    }
    peers_[peer] = std::move(channel);
  }

  std::vector<std::uint8_t> buffer_;
  std::map<udp::endpoint, std::shared_ptr<UdpPeerChannel>> peers_;
  std::size_t swept_ = 64;
  log::Repeated garbage_{"Ignored UDP datagrams not from an identified flow"};
};

class KernelTransport final : public DataTransport {
public:
  explicit KernelTransport(Protocol protocol) : protocol_(protocol) {}
  Protocol protocol() const override { return protocol_; }
  bool passiveOnAnyThread() const override { return protocol_ == Protocol::TCP || protocol_ == Protocol::MPTCP; }
  bool connectionless() const override { return protocol_ == Protocol::UDP; }
  bool congestionControlByName() const override { return protocol_ == Protocol::TCP || protocol_ == Protocol::MPTCP; }
  std::string congestionControl(const npmp::AddFlow& wire) const override {
    switch (protocol_) {
      case Protocol::TCP:
      case Protocol::MPTCP: {
        if (!wire.congestionControl.empty()) return wire.congestionControl;
        std::ifstream in("/proc/sys/net/ipv4/tcp_congestion_control");
        std::string name;
        return std::getline(in, name) ? name : std::string();
      }
      case Protocol::DCCP: return wire.ccid != 0 ? "ccid" + std::to_string(wire.ccid) : std::string();
      default: return {};
    }
  }

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
      case Protocol::TCP:
      case Protocol::MPTCP: return std::make_unique<StreamConnector>(protocol_, side, streamPort(side.basePort));
      case Protocol::UDP: return std::make_unique<UdpConnector>(side);
      default: return std::make_unique<DccpConnector>(side);
    }
  }

  // TCP and UDP are what every passive serves: a listener of theirs that cannot be had (the port
  // taken) stops the passive; MPTCP and DCCP, which a kernel may lack, leave their flows refused.
  std::shared_ptr<Listener> listen(const PassiveSide& side) const override {
    if (protocol_ != Protocol::TCP && protocol_ != Protocol::UDP) return listener(side);
    try {
      return listener(side);
    } catch (const ListenError&) {
      throw;
    } catch (const TransportError& e) {
      throw ListenError(e.what());
    }
  }

private:
  std::shared_ptr<Listener> listener(const PassiveSide& side) const {
    switch (protocol_) {
      case Protocol::TCP:
      case Protocol::MPTCP: return started<StreamListener>(protocol_, side, streamPort(side.basePort));
      case Protocol::UDP: return started<UdpListener>(side);
      default: return started<DccpListener>(side);
    }
  }

  // A listener, listening (the passive owns it; its handlers hold weak references).
  template <class L, class... Args>
  static std::shared_ptr<Listener> started(Args&&... args) {
    auto listener = std::make_shared<L>(std::forward<Args>(args)...);
    listener->start();
    return listener;
  }
  // TCP's on BASE, MPTCP's on BASE-1 (as the reference's).
  std::uint16_t streamPort(std::uint16_t base) const {
    return protocol_ == Protocol::MPTCP ? static_cast<std::uint16_t>(base - 1) : base;
  }

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
