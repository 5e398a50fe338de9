// The one mapping between a flow's parameters and its ADD_FLOW message, both directions.
//
//   active:  FlowSpec → AddFlow (what the passive is asked to run) and FlowParameters (what
//            the active runs itself); the active's data connection reads its socket options,
//            SCTP tuning and message policy from the AddFlow it sends (transport/data_transport),
//            so both sides read the same fields;
//   passive: AddFlow → FlowRequest (what it runs, with which socket options, SCTP tuning and
//            per-message delivery policy).
//
// ADD_FLOW describes the flow from the passive's point of view: its FrameRate/FrameSize are
// the active's inbound traffic. This project's extensions travel where the reference sends
// zeros: the CMT-SCTP tuning in flag bits 3–7 and in the obsolete NDiffPorts field, the
// runtime, the bundled stack's CMT-SCTP mechanisms and the run's seed in the obsolete Scheduler
// field.
// Pure (no sockets, no clocks); a round trip over every option is unit-tested.
#pragma once

#include <cstdint>

#include "flowspec/flowspec.h"
#include "measure/flow_parameters.h"
#include "npmp/messages.h"
#include "sctp/association.h"
#include "sctp/socket.h"
#include "transport/sockets.h"

namespace npm::control {

// `runtimeMs`: the measurement's runtime (0: none), after which the passive's flow sends nothing.
// `runSeed`: the run's seed (-seed; 0: none), from which each side derives the seeds of the
// flow's random choices (flowspec::deriveSeed).
npmp::AddFlow toAddFlow(const flowspec::FlowSpec& spec, std::uint64_t measurementId, std::uint32_t runtimeMs = 0,
                        std::uint64_t runSeed = 0);
measure::FlowParameters activeFlowParameters(const flowspec::FlowSpec& spec, std::uint64_t measurementId,
                                             std::uint64_t runSeed = 0);
// What a passive is asked to run by one ADD_FLOW.
struct FlowRequest {
  measure::FlowParameters parameters;      // the passive's sending (the active's inbound)
  transport::SocketOptions socketOptions;  // buffers, TCP_NODELAY, congestion control, DCCP CCID
  sctp::Tuning sctpTuning;                 // CMT and its tuning (SCTP)
  sctp::StreamPolicy streamPolicy;         // per-message delivery of the passive's sending (SCTP)
  std::uint32_t runtimeMs = 0;             // no frame due after START + this (0: until STOP)
};
FlowRequest fromAddFlow(const npmp::AddFlow& m);

// The SCTP tuning a flow spec asks for (its place on the wire: sctp/flow_settings.h).
sctp::Tuning sctpTuning(const flowspec::FlowSpec& spec);

}  // namespace npm::control
