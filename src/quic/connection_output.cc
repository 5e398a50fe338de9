// The QUIC connection's output: the flows' bytes into packets, packets to the socket, ngtcp2's
// timer (connection.cc has the overview).
#include <ngtcp2/ngtcp2.h>
#include <sys/socket.h>

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <string>

#include "quic/connection.h"
#include "quic/connection_detail.h"

namespace npm::quic {

using transport::ChannelEnd;
using namespace detail;

namespace {

// Packets written per round; then the thread's other handlers get a turn before the next.
constexpr int kPacketsPerRound = 64;
constexpr std::size_t kVectors = 16;

}  // namespace

void Connection::scheduleFlush() {
  if (flushScheduled_ || state_ == State::Ended) return;
  flushScheduled_ = true;
  asio::post(io_, [weak = weak_from_this()] {
    if (auto self = weak.lock()) {
      self->flushScheduled_ = false;
      self->flush();
    }
  });
}

void Connection::flush() {
  if (conn_ == nullptr || state_ == State::Ended || writeWaiting_) return;
  auto self = shared_from_this();
  if (!pending_.empty()) {
    if (!sendDatagram(pending_.data(), pending_.size())) return waitWritable();
    pending_.clear();
  }
  if (state_ == State::Established) {
    for (auto& [number, f] : flows_) {
      const bool wantsStream = f.queued > f.accepted || (f.finQueued && !f.finSent);
      if (wantsStream && !f.sendShut && localStream(number) >= nextLocalStream_ &&
          !openLocalStreams(localStream(number))) {
        break;
      }
      if (state_ == State::Ended) return;
    }
  }
  for (auto& [number, f] : flows_) f.blocked = false;

  // A flow may send when its stream is open and it has bytes (or its FIN) that ngtcp2 has not
  // taken; the flows take turns packet by packet.
  auto sendable = [this](const Flow& f) {
    return !f.blocked && !f.sendShut && localStream(f.number) < nextLocalStream_ &&
           (f.accepted < f.queued || (f.finQueued && !f.finSent));
  };
  auto nextFlow = [&]() -> Flow* {
    if (state_ != State::Established || flows_.empty()) return nullptr;
    auto start = flows_.lower_bound(nextFlowToSend_);
    for (auto it = start; it != flows_.end(); ++it) {
      if (sendable(it->second)) return &it->second;
    }
    for (auto it = flows_.begin(); it != start; ++it) {
      if (sendable(it->second)) return &it->second;
    }
    return nullptr;
  };

  const std::uint64_t now = timestamp();
  const std::size_t size = std::min(ngtcp2_conn_get_path_max_tx_udp_payload_size(conn_), packet_.size());
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info info{};
  int packets = 0;
  while (packets < kPacketsPerRound) {
    Flow* f = nextFlow();
    ngtcp2_vec vectors[kVectors];
    std::size_t count = 0, offered = 0;
    std::int64_t id = -1;
    std::uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_NONE;
    if (f != nullptr) {
      id = localStream(f->number);
      flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
      std::uint64_t offset = f->chunkBase;
      for (const auto& chunk : f->chunks) {
        const std::uint64_t chunkEnd = offset + chunk.size();
        if (chunkEnd > f->accepted && count < kVectors) {
          const std::size_t skip = static_cast<std::size_t>(std::max(f->accepted, offset) - offset);
          vectors[count].base = const_cast<std::uint8_t*>(chunk.data()) + skip;
          vectors[count].len = chunk.size() - skip;
          offered += vectors[count].len;
          ++count;
        }
        offset = chunkEnd;
      }
      if (f->finQueued && f->accepted + offered == f->queued) flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
    }
    ngtcp2_ssize taken = -1;
    const ngtcp2_ssize n =
        ngtcp2_conn_writev_stream(conn_, &ps.path, &info, packet_.data(), size, &taken, flags, id, vectors, count, now);
    if (f != nullptr && taken >= 0) {
      onAccepted(*f, static_cast<std::uint64_t>(taken));
      if ((flags & NGTCP2_WRITE_STREAM_FLAG_FIN) && static_cast<std::size_t>(taken) == offered) f->finSent = true;
    }
    if (n < 0) {
      switch (n) {
        case NGTCP2_ERR_WRITE_MORE:
          // Room left in the packet: the next flow's bytes (or the same flow's next ones).
          if (taken == 0 && !f->finSent) f->blocked = true;
          continue;
        case NGTCP2_ERR_STREAM_DATA_BLOCKED:
          f->blocked = true;
          ++counters_.streamBlocked;
          continue;
        case NGTCP2_ERR_STREAM_SHUT_WR:
        case NGTCP2_ERR_STREAM_NOT_FOUND:
          f->sendShut = true;
          if (f->sendHandler) completeSend(*f, asio::error::connection_aborted);
          continue;
        default: return failWith(static_cast<int>(n), std::string("QUIC: ") + ngtcp2_strerror(static_cast<int>(n)));
      }
    }
    if (n == 0) break;  // nothing to send, or the congestion window or pacing says wait
    ++packets;
    if (f != nullptr) nextFlowToSend_ = static_cast<std::uint16_t>(f->number + 1);
    if (!sendDatagram(packet_.data(), static_cast<std::size_t>(n))) {
      pending_.assign(packet_.data(), packet_.data() + n);
      ngtcp2_conn_update_pkt_tx_time(conn_, now);
      return waitWritable();
    }
  }
  ngtcp2_conn_update_pkt_tx_time(conn_, now);
  if (packets == kPacketsPerRound) scheduleFlush();  // more after the thread's other handlers
  armTimer();
}

long sendDatagramFrom(int fd, const std::uint8_t* data, std::size_t size, const asio::ip::udp::endpoint& to,
                      const std::optional<asio::ip::address>& source) {
  iovec vector{const_cast<std::uint8_t*>(data), size};
  msghdr message{};
  message.msg_name = const_cast<sockaddr*>(to.data());
  message.msg_namelen = static_cast<socklen_t>(to.size());
  message.msg_iov = &vector;
  message.msg_iovlen = 1;
  alignas(cmsghdr) std::uint8_t control[CMSG_SPACE(sizeof(in6_pktinfo))] = {};
  if (source) {
    // The socket's family decides the option: an IPv6 socket (dual-stack ones too, whose IPv4
    // peers and addresses are v4-mapped) takes IPV6_PKTINFO, an IPv4 socket IP_PKTINFO. No
    // interface: the route to the peer decides it, only the source address is fixed.
    message.msg_control = control;
    auto put = [&message, &control](int level, int type, const auto& info) {
      cmsghdr* c = reinterpret_cast<cmsghdr*>(control);
      c->cmsg_level = level;
      c->cmsg_type = type;
      c->cmsg_len = CMSG_LEN(sizeof info);
      std::memcpy(CMSG_DATA(c), &info, sizeof info);
      message.msg_controllen = CMSG_SPACE(sizeof info);
    };
    if (to.address().is_v6()) {
      in6_pktinfo info{};
      const asio::ip::address_v6 address =
          source->is_v6() ? source->to_v6() : asio::ip::make_address_v6(asio::ip::v4_mapped, source->to_v4());
      const auto bytes = address.to_bytes();
      std::memcpy(&info.ipi6_addr, bytes.data(), bytes.size());
      put(IPPROTO_IPV6, IPV6_PKTINFO, info);
    } else {
      in_pktinfo info{};
      const auto bytes = source->to_v4().to_bytes();
      std::memcpy(&info.ipi_spec_dst, bytes.data(), bytes.size());
      put(IPPROTO_IP, IP_PKTINFO, info);
    }
  }
  return static_cast<long>(::sendmsg(fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL));
}

bool Connection::sendDatagram(const std::uint8_t* data, std::size_t size) {
  const std::optional<asio::ip::address> source =
      sourceAddressed_ ? std::optional<asio::ip::address>(local_.address()) : std::nullopt;
  for (;;) {
    const long rc = sendDatagramFrom(socket_->native_handle(), data, size, remote_, source);
    if (rc >= 0) {
      ++counters_.datagramsSent;
      return true;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
      ++counters_.socketBlocked;
      return false;
    }
    // Anything else (an ICMP error of an earlier datagram, an unreachable network): this
    // datagram is lost, and QUIC's loss recovery and timers take it from here.
    return true;
  }
}

void Connection::waitWritable() {
  writeWaiting_ = true;
  armTimer();
  socket_->async_wait(asio::ip::udp::socket::wait_write,
                      [weak = weak_from_this()](const boost::system::error_code& ec) {
                        auto self = weak.lock();
                        if (!self) return;
                        self->writeWaiting_ = false;
                        if (!ec) self->flush();
                      });
}

void Connection::armTimer() {
  if (conn_ == nullptr || state_ == State::Ended) return;
  const std::uint64_t expiry = ngtcp2_conn_get_expiry(conn_);
  if (expiry == armedExpiry_) return;
  armedExpiry_ = expiry;
  if (expiry == std::numeric_limits<std::uint64_t>::max()) {
    timer_.cancel();
    return;
  }
  timer_.expires_at(std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::nanoseconds(expiry))));
  timer_.async_wait([weak = weak_from_this(), expiry](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self || ec || self->armedExpiry_ != expiry) return;
    self->armedExpiry_ = 0;
    self->onTimer();
  });
}

