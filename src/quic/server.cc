#include "quic/server.h"

#include <ngtcp2/ngtcp2.h>
#include <sys/socket.h>

#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cerrno>

#include "quic/tls.h"

namespace npm::quic {

namespace {
constexpr std::size_t kMaxDatagram = 65536;
constexpr int kDatagramsPerRead = 64;
}  // namespace

Server::Server(asio::io_context& io, std::shared_ptr<asio::ip::udp::socket> socket, asio::ip::udp::endpoint local,
               std::shared_ptr<const Credentials> credentials, const ServerOptions& options)
    : io_(io),
      socket_(std::move(socket)),
      local_(local),
      credentials_(std::move(credentials)),
      options_(options),
      buffer_(kMaxDatagram) {}

Server::~Server() {
  boost::system::error_code ec;
  socket_->close(ec);
}

Result<std::shared_ptr<Server>> Server::listen(asio::io_context& io, const asio::ip::udp::endpoint& local,
                                               const ServerOptions& options) {
  auto credentials = Credentials::server(options.keyFile, options.certFile);
  if (!credentials) return Failure{"QUIC: " + credentials.error()};
  auto socket = std::make_shared<asio::ip::udp::socket>(io);
  boost::system::error_code ec;
  socket->open(local.protocol(), ec);
  if (!ec && local.address().is_v6()) socket->set_option(asio::ip::v6_only(options.v6only), ec);
  if (!ec) socket->bind(local, ec);
  if (!ec) socket->non_blocking(true, ec);
  asio::ip::udp::endpoint bound;
  if (!ec) bound = socket->local_endpoint(ec);
  if (ec) {
    return Failure{"QUIC: cannot bind UDP " + transport::endpointName(local.address(), local.port()) + ": " +
                   ec.message()};
  }
  std::shared_ptr<Server> server(new Server(io, std::move(socket), bound, std::move(*credentials), options));
  server->readMore();
  return server;
}

void Server::onConnection(std::function<void(std::shared_ptr<Connection>)> handler) {
  onConnection_ = std::move(handler);
}

void Server::close() {
  if (closed_) return;
  closed_ = true;
  auto connections = std::move(connections_);
  connections_.clear();
  for (auto& [from, connection] : connections) connection->close();
  boost::system::error_code ec;
  socket_->close(ec);
}

void Server::readMore() {
  socket_->async_wait(asio::ip::udp::socket::wait_read, [weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self || ec || self->closed_) return;
    self->drain();
  });
}

void Server::drain() {
  auto self = shared_from_this();
  std::vector<std::shared_ptr<Connection>> touched;
  for (int i = 0; i < kDatagramsPerRead && !closed_; ++i) {
    asio::ip::udp::endpoint from;
    socklen_t length = static_cast<socklen_t>(from.capacity());
    const ssize_t n = ::recvfrom(socket_->native_handle(), buffer_.data(), buffer_.size(), MSG_DONTWAIT, from.data(),
                                 &length);
    if (n < 0) {
      if (errno == EINTR || errno == ECONNREFUSED) continue;
      break;
    }
    from.resize(length);
    handle(std::span<const std::uint8_t>(buffer_.data(), static_cast<std::size_t>(n)), from, timestamp(), touched);
  }
  // Each connection answers once for the whole batch.
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (auto& connection : touched) {
    if (!connection->ended()) connection->afterInput();
  }
  if (!closed_) readMore();
}

void Server::handle(std::span<const std::uint8_t> datagram, const asio::ip::udp::endpoint& from, std::uint64_t now,
                    std::vector<std::shared_ptr<Connection>>& touched) {
  if (auto it = connections_.find(from); it != connections_.end()) {
    auto connection = it->second;
    if (connection->ended()) return;
    connection->onDatagram(datagram, now);
    touched.push_back(std::move(connection));
    return;
  }
  // A new client: only an Initial packet that may start a connection (its header, its size).
  ngtcp2_pkt_hd header;
  if (ngtcp2_accept(&header, datagram.data(), datagram.size()) != 0) {
    return drop("not a QUIC Initial packet that may start a connection", from);
  }
  if (connections_.size() >= options_.maxConnections) {
    return drop("already " + std::to_string(connections_.size()) + " connections", from);
  }
  auto created = Connection::accept(io_, socket_, local_, from, credentials_, options_.limits,
                                    std::span<const std::uint8_t>(header.dcid.data, header.dcid.datalen),
                                    std::span<const std::uint8_t>(header.scid.data, header.scid.datalen),
                                    header.version);
  if (!created) return drop(created.error(), from);
  auto connection = *created;
  std::weak_ptr<Server> weakServer = weak_from_this();
  std::weak_ptr<Connection> weakConnection = connection;
  const std::string peer = connection->peerName();
  connection->onHandshake([weakServer, weakConnection, peer](Result<void> established) {
    auto server = weakServer.lock();
    auto connection = weakConnection.lock();
    if (!server || !connection) return;
    if (!established) {
      if (server->failedHandshakes_.next()) {
        log::info("QUIC handshake from " + peer + " failed: " + established.error() + " (" +
                  std::to_string(server->failedHandshakes_.count()) + " so far)");
      }
      return;
    }
    if (server->onConnection_) server->onConnection_(connection);
  });
  connection->onEnded_ = [weakServer, from, raw = connection.get()] {
    // Not at once: the server may be iterating over its connections.
    auto server = weakServer.lock();
    if (!server) return;
    asio::post(server->io_, [weakServer, from, raw] {
      if (auto s = weakServer.lock()) s->forget(from, raw);
    });
  };
  if (!connection->onDatagram(datagram, now)) {
    return drop("an Initial packet that does not open", from);
  }
  connections_[from] = connection;
  touched.push_back(std::move(connection));
}

void Server::drop(const std::string& why, const asio::ip::udp::endpoint& from) {
  if (dropped_.next()) {
    log::debug("QUIC: dropped a datagram from " + transport::endpointName(from.address(), from.port()) + ": " + why +
               " (" + std::to_string(dropped_.count()) + " so far)");
  }
}

void Server::forget(const asio::ip::udp::endpoint& from, const Connection* which) {
  if (auto it = connections_.find(from); it != connections_.end() && it->second.get() == which) {
    connections_.erase(it);
  }
}

}  // namespace npm::quic
