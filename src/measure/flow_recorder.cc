#include "measure/flow_recorder.h"

#include <limits>

#include "common/fileio.h"
#include "common/log.h"
#include "measure/flow.h"

namespace npm::measure {

void FlowRecorder::received(const Reception& r, const Counters& cumulative) {
  if (origin_ && origin_->firstReception == 0) origin_->firstReception = r.now;
  if (!vector_) return;
  try {
    vector_->row(r, startTime_ != 0 ? startTime_ : r.now, cumulative);
  } catch (const FileError& e) {
    // e.g. a full disk: the measurement goes on, the vector is lost and reported at the end
    vectorError_ = e.what();
    log::error(*vectorError_);
    vector_.reset();
  }
}

void FlowRecorder::beginScalars(const TransmitStatistics& tx, const ReceiveStatistics& rx) {
  ScalarOrigin o;
  o.sent = tx.total;
  o.received = rx.received();
  o.lost = rx.lost();
  o.delaySumMs = rx.delaySumMs();
  origin_ = o;
}

FlowResult FlowRecorder::result(const FlowParameters& params, const TransmitStatistics& tx, const ReceiveStatistics& rx,
                                std::vector<PathSummary> paths) const {
  FlowResult r;
  r.flowId = params.flowId;
  r.streamId = params.streamId;
  r.description = params.description;
  r.transmitted = tx;
  r.received = rx.received();
  r.firstReception = rx.first();
  r.lastReception = rx.last();
  r.lost = rx.lost();
  r.jitterMs = rx.jitterMs();
  r.meanDelayMs = rx.meanDelayMs();
  if (origin_) {
    const ScalarOrigin& o = *origin_;
    r.transmitted.total = tx.total - o.sent;
    r.transmitted.first = o.firstTransmission;
    r.transmitted.last = o.firstTransmission != 0 ? tx.last : 0;
    r.received = rx.received() - o.received;
    r.firstReception = o.firstReception;
    r.lastReception = o.firstReception != 0 ? rx.last() : 0;
    // Frames still in reassembly at the end of the warm-up may complete after it.
    auto since = [](std::uint64_t now, std::uint64_t then) { return now > then ? now - then : 0; };
    const Counters lost = rx.lost();
    r.lost = {since(lost.bytes, o.lost.bytes), since(lost.packets, o.lost.packets), since(lost.frames, o.lost.frames)};
    r.meanDelayMs = r.received.packets > 0 ? (rx.delaySumMs() - o.delaySumMs) / static_cast<double>(r.received.packets)
                                           : std::numeric_limits<double>::quiet_NaN();
  }
  r.paths = std::move(paths);
  return r;
}

}  // namespace npm::measure
