#include "sctp/association.h"

#include <boost/asio/post.hpp>

#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"

namespace npm::sctp {

using transport::ChannelEnd;
using transport::DataChannel;
using transport::ErrorHandler;
using transport::MessageHandler;
using transport::PathSample;
using transport::SendHandler;

namespace {

constexpr std::size_t kMaxMessage = 65536;

// One flow's stream of an association.
class SctpStreamChannel : public DataChannel, public std::enable_shared_from_this<SctpStreamChannel> {
public:
  SctpStreamChannel(std::shared_ptr<Association> association, std::uint16_t stream, StreamPolicy policy)
      : association_(std::move(association)),
        stream_(stream),
        policy_(policy),
        random_(flowspec::Random::seededOrEntropy(policy.seed)) {}

  void send(const std::vector<asio::const_buffer>& buffers, std::size_t, SendHandler handler) override {
    buffers_ = &buffers;
    handler_ = std::move(handler);
    next_ = sent_ = 0;
    trySend();
  }

  void receive(MessageHandler onMessage, ErrorHandler onError) override {
    association_->claim(stream_, std::move(onMessage), std::move(onError));
  }

  void close() override {
    if (closed_) return;
    closed_ = true;
    association_->release(stream_);
    if (!association_->hasClaims()) association_->finish();
  }

  int fd() const override { return -1; }
  bool isByteStream() const override { return false; }  // message-oriented: no byte-stream drain
  bool reliable() const override { return true; }
  long unsent() override { return association_->socket().unsentChunks(); }
  void samplePaths(std::vector<PathSample>& out) override {
    if (!closed_ && !association_->closed()) association_->socket().samplePaths(out);
  }
  std::string peerName() const override { return association_->peerName() + " stream " + std::to_string(stream_); }

private:
  void trySend() {
    const std::size_t messages = buffers_->size() / 2;
    while (next_ < messages) {
      const auto& header = (*buffers_)[2 * next_];
      const auto& payload = (*buffers_)[2 * next_ + 1];
      scratch_.resize(header.size() + payload.size());
      std::memcpy(scratch_.data(), header.data(), header.size());
      if (payload.size() > 0) std::memcpy(scratch_.data() + header.size(), payload.data(), payload.size());
      SendInfo info;
      info.stream = stream_;
      const bool data = !scratch_.empty() && scratch_[0] == static_cast<std::uint8_t>(npmp::Type::Data);
      info.ppid = data ? npmp::kPpidData : npmp::kPpidControl;
      if (data) {
        info.unordered = policy_.ordered < 1.0 && random_.uniform() >= policy_.ordered;
        if (policy_.reliable < 1.0 && random_.uniform() >= policy_.reliable) {
          info.prPolicy = policy_.prPolicy;
          info.prValue = policy_.prValue;
        }
      }
      if (const auto sent = association_->trySend(scratch_.data(), scratch_.size(), info);
          sent != Association::Sent::Yes) {
        if (sent == Association::Sent::Failed) {
          // eof: the peer ended the association in order (the stream's end says so already)
          if (association_->endedByPeer()) {
            finish(asio::error::eof);
          } else {
            finish(asio::error::connection_aborted);
          }
          return;
        }
        association_->waitWritable([self = shared_from_this()] {
          if (self->closed_) return self->finish(asio::error::operation_aborted);
          self->trySend();
        });
        return;
      }
      ++sent_;
      ++next_;
    }
    asio::post(association_->io(), [self = shared_from_this()] { self->finish({}); });
  }

  void finish(const boost::system::error_code& ec) {
    auto handler = std::move(handler_);
    handler_ = nullptr;
    if (handler) handler(ec, sent_, 0);
  }

