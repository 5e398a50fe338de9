// FLOWSPEC: the description of one flow on the command line, e.g.
//   const10:const1400:exp5:uniform100,200:id=3:description=Video:onoff=1,+exp2,repeat
// Four traffic entries (outbound rate, outbound size, inbound rate, inbound size; rates in
// frames/s, sizes in bytes; a missing entry is const0) followed by options.
// Parsing is pure and reports the first bad part as one line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "npmp/messages.h"

namespace npm::flowspec {

// One direction of traffic.
struct Traffic {
  npmp::RandomSpec rate;  // frames/s; const 0 = saturated
  npmp::RandomSpec size;  // bytes per frame
  // A direction sends nothing when its size is const 0.
  bool enabled() const;
  bool saturated() const;
};

struct FlowSpec {
  npmp::Protocol protocol = npmp::Protocol::TCP;
  std::optional<std::uint32_t> flowId;  // id=; otherwise assigned by assignFlowIds()
  std::string description;              // description=; default "Flow <id>"
  Traffic outbound, inbound;
  std::uint16_t maxMsgSize = 16000;
  std::uint32_t defragTimeoutMs = 5000;
  double ordered = 1.0;
  double reliable = 1.0;
  std::uint32_t retransmissionTrials = npmp::kRetransmitUnlimited;
  std::uint32_t rcvBufferSize = 0;  // 0 = leave the kernel's (autotuning) default
  std::uint32_t sndBufferSize = 0;
  std::uint8_t cmt = 0;
  // CMT-SCTP tuning (SCTP flows): sctpcc=, bufsplit=, nrsack=, rtomin=, dac=
  std::uint8_t sctpCc = 0;           // 0 rfc2581, 1 hstcp, 2 htcp, 3 rtcc
  std::uint8_t bufferSplitting = 0;  // bit 0 sender, bit 1 receiver, bit 2 on buffered bytes (bufsplit-on=)
  bool nrSack = false;
  std::uint16_t rtoMinMs = 0;  // 0 = default
  bool dac = false;
  bool smartFr = false;     // smartfr=: smart fast retransmission (seed 001, IV-D); the bundled stack's patch 0005
  bool reschedule = false;  // reschedule=: chunk rescheduling (seed 001, IV-C); the bundled stack's patch 0006
  bool pktDrop = false;     // pktdrop=: packet-drop reporting, negotiated like NR-SACK (userland stack)
  std::uint8_t ccid = 0;
  bool errorOnAbort = true;
  bool noDelay = false;
  bool debug = false;
  bool v6only = false;
  std::string congestionControl;  // empty = default
  // rate=, in_rate=: a direction's bit rate (bit/s at the NPMP level, as the Received Bit Rate
  // counts), turned into its frame rate from the mean frame size when the FLOWSPEC is parsed.
  std::optional<double> outBitRate, inBitRate;
  // transfer=, frames=: a fixed-size transfer, the active's outbound direction only (ADD_FLOW
  // has no field for it, so a passive cannot be told): the flow stops sending once it has sent
  // this many bytes (as the scalars count them: DATA messages with their headers) or frames.
  // 0 = no limit.
  std::uint64_t transferBytes = 0, transferFrames = 0;
  bool fixedSize() const { return transferBytes != 0 || transferFrames != 0; }
  // tos=, dscp=: the IP TOS / IPv6 traffic class byte of the active's data socket (DSCP << 2;
  // the ECN bits stay the kernel's). ADD_FLOW has no field for it either: the passive's
  // direction keeps the passive's default.
  std::optional<std::uint8_t> tos;
  std::vector<npmp::OnOffEvent> onOff;
  bool repeatOnOff = false;
  std::string text;  // the spec as given, for messages
  // SCTP: which -sctp option (association) the flow belongs to, and its stream there.
  std::uint32_t association = 0;
  std::uint16_t streamId = 0;
  // Whether messages of this flow may be abandoned (PR-SCTP).
  bool partiallyReliable() const { return reliable < 1.0 || retransmissionTrials != npmp::kRetransmitUnlimited; }
};

// Parses one FLOWSPEC for the given protocol; the error is one line naming the bad part.
Result<FlowSpec> parse(std::string_view text, npmp::Protocol protocol);

// What the numbers of a distribution are, for their units and ranges: frame rates in frames/s
// (k, M, G: 10^3, 10^6, 10^9; at most kMaxFrameRate), frame sizes in bytes (k/K, M, G: 2^10,
// 2^20, 2^30, as iperf3's -l; whole bytes, at most kMaxFrameSize), times in seconds (no unit;
// at most kMaxSeconds). A number is decimal (no hex), finite, with the unit right after it.
enum class Quantity { Plain, FrameRate, FrameSize, Seconds };
constexpr double kMaxFrameRate = 1e9;
constexpr double kMaxFrameSize = 4294967295.0;  // 4 GiB - 1: a frame's bytes fit in 32 bits
// ADD_FLOW carries the runtime in milliseconds in 32 bits: 49.7 days; on/off times the same.
constexpr double kMaxSeconds = 4294967.295;
// transfer=: at least one DATA message header (48 bytes), at most 2^53 - 1 bytes (exact in
// every JSON reader); frames=: 1 to 2^53 - 1.
constexpr std::uint64_t kMinTransferBytes = npmp::kDataHeaderSize;
constexpr std::uint64_t kMaxTransfer = (std::uint64_t{1} << 53) - 1;

// Parses one distribution ("const5", "5", "uniform1,2", "exp0.5", "const1k", ...).
Result<npmp::RandomSpec> parseDistribution(std::string_view text, Quantity quantity = Quantity::Plain);

// Assigns flow IDs in command-line order: id= wins, otherwise the previous ID + 1 (first 0),
// and fills default descriptions. Fails on a duplicate ID.
Result<void> assignFlowIds(std::vector<FlowSpec>& flows);

// The CMT mode names of the reference: off, cmt/normal, cmtrpv1/rp, cmtrpv2, mptcp/like-mptcp/mptcp-like, or 0–255;
// and this implementation's wprsctp (W-PR-SCTP, seed 003; the bundled stack's patch 0008), value 5.
std::optional<std::uint8_t> parseCmt(std::string_view text);
const char* cmtName(std::uint8_t cmt);
const char* bufferSplittingName(std::uint8_t value);  // none, sender, receiver, both (bits 0-1)
constexpr std::uint8_t kCmtLikeMptcp = npmp::kCmtLikeMptcp;
constexpr std::uint8_t kCmtWprSctp = 5;
// bufsplit-on=buffered: a path's share bounds the bytes it holds in the buffers, outstanding or
// not (seed 001, section IV-B), instead of its outstanding bytes; the bundled stack's patch 0004.
constexpr std::uint8_t kBufferSplitOnBuffered = 0x04;

}  // namespace npm::flowspec
