#include "measure/measurement.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "common/clock.h"
#include "common/log.h"
#include "common/text.h"

namespace npm::measure {

asio::awaitable<std::vector<FlowSnapshot>> Measurement::snapshots(bool paths) {
  std::vector<FlowSnapshot> s(flows_.size());
  co_await onOwners(flows_, [&s, paths](Flow& f, std::size_t i) { s[i] = f.snapshot(paths); });
  co_return s;
}

asio::awaitable<void> Measurement::start(std::uint64_t now, std::chrono::milliseconds warmup,
                                         std::optional<std::chrono::steady_clock::duration> runtime) {
  const auto self = shared_from_this();
  start_ = scalarsFrom_ = now;
  steadyStart_ = std::chrono::steady_clock::now();
  running_ = true;
  cpuStart_ = cpu_.sample();
  processStart_ = processTimes();
  warmup_ = warmup;
  warmingUp_ = warmup.count() > 0;
  const auto steady = steadyStart_;
  const auto until = runtime ? steady + *runtime : std::chrono::steady_clock::time_point::max();
  co_await onOwners(flows_, [now, steady, until](Flow& f, std::size_t) { f.start(now, steady, until); });
  const bool reporting = report_ && interval_.count() > 0;
  if (vector_ || reporting) {
    const auto first = co_await snapshots(reporting);
    if (vector_) vector_->writeBlock(now, start_, first);
    if (reporting) report_(now, first, false);  // the base of the first interval
  }
  if (!running_) co_return;  // stopped while the flows were starting
  const auto base = TimerClock::now();
  nextBlock_ = base + std::chrono::seconds(1);
  if (reporting) nextInterval_ = base + interval_;
  scheduleBlock();
  if (!warmingUp_) co_return;
  warmupTimer_.expires_at(steady + warmup);
  warmupTimer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    asio::co_spawn(self->warmupTimer_.get_executor(), endWarmup(self), asio::detached);
  });
}

asio::awaitable<void> Measurement::endWarmup(std::shared_ptr<Measurement> self) {
  if (!self->running_ || !self->warmingUp_) co_return;
  co_await self->beginScalars(nowMicros());
}

asio::awaitable<void> Measurement::beginScalars(std::uint64_t now) {
  warmingUp_ = false;
  scalarsFrom_ = now;
  cpuStart_ = cpu_.sample();
  processStart_ = processTimes();
  co_await onOwners(flows_, [](Flow& f, std::size_t) { f.beginScalars(); });
}

// The timer runs to the next block or interval, whichever is due first.
void Measurement::scheduleBlock() {
  timer_.expires_at(std::min(nextBlock_, nextInterval_));
  timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || !self->running_) return;
    asio::co_spawn(self->timer_.get_executor(), writeBlock(self), asio::detached);
  });
}

asio::awaitable<void> Measurement::writeBlock(std::shared_ptr<Measurement> self) {
  const auto due = self->timer_.expiry();
  const bool block = due >= self->nextBlock_, interval = due >= self->nextInterval_;
  const auto s = co_await self->snapshots(interval);
  if (!self->running_) co_return;  // stopped meanwhile: the last block is stop()'s
  const std::uint64_t now = nowMicros();
  if (interval) {
    self->nextInterval_ += self->interval_;
    self->report_(now, s, false);
  }
  if (!block) {
    self->scheduleBlock();
    co_return;
  }
  self->nextBlock_ += std::chrono::seconds(1);
  if (self->vector_) {
    try {
      self->vector_->writeBlock(now, self->start_, s);
    } catch (const std::exception& e) {
      log::error(e.what());
      self->vector_.reset();
    }
  }
  self->scheduleBlock();
}

asio::awaitable<MeasurementResult> Measurement::stop(std::uint64_t now) {
  const auto self = shared_from_this();
  running_ = false;
  timer_.cancel();
  warmupTimer_.cancel();
  // The flows' threads run what is asked of them in the order asked, so a warm-up end
  // under way has reached every flow before their results are taken below.
  if (warmingUp_) {
    log::warning("Measurement $" + hex64(id_) + " ended within its warm-up of " + std::to_string(warmup_.count()) +
                 " ms: its scalars cover nothing");
    co_await beginScalars(now);
  }
  MeasurementResult r;
  r.firstStatisticsEvent = scalarsFrom_;
  r.lastStatisticsEvent = now;
  r.cpu = cpuUsage(cpuStart_, cpu_.sample());
  r.process = processUsage(processStart_, processTimes());
  r.flows.resize(flows_.size());
  co_await onOwners(flows_, [&r](Flow& f, std::size_t i) { r.flows[i] = f.result(); });
  const bool reporting = report_ && interval_.count() > 0;
  if (vector_ || reporting) {
    const auto last = co_await snapshots(reporting);
    if (vector_) vector_->writeBlock(now, start_, last);
    if (reporting) report_(now, last, true);
  }
  co_return r;
}

void Measurement::abandon() {
  running_ = false;
  warmingUp_ = false;
  timer_.cancel();
  warmupTimer_.cancel();
}

}  // namespace npm::measure