void Connection::onTimer() {
  if (conn_ == nullptr || state_ == State::Ended) return;
  auto self = shared_from_this();
  const int rv = ngtcp2_conn_handle_expiry(conn_, timestamp());
  if (rv == NGTCP2_ERR_IDLE_CLOSE) {
    // Nothing from the peer for the idle timeout: gone without a word (no CONNECTION_CLOSE).
    const std::string why = "QUIC connection idle for " + seconds(limits_.idleTimeout) + ": " + peer_ + " is gone";
    end(ChannelEnd::failed(why), "QUIC handshake: no answer from " + peer_ + " within " + seconds(limits_.idleTimeout));
    return;
  }
  if (rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT) {
    const std::string why = "QUIC handshake with " + peer_ + " timed out after " + seconds(limits_.handshakeTimeout);
    end(ChannelEnd::failed(why), why);
    return;
  }
  if (rv != 0) return failWith(rv, std::string("QUIC: ") + ngtcp2_strerror(rv));
  flush();
}

void Connection::onAccepted(Flow& f, std::uint64_t bytes) {
  f.accepted += bytes;
  if (f.sendHandler && f.accepted >= f.sendTarget) completeSend(f, {});
}

// Always asynchronously, as Asio's operations complete: the handler starts the next batch.
void Connection::completeSend(Flow& f, const boost::system::error_code& ec) {
  auto handler = std::move(f.sendHandler);
  f.sendHandler = nullptr;
  if (!handler) return;
  asio::post(io_, [handler = std::move(handler), ec, messages = f.sendMessages] { handler(ec, ec ? 0 : messages, 0); });
}

}  // namespace npm::quic
