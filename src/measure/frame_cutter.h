// The sender's framing: frames (byte counts, as the FLOWSPEC draws them) waiting to be sent,
// cut into NPMP DATA messages of at most the flow's message size as they are written, with
// their headers (frame begin/end flags, numbering) and the buffers of one write. No timers,
// no sockets: the sender (measure/flow_sender.h) decides when, this decides what.
#pragma once

#include <boost/asio/buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "measure/statistics.h"
#include "npmp/messages.h"

namespace npm::measure {

// How much one write hands the transport.
struct WriteLimit {
  std::size_t messages, bytes;
};

// Which flow the messages belong to, and how big they may be.
struct FrameLabels {
  std::uint64_t measurementId = 0;
  std::uint32_t flowId = 0;
  std::uint16_t streamId = 0;
  std::uint16_t maxMsgSize = 16000;
};

class FrameCutter {
public:
  FrameCutter(FrameLabels labels, bool fromActive) : labels_(labels), fromActive_(fromActive) {}

  // Queues a frame of `drawn` bytes generated at `stamp` (µs; all its messages carry it).
  // Returns its byte count, 0 for a frame of no bytes (not sent, not counted). Whatever a
  // distribution (or a peer's ADD_FLOW) asks for costs no memory: a frame is a byte count.
  // With a transfer limit (setLimit), the frame is shortened to what the limit leaves, and
  // none is queued once it is reached (0).
  std::uint64_t addFrame(double drawn, std::uint64_t stamp);
  // A fixed-size transfer (transfer=, frames=; 0: no limit): the frames queued from now on send
  // exactly `bytes` bytes as counted (DATA messages with their headers) or `frames` frames.
  void setLimit(std::uint64_t bytes, std::uint64_t frames);
  // The limit is reached: no more frames are queued.
  bool exhausted() const { return exhausted_; }
  std::size_t framesWaiting() const { return frames_.size(); }
  // Nothing to send: no frame waiting, no message cut.
  bool idle() const { return frames_.empty() && messages_.empty(); }

  // Lays out the next write (up to `limit`, at least one message if any is due) into `iov`
  // and returns how many messages it holds, 0 when there is nothing to send. On a byte
  // stream, messages of one size go out as one contiguous buffer.
  std::size_t prepareWrite(WriteLimit limit, bool byteStream, std::vector<boost::asio::const_buffer>& iov);
  // The transport took the first `sent` messages of the write and gave up `dropped` more
  // (a message-oriented transport without room): accounts the sent ones in `tx`.
  void completeWrite(std::size_t sent, std::size_t dropped, TransmitStatistics& tx, std::uint64_t now);
  // Drops what is not handed to the transport yet (the first `inFlight` messages are).
  void dropUnsent(std::size_t inFlight);
  void clear();
  // Frees the batch buffer (nothing is written any more).
  void release();

private:
  struct Message {
    std::uint8_t header[npmp::kDataHeaderSize];
    std::uint16_t length;  // whole message
    bool frameEnd;
  };
  struct Frame {
    std::uint32_t frameId;
    std::uint64_t remaining;  // bytes
    std::uint64_t timeStamp;  // µs, when the frame was generated
    bool begun;               // its first message is cut
  };

  void cutMessages(WriteLimit limit);
  bool layOutBatch(std::size_t n, std::vector<boost::asio::const_buffer>& iov);

  FrameLabels labels_;
  bool fromActive_;
  std::deque<Frame> frames_;
  std::deque<Message> messages_;  // cut, at most one write's worth beyond the write under way
  // A byte stream's batch of messages of one size, laid out in one buffer: the payload
  // pattern is written once, only the headers are rewritten per batch. At most one write's
  // worth (about 1 MiB), and only for flows that queue several messages per write.
  std::vector<std::uint8_t> batch_;
  std::size_t batchLength_ = 0;  // the message length batch_ is laid out for
  std::uint32_t frameId_ = 0;
  std::uint64_t seqNumber_ = 0, byteSeqNumber_ = 0;
  // What a transfer limit leaves (bytes as counted, frames), when there is one.
  std::uint64_t bytesLeft_ = 0, framesLeft_ = 0;
  bool byteLimit_ = false, frameLimit_ = false, exhausted_ = false;
  std::uint64_t queue(std::uint64_t bytes, std::uint64_t stamp);
};

// The bytes a frame of `frameBytes` counts as once cut into DATA messages of at most
// `maxMsgSize`: a message is never shorter than its 48-byte header (as in the reference).
std::uint64_t countedBytes(std::uint64_t frameBytes, std::uint16_t maxMsgSize);

}  // namespace npm::measure
