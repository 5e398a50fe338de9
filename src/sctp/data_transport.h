// SCTP behind transport::DataTransport (transport/data_transport.h): the flows of one FLOWSPEC
// option share an association, a stream each, on the control thread; CMT and its tuning from
// the ADD_FLOW (flow_settings.h).
#pragma once

#include "common/asio_awaitable.h"  // first: Boost 1.74 (see there)

#include <boost/asio/ip/udp.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "sctp/association.h"
#include "sctp/socket.h"
#include "transport/data_transport.h"

namespace npm::sctp {

// What the command line chose for SCTP (--sctp-stack, --sctp-udp-port, --sctp-remote-udp-port).
struct TransportOptions {
  StackChoice stack = StackChoice::Auto;
  StackSettings settings;  // the active's: answers no INIT
};

std::shared_ptr<transport::DataTransport> dataTransport(const TransportOptions& options);

// Waits for an association to come up; throws transport::TransportError ("cannot connect to
// PEER: why") when it fails, or when `timeout` passes first (the line then ends with
// `ifTimedOut`). With `encapsulation` (userland SCTP: the peer's UDP port), a port that the
// peer's host refuses at once fails the wait at once.
asio::awaitable<void> waitConnected(asio::io_context& io, Association& association,
                                    std::chrono::steady_clock::duration timeout, const std::string& ifTimedOut = "",
                                    std::optional<asio::ip::udp::endpoint> encapsulation = std::nullopt);

}  // namespace npm::sctp
