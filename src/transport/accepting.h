// What the passive's listeners share, its control listeners (control/passive_listeners) and
// those of the data transports (DataTransport::listen): the address family and wildcard they
// bind, the pause after an accept that failed for want of resources, and a connected socket's
// ends.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/system/error_code.hpp>

#include <functional>
#include <vector>

namespace npm::transport {

namespace asio = boost::asio;

// The family of the first of `addresses` (-L, -l), or IPv6 (dual-stack) where the host has it.
int listeningFamily(const std::vector<asio::ip::address>& addresses);
asio::ip::address anyAddress(int family);
// The first of `addresses`, or the wildcard of `family`.
asio::ip::address listeningAddress(const std::vector<asio::ip::address>& addresses, int family);

// An accept that failed (EMFILE, ENFILE, ENOBUFS would fail again at once): said now and then,
// `what` naming what was accepted ("a data connection").
void acceptFailed(const char* what, const boost::system::error_code& ec);
// Runs `next` now, or after a short pause when the last accept failed.
void acceptAgain(asio::io_context& io, bool failed, std::function<void()> next);

// The peer and the local address family of a connected socket (an unspecified address, AF_INET
// if it cannot be had).
asio::ip::address peerAddressOf(int fd);
int localFamilyOf(int fd);

}  // namespace npm::transport
