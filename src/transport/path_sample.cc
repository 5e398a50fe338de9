// TCP_INFO and MPTCP_FULL_INFO. Only Linux's own headers here: <linux/tcp.h> has the whole
// tcp_info (glibc's <netinet/tcp.h> stops at tcpi_total_retrans); the MPTCP structures are
// declared below as the kernel's uapi has them (Linux 6.5+), since Debian 12's headers are 6.1.
#include "transport/path_sample.h"

#include <arpa/inet.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "common/log.h"

namespace npm::transport {

namespace {

constexpr int kSolMptcp = 284;
constexpr int kMptcpInfo = 1, kMptcpFullInfo = 4;
constexpr std::uint32_t kMptcpInfoFlagFallback = 1;

// struct mptcp_info as Linux 6.7+ has it (6.1 ends at mptcpi_csum_enabled; the kernel copies
// what it has, and the length it returns says which fields are there).
struct MptcpInfo {
  std::uint8_t subflows, addAddrSignal, addAddrAccepted, subflowsMax, addAddrSignalMax, addAddrAcceptedMax;
  std::uint32_t flags;
  std::uint32_t token;
  std::uint64_t writeSeq, sndUna, rcvNxt;
  std::uint8_t localAddrUsed, localAddrMax, csumEnabled;
  std::uint32_t retransmits;
  std::uint64_t bytesRetrans, bytesSent, bytesReceived, bytesAcked;
  std::uint8_t subflowsTotal;
  std::uint8_t reserved[3];
  std::uint32_t lastDataSent, lastDataRecv, lastAckRecv;
};
static_assert(offsetof(MptcpInfo, csumEnabled) == 42 && offsetof(MptcpInfo, retransmits) == 44 &&
                  offsetof(MptcpInfo, bytesAcked) == 72 && sizeof(MptcpInfo) == 96,
              "the uapi's struct mptcp_info");
constexpr int kIpprotoMptcp = 262;

struct MptcpSubflowInfo {
  std::uint32_t id;
  sockaddr_storage local;
  sockaddr_storage remote;
};

struct MptcpFullInfo {
  std::uint32_t sizeTcpinfoKernel;
  std::uint32_t sizeTcpinfoUser;
  std::uint32_t sizeSfinfoKernel;
  std::uint32_t sizeSfinfoUser;
  std::uint32_t numSubflows;
  std::uint32_t sizeArraysUser;
  alignas(8) std::uint64_t subflowInfo;
  alignas(8) std::uint64_t tcpInfo;
  // struct mptcp_info follows; not asked for (the kernel fills what the length allows).
};
static_assert(sizeof(MptcpFullInfo) == 40, "the uapi's header up to tcp_info");

const char* tcpStateName(unsigned state) {
  static const char* const names[] = {"-",         "ESTABLISHED", "SYN_SENT",   "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2",
                                      "TIME_WAIT", "CLOSE",       "CLOSE_WAIT", "LAST_ACK", "LISTEN",    "CLOSING"};
  return state < sizeof(names) / sizeof(names[0]) ? names[state] : "-";
}

void fromTcpInfo(const tcp_info& t, std::uint32_t size, PathSample& s) {
  // Fields newer than the kernel's tcp_info (size) stay NaN.
  auto has = [size](std::size_t offsetEnd) { return size >= offsetEnd; };
#define NPM_HAS(field) has(offsetof(tcp_info, field) + sizeof(t.field))
  s.state = tcpStateName(t.tcpi_state);
  const double mss = t.tcpi_snd_mss;
  s.cwnd = t.tcpi_snd_cwnd * mss;
  // "Infinite" before the first loss (TCP_INFINITE_SSTHRESH).
  s.ssthresh = t.tcpi_snd_ssthresh >= 0x7FFFFFFFU ? PathSample::kNone : t.tcpi_snd_ssthresh * mss;
  s.srttMs = t.tcpi_rtt / 1000.0;
  s.rttVarMs = t.tcpi_rttvar / 1000.0;
  s.rtoMs = t.tcpi_rto / 1000.0;
  s.mtu = t.tcpi_pmtu;
  s.retransmissions = t.tcpi_total_retrans;
  s.lost = t.tcpi_lost;
  s.unacked = t.tcpi_unacked;
  if (NPM_HAS(tcpi_pacing_rate)) {
    s.pacingRate = t.tcpi_pacing_rate == ~0ULL ? PathSample::kNone : 8.0 * static_cast<double>(t.tcpi_pacing_rate);
  }
  if (NPM_HAS(tcpi_bytes_acked)) s.bytesAcked = static_cast<double>(t.tcpi_bytes_acked);
  if (NPM_HAS(tcpi_bytes_received)) s.bytesReceived = static_cast<double>(t.tcpi_bytes_received);
  if (NPM_HAS(tcpi_delivery_rate)) s.deliveryRate = 8.0 * static_cast<double>(t.tcpi_delivery_rate);
  if (NPM_HAS(tcpi_bytes_sent)) s.bytesSent = static_cast<double>(t.tcpi_bytes_sent);
#undef NPM_HAS
}

// A connected socket's addresses do not change: they are looked up once, into `local` and
// `remote` (empty until known).
bool sampleTcp(int fd, std::vector<PathSample>& out, std::string& local, std::string& remote) {
  tcp_info t{};
  socklen_t len = sizeof(t);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &t, &len) != 0) return false;
  PathSample s;
  fromTcpInfo(t, len, s);
  sockaddr_storage a{};
  socklen_t alen = sizeof(a);
  if (local.empty() && ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &alen) == 0) local = sockaddrName(&a);
  alen = sizeof(a);
  if (remote.empty() && ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &alen) == 0) remote = sockaddrName(&a);
  s.local = local;
  s.remote = remote;
  out.push_back(std::move(s));
  return true;
}

