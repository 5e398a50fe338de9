#include "quic/server.h"

#include <gnutls/crypto.h>
#include <netinet/in.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <sys/socket.h>

#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <tuple>
#include <cerrno>
#include <cstring>

#include "quic/connection_detail.h"
#include "quic/tls.h"
#include "transport/sockets.h"

namespace npm::quic {

using detail::kDatagramsPerRead;
using detail::kMaxDatagram;

namespace {
// How long a Retry token is good for (ngtcp2's time, nanoseconds): the client answers a Retry
// at once, so a few seconds cover any round trip.
constexpr ngtcp2_duration kRetryTokenLifetime = 10 * NGTCP2_SECONDS;
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
  const bool wildcard = local.address().is_unspecified();
  boost::system::error_code ec;
  socket->open(local.protocol(), ec);
  if (!ec && local.address().is_v6()) socket->set_option(asio::ip::v6_only(options.v6only), ec);
  if (!ec && wildcard) {
    // Each datagram's destination address, to answer from it (IPv4 peers of a dual-stack
    // socket come with IPV6_PKTINFO too, their address v4-mapped).
    const int on = 1;
    const bool v6 = local.address().is_v6();
    if (::setsockopt(socket->native_handle(), v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_RECVPKTINFO : IP_PKTINFO, &on,
                     sizeof on) != 0) {
      ec = boost::system::error_code(errno, boost::system::system_category());
    }
  }
  if (!ec) socket->bind(local, ec);
  if (!ec) socket->non_blocking(true, ec);
  asio::ip::udp::endpoint bound;
  if (!ec) bound = socket->local_endpoint(ec);
  if (ec) {
    return Failure{"QUIC: cannot bind UDP " + transport::endpointName(local.address(), local.port()) + ": " +
                   ec.message()};
  }
  std::shared_ptr<Server> server(new Server(io, std::move(socket), bound, std::move(*credentials), options));
  server->sourceAddressed_ = wildcard;
  if (gnutls_rnd(GNUTLS_RND_KEY, server->tokenSecret_.data(), server->tokenSecret_.size()) != 0) {
    return Failure{"QUIC: no random key for Retry tokens"};
  }
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
  heard_.clear();
  networks_.clear();
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
    iovec vector{buffer_.data(), buffer_.size()};
    alignas(cmsghdr) std::uint8_t control[CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(in_pktinfo))];
    msghdr message{};
    message.msg_name = from.data();
    message.msg_namelen = static_cast<socklen_t>(from.capacity());
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(socket_->native_handle(), &message, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == ECONNREFUSED) continue;
      break;
    }
    from.resize(message.msg_namelen);
    asio::ip::udp::endpoint to = local_;
    if (sourceAddressed_) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
          in6_pktinfo info;
          std::memcpy(&info, CMSG_DATA(c), sizeof info);
          asio::ip::address_v6::bytes_type bytes;
          std::memcpy(bytes.data(), &info.ipi6_addr, bytes.size());
          // A link-local destination keeps its interface as the scope.
          const auto address =
              asio::ip::address_v6(bytes, IN6_IS_ADDR_LINKLOCAL(&info.ipi6_addr) ? info.ipi6_ifindex : 0);
          to = asio::ip::udp::endpoint(address, local_.port());
        } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
          in_pktinfo info;
          std::memcpy(&info, CMSG_DATA(c), sizeof info);
          asio::ip::address_v4::bytes_type bytes;
          std::memcpy(bytes.data(), &info.ipi_addr, bytes.size());
          to = asio::ip::udp::endpoint(asio::ip::address_v4(bytes), local_.port());
        }
      }
    }
    handle(std::span<const std::uint8_t>(buffer_.data(), static_cast<std::size_t>(n)), from, to, timestamp(), touched);
  }
  // Each connection answers once for the whole batch.
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (auto& connection : touched) {
    if (!connection->ended()) connection->afterInput();
  }
  if (!closed_) readMore();
}

void Server::handle(std::span<const std::uint8_t> datagram, const asio::ip::udp::endpoint& from,
                    const asio::ip::udp::endpoint& to, std::uint64_t now,
                    std::vector<std::shared_ptr<Connection>>& touched) {
  if (auto it = connections_.find(from); it != connections_.end()) {
    auto connection = it->second;
    if (connection->ended()) return;
    heard_[from] = now;
    connection->onDatagram(datagram, now);
    touched.push_back(std::move(connection));
    return;
  }
  admit(datagram, from, to, now, touched);
}

