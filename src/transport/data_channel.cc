#include "transport/data_channel.h"
#include "common/clock.h"
#include "transport/sockets.h"
#include "transport/stream_framing.h"

#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/write.hpp>
#include <sys/socket.h>
#include <sys/uio.h>
#include <algorithm>
#include <climits>

#include <cerrno>
#include <cstring>
#include <optional>

namespace npm::transport {

std::string endpointName(const asio::ip::address& address, std::uint16_t port) {
  if (address.is_v6() && address.to_v6().is_v4_mapped())
    return unmapped(address).to_string() + ":" + std::to_string(port);
  if (address.is_v6()) return "[" + address.to_string() + "]:" + std::to_string(port);
  return address.to_string() + ":" + std::to_string(port);
}

namespace {

// A stream channel's receive buffer starts small (a connection that only identifies itself,
// or a slow flow, costs a few KiB) and doubles whenever a read fills it, up to 2 MiB.
constexpr std::size_t kStreamBufferFirst = 4096;
constexpr std::size_t kStreamBufferSize = 2 * 1024 * 1024;
constexpr std::size_t kReadChunk = 1024 * 1024;  // as much as a write (measure/flow.cc)
constexpr std::size_t kMaxMessage = 65535;
// A DATA message's payload is never inspected (NPMP fills it with a pattern): where this much of
// it or more has not been read yet, the rest is discarded in the kernel (recv with MSG_TRUNC on
// TCP and MPTCP) instead of being copied to user space, and the read after it takes only the
// next message's header. Below it, one large read that copies many messages costs less than two
// system calls per message. Measured on loopback (tests/bench/throughput.py, 2 cores): with
// 16000-byte messages 50-56 Gbit/s against 28-31 copying, 10000-12000 bytes +15-20 %; with the
// threshold at 3072 instead, 3500-byte messages fell from 28-31 to 9-11 Gbit/s and 6000-byte
// ones from 31-33 to 15-16.
constexpr std::size_t kDiscardAtLeast = 8192;
// This many messages below the threshold in a row, and reads are large again.
constexpr unsigned kSmallRunEndsDiscarding = 4;

// ------------------------------------------------------------------ stream channel

class StreamChannel : public DataChannel, public std::enable_shared_from_this<StreamChannel> {
public:
  explicit StreamChannel(asio::ip::tcp::socket socket, std::span<const std::uint8_t> unread = {})
      : socket_(std::move(socket)) {
    if (!unread.empty()) {
      buffer_.assign(unread.begin(), unread.end());
      buffer_.resize(std::max(buffer_.size(), kStreamBufferFirst));
      end_ = unread.size();
    }
    boost::system::error_code ec;
    socket_.non_blocking(true, ec);  // send() writes with writev() itself
    const auto remote = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("(unknown)") : endpointName(remote.address(), remote.port());
  }

  // One writev() for up to 1024 buffers (Asio's gather writes stop at 64), so that a batch
  // of small messages costs one system call, and a write moves about as much as a read.
  void send(const std::vector<asio::const_buffer>& buffers, std::size_t messages, SendHandler handler) override {
    iov_.resize(buffers.size());
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      iov_[i].iov_base = const_cast<void*>(buffers[i].data());
      iov_[i].iov_len = buffers[i].size();
    }
    next_ = 0;
    messages_ = messages;
    sendHandler_ = std::move(handler);
    writeMore();
  }

  void receive(MessageHandler onMessage, ErrorHandler onError) override {
    onMessage_ = std::move(onMessage);
    onError_ = std::move(onError);
    if (!reading_) {
      reading_ = true;
      if (end_ > begin_) {
        // Bytes carried over by moveTo(): delivered first, as a read would.
        asio::post(socket_.get_executor(), [self = shared_from_this()] { self->onRead({}, 0); });
        return;
      }
      buffer_.resize(kStreamBufferFirst);
      readMore();
    }
  }

