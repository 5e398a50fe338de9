#include "control/control_channel.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "common/log.h"
#include "transport/channel.h"

namespace npm::control {

void runLoop(asio::io_context& io) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      log::error(std::string("internal error: ") + e.what());
    }
  }
}

asio::awaitable<bool> Event::wait(Clock::time_point deadline) {
  if (notified_) co_return true;
  timer_.expires_at(deadline);
  boost::system::error_code ec;
  co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return notified_;
}

void Event::notify() {
  notified_ = true;
  timer_.cancel();
}

ControlChannel::ControlChannel(asio::ip::tcp::socket socket, npmp::Channel incoming)
    : socket_(std::move(socket)),
      incoming_(incoming),
      messageEvent_(socket_.get_executor()),
      drainEvent_(socket_.get_executor()) {
  boost::system::error_code ec;
  const auto remote = socket_.remote_endpoint(ec);
  if (!ec) {
    peerAddress_ = remote.address();
    if (peerAddress_.is_v6() && peerAddress_.to_v6().is_v4_mapped()) {
      peerAddress_ = asio::ip::make_address_v4(asio::ip::v4_mapped, peerAddress_.to_v6());
    }
    peerName_ = transport::endpointName(remote.address(), remote.port());
  } else {
    peerName_ = "(unknown)";
  }
}

ControlChannel::~ControlChannel() {
  boost::system::error_code ec;
  socket_.close(ec);
}

void ControlChannel::start() {
  asio::co_spawn(socket_.get_executor(), [self = shared_from_this()]() { return self->readLoop(); },
                 asio::detached);
}

asio::awaitable<void> ControlChannel::readLoop() {
  auto self = shared_from_this();  // keeps the channel alive while reading
  for (;;) {
    npmp::Bytes message(4);
    boost::system::error_code ec;
    co_await asio::async_read(socket_, asio::buffer(message), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      fail(ec == asio::error::eof ? "connection closed by the peer" : ec.message());
      co_return;
    }
    std::string error = npmp::checkHeader(message.data(), incoming_);
    if (!error.empty()) {
      fail(error);
      co_return;
    }
    const std::size_t length = npmp::declaredLength(message);
    message.resize(length);
    if (length > 4) {
      co_await asio::async_read(socket_, asio::buffer(message.data() + 4, length - 4),
                                asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        fail(ec == asio::error::eof ? "connection closed by the peer in the middle of a message"
                                    : ec.message());
        co_return;
      }
    }
    received_.push_back(std::move(message));
    messageEvent_.notify();
  }
}

void ControlChannel::fail(const std::string& reason) {
  if (failed_) return;
  failed_ = true;
  failure_ = reason;
  messageEvent_.notify();
  drainEvent_.notify();
  if (failureWatcher_ != nullptr) failureWatcher_->notify();
}

void ControlChannel::send(npmp::Bytes message) {
  if (failed_) return;
  queuedBytes_ += message.size();
  outgoing_.push_back(std::move(message));
  if (!writing_) writeNext();
}

void ControlChannel::writeNext() {
  if (outgoing_.empty() || failed_) {
    writing_ = false;
    return;
  }
  writing_ = true;
  asio::async_write(socket_, asio::buffer(outgoing_.front()),
                    [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                      if (ec) {
                        self->writing_ = false;
                        self->fail(ec.message());
                        return;
                      }
                      self->queuedBytes_ -= self->outgoing_.front().size();
                      self->outgoing_.pop_front();
                      self->drainEvent_.notify();
                      self->writeNext();
                    });
}

asio::awaitable<void> ControlChannel::drained(std::size_t limit) {
  while (queuedBytes_ > limit) {
    if (failed_) throw ControlError(failure_);
    drainEvent_.reset();
    co_await drainEvent_.wait(Clock::now() + std::chrono::seconds(60));
    if (!drainEvent_.notified()) throw ControlError("the peer does not read its control connection");
  }
  if (failed_) throw ControlError(failure_);
}

asio::awaitable<std::optional<npmp::Bytes>> ControlChannel::next(Clock::duration timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    if (!received_.empty()) {
      npmp::Bytes message = std::move(received_.front());
      received_.pop_front();
      co_return message;
    }
    if (failed_) throw ControlError(failure_);
    if (Clock::now() >= deadline) co_return std::nullopt;
    messageEvent_.reset();
    co_await messageEvent_.wait(deadline);
  }
}

void ControlChannel::close() {
  failed_ = true;
  if (failure_.empty()) failure_ = "closed";
  boost::system::error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

}  // namespace npm::control
