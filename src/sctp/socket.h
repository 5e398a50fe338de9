// SCTP behind one interface with two backends: the kernel's (lksctp, one-to-one style
// sockets) and userland usrsctp (UDP encapsulation, RFC 6951). The backends live in
// separate translation units because <netinet/sctp.h> and <usrsctp.h> cannot be included
// together; this header includes neither.
//
// All calls are non-blocking and made on the Asio thread. Readiness comes from the
// kernel file descriptor (kernel) or from usrsctp's upcall, posted to the io_context
// (userland); see asyncWait().
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "sctp/init_filter.h"
#include "transport/path_sample.h"

namespace npm::sctp {

namespace asio = boost::asio;

enum class Stack { Kernel, Userland };
const char* stackName(Stack stack);  // "kernel", "userland"

// Which stack to use: --sctp-stack=auto|kernel|userland.
enum class StackChoice { Auto, Kernel, Userland };

// CMT-SCTP and the knobs that decide whether it works over dissimilar paths.
struct Tuning {
  std::uint8_t cmt = 0;              // SCTP_CMT_ON_OFF: 0 off, 1 CMT, 2 CMT/RPv1, 3 CMT/RPv2, 4 like MPTCP
  std::uint8_t ccModule = 0;         // 0 RFC 2581, 1 HSTCP, 2 H-TCP, 3 RTCC
  std::uint8_t bufferSplitting = 0;  // bit 0 sender, bit 1 receiver, bit 2 on buffered bytes
  bool nrSack = false;
  bool dac = false;            // delayed ACK for CMT
  bool smartFr = false;        // smart fast retransmission (the bundled stack's patch 0005)
  bool reschedule = false;     // chunk rescheduling (the bundled stack's patch 0006)
  bool pktDrop = false;        // packet-drop reporting (negotiated: in force where both offer it)
  std::uint32_t rtoMinMs = 0;  // 0 = the stack's default
  bool operator==(const Tuning&) const = default;
  bool isDefault() const { return *this == Tuning{}; }
  // Everything but RTO.min needs the userland stack (Linux kernel SCTP has no CMT).
  bool needsUserland() const {
    return cmt != 0 || ccModule != 0 || bufferSplitting != 0 || nrSack || dac || smartFr || reschedule || pktDrop;
  }
};
const char* ccModuleName(std::uint8_t module);  // "rfc2581", "hstcp", "htcp", "rtcc"

struct SocketOptions {
  std::uint16_t streams = 1;  // outbound streams requested, inbound streams accepted
  // How soon a silent peer counts as gone: a heartbeat every `heartbeatMs` and the
  // association lost after `maxRetransmissions` unanswered ones (0 = the stack's defaults,
  // 30 s and 10, i.e. minutes).
  // With a heartbeat, the retransmission timeout is capped at half of it, so that the misses
  // come at a steady pace instead of doubling their wait each time.
  std::uint32_t heartbeatMs = 0;
  std::uint16_t maxRetransmissions = 0;
  std::uint32_t rcvBufferSize = 0;  // 0 = default
  std::uint32_t sndBufferSize = 0;
  bool noDelay = true;
  // NR-SACK offered in INIT / INIT-ACK (negotiated when both ends offer it); only before the
  // association exists, and only the userland stack has it. nullopt: the stack's default (off).
  std::optional<bool> nrSack;
  // Packet-drop reporting (the receiver reports packets it dropped for a bad checksum), offered
  // in INIT / INIT-ACK the same way; userland stack only.
  std::optional<bool> pktDrop;
  std::optional<bool> v6only;

  // RTO.max (and the initial RTO) that goes with the heartbeat: half of its interval, at least
  // 1 s. The backends cannot share the option structs (lksctp's and usrsctp's headers both
  // define them), so they share this rule.
  std::uint32_t livenessRtoMaxMs() const { return std::max<std::uint32_t>(heartbeatMs / 2, 1000); }
};

// PR-SCTP policies as in the reference: none, TTL (ms), RTX (retransmissions).
enum class PrPolicy : std::uint8_t { None = 0, Ttl = 1, Rtx = 3 };

struct SendInfo {
  std::uint16_t stream = 0;
  std::uint32_t ppid = 0;  // host order
  bool unordered = false;
  PrPolicy prPolicy = PrPolicy::None;
  std::uint32_t prValue = 0;
};

struct ReceiveInfo {
  std::uint16_t stream = 0;
  std::uint32_t ppid = 0;  // host order
  bool notification = false;
  bool endOfRecord = true;
};

// What an SCTP notification says about the association.
enum class AssociationEvent { CommUp, CommLost, Restart, ShutdownComplete, CantStart, Shutdown, Other };

class Socket {
public:
  virtual ~Socket() = default;
  virtual Stack stack() const = 0;