  std::shared_ptr<DataChannel> moveTo(asio::io_context& io) override {
    boost::system::error_code ec;
    const auto local = socket_.local_endpoint(ec);
    if (closed_ || ec) return nullptr;
    const auto protocol = local.protocol();
    const std::span<const std::uint8_t> unread(buffer_.data() + begin_, end_ - begin_);
    asio::ip::tcp::socket moved(io);
    moved.assign(protocol, socket_.release());
    auto channel = std::make_shared<StreamChannel>(std::move(moved), unread);
    channel->expect_ = expect_;
    closed_ = true;  // onRead() stops after this message; the socket is the new channel's
    return channel;
  }

  void expect(npmp::MessageSet kind) override { expect_ = kind; }

  void close() override {
    closed_ = true;
    boost::system::error_code ec;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  void abort() override {
    closed_ = true;
    const ::linger now{1, 0};
    ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_LINGER, &now, sizeof now);
    boost::system::error_code ec;
    socket_.close(ec);
  }

  int fd() const override { return const_cast<asio::ip::tcp::socket&>(socket_).native_handle(); }
  bool isByteStream() const override { return true; }
  std::string peerName() const override { return peer_; }
  long unsent() override { return unsentBytes(socket_.native_handle()); }
  long unread() override { return reading_ && !closed_ ? unreadBytes(socket_.native_handle()) : 0; }
  std::uint64_t bytesRead() const override { return bytesRead_; }
  std::uint64_t bytesDiscarded() const override { return bytesDiscarded_; }
  void samplePaths(std::vector<PathSample>& out) override {
    if (!closed_) paths_.sample(socket_.native_handle(), out);
  }

private:
  void writeMore() {
    while (next_ < iov_.size()) {
      if (iov_[next_].iov_len == 0) {
        ++next_;
        continue;
      }
      const int count = static_cast<int>(std::min<std::size_t>(iov_.size() - next_, IOV_MAX));
      const ssize_t n = ::writev(socket_.native_handle(), iov_.data() + next_, count);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          socket_.async_wait(asio::ip::tcp::socket::wait_write,
                             [self = shared_from_this()](const boost::system::error_code& ec) {
                               if (ec) return self->completeSend(ec);
                               self->writeMore();
                             });
          return;
        }
        return completeSend(boost::system::error_code(errno, boost::system::system_category()));
      }
      for (std::size_t left = static_cast<std::size_t>(n); left > 0 && next_ < iov_.size();) {
        const std::size_t step = std::min(left, iov_[next_].iov_len);
        iov_[next_].iov_base = static_cast<char*>(iov_[next_].iov_base) + step;
        iov_[next_].iov_len -= step;
        left -= step;
        if (iov_[next_].iov_len == 0) ++next_;
      }
    }
    completeSend({});
  }

  void completeSend(const boost::system::error_code& ec) {
    // Always asynchronously: the handler starts the next batch.
    asio::post(socket_.get_executor(), [self = shared_from_this(), ec] {
      auto handler = std::move(self->sendHandler_);
      self->sendHandler_ = nullptr;
      if (handler) handler(ec, ec ? 0 : self->messages_, 0);
    });
  }

  void readMore() {
    // Room for the whole message being received, and more room for a busy connection.
    const std::size_t needed = end_ - begin_ >= 4 ? messageLength(buffer_.data() + begin_) : 4;
    std::size_t size = std::max(buffer_.size(), needed);
    if (filled_) size = std::max(size, std::min(2 * buffer_.size(), kStreamBufferSize));
    filled_ = false;
    if (begin_ > 0 && (begin_ + needed > size || size - end_ < size / 2)) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (size > buffer_.size()) buffer_.resize(size);
    // At most kReadChunk per read: a read moves about as much as a write, so that the two
    // directions of a bidirectional saturated flow share the one thread fairly. While the
    // flow's messages are large (their payloads discarded), only up to the next message's DATA
    // header: its payload is likely to be discarded too.
    std::size_t room = std::min(buffer_.size() - end_, kReadChunk);
    const bool headerOnly = discarding_;
    if (headerOnly) {
      const std::size_t have = end_ - begin_;  // the rest of the message begun, the next one's header
      const std::size_t upTo = have >= 4 ? needed + npmp::kDataHeaderSize : npmp::kDataHeaderSize;
      room = std::min(room, upTo - have);
    }
    socket_.async_read_some(
        asio::buffer(buffer_.data() + end_, room),
        [self = shared_from_this(), room, headerOnly](const boost::system::error_code& ec, std::size_t n) {
          self->filled_ = n == room && !headerOnly;  // a full buffer grows it
          self->bytesRead_ += n;
          self->onRead(ec, n);
        });
  }

  static std::size_t messageLength(const std::uint8_t* p) { return static_cast<std::size_t>(p[2]) << 8 | p[3]; }

  void onRead(const boost::system::error_code& ec, std::size_t n) {
    if (closed_) return;
    if (ec) {
      fail(ChannelEnd::ofRead(ec));
      return;
    }
    end_ += n;
    const std::uint64_t now = nowMicros();
    while (end_ - begin_ >= 4) {
      const std::uint8_t* p = buffer_.data() + begin_;
      const auto framed = frameLength(p, expect_);
      if (!framed) {
        fail(ChannelEnd::protocolViolation(framed.error()));
        return;
      }
      const std::size_t length = *framed;
      if (end_ - begin_ < length) {
        if (discardable(length)) return startDiscard(p, length);
        break;
      }
      begin_ += length;
      // A few small messages in a row: the flow's messages are small, large reads pay again.
      smallRun_ = length >= kDiscardAtLeast ? 0 : smallRun_ + 1;
      if (smallRun_ >= kSmallRunEndsDiscarding) discarding_ = false;
      onMessage_(std::span<const std::uint8_t>(p, length), now);
      if (closed_) return;
    }
    if (begin_ == end_) begin_ = end_ = 0;
    readMore();
  }

  // A DATA message (of a flow's data phase: its header is checked) whose unread rest is large.
  bool discardable(std::size_t length) const {
    const std::size_t have = end_ - begin_;
    return !noDiscard_ && expect_ == npmp::MessageSet::Data && have >= npmp::kDataHeaderSize &&
           length - have >= kDiscardAtLeast;
  }

  // The message at `p` leaves the buffer: its header goes to a scratch message of its full
  // length, whose payload is not filled in (what of it was read already is dropped with the
  // buffer); the rest of it is discarded from the socket, then the message is delivered.
  void startDiscard(const std::uint8_t* p, std::size_t length) {
    if (scratch_.empty()) scratch_.resize(kMaxMessage);
    const std::size_t have = end_ - begin_;
    std::memcpy(scratch_.data(), p, npmp::kDataHeaderSize);
    scratchLength_ = length;
    toDiscard_ = length - have;
    begin_ = end_ = 0;
    discarding_ = true;
    smallRun_ = 0;
    discardMore();
  }

  void discardMore() {
    while (toDiscard_ > 0) {
      // MSG_TRUNC: the kernel drops the bytes instead of copying them. The buffer given is the
      // scratch message's payload area, so a kernel that copied after all would only fill that,
      // and one that refuses the flag gets plain reads into it from then on.
      const int truncate = noDiscard_ ? 0 : MSG_TRUNC;
      const ssize_t n = ::recv(socket_.native_handle(), scratch_.data() + scratchLength_ - toDiscard_, toDiscard_,
                               truncate | MSG_DONTWAIT);
      if (n > 0) {
        toDiscard_ -= static_cast<std::size_t>(n);
        bytesRead_ += static_cast<std::uint64_t>(n);
        if (truncate) bytesDiscarded_ += static_cast<std::uint64_t>(n);
        continue;
      }
      if (n == 0) return fail(ChannelEnd::ofRead(asio::error::eof));
      if (errno == EINTR) continue;
      if (truncate && (errno == EINVAL || errno == EOPNOTSUPP)) {
        noDiscard_ = true;
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        socket_.async_wait(asio::ip::tcp::socket::wait_read,
                           [self = shared_from_this()](const boost::system::error_code& ec) {
                             if (self->closed_) return;
                             if (ec) return self->fail(ChannelEnd::ofRead(ec));
                             self->discardMore();
                           });
        return;
      }
      return fail(ChannelEnd::ofRead(boost::system::error_code(errno, boost::system::system_category())));
    }
    onMessage_(std::span<const std::uint8_t>(scratch_.data(), scratchLength_), nowMicros());
    if (closed_) return;
    readMore();
  }

  void fail(const ChannelEnd& end) {
    if (closed_) return;
    auto handler = onError_;
    if (handler) handler(end);
  }

  asio::ip::tcp::socket socket_;
  std::string peer_;
  std::vector<iovec> iov_;
  std::size_t next_ = 0, messages_ = 0;
  SendHandler sendHandler_;
  std::vector<std::uint8_t> buffer_;
  std::size_t begin_ = 0, end_ = 0;
  bool reading_ = false, closed_ = false, filled_ = false;
  std::uint64_t bytesRead_ = 0;
  // Discarding a DATA message's payload (see kDiscardAtLeast): the message (its header, and
  // room for a payload that is never filled in), its length, and what is left to discard.
  std::vector<std::uint8_t> scratch_;
  std::size_t scratchLength_ = 0, toDiscard_ = 0;
  bool discarding_ = false, noDiscard_ = false;
  unsigned smallRun_ = 0;  // messages below kDiscardAtLeast in a row
  std::uint64_t bytesDiscarded_ = 0;
  std::optional<npmp::MessageSet> expect_;
  MessageHandler onMessage_;
  ErrorHandler onError_;
  SocketPathSampler paths_;
};

