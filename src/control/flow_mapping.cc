#include "control/flow_mapping.h"

#include "sctp/flow_settings.h"

namespace npm::control {

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

using flowspec::flowSeed;

npmp::AddFlow toAddFlow(const flowspec::FlowSpec& spec, std::uint64_t measurementId, std::uint32_t runtimeMs,
                        std::uint64_t runSeed) {
  const sctp::Tuning tuning = sctpTuning(spec);
  npmp::AddFlow add;
  add.flags =
      static_cast<std::uint8_t>((spec.debug ? npmp::kAddFlowDebug : 0) | (spec.noDelay ? npmp::kAddFlowNoDelay : 0) |
                                (spec.repeatOnOff ? npmp::kAddFlowRepeatOnOff : 0) | sctp::tuningFlags(tuning));
  add.flowId = spec.flowId.value_or(0);
  add.measurementId = measurementId;
  add.streamId = spec.streamId;
  add.sctpRtoMinAndDac = sctp::rtoMinAndDac(tuning);
  add.sctpMechanisms = sctp::mechanisms(tuning);
  add.runtimeMs = runtimeMs;
  add.seed = runSeed;
  add.protocol = spec.protocol;
  add.description = spec.description;
  add.orderedMode = sctp::fractionToWire(spec.ordered);
  add.reliableMode = sctp::fractionToWire(spec.reliable);
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
  r.socketOptions = transport::socketOptionsOf(m);
  r.sctpTuning = sctp::tuningOf(m);
  r.runtimeMs = m.runtimeMs;
  // A reference active sends no seed (0): this side draws from entropy, as the reference does.
  p.trafficSeed = flowSeed(m.seed, flowspec::Side::Passive, m.flowId, m.streamId, flowspec::SeedUse::Traffic);
  r.streamPolicy = sctp::policyOf(m, flowspec::Side::Passive);
  return r;
}

}  // namespace npm::control
