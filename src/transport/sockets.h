// Socket creation and options per transport protocol, with capability probing and
// one-line errors ("DCCP is not supported by this kernel", unknown congestion control, ...).
#pragma once

#include <boost/asio/ip/address.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/result.h"
#include "npmp/messages.h"

namespace npm::transport {

namespace asio = boost::asio;

class TransportError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Options applied to a data or control socket.
struct SocketOptions {
  bool reuseAddress = false;        // SO_REUSEADDR (sockets that bind)
  std::uint32_t rcvBufferSize = 0;  // 0 = leave the kernel's default (and autotuning)
  std::uint32_t sndBufferSize = 0;
  std::optional<bool> noDelay;    // TCP_NODELAY (TCP/MPTCP)
  std::string congestionControl;  // TCP_CONGESTION (TCP/MPTCP); empty = default
  std::optional<bool> v6only;     // IPV6_V6ONLY on IPv6 sockets
  std::uint8_t ccid = 0;          // DCCP CCID (0 = default)
  // IP_TOS (IPv4; also on IPv6 sockets, for IPv4-mapped peers) and IPV6_TCLASS (IPv6): the
  // DSCP (and ECN bits, which TCP's stack overrides) of what the socket sends.
  std::optional<std::uint8_t> tos;
};

// The socket options a flow's ADD_FLOW asks of both sides (buffers, TCP_NODELAY, congestion
// control, DCCP CCID); the active adds its own (TOS, IPV6_V6ONLY, SO_REUSEADDR with -L).
SocketOptions socketOptionsOf(const npmp::AddFlow& m);

// Whether the kernel can create sockets of this protocol (else why not).
Result<void> protocolAvailable(npmp::Protocol protocol);

// Creates a non-blocking, close-on-exec socket. Throws TransportError.
int openSocket(npmp::Protocol protocol, int family);

// One setsockopt() call: level, name, value bytes and a name for messages.
struct SocketOptionValue {
  int level;
  int name;
  std::vector<std::uint8_t> value;
  std::string what;
};
// The setsockopt() calls configureSocket() makes, in order (pure; unit-tested).
std::vector<SocketOptionValue> socketOptionsFor(npmp::Protocol protocol, int family, const SocketOptions& options);

// Applies the options; throws TransportError naming the option on failure.
void configureSocket(int fd, npmp::Protocol protocol, int family, const SocketOptions& options);

// Whether this process can use the congestion control (else why not).
Result<void> checkCongestionControl(const std::string& name);

// Binds to address:port (any address when unspecified), with SO_REUSEADDR.
void bindSocket(int fd, const asio::ip::address& address, std::uint16_t port);

// Resolves a host name or address literal (numeric first, then getaddrinfo).
// `family` 0 = any.
Result<asio::ip::address> resolveHost(const std::string& host, int family);

// All addresses of a host name of the given family (for SCTP's connectx); the literal itself
// for an address.
std::vector<asio::ip::address> resolveAll(const std::string& host, int family);

// Parses "a,b,c" address lists of -L/-l.
Result<std::vector<asio::ip::address>> parseAddressList(const std::string& list);

// An IPv4-mapped IPv6 address (::ffff:a.b.c.d, as dual-stack sockets report IPv4 peers) as
// the IPv4 address it is; any other address unchanged.
asio::ip::address unmapped(const asio::ip::address& address);

// An address range such as 10.1.0.0/16 or 2001:db8::/32 (a bare address is one host).
struct AddressPrefix {
  asio::ip::address network;
  unsigned length = 0;  // prefix bits
  // IPv4-mapped IPv6 addresses match IPv4 ranges.
  bool contains(const asio::ip::address& address) const;
};
// The network of `bits` prefix bits that `address` is in (IPv4-mapped IPv6 addresses as IPv4,
// with `v4Bits`; IPv6 with `v6Bits`): the unit of the passive's per-network limits.
AddressPrefix prefixOf(const asio::ip::address& address, unsigned v4Bits, unsigned v6Bits);
// Parses "CIDR[,CIDR...]"; error text on a bad range.
Result<std::vector<AddressPrefix>> parsePrefixList(const std::string& list);
// Whether `address` is in one of the ranges (an empty list allows every address).
bool allowed(const std::vector<AddressPrefix>& ranges, const asio::ip::address& address);

// Bytes not yet acknowledged by the peer on a stream socket (SIOCOUTQ), or -1.
long unsentBytes(int fd);

// The process's limit of open files (RLIMIT_NOFILE): raises the soft limit to the hard limit
// (many flows need a descriptor each) and returns {soft, hard} then in force.
struct DescriptorLimit {
  std::uint64_t soft = 0, hard = 0;
};
DescriptorLimit raiseDescriptorLimit();
// Bytes in a socket's receive queue (SIOCINQ), -1 if the socket cannot tell.
long unreadBytes(int fd);

// Linux values that older headers may lack.
constexpr int kIpprotoMptcp = 262;
constexpr int kIpprotoDccp = 33;
constexpr int kSockDccp = 6;
constexpr int kSolDccp = 269;
constexpr int kDccpSockoptService = 2;
constexpr int kDccpSockoptCcid = 13;

}  // namespace npm::transport