// ---------------------------------------------------------------- datagram channel

// One datagram per message over any Asio object with a native handle and async_wait().
template <class Socket, class Base = DataChannel>
class DatagramChannel : public Base, public std::enable_shared_from_this<DatagramChannel<Socket, Base>> {
public:
  DatagramChannel(std::unique_ptr<Socket> owned, Socket* socket, std::string peer, bool receives)
      : owned_(std::move(owned)), socket_(socket), peer_(std::move(peer)), receives_(receives) {}

  void setDestination(const asio::ip::udp::endpoint& destination) {
    destination_ = destination;
    hasDestination_ = true;
  }

  void send(const std::vector<asio::const_buffer>& buffers, std::size_t, SendHandler handler) override {
    buffers_ = &buffers;
    handler_ = std::move(handler);
    next_ = sent_ = dropped_ = 0;
    trySend();
  }

  void receive(MessageHandler onMessage, ErrorHandler onError) override {
    onMessage_ = std::move(onMessage);
    onError_ = std::move(onError);
    if (receives_ && !reading_) {
      reading_ = true;
      buffer_.resize(kMaxMessage + 1);
      waitReadable();
    }
  }

  void close() override {
    closed_ = true;
    if (owned_) {
      boost::system::error_code ec;
      owned_->close(ec);
    }
  }

