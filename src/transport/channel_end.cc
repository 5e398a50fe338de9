#include "transport/channel_end.h"

#include <boost/asio/error.hpp>

namespace npm::transport {

ChannelEnd ChannelEnd::ofRead(const boost::system::error_code& error, bool withinMessage) {
  if (error != boost::asio::error::eof) return failed(error.message());
  return ChannelEnd(withinMessage ? Reason::kClosedByPeerMidMessage : Reason::kClosedByPeer);
}

bool ChannelEnd::byPeer() const {
  switch (reason_) {
    case Reason::kClosedByPeer:
    case Reason::kAssociationClosedByPeer:
    case Reason::kAssociationShutDownByPeer: return true;
    case Reason::kClosedByPeerMidMessage:  // it broke a message off
    case Reason::kAssociationLost:
    case Reason::kAssociationCannotStart:
    case Reason::kFailed:
    case Reason::kProtocolViolation: return false;
  }
  return false;
}

std::string ChannelEnd::text() const {
  switch (reason_) {
    case Reason::kClosedByPeer: return "connection closed by the peer";
    case Reason::kClosedByPeerMidMessage: return "connection closed by the peer in the middle of a message";
    case Reason::kAssociationClosedByPeer: return "association closed by the peer";
    case Reason::kAssociationShutDownByPeer: return "association shut down by the peer";
    case Reason::kAssociationLost: return "association lost (COMM_LOST)";
    case Reason::kAssociationCannotStart: return "cannot start the association";
    case Reason::kFailed:
    case Reason::kProtocolViolation: return detail_;
  }
  return detail_;
}

}  // namespace npm::transport
