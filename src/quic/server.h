// The server side of QUIC (the passive's): one bound UDP socket, the connections of its
// clients on it, told to the user once their handshake is done. One connection per client
// address and port for now (no connection migration). Datagrams that are no QUIC for this
// server (garbage, stray short-header packets, an Initial whose keys do not open it) are
// dropped without a reply and counted; they never cost more than ngtcp2's look at the header,
// or a connection attempt that is forgotten at once.
//
// Hostile clients (README.md here): a handshake left half-done holds its connection until the
// handshake timeout, and what the server sends to an address that never answered stays within
// three times what it received from there (ngtcp2's anti-amplification limit). Once
// `retryAbove` handshakes are under way, a new client gets a Retry packet (stateless: nothing
// is kept) and is served only when it comes back with the token, from the address it was sent
// to: Initials from forged source addresses then hold no state, and cannot lock legitimate
// clients out by filling `maxConnections`. Clients that hold slots without progress (a
// handshake that went quiet, e.g. after answering the Retry, or an established connection that
// sends nothing) cannot either: when every slot is taken, a new client's Initial closes the
// connection heard from longest ago -- a handshake quiet for kQuietHandshake first, then an
// established connection quiet for kQuietConnection -- and takes its slot. Nor can one network
// (a prefix of `prefixV4` / `prefixV6` bits) fill the slots: it holds at most `maxPerPrefix`
// (beyond that its own quietest connection makes room, or the newcomer is dropped), and when
// every slot is taken, a handshake of a network holding more connections than the newcomer's
// would makes room even if it is not quiet -- the network with the most first.
//
// Bound to the wildcard address, the server reads each datagram's destination address
// (IP_PKTINFO / IPV6_RECVPKTINFO) and answers from it, so that a client that sent to any of the
// host's addresses gets its replies from that address.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/result.h"
#include "quic/connection.h"

struct ngtcp2_pkt_hd;

namespace npm::quic {

struct ServerOptions {
  // The server's key and certificate chain (PEM, as the reference's -tls-key and -tls-cert).
  std::string keyFile, certFile;
  Limits limits;
  // Connections at once (handshaking or established); more clients are ignored until some end.
  std::size_t maxConnections = 1024;
  // Handshakes under way from which on a new client must prove its address with a Retry
  // token first (0: every client).
  std::size_t retryAbove = 64;
  // Connections of one network at once, and what makes one network.
  std::size_t maxPerPrefix = 256;
  unsigned prefixV4 = 24, prefixV6 = 64;
  // An IPv6 socket accepts IPv6 only (IPV6_V6ONLY; otherwise dual-stack).
  bool v6only = false;
};

class Server : public std::enable_shared_from_this<Server> {
public:
  // Binds the socket and starts reading. Fails (one line) where the key or certificate cannot
  // be used (the passive refuses QUIC without them) or the address cannot be bound.
  static Result<std::shared_ptr<Server>> listen(asio::io_context& io, const asio::ip::udp::endpoint& local,
                                                const ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // A client's connection with its handshake done.
  void onConnection(std::function<void(std::shared_ptr<Connection>)> handler);
  asio::ip::udp::endpoint localEndpoint() const { return local_; }
  // Closes the socket and every connection (CONNECTION_CLOSE).
  void close();
  // Connections at the moment (handshaking or established).
  std::size_t connections() const { return connections_.size(); }
  // Datagrams that were no QUIC for this server.
  std::uint64_t dropped() const { return dropped_.count(); }
  std::uint64_t failedHandshakes() const { return failedHandshakes_.count(); }
  // Retry packets sent, and Initials whose Retry token did not verify.
  std::uint64_t retries() const { return retries_; }
  std::uint64_t invalidTokens() const { return invalidTokens_.count(); }
  // Connections whose handshake is under way.
  std::size_t handshaking() const { return handshaking_; }
  // Connections closed to make room for a new client (see above).
  std::uint64_t evicted() const { return evicted_.count(); }
  static constexpr std::uint64_t kQuietHandshake = 1'000'000'000, kQuietConnection = 5'000'000'000;  // ns

private:
  Server(asio::io_context& io, std::shared_ptr<asio::ip::udp::socket> socket, asio::ip::udp::endpoint local,
         std::shared_ptr<const Credentials> credentials, const ServerOptions& options);
  void readMore();
  void drain();
  void handle(std::span<const std::uint8_t> datagram, const asio::ip::udp::endpoint& from,
              const asio::ip::udp::endpoint& to, std::uint64_t now, std::vector<std::shared_ptr<Connection>>& touched);
  // A new client's Initial: a connection, a Retry, or nothing.
  void admit(std::span<const std::uint8_t> datagram, const asio::ip::udp::endpoint& from,
             const asio::ip::udp::endpoint& to, std::uint64_t now, std::vector<std::shared_ptr<Connection>>& touched);
  void sendRetry(const ngtcp2_pkt_hd& header, const asio::ip::udp::endpoint& from, const asio::ip::udp::endpoint& to,
                 std::uint64_t now);
  void refuseToken(const ngtcp2_pkt_hd& header, const asio::ip::udp::endpoint& from, const asio::ip::udp::endpoint& to);
  void reply(const std::uint8_t* data, std::size_t size, const asio::ip::udp::endpoint& from,
             const asio::ip::udp::endpoint& to);
  void drop(const std::string& why, const asio::ip::udp::endpoint& from);
  void forget(const asio::ip::udp::endpoint& from, const Connection* which);
  // Makes room for a newcomer of `network`: closes a connection of that network that made no
  // progress for long enough (`ownNetwork`), or else (see above) one that is quiet enough or a
  // handshake of a fuller network. Whether a slot was freed.
  bool makeRoom(const asio::ip::address& network, bool ownNetwork, std::uint64_t now);
  asio::ip::address networkOf(const asio::ip::udp::endpoint& peer) const;
  std::size_t connectionsOf(const asio::ip::address& network) const;
  void remove(const asio::ip::udp::endpoint& peer);  // out of connections_, heard_, networks_

  asio::io_context& io_;
  std::shared_ptr<asio::ip::udp::socket> socket_;
  asio::ip::udp::endpoint local_;
  std::shared_ptr<const Credentials> credentials_;
  ServerOptions options_;
  std::map<asio::ip::udp::endpoint, std::shared_ptr<Connection>> connections_;
  std::map<asio::ip::udp::endpoint, std::uint64_t> heard_;  // when each client's last datagram came (ns)
  std::map<asio::ip::address, std::size_t> networks_;       // connections of each network
  std::function<void(std::shared_ptr<Connection>)> onConnection_;
  std::vector<std::uint8_t> buffer_;
  bool sourceAddressed_ = false;                // bound to the wildcard: each datagram's destination is read
  std::array<std::uint8_t, 32> tokenSecret_{};  // the key of this server's Retry tokens
  std::size_t handshaking_ = 0;
  std::uint64_t retries_ = 0;
  log::Repeated dropped_{"QUIC: dropped datagrams", log::Debug}, failedHandshakes_{"QUIC handshakes failed", log::Info},
      invalidTokens_{"QUIC: Initials with a Retry token that is not valid", log::Debug},
      evicted_{"QUIC: connections without progress closed to make room", log::Info};
  bool closed_ = false;
  std::chrono::steady_clock::time_point lastTrim_{};
};

}  // namespace npm::quic