  std::shared_ptr<Association> association_;
  std::uint16_t stream_;
  StreamPolicy policy_;
  flowspec::Random random_;
  const std::vector<asio::const_buffer>* buffers_ = nullptr;
  SendHandler handler_;
  std::size_t next_ = 0, sent_ = 0;
  std::vector<std::uint8_t> scratch_;
  bool closed_ = false;
};

}  // namespace

StreamPolicy streamPolicy(double ordered, double reliable, std::uint32_t trials) {
  StreamPolicy p;
  p.ordered = ordered;
  p.reliable = reliable;
  if (trials == npmp::kRetransmitUnlimited || (trials & ~npmp::kRetransmitTimeFlag) == 0x7FFFFFFFU) {
    p.prPolicy = PrPolicy::Rtx;  // unreliable without rtx_*: no retransmission at all
    p.prValue = 0;
  } else if (trials & npmp::kRetransmitTimeFlag) {
    p.prPolicy = PrPolicy::Ttl;
    p.prValue = trials & ~npmp::kRetransmitTimeFlag;
    if (p.reliable >= 1.0) p.reliable = 0.0;  // rtx_timeout= alone: every message has the lifetime
  } else {
    p.prPolicy = PrPolicy::Rtx;
    p.prValue = trials;
    if (p.reliable >= 1.0) p.reliable = 0.0;  // rtx_trials= alone: every message has the limit
  }
  return p;
}

Association::Association(asio::io_context& io, std::unique_ptr<Socket> socket, std::string peer)
    : io_(io), socket_(std::move(socket)), peer_(std::move(peer)) {
  buffer_.resize(kMaxMessage + 1);
}

Association::~Association() {
  closed_ = true;
  closeSocket();
}

void Association::onConnected(std::function<void(Result<void>)> handler) {
  connected_ = std::move(handler);
  socket_->asyncWait(true, [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self || !self->connected_) return;
    const int error = self->socket_->connectError();
    auto h = std::move(self->connected_);
    self->connected_ = nullptr;
    self->up_ = error == 0;
    if (error == 0) return h({});
    h(Failure{std::strerror(error)});
  });
}

void Association::start(StreamMessage unclaimed, ErrorHandler onError) {
  unclaimed_ = std::move(unclaimed);
  onError_ = std::move(onError);
  readMore();
}

void Association::claim(std::uint16_t stream, MessageHandler onMessage, ErrorHandler onError) {
  streams_[stream] = Claim{std::move(onMessage), std::move(onError)};
  released_.erase(stream);
}

void Association::release(std::uint16_t stream) {
  if (streams_.erase(stream) > 0) released_.insert(stream);
}

void Association::readMore() {
  if (closed_) return;
  socket_->asyncWait(false, [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->onReadable();
  });
}

void Association::onReadable() {
  if (closed_) return;
  auto self = shared_from_this();
  for (int i = 0; i < 256 && !closed_; ++i) {
    ReceiveInfo info;
    const long n = socket_->receive(buffer_.data(), buffer_.size(), info);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      gone_ = true;
      fail(ChannelEnd::failed(std::strerror(errno)));
      return;
    }
    if (n == 0) {
      gone_ = true;
      fail(ChannelEnd(ChannelEnd::Reason::kAssociationClosedByPeer));
      return;
    }
    const std::uint8_t* data = buffer_.data();
    std::size_t length = static_cast<std::size_t>(n);
    if (!info.endOfRecord || !partial_.empty()) {  // a message in pieces
      partial_.insert(partial_.end(), data, data + length);
      if (partial_.size() > kMaxMessage + 1024) {
        fail(ChannelEnd::protocolViolation("message larger than 64 KiB: not NPMP"));
        return;
      }
      if (!info.endOfRecord) continue;
      data = partial_.data();
      length = partial_.size();
    }
    if (info.notification) {
      using enum ChannelEnd::Reason;
      switch (socket_->notification(data, length)) {
        case AssociationEvent::CommLost:
          gone_ = true;
          fail(ChannelEnd(kAssociationLost));
          return;
        case AssociationEvent::ShutdownComplete:
          gone_ = true;
          fail(ChannelEnd(kAssociationShutDownByPeer));
          return;
        case AssociationEvent::Shutdown:
          peerShutdown_ = true;
          fail(ChannelEnd(kAssociationShutDownByPeer));
          return;
        case AssociationEvent::CantStart:
          gone_ = true;
          fail(ChannelEnd(kAssociationCannotStart));
          return;
        case AssociationEvent::Restart: log::warning("SCTP association with " + peer_ + " restarted"); break;
        default: break;
      }
    } else {
      const std::uint64_t now = nowMicros();
      const std::span<const std::uint8_t> message(data, length);
      auto it = streams_.find(info.stream);
      if (it != streams_.end()) {
        auto handler = it->second.onMessage;  // the handler may release the stream
        handler(message, now);
      } else if (unclaimed_ && !released_.count(info.stream)) {
        unclaimed_(info.stream, info.ppid, message, now);
      }
    }
    partial_.clear();
  }
  readMore();
}

