#include "transport/sockets.h"

#include <fcntl.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>

#include "common/handle.h"

namespace npm::transport {

SocketOptions socketOptionsOf(const npmp::AddFlow& m) {
  SocketOptions o;
  o.rcvBufferSize = m.rcvBufferSize;
  o.sndBufferSize = m.sndBufferSize;
  o.noDelay = (m.flags & npmp::kAddFlowNoDelay) != 0;
  o.congestionControl = m.congestionControl;
  o.ccid = m.ccid;
  return o;
}

namespace {

std::string errnoText() { return std::strerror(errno); }

struct SocketType {
  int type;
  int protocol;
};

SocketType socketType(npmp::Protocol protocol) {
  switch (protocol) {
    case npmp::Protocol::TCP: return {SOCK_STREAM, IPPROTO_TCP};
    case npmp::Protocol::MPTCP: return {SOCK_STREAM, kIpprotoMptcp};
    case npmp::Protocol::UDP: return {SOCK_DGRAM, IPPROTO_UDP};
    case npmp::Protocol::DCCP: return {kSockDccp, kIpprotoDccp};
    case npmp::Protocol::SCTP: return {SOCK_STREAM, IPPROTO_SCTP};
    case npmp::Protocol::QUIC: return {SOCK_DGRAM, 261};
  }
  return {SOCK_STREAM, 0};
}

std::string readFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

Result<void> protocolAvailable(npmp::Protocol protocol) {
  const SocketType t = socketType(protocol);
  if (UniqueFd(::socket(AF_INET, t.type | SOCK_CLOEXEC, t.protocol))) return {};
  return Failure{std::string(npmp::protocolName(protocol)) + " is not supported by this kernel (" + errnoText() + ")"};
}

int openSocket(npmp::Protocol protocol, int family) {
  const SocketType t = socketType(protocol);
  const int fd = ::socket(family, t.type | SOCK_CLOEXEC | SOCK_NONBLOCK, t.protocol);
  if (fd < 0) {
    if (errno == EPROTONOSUPPORT || errno == ESOCKTNOSUPPORT || errno == EAFNOSUPPORT || errno == EINVAL) {
      throw TransportError(std::string(npmp::protocolName(protocol)) + " is not supported by this kernel (" +
                           errnoText() + ")");
    }
    throw TransportError(std::string("cannot create ") + npmp::protocolName(protocol) + " socket: " + errnoText());
  }
  return fd;
}

std::vector<SocketOptionValue> socketOptionsFor(npmp::Protocol protocol, int family, const SocketOptions& o) {
  std::vector<SocketOptionValue> options;
  auto add = [&](int level, int name, const void* value, std::size_t size, std::string what) {
    const auto* p = static_cast<const std::uint8_t*>(value);
    options.push_back({level, name, std::vector<std::uint8_t>(p, p + size), std::move(what)});
  };
  auto addInt = [&](int level, int name, int value, const char* what) {
    add(level, name, &value, sizeof(value), std::string(what) + " " + std::to_string(value));
  };
  if (o.reuseAddress) addInt(SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR");
  if (family == AF_INET6 && o.v6only) addInt(IPPROTO_IPV6, IPV6_V6ONLY, *o.v6only ? 1 : 0, "IPV6_V6ONLY");
  if (o.rcvBufferSize > 0) addInt(SOL_SOCKET, SO_RCVBUF, static_cast<int>(o.rcvBufferSize), "SO_RCVBUF");
  if (o.sndBufferSize > 0) addInt(SOL_SOCKET, SO_SNDBUF, static_cast<int>(o.sndBufferSize), "SO_SNDBUF");
  if (o.tos) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02x", *o.tos);
    addInt(IPPROTO_IP, IP_TOS, *o.tos, "IP_TOS");
    options.back().what = std::string("IP_TOS ") + hex;
    if (family == AF_INET6) {
      addInt(IPPROTO_IPV6, IPV6_TCLASS, *o.tos, "IPV6_TCLASS");
      options.back().what = std::string("IPV6_TCLASS ") + hex;
    }
  }
  const bool tcpLike = protocol == npmp::Protocol::TCP || protocol == npmp::Protocol::MPTCP;
  if (tcpLike && o.noDelay) addInt(IPPROTO_TCP, TCP_NODELAY, *o.noDelay ? 1 : 0, "TCP_NODELAY");
  if (tcpLike && !o.congestionControl.empty()) {
    add(IPPROTO_TCP, TCP_CONGESTION, o.congestionControl.data(), o.congestionControl.size(),
        "TCP_CONGESTION " + o.congestionControl);
  }
  if (protocol == npmp::Protocol::DCCP) {
    const std::uint32_t service = htonl(npmp::kDccpServiceCode);  // "npmp", big-endian
    add(kSolDccp, kDccpSockoptService, &service, sizeof(service), "the DCCP service code");
    if (o.ccid != 0) {
      const std::uint8_t ccid = o.ccid;
      add(kSolDccp, kDccpSockoptCcid, &ccid, sizeof(ccid), "DCCP CCID " + std::to_string(ccid));
    }
  }
  return options;
}

void configureSocket(int fd, npmp::Protocol protocol, int family, const SocketOptions& o) {
  for (const auto& option : socketOptionsFor(protocol, family, o)) {
    if (::setsockopt(fd, option.level, option.name, option.value.data(), static_cast<socklen_t>(option.value.size())) ==
        0) {
      continue;
    }
    if (option.name == TCP_CONGESTION && option.level == IPPROTO_TCP) {
      const auto usable = checkCongestionControl(o.congestionControl);
      throw TransportError(usable ? "cannot use congestion control \"" + o.congestionControl + "\": " + errnoText()
                                  : usable.error());
    }
    throw TransportError("cannot set " + option.what + ": " + errnoText());
  }
}

Result<void> checkCongestionControl(const std::string& name) {
  if (name.empty()) return {};
  const UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP));
  if (!fd) return Failure{"cannot create a TCP socket: " + errnoText()};
  const int rc = ::setsockopt(fd.get(), IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size()));
  const int error = errno;
  if (rc == 0) return {};
  const std::string available = readFirstLine("/proc/sys/net/ipv4/tcp_available_congestion_control");
  const std::string allowed = readFirstLine("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
  if (error == ENOENT) {
    // The project's own (npm_lia, npm_olia, npm_rpv1, npm_rpv2) are BPF programs that someone
    // has to register first; the kernel cannot load them on demand as it loads its modules.
    const bool bundled = name.starts_with("npm_");
    return Failure{"congestion control \"" + name + "\" is not available in this kernel (available: " + available +
                   ")" +
                   (bundled ? "; register the bundled BPF congestion controls with \"netperfmeter-cc-loader "
                              "start\" (as root; Linux 6.2 or later)"
                            : "")};
  }
  if (error == EPERM) {
    return Failure{"congestion control \"" + name + "\" is not allowed for this user (allowed: " + allowed +
                   "; see net.ipv4.tcp_allowed_congestion_control)"};
  }
  return Failure{"cannot use congestion control \"" + name + "\": " + std::strerror(error)};
}

