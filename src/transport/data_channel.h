// Data channels: how NPMP-DATA messages travel over one flow's transport.
//
// A stream channel (TCP, MPTCP) frames messages by their TLV length and writes a batch
// of messages with one gather write; a datagram channel (UDP, DCCP) sends one datagram
// per message. Receiving delivers one complete message at a time to a handler.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "npmp/messages.h"
#include "transport/channel_end.h"
#include "transport/path_sample.h"

namespace npm::transport {

namespace asio = boost::asio;

// A received message and the receive time (CLOCK_REALTIME µs).
using MessageHandler = std::function<void(std::span<const std::uint8_t> message, std::uint64_t now)>;
// A batch finished: `sent` messages went out, `dropped` datagrams could not be sent
// (UDP/DCCP errors such as ICMP unreachable). A set error code means the channel failed.
using SendHandler = std::function<void(const boost::system::error_code& error, std::size_t sent, std::size_t dropped)>;

class DataChannel {
public:
  virtual ~DataChannel() = default;
  // Sends `messages` messages. A byte stream takes the buffers as one run of bytes, cut
  // anywhere; the others send message by message and take them as (header, payload) pairs,
  // 2 * `messages` buffers. The buffers must stay valid until the handler runs. Only one send
  // may be outstanding.
  virtual void send(const std::vector<asio::const_buffer>& buffers, std::size_t messages, SendHandler handler) = 0;
  // Starts (or redirects) delivery of received messages, and of the channel's end.
  virtual void receive(MessageHandler onMessage, ErrorHandler onError) = 0;
  // Checks every message header as soon as it arrives (stream channels; datagrams are
  // checked whole by the receiver).
  virtual void expect(npmp::MessageSet kind) { (void)kind; }
  virtual void close() = 0;
  // Closes at once, dropping what the transport still holds in either direction (a stream:
  // RST, MP_FASTCLOSE for MPTCP); for a flow whose measurement is over. A graceful close left
  // a saturated MPTCP connection open for up to a minute after both processes had ended: the
  // side that closed first keeps accepting data into its orphaned socket (MPTCP FIN-WAIT-2)
  // while the other drains its send buffer into it over the paths, so the next run of a study
  // shared the paths with it (TCP resets such data; measured: tests/integration/test_mptcp_netns).
  virtual void abort() { close(); }
  virtual int fd() const = 0;
  // Whether messages travel in one byte stream (TCP, MPTCP), which a receiver must drain to
  // the end, or each on its own (UDP, DCCP, an SCTP stream).
  virtual bool isByteStream() const = 0;
  // Whether a message, once sent, arrives (TCP, MPTCP, SCTP) or may be lost (UDP, DCCP).
  virtual bool reliable() const { return isByteStream(); }
  virtual std::string peerName() const = 0;
  // What the transport still holds for the peer (bytes or messages; 0 = nothing), -1 if unknown.
  virtual long unsent() { return 0; }
  // What has arrived for this side but not been read yet (bytes; 0 = nothing), -1 if unknown.
  virtual long unread() { return 0; }
  // Bytes this channel's reads have handed to it so far (counted when a read's handler runs).
  // A read may have taken bytes from the socket whose handler has not run yet (Asio reads
  // speculatively and queues the completion), so unread() == 0 alone does not mean that
  // everything has been delivered; unread() == 0 with this counter standing still across a
  // round through the channel's context does.
  virtual std::uint64_t bytesRead() const { return 0; }
  // Of those, the DATA payload bytes discarded in the kernel without being copied (a stream
  // channel, for large messages: their payload is not inspected). Such a message reaches the
  // handler with its header and its full length, its payload bytes unspecified.
  virtual std::uint64_t bytesDiscarded() const { return 0; }
  // Appends the transport's per-path state (TCP, MPTCP per subflow, SCTP per peer address);
  // nothing for UDP and DCCP, which keep none.
  virtual void samplePaths(std::vector<PathSample>& out) { (void)out; }
  // Hands the connection over to another context (thread): a new channel there gets the
  // socket and whatever has been read but not delivered yet; this one is closed without
  // closing the socket. Only from within this channel's message handler, with no send
  // outstanding (a stream channel's IDENTIFY). nullptr where a channel cannot move (it shares
  // its socket: UDP, an SCTP stream; DCCP).
  virtual std::shared_ptr<DataChannel> moveTo(asio::io_context& io) {
    (void)io;
    return nullptr;
  }
};

std::shared_ptr<DataChannel> makeStreamChannel(asio::ip::tcp::socket socket);
// A connected UDP socket of its own (the active side).
std::shared_ptr<DataChannel> makeUdpChannel(asio::ip::udp::socket socket);
// The passive's shared UDP socket, sending to one peer; the owner of the shared socket reads it
// and hands each datagram from that peer to deliver(), which passes it to the receive() handler.
class UdpPeerChannel : public DataChannel {
public:
  // False once the channel is closed (its flow is gone): the peer's datagrams are no longer its.
  virtual bool deliver(std::span<const std::uint8_t> message, std::uint64_t now) = 0;
  virtual bool closed() const = 0;
};
std::shared_ptr<UdpPeerChannel> makeUdpPeerChannel(asio::ip::udp::socket& shared, asio::ip::udp::endpoint peer);
// A connected DCCP socket (SOCK_DCCP file descriptor, owned by the channel).
std::shared_ptr<DataChannel> makeDccpChannel(asio::io_context& io, int fd, std::string peer);

std::string endpointName(const asio::ip::address& address, std::uint16_t port);

}  // namespace npm::transport
