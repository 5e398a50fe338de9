// Per-path transport state, sampled at an interval during a measurement: one sample per
// TCP connection, per MPTCP subflow, per SCTP peer address and per QUIC flow (its connection's
// one path with the flow's stream counters), and for MPTCP and SCTP one of
// the whole connection or association (id kConnection). What a stack cannot tell is NaN
// (written as NA). Units: bytes, milliseconds, bit/s.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace npm::transport {

struct PathSample {
  static constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  // The MPTCP connection (mptcp_info) or SCTP association (SCTP_STATUS) as a whole.
  static constexpr std::int64_t kConnection = -1;
  // 0 for TCP; the kernel's subflow id (MPTCP); the peer address's index (SCTP); kConnection.
  std::int64_t id = 0;
  std::string local = "-", remote = "-";  // address:port ("-" if not per path; SCTP association: the primary)
  std::string state = "-";
  double cwnd = kNone, ssthresh = kNone;  // bytes
  double srttMs = kNone, rttVarMs = kNone, rtoMs = kNone;
  double mtu = kNone;
  double bytesSent = kNone, bytesAcked = kNone, bytesReceived = kNone;  // cumulative
  double retransmissions = kNone, lost = kNone;  // segments (TCP), retransmissions (MPTCP connection); lost: packets
                                                 // with the flow's stream data (QUIC)
  double unacked = kNone;  // segments (TCP), DATA chunks (SCTP association), bytes in flight (QUIC)
  double deliveryRate = kNone, pacingRate = kNone;  // bit/s
  double rwnd = kNone;                              // bytes: the peer's receiver window (SCTP association)
  double pending = kNone;                           // DATA chunks not yet sent (SCTP association)
  // Of the retransmissions: by fast retransmit (or after a reported drop) and after a
  // retransmission timeout, separately (DATA chunks; SCTP with the bundled stack).
  double fastRetransmissions = kNone, timerRetransmissions = kNone;
  // ... and those that chunk rescheduling sent to this path (SCTP, the bundled stack's patch 0006).
  double rescheduled = kNone;
  // What two mechanisms did on this path (SCTP, the bundled stack's patch 0007): DATA chunks sent
  // here that a packet-drop report marked for retransmission, and acknowledgements of chunks
  // moved here that smart fast retransmission kept out of the fast-retransmit decision.
  double dropReported = kNone, smartFrIgnored = kNone;
  bool connection() const { return id == kConnection; }
};

// The samples of a kernel TCP or MPTCP socket (TCP_INFO; MPTCP_FULL_INFO per subflow, or
// TCP_INFO of the connection where the kernel has no MPTCP_FULL_INFO or MPTCP fell back to
// TCP). Returns false (and adds nothing) if the kernel tells nothing.
bool sampleSocketPaths(int fd, std::vector<PathSample>& out);

// The same, for the samples of one socket over its life: what does not change between them
// (whether it is MPTCP, a TCP connection's addresses) is asked of the kernel once, so that a
// sample of a TCP flow costs one system call instead of four.
class SocketPathSampler {
public:
  bool sample(int fd, std::vector<PathSample>& out);

private:
  enum class Protocol { Unknown, Tcp, Mptcp };
  Protocol protocol_ = Protocol::Unknown;
  std::string local_, remote_;
};

// "10.0.0.1:80", "[fe80::1]:80".
std::string sockaddrName(const void* sockaddr);

}  // namespace npm::transport
