#include "measure/measurement.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/text.h"

namespace npm::measure {

namespace {
std::vector<FlowSnapshot> snapshots(const std::vector<std::shared_ptr<Flow>>& flows) {
  std::vector<FlowSnapshot> s(flows.size());
  onOwners(flows, [&s](Flow& f, std::size_t i) { s[i] = f.snapshot(); });
  return s;
}
}  // namespace

void Measurement::start(std::uint64_t now, std::chrono::milliseconds warmup,
                        std::optional<std::chrono::steady_clock::duration> runtime) {
  start_ = scalarsFrom_ = now;
  steadyStart_ = std::chrono::steady_clock::now();
  running_ = true;
  cpuStart_ = cpu_.sample();
  const auto steady = steadyStart_;
  const auto until = runtime ? steady + *runtime : std::chrono::steady_clock::time_point::max();
  onOwners(flows_, [now, steady, until](Flow& f, std::size_t) { f.start(now, steady, until); });
  if (vector_) vector_->writeBlock(now, start_, snapshots(flows_));
  nextBlock_ = std::chrono::steady_clock::now();
  scheduleBlock();
  warmup_ = warmup;
  warmingUp_ = warmup.count() > 0;
  if (!warmingUp_) return;
  warmupTimer_.expires_after(warmup);
  warmupTimer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || !self->running_ || !self->warmingUp_) return;
    self->beginScalars(nowMicros());
  });
}

void Measurement::beginScalars(std::uint64_t now) {
  warmingUp_ = false;
  scalarsFrom_ = now;
  cpuStart_ = cpu_.sample();
  onOwners(flows_, [](Flow& f, std::size_t) { f.beginScalars(); });
}

void Measurement::scheduleBlock() {
  nextBlock_ += std::chrono::seconds(1);
  timer_.expires_at(nextBlock_);
  timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || !self->running_) return;
    if (self->vector_) {
      try {
        self->vector_->writeBlock(nowMicros(), self->start_, snapshots(self->flows_));
      } catch (const std::exception& e) {
        log::error(e.what());
        self->vector_.reset();
      }
    }
    self->scheduleBlock();
  });
}

MeasurementResult Measurement::stop(std::uint64_t now) {
  running_ = false;
  timer_.cancel();
  warmupTimer_.cancel();
  if (warmingUp_) {
    log::warning("Measurement $" + hex64(id_) + " ended within its warm-up of " +
                 std::to_string(warmup_.count()) + " ms: its scalars cover nothing");
    beginScalars(now);
  }
  MeasurementResult r;
  r.firstStatisticsEvent = scalarsFrom_;
  r.lastStatisticsEvent = now;
  r.cpu = cpuUsage(cpuStart_, cpu_.sample());
  r.flows.resize(flows_.size());
  onOwners(flows_, [&r](Flow& f, std::size_t i) { r.flows[i] = f.result(); });
  if (vector_) vector_->writeBlock(now, start_, snapshots(flows_));
  return r;
}

}  // namespace npm::measure
