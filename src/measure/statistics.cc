#include "measure/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace npm::measure {

namespace {
constexpr std::size_t kMaxPartialFrames = 65536;  // about 4 MiB
}  // namespace

Reception ReceiveStatistics::onMessage(const npmp::DataHeader& h, std::uint64_t bytes, std::uint64_t now) {
  Reception r;
  r.now = now;
  r.seqNumber = h.seqNumber;
  r.bytes = bytes;

  if (first_ == 0) first_ = now;
  last_ = now;
  received_.bytes += bytes;
  received_.packets += 1;
  packetsExpected_ = std::max(packetsExpected_, h.seqNumber + 1);
  bytesExpected_ = std::max(bytesExpected_, h.byteSeqNumber + bytes);

  // One-way delay and RFC 3550 jitter (J += (|D(i-1,i)| - J) / 16).
  r.delayMs = (static_cast<double>(now) - static_cast<double>(h.timeStamp)) / 1000.0;
  if (haveDelay_) {
    r.delayDiffMs = r.delayMs - lastDelay_;
    jitter_ += (std::fabs(r.delayDiffMs) - jitter_) / 16.0;
  } else {
    r.delayDiffMs = r.delayMs;
    haveDelay_ = true;
  }
  lastDelay_ = r.delayMs;
  delaySumMs_ += r.delayMs;
  r.jitterMs = jitter_;

  // Frame reassembly by FrameID, complete when BEGIN..END arrived without a gap.
  const bool begin = h.flags & npmp::kDataFrameBegin;
  const bool end = h.flags & npmp::kDataFrameEnd;
  framesExpected_ = std::max(framesExpected_, std::uint64_t{h.frameId} + 1);
  if (begin && end) {
    received_.frames += 1;
    r.framesCompleted = 1;
  } else if (partial_.size() >= kMaxPartialFrames && !partial_.count(h.frameId)) {
    // A peer that begins frames and never ends them: beyond this many frames in reassembly at
    // once, a new one is not tracked (it counts as lost); the table stays bounded.
  } else {
    PartialFrame& f = partial_[h.frameId];
    if (f.messages == 0) f.firstArrival = now;
    f.messages += 1;
    if (begin) {
      f.haveBegin = true;
      f.beginSeq = h.seqNumber;
    }
    if (end) {
      f.haveEnd = true;
      f.endSeq = h.seqNumber;
    }
    if (f.haveBegin && f.haveEnd && f.endSeq >= f.beginSeq && f.messages == f.endSeq - f.beginSeq + 1) {
      partial_.erase(h.frameId);
      received_.frames += 1;
      r.framesCompleted = 1;
    }
  }
  if (now >= nextExpiry_ && !partial_.empty()) {
    expire(now);
    nextExpiry_ = now + 100000;  // at most ten scans a second
  }
  return r;
}

void ReceiveStatistics::expire(std::uint64_t now) {
  for (auto it = partial_.begin(); it != partial_.end();) {
    if (it->second.firstArrival + defragTimeoutUs_ <= now) {
      ++framesGivenUp_;
      it = partial_.erase(it);
    } else {
      ++it;
    }
  }
}

void ReceiveStatistics::finalize() {
  framesGivenUp_ += partial_.size();
  partial_.clear();
}

Counters ReceiveStatistics::lost() const {
  Counters l;
  l.bytes = bytesExpected_ > received_.bytes ? bytesExpected_ - received_.bytes : 0;
  l.packets = packetsExpected_ > received_.packets ? packetsExpected_ - received_.packets : 0;
  // Frames not received and not still being reassembled.
  const std::uint64_t accounted = received_.frames + partial_.size();
  l.frames = framesExpected_ > accounted ? framesExpected_ - accounted : 0;
  return l;
}

double ReceiveStatistics::meanDelayMs() const {
  return received_.packets > 0 ? delaySumMs_ / static_cast<double>(received_.packets)
                               : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace npm::measure
