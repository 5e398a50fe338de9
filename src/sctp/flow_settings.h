// A flow's SCTP settings on the wire: the CMT-SCTP tuning in ADD_FLOW's flag bits 3–7, its
// obsolete NDiffPorts field (RTO.min, DAC) and SctpMechanisms, and the per-message delivery
// policy from OrderedMode, ReliableMode and RetransmissionTrials. Both sides read a flow's
// settings from its ADD_FLOW with these (the active from the one it sends: control/flow_mapping).
// Pure (no sockets); the round trip over every option is unit-tested (test_flow_mapping).
#pragma once

#include <cstdint>

#include "flowspec/flowspec.h"
#include "flowspec/random.h"
#include "npmp/messages.h"
#include "sctp/association.h"
#include "sctp/socket.h"

namespace npm::sctp {

std::uint8_t tuningFlags(const Tuning& tuning);    // ADD_FLOW flag bits 3–7
std::uint16_t rtoMinAndDac(const Tuning& tuning);  // ADD_FLOW NDiffPorts
std::uint32_t mechanisms(const Tuning& tuning);    // ADD_FLOW SctpMechanisms
Tuning tuningFromWire(std::uint8_t cmt, std::uint8_t flags, std::uint16_t rtoMinAndDac, std::uint32_t mechanisms);
inline Tuning tuningOf(const npmp::AddFlow& m) {
  return tuningFromWire(m.cmt, m.flags, m.sctpRtoMinAndDac, m.sctpMechanisms);
}

// A fraction 0…1 as in ADD_FLOW OrderedMode/ReliableMode.
std::uint32_t fractionToWire(double fraction);
double wireToFraction(std::uint32_t value);

// How `side` sends the flow's messages: ordered and reliable as the flow asks (flow-wide), its
// per-message choices seeded from the run's seed (ADD_FLOW's; 0: from entropy).
StreamPolicy policyOf(const npmp::AddFlow& m, flowspec::Side side);

}  // namespace npm::sctp
