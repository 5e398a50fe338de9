#include "sctp/flow_settings.h"

#include <cmath>

namespace npm::sctp {

std::uint32_t fractionToWire(double fraction) {
  return static_cast<std::uint32_t>(std::llround(fraction * 4294967295.0));
}

double wireToFraction(std::uint32_t value) { return static_cast<double>(value) / 4294967295.0; }

std::uint8_t tuningFlags(const Tuning& tuning) {
  return static_cast<std::uint8_t>((tuning.nrSack ? npmp::kAddFlowNrSack : 0) |
                                   (tuning.bufferSplitting & 3) << npmp::kAddFlowBufferSplitShift |
                                   (tuning.ccModule & 3) << npmp::kAddFlowSctpCcShift);
}

std::uint16_t rtoMinAndDac(const Tuning& tuning) {
  return static_cast<std::uint16_t>((tuning.rtoMinMs & npmp::kSctpRtoMinMask) | (tuning.dac ? npmp::kSctpDacBit : 0));
}

std::uint32_t mechanisms(const Tuning& tuning) {
  return ((tuning.bufferSplitting & flowspec::kBufferSplitOnBuffered) ? npmp::kSctpMechanismBufferSplitOnBuffered : 0) |
         (tuning.smartFr ? npmp::kSctpMechanismSmartFastRetransmit : 0) |
         (tuning.reschedule ? npmp::kSctpMechanismChunkRescheduling : 0) |
         (tuning.pktDrop ? npmp::kSctpMechanismPacketDropReporting : 0);
}

Tuning tuningFromWire(std::uint8_t cmt, std::uint8_t flags, std::uint16_t rtoMinAndDac, std::uint32_t mechanisms) {
  Tuning t;
  t.cmt = cmt;
  t.nrSack = (flags & npmp::kAddFlowNrSack) != 0;
  t.bufferSplitting = static_cast<std::uint8_t>(
      ((flags >> npmp::kAddFlowBufferSplitShift) & 3) |
      ((mechanisms & npmp::kSctpMechanismBufferSplitOnBuffered) ? flowspec::kBufferSplitOnBuffered : 0));
  t.ccModule = (flags >> npmp::kAddFlowSctpCcShift) & 3;
  t.rtoMinMs = rtoMinAndDac & npmp::kSctpRtoMinMask;
  t.dac = (rtoMinAndDac & npmp::kSctpDacBit) != 0;
  t.smartFr = (mechanisms & npmp::kSctpMechanismSmartFastRetransmit) != 0;
  t.reschedule = (mechanisms & npmp::kSctpMechanismChunkRescheduling) != 0;
  t.pktDrop = (mechanisms & npmp::kSctpMechanismPacketDropReporting) != 0;
  return t;
}

StreamPolicy policyOf(const npmp::AddFlow& m, flowspec::Side side) {
  StreamPolicy policy =
      streamPolicy(wireToFraction(m.orderedMode), wireToFraction(m.reliableMode), m.retransmissionTrials);
  policy.seed = flowspec::flowSeed(m.seed, side, m.flowId, m.streamId, flowspec::SeedUse::Messages);
  return policy;
}

}  // namespace npm::sctp
