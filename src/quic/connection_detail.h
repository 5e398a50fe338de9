// The internals shared by the parts of the QUIC connection (connection.cc: set-up, ngtcp2's
// callbacks and the end; connection_input.cc; connection_output.cc; connection_streams.cc) and
// the server (server.cc): not part of the quic/ interface.
#pragma once

#include <ngtcp2/ngtcp2.h>

#include <boost/asio/ip/udp.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace npm::quic::detail {

namespace asio = boost::asio;

constexpr std::size_t kMaxDatagram = 65536;
// Datagrams read per wake-up (the server's socket alike), so that one busy peer cannot starve
// the other handlers of the thread.
constexpr int kDatagramsPerRead = 64;
// The application error code of abort() (RESET_STREAM, STOP_SENDING); close() sends 0.
constexpr std::uint64_t kAbortCode = 1;

// Unguessable bytes (connection IDs, tokens).
void randomBytes(std::uint8_t* data, std::size_t size);
ngtcp2_path pathOf(const asio::ip::udp::endpoint& local, const asio::ip::udp::endpoint& remote);
std::uint64_t nanoseconds(std::chrono::milliseconds ms);
// "1.5 s"
std::string seconds(std::chrono::milliseconds ms);

}  // namespace npm::quic::detail