void bindSocket(int fd, const asio::ip::address& address, std::uint16_t port) {
  sockaddr_storage storage{};
  socklen_t length = 0;
  if (address.is_v6()) {
    auto* sa = reinterpret_cast<sockaddr_in6*>(&storage);
    sa->sin6_family = AF_INET6;
    sa->sin6_port = htons(port);
    const auto bytes = address.to_v6().to_bytes();
    std::memcpy(&sa->sin6_addr, bytes.data(), bytes.size());
    sa->sin6_scope_id = address.to_v6().scope_id();
    length = sizeof(sockaddr_in6);
  } else {
    auto* sa = reinterpret_cast<sockaddr_in*>(&storage);
    sa->sin_family = AF_INET;
    sa->sin_port = htons(port);
    const auto bytes = address.to_v4().to_bytes();
    std::memcpy(&sa->sin_addr, bytes.data(), bytes.size());
    length = sizeof(sockaddr_in);
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&storage), length) != 0) {
    throw TransportError("cannot bind to " + (address.is_v6() ? "[" + address.to_string() + "]" : address.to_string()) +
                         ":" + std::to_string(port) + ": " + errnoText());
  }
}

Result<asio::ip::address> resolveHost(const std::string& host, int family) {
  boost::system::error_code ec;
  auto literal = asio::ip::make_address(host, ec);
  if (!ec) return literal;
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) return Failure{"cannot resolve \"" + host + "\": " + ::gai_strerror(rc)};
  asio::ip::address address;
  if (result->ai_family == AF_INET6) {
    const auto* sa = reinterpret_cast<const sockaddr_in6*>(result->ai_addr);
    asio::ip::address_v6::bytes_type bytes;
    std::memcpy(bytes.data(), &sa->sin6_addr, bytes.size());
    address = asio::ip::address_v6(bytes, sa->sin6_scope_id);
  } else {
    const auto* sa = reinterpret_cast<const sockaddr_in*>(result->ai_addr);
    asio::ip::address_v4::bytes_type bytes;
    std::memcpy(bytes.data(), &sa->sin_addr, bytes.size());
    address = asio::ip::address_v4(bytes);
  }
  ::freeaddrinfo(result);
  return address;
}

std::vector<asio::ip::address> resolveAll(const std::string& host, int family) {
  std::vector<asio::ip::address> all;
  boost::system::error_code ec;
  auto literal = asio::ip::make_address(host, ec);
  if (!ec) return {literal};
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0) return all;
  for (const addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    asio::ip::address a;
    if (ai->ai_family == AF_INET6) {
      const auto* sa = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr);
      asio::ip::address_v6::bytes_type bytes;
      std::memcpy(bytes.data(), &sa->sin6_addr, bytes.size());
      a = asio::ip::address_v6(bytes, sa->sin6_scope_id);
    } else {
      const auto* sa = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
      asio::ip::address_v4::bytes_type bytes;
      std::memcpy(bytes.data(), &sa->sin_addr, bytes.size());
      a = asio::ip::address_v4(bytes);
    }
    if (std::find(all.begin(), all.end(), a) == all.end()) all.push_back(a);
  }
  ::freeaddrinfo(result);
  return all;
}

