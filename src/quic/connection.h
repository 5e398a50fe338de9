// A QUIC connection carrying netperfmeter flows (README.md here): ngtcp2 over one UDP socket,
// driven by the io_context it was made on, with no thread of its own. Each flow is a pair of
// unidirectional streams, as the reference maps them: the active (QUIC client) sends on its
// stream (n << 2) | 2, the passive (QUIC server) on its stream (n << 2) | 3, n the flow's
// stream number; channel(n) is that pair as a transport::DataChannel, NPMP messages framed in
// each stream as on TCP (transport/stream_framing.h).
//
// Threading: everything, the channels included, on the connection's io_context. Lifetime: the
// user and the channels hold the connection (shared_ptr); its asynchronous handlers hold weak
// references, so that a connection nobody holds goes away (with its socket).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "transport/channel_end.h"
#include "transport/data_channel.h"
#include "transport/path_sample.h"
#include "transport/stream_framing.h"

struct ngtcp2_conn;
struct ngtcp2_crypto_conn_ref;

namespace npm::quic {

namespace asio = boost::asio;

class Credentials;
class TlsSession;
class FlowChannel;

// Flow control and timeouts of a connection (this side's receive windows; the peer's bound
// what this side may send).
struct Limits {
  std::uint64_t streamWindow = 1 << 20;      // initial credit per stream, bytes
  std::uint64_t connectionWindow = 8 << 20;  // initial credit of the connection, bytes
  // ngtcp2 widens the windows up to these as the reader keeps up (auto-tuning).
  std::uint64_t maxStreamWindow = 16 << 20, maxConnectionWindow = 64 << 20;
  // Unidirectional streams the peer may open. Stream numbers are 16 bits, and opening stream n
  // opens the ones below it, so 65536 covers every flow.
  std::uint64_t maxStreams = 65536;
  std::chrono::milliseconds idleTimeout{30000};
  std::chrono::milliseconds handshakeTimeout{10000};
  // This side's congestion control (ngtcp2_settings.cc_algo): the reference's cc= maps
  // reno and default to Reno, cubic to CUBIC.
  enum class CongestionControl { Reno, Cubic } congestionControl = CongestionControl::Reno;
};

struct ClientOptions {
  std::string caFile;    // the CAs to trust (PEM); empty: the system's trust store
  std::string hostName;  // SNI and the name the certificate must carry; empty: not checked
  Limits limits;
  std::optional<asio::ip::address> local;  // the socket's local address (netperfmeter's -L); none: any
  bool v6only = false;                     // an IPv6 socket with IPV6_V6ONLY (netperfmeter's -6, the FLOWSPEC's v6only)
};

// The server side's view of a client's first Initial packet (Server): its header's connection
// IDs and version, and where the client proved its address with a Retry token, the token and
// the Destination Connection ID of the Initial that the Retry answered.
struct ClientInitial {
  std::span<const std::uint8_t> dcid, scid;
  std::uint32_t version = 0;
  std::span<const std::uint8_t> token, originalDcid;  // empty: not validated by a Retry
};

// Sends one datagram on `fd` to `to`, from `source` where given (IP_PKTINFO / IPV6_PKTINFO:
// the reply of a wildcard-bound server leaves from the address its client sent to). Returns
// sendmsg()'s result (errno set where it is negative).
long sendDatagramFrom(int fd, const std::uint8_t* data, std::size_t size, const asio::ip::udp::endpoint& to,
                      const std::optional<asio::ip::address>& source);

// What a connection counted (for tests and diagnostics).
struct ConnectionCounters {
  std::uint64_t datagramsSent = 0, datagramsReceived = 0;
  std::uint64_t streamBlocked = 0;  // writes that found a stream's or the connection's credit used up
  std::uint64_t socketBlocked = 0;  // datagrams that waited for room in the socket's send buffer
};

class Connection : public std::enable_shared_from_this<Connection> {
public:
  enum class Role { Client, Server };

