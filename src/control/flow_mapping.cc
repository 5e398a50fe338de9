#include "control/flow_mapping.h"

#include <cmath>

namespace npm::control {

std::uint32_t fractionToWire(double fraction) {
  return static_cast<std::uint32_t>(std::llround(fraction * 4294967295.0));
}

double wireToFraction(std::uint32_t value) { return static_cast<double>(value) / 4294967295.0; }

sctp::Tuning sctpTuning(const flowspec::FlowSpec& spec) {
  sctp::Tuning t;
  t.cmt = spec.cmt;
  t.ccModule = spec.sctpCc;
  t.bufferSplitting = spec.bufferSplitting;
  t.nrSack = spec.nrSack;
  t.dac = spec.dac;
  t.smartFr = spec.smartFr;
  t.reschedule = spec.reschedule;
  t.pktDrop = spec.pktDrop;
  t.rtoMinMs = spec.rtoMinMs;
  return t;
}

std::uint8_t sctpTuningFlags(const sctp::Tuning& tuning) {
  return static_cast<std::uint8_t>((tuning.nrSack ? npmp::kAddFlowNrSack : 0) |
                                   (tuning.bufferSplitting & 3) << npmp::kAddFlowBufferSplitShift |
                                   (tuning.ccModule & 3) << npmp::kAddFlowSctpCcShift);
}

std::uint16_t sctpRtoMinAndDac(const sctp::Tuning& tuning) {
  return static_cast<std::uint16_t>((tuning.rtoMinMs & npmp::kSctpRtoMinMask) | (tuning.dac ? npmp::kSctpDacBit : 0));
}

std::uint32_t sctpMechanisms(const sctp::Tuning& tuning) {
  return ((tuning.bufferSplitting & flowspec::kBufferSplitOnBuffered) ? npmp::kSctpMechanismBufferSplitOnBuffered : 0) |
         (tuning.smartFr ? npmp::kSctpMechanismSmartFastRetransmit : 0) |
         (tuning.reschedule ? npmp::kSctpMechanismChunkRescheduling : 0) |
         (tuning.pktDrop ? npmp::kSctpMechanismPacketDropReporting : 0);
}

sctp::Tuning sctpTuningFromWire(std::uint8_t cmt, std::uint8_t flags, std::uint16_t rtoMinAndDac,
                                std::uint32_t mechanisms) {
  sctp::Tuning t;
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

namespace {

// The seed of one use of randomness of one side of a flow; 0 (entropy) without a run seed.
std::uint64_t flowSeed(std::uint64_t runSeed, flowspec::Side side, std::uint32_t flowId, std::uint16_t streamId,
                       flowspec::SeedUse use) {
  return runSeed == 0 ? 0 : flowspec::deriveSeed(runSeed, side, flowId, streamId, use);
}

}  // namespace

npmp::AddFlow toAddFlow(const flowspec::FlowSpec& spec, std::uint64_t measurementId, std::uint32_t runtimeMs,
                        std::uint64_t runSeed) {
  const sctp::Tuning tuning = sctpTuning(spec);
  npmp::AddFlow add;
  add.flags =
      static_cast<std::uint8_t>((spec.debug ? npmp::kAddFlowDebug : 0) | (spec.noDelay ? npmp::kAddFlowNoDelay : 0) |
                                (spec.repeatOnOff ? npmp::kAddFlowRepeatOnOff : 0) | sctpTuningFlags(tuning));
  add.flowId = spec.flowId.value_or(0);
  add.measurementId = measurementId;
  add.streamId = spec.streamId;
  add.sctpRtoMinAndDac = sctpRtoMinAndDac(tuning);
  add.sctpMechanisms = sctpMechanisms(tuning);
  add.runtimeMs = runtimeMs;
  add.seed = runSeed;
  add.protocol = spec.protocol;
  add.description = spec.description;
  add.orderedMode = fractionToWire(spec.ordered);
  add.reliableMode = fractionToWire(spec.reliable);
  add.retransmissionTrials = spec.retransmissionTrials;
  add.frameRate = spec.inbound.rate;
  add.frameSize = spec.inbound.size;
  add.rcvBufferSize = spec.rcvBufferSize;
  add.sndBufferSize = spec.sndBufferSize;
  add.maxMsgSize = spec.maxMsgSize;
  add.cmt = spec.cmt;
  add.ccid = spec.ccid;
  add.congestionControl = spec.congestionControl;
  add.onOffEvents = spec.onOff;
  return add;
}

measure::FlowParameters activeFlowParameters(const flowspec::FlowSpec& spec, std::uint64_t measurementId,
                                             std::uint64_t runSeed) {
  measure::FlowParameters p;
  p.measurementId = measurementId;
  p.flowId = spec.flowId.value_or(0);
  p.streamId = spec.streamId;
  p.protocol = spec.protocol;
  p.description = spec.description;
  p.outbound = spec.outbound;
  p.onOff = spec.onOff;
  p.repeatOnOff = spec.repeatOnOff;
  p.maxMsgSize = spec.maxMsgSize;
  p.defragTimeoutMs = spec.defragTimeoutMs;
  p.errorOnAbort = spec.errorOnAbort;
  p.debug = spec.debug;
  p.transferBytes = spec.transferBytes;  // the active's alone: ADD_FLOW has no field for it
  p.transferFrames = spec.transferFrames;
  p.trafficSeed = flowSeed(runSeed, flowspec::Side::Active, p.flowId, p.streamId, flowspec::SeedUse::Traffic);
  return p;
}

sctp::StreamPolicy activeStreamPolicy(const flowspec::FlowSpec& spec, std::uint64_t runSeed) {
  sctp::StreamPolicy policy = sctp::streamPolicy(spec.ordered, spec.reliable, spec.retransmissionTrials);
  policy.seed =
      flowSeed(runSeed, flowspec::Side::Active, spec.flowId.value_or(0), spec.streamId, flowspec::SeedUse::Messages);
  return policy;
}

FlowRequest fromAddFlow(const npmp::AddFlow& m) {
  FlowRequest r;
  measure::FlowParameters& p = r.parameters;
  p.measurementId = m.measurementId;
  p.flowId = m.flowId;
  p.streamId = m.streamId;
  p.protocol = m.protocol;
  p.description = m.description;
  p.outbound.rate = m.frameRate;
  p.outbound.size = m.frameSize;
  p.onOff = m.onOffEvents;
  p.repeatOnOff = (m.flags & npmp::kAddFlowRepeatOnOff) != 0;
  p.maxMsgSize = m.maxMsgSize;
  p.debug = (m.flags & npmp::kAddFlowDebug) != 0;
  p.errorOnAbort = false;  // the passive ignores send errors, as the reference
  r.socketOptions.rcvBufferSize = m.rcvBufferSize;
  r.socketOptions.sndBufferSize = m.sndBufferSize;
  r.socketOptions.noDelay = (m.flags & npmp::kAddFlowNoDelay) != 0;
  r.socketOptions.congestionControl = m.congestionControl;
  r.socketOptions.ccid = m.ccid;
  r.sctpTuning = sctpTuningFromWire(m.cmt, m.flags, m.sctpRtoMinAndDac, m.sctpMechanisms);
  r.runtimeMs = m.runtimeMs;
  r.streamPolicy =
      sctp::streamPolicy(wireToFraction(m.orderedMode), wireToFraction(m.reliableMode), m.retransmissionTrials);
  // A reference active sends no seed (0): this side draws from entropy, as the reference does.
  p.trafficSeed = flowSeed(m.seed, flowspec::Side::Passive, m.flowId, m.streamId, flowspec::SeedUse::Traffic);
  r.streamPolicy.seed = flowSeed(m.seed, flowspec::Side::Passive, m.flowId, m.streamId, flowspec::SeedUse::Messages);
  return r;
}

}  // namespace npm::control