bool sampleMptcp(int fd, std::vector<PathSample>& out) {
  constexpr std::uint32_t kMaxSubflows = 16;
  MptcpSubflowInfo subflows[kMaxSubflows]{};
  tcp_info infos[kMaxSubflows]{};
  MptcpFullInfo full{};
  full.sizeTcpinfoUser = sizeof(tcp_info);
  full.sizeSfinfoUser = sizeof(MptcpSubflowInfo);
  full.sizeArraysUser = kMaxSubflows;
  full.subflowInfo = reinterpret_cast<std::uintptr_t>(subflows);
  full.tcpInfo = reinterpret_cast<std::uintptr_t>(infos);
  socklen_t len = sizeof(full);
  if (::getsockopt(fd, kSolMptcp, kMptcpFullInfo, &full, &len) != 0) return false;
  const std::uint32_t n = std::min(full.numSubflows, kMaxSubflows);
  const std::uint32_t tcpSize = std::min<std::uint32_t>(full.sizeTcpinfoKernel, sizeof(tcp_info));
  for (std::uint32_t i = 0; i < n; ++i) {
    PathSample s;
    s.id = subflows[i].id;
    fromTcpInfo(infos[i], tcpSize, s);
    s.local = sockaddrName(&subflows[i].local);
    s.remote = sockaddrName(&subflows[i].remote);
    out.push_back(std::move(s));
  }
  return n > 0;
}

// The connection as a whole (MPTCP_INFO): the bytes it sent, had acknowledged and received
// at the data level, across its subflows, and its retransmissions.
void sampleMptcpConnection(int fd, std::vector<PathSample>& out) {
  MptcpInfo info{};
  socklen_t len = sizeof(info);
  if (::getsockopt(fd, kSolMptcp, kMptcpInfo, &info, &len) != 0 || len < offsetof(MptcpInfo, localAddrUsed)) {
    return;
  }
  PathSample s;
  s.id = PathSample::kConnection;
  s.state = (info.flags & kMptcpInfoFlagFallback) ? "fallback" : "multipath";  // fell back to plain TCP, or not
  auto has = [len](std::size_t offsetEnd) { return len >= offsetEnd; };
#define NPM_HAS(field) has(offsetof(MptcpInfo, field) + sizeof(info.field))
  if (NPM_HAS(retransmits)) s.retransmissions = info.retransmits;
  if (NPM_HAS(bytesSent)) s.bytesSent = static_cast<double>(info.bytesSent);
  if (NPM_HAS(bytesReceived)) s.bytesReceived = static_cast<double>(info.bytesReceived);
  if (NPM_HAS(bytesAcked)) s.bytesAcked = static_cast<double>(info.bytesAcked);
#undef NPM_HAS
  out.push_back(std::move(s));
}

}  // namespace

std::string sockaddrName(const void* address) {
  char text[INET6_ADDRSTRLEN] = "";
  const auto* sa = static_cast<const sockaddr*>(address);
  if (sa->sa_family == AF_INET) {
    sockaddr_in in;
    std::memcpy(&in, address, sizeof(in));
    ::inet_ntop(AF_INET, &in.sin_addr, text, sizeof(text));
    return std::string(text) + ":" + std::to_string(ntohs(in.sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    sockaddr_in6 in6;
    std::memcpy(&in6, address, sizeof(in6));
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {  // an IPv6 socket's IPv4 peer: as IPv4
      ::inet_ntop(AF_INET, &in6.sin6_addr.s6_addr[12], text, sizeof(text));
      return std::string(text) + ":" + std::to_string(ntohs(in6.sin6_port));
    }
    ::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof(text));
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(in6.sin6_port));
  }
  return "-";
}

bool sampleSocketPaths(int fd, std::vector<PathSample>& out) { return SocketPathSampler().sample(fd, out); }

bool SocketPathSampler::sample(int fd, std::vector<PathSample>& out) {
  if (protocol_ == Protocol::Unknown) {
    int protocol = 0;
    socklen_t len = sizeof(protocol);
    if (::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &len) == 0) {
      protocol_ = protocol == kIpprotoMptcp ? Protocol::Mptcp : Protocol::Tcp;
    }
  }
  const bool mptcp = protocol_ == Protocol::Mptcp;
  if ((mptcp && sampleMptcp(fd, out)) || sampleTcp(fd, out, local_, remote_)) {
    if (mptcp) sampleMptcpConnection(fd, out);
    return true;
  }
  if (mptcp) {
    // Once per process, whichever of the flow threads (--threads) samples first.
    const int error = errno;
    static std::atomic<bool> said{false};
    if (!said.exchange(true, std::memory_order_relaxed)) {
      log::warning(std::string("MPTCP flows have no per-path statistics: this kernel gives no MPTCP_FULL_INFO "
                               "(Linux 6.5 and later) and no TCP_INFO for an MPTCP connection (") +
                   std::strerror(error) + ")");
    }
  }
  return false;
}

}  // namespace npm::transport
