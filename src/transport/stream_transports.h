// The kernel's own data transports behind transport::DataTransport: TCP, MPTCP (to BASE-1),
// UDP and DCCP (data_transport.h).
#pragma once

#include "common/asio_awaitable.h"  // first: Boost 1.74 (see there)

#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "transport/data_transport.h"

namespace npm::transport {

std::shared_ptr<DataTransport> tcpTransport();
std::shared_ptr<DataTransport> mptcpTransport();
std::shared_ptr<DataTransport> udpTransport();
std::shared_ptr<DataTransport> dccpTransport();

// Connects a non-blocking socket within the timeout; throws TransportError ("cannot connect to
// ADDRESS: why"), where nothing listens there with `ifRefused` as the why, if given.
asio::awaitable<void> connectWithin(asio::ip::tcp::socket& socket, const asio::ip::tcp::endpoint& to,
                                    std::chrono::steady_clock::duration timeout, const std::string& ifRefused = {});

}  // namespace npm::transport
