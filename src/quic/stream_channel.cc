#include "quic/stream_channel.h"

#include "quic/connection.h"

namespace npm::quic {

FlowChannel::FlowChannel(std::shared_ptr<Connection> connection, std::uint16_t stream)
    : connection_(std::move(connection)), stream_(stream) {}

// A channel dropped without close() closes its streams as close() does.
FlowChannel::~FlowChannel() {
  if (!closed_) connection_->release(stream_, false);
}

void FlowChannel::send(const std::vector<asio::const_buffer>& buffers, std::size_t messages,
                       transport::SendHandler handler) {
  connection_->queue(stream_, buffers, messages, std::move(handler));
}

void FlowChannel::receive(transport::MessageHandler onMessage, transport::ErrorHandler onError) {
  connection_->claim(stream_, std::move(onMessage), std::move(onError));
}

void FlowChannel::expect(npmp::MessageSet kind) { connection_->expect(stream_, kind); }

void FlowChannel::close() {
  if (closed_) return;
  closed_ = true;
  connection_->release(stream_, false);
}

void FlowChannel::abort() {
  if (closed_) return;
  closed_ = true;
  connection_->release(stream_, true);
}

std::string FlowChannel::peerName() const { return connection_->peerName() + " stream " + std::to_string(stream_); }

long FlowChannel::unsent() { return connection_->unsent(stream_); }
long FlowChannel::unread() { return connection_->unread(stream_); }
std::uint64_t FlowChannel::bytesRead() const { return connection_->bytesRead(stream_); }

void FlowChannel::samplePaths(std::vector<transport::PathSample>& out) {
  if (!closed_) connection_->samplePaths(stream_, out);
}

}  // namespace npm::quic
