// One flow of a QUIC connection as a transport::DataChannel: this side's unidirectional
// stream of the flow to send, the peer's to receive (connection.h). A handle: the state of both
// streams lives in the connection, which the channel holds.
//
// Like an SCTP stream, and unlike a TCP connection, the channel shares its transport with the
// connection's other flows: isByteStream() is false (send() takes (header, payload) pairs or
// one run of bytes alike: both are copied into the stream), reliable() true, fd() -1, and it
// cannot move to another thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/data_channel.h"

namespace npm::quic {

namespace asio = boost::asio;

class Connection;

class FlowChannel : public transport::DataChannel {
public:
  FlowChannel(std::shared_ptr<Connection> connection, std::uint16_t stream);
  ~FlowChannel() override;

  // Completes when the stream has taken every byte into packets (within the peer's credit):
  // the bytes are copied, ngtcp2 keeps the copy until the peer acknowledges it.
  void send(const std::vector<asio::const_buffer>& buffers, std::size_t messages,
            transport::SendHandler handler) override;
  void receive(transport::MessageHandler onMessage, transport::ErrorHandler onError) override;
  void expect(npmp::MessageSet kind) override;
  // FIN on this side's stream after what is queued, STOP_SENDING (no error) on the peer's.
  void close() override;
  // RESET_STREAM and STOP_SENDING (application error 1): what is queued is dropped.
  void abort() override;
  int fd() const override { return -1; }
  bool isByteStream() const override { return false; }
  bool reliable() const override { return true; }
  std::string peerName() const override;
  long unsent() override;  // bytes queued on this side's stream and not acknowledged yet
  long unread() override;  // bytes of the peer's stream received and not delivered yet
  std::uint64_t bytesRead() const override;
  // One sample (id 0): the connection's path (congestion window, RTT, bytes in flight as
  // `unacked`) with this flow's stream counters (bytes sent, acknowledged, received; `lost`:
  // packets with this stream's data that ngtcp2 declared lost).
  void samplePaths(std::vector<transport::PathSample>& out) override;

  std::uint16_t stream() const { return stream_; }
  const std::shared_ptr<Connection>& connection() const { return connection_; }

private:
  std::shared_ptr<Connection> connection_;
  std::uint16_t stream_;
  bool closed_ = false;
};

}  // namespace npm::quic
