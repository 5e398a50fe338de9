// Socket-address helpers shared by both SCTP backends (standard headers only).
#pragma once

#include <boost/asio/ip/address.hpp>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "transport/path_sample.h"

namespace npm::sctp {

// Concatenated sockaddr_in/sockaddr_in6 structures, as bindx/connectx take them.
inline std::vector<std::uint8_t> packAddresses(const std::vector<boost::asio::ip::address>& addresses,
                                               std::uint16_t port) {
  std::vector<std::uint8_t> packed;
  for (const auto& a : addresses) {
    if (a.is_v6()) {
      sockaddr_in6 sa{};
      sa.sin6_family = AF_INET6;
      sa.sin6_port = htons(port);
      const auto bytes = a.to_v6().to_bytes();
      std::memcpy(&sa.sin6_addr, bytes.data(), bytes.size());
      sa.sin6_scope_id = a.to_v6().scope_id();
      const auto* p = reinterpret_cast<const std::uint8_t*>(&sa);
      packed.insert(packed.end(), p, p + sizeof(sa));
    } else {
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(port);
      const auto bytes = a.to_v4().to_bytes();
      std::memcpy(&sa.sin_addr, bytes.data(), bytes.size());
      const auto* p = reinterpret_cast<const std::uint8_t*>(&sa);
      packed.insert(packed.end(), p, p + sizeof(sa));
    }
  }
  return packed;
}

// Calls fn(sockaddr pointer, its length) for each of `count` packed addresses (getpaddrs).
template <class Fn>
void forEachPacked(const sockaddr* addrs, int count, Fn fn) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(addrs);
  for (int i = 0; i < count && p != nullptr; ++i) {
    const auto* sa = reinterpret_cast<const sockaddr*>(p);
    const std::size_t length = sa->sa_family == AF_INET    ? sizeof(sockaddr_in)
                               : sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6)
                                                           : 0;
    if (length == 0) return;
    fn(sa, length);
    p += length;
  }
}

