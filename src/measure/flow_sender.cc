#include "measure/flow_sender.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <string>

#include "common/clock.h"
#include "common/log.h"
#include "measure/flow.h"

namespace npm::measure {

namespace {

using Clock = std::chrono::steady_clock;

// How much one write hands the transport. On a byte stream (TCP, MPTCP) up to 1 MiB, as one
// read takes in up to 1 MiB (transport/data_channel.cc), so that the two directions of a
// bidirectional saturated flow share its thread evenly; 1 MiB rather than 256 KiB gave 1.8x
// the goodput of a saturated 16000-byte flow on loopback and 1.15x at 1400 bytes
// (tests/bench/throughput.py). Message by message (UDP, DCCP, the streams of an SCTP
// association) 512 messages or 256 KiB: a saturated stream must leave its association's send
// buffer and the thread to the other streams of the association between writes.
constexpr WriteLimit kStreamWrite{1024, 1024 * 1024};
constexpr WriteLimit kMessageWrite{512, 256 * 1024};
WriteLimit writeLimit(const transport::DataChannel& channel) {
  return channel.isByteStream() ? kStreamWrite : kMessageWrite;
}
constexpr std::size_t kMaxBacklogFrames = 4096;  // rate-driven frames waiting to be written
constexpr auto kStopWait = std::chrono::seconds(2);

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

FrameLabels labelsOf(const FlowParameters& p) {
  return FrameLabels{p.measurementId, p.flowId, p.streamId, p.maxMsgSize};
}

}  // namespace

FlowSender::FlowSender(asio::io_context& io, const FlowParameters& params, bool activeSide, Events events)
    : home_(&io),
      params_(params),
      events_(std::move(events)),
      random_(flowspec::Random::seededOrEntropy(params.trafficSeed)),
      cutter_(labelsOf(params), activeSide),
      frameTimer_(io),
      onOffTimer_(io),
      stopTimer_(io) {
  cutter_.setLimit(params.transferBytes, params.transferFrames);
}

void FlowSender::attach(transport::DataChannel* channel, std::weak_ptr<void> owner) {
  channel_ = channel;
  owner_ = std::move(owner);
}

void FlowSender::start(TimePoint steadyStart, TimePoint sendUntil) {
  startSteady_ = steadyStart;
  lastEvent_ = startSteady_;
  sendUntil_ = sendUntil;
  sending_ = params_.outbound.enabled() && channel_ != nullptr;
  if (!sending_) return;
  if (params_.onOff.empty()) {
    setOn(true, startSteady_);
  } else {
    on_ = false;  // a flow with an on/off schedule starts off
    scheduleOnOff();
  }
}

// An on period's first frame is due when the period begins.
void FlowSender::setOn(bool on, TimePoint at) {
  on_ = on;
  if (!sending_) return;
  if (!on) {
    frameTimer_.cancel();
    return;
  }
  if (params_.outbound.saturated()) {
    pump();
  } else {
    nextFrame_ = at;
    onFrameTimer();
  }
}

void FlowSender::scheduleOnOff() {
  if (onOffIndex_ >= params_.onOff.size()) {
    if (!params_.repeatOnOff) return;
    onOffIndex_ = 0;
  }
  const npmp::OnOffEvent& event = params_.onOff[onOffIndex_++];
  double value = std::max(0.0, flowspec::sample(event.spec, random_));
  if (params_.repeatOnOff) value = std::max(value, 0.001);  // a repeating schedule must advance
  TimePoint at = event.relative ? lastEvent_ + seconds(value) : startSteady_ + seconds(value);
  at = std::max(at, lastEvent_);
  lastEvent_ = at;
  offAt_ = on_ ? at : TimePoint::max();  // this event ends the on period
  onOffTimer_.expires_at(at);
  onOffTimer_.async_wait([this, owner = owner_, at](const boost::system::error_code& ec) {
    const auto alive = owner.lock();
    if (ec || !alive || !sending_) return;
    setOn(!on_, at);
    scheduleOnOff();
  });
}

std::optional<double> FlowSender::drawInterval() {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const double rate = flowspec::sample(params_.outbound.rate, random_);
    if (rate > 0.0) return 1.0 / rate;
  }
  return std::nullopt;  // the distribution keeps giving rates ≤ 0: no frame this second
}

std::uint64_t FlowSender::queueFrame(std::uint64_t stamp) {
  return cutter_.addFrame(flowspec::sample(params_.outbound.size, random_), stamp);
}

// Queues the frames due by `now` (none due after sendUntil_, none from the end of the on
// period on), at most a backlog's worth at once, and hands them to the transport.
void FlowSender::queueDueFrames(TimePoint now) {
  const TimePoint until = std::min(now, sendUntil_);
  const std::uint64_t stamp = nowMicros();
  for (std::size_t n = 0; nextFrame_ <= until && nextFrame_ < offAt_ && n < kMaxBacklogFrames && !cutter_.exhausted();
       ++n) {
    if (cutter_.framesWaiting() < kMaxBacklogFrames) queueFrame(stamp);
    const auto interval = drawInterval();
    nextFrame_ += interval ? seconds(*interval) : std::chrono::seconds(1);
    if (nextFrame_ < now - std::chrono::seconds(1)) {
      nextFrame_ = now;  // far behind (suspended, overloaded): re-anchor instead of bursting
    }
  }
  pump();
}

