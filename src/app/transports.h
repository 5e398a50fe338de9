// The data transports of this build, registered once (transport/data_transport.h): the kernel's
// TCP, MPTCP, UDP and DCCP, SCTP with the command line's stack and ports, and QUIC where it is
// built. Adding a transport: src/README.md ("Adding a transport").
#pragma once

#include "control/active_options.h"
#include "control/passive_options.h"
#include "transport/data_transport.h"

namespace npm::app {

transport::Registry activeTransports(const control::ActiveOptions& options);
// The passive's: what it admits of an ADD_FLOW, and its data listeners (DataTransport::listen).
transport::Registry passiveTransports(const control::PassiveOptions& options);

}  // namespace npm::app