  // The client side: a UDP socket of its own, connected to `server`, and the handshake begun.
  // Fails (one line) where the CA file cannot be used or the socket cannot be made.
  static Result<std::shared_ptr<Connection>> connect(asio::io_context& io, const asio::ip::udp::endpoint& server,
                                                     const ClientOptions& options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The handshake's outcome, once: success, or why not (a certificate the client does not
  // trust, a wrong name, no common application protocol, a timeout, the peer's refusal).
  void onHandshake(std::function<void(Result<void> established)> handler);
  // A flow's stream that the peer opened before this side asked for channel(n): the first
  // bytes of stream n arrived. Without a handler, such streams wait (unread, and so holding
  // back their sender by flow control) until channel(n) is asked for.
  void onChannel(std::function<void(std::uint16_t stream, std::shared_ptr<transport::DataChannel> channel)> handler);
  // The flow with stream number n: sends on this side's stream of n, receives from the peer's.
  std::shared_ptr<transport::DataChannel> channel(std::uint16_t stream);

  // CONNECTION_CLOSE (no error) at once; the channels are told nothing more (closed by their
  // owner), the handshake handler gets a failure if it is still waiting.
  void close();
  bool established() const { return state_ == State::Established; }
  // Ended: closed, failed, timed out, or closed by the peer.
  bool ended() const { return state_ == State::Ended; }
  Role role() const { return role_; }
  const asio::ip::udp::endpoint& remote() const { return remote_; }
  const std::string& peerName() const { return peer_; }
  const ConnectionCounters& counters() const { return counters_; }
  asio::io_context& io() { return io_; }

private:
  friend class Server;
  friend class FlowChannel;
  friend struct Callbacks;

  enum class State { Handshake, Established, Ended };

  // A flow's two streams. The send side holds the bytes ngtcp2 may still need (from the last
  // acknowledged byte on): ngtcp2 does not copy stream data, it refers to the application's
  // until the peer acknowledges it.
  struct Flow {
    std::uint16_t number = 0;
    // sending (this side's stream)
    std::deque<std::vector<std::uint8_t>> chunks;  // one per send(), from `acked` on
    std::uint64_t chunkBase = 0;                   // stream offset of chunks[0]
    std::uint64_t queued = 0;                      // stream offset after the last byte queued
    std::uint64_t accepted = 0;                    // bytes ngtcp2 has taken into packets
    std::uint64_t acked = 0;                       // bytes the peer has acknowledged
    transport::SendHandler sendHandler;
    std::uint64_t sendTarget = 0;  // the send completes when `accepted` reaches it
    std::size_t sendMessages = 0;
    bool finQueued = false, finSent = false, sendShut = false, sendClosed = false;
    bool stoppedByPeer = false;  // the peer's STOP_SENDING without an error (it closed its channel)
    bool blocked = false;        // in this write round: no credit
    // receiving (the peer's stream)
    transport::MessageReassembler in;
    std::uint64_t received = 0, delivered = 0;
    std::uint64_t uncredited = 0;  // bytes taken from the stream and not yet given back as credit
    bool finReceived = false, receiveClosed = false, receiving = false;
    std::optional<transport::ChannelEnd> end;  // how the channel ended (told once)
    transport::MessageHandler onMessage;
    transport::ErrorHandler onError;
    bool endTold = false;
    bool released = false;   // closed by its channel's owner
    bool announced = false;  // the peer's stream was handed to onChannel (or asked for)
    std::weak_ptr<FlowChannel> channel;
  };

  Connection(asio::io_context& io, Role role, std::shared_ptr<asio::ip::udp::socket> socket,
             const asio::ip::udp::endpoint& local, const asio::ip::udp::endpoint& remote, const Limits& limits);
  // The server side: for the Server, on its socket, from the client's first Initial packet.
  // `local` is the address the client sent to; with `sourceAddressed` (a wildcard-bound
  // server) every datagram to the client leaves from it.
  static Result<std::shared_ptr<Connection>> accept(asio::io_context& io, std::shared_ptr<asio::ip::udp::socket> socket,
                                                    const asio::ip::udp::endpoint& local,
                                                    const asio::ip::udp::endpoint& remote, bool sourceAddressed,
                                                    std::shared_ptr<const Credentials> credentials,
                                                    const Limits& limits, const ClientInitial& initial);

  // Input: one datagram from the peer. Then afterInput() once per batch of datagrams.
  // Returns false where the datagram ended the connection before it began (a server's garbage
  // Initial): the Server forgets it without a word.
  bool onDatagram(std::span<const std::uint8_t> datagram, std::uint64_t now);
  void afterInput();

  // The client's own socket.
  void readMore();
  void drainSocket();

  // Output: as many packets as ngtcp2 has, up to a batch; then the timer.
  void flush();
  void scheduleFlush();
  bool sendDatagram(const std::uint8_t* data, std::size_t size);
  void waitWritable();
  void armTimer();
  void onTimer();

  // The handshake done (from ngtcp2's callback: checked after the read), input delivered.
  void deliver(Flow& flow);
  void deliverAll();
  Flow& flow(std::uint16_t stream);
  Flow* flowOfStream(std::int64_t streamId);
  std::int64_t localStream(std::uint16_t number) const;
  std::int64_t remoteStream(std::uint16_t number) const;
  bool openLocalStreams(std::int64_t upTo);
  void onAccepted(Flow& flow, std::uint64_t bytes);
  void completeSend(Flow& flow, const boost::system::error_code& ec);

  // Called by the channels.
  void queue(std::uint16_t stream, const std::vector<asio::const_buffer>& buffers, std::size_t messages,
             transport::SendHandler handler);
  void claim(std::uint16_t stream, transport::MessageHandler onMessage, transport::ErrorHandler onError);
  void release(std::uint16_t stream, bool abort);
  void samplePaths(std::uint16_t stream, std::vector<transport::PathSample>& out);
  long unsent(std::uint16_t stream);
  long unread(std::uint16_t stream);
  std::uint64_t bytesRead(std::uint16_t stream);
  void expect(std::uint16_t stream, npmp::MessageSet kind);

  // Errors: a library error of ngtcp2 (with the line to tell), the peer's close, a timeout.
  void failWith(int liberr, const std::string& why);
  void closeWithAlert(std::uint8_t alert, const std::string& why);
  void writeClose(const void* ccerr);
  void end(const transport::ChannelEnd& end, const std::string& handshakeError);
  void handshakeDone();
  std::string stateName() const;

  asio::io_context& io_;
  Role role_;
  std::shared_ptr<asio::ip::udp::socket> socket_;
  asio::ip::udp::endpoint local_, remote_;
  bool sourceAddressed_ = false;  // the server's datagrams name local_ as their source (IP_PKTINFO)
  std::string peer_;
  Limits limits_;
  ngtcp2_conn* conn_ = nullptr;
  std::unique_ptr<ngtcp2_crypto_conn_ref> ref_;
  std::unique_ptr<TlsSession> tls_;
  State state_ = State::Handshake;
  bool handshakeCompleted_ = false;  // ngtcp2 said so; handled after the read
  std::string callbackFailure_;      // why a callback of ours failed the read
  std::uint8_t callbackAlert_ = 0;
  std::function<void(Result<void>)> onHandshake_;
  std::function<void(std::uint16_t, std::shared_ptr<transport::DataChannel>)> onChannel_;
  std::function<void()> onEnded_;  // the Server's: forget this connection
  std::map<std::uint16_t, Flow> flows_;
  std::vector<std::uint16_t> toDeliver_;
  std::int64_t nextLocalStream_ = -1;  // the lowest of this side's stream ids not opened yet
  std::uint16_t nextFlowToSend_ = 0;   // round robin over the flows with data
  bool flushScheduled_ = false, writeWaiting_ = false;
  std::vector<std::uint8_t> pending_;  // a datagram that waits for room in the socket
  std::vector<std::uint8_t> packet_, receiveBuffer_;
  asio::steady_timer timer_;
  std::uint64_t armedExpiry_ = 0;
  bool reading_ = false;
  ConnectionCounters counters_;
  std::optional<transport::ChannelEnd> connectionEnd_;  // how the connection ended, for late claims
  bool endedByPeer_ = false;                            // the peer closed it without an error
};

// The id of the unidirectional stream on which `sender` sends the flow with this stream
// number: (n << 2) | 2 from the client (the active), (n << 2) | 3 from the server (the
// passive), as the reference maps them (its passive demultiplexes by id >> 2).
std::int64_t streamId(Connection::Role sender, std::uint16_t stream);

// Now, in ngtcp2's time (steady clock, nanoseconds).
std::uint64_t timestamp();

}  // namespace npm::quic
