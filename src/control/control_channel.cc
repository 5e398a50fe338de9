#include "control/control_channel.h"

#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "common/log.h"
#include "transport/data_channel.h"
#include "sctp/association.h"
#include "transport/sockets.h"

namespace npm::control {

using transport::ChannelEnd;

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

namespace {

// ---------------------------------------------------------------- TCP / MPTCP

class TcpControl : public ControlTransport, public std::enable_shared_from_this<TcpControl> {
public:
  TcpControl(asio::ip::tcp::socket socket, npmp::MessageSet incoming, bool mptcp)
      : socket_(std::move(socket)), incoming_(incoming), mptcp_(mptcp) {}

  void start(std::function<void(npmp::Bytes)> onMessage, transport::ErrorHandler onEnd) override {
    onMessage_ = std::move(onMessage);
    onEnd_ = std::move(onEnd);
    readHeader();
  }

  void write(const npmp::Bytes& message, std::function<void(Result<void>)> done) override {
    asio::async_write(
        socket_, asio::buffer(message),
        [self = shared_from_this(), done = std::move(done)](const boost::system::error_code& ec, std::size_t) {
          if (!ec) return done({});
          done(Failure{ec.message()});
        });
  }

  void close() override {
    closed_ = true;
    boost::system::error_code ec;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  std::string protocol() const override { return mptcp_ ? "MPTCP" : "TCP"; }

private:
  void readHeader() {
    message_.assign(4, 0);
    asio::async_read(socket_, asio::buffer(message_),
                     [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                       if (self->closed_) return;
                       if (ec) return self->onEnd_(ChannelEnd::ofRead(ec));
                       if (auto header = npmp::checkHeader(self->message_.data(), self->incoming_); !header) {
                         return self->onEnd_(ChannelEnd::protocolViolation(header.error()));
                       }
                       const std::size_t length = *npmp::declaredLength(self->message_);  // checked: at least 4
                       self->message_.resize(length);
                       if (length == 4) return self->deliver();
                       asio::async_read(self->socket_, asio::buffer(self->message_.data() + 4, length - 4),
                                        [self](const boost::system::error_code& ec2, std::size_t) {
                                          if (self->closed_) return;
                                          if (ec2) return self->onEnd_(ChannelEnd::ofRead(ec2, true));
                                          self->deliver();
                                        });
                     });
  }

  void deliver() {
    onMessage_(std::move(message_));
    readHeader();
  }

  asio::ip::tcp::socket socket_;
  npmp::MessageSet incoming_;
  bool mptcp_;
  npmp::Bytes message_;
  std::function<void(npmp::Bytes)> onMessage_;
  transport::ErrorHandler onEnd_;
  bool closed_ = false;
};

// ---------------------------------------------------------------------- SCTP

class SctpControl : public ControlTransport, public std::enable_shared_from_this<SctpControl> {
public:
  SctpControl(std::shared_ptr<sctp::Association> association, npmp::MessageSet incoming)
      : association_(std::move(association)), incoming_(incoming) {}

  void start(std::function<void(npmp::Bytes)> onMessage, transport::ErrorHandler onEnd) override {
    std::weak_ptr<SctpControl> weak = shared_from_this();
    association_->start(
        [weak, onMessage, onEnd](std::uint16_t, std::uint32_t, std::span<const std::uint8_t> m, std::uint64_t) {
          auto self = weak.lock();
          if (!self) return;
          if (auto checked = self->check(m); !checked) {
            return onEnd(ChannelEnd::protocolViolation(checked.error()));
          }
          onMessage(npmp::Bytes(m.begin(), m.end()));
        },
        onEnd);
  }

  void write(const npmp::Bytes& message, std::function<void(Result<void>)> done) override {
    sctp::SendInfo info;
    info.stream = 0;
    info.ppid = npmp::kPpidControl;
    const auto sent = association_->trySend(message.data(), message.size(), info);
    if (sent == sctp::Association::Sent::Yes) {
      asio::post(association_->io(), [done] { done({}); });
      return;
    }
    if (sent == sctp::Association::Sent::Failed) {
      asio::post(association_->io(), [done] { done(Failure{"the SCTP association failed"}); });
      return;
    }
    association_->waitWritable([self = shared_from_this(), message, done] { self->write(message, done); });
  }

  void close() override { association_->close(); }
  bool shutdown() override {
    association_->shutdown();
    return true;
  }
  std::string protocol() const override {
    return std::string("SCTP (") + sctp::stackName(association_->socket().stack()) + ")";
  }

private:
  // Whether a message of the association is one whole NPMP message that may come here.
  Result<void> check(std::span<const std::uint8_t> m) const {
    if (m.size() < 4) return Failure{"not NPMP: a message of " + std::to_string(m.size()) + " bytes"};
    if (auto header = npmp::checkHeader(m.data(), incoming_); !header) return Failure{header.error()};
    if (*npmp::declaredLength(m) != m.size()) {  // checked: at least 4
      return Failure{"not NPMP: the length field does not match the SCTP message"};
    }
    return {};
  }

  std::shared_ptr<sctp::Association> association_;
  npmp::MessageSet incoming_;
};

}  // namespace

std::shared_ptr<ControlTransport> tcpControl(asio::ip::tcp::socket socket, npmp::MessageSet incoming, bool mptcp) {
  return std::make_shared<TcpControl>(std::move(socket), incoming, mptcp);
}

std::shared_ptr<ControlTransport> sctpControl(std::shared_ptr<sctp::Association> association,
                                              npmp::MessageSet incoming) {
  return std::make_shared<SctpControl>(std::move(association), incoming);
}

ControlChannel::ControlChannel(asio::any_io_executor executor, std::shared_ptr<ControlTransport> transport,
                               std::string peerName, asio::ip::address peerAddress)
    : transport_(std::move(transport)),
      peerName_(std::move(peerName)),
      peerAddress_(transport::unmapped(peerAddress)),
      messageEvent_(executor),
      drainEvent_(executor) {}

ControlChannel::~ControlChannel() { transport_->close(); }

void ControlChannel::start() {
  std::weak_ptr<ControlChannel> weak = shared_from_this();
  transport_->start(
      [weak](npmp::Bytes message) {
        if (auto self = weak.lock()) {
          self->received_.push_back(std::move(message));
          self->messageEvent_.notify();
        }
      },
      [weak](const ChannelEnd& end) {
        if (auto self = weak.lock()) self->fail(end.text());
      });
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
  if (queuedBytes_ + message.size() > queueLimit_) {
    fail("the peer does not read its control connection (" + std::to_string(queuedBytes_) + " bytes unsent)");
    close();
    return;
  }
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
  // The handler keeps the channel, and with it the message being written, alive.
  transport_->write(outgoing_.front(), [self = shared_from_this()](Result<void> written) {
    if (!written) {
      self->writing_ = false;
      self->fail(written.error());
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
  fail("closed");  // wakes whoever waits for a message, a drain or a failure
  transport_->close();
}

}  // namespace npm::control
