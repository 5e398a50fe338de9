// Per-flow traffic accounting: what a side transmitted and what it received, with
// frame reassembly (FRAME_BEGIN/END), loss from sequence-number gaps, one-way delay and
// RFC 3550 jitter. Pure: time is passed in (microseconds, CLOCK_REALTIME).
#pragma once

#include <cstdint>
#include <unordered_map>

#include "npmp/messages.h"

namespace npm::measure {

struct Counters {
  std::uint64_t bytes = 0, packets = 0, frames = 0;
  Counters operator-(const Counters& o) const { return {bytes - o.bytes, packets - o.packets, frames - o.frames}; }
  Counters& operator+=(const Counters& o) {
    bytes += o.bytes;
    packets += o.packets;
    frames += o.frames;
    return *this;
  }
};

struct TransmitStatistics {
  Counters total;
  std::uint64_t first = 0, last = 0;  // µs of first/last transmission, 0 = never
  void onMessage(std::uint64_t bytes, bool frameEnd, std::uint64_t now) {
    if (first == 0) first = now;
    last = now;
    total.bytes += bytes;
    total.packets += 1;
    if (frameEnd) total.frames += 1;
  }
};

// What one received DATA message changed; feeds the per-flow vector.
struct Reception {
  std::uint64_t now = 0;
  std::uint64_t seqNumber = 0;
  std::uint64_t bytes = 0;
  std::uint64_t framesCompleted = 0;
  double delayMs = 0.0;
  double delayDiffMs = 0.0;
  double jitterMs = 0.0;
};

class ReceiveStatistics {
public:
  explicit ReceiveStatistics(std::uint32_t defragTimeoutMs = 5000)
      : defragTimeoutUs_(std::uint64_t{defragTimeoutMs} * 1000) {}

  // Accounts one received DATA message of `bytes` bytes (header included) arriving at `now`.
  Reception onMessage(const npmp::DataHeader& h, std::uint64_t bytes, std::uint64_t now);
  // Frames whose first message is older than the defragmentation timeout and that are still
  // incomplete are given up as lost.
  void expire(std::uint64_t now);
  // End of the measurement: every incomplete frame is lost.
  void finalize();

  const Counters& received() const { return received_; }
  Counters lost() const;
  std::uint64_t first() const { return first_; }
  std::uint64_t last() const { return last_; }
  double jitterMs() const { return jitter_; }
  // Mean one-way delay of the received messages (ms), NaN if none arrived.
  double meanDelayMs() const;
  double delaySumMs() const { return delaySumMs_; }
  double lastDelayMs() const { return lastDelay_; }
  std::size_t framesInReassembly() const { return partial_.size(); }

private:
  struct PartialFrame {
    std::uint64_t firstArrival = 0;
    std::uint64_t beginSeq = 0, endSeq = 0;
    std::uint64_t messages = 0;
    bool haveBegin = false, haveEnd = false;
  };

  std::uint64_t defragTimeoutUs_;
  Counters received_;
  std::uint64_t first_ = 0, last_ = 0;
  // Highest sequence numbers seen + 1 (0 = nothing seen).
  std::uint64_t packetsExpected_ = 0, bytesExpected_ = 0, framesExpected_ = 0;
  std::uint64_t framesGivenUp_ = 0;
  std::unordered_map<std::uint32_t, PartialFrame> partial_;
  bool haveDelay_ = false;
  double lastDelay_ = 0.0, jitter_ = 0.0;
  double delaySumMs_ = 0.0;
  std::uint64_t nextExpiry_ = 0;
};

}  // namespace npm::measure
