// What a flow records: the per-flow vector (a row per received message) and the scalars'
// window (from the end of the warm-up on), from which it makes the flow's results. Part of a
// measure::Flow, on the flow's thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "measure/results.h"
#include "measure/statistics.h"

namespace npm::measure {

struct FlowParameters;

class FlowRecorder {
public:
  void setVector(FlowVectorWriter writer) { vector_.emplace(std::move(writer)); }
  FlowVectorWriter* vector() { return vector_ ? &*vector_ : nullptr; }
  // Why the vector had to be given up during the run (nothing if it did not).
  const std::optional<std::string>& vectorError() const { return vectorError_; }

  // Vector rows are relative to `startTime` (µs).
  void start(std::uint64_t startTime) { startTime_ = startTime; }
  // A message arrived (`cumulative`: everything received so far).
  void received(const Reception& r, const Counters& cumulative);
  // A write took messages at `now` (µs).
  void transmitted(std::uint64_t now) {
    if (origin_ && origin_->firstTransmission == 0) origin_->firstTransmission = now;
  }
  // The end of the warm-up: the scalars count from the totals so far.
  void beginScalars(const TransmitStatistics& tx, const ReceiveStatistics& rx);

  // The results over the scalars' window (the whole measurement without a warm-up).
  FlowResult result(const FlowParameters& params, const TransmitStatistics& tx, const ReceiveStatistics& rx,
                    std::vector<PathSummary> paths) const;

private:
  // The totals at the end of the warm-up, which result() subtracts.
  struct ScalarOrigin {
    Counters sent, received, lost;
    double delaySumMs = 0.0;
    std::uint64_t firstTransmission = 0, firstReception = 0;  // since the warm-up, 0 = none yet
  };
  std::uint64_t startTime_ = 0;
  std::optional<ScalarOrigin> origin_;
  std::optional<FlowVectorWriter> vector_;
  std::optional<std::string> vectorError_;
};

}  // namespace npm::measure