void Server::admit(std::span<const std::uint8_t> datagram, const asio::ip::udp::endpoint& from,
                   const asio::ip::udp::endpoint& to, std::uint64_t now,
                   std::vector<std::shared_ptr<Connection>>& touched) {
  // A new client: only an Initial packet that may start a connection (its header, its size).
  ngtcp2_pkt_hd header;
  if (ngtcp2_accept(&header, datagram.data(), datagram.size()) != 0) {
    return drop("not a QUIC Initial packet that may start a connection", from);
  }
  const auto network = networkOf(from);
  if (connectionsOf(network) >= options_.maxPerPrefix && !makeRoom(network, true, now)) {
    return drop(
        "already " + std::to_string(connectionsOf(network)) + " connections of its network, all making progress", from);
  }
  if (connections_.size() >= options_.maxConnections && !makeRoom(network, false, now)) {
    return drop("already " + std::to_string(connections_.size()) + " connections, all making progress", from);
  }
  ClientInitial initial;
  initial.dcid = std::span<const std::uint8_t>(header.dcid.data, header.dcid.datalen);
  initial.scid = std::span<const std::uint8_t>(header.scid.data, header.scid.datalen);
  initial.version = header.version;
  ngtcp2_cid originalDcid{};
  if (header.token.len > 0 && header.token.base[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) {
    // Back from a Retry: the token must be this server's, for this address and port, and fresh.
    if (ngtcp2_crypto_verify_retry_token(&originalDcid, header.token.base, header.token.len, tokenSecret_.data(),
                                         tokenSecret_.size(), header.version, from.data(),
                                         static_cast<ngtcp2_socklen>(from.size()), &header.dcid, kRetryTokenLifetime,
                                         now) != 0) {
      return refuseToken(header, from, to);
    }
    initial.token = std::span<const std::uint8_t>(header.token.base, header.token.len);
    initial.originalDcid = std::span<const std::uint8_t>(originalDcid.data, originalDcid.datalen);
  } else if (handshaking_ >= options_.retryAbove) {
    // Too many handshakes under way: the client proves its address first (other tokens, such
    // as a NEW_TOKEN's of another server, count for nothing).
    return sendRetry(header, from, to, now);
  }
  auto created = Connection::accept(io_, socket_, to, from, sourceAddressed_, credentials_, options_.limits, initial);
  if (!created) return drop(created.error(), from);
  auto connection = *created;
  std::weak_ptr<Server> weakServer = weak_from_this();
  std::weak_ptr<Connection> weakConnection = connection;
  const std::string peer = connection->peerName();
  // Called once: when the handshake is done, or when the connection ends before that.
  connection->onHandshake([weakServer, weakConnection, peer](Result<void> established) {
    auto server = weakServer.lock();
    if (!server) return;
    --server->handshaking_;
    auto connection = weakConnection.lock();
    if (!connection) return;
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
  ++handshaking_;
  if (!connection->onDatagram(datagram, now)) {
    --handshaking_;  // forgotten without its handshake handler
    return drop("an Initial packet that does not open", from);
  }
  connections_[from] = connection;
  heard_[from] = now;
  ++networks_[network];
  touched.push_back(std::move(connection));
}

asio::ip::address Server::networkOf(const asio::ip::udp::endpoint& peer) const {
  return transport::prefixOf(transport::unmapped(peer.address()), options_.prefixV4, options_.prefixV6).network;
}

std::size_t Server::connectionsOf(const asio::ip::address& network) const {
  const auto it = networks_.find(network);
  return it == networks_.end() ? 0 : it->second;
}

void Server::remove(const asio::ip::udp::endpoint& peer) {
  connections_.erase(peer);
  heard_.erase(peer);
  if (auto it = networks_.find(networkOf(peer)); it != networks_.end() && --it->second == 0) networks_.erase(it);
}

bool Server::makeRoom(const asio::ip::address& network, bool ownNetwork, std::uint64_t now) {
  const std::size_t newcomers = connectionsOf(network) + 1;  // what the newcomer's network would hold
  const asio::ip::udp::endpoint* victim = nullptr;
  std::tuple<std::size_t, bool, std::uint64_t> best{};
  for (const auto& [endpoint, connection] : connections_) {
    const auto own = networkOf(endpoint);
    if (ownNetwork && own != network) continue;
    const std::uint64_t quiet = now - std::min(now, heard_[endpoint]);
    const bool handshake = !connection->established();
    const bool isQuiet = handshake ? quiet >= kQuietHandshake : quiet >= kQuietConnection;
    const std::size_t group = connectionsOf(own);
    const bool fuller = !ownNetwork && handshake && group > newcomers;
    if (!isQuiet && !fuller) continue;
    // The fullest network first (when that is why it may go), then handshakes, then the quietest.
    const std::tuple<std::size_t, bool, std::uint64_t> rank{fuller ? group : 0, handshake, quiet};
    if (victim == nullptr || rank > best) victim = &endpoint, best = rank;
  }
  if (victim == nullptr) return false;
  const auto endpoint = *victim;
  auto connection = connections_.at(endpoint);
  evicted_.say(
      "QUIC: closing the " + std::string(connection->established() ? "connection" : "handshake") + " of " +
      connection->peerName() + " (quiet for " + std::to_string((now - std::min(now, heard_[endpoint])) / 1000000) +
      " ms" +
      (std::get<0>(best) > 0 ? ", its network holding " + std::to_string(std::get<0>(best)) + " connections" : "") +
      ") to make room for a new client");
  remove(endpoint);
  connection->close();
  return true;
}

void Server::sendRetry(const ngtcp2_pkt_hd& header, const asio::ip::udp::endpoint& from,
                       const asio::ip::udp::endpoint& to, std::uint64_t now) {
  ngtcp2_cid retryScid{};
  retryScid.datalen = 18;
  if (gnutls_rnd(GNUTLS_RND_NONCE, retryScid.data, retryScid.datalen) != 0) return drop("no random bytes", from);
  std::array<std::uint8_t, NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN> token;
  const auto tokenLength = ngtcp2_crypto_generate_retry_token(
      token.data(), tokenSecret_.data(), tokenSecret_.size(), header.version, from.data(),
      static_cast<ngtcp2_socklen>(from.size()), &retryScid, &header.dcid, now);
  if (tokenLength < 0) return drop("cannot make a Retry token", from);
  std::array<std::uint8_t, 256> packet;
  const auto n = ngtcp2_crypto_write_retry(packet.data(), packet.size(), header.version, &header.scid, &retryScid,
                                           &header.dcid, token.data(), static_cast<std::size_t>(tokenLength));
  if (n < 0) return drop("cannot write a Retry packet", from);
  ++retries_;
  reply(packet.data(), static_cast<std::size_t>(n), from, to);
}

void Server::refuseToken(const ngtcp2_pkt_hd& header, const asio::ip::udp::endpoint& from,
                         const asio::ip::udp::endpoint& to) {
  if (invalidTokens_.next()) {
    log::debug("QUIC: an Initial from " + transport::endpointName(from.address(), from.port()) +
               " with a Retry token that is not valid (" + std::to_string(invalidTokens_.count()) + " so far)");
  }
  // INVALID_TOKEN, as RFC 9000 8.1.2 asks for (no bigger than the Initial it answers).
  std::array<std::uint8_t, 256> packet;
  const auto n = ngtcp2_crypto_write_connection_close(packet.data(), packet.size(), header.version, &header.scid,
                                                      &header.dcid, NGTCP2_INVALID_TOKEN, nullptr, 0);
  if (n > 0) reply(packet.data(), static_cast<std::size_t>(n), from, to);
}

void Server::reply(const std::uint8_t* data, std::size_t size, const asio::ip::udp::endpoint& from,
                   const asio::ip::udp::endpoint& to) {
  // Best effort: a reply that finds the socket full is lost, and the client tries again.
  sendDatagramFrom(socket_->native_handle(), data, size, from,
                   sourceAddressed_ ? std::optional<asio::ip::address>(to.address()) : std::nullopt);
}

void Server::drop(const std::string& why, const asio::ip::udp::endpoint& from) {
  if (dropped_.next()) {
    log::debug("QUIC: dropped a datagram from " + transport::endpointName(from.address(), from.port()) + ": " + why +
               " (" + std::to_string(dropped_.count()) + " so far)");
  }
}

void Server::forget(const asio::ip::udp::endpoint& from, const Connection* which) {
  if (auto it = connections_.find(from); it != connections_.end() && it->second.get() == which) {
    remove(from);
    // What ended connections held goes back to the system (at most once a second): a flood of
    // handshakes leaves the process as large as it was.
    const auto now = std::chrono::steady_clock::now();
    if (now - lastTrim_ >= std::chrono::seconds(1)) {
      lastTrim_ = now;
      ::malloc_trim(0);
    }
  }
}

}  // namespace npm::quic
