#include "measure/path_sampler.h"

#include "common/clock.h"
#include "common/fileio.h"
#include "common/log.h"

namespace npm::measure {

void PathSampler::attach(transport::DataChannel* channel, std::weak_ptr<void> owner) {
  channel_ = channel;
  owner_ = std::move(owner);
}

void PathSampler::start(std::uint64_t startTime) {
  startTime_ = startTime;
  if (!enabled()) return;
  sample();
  schedule();
}

void PathSampler::restart() {
  if (!enabled() || finished_) return;
  sample();  // the state at the end of the warm-up, the base of the counters
  for (auto& [id, summary] : summaries_) summary.restart();
}

void PathSampler::finish() {
  if (!finished_ && enabled()) sample();
  finished_ = true;
  timer_.cancel();
}

std::vector<PathSummary> PathSampler::summaries() const {
  std::vector<PathSummary> out;
  out.reserve(summaries_.size());
  for (const auto& [id, summary] : summaries_) out.push_back(summary);
  return out;
}

void PathSampler::sample() {
  if (!channel_) return;
  samples_.clear();
  channel_->samplePaths(samples_);
  if (samples_.empty()) return;
  for (const auto& s : samples_) {
    auto& summary = summaries_[s.id];
    summary.id = s.id;
    summary.add(s);
  }
  if (!vector_) return;
  try {
    const std::uint64_t now = nowMicros();
    vector_->rows(now, startTime_ != 0 ? startTime_ : now, samples_);
    vector_->flush();
  } catch (const FileError& e) {
    // e.g. a full disk: the measurement goes on, the vector is lost and reported at the end
    vectorError_ = e.what();
    log::error(*vectorError_);
    vector_.reset();
  }
}

void PathSampler::schedule() {
  timer_.expires_after(interval_);
  timer_.async_wait([this, owner = owner_](const boost::system::error_code& ec) {
    const auto alive = owner.lock();
    if (ec || !alive || finished_) return;
    sample();
    schedule();
  });
}

}  // namespace npm::measure
