// One measurement on one side: its flows, the START..STOP interval, CPU usage over exactly
// that interval, and the measurement vector (a block every second and a final one at STOP).
#pragma once

#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "common/clock.h"
#include "measure/cpu.h"
#include "measure/flow.h"
#include "measure/results.h"

namespace npm::measure {

// Owned by a shared_ptr: its timer handler holds a weak reference, so a block already
// queued when the owner destroys the measurement finds it gone instead of touching freed
// memory (cancelling a timer does not recall a handler that is already queued). What it asks
// of its flows it asks on their own threads (onOwners) without blocking its own: start() and
// stop() are coroutines, and so are the vector blocks and the end of the warm-up.
class Measurement : public std::enable_shared_from_this<Measurement> {
public:
  Measurement(asio::io_context& io, std::uint64_t id) : id_(id), timer_(io), warmupTimer_(io) {}
  Measurement(const Measurement&) = delete;
  Measurement& operator=(const Measurement&) = delete;

  std::uint64_t id() const { return id_; }
  std::vector<std::shared_ptr<Flow>>& flows() { return flows_; }
  void setVector(MeasurementVectorWriter writer) { vector_.emplace(std::move(writer)); }
  MeasurementVectorWriter* vector() { return vector_ ? &*vector_ : nullptr; }
  // Per-interval reports (--interval): `report` gets the flows' snapshots (with their sending
  // side's transport state) every `every` from the start, on the timeline of the vector's
  // blocks (a block and an interval that fall due together share one snapshot), and the last
  // (partial) interval's at stop() (`last`). Set before start().
  using IntervalReport = std::function<void(std::uint64_t now, const std::vector<FlowSnapshot>& flows, bool last)>;
  void reportIntervals(std::chrono::steady_clock::duration every, IntervalReport report) {
    interval_ = every;
    report_ = std::move(report);
  }
  bool running() const { return running_; }
  std::uint64_t startTime() const { return start_; }

  // Starts every flow and the per-second vector blocks. With a warm-up, the scalars (flows,
  // totals, CPU usage) cover only what follows it; the vectors cover everything. The flows'
  // frames follow one timeline from this moment (steadyStart()), however long starting them
  // all takes; with a `runtime` (the active's, or on the passive the one ADD_FLOW carries),
  // rate-driven flows send no frame due after steadyStart() + runtime.
  [[nodiscard]] asio::awaitable<void> start(std::uint64_t now, std::chrono::milliseconds warmup = {},
                                            std::optional<std::chrono::steady_clock::duration> runtime = std::nullopt);
  std::chrono::steady_clock::time_point steadyStart() const { return steadyStart_; }
  // Ends the interval: final vector block, CPU usage; flows must have stopped sending
  // and finished receiving. Returns the results for the scalar file.
  [[nodiscard]] asio::awaitable<MeasurementResult> stop(std::uint64_t now);
  // Ends the interval without results (its session has ended): no more blocks, no warm-up end.
  void abandon();

private:
  void scheduleBlock();
  asio::awaitable<void> beginScalars(std::uint64_t now);
  asio::awaitable<std::vector<FlowSnapshot>> snapshots(bool paths = false);
  // Spawned by the timers; they hold the measurement while they wait for its flows.
  static asio::awaitable<void> writeBlock(std::shared_ptr<Measurement> self);
  static asio::awaitable<void> endWarmup(std::shared_ptr<Measurement> self);

  std::uint64_t id_;
  std::vector<std::shared_ptr<Flow>> flows_;
  std::optional<MeasurementVectorWriter> vector_;
  asio::basic_waitable_timer<TimerClock> timer_;
  CpuSampler cpu_;
  CpuTimes cpuStart_;
  ProcessTimes processStart_;
  std::uint64_t start_ = 0;
  std::chrono::steady_clock::time_point steadyStart_;
  std::uint64_t scalarsFrom_ = 0;  // µs: START, or the end of the warm-up
  asio::basic_waitable_timer<TimerClock> warmupTimer_;
  std::chrono::milliseconds warmup_{0};
  bool warmingUp_ = false;
  bool running_ = false;
  std::chrono::steady_clock::time_point nextBlock_;
  std::chrono::steady_clock::duration interval_{0};
  std::chrono::steady_clock::time_point nextInterval_ = std::chrono::steady_clock::time_point::max();
  IntervalReport report_;
};

}  // namespace npm::measure