  int fd() const override { return socket_->native_handle(); }
  bool isByteStream() const override { return false; }
  std::string peerName() const override { return peer_; }

protected:
  // A datagram its owner read for it (a shared socket's).
  bool handOn(std::span<const std::uint8_t> message, std::uint64_t now) {
    if (closed_) return false;
    if (onMessage_) onMessage_(message, now);
    return true;
  }
  bool isClosed() const { return closed_; }

private:
  void trySend() {
    const std::size_t messages = buffers_->size() / 2;
    while (next_ < messages) {
      iovec iov[2];
      for (int k = 0; k < 2; ++k) {
        const auto& b = (*buffers_)[2 * next_ + static_cast<std::size_t>(k)];
        iov[k].iov_base = const_cast<void*>(b.data());
        iov[k].iov_len = b.size();
      }
      msghdr mh{};
      mh.msg_iov = iov;
      mh.msg_iovlen = 2;
      if (hasDestination_) {
        mh.msg_name = destination_.data();
        mh.msg_namelen = static_cast<socklen_t>(destination_.size());
      }
      const ssize_t rc = ::sendmsg(fd(), &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        socket_->async_wait(Socket::wait_write, [self = this->shared_from_this()](const boost::system::error_code& ec) {
          if (ec || self->closed_) {
            self->finish(ec ? ec : asio::error::operation_aborted);
            return;
          }
          self->trySend();
        });
        return;
      }
      if (rc < 0) {
        ++dropped_;  // e.g. ICMP port unreachable reported by the kernel; the datagram is lost
      } else {
        ++sent_;
      }
      ++next_;
    }
    // Complete asynchronously, as every Asio operation does.
    asio::post(socket_->get_executor(), [self = this->shared_from_this()] { self->finish({}); });
  }

