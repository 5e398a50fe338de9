// NPMP-CONTROL and NPMP-DATA messages: types, byte-exact encoding and validated decoding.
//
// Layouts follow the reference NetPerfMeter wire format: a 4-byte TLV header
// (Type u8, Flags u8, Length u16 BE incl. header), integers big-endian except
// ADD_FLOW.Protocol (u16 little-endian), doubles as IEEE-754 bit patterns sent BE.
// No I/O here: encoders append to a byte vector, decoders take one complete message.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/result.h"

namespace npm::npmp {

using Bytes = std::vector<std::uint8_t>;

enum class Type : std::uint8_t {
  Acknowledge = 1,
  AddFlow = 2,
  RemoveFlow = 3,
  IdentifyFlow = 4,
  Data = 5,
  Start = 6,
  Stop = 7,
  Results = 8,
  // This project's optional authentication of NPMP-CONTROL (never sent without a key):
  AuthHello = 9,       // active → passive: its nonce
  AuthChallenge = 10,  // passive → active: its nonce and its proof of the key
  AuthResponse = 11,   // active → passive: the active's proof of the key
};
const char* typeName(std::uint8_t type);

// Transport protocol numbers as carried in ADD_FLOW.
enum class Protocol : std::uint16_t {
  TCP = 6,
  UDP = 17,
  DCCP = 33,
  SCTP = 132,
  QUIC = 261,
  MPTCP = 262,
};
const char* protocolName(Protocol protocol);  // "TCP", "MPTCP", ...

constexpr std::uint64_t kIdentifyMagic = 0x4BCDF3AA303C6774ULL;
constexpr std::uint32_t kPpidControl = 36, kPpidData = 37;
constexpr std::uint32_t kPpidControlLegacy = 0x29097605, kPpidDataLegacy = 0x29097606;
constexpr std::uint32_t kDccpServiceCode = 0x6E706D70;  // "npmp"

constexpr std::size_t kHeaderSize = 4;
constexpr std::size_t kAcknowledgeSize = 24;
constexpr std::size_t kAddFlowBaseSize = 194;
constexpr std::size_t kOnOffEventSize = 36;
constexpr std::size_t kRemoveFlowSize = 18;
constexpr std::size_t kIdentifyFlowSize = 26;
constexpr std::size_t kDataHeaderSize = 48;
constexpr std::size_t kStartStopSize = 16;
constexpr std::size_t kResultsMaxData = 1400;
constexpr std::size_t kMaxMessageSize = 65535;
constexpr std::size_t kDescriptionSize = 32;
constexpr std::size_t kCongestionControlSize = 16;
constexpr std::size_t kMaxOnOffEvents = (kMaxMessageSize - kAddFlowBaseSize) / kOnOffEventSize;
constexpr std::size_t kAuthNonceSize = 32, kAuthMacSize = 32;
constexpr std::size_t kAuthHelloSize = kHeaderSize + kAuthNonceSize;                     // 36
constexpr std::size_t kAuthChallengeSize = kHeaderSize + kAuthNonceSize + kAuthMacSize;  // 68
constexpr std::size_t kAuthResponseSize = kHeaderSize + kAuthMacSize;                    // 36

constexpr std::uint32_t kStatusOk = 0, kStatusError = 1;
// This project's passive refuses a host that its --allow list does not name (or that fails
// authentication) with this status; the reference's active treats it as any error.
constexpr std::uint32_t kStatusNotAllowed = 2;
// ... and an active that does not authenticate itself to a passive that requires it.
constexpr std::uint32_t kStatusAuthenticationRequired = 3;
// ... and an ADD_FLOW for a transport it cannot serve (e.g. DCCP on a kernel without it).
constexpr std::uint32_t kStatusUnsupported = 4;
// ... and a REMOVE_FLOW whose IDENTIFY asked for per-path statistics (kIdentifyPathVectors):
// OK, and the flow's per-path vector follows its per-flow vector in RESULTS. The reference's
// passive never sends it (it does not know the flag), so an active knows what to expect.
constexpr std::uint32_t kStatusOkPathVectorFollows = 5;
// ... and an ADD_FLOW beyond the flows it grants one control connection (its --max-flows).
constexpr std::uint32_t kStatusTooManyFlows = 6;
// ... and an ADD_FLOW that its limit of open files could not hold (RLIMIT_NOFILE).
constexpr std::uint32_t kStatusNoDescriptors = 7;
// ... and an SCTP flow whose CMT association needs process-wide settings of the userland stack
// (buffer splitting, DAC) other than those of a CMT association it serves already.
constexpr std::uint32_t kStatusProcessWideConflict = 8;
// ... and the first message of a control connection that it does not admit: it has as many
// sessions open as it admits in all (--max-sessions), from this host (--max-sessions-per-host)
// or from this network (--max-sessions-per-prefix), each of them making progress.
constexpr std::uint32_t kStatusBusy = 9, kStatusBusyHost = 10, kStatusBusyPrefix = 11;

// Flag bits.
constexpr std::uint8_t kAddFlowDebug = 0x01, kAddFlowNoDelay = 0x02, kAddFlowRepeatOnOff = 0x04;
// CMT-SCTP tuning of this implementation, in ADD_FLOW bits the reference leaves 0 (so a
// reference passive ignores them): flags bit 3 NR-SACK, bits 4-5 buffer splitting (bit 4
// sender, bit 5 receiver), bits 6-7 SCTP congestion control module (0 RFC 2581, 1 HSTCP,
// 2 H-TCP, 3 RTCC); the obsolete NDiffPorts field (offset 142) carries RTO.min in ms
// (bits 0-14) and DAC (bit 15).
constexpr std::uint8_t kAddFlowNrSack = 0x08;
constexpr unsigned kAddFlowBufferSplitShift = 4, kAddFlowSctpCcShift = 6;
constexpr std::uint16_t kSctpDacBit = 0x8000, kSctpRtoMinMask = 0x7FFF;
// AddFlow::cmt of an MPTCP flow that asks for the reference's "like MPTCP" (the only CMT value
// a flow of another transport than SCTP may carry).
constexpr std::uint8_t kCmtLikeMptcp = 4;
// ADD_FLOW's SctpMechanisms (offset 180; the reference's Scheduler, obsolete): bufsplit-on=buffered,
// smartfr=on, pktdrop=on, reschedule=on.
constexpr std::uint32_t kSctpMechanismBufferSplitOnBuffered = 0x00000001;
constexpr std::uint32_t kSctpMechanismSmartFastRetransmit = 0x00000002;
constexpr std::uint32_t kSctpMechanismPacketDropReporting = 0x00000004;  // pktdrop=on
constexpr std::uint32_t kSctpMechanismChunkRescheduling = 0x00000008;    // reschedule=on
constexpr std::uint8_t kIdentifyCompressVectors = 0x01, kIdentifyNoVectors = 0x02;
// This implementation's: sample the transport's per-path state and upload it (see above).
constexpr std::uint8_t kIdentifyPathVectors = 0x04;
// This implementation's, in bits the reference leaves 0: gzip (at a fast level) instead of
// bzip2 for the result files whose names end in ".gz" -- the flow's vectors (IDENTIFY), the
// measurement vector and the scalars (START). A reference passive ignores them and uploads
// those files uncompressed; the active compresses them as they arrive then.
constexpr std::uint8_t kIdentifyGzipVectors = 0x08;
constexpr std::uint8_t kDataFrameBegin = 0x01, kDataFrameEnd = 0x02;
constexpr std::uint8_t kStartCompressVectors = 0x01, kStartCompressScalars = 0x02, kStartNoVectors = 0x04,
                       kStartNoScalars = 0x08;
constexpr std::uint8_t kStartGzipVectors = 0x10, kStartGzipScalars = 0x20;  // this implementation's (above)
constexpr std::uint8_t kResultsEof = 0x01;
constexpr std::uint8_t kOnOffRelativeTime = 0x01;

// RetransmissionTrials encoding (ADD_FLOW offset 60).
constexpr std::uint32_t kRetransmitTimeFlag = 0x80000000U;
constexpr std::uint32_t kRetransmitUnlimited = 0xFFFFFFFFU;

// A random-number generator description: distribution id and up to four parameters.
struct RandomSpec {
  std::uint8_t rng = 0;  // 0 const, 1 uniform, 2 exp, 3 pareto, 4 normal, 5 truncnormal
  std::array<double, 4> values{};
  bool operator==(const RandomSpec&) const = default;
};

struct OnOffEvent {
  RandomSpec spec;
  bool relative = false;
  bool operator==(const OnOffEvent&) const = default;
};

struct Acknowledge {
  std::uint32_t flowId = 0;
  std::uint64_t measurementId = 0;
  std::uint16_t streamId = 0;
  std::uint32_t status = kStatusOk;
  bool operator==(const Acknowledge&) const = default;
};

struct AddFlow {
  std::uint8_t flags = 0;
  std::uint32_t flowId = 0;
  std::uint64_t measurementId = 0;
  std::uint16_t streamId = 0;
  Protocol protocol = Protocol::TCP;
  std::string description;  // at most 32 bytes on the wire
  std::uint32_t orderedMode = 0xFFFFFFFFU;
  std::uint32_t reliableMode = 0xFFFFFFFFU;
  std::uint32_t retransmissionTrials = kRetransmitUnlimited;
  RandomSpec frameRate;  // the passive's outbound (= active's inbound) traffic
  RandomSpec frameSize;
  std::uint32_t rcvBufferSize = 0;
  std::uint32_t sndBufferSize = 0;
  std::uint16_t maxMsgSize = 16000;
  std::uint8_t cmt = 0;
  std::uint8_t ccid = 0;
  std::uint16_t sctpRtoMinAndDac = 0;  // NDiffPorts on the wire; see kSctpDacBit
  std::string congestionControl;       // at most 16 bytes on the wire; empty = "default"
  // Not in the reference (the first 4 bytes of its obsolete Scheduler field, which it ignores):
  // the measurement's runtime in ms. The passive's flow sends no frame due after its START +
  // this, on its own timeline, so a rate-driven flow sends exactly what its spec says whenever
  // STOP arrives; 0 = until STOP (no runtime, or a reference active).
  std::uint32_t runtimeMs = 0;
  // Not in the reference either (the next 4 bytes of Scheduler): the CMT-SCTP mechanisms of the
  // bundled stack that the flow asks for, kSctpMechanism* bits; a reference passive ignores them.
  std::uint32_t sctpMechanisms = 0;
  // Not in the reference either (the last 8 bytes of Scheduler): the run's seed (-seed), from
  // which the passive derives the seeds of its random choices for this flow; 0 = none (a
  // reference active): the passive draws from the system's entropy.
  std::uint64_t seed = 0;
  std::vector<OnOffEvent> onOffEvents;
  bool operator==(const AddFlow&) const = default;
};

struct RemoveFlow {
  std::uint32_t flowId = 0;
  std::uint64_t measurementId = 0;
  std::uint16_t streamId = 0;
  bool operator==(const RemoveFlow&) const = default;
};

struct IdentifyFlow {
  std::uint8_t flags = 0;
  std::uint32_t flowId = 0;
  std::uint64_t measurementId = 0;
  std::uint16_t streamId = 0;
  bool operator==(const IdentifyFlow&) const = default;
};

struct DataHeader {
  std::uint8_t flags = 0;
  std::uint16_t length = kDataHeaderSize;  // whole message
  std::uint32_t flowId = 0;
  std::uint64_t measurementId = 0;
  std::uint16_t streamId = 0;
  std::uint32_t frameId = 0;
  std::uint64_t seqNumber = 0;
  std::uint64_t byteSeqNumber = 0;
  std::uint64_t timeStamp = 0;  // sender's CLOCK_REALTIME in microseconds
  bool operator==(const DataHeader&) const = default;
};

struct Start {
  std::uint8_t flags = 0;
  std::uint64_t measurementId = 0;
  // Not in the reference (its padding, always 0 there): the warm-up in milliseconds, the
  // first part of the measurement that the scalars leave out (--warmup); 0 = none.
  std::uint32_t warmupMs = 0;
  bool operator==(const Start&) const = default;
};

struct Stop {
  std::uint64_t measurementId = 0;
  bool operator==(const Stop&) const = default;
};

struct Results {
  std::uint8_t flags = 0;
  std::span<const std::uint8_t> data;  // points into the decoded buffer
  bool eof() const { return (flags & kResultsEof) != 0; }
};

using AuthBlock = std::array<std::uint8_t, 32>;
struct AuthHello {
  AuthBlock nonce{};
  bool operator==(const AuthHello&) const = default;
};
struct AuthChallenge {
  AuthBlock nonce{};
  AuthBlock mac{};
  bool operator==(const AuthChallenge&) const = default;
};
struct AuthResponse {
  AuthBlock mac{};
  bool operator==(const AuthResponse&) const = default;
};

using Message = std::variant<Acknowledge, AddFlow, RemoveFlow, IdentifyFlow, DataHeader, Start, Stop, Results,
                             AuthHello, AuthChallenge, AuthResponse>;

// Encoders append one complete message to `out`.
void encode(const Acknowledge& m, Bytes& out);
void encode(const AddFlow& m, Bytes& out);
void encode(const RemoveFlow& m, Bytes& out);
void encode(const IdentifyFlow& m, Bytes& out);
void encode(const Start& m, Bytes& out);
void encode(const Stop& m, Bytes& out);
void encode(const Results& m, Bytes& out);
void encode(const AuthHello& m, Bytes& out);
void encode(const AuthChallenge& m, Bytes& out);
void encode(const AuthResponse& m, Bytes& out);
// DATA header only (48 bytes, Length = h.length); the payload is written separately.
void encodeDataHeader(const DataHeader& h, std::uint8_t* out48);

// Payload pattern of DATA messages: active→passive 30,31,…,127,30,…; passive→active 127,126,…,30,….
void fillPayload(std::uint8_t* out, std::size_t length, bool fromActive);

// Result of decoding: the message, or a one-line reason why it is malformed.
using DecodeResult = Result<Message>;

// Reads the header of a message; needs at least 4 bytes. The declared total length, or why
// it cannot be one (below the header size).
Result<std::size_t> declaredLength(std::span<const std::uint8_t> buffer);

// What a connection may carry, to reject a bad header as soon as its 4 bytes arrive
// instead of waiting for a length that garbage claims.
enum class MessageSet {
  ControlToPassive,  // ADD_FLOW, REMOVE_FLOW, START, STOP (and AUTH_HELLO, AUTH_RESPONSE)
  ControlToActive,   // ACKNOWLEDGE, RESULTS (and AUTH_CHALLENGE)
  DataFirst,         // the first message of a data connection: IDENTIFY_FLOW
  Data,              // afterwards: DATA
};
// Whether a message with this 4-byte header may follow on the channel (else the reason).
Result<void> checkHeader(const std::uint8_t* header, MessageSet allowed);

// Decodes exactly one complete message (buffer.size() must equal its Length field).
DecodeResult decode(std::span<const std::uint8_t> message);

// A DATA message's header, as decode() gives it but without its variant (the receive path
// decodes every message); or what the message is instead.
Result<DataHeader> decodeData(std::span<const std::uint8_t> message);

}  // namespace npm::npmp
