// An SCTP association carrying NPMP: each stream its own flow (reference semantics), or
// the control connection on stream 0. IDENTIFY and control messages travel with PPID 36,
// DATA with PPID 37.
#pragma once

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "flowspec/random.h"
#include "sctp/socket.h"
#include "transport/data_channel.h"

namespace npm::sctp {

// Per-message SCTP delivery choices of one flow's sending direction.
struct StreamPolicy {
  double ordered = 1.0;               // fraction of messages sent ordered
  double reliable = 1.0;              // fraction of messages sent fully reliable
  PrPolicy prPolicy = PrPolicy::Rtx;  // for the unreliable ones
  std::uint32_t prValue = 0;          // ms (TTL) or retransmissions (RTX)
  std::uint64_t seed = 0;             // of the per-message choices (flowspec::deriveSeed); 0 = from entropy
};
// The policy of a flow from its FLOWSPEC/ADD_FLOW values (RetransmissionTrials encoding).
StreamPolicy streamPolicy(double ordered, double reliable, std::uint32_t retransmissionTrials);

class Association : public std::enable_shared_from_this<Association> {
public:
  Association(asio::io_context& io, std::unique_ptr<Socket> socket, std::string peer);
  ~Association();

  asio::io_context& io() { return io_; }
  Socket& socket() { return *socket_; }
  const std::string& peerName() const { return peer_; }
  void setPeerName(std::string peer) { peer_ = std::move(peer); }

  // Waits for the association to come up (after Socket::connect): success, or why not.
  void onConnected(std::function<void(Result<void> connected)> handler);

  // Starts reading. Messages of a stream with a handler go there; those of a released stream
  // (its flow is done; the peer may still have sent some) are dropped; others go to `unclaimed`.
  using StreamMessage = std::function<void(std::uint16_t stream, std::uint32_t ppid,
                                           std::span<const std::uint8_t> message, std::uint64_t now)>;
  void start(StreamMessage unclaimed, transport::ErrorHandler onError);
  void claim(std::uint16_t stream, transport::MessageHandler onMessage, transport::ErrorHandler onError);
  void release(std::uint16_t stream);
  bool hasClaims() const { return !streams_.empty(); }

  // Sends one message: Full when the send buffer is (retry after waitWritable()); Failed
  // when the association has (a hard error fails it, reported to its streams).
  enum class Sent { Yes, Full, Failed };
  Sent trySend(const std::uint8_t* data, std::size_t length, const SendInfo& info);
  // Whether it ended because the peer shut it down or closed it in order (ChannelEnd::byPeer()):
  // then a send that fails is no failure of the flow.
  bool endedByPeer() const { return endedByPeer_; }
  void waitWritable(std::function<void()> handler);

  // A DataChannel for one stream, for a Flow.
  std::shared_ptr<transport::DataChannel> stream(std::uint16_t stream, StreamPolicy policy);

  // Closes the association for its users at once. After the peer's SHUTDOWN the socket itself
  // stays open until the shutdown completes (SHUTDOWN COMPLETE, an ABORT, or kFinishWait):
  // usrsctp 0.9.5 frees a socket closed while its receive thread is still processing that
  // association's last packets and then writes to the freed memory (seen: a passive's heap
  // corrupted once in a few hundred measurements, when a socket was closed between the peer's
  // SHUTDOWN and its SHUTDOWN COMPLETE).
  void close();
  bool closed() const { return closed_; }
  // The graceful end: SHUTDOWN after what was sent is acknowledged; reported like a failure.
  void shutdown();
  // The last stream is done: SHUTDOWN (what the peer still sends is read and dropped), and
  // close once the peer has shut down too, or after kFinishWait. Closing at once with unread
  // data would ABORT the association, which a reference active does not survive.
  void finish();
  static constexpr std::chrono::seconds kFinishWait{3};

private:
  void readMore();
  void onReadable();
  void fail(const transport::ChannelEnd& end);
  // After close() during a peer's shutdown: reads only for the end of the association, then
  // closes the socket.
  void awaitShutdownComplete();
  void closeSocket();

  asio::io_context& io_;
  std::unique_ptr<Socket> socket_;
  std::string peer_;
  std::vector<std::uint8_t> buffer_, partial_;
  StreamMessage unclaimed_;
  transport::ErrorHandler onError_;
  struct Claim {
    transport::MessageHandler onMessage;
    transport::ErrorHandler onError;
  };
  std::map<std::uint16_t, Claim> streams_;
  std::set<std::uint16_t> released_;
  std::vector<std::function<void()>> writeWaiters_;
  bool waitingWritable_ = false;
  std::function<void(Result<void>)> connected_;
  bool up_ = false, closed_ = false, failed_ = false, finishing_ = false;
  bool peerShutdown_ = false;  // the peer's SHUTDOWN has arrived
  bool shutdownSent_ = false;  // this side's SHUTDOWN (shutdown())
  bool endedByPeer_ = false;   // see endedByPeer()
  bool gone_ = false;          // the association has ended (SHUTDOWN COMPLETE, ABORT, EOF, error)
  bool socketClosed_ = false;
  std::shared_ptr<asio::steady_timer> lingerTimer_;  // holds the association while it waits for the end
  std::shared_ptr<asio::steady_timer> finishTimer_;
};

}  // namespace npm::sctp
