// SCTP behind transport::DataTransport (transport/data_transport.h): the flows of one FLOWSPEC
// option share an association, a stream each, on the control thread; CMT and its tuning from
// the ADD_FLOW (flow_settings.h).
#pragma once

#include "common/asio_awaitable.h"  // first: Boost 1.74 (see there)

#include <boost/asio/ip/udp.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

// The stacks a passive listens with (its control listeners and its data listener alike): with
// --sctp-stack=auto on a kernel with SCTP both, the kernel's for what actives send by default and
// the userland one (over UDP) for the flows that need it (CMT; it reads no raw SCTP, so it never
// sees the kernel's packets); otherwise the one chosen (throws transport::TransportError where it
// is not available).
std::vector<Stack> passiveStacks(StackChoice choice);
// Accepts on `listener` while `accepting()` holds: each new association, named by its peer's
// first address ("192.0.2.1 (SCTP)"), goes to `handOn` with that address.
void acceptAssociations(asio::io_context& io, std::shared_ptr<Socket> listener, std::function<bool()> accepting,
                        std::function<void(std::shared_ptr<Association>, const asio::ip::address&)> handOn);
// A listening socket of `stack`, configured with `options` and bound to every one of `addresses`
// (none: the wildcard) at `port`; throws transport::TransportError, closing what it opened.
std::shared_ptr<Socket> listenOn(Stack stack, asio::io_context& io, int family, const StackSettings& settings,
                                 const SocketOptions& options, const std::vector<asio::ip::address>& addresses,
                                 std::uint16_t port);

// Waits for an association to come up; throws transport::TransportError ("cannot connect to
// PEER: why") when it fails, or when `timeout` passes first (the line then ends with
// `ifTimedOut`). With `encapsulation` (userland SCTP: the peer's UDP port), a port that the
// peer's host refuses at once fails the wait at once.
asio::awaitable<void> waitConnected(asio::io_context& io, Association& association,
                                    std::chrono::steady_clock::duration timeout, const std::string& ifTimedOut = "",
                                    std::optional<asio::ip::udp::endpoint> encapsulation = std::nullopt);

}  // namespace npm::sctp
