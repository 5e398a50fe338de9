// The QUIC connection's input: datagrams from the socket into ngtcp2, the reactions to what it
// read, and whole messages to the flows (connection.cc has the overview).
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <sys/socket.h>

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cerrno>
#include <string>

#include "common/clock.h"
#include "quic/connection.h"
#include "quic/connection_detail.h"
#include "quic/tls.h"

namespace npm::quic {

using transport::ChannelEnd;
using namespace detail;

namespace {

// The peer's CONNECTION_CLOSE in words.
std::string closeReason(const ngtcp2_connection_close_error& e) {
  std::string reason;
  if (e.reasonlen > 0 && e.reason != nullptr) {
    reason.assign(reinterpret_cast<const char*>(e.reason), e.reasonlen);
    reason.erase(std::remove_if(reason.begin(), reason.end(), [](char c) { return c < 0x20 || c > 0x7e; }),
                 reason.end());
  }
  std::string text;
  if (e.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION) {
    text = "application error " + std::to_string(e.error_code);
  } else if ((e.error_code & ~0xffull) == NGTCP2_CRYPTO_ERROR) {
    text = "TLS alert " + alertName(static_cast<std::uint8_t>(e.error_code & 0xff));
  } else {
    text = "transport error " + std::to_string(e.error_code);
  }
  return reason.empty() ? text : text + ": " + reason;
}

}  // namespace

void Connection::readMore() {
  socket_->async_wait(asio::ip::udp::socket::wait_read, [weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self || ec || self->state_ == State::Ended) return;
    self->drainSocket();
  });
}

void Connection::drainSocket() {
  auto self = shared_from_this();
  receiveBuffer_.resize(kMaxDatagram);
  for (int i = 0; i < kDatagramsPerRead && state_ != State::Ended; ++i) {
    const ssize_t n = ::recv(socket_->native_handle(), receiveBuffer_.data(), receiveBuffer_.size(), MSG_DONTWAIT);
    if (n < 0) {
      // ECONNREFUSED: an ICMP error of an earlier datagram (nobody listens yet, or any more):
      // QUIC's own timers decide when to give up.
      if (errno == EINTR || errno == ECONNREFUSED) continue;
      break;
    }
    onDatagram(std::span<const std::uint8_t>(receiveBuffer_.data(), static_cast<std::size_t>(n)), timestamp());
  }
  afterInput();
  if (state_ != State::Ended) readMore();
}

bool Connection::onDatagram(std::span<const std::uint8_t> datagram, std::uint64_t now) {
  if (conn_ == nullptr || state_ == State::Ended) return true;
  ++counters_.datagramsReceived;
  const ngtcp2_path path = pathOf(local_, remote_);
  ngtcp2_pkt_info info{};
  const int rv = ngtcp2_conn_read_pkt(conn_, &path, &info, datagram.data(), datagram.size(), now);
  if (rv == 0) return true;
  auto self = shared_from_this();
  switch (rv) {
    case NGTCP2_ERR_DRAINING: {
      // The peer's CONNECTION_CLOSE.
      ngtcp2_connection_close_error e;
      ngtcp2_conn_get_connection_close_error(conn_, &e);
      const bool noError = e.error_code == 0 && e.type != NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT_IDLE_CLOSE;
      const std::string who = role_ == Role::Client ? "the server" : "the client";
      endedByPeer_ = noError;
      const std::string why = "QUIC connection closed by " + who + " (" + closeReason(e) + ")";
      const bool crypto = (e.error_code & ~0xffull) == NGTCP2_CRYPTO_ERROR &&
                          e.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT;
      end(noError ? ChannelEnd(ChannelEnd::Reason::kClosedByPeer) : ChannelEnd::failed(why),
          crypto ? "TLS handshake failed: " + who + " sent the TLS alert " +
                       alertName(static_cast<std::uint8_t>(e.error_code & 0xff))
                 : why);
      return true;
    }
    case NGTCP2_ERR_DROP_CONN:
    case NGTCP2_ERR_RETRY:
      // Garbage that looked like a first Initial (a server's new connection): forgotten without
      // a word. Later in a connection's life ngtcp2 asks for a silent drop only of a connection
      // that cannot go on.
      if (role_ == Role::Server && state_ == State::Handshake && counters_.datagramsReceived == 1) {
        state_ = State::Ended;
        return false;
      }
      end(ChannelEnd::failed("QUIC connection dropped: " + std::string(ngtcp2_strerror(rv))),
          "QUIC handshake dropped: " + std::string(ngtcp2_strerror(rv)));
      return true;
    case NGTCP2_ERR_CRYPTO: {
      const auto alert = ngtcp2_conn_get_tls_alert(conn_);
      closeWithAlert(alert, tls_->failure(alert));
      return true;
    }
    case NGTCP2_ERR_CALLBACK_FAILURE:
      if (!callbackFailure_.empty()) {
        if (callbackAlert_ != 0) {
          closeWithAlert(callbackAlert_, callbackFailure_);
        } else {
          failWith(NGTCP2_ERR_PROTO, callbackFailure_);
        }
        return true;
      }
      [[fallthrough]];
    default: failWith(rv, std::string("QUIC: ") + ngtcp2_strerror(rv)); return true;
  }
}

