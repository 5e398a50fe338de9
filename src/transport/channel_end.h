// How a channel ended: decided where it ended (a read's EOF, an SCTP association's event, a
// socket error, bytes that are not NPMP) and told to the channel's user once. The user asks
// what it needs (byPeer(): an orderly close, no failure) and prints text(), never the other
// way round.
#pragma once

#include <boost/system/error_code.hpp>

#include <functional>
#include <string>

namespace npm::transport {

class ChannelEnd {
public:
  enum class Reason {
    kClosedByPeer,               // EOF on a stream, between messages
    kClosedByPeerMidMessage,     // EOF on a stream, within a message
    kAssociationClosedByPeer,    // an SCTP association's EOF
    kAssociationShutDownByPeer,  // the peer's SHUTDOWN, or the SHUTDOWN COMPLETE that follows
    kAssociationLost,            // SCTP COMM_LOST: an ABORT, or the peer unreachable
    kAssociationCannotStart,     // SCTP CANT_STR_ASSOC
    kFailed,                     // a socket error or a failed send: see detail()
    kProtocolViolation,          // the peer sent what is not NPMP, or not for this channel: see detail()
  };

  explicit ChannelEnd(Reason reason) : reason_(reason) {}
  static ChannelEnd failed(std::string detail) { return ChannelEnd(Reason::kFailed, std::move(detail)); }
  static ChannelEnd protocolViolation(std::string detail) {
    return ChannelEnd(Reason::kProtocolViolation, std::move(detail));
  }
  // The end a failed read means: EOF is the peer closing (within a message if part of one
  // had arrived), anything else a failure.
  static ChannelEnd ofRead(const boost::system::error_code& error, bool withinMessage = false);

  Reason reason() const { return reason_; }
  // The peer closed in order (EOF between messages, an association's EOF or SHUTDOWN): what a
  // peer does when it is done, no failure of the transport or of the peer.
  bool byPeer() const;
  // The line for the log and the JSON document ("connection closed by the peer", the socket
  // error, what was wrong with the message).
  std::string text() const;

private:
  ChannelEnd(Reason reason, std::string detail) : reason_(reason), detail_(std::move(detail)) {}

  Reason reason_;
  std::string detail_;  // kFailed and kProtocolViolation: the line to print
};

// The channel has ended (see ChannelEnd); it is unusable from then on.
using ErrorHandler = std::function<void(const ChannelEnd& end)>;

}  // namespace npm::transport
