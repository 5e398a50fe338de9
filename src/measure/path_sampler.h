// A flow's per-path sampling: the transport's per-path state (TCP connection, MPTCP subflows,
// SCTP peer addresses) every interval from the start to the end of reception and once more
// then, summarised per path for the scalars and, with a writer, into the per-path vector.
// Part of a measure::Flow, which owns it and runs it on the flow's thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "measure/results.h"
#include "transport/data_channel.h"
#include "transport/path_sample.h"

namespace npm::measure {

class PathSampler {
public:
  explicit PathSampler(boost::asio::io_context& io) : timer_(io) {}

  // Sampling every `interval` (0: none, the default).
  void every(std::chrono::milliseconds interval) { interval_ = interval; }
  bool enabled() const { return interval_.count() > 0; }
  void setVector(PathVectorWriter writer) { vector_.emplace(std::move(writer)); }
  PathVectorWriter* vector() { return vector_ ? &*vector_ : nullptr; }
  // Why the vector had to be given up during the run (nothing if it did not).
  const std::optional<std::string>& vectorError() const { return vectorError_; }

  // The channel to sample; `owner` keeps the sampler alive in its timer's handler (the flow).
  void attach(transport::DataChannel* channel, std::weak_ptr<void> owner);
  // Samples now and then every interval; vector rows are relative to `startTime` (µs).
  void start(std::uint64_t startTime);
  // The end of the warm-up: one sample as the base of the counters, the means start afresh.
  void restart();
  // The last sample (the state at the end); no more after it.
  void finish();
  void close() { timer_.cancel(); }

  // Per path, in the order of the paths' ids.
  std::vector<PathSummary> summaries() const;

private:
  void sample();
  void schedule();

  transport::DataChannel* channel_ = nullptr;
  std::weak_ptr<void> owner_;
  std::chrono::milliseconds interval_{0};
  boost::asio::steady_timer timer_;
  std::uint64_t startTime_ = 0;
  bool finished_ = false;
  std::vector<transport::PathSample> samples_;  // reused
  std::map<std::int64_t, PathSummary> summaries_;
  std::optional<PathVectorWriter> vector_;
  std::optional<std::string> vectorError_;
};

}  // namespace npm::measure