void Connection::afterInput() {
  auto self = shared_from_this();
  if (handshakeCompleted_ && state_ == State::Handshake) handshakeDone();
  deliverAll();
  if (state_ != State::Ended) flush();
}

void Connection::handshakeDone() {
  state_ = State::Established;
  if (onHandshake_) {
    auto handler = std::move(onHandshake_);
    onHandshake_ = nullptr;
    handler(Result<void>{});
  }
}

void Connection::deliverAll() {
  auto self = shared_from_this();
  std::vector<std::uint16_t> numbers;
  numbers.swap(toDeliver_);
  std::sort(numbers.begin(), numbers.end());
  numbers.erase(std::unique(numbers.begin(), numbers.end()), numbers.end());
  for (const auto number : numbers) {
    auto& f = flow(number);
    if (!f.announced && onChannel_ && !f.released && state_ != State::Ended) {
      f.announced = true;
      auto handler = onChannel_;
      handler(number, channel(number));
    }
    deliver(f);
  }
}

// Whole messages to the flow's handler; their bytes go back to the peer as credit (stream and
// connection), so that a flow whose reader does not read holds back its sender, not the others.
void Connection::deliver(Flow& f) {
  if (f.released) {
    f.onMessage = nullptr;
  } else if (f.onMessage && !f.endTold) {
    const std::uint64_t now = nowMicros();
    bool protocolViolation = false;
    while (!f.released && !f.endTold) {
      auto next = f.in.next();
      if (!next) {
        f.end = ChannelEnd::protocolViolation(next.error());
        protocolViolation = true;
        break;
      }
      if (!*next) break;
      const auto message = **next;
      f.uncredited += message.size();
      f.delivered += message.size();
      auto handler = f.onMessage;  // the handler may release the flow (and with it f.onMessage)
      handler(message, now);
      if (state_ == State::Ended && !f.end) break;
    }
    if (protocolViolation && conn_ != nullptr && state_ != State::Ended) {
      // Nothing more of this stream is of use: the peer may stop sending it.
      ngtcp2_conn_shutdown_stream_read(conn_, remoteStream(f.number), kAbortCode);
      scheduleFlush();
    }
    if (!f.end && f.finReceived && !protocolViolation) {
      auto next = f.in.next();
      if (next && !*next) f.end = ChannelEnd::ofRead(asio::error::eof, f.in.buffered() > 0);
    }
  }
  if (f.uncredited > 0 && conn_ != nullptr && state_ != State::Ended) {
    ngtcp2_conn_extend_max_stream_offset(conn_, remoteStream(f.number), f.uncredited);
    ngtcp2_conn_extend_max_offset(conn_, f.uncredited);
    f.uncredited = 0;
    scheduleFlush();
  }
  if (f.end && !f.endTold && f.onError && !f.released) {
    f.endTold = true;
    if (f.sendHandler) {
      completeSend(f, f.end->byPeer() ? boost::system::error_code(asio::error::eof)
                                      : boost::system::error_code(asio::error::connection_aborted));
    }
    auto handler = f.onError;
    handler(*f.end);
  }
}

}  // namespace npm::quic