// The path ID of each of `count` packed peer addresses, in their order: the address's rank
// among them in ascending order (IPv4 before IPv6, then by address bytes and port). getpaddrs
// lists them in the stack's own order -- usrsctp puts the primary first and the others in
// reverse order of their addition, so that with three paths or more an index named another
// path than the user's list does, and a change of the primary could reorder them --; the rank
// names the same address over the whole association and with either stack.
inline std::vector<std::uint32_t> pathIds(const sockaddr* addrs, int count) {
  std::vector<std::vector<std::uint8_t>> keys;
  forEachPacked(addrs, count, [&](const sockaddr* sa, std::size_t) {
    std::vector<std::uint8_t> key{static_cast<std::uint8_t>(sa->sa_family == AF_INET ? 0 : 1)};
    const auto* bytes =
        sa->sa_family == AF_INET
            ? reinterpret_cast<const std::uint8_t*>(&reinterpret_cast<const sockaddr_in*>(sa)->sin_addr)
            : reinterpret_cast<const std::uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
    key.insert(key.end(), bytes, bytes + (sa->sa_family == AF_INET ? 4 : 16));
    const std::uint16_t port = ntohs(sa->sa_family == AF_INET ? reinterpret_cast<const sockaddr_in*>(sa)->sin_port
                                                              : reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
    key.push_back(static_cast<std::uint8_t>(port >> 8));
    key.push_back(static_cast<std::uint8_t>(port & 0xff));
    keys.push_back(std::move(key));
  });
  std::vector<std::uint32_t> ids(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ids[i] =
        static_cast<std::uint32_t>(std::count_if(keys.begin(), keys.end(), [&](const auto& k) { return k < keys[i]; }));
  }
  return ids;
}

// One sample per packed peer address (getpaddrs), identified by pathIds(): `query(info)` fills
// the backend's own sctp_paddrinfo (the kernel's and usrsctp's differ) for the address copied
// into it, false if it cannot; `state(info.spinfo_state)` names the path state. The samples are
// in getpaddrs' order (a caller that queries more per address walks the same order).
template <class Info, class Query, class State>
void samplePeerAddresses(const sockaddr* addrs, int count, Query query, State state,
                         std::vector<transport::PathSample>& out) {
  const auto ids = pathIds(addrs, count);
  std::size_t index = 0;
  forEachPacked(addrs, count, [&](const sockaddr* sa, std::size_t length) {
    transport::PathSample s;
    s.id = ids[index++];
    s.remote = transport::sockaddrName(sa);
    Info info{};
    std::memcpy(&info.spinfo_address, sa, length);
    if (query(info)) {
      s.state = state(info.spinfo_state);
      s.cwnd = info.spinfo_cwnd;
      s.srttMs = info.spinfo_srtt;
      s.rtoMs = info.spinfo_rto;
      s.mtu = info.spinfo_mtu;
    }
    out.push_back(std::move(s));
  });
}

// The association states (RFC 6458) that both stacks name alike but number differently: a case
// per state, expanded where the backend's own SCTP_* constants are visible.
#define NPM_SCTP_ASSOCIATION_STATE_CASES                   \
  case SCTP_CLOSED: return "CLOSED";                       \
  case SCTP_COOKIE_WAIT: return "COOKIE_WAIT";             \
  case SCTP_COOKIE_ECHOED: return "COOKIE_ECHOED";         \
  case SCTP_ESTABLISHED: return "ESTABLISHED";             \
  case SCTP_SHUTDOWN_PENDING: return "SHUTDOWN_PENDING";   \
  case SCTP_SHUTDOWN_SENT: return "SHUTDOWN_SENT";         \
  case SCTP_SHUTDOWN_RECEIVED: return "SHUTDOWN_RECEIVED"; \
  case SCTP_SHUTDOWN_ACK_SENT: return "SHUTDOWN_ACK_SENT";

// The association as a whole (SCTP_STATUS): its state, primary address, the peer's receiver
// window, DATA chunks unacknowledged and not yet sent. `query(status)` fills the backend's own
// sctp_status, false if it cannot; `state(status.sstat_state)` names the association state.
template <class Status, class Query, class State>
void sampleAssociation(Query query, State state, std::vector<transport::PathSample>& out) {
  Status status{};
  if (!query(status)) return;
  transport::PathSample s;
  s.id = transport::PathSample::kConnection;
  s.state = state(status.sstat_state);
  s.remote = transport::sockaddrName(&status.sstat_primary.spinfo_address);
  s.rwnd = status.sstat_rwnd;
  s.unacked = status.sstat_unackdata;
  s.pending = status.sstat_penddata;
  out.push_back(std::move(s));
}

inline std::vector<boost::asio::ip::address> unpackAddresses(const sockaddr* addrs, int count) {
  std::vector<boost::asio::ip::address> result;
  const auto* p = reinterpret_cast<const std::uint8_t*>(addrs);
  for (int i = 0; i < count && p != nullptr; ++i) {
    const auto* sa = reinterpret_cast<const sockaddr*>(p);
    if (sa->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(p);
      boost::asio::ip::address_v4::bytes_type bytes;
      std::memcpy(bytes.data(), &in->sin_addr, bytes.size());
      result.emplace_back(boost::asio::ip::address_v4(bytes));
      p += sizeof(sockaddr_in);
    } else if (sa->sa_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(p);
      boost::asio::ip::address_v6::bytes_type bytes;
      std::memcpy(bytes.data(), &in6->sin6_addr, bytes.size());
      result.emplace_back(boost::asio::ip::address_v6(bytes, in6->sin6_scope_id));
      p += sizeof(sockaddr_in6);
    } else {
      break;
    }
  }
  return result;
}

inline std::uint16_t portOf(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

inline std::string addressList(const std::vector<boost::asio::ip::address>& addresses) {
  std::string s;
  for (const auto& a : addresses) s += (s.empty() ? "" : ",") + a.to_string();
  return s;
}

}  // namespace npm::sctp
