#include "measure/frame_cutter.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace npm::measure {

namespace {

// Above 2^53 a double no longer holds every byte count; far beyond any real frame.
constexpr double kMaxFrameBytes = 9007199254740992.0;
// The least a transfer limit leaves for its last frame: one DATA message header.
constexpr std::uint64_t kMinLeft = npmp::kDataHeaderSize;

// Payload patterns of both directions, shared by all flows (messages are ≤ 65535 bytes).
const std::uint8_t* payloadPattern(bool fromActive) {
  static const auto patterns = [] {
    auto* both = new std::uint8_t[2][65536];
    npmp::fillPayload(both[0], 65536, false);
    npmp::fillPayload(both[1], 65536, true);
    return both;
  }();
  return patterns[fromActive ? 1 : 0];
}

}  // namespace

std::uint64_t countedBytes(std::uint64_t frameBytes, std::uint16_t maxMsgSize) {
  if (maxMsgSize == 0) return frameBytes;
  const std::uint64_t tail = frameBytes % maxMsgSize;
  return frameBytes - tail + (tail == 0 ? 0 : std::max<std::uint64_t>(tail, npmp::kDataHeaderSize));
}

void FrameCutter::setLimit(std::uint64_t bytes, std::uint64_t frames) {
  byteLimit_ = bytes != 0;
  frameLimit_ = frames != 0;
  bytesLeft_ = bytes;
  framesLeft_ = frames;
  exhausted_ = false;
}

std::uint64_t FrameCutter::queue(std::uint64_t bytes, std::uint64_t stamp) {
  frames_.push_back(Frame{frameId_++, bytes, stamp, false});
  return bytes;
}

std::uint64_t FrameCutter::addFrame(double drawn, std::uint64_t stamp) {
  if (exhausted_ || !(drawn >= 1.0)) return 0;
  auto bytes = static_cast<std::uint64_t>(std::llround(std::min(drawn, kMaxFrameBytes)));
  if (frameLimit_) {
    exhausted_ = --framesLeft_ == 0;
    return queue(bytes, stamp);
  }
  if (!byteLimit_) return queue(bytes, stamp);
  // A byte limit: what is left never drops below one header (48 bytes, the least a message
  // counts), so the last frame can always take exactly what is left.
  const std::uint64_t M = labels_.maxMsgSize;
  const std::uint64_t counted = countedBytes(bytes, labels_.maxMsgSize);
  if (counted + kMinLeft <= bytesLeft_) {
    bytesLeft_ -= counted;
    return queue(bytes, stamp);
  }
  // The last frame: exactly what is left, unless that would end in a message shorter than a
  // header (which counts as 48 bytes); then two frames: all but 48 bytes (its last message has
  // M + tail - 48 >= 80 bytes) and one of 48.
  exhausted_ = true;
  const std::uint64_t left = bytesLeft_;
  bytesLeft_ = 0;
  const std::uint64_t tail = left % M;
  if (tail == 0 || tail >= npmp::kDataHeaderSize) return queue(left, stamp);
  const std::uint64_t first = left - npmp::kDataHeaderSize;  // left >= M + tail: limits are >= 48
  return queue(first, stamp) + queue(npmp::kDataHeaderSize, stamp);
}

// Cuts the next messages (one write's worth) off the frames waiting to be sent.
void FrameCutter::cutMessages(WriteLimit limit) {
  std::size_t bytes = 0;
  for (const Message& m : messages_) bytes += m.length;
  while (!frames_.empty() && messages_.size() < limit.messages && (messages_.empty() || bytes < limit.bytes)) {
    Frame& f = frames_.front();
    const std::uint64_t part = std::min<std::uint64_t>(f.remaining, labels_.maxMsgSize);
    f.remaining -= part;
    Message& m = messages_.emplace_back();
    m.length = static_cast<std::uint16_t>(std::max<std::uint64_t>(part, npmp::kDataHeaderSize));
    m.frameEnd = f.remaining == 0;
    npmp::DataHeader h;
    h.flags = static_cast<std::uint8_t>((f.begun ? 0 : npmp::kDataFrameBegin) | (m.frameEnd ? npmp::kDataFrameEnd : 0));
    h.length = m.length;
    h.flowId = labels_.flowId;
    h.measurementId = labels_.measurementId;
    h.streamId = labels_.streamId;
    h.frameId = f.frameId;
    h.seqNumber = seqNumber_++;
    h.byteSeqNumber = byteSeqNumber_;
    h.timeStamp = f.timeStamp;
    byteSeqNumber_ += m.length;
    npmp::encodeDataHeader(h, m.header);
    f.begun = true;
    bytes += m.length;
    if (m.frameEnd) frames_.pop_front();
  }
}

std::size_t FrameCutter::prepareWrite(WriteLimit limit, bool byteStream, std::vector<boost::asio::const_buffer>& iov) {
  cutMessages(limit);
  iov.clear();
  if (messages_.empty()) return 0;
  std::size_t n = 0, bytes = 0;
  while (n < messages_.size() && n < limit.messages && (n == 0 || bytes < limit.bytes)) bytes += messages_[n++].length;
  if (!byteStream || !layOutBatch(n, iov)) {
    const std::uint8_t* payload = payloadPattern(fromActive_);
    for (std::size_t i = 0; i < n; ++i) {
      const Message& m = messages_[i];
      iov.emplace_back(m.header, npmp::kDataHeaderSize);
      iov.emplace_back(payload, m.length - npmp::kDataHeaderSize);
    }
  }
  return n;
}

// Messages of one size on a byte stream (a saturated flow of constant size, the usual case)
// go out as one contiguous buffer, so the kernel copies one segment instead of two per
// message; the bytes on the wire are the same.
bool FrameCutter::layOutBatch(std::size_t n, std::vector<boost::asio::const_buffer>& iov) {
  if (n < 2) return false;
  const std::size_t length = messages_.front().length;
  for (std::size_t i = 1; i < n; ++i) {
    if (messages_[i].length != length) return false;
  }
  if (length != batchLength_ || batch_.size() < n * length) {
    batch_.resize(std::max(batch_.size(), n * length));
    const std::uint8_t* payload = payloadPattern(fromActive_);
    for (std::size_t at = 0; at + length <= batch_.size(); at += length) {
      std::memcpy(batch_.data() + at + npmp::kDataHeaderSize, payload, length - npmp::kDataHeaderSize);
    }
    batchLength_ = length;
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::memcpy(batch_.data() + i * length, messages_[i].header, npmp::kDataHeaderSize);
  }
  iov.emplace_back(batch_.data(), n * length);
  return true;
}

void FrameCutter::completeWrite(std::size_t sent, std::size_t dropped, TransmitStatistics& tx, std::uint64_t now) {
  for (std::size_t i = 0; i < sent && !messages_.empty(); ++i) {
    tx.onMessage(messages_.front().length, messages_.front().frameEnd, now);
    messages_.pop_front();
  }
  for (std::size_t i = 0; i < dropped && !messages_.empty(); ++i) messages_.pop_front();
}

void FrameCutter::dropUnsent(std::size_t inFlight) {
  messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(std::min(inFlight, messages_.size())),
                  messages_.end());
  frames_.clear();
}

void FrameCutter::clear() {
  messages_.clear();
  frames_.clear();
}

void FrameCutter::release() { std::vector<std::uint8_t>().swap(batch_); }

}  // namespace npm::measure
