// NPMP-CONTROL over TCP, MPTCP or SCTP: a transport that delivers whole messages, a write
// queue, and a waiter that asks for "the next message within T" and learns at once when
// the connection is lost.
#pragma once

#include "common/asio_awaitable.h"  // first: Boost 1.74 (see there)

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "common/result.h"
#include "npmp/messages.h"
#include "transport/async.h"
#include "transport/channel_end.h"

namespace npm::sctp {
class Association;
}

namespace npm::control {

// Runs the io_context until it stops; an exception escaping a handler is logged as an
// internal error instead of ending the process (the passive keeps serving the others).
void runLoop(asio::io_context& io);

class ControlError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// How control messages travel: whole messages in, whole messages out.
class ControlTransport {
public:
  virtual ~ControlTransport() = default;
  // Delivers each message; `onEnd` once when the connection ends (closed, failed, garbage).
  virtual void start(std::function<void(npmp::Bytes)> onMessage, transport::ErrorHandler onEnd) = 0;
  // Writes one message; `done` gets whether it was written.
  virtual void write(const npmp::Bytes& message, std::function<void(Result<void> written)> done) = 0;
  virtual void close() = 0;
  // Starts a graceful end where the transport needs one before the process exits (userland
  // SCTP: its threads end with the process, so an association closed at exit would linger at
  // the peer until its heartbeats fail); the end is reported through `onEnd`.
  virtual bool shutdown() { return false; }
  virtual std::string protocol() const = 0;  // "TCP", "MPTCP", "SCTP (userland)"
};

// Messages framed by their TLV length on a TCP or MPTCP socket; `incoming` says which
// messages may arrive (anything else fails the connection as soon as its header is seen).
std::shared_ptr<ControlTransport> tcpControl(asio::ip::tcp::socket socket, npmp::MessageSet incoming, bool mptcp);
// Messages on stream 0 of an SCTP association, PPID 36.
std::shared_ptr<ControlTransport> sctpControl(std::shared_ptr<sctp::Association> association,
                                              npmp::MessageSet incoming);

class ControlChannel : public std::enable_shared_from_this<ControlChannel> {
public:
  ControlChannel(asio::any_io_executor executor, std::shared_ptr<ControlTransport> transport, std::string peerName,
                 asio::ip::address peerAddress);
  ~ControlChannel();

  void start();  // begins reading
  // A peer that lets more than `bytes` of our messages pile up (it does not read) fails the
  // connection. Unlimited by default.
  void limitQueue(std::size_t bytes) { queueLimit_ = bytes; }
  void send(npmp::Bytes message);
  // Waits until less than `limit` bytes wait to be written; throws ControlError on failure.
  asio::awaitable<void> drained(std::size_t limit = 0);
  // The next message within `timeout`, or nullopt on timeout; throws ControlError when
  // the connection failed (closed, garbage framing).
  asio::awaitable<std::optional<npmp::Bytes>> next(Clock::duration timeout);

  bool failed() const { return failed_; }
  const std::string& failure() const { return failure_; }
  // Notified when the connection fails (for waiters that are not in next()).
  void watchFailure(Event* event) { failureWatcher_ = event; }
  // Starts the transport's graceful end if it needs one (see ControlTransport::shutdown);
  // false if there is nothing to wait for.
  bool shutdown() { return !failed_ && transport_->shutdown(); }
  void close();

  const std::string& peerName() const { return peerName_; }
  const asio::ip::address& peerAddress() const { return peerAddress_; }
  std::string protocol() const { return transport_->protocol(); }

private:
  void writeNext();
  void fail(const std::string& reason);

  std::shared_ptr<ControlTransport> transport_;
  std::string peerName_;
  asio::ip::address peerAddress_;
  std::deque<npmp::Bytes> received_;
  std::deque<npmp::Bytes> outgoing_;
  std::size_t queuedBytes_ = 0;
  std::size_t queueLimit_ = static_cast<std::size_t>(-1);
  bool writing_ = false;
  bool failed_ = false;
  std::string failure_;
  Event messageEvent_, drainEvent_;
  Event* failureWatcher_ = nullptr;
};

}  // namespace npm::control
