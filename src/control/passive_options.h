// What a passive is started with (the command line's PassiveCommand): plain data, for the
// command line and the passive's parts, without the server's Asio interface (passive.h).
#pragma once

#include <boost/asio/ip/address.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sctp/socket.h"
#include "transport/sockets.h"

namespace npm::control {

namespace asio = boost::asio;

// What one passive grants its peers, in all and per host (documented in netperfmeter(1)).
struct PassiveLimits {
  static constexpr std::size_t kSessions = 256, kSessionsPerHost = 32, kSessionsPerPrefix = 64, kFlowsPerSession = 4096,
                               kPendingConnections = 1024, kPendingPerHost = 128, kPendingPerPrefix = 256;
  std::size_t sessions = kSessions;  // control connections at once
  std::size_t sessionsPerHost = kSessionsPerHost;
  // ... of one network: the addresses that share their first prefixV4 (IPv4) or prefixV6 (IPv6)
  // bits (--max-sessions-per-prefix, --session-prefix), so that one /64 is not 2^64 hosts.
  std::size_t sessionsPerPrefix = kSessionsPerPrefix;
  unsigned prefixV4 = 24, prefixV6 = 64;
  // A session without a measurement under way (one with flows, within its runtime) that has sent
  // no control message for this long may be closed to make room for anyone when a limit is
  // reached (PassiveState::admit); before that, only for a peer of a smaller network or host.
  std::chrono::seconds quietGrace{5};
  std::size_t flowsPerSession = kFlowsPerSession;
  std::size_t measurementsPerSession = 16;
  std::size_t onOffEventsPerSession = 65536;             // over all its flows' ADD_FLOWs
  std::size_t pendingConnections = kPendingConnections;  // data connections accepted, not identified yet
  std::size_t pendingPerHost = kPendingPerHost;
  std::size_t pendingPerPrefix = kPendingPerPrefix;  // of one network (prefixV4, prefixV6)
  // QUIC (quic::ServerOptions): connections at once, and the handshakes under way from which on
  // a new client must prove its address with a Retry token first (0: every client).
  std::size_t quicConnections = 1024;
  std::size_t quicRetryAbove = 64;
  std::size_t quicPerPrefix = 256;                         // QUIC connections of one network (prefixV4, prefixV6)
  std::chrono::seconds firstMessageTimeout{10};            // a control connection that says nothing
  std::chrono::seconds idleTimeout{120};                   // a session without a running measurement
  std::size_t controlQueueBytes = 4 << 20;                 // unsent control bytes before the peer counts as not reading
  std::uint64_t spoolPerSession = std::uint64_t{2} << 30;  // per-flow vectors waiting for upload (bytes)
  std::uint64_t spoolTotal = std::uint64_t{8} << 30;
  // The soft limit of open files (set when the passive starts; 0: not checked): ADD_FLOW is
  // refused while the flows and a reserve would not fit in it.
  std::size_t descriptors = 0;
  static constexpr std::size_t kReservedDescriptors = 64;
  // --path-interval: how often flows whose active asks for per-path vectors are sampled.
  std::chrono::milliseconds pathInterval{100};
};

// Which of the derived limits the command line gave.
struct GivenLimits {
  bool sessionsPerHost = false, sessionsPerPrefix = false, pendingConnections = false, pendingPerHost = false,
       pendingPerPrefix = false, quicRetryAbove = false, quicPerPrefix = false;
};

// The limits that were not given follow those that were raised: what one host may have is an
// eighth of the totals (--max-sessions, --max-pending), one network a quarter of the sessions, and the data connections
// waiting for their IDENTIFY a quarter of --max-flows; never less than the defaults. QUIC's Retry begins at a sixteenth
// of --max-quic-connections (at least 1).
PassiveLimits deriveLimits(PassiveLimits limits, const GivenLimits& given);

struct PassiveOptions {
  std::uint16_t port = 9000;
  bool controlOverSctp = true;
  bool controlOverTcp = true;
  bool controlOverMptcp = false;
  std::vector<asio::ip::address> localAddresses;    // -L (data)
  std::vector<asio::ip::address> controlAddresses;  // -l (control)
  bool v6only = false;
  std::uint32_t rcvBufferSize = 0, sndBufferSize = 0;  // -i / -o on the data listeners
  sctp::StackChoice sctpStack = sctp::StackChoice::Auto;
  std::uint16_t sctpUdpPort = sctp::kDefaultUdpEncapsulationPort;
  sctp::InitRateLimit sctpInitRate = sctp::kDefaultInitRateLimit;  // --sctp-init-rate
  std::vector<transport::AddressPrefix> allow;                     // --allow: who may use the passive (empty: everyone)
  std::optional<std::vector<std::uint8_t>> authKey;                // --auth-key-file: actives must prove it
  PassiveLimits limits;
  // --threads: network threads for the TCP and MPTCP data connections (the control
  // connections, UDP, SCTP and DCCP stay on the main one); 0 = one per core.
  unsigned threads = 0;
  // QUIC (-tls-key, -tls-cert): with both, QUIC data on UDP port BASE-1 (where the build has
  // QUIC); without them, ADD_FLOW of a QUIC flow is refused (kStatusUnsupported).
  std::string tlsKeyFile, tlsCertFile;
};

// What the passive asks of its SCTP stack: its UDP port (userland SCTP) and the INIT rate limit.
inline sctp::StackSettings sctpSettings(const PassiveOptions& o) {
  return {o.sctpUdpPort, sctp::kDefaultUdpEncapsulationPort, o.sctpInitRate};
}

}  // namespace npm::control
