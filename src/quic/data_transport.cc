#include "quic/data_transport.h"

#include <boost/asio/ip/udp.hpp>

#include <map>

#include "common/log.h"
#include "quic/connection.h"
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

class QuicTransport final : public transport::DataTransport {
public:
  explicit QuicTransport(const TransportOptions& options) : options_(options) {}
  npmp::Protocol protocol() const override { return npmp::Protocol::QUIC; }
  bool activeOnAnyThread() const override { return false; }
  std::unique_ptr<transport::Connector> connector(const transport::ActiveSide& side) const override {
    return std::make_unique<QuicConnector>(options_, side);
  }
  // This side's sender follows its connection's congestion control, which the connection chose
  // at its handshake (Reno): the active's cc= is its own side's, not checked here.
  std::optional<Refusal> admit(const npmp::AddFlow& m) const override {
    if (m.cmt != 0) return Refusal{"CMT applies to SCTP flows only", npmp::kStatusError};
    return std::nullopt;
  }

private:
  TransportOptions options_;
};

}  // namespace

std::shared_ptr<transport::DataTransport> dataTransport(const TransportOptions& options) {
  return std::make_shared<QuicTransport>(options);
}

}  // namespace npm::quic