Result<std::vector<asio::ip::address>> parseAddressList(const std::string& list) {
  std::vector<asio::ip::address> addresses;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty() && item.front() == '[' && item.back() == ']') item = item.substr(1, item.size() - 2);
    boost::system::error_code ec;
    auto a = asio::ip::make_address(item, ec);
    if (ec) return Failure{"\"" + item + "\" is not an IPv4 or IPv6 address"};
    addresses.push_back(a);
  }
  if (addresses.empty()) return Failure{"empty address list"};
  return addresses;
}

asio::ip::address unmapped(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  return a;
}

namespace {

template <std::size_t N>
bool samePrefix(const std::array<unsigned char, N>& x, const std::array<unsigned char, N>& y, unsigned bits) {
  for (std::size_t i = 0; i < N && bits > 0; ++i) {
    const unsigned take = std::min(bits, 8u);
    const auto mask = static_cast<unsigned char>(0xFF << (8 - take));
    if ((x[i] & mask) != (y[i] & mask)) return false;
    bits -= take;
  }
  return true;
}

}  // namespace

bool AddressPrefix::contains(const asio::ip::address& address) const {
  const asio::ip::address a = unmapped(address);
  if (a.is_v4() != network.is_v4()) return false;
  return a.is_v4() ? samePrefix(network.to_v4().to_bytes(), a.to_v4().to_bytes(), length)
                   : samePrefix(network.to_v6().to_bytes(), a.to_v6().to_bytes(), length);
}

AddressPrefix prefixOf(const asio::ip::address& address, unsigned v4Bits, unsigned v6Bits) {
  const asio::ip::address a = unmapped(address);
  auto masked = [](auto bytes, unsigned bits) {
    for (auto& b : bytes) {
      const unsigned keep = std::min(bits, 8u);
      b = static_cast<unsigned char>(b & (keep == 0 ? 0 : 0xFF << (8 - keep)));
      bits -= keep;
    }
    return bytes;
  };
  if (a.is_v4()) {
    const unsigned bits = std::min(v4Bits, 32u);
    return {asio::ip::address_v4(masked(a.to_v4().to_bytes(), bits)), bits};
  }
  const unsigned bits = std::min(v6Bits, 128u);
  return {asio::ip::address_v6(masked(a.to_v6().to_bytes(), bits)), bits};
}

Result<std::vector<AddressPrefix>> parsePrefixList(const std::string& list) {
  std::vector<AddressPrefix> ranges;
  std::stringstream in(list);
  std::string item;
  auto fail = [](std::string why) { return Failure{std::move(why)}; };
  while (std::getline(in, item, ',')) {
    const auto slash = item.find('/');
    std::string host = item.substr(0, slash);
    if (!host.empty() && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    boost::system::error_code ec;
    AddressPrefix p;
    p.network = unmapped(asio::ip::make_address(host, ec));
    if (ec) return fail("\"" + item + "\" is not an address range (e.g. 192.0.2.0/24 or 2001:db8::/32)");
    const unsigned maxBits = p.network.is_v4() ? 32 : 128;
    p.length = maxBits;
    if (slash != std::string::npos) {
      const std::string bits = item.substr(slash + 1);
      if (bits.empty() || bits.size() > 3 || bits.find_first_not_of("0123456789") != std::string::npos ||
          std::stoul(bits) > maxBits) {
        return fail("\"" + item + "\": the prefix length must be 0 to " + std::to_string(maxBits));
      }
      p.length = static_cast<unsigned>(std::stoul(bits));
    }
    ranges.push_back(p);
  }
  if (ranges.empty()) return fail("empty address range list");
  return ranges;
}

bool allowed(const std::vector<AddressPrefix>& ranges, const asio::ip::address& address) {
  if (ranges.empty()) return true;
  return std::any_of(ranges.begin(), ranges.end(), [&](const AddressPrefix& p) { return p.contains(address); });
}

long unsentBytes(int fd) {
  int pending = 0;
  if (::ioctl(fd, SIOCOUTQ, &pending) != 0) return -1;
  return pending;
}

long unreadBytes(int fd) {
  int queued = 0;
  if (::ioctl(fd, SIOCINQ, &queued) != 0) return -1;
  return queued;
}

DescriptorLimit raiseDescriptorLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return {};
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return {static_cast<std::uint64_t>(limit.rlim_cur), static_cast<std::uint64_t>(limit.rlim_max)};
}

}  // namespace npm::transport