  void finish(const boost::system::error_code& ec) {
    auto handler = std::move(handler_);
    handler_ = nullptr;
    if (handler) handler(ec, sent_, dropped_);
  }

  void waitReadable() {
    socket_->async_wait(Socket::wait_read, [self = this->shared_from_this()](const boost::system::error_code& ec) {
      if (self->closed_) return;
      if (ec) {
        if (self->onError_) self->onError_(ChannelEnd::failed(ec.message()));
        return;
      }
      self->drain();
    });
  }

  void drain() {
    // Up to 64 datagrams per wake-up, so that one busy flow cannot starve the others.
    for (int i = 0; i < 64 && !closed_; ++i) {
      const ssize_t n = ::recv(fd(), buffer_.data(), buffer_.size(), MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == ECONNREFUSED || errno == EINTR) continue;  // ICMP errors of earlier sends
        if (onError_) onError_(ChannelEnd::failed(std::strerror(errno)));
        return;
      }
      onMessage_(std::span<const std::uint8_t>(buffer_.data(), static_cast<std::size_t>(n)), nowMicros());
    }
    if (!closed_) waitReadable();
  }

  std::unique_ptr<Socket> owned_;
  Socket* socket_;
  std::string peer_;
  bool receives_;
  asio::ip::udp::endpoint destination_;
  bool hasDestination_ = false;
  const std::vector<asio::const_buffer>* buffers_ = nullptr;
  SendHandler handler_;
  std::size_t next_ = 0, sent_ = 0, dropped_ = 0;
  std::vector<std::uint8_t> buffer_;
  bool reading_ = false, closed_ = false;
  MessageHandler onMessage_;
  ErrorHandler onError_;
};

}  // namespace

std::shared_ptr<DataChannel> makeStreamChannel(asio::ip::tcp::socket socket) {
  return std::make_shared<StreamChannel>(std::move(socket));
}

std::shared_ptr<DataChannel> makeUdpChannel(asio::ip::udp::socket socket) {
  boost::system::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  auto owned = std::make_unique<asio::ip::udp::socket>(std::move(socket));
  auto* raw = owned.get();
  return std::make_shared<DatagramChannel<asio::ip::udp::socket>>(
      std::move(owned), raw, ec ? "(unknown)" : endpointName(remote.address(), remote.port()), true);
}

namespace {

class SharedUdpChannel final : public DatagramChannel<asio::ip::udp::socket, UdpPeerChannel> {
public:
  using DatagramChannel::DatagramChannel;
  bool deliver(std::span<const std::uint8_t> message, std::uint64_t now) override { return handOn(message, now); }
  bool closed() const override { return isClosed(); }
};

}  // namespace

std::shared_ptr<UdpPeerChannel> makeUdpPeerChannel(asio::ip::udp::socket& shared, asio::ip::udp::endpoint peer) {
  auto channel = std::make_shared<SharedUdpChannel>(nullptr, &shared, endpointName(peer.address(), peer.port()), false);
  channel->setDestination(peer);
  return channel;
}

std::shared_ptr<DataChannel> makeDccpChannel(asio::io_context& io, int fd, std::string peer) {
  auto owned = std::make_unique<asio::posix::stream_descriptor>(io, fd);
  auto* raw = owned.get();
  return std::make_shared<DatagramChannel<asio::posix::stream_descriptor>>(std::move(owned), raw, std::move(peer),
                                                                           true);
}

}  // namespace npm::transport