Association::Sent Association::trySend(const std::uint8_t* data, std::size_t length, const SendInfo& info) {
  if (closed_ || failed_) return Sent::Failed;
  const long n = socket_->send(data, length, info);
  if (n >= 0) return Sent::Yes;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) return Sent::Full;
  if ((errno == ESHUTDOWN || errno == EPIPE) && !shutdownSent_) {
    // The association is shutting down and this side did not begin it: the peer's SHUTDOWN,
    // whose notification has not been read yet (a reference active ends its data association
    // this way while a bidirectional flow still sends towards it).
    peerShutdown_ = true;
    fail(ChannelEnd(ChannelEnd::Reason::kAssociationShutDownByPeer));
    return Sent::Failed;
  }
  fail(ChannelEnd::failed(std::string("send failed: ") + std::strerror(errno)));
  return Sent::Failed;
}

void Association::waitWritable(std::function<void()> handler) {
  writeWaiters_.push_back(std::move(handler));
  if (waitingWritable_) return;
  waitingWritable_ = true;
  socket_->asyncWait(true, [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return;
    self->waitingWritable_ = false;
    auto waiters = std::move(self->writeWaiters_);
    self->writeWaiters_.clear();
    for (auto& w : waiters) w();
  });
}

std::shared_ptr<DataChannel> Association::stream(std::uint16_t stream, StreamPolicy policy) {
  return std::make_shared<SctpStreamChannel>(shared_from_this(), stream, policy);
}

void Association::fail(const ChannelEnd& end) {
  if (failed_ || closed_) return;
  failed_ = true;
  endedByPeer_ = end.byPeer();
  auto claims = streams_;
  for (auto& [id, claim] : claims) {
    if (claim.onError) claim.onError(end);
  }
  if (onError_) onError_(end);
}

void Association::shutdown() {
  if (closed_ || failed_) return;
  shutdownSent_ = true;
  socket_->shutdownWrite();
}

void Association::finish() {
  if (closed_ || finishing_) return;
  finishing_ = true;
  // Done for its users: another CMT association may take the process-wide settings now, also
  // while this one's shutdown completes (a next run started within milliseconds was refused).
  socket_->releaseProcessWide();
  if (failed_) {
    close();
    return;
  }
  unclaimed_ = nullptr;                               // drop what still arrives
  onError_ = [this](const ChannelEnd&) { close(); };  // the peer's SHUTDOWN (or a failure)
  socket_->shutdownWrite();
  // The timer holds the association until it is closed.
  finishTimer_ = std::make_shared<asio::steady_timer>(io_, kFinishWait);
  finishTimer_->async_wait([self = shared_from_this()](const boost::system::error_code&) { self->close(); });
}

void Association::close() {
  if (closed_) return;
  closed_ = true;
  socket_->releaseProcessWide();
  if (finishTimer_) finishTimer_->cancel();
  if (!peerShutdown_ || gone_) return closeSocket();
  // The timer holds the association until the socket is closed; the read does not.
  lingerTimer_ = std::make_shared<asio::steady_timer>(io_, kFinishWait);
  lingerTimer_->async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->socketClosed_) return;
    log::debug("SCTP association with " + self->peer_ + ": its shutdown did not complete within " +
               std::to_string(kFinishWait.count()) + " s; closed");
    self->closeSocket();
  });
  awaitShutdownComplete();
}

void Association::closeSocket() {
  if (socketClosed_) return;
  socketClosed_ = true;
  if (finishTimer_) finishTimer_->cancel();
  if (lingerTimer_) lingerTimer_->cancel();
  socket_->close();
}

void Association::awaitShutdownComplete() {
  socket_->asyncWait(false, [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self || self->socketClosed_) return;
    for (int i = 0; i < 256; ++i) {
      ReceiveInfo info;
      const long n = self->socket_->receive(self->buffer_.data(), self->buffer_.size(), info);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) return self->closeSocket();
      if (!info.notification) continue;  // data after close(): dropped
      const auto event = self->socket_->notification(self->buffer_.data(), static_cast<std::size_t>(n));
      if (event == AssociationEvent::ShutdownComplete || event == AssociationEvent::CommLost) {
        log::debug("SCTP association with " + self->peer_ + ": " +
                   (event == AssociationEvent::ShutdownComplete ? "shutdown complete" : "aborted by the peer"));
        return self->closeSocket();
      }
    }
    self->awaitShutdownComplete();
  });
}

}  // namespace npm::sctp
