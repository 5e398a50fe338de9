// The active side: sets up the flows at a passive, runs the measurement, and collects
// both sides' results.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/result.h"
#include "control/active_options.h"
#include "transport/data_transport.h"

namespace npm::control {

// --start-at: how long before the start time the active connects to the passive and sets its
// flows up (at once when the time is nearer): enough for thousands of flows, well within the
// passive's --idle-timeout (120 s by default) for a session without a running measurement.
constexpr std::chrono::seconds kStartAtLead{60};

// The network threads a run with these options uses: one per flow that may be spread at most
// (not those whose option shares a connection, DataTransport::flowsShareConnection).
unsigned networkThreads(const ActiveOptions& options, const transport::Registry& transports);

// File descriptors a run with these options needs at most: a socket per flow (per shared
// connection where a FLOWSPEC option's flows share one: SCTP, QUIC), with -vector a file per flow
// (and per flow whose paths are recorded), and a reserve for the control connection, the event
// loop, the result and log files.
std::uint64_t descriptorsNeeded(const ActiveOptions& options, const transport::Registry& transports);
// Whether `soft` descriptors are enough for the run (after raising the soft limit to the hard
// one); else the one-line reason to refuse it before connecting.
Result<void> checkDescriptors(const ActiveOptions& options, const transport::Registry& transports, std::uint64_t soft,
                              std::uint64_t hard);

// Runs the whole measurement, its flows' connections through `transports` (app/transports);
// returns the process exit code.
int runActive(const ActiveOptions& options, const transport::Registry& transports);

}  // namespace npm::control