  // Options and CMT tuning; throw transport::TransportError naming the option. tune() may be
  // called again on the same socket (the passive: once per stream of the association).
  virtual void configure(const SocketOptions& options) = 0;
  virtual void tune(const Tuning& tuning) = 0;
  // SO_RCVBUF / SO_SNDBUF of an association that exists (0 = leave as it is): the receiver
  // advertises the new receive window from its next SACK on.
  virtual void setBufferSizes(std::uint32_t rcvBufferSize, std::uint32_t sndBufferSize) = 0;
  // Its users are done with the association (it may still be shutting down): it no longer
  // holds the stack's process-wide settings (see ProcessWide), which close() also ends.
  virtual void releaseProcessWide() = 0;
  // Whether the association negotiated NR-SACK (nullopt: no association yet, or a stack
  // without NR-SACK).
  virtual std::optional<bool> nrSackNegotiated() = 0;
  // The CMT settings the stack holds for the association (before it exists: for the one it
  // will create), read back from the stack; nullopt where it has none (the kernel's).
  virtual std::optional<Tuning> tuningInForce() = 0;
  virtual void bind(const std::vector<asio::ip::address>& addresses, std::uint16_t port) = 0;
  virtual void listen() = 0;
  // An accepted association, or nullptr when none is waiting.
  virtual std::unique_ptr<Socket> accept() = 0;
  // Starts connecting to all addresses (connectx); completion shows as writability,
  // then connectError() tells the result.
  virtual void connect(const std::vector<asio::ip::address>& addresses, std::uint16_t port) = 0;
  virtual int connectError() = 0;

  // -1 with errno set (EAGAIN when the send buffer is full).
  virtual long send(const std::uint8_t* data, std::size_t length, const SendInfo& info) = 0;
  virtual long receive(std::uint8_t* buffer, std::size_t length, ReceiveInfo& info) = 0;
  // Decodes a notification read by receive().
  virtual AssociationEvent notification(const std::uint8_t* data, std::size_t length) = 0;

  // Calls `handler` once the socket is readable (or writable), or has an error.
  virtual void asyncWait(bool writable, std::function<void()> handler) = 0;

  // DATA chunks not yet acknowledged or not yet sent (SCTP_STATUS), -1 if unknown.
  virtual long unsentChunks() = 0;

  virtual std::vector<asio::ip::address> peerAddresses() = 0;
  // One sample per peer address (SCTP_GET_PEER_ADDR_INFO): state, cwnd, srtt, rto, mtu.
  virtual void samplePaths(std::vector<transport::PathSample>& out) = 0;
  virtual std::vector<asio::ip::address> localAddresses() = 0;
  virtual std::uint16_t localPort() = 0;
  // Starts the graceful end (SHUTDOWN once everything sent is acknowledged); the end is reported
  // as a notification (SHUTDOWN_COMP) or by receive() returning 0.
  virtual void shutdownWrite() = 0;
  virtual void close() = 0;
};

// Stack-wide settings (usrsctp: once per process, before the first socket).
struct StackSettings {
  std::uint16_t udpEncapsulationPort = 0;  // local port; 0 = a free one
  std::uint16_t remoteUdpEncapsulationPort = 9899;
  // The passive's limit on INITs to the encapsulation port (init_filter.h); nullopt: none and
  // no word about it (the active, which listens for no associations and answers no INIT).
  std::optional<InitRateLimit> initRateLimit;
};
constexpr std::uint16_t kDefaultUdpEncapsulationPort = 9899;

// Whether this kernel has SCTP (else why not); the userland stack is always there.
Result<void> kernelAvailable();
// The stack for a choice; throws transport::TransportError if it is not available.
Stack resolve(StackChoice choice, bool needsCmt);

// Opens a one-to-one style SCTP socket. Throws transport::TransportError.
std::unique_ptr<Socket> open(Stack stack, asio::io_context& io, int family, const StackSettings& settings);

// The usrsctp stack: its local UDP encapsulation port once started (0 = not started).
std::uint16_t userlandEncapsulationPort();

// The usrsctp linked in: "bundled libusrsctp 0.9.5.0-2 (Debian source) with patches 0001" or
// "system libusrsctp (/usr/lib/...)".
const char* userlandStackDescription();
// Whether it keeps buffer splitting and DAC per association (the bundled stack's patch 0001).
bool userlandPerAssociation();
// What the linked usrsctp cannot do of `tuning`, as one line ("bufsplit-on=buffered needs the
// bundled SCTP stack ..."): a system build refuses it instead of ignoring it.
Result<void> userlandSupports(const Tuning& tuning);

// The system's usrsctp 0.9.5 has buffer splitting and DAC only as process-wide sysctls, read
// whenever a CMT association sends or acknowledges (associations without CMT never read them).
// So there, the CMT associations of one process must agree on them: the first one sets them,
// and while it lives, one that needs other values is refused (tune() throws), never silently
// overruled. The bundled stack keeps them per association, and none of this applies.
struct ProcessWide {
  std::uint8_t bufferSplitting = 0;
  bool dac = false;
  bool operator==(const ProcessWide&) const = default;
};
// What a tuning needs process-wide; nullopt when it needs nothing (no CMT, or the bundled stack).
std::optional<ProcessWide> processWideOf(const Tuning& tuning);
std::string describe(const ProcessWide& settings);  // "bufsplit=both dac=off"
std::string describe(const Tuning& tuning);         // "cmt=cmt cc=rfc2581 bufsplit=both dac=off nrsack=on rtomin=1000"
// Whether a CMT association with `tuning` can run beside this process's CMT associations.
Result<void> processWideCompatible(const Tuning& tuning);

}  // namespace npm::sctp
