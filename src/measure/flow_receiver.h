// A flow's receiving side: checks that a message is a DATA message of this flow and accounts
// it (reassembly, loss, delay, jitter) until the end of the measurement. Part of a
// measure::Flow, on the flow's thread.
#pragma once

#include <cstdint>
#include <span>

#include "common/result.h"
#include "measure/statistics.h"

namespace npm::measure {

struct FlowParameters;

class FlowReceiver {
public:
  explicit FlowReceiver(const FlowParameters& params);  // outlives the receiver (its flow's)

  // One received message (already framed) at `now` (µs): what it changed, or why it is not a
  // DATA message of this flow.
  Result<Reception> accept(std::span<const std::uint8_t> message, std::uint64_t now);
  // The end of reception: incomplete frames are lost; what arrives later is not counted.
  void finish();
  bool finished() const { return finished_; }
  const ReceiveStatistics& statistics() const { return rx_; }

private:
  const FlowParameters& params_;
  ReceiveStatistics rx_;
  bool finished_ = false;
};

}  // namespace npm::measure
