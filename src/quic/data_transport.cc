#include "quic/data_transport.h"

#include <boost/asio/ip/udp.hpp>

#include <map>
#include <span>

#include "common/log.h"
#include "quic/connection.h"
#include "quic/server.h"
#include "transport/accepting.h"
#include "transport/async.h"
#include "transport/sockets.h"

namespace npm::quic {

namespace {

using asio::ip::udp;

// The active's connections, one per -quic option, made at its first flow. Like an SCTP
// association, a connection carries the flows of one option and cannot move to another thread
// (README.md): it lives on the control thread, with its flows.
class QuicConnector final : public transport::Connector {
public:
  QuicConnector(const TransportOptions& options, const transport::ActiveSide& side) : options_(options), side_(side) {}

  asio::awaitable<std::shared_ptr<transport::DataChannel>> connect(const transport::FlowConnect& flow) override {
    auto c = co_await connection(flow);
    co_return c->channel(flow.wire->streamId);
  }

  void close() override {
    for (auto& [group, c] : connections_) c->close();
  }

private:
  // To BASE-1, TLS with -tls-ca and -tls-hostname; throws TransportError with the handshake's reason.
  asio::awaitable<std::shared_ptr<Connection>> connection(const transport::FlowConnect& flow) {
    if (auto it = connections_.find(flow.group); it != connections_.end()) co_return it->second;
    const std::uint32_t flowId = flow.wire->flowId;
    const auto port = static_cast<std::uint16_t>(side_.basePort - 1);
    const udp::endpoint server(side_.remote, port);
    const std::string name = transport::endpointName(side_.remote, port);
    const bool cubic = flow.wire->congestionControl == "cubic";
    ClientOptions client;
    client.caFile = options_.caFile;
    client.hostName = options_.hostName;
    if (!side_.locals.empty()) client.local = side_.locals.front();  // -L, as TCP's
    client.v6only = flow.v6only || side_.v6only;                     // -6 and v6only, as TCP's (IPv6 sockets only)
    client.limits.congestionControl = cubic ? Limits::CongestionControl::Cubic : Limits::CongestionControl::Reno;
    log::info("Flow #" + std::to_string(flowId) + ": connecting QUIC connection (" + (cubic ? "CUBIC" : "Reno") +
              ") to " + name + " from " + (client.local ? client.local->to_string() : std::string("(any)")) +
              ", certificate name " + (client.hostName.empty() ? std::string("(not checked)") : client.hostName) +
              ", CAs from " + (client.caFile.empty() ? std::string("the system's trust store") : client.caFile));
    auto made = Connection::connect(*side_.control, server, client);
    if (!made) throw transport::TransportError("Flow #" + std::to_string(flowId) + ": " + made.error());
    auto connection = *made;
    Completion<Result<void>> handshake(side_.control->get_executor());
    connection->onHandshake(handshake.reporter());
    // The connection's own handshake timeout reports first; this bounds the wait regardless.
    const auto result =
        co_await handshake.wait(Clock::now() + client.limits.handshakeTimeout + std::chrono::seconds(2));
    if (!result || !*result) {
      connection->close();
      throw transport::TransportError("cannot set up the QUIC connection of flow #" + std::to_string(flowId) + " to " +
                                      name + ": " +
                                      (result ? result->error() : std::string("the handshake did not end in time")));
    }
    log::info("Flow #" + std::to_string(flowId) + ": QUIC connection to " + name + " up");
    connections_[flow.group] = connection;
    co_return connection;
  }

  TransportOptions options_;
  transport::ActiveSide side_;
  std::map<std::uint32_t, std::shared_ptr<Connection>> connections_;  // by -quic option
};

// The passive's QUIC server on UDP BASE-1. It stays on the control thread, as the SCTP
// associations and the shared UDP socket do: a QUIC connection carries the flows of one -quic
// option on the one socket of the server, and neither can move to another thread (README.md).
// Each stream the active opens announces its flow with IDENTIFY (its first message, the stream
// number its StreamID); a connection waits in its own table until one has.
class QuicListener final : public transport::Listener, public std::enable_shared_from_this<QuicListener> {
public:
  QuicListener(const TransportOptions& options, const transport::PassiveSide& side)
      : options_(options),
        side_(side),
        pending_(
            std::make_shared<transport::PendingTable<Connection>>(*side.control, "QUIC connection", side.pending)) {}

  void open() {
    if (options_.keyFile.empty() || options_.certFile.empty()) {
      throw transport::TransportError("this passive serves QUIC only when started with -tls-key and -tls-cert");
    }
    const int family = transport::listeningFamily(side_.locals);
    ServerOptions o;
    o.keyFile = options_.keyFile;
    o.certFile = options_.certFile;
    o.maxConnections = options_.maxConnections;
    o.retryAbove = options_.retryAbove;
    o.maxPerPrefix = options_.maxPerPrefix;
    o.prefixV4 = side_.pending.prefixV4;
    o.prefixV6 = side_.pending.prefixV6;
    o.v6only = family == AF_INET6 && side_.v6only;  // -6, as the other listeners
    const udp::endpoint local(transport::listeningAddress(side_.locals, family), port());
    auto server = Server::listen(*side_.control, local, o);
    if (!server) throw transport::ListenError("QUIC data listener: " + server.error());
    server_ = *server;
    server_->onConnection([weak = weak_from_this()](std::shared_ptr<Connection> connection) {
      auto self = weak.lock();
      if (!self || self->closed_) return connection->close();
      self->adopt(std::move(connection));
    });
  }

