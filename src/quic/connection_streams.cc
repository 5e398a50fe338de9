// The QUIC connection's flows: a stream of each side per flow, and the channels' side of them
// (connection.cc has the overview).
#include <ngtcp2/ngtcp2.h>

#include <algorithm>
#include <string>

#include "quic/connection.h"
#include "quic/connection_detail.h"

namespace npm::quic {

using transport::ChannelEnd;
using namespace detail;

Connection::Flow& Connection::flow(std::uint16_t stream) {
  auto [it, created] = flows_.try_emplace(stream);
  if (created) {
    it->second.number = stream;
    if (state_ == State::Ended && connectionEnd_) it->second.end = connectionEnd_;
  }
  return it->second;
}

Connection::Flow* Connection::flowOfStream(std::int64_t id) {
  if (id < 0 || (id >> 2) > 0xffff) return nullptr;
  auto it = flows_.find(static_cast<std::uint16_t>(id >> 2));
  return it == flows_.end() ? nullptr : &it->second;
}

std::int64_t streamId(Connection::Role sender, std::uint16_t stream) {
  return static_cast<std::int64_t>(stream) << 2 | (sender == Connection::Role::Client ? 2 : 3);
}

std::int64_t Connection::localStream(std::uint16_t number) const { return streamId(role_, number); }

std::int64_t Connection::remoteStream(std::uint16_t number) const {
  return streamId(role_ == Role::Client ? Role::Server : Role::Client, number);
}

// ngtcp2 hands out a side's stream ids in order: stream n of a flow is opened together with
// the ones below it that no flow has used yet (they stay unused; the peer never sees them).
bool Connection::openLocalStreams(std::int64_t upTo) {
  while (nextLocalStream_ <= upTo) {
    std::int64_t id = -1;
    const int rv = ngtcp2_conn_open_uni_stream(conn_, &id, nullptr);
    if (rv == NGTCP2_ERR_STREAM_ID_BLOCKED) return false;  // until the peer allows more
    if (rv != 0) {
      failWith(rv, std::string("QUIC: cannot open a stream: ") + ngtcp2_strerror(rv));
      return false;
    }
    nextLocalStream_ = id + 4;
  }
  return true;
}

void Connection::queue(std::uint16_t stream, const std::vector<asio::const_buffer>& buffers, std::size_t messages,
                       transport::SendHandler handler) {
  auto& f = flow(stream);
  f.sendHandler = std::move(handler);
  f.sendMessages = messages;
  if (state_ == State::Ended || f.sendShut || f.released || f.finQueued) {
    const bool byPeer = (state_ == State::Ended && endedByPeer_) || (f.end && f.end->byPeer()) || f.stoppedByPeer;
    return completeSend(f, byPeer ? boost::system::error_code(asio::error::eof)
                                  : boost::system::error_code(asio::error::connection_aborted));
  }
  std::size_t total = 0;
  for (const auto& b : buffers) total += b.size();
  if (total > 0) {
    std::vector<std::uint8_t> chunk(total);
    std::size_t at = 0;
    for (const auto& b : buffers) {
      std::memcpy(chunk.data() + at, b.data(), b.size());
      at += b.size();
    }
    if (f.chunks.empty()) f.chunkBase = f.queued;
    f.chunks.push_back(std::move(chunk));
    f.queued += total;
  }
  f.sendTarget = f.queued;
  if (f.accepted >= f.sendTarget) return completeSend(f, {});
  scheduleFlush();
}

void Connection::claim(std::uint16_t stream, transport::MessageHandler onMessage, transport::ErrorHandler onError) {
  auto& f = flow(stream);
  f.announced = true;
  f.onMessage = std::move(onMessage);
  f.onError = std::move(onError);
  f.receiving = true;
  asio::post(io_, [weak = weak_from_this(), stream] {
    if (auto self = weak.lock()) self->deliver(self->flow(stream));
  });
}

void Connection::expect(std::uint16_t stream, npmp::MessageSet kind) { flow(stream).in.expect(kind); }

void Connection::release(std::uint16_t stream, bool abort) {
  auto it = flows_.find(stream);
  if (it == flows_.end()) return;
  auto& f = it->second;
  if (f.released) return;
  f.released = true;
  f.onMessage = nullptr;
  f.onError = nullptr;
  if (f.sendHandler) completeSend(f, asio::error::operation_aborted);
  if (state_ == State::Ended || conn_ == nullptr) return;
  const bool opened = localStream(stream) < nextLocalStream_;
  if (abort) {
    if (opened && !f.sendShut) ngtcp2_conn_shutdown_stream_write(conn_, localStream(stream), kAbortCode);
    f.sendShut = true;
  } else if (!f.sendShut) {
    // FIN after what is queued, on a stream opened for it if need be: the peer's side of the
    // channel ends by it (a zero-length STREAM frame with FIN where nothing was ever sent).
    f.finQueued = true;
  }
  if (f.received > 0 && !f.finReceived && !f.receiveClosed) {
    // The peer may stop sending: nobody reads this stream any more.
    ngtcp2_conn_shutdown_stream_read(conn_, remoteStream(stream), abort ? kAbortCode : 0);
  }
  // What arrived and was not read goes back as credit.
  f.uncredited += f.in.buffered();
  f.in = transport::MessageReassembler();
  if (f.uncredited > 0) {
    ngtcp2_conn_extend_max_stream_offset(conn_, remoteStream(stream), f.uncredited);
    ngtcp2_conn_extend_max_offset(conn_, f.uncredited);
    f.uncredited = 0;
  }
  scheduleFlush();
}

long Connection::unsent(std::uint16_t stream) {
  auto it = flows_.find(stream);
  if (it == flows_.end() || it->second.sendShut) return 0;
  return static_cast<long>(it->second.queued - it->second.acked);
}

long Connection::unread(std::uint16_t stream) {
  auto it = flows_.find(stream);
  if (it == flows_.end() || it->second.released) return 0;
  return static_cast<long>(it->second.in.buffered());
}

std::uint64_t Connection::bytesRead(std::uint16_t stream) {
  auto it = flows_.find(stream);
  return it == flows_.end() ? 0 : it->second.delivered;
}

void Connection::samplePaths(std::uint16_t stream, std::vector<transport::PathSample>& out) {
  if (conn_ == nullptr) return;
  ngtcp2_conn_stat stat;
  ngtcp2_conn_get_conn_stat(conn_, &stat);
  transport::PathSample s;
  s.id = 0;
  s.local = transport::endpointName(local_.address(), local_.port());
  s.remote = peer_;
  s.state = stateName();
  s.cwnd = static_cast<double>(stat.cwnd);
  if (stat.ssthresh != std::numeric_limits<std::uint64_t>::max()) s.ssthresh = static_cast<double>(stat.ssthresh);
  // Before the first RTT sample, ngtcp2 reports its initial RTT (333 ms): not a measurement.
  if (stat.first_rtt_sample_ts != std::numeric_limits<std::uint64_t>::max()) {
    s.srttMs = static_cast<double>(stat.smoothed_rtt) / 1e6;
    s.rttVarMs = static_cast<double>(stat.rttvar) / 1e6;
  }
  s.rtoMs = static_cast<double>(ngtcp2_conn_get_pto(conn_)) / 1e6;
  s.mtu = static_cast<double>(stat.max_tx_udp_payload_size);
  s.unacked = static_cast<double>(stat.bytes_in_flight);
  if (stat.delivery_rate_sec > 0) s.deliveryRate = 8.0 * static_cast<double>(stat.delivery_rate_sec);
  if (stat.pacing_rate > 0) s.pacingRate = 8e9 * stat.pacing_rate;  // bytes per nanosecond
  if (auto it = flows_.find(stream); it != flows_.end()) {
    const auto& f = it->second;
    s.bytesSent = static_cast<double>(f.accepted);
    s.bytesAcked = static_cast<double>(f.acked);
    s.bytesReceived = static_cast<double>(f.received);
    if (localStream(stream) < nextLocalStream_) {
      s.lost = static_cast<double>(ngtcp2_conn_get_stream_loss_count(conn_, localStream(stream)));
    }
  }
  out.push_back(std::move(s));
}

std::string Connection::stateName() const {
  switch (state_) {
    case State::Handshake: return "HANDSHAKE";
    case State::Established: return "ESTABLISHED";
    case State::Ended: return "CLOSED";
  }
  return "-";
}

}  // namespace npm::quic
