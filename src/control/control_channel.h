// NPMP-CONTROL over a stream socket (TCP or MPTCP): framed messages, a write queue, and a
// background reader so that a waiter can ask for "the next message within T" and learn at
// once when the connection is lost.
#pragma once

#include <utility>  // Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "npmp/messages.h"

namespace npm::control {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// Runs the io_context until it stops; an exception escaping a handler is logged as an
// internal error instead of ending the process (the passive keeps serving the others).
void runLoop(asio::io_context& io);

class ControlError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// A one-shot or repeatable wake-up for a waiting coroutine (single-threaded use).
class Event {
public:
  explicit Event(const asio::any_io_executor& executor) : timer_(executor) {}
  // Waits until notify() or the deadline; true if notified.
  asio::awaitable<bool> wait(Clock::time_point deadline);
  void notify();
  void reset() { notified_ = false; }
  bool notified() const { return notified_; }

private:
  asio::steady_timer timer_;
  bool notified_ = false;
};

class ControlChannel : public std::enable_shared_from_this<ControlChannel> {
public:
  // `incoming` says which messages may arrive; anything else fails the connection at once.
  ControlChannel(asio::ip::tcp::socket socket, npmp::Channel incoming);
  ~ControlChannel();

  void start();  // begins reading
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
  void close();

  asio::ip::tcp::socket& socket() { return socket_; }
  const std::string& peerName() const { return peerName_; }
  const asio::ip::address& peerAddress() const { return peerAddress_; }

private:
  asio::awaitable<void> readLoop();
  void writeNext();
  void fail(const std::string& reason);

  asio::ip::tcp::socket socket_;
  npmp::Channel incoming_;
  std::string peerName_;
  asio::ip::address peerAddress_;
  std::deque<npmp::Bytes> received_;
  std::deque<npmp::Bytes> outgoing_;
  std::size_t queuedBytes_ = 0;
  bool writing_ = false;
  bool failed_ = false;
  std::string failure_;
  Event messageEvent_, drainEvent_;
  Event* failureWatcher_ = nullptr;
};

}  // namespace npm::control