  std::string name() const override { return "QUIC"; }
  std::uint16_t port() const override { return static_cast<std::uint16_t>(side_.basePort - 1); }
  void close() override {
    closed_ = true;
    if (server_) server_->close();
    pending_->closeAll();
  }

private:
  void adopt(std::shared_ptr<Connection> connection) {
    const asio::ip::address peer = transport::unmapped(connection->remote().address());
    if (!side_.flows->admits(peer, "a QUIC data connection")) return connection->close();
    if (!pending_->add(connection, peer)) return;
    Connection* raw = connection.get();
    std::weak_ptr<transport::PendingTable<Connection>> table = pending_;
    std::weak_ptr<transport::PassiveFlows> weakFlows = side_.flows;
    std::weak_ptr<Connection> weakConnection = connection;
    // The streams that have not identified their flow yet, held by the connection's onChannel
    // handler: the connection drops it when it ends (closed, timed out, or unidentified for too
    // long: the pending table closes it), and with it those streams. A flow holds its own.
    using Unidentified = std::map<std::uint16_t, std::shared_ptr<transport::DataChannel>>;
    auto unidentified = std::make_shared<Unidentified>();
    std::weak_ptr<Unidentified> weakUnidentified = unidentified;
    connection->onChannel([table, weakFlows, weakConnection, weakUnidentified, unidentified, raw, peer](
                              std::uint16_t stream, std::shared_ptr<transport::DataChannel> channel) {
      auto flows = weakFlows.lock();
      auto connection = weakConnection.lock();
      if (!flows || !connection) return channel->close();
      channel->expect(npmp::MessageSet::DataFirst);
      channel->receive(
          [table, weakFlows, weakConnection, weakUnidentified, raw, stream, peer](std::span<const std::uint8_t> message,
                                                                                  std::uint64_t) {
            auto flows = weakFlows.lock();
            auto connection = weakConnection.lock();
            auto waiting = weakUnidentified.lock();
            if (!flows || !connection || !waiting) return;
            auto it = waiting->find(stream);
            if (it == waiting->end()) return;  // identified (or refused) already
            auto channel = std::move(it->second);
            waiting->erase(it);
            const auto id = transport::identifyOf(message);
            if (!id || id->streamId != stream) {
              flows->broken("Closing stream " + std::to_string(stream) + " of the QUIC connection from " +
                            connection->peerName() + ": expected IDENTIFY_FLOW with stream " + std::to_string(stream) +
                            ", got " + (id ? "one with stream " + std::to_string(id->streamId) : id.error()));
              return channel->close();
            }
            flows->identify(*id, channel, npmp::Protocol::QUIC, peer);
            // Identified at least once: no longer pending; the active closes it at its end.
            if (auto pending = table.lock()) pending->take(raw);
          },
          [weakConnection, weakUnidentified, stream](const transport::ChannelEnd& end) {
            auto waiting = weakUnidentified.lock();
            if (!waiting || !waiting->count(stream)) return;
            auto channel = std::move((*waiting)[stream]);
            waiting->erase(stream);
            if (auto connection = weakConnection.lock()) {
              log::debug("Stream " + std::to_string(stream) + " of the QUIC connection from " + connection->peerName() +
                         " ended before IDENTIFY: " + end.text());
            }
            channel->close();
          });
      (*unidentified)[stream] = std::move(channel);
    });
  }

  TransportOptions options_;
  transport::PassiveSide side_;
  std::shared_ptr<Server> server_;
  std::shared_ptr<transport::PendingTable<Connection>> pending_;
  bool closed_ = false;
};

class QuicTransport final : public transport::DataTransport {
public:
  explicit QuicTransport(const TransportOptions& options) : options_(options) {}
  npmp::Protocol protocol() const override { return npmp::Protocol::QUIC; }
  bool flowsShareConnection() const override { return true; }
  // One per connection (the streams of an option agree); ngtcp2's Reno unless cc= names another.
  bool congestionControlByName() const override { return true; }
  std::string congestionControl(const npmp::AddFlow& wire) const override {
    return wire.congestionControl.empty() ? "reno" : wire.congestionControl;
  }
  std::string whyUnsupported() const override {
    return "it serves QUIC only when started with -tls-key and -tls-cert (or it was built without QUIC)";
  }
  std::unique_ptr<transport::Connector> connector(const transport::ActiveSide& side) const override {
    return std::make_unique<QuicConnector>(options_, side);
  }
  // This side's sender follows its connection's congestion control, which the connection chose
  // at its handshake (Reno): the active's cc= is its own side's, not checked here.
  std::optional<Refusal> admit(const npmp::AddFlow& m) const override {
    if (m.cmt != 0) return Refusal{"CMT applies to SCTP flows only", npmp::kStatusError};
    return std::nullopt;
  }
  std::shared_ptr<transport::Listener> listen(const transport::PassiveSide& side) const override {
    auto listener = std::make_shared<QuicListener>(options_, side);
    listener->open();
    return listener;
  }

private:
  TransportOptions options_;
};

}  // namespace

std::shared_ptr<transport::DataTransport> dataTransport(const TransportOptions& options) {
  return std::make_shared<QuicTransport>(options);
}

}  // namespace npm::quic