void FlowSender::onFrameTimer() {
  if (!sending_ || !on_) return;
  queueDueFrames(Clock::now());
  if (cutter_.exhausted()) return;      // a fixed-size transfer has queued its last frame
  if (nextFrame_ > sendUntil_) return;  // the runtime is over: no more frames are due
  if (nextFrame_ >= offAt_) return;     // the on period is over: the off event comes next
  frameTimer_.expires_at(nextFrame_);
  frameTimer_.async_wait([this, owner = owner_](const boost::system::error_code& ec) {
    const auto alive = owner.lock();
    if (!ec && alive) onFrameTimer();
  });
}

void FlowSender::pump() {
  if (writing_ || !channel_) return;
  const WriteLimit limit = writeLimit(*channel_);
  if (cutter_.idle()) {
    if (cutter_.exhausted()) {
      checkTransferDone();
      return;
    }
    if (!sending_ || !on_ || !params_.outbound.saturated()) return;
    // Saturated: frames for one write (a frame of no bytes: try again next time).
    const std::uint64_t stamp = nowMicros();
    std::uint64_t queued = 0;
    for (std::size_t i = 0; i < limit.messages && queued < limit.bytes; ++i) {
      const std::uint64_t bytes = queueFrame(stamp);
      if (bytes == 0) break;
      queued += bytes;
    }
  }
  const std::size_t n = cutter_.prepareWrite(limit, channel_->isByteStream(), iov_);
  if (n == 0) {
    checkTransferDone();
    return;
  }
  inFlight_ = n;
  writing_ = true;
  channel_->send(iov_, n,
                 [this, owner = owner_](const boost::system::error_code& ec, std::size_t sent, std::size_t dropped) {
                   if (const auto alive = owner.lock()) onSent(ec, sent, dropped);
                 });
}

void FlowSender::onSent(const boost::system::error_code& ec, std::size_t sent, std::size_t dropped) {
  writing_ = false;
  const std::uint64_t now = nowMicros();
  cutter_.completeWrite(sent, dropped, tx_, now);
  if (sent > 0 && events_.transmitted) events_.transmitted(now);
  inFlight_ = 0;
  if (ec) {
    cutter_.clear();
    if (sending_) {
      sending_ = false;
      const std::string flow = "Flow #" + std::to_string(params_.flowId);
      if (ec == boost::asio::error::eof) {
        // The peer ended the connection in order (an SCTP SHUTDOWN): no abort; the channel's
        // end is reported by the flow's owner.
        log::debug(flow + ": the peer ended the connection; the flow stops sending");
      } else if (params_.errorOnAbort) {
        if (events_.failed) events_.failed(transport::ChannelEnd::failed(flow + " has been aborted: " + ec.message()));
      } else {
        log::warning(flow + ": sending failed (" + ec.message() + "), error_on_abort=off: the flow stops sending");
      }
    }
  }
  if (stopping_) {
    if (!ec && stopped_ && !cutter_.idle()) {  // the frames due by the stop go out
      pump();
      return;
    }
    stopTimer_.cancel();
    finishStop();
    return;
  }
  pump();
}

// A fixed-size transfer is done once its last frame is queued and every message handed over:
// told once, while the flow still sends (not after a stop or a failure).
void FlowSender::checkTransferDone() {
  if (transferDone_ || !sending_ || writing_ || !cutter_.exhausted() || !cutter_.idle()) return;
  transferDone_ = true;
  log::debug("Flow #" + std::to_string(params_.flowId) + ": its fixed-size transfer is sent");
  if (events_.transferDone) events_.transferDone();
}

// Messages not handed to the transport yet are dropped (a saturated flow stops at once).
void FlowSender::dropUnsent() { cutter_.dropUnsent(writing_ ? inFlight_ : 0); }

void FlowSender::finishStop() {
  if (auto done = std::move(stopped_)) {
    stopped_ = nullptr;
    asio::dispatch(*home_, std::move(done));
  }
}

void FlowSender::stop(std::function<void()> done, bool peerGone) {
  // A rate-driven flow's frames that fell due before the stop (by the end of the runtime)
  // still go out, also where the stop overtook their timer on a busy thread.
  const bool sendDue = sending_ && on_ && !params_.outbound.saturated();
  if (sendDue) queueDueFrames(Clock::now());
  sending_ = false;
  stopping_ = true;
  frameTimer_.cancel();
  onOffTimer_.cancel();
  // Without a write under way, or with a peer that has ended the connection, nothing more
  // goes out: the stop is complete. Otherwise a saturated flow drops what it has not handed
  // over yet, and the write under way (a rate-driven flow: the frames due) may finish.
  if (!writing_ || peerGone) {
    dropUnsent();
    asio::post(*home_, std::move(done));
    return;
  }
  if (!sendDue) dropUnsent();
  stopped_ = std::move(done);
  stopTimer_.expires_after(kStopWait);
  stopTimer_.async_wait([this, owner = owner_](const boost::system::error_code& ec) {
    const auto alive = owner.lock();
    if (ec || !alive || !stopped_) return;
    dropUnsent();  // the peer does not read: give up waiting
    finishStop();
  });
}

void FlowSender::close() {
  sending_ = false;
  cutter_.release();  // nothing is written any more
  frameTimer_.cancel();
  onOffTimer_.cancel();
  stopTimer_.cancel();
}

}  // namespace npm::measure
