#include "measure/flow.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>

#include "common/clock.h"
#include "common/log.h"
#include "transport/io_threads.h"

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
struct WriteLimit {
  std::size_t messages, bytes;
};
constexpr WriteLimit kStreamWrite{1024, 1024 * 1024};
constexpr WriteLimit kMessageWrite{512, 256 * 1024};
WriteLimit writeLimit(const transport::DataChannel& channel) {
  return channel.isByteStream() ? kStreamWrite : kMessageWrite;
}
constexpr std::size_t kMaxBacklogFrames = 4096;  // rate-driven frames waiting to be written
// Above 2^53 a double no longer holds every byte count; far beyond any real frame.
constexpr double kMaxFrameBytes = 9007199254740992.0;
constexpr auto kStopWait = std::chrono::seconds(2);

// Payload patterns of both directions, shared by all flows (messages are ≤ 65535 bytes).
const std::uint8_t* payloadPattern(bool fromActive) {
  static const auto patterns = [] {
    auto* both = new std::uint8_t[2][65536];
    npmp::fillPayload(both[0], 65536, false);
    npmp::fillPayload(both[1], 65536, true);
    return both;
  }();
  return patterns[fromActive ? 1 : 0];
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

Flow::Flow(asio::io_context& io, FlowParameters parameters, bool activeSide)
    : io_(io),
      params_(std::move(parameters)),
      activeSide_(activeSide),
      frameTimer_(io),
      onOffTimer_(io),
      stopTimer_(io),
      rx_(params_.defragTimeoutMs),
      pathTimer_(io) {}

Flow::~Flow() {
  if (channel_) channel_->close();
}

void Flow::attach(std::shared_ptr<transport::DataChannel> channel) { channel_ = std::move(channel); }

void Flow::startReceiving() {
  if (!channel_) return;
  std::weak_ptr<Flow> weak = shared_from_this();
  channel_->receive(
      [weak](std::span<const std::uint8_t> message, std::uint64_t now) {
        if (auto self = weak.lock()) self->deliver(message, now);
      },
      [weak](const transport::ChannelEnd& end) {
        if (auto self = weak.lock()) self->fail(end);
      });
}

bool Flow::deliver(std::span<const std::uint8_t> message, std::uint64_t now) {
  if (finished_) return true;  // in flight at STOP: after the end of the measurement
  const auto header = npmp::decodeData(message);
  if (!header) {
    fail(transport::ChannelEnd::protocolViolation(header.error()));
    return false;
  }
  const npmp::DataHeader& h = *header;
  if (h.flowId != params_.flowId || h.measurementId != params_.measurementId || h.streamId != params_.streamId) {
    fail(transport::ChannelEnd::protocolViolation("DATA for flow " + std::to_string(h.flowId) +
                                                  " on the data channel of flow " + std::to_string(params_.flowId)));
    return false;
  }
  const Reception r = rx_.onMessage(h, message.size(), now);
  if (origin_ && origin_->firstReception == 0) origin_->firstReception = now;
  if (vector_) {
    try {
      vector_->row(r, startTime_ != 0 ? startTime_ : now, rx_.received());
    } catch (const FileError& e) {
      // e.g. a full disk: the measurement goes on, the vector is lost and reported at the end
      vectorError_ = e.what();
      log::error(*vectorError_);
      vector_.reset();
    }
  }
  return true;
}

void Flow::fail(transport::ChannelEnd end) {
  if (failed() || finished_) return;  // after the end, the peer may close as it likes
  failed_.store(true, std::memory_order_release);
  if (onFailure_) asio::dispatch(*home_, [handler = onFailure_, end = std::move(end)] { handler(end); });
}

// ------------------------------------------------------------------------- sender

void Flow::samplePaths() {
  if (!channel_) return;
  pathSamples_.clear();
  channel_->samplePaths(pathSamples_);
  if (pathSamples_.empty()) return;
  for (const auto& s : pathSamples_) {
    auto& summary = pathSummaries_[s.id];
    summary.id = s.id;
    summary.add(s);
  }
  if (!pathVector_) return;
  try {
    const std::uint64_t now = nowMicros();
    pathVector_->rows(now, startTime_ != 0 ? startTime_ : now, pathSamples_);
    pathVector_->flush();
  } catch (const FileError& e) {
    pathVectorError_ = e.what();
    log::error(*pathVectorError_);
    pathVector_.reset();
  }
}

void Flow::schedulePathSample() {
  pathTimer_.expires_after(pathInterval_);
  pathTimer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || self->finished_) return;
    self->samplePaths();
    self->schedulePathSample();
  });
}

void Flow::start(std::uint64_t startTime, Clock::time_point steadyStart, Clock::time_point sendUntil) {
  startTime_ = startTime;
  startSteady_ = steadyStart;
  lastEvent_ = startSteady_;
  sendUntil_ = sendUntil;
  if (pathInterval_.count() > 0) {
    samplePaths();
    schedulePathSample();
  }
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
void Flow::setOn(bool on, Clock::time_point at) {
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

void Flow::scheduleOnOff() {
  if (onOffIndex_ >= params_.onOff.size()) {
    if (!params_.repeatOnOff) return;
    onOffIndex_ = 0;
  }
  const npmp::OnOffEvent& event = params_.onOff[onOffIndex_++];
  double value = std::max(0.0, flowspec::sample(event.spec, random_));
  if (params_.repeatOnOff) value = std::max(value, 0.001);  // a repeating schedule must advance
  Clock::time_point at = event.relative ? lastEvent_ + seconds(value) : startSteady_ + seconds(value);
  at = std::max(at, lastEvent_);
  lastEvent_ = at;
  offAt_ = on_ ? at : Clock::time_point::max();  // this event ends the on period
  onOffTimer_.expires_at(at);
  onOffTimer_.async_wait([weak = weak_from_this(), at](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || !self->sending_) return;
    self->setOn(!self->on_, at);
    self->scheduleOnOff();
  });
}

std::optional<double> Flow::drawInterval() {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const double rate = flowspec::sample(params_.outbound.rate, random_);
    if (rate > 0.0) return 1.0 / rate;
  }
  return std::nullopt;  // the distribution keeps giving rates ≤ 0: no frame this second
}

// Queues the frames due by `now` (none due after sendUntil_, none from the end of the on
// period on), at most a backlog's worth at once, and hands them to the transport.
void Flow::queueDueFrames(Clock::time_point now) {
  const Clock::time_point until = std::min(now, sendUntil_);
  const std::uint64_t stamp = nowMicros();
  for (std::size_t n = 0; nextFrame_ <= until && nextFrame_ < offAt_ && n < kMaxBacklogFrames; ++n) {
    if (frames_.size() < kMaxBacklogFrames) queueFrame(stamp);
    const auto interval = drawInterval();
    nextFrame_ += interval ? seconds(*interval) : std::chrono::seconds(1);
    if (nextFrame_ < now - std::chrono::seconds(1)) {
      nextFrame_ = now;  // far behind (suspended, overloaded): re-anchor instead of bursting
    }
  }
  pump();
}

void Flow::onFrameTimer() {
  if (!sending_ || !on_) return;
  queueDueFrames(Clock::now());
  if (nextFrame_ > sendUntil_) return;  // the runtime is over: no more frames are due
  if (nextFrame_ >= offAt_) return;     // the on period is over: the off event comes next
  frameTimer_.expires_at(nextFrame_);
  frameTimer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->onFrameTimer();
  });
}

bool Flow::queueFrame(std::uint64_t now) {
  const double drawn = flowspec::sample(params_.outbound.size, random_);
  if (!(drawn >= 1.0)) return false;  // a frame of no bytes is not sent and not counted
  // Whatever a distribution (or a peer's ADD_FLOW) asks for, a frame is a byte count cut
  // into messages as they are written: its size costs no memory.
  const double bytes = std::min(drawn, kMaxFrameBytes);
  frames_.push_back(PendingFrame{frameId_++, static_cast<std::uint64_t>(std::llround(bytes)), now, false});
  return true;
}

// Cuts the next messages (one write's worth) off the frames waiting to be sent.
void Flow::cutMessages() {
  const WriteLimit limit = writeLimit(*channel_);
  std::size_t bytes = 0;
  for (const Pending& m : queue_) bytes += m.length;
  while (!frames_.empty() && queue_.size() < limit.messages && (queue_.empty() || bytes < limit.bytes)) {
    PendingFrame& f = frames_.front();
    const std::uint64_t part = std::min<std::uint64_t>(f.remaining, params_.maxMsgSize);
    f.remaining -= part;
    Pending& m = queue_.emplace_back();
    m.length = static_cast<std::uint16_t>(std::max<std::uint64_t>(part, npmp::kDataHeaderSize));
    m.frameEnd = f.remaining == 0;
    npmp::DataHeader h;
    h.flags = static_cast<std::uint8_t>((f.begun ? 0 : npmp::kDataFrameBegin) | (m.frameEnd ? npmp::kDataFrameEnd : 0));
    h.length = m.length;
    h.flowId = params_.flowId;
    h.measurementId = params_.measurementId;
    h.streamId = params_.streamId;
    h.frameId = f.frameId;
    h.seqNumber = seqNumber_++;
    h.byteSeqNumber = byteSeqNumber_;
    h.timeStamp = f.timeStamp;
    byteSeqNumber_ += m.length;
    npmp::encodeDataHeader(h, m.header);
    f.begun = true;
    bytes += m.length;
    if (m.frameEnd) frames_.pop_front();
  }
}

void Flow::pump() {
  if (writing_ || !channel_) return;
  const WriteLimit limit = writeLimit(*channel_);
  if (queue_.empty() && frames_.empty()) {
    if (!sending_ || !on_ || !params_.outbound.saturated()) return;
    const std::uint64_t now = nowMicros();
    // Saturated: frames for one write (a frame of no bytes: try again next time).
    std::uint64_t queued = 0;
    for (std::size_t i = 0; i < limit.messages && queued < limit.bytes; ++i) {
      if (!queueFrame(now)) break;
      queued += frames_.back().remaining;
    }
  }
  cutMessages();
  if (queue_.empty()) return;
  const std::uint8_t* payload = payloadPattern(activeSide_);
  std::size_t n = 0, bytes = 0;
  while (n < queue_.size() && n < limit.messages && (n == 0 || bytes < limit.bytes)) bytes += queue_[n++].length;
  iov_.clear();
  if (!layOutBatch(n)) {
    for (std::size_t i = 0; i < n; ++i) {
      const Pending& m = queue_[i];
      iov_.emplace_back(m.header, npmp::kDataHeaderSize);
      iov_.emplace_back(payload, m.length - npmp::kDataHeaderSize);
    }
  }
  inFlight_ = n;
  writing_ = true;
  channel_->send(iov_, n, [weak = weak_from_this()](const boost::system::error_code& ec, std::size_t sent,
                                                 std::size_t dropped) {
    if (auto self = weak.lock()) self->onSent(ec, sent, dropped);
  });
}

// Messages of one size on a byte stream (a saturated flow of constant size, the usual case)
// go out as one contiguous buffer, so the kernel copies one segment instead of two per
// message; the bytes on the wire are the same.
bool Flow::layOutBatch(std::size_t n) {
  if (n < 2 || !channel_->isByteStream()) return false;
  const std::size_t length = queue_.front().length;
  for (std::size_t i = 1; i < n; ++i) {
    if (queue_[i].length != length) return false;
  }
  if (length != batchLength_ || batch_.size() < n * length) {
    batch_.resize(std::max(batch_.size(), n * length));
    const std::uint8_t* payload = payloadPattern(activeSide_);
    for (std::size_t at = 0; at + length <= batch_.size(); at += length) {
      std::memcpy(batch_.data() + at + npmp::kDataHeaderSize, payload, length - npmp::kDataHeaderSize);
    }
    batchLength_ = length;
  }
  for (std::size_t i = 0; i < n; ++i) std::memcpy(batch_.data() + i * length, queue_[i].header, npmp::kDataHeaderSize);
  iov_.emplace_back(batch_.data(), n * length);
  return true;
}

void Flow::onSent(const boost::system::error_code& ec, std::size_t sent, std::size_t dropped) {
  writing_ = false;
  const std::uint64_t now = nowMicros();
  for (std::size_t i = 0; i < sent && !queue_.empty(); ++i) {
    tx_.onMessage(queue_.front().length, queue_.front().frameEnd, now);
    queue_.pop_front();
  }
  if (sent > 0 && origin_ && origin_->firstTransmission == 0) origin_->firstTransmission = now;
  for (std::size_t i = 0; i < dropped && !queue_.empty(); ++i) queue_.pop_front();
  inFlight_ = 0;
  if (ec) {
    queue_.clear();
    frames_.clear();
    if (sending_) {
      sending_ = false;
      if (params_.errorOnAbort) {
        fail(transport::ChannelEnd::failed("Flow #" + std::to_string(params_.flowId) + " has been aborted: " +
                                           ec.message()));
      } else {
        log::warning("Flow #" + std::to_string(params_.flowId) + ": sending failed (" + ec.message() +
                     "), error_on_abort=off: the flow stops sending");
      }
    }
  }
  if (stopping_) {
    if (!ec && stopped_ && (!queue_.empty() || !frames_.empty())) {  // the frames due by the stop go out
      pump();
      return;
    }
    if (auto done = std::move(stopped_)) {
      stopped_ = nullptr;
      stopTimer_.cancel();
      asio::dispatch(*home_, std::move(done));
    }
    return;
  }
  pump();
}

// Messages not handed to the transport yet are dropped (a saturated flow stops at once).
void Flow::dropUnsent() {
  queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(writing_ ? inFlight_ : 0), queue_.end());
  frames_.clear();
}

void Flow::stopSending(std::function<void()> done) {
  // A rate-driven flow's frames that fell due before the stop (by the end of the runtime)
  // still go out, also where the stop overtook their timer on a busy thread.
  const bool sendDue = sending_ && on_ && !params_.outbound.saturated();
  if (sendDue) queueDueFrames(Clock::now());
  sending_ = false;
  stopping_ = true;
  frameTimer_.cancel();
  onOffTimer_.cancel();
  // A saturated flow stops at once; without a write under way nothing more goes out.
  if (!sendDue || !writing_) dropUnsent();
  if (!writing_) {
    asio::post(*home_, std::move(done));
    return;
  }
  stopped_ = std::move(done);
  stopTimer_.expires_after(kStopWait);
  stopTimer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    if (auto pending = std::move(self->stopped_)) {  // the peer does not read: give up waiting
      self->stopped_ = nullptr;
      self->dropUnsent();
      asio::dispatch(*self->home_, std::move(pending));
    }
  });
}

void Flow::finishReceiving() {
  if (!finished_ && pathInterval_.count() > 0) samplePaths();  // the state at the end
  pathTimer_.cancel();
  rx_.finalize();
  finished_ = true;
}

void Flow::close() {
  sending_ = false;
  std::vector<std::uint8_t>().swap(batch_);  // nothing is written any more
  frameTimer_.cancel();
  onOffTimer_.cancel();
  stopTimer_.cancel();
  pathTimer_.cancel();
  if (channel_) channel_->close();
}

FlowSnapshot Flow::snapshot() const {
  FlowSnapshot s;
  s.flowId = params_.flowId;
  s.description = params_.description;
  s.jitterMs = rx_.jitterMs();
  s.sent = tx_.total;
  s.received = rx_.received();
  s.lost = rx_.lost();
  return s;
}

FlowResult Flow::result() const {
  FlowResult r;
  r.flowId = params_.flowId;
  r.streamId = params_.streamId;
  r.description = params_.description;
  r.transmitted = tx_;
  r.received = rx_.received();
  r.firstReception = rx_.first();
  r.lastReception = rx_.last();
  r.lost = rx_.lost();
  r.jitterMs = rx_.jitterMs();
  r.meanDelayMs = rx_.meanDelayMs();
  if (origin_) {
    const ScalarOrigin& o = *origin_;
    r.transmitted.total = tx_.total - o.sent;
    r.transmitted.first = o.firstTransmission;
    r.transmitted.last = o.firstTransmission != 0 ? tx_.last : 0;
    r.received = rx_.received() - o.received;
    r.firstReception = o.firstReception;
    r.lastReception = o.firstReception != 0 ? rx_.last() : 0;
    // Frames still in reassembly at the end of the warm-up may complete after it.
    auto since = [](std::uint64_t now, std::uint64_t then) { return now > then ? now - then : 0; };
    const Counters lost = rx_.lost();
    r.lost = {since(lost.bytes, o.lost.bytes), since(lost.packets, o.lost.packets),
              since(lost.frames, o.lost.frames)};
    r.meanDelayMs = r.received.packets > 0
                        ? (rx_.delaySumMs() - o.delaySumMs) / static_cast<double>(r.received.packets)
                        : std::numeric_limits<double>::quiet_NaN();
  }
  for (const auto& [id, summary] : pathSummaries_) r.paths.push_back(summary);
  return r;
}

void Flow::beginScalars() {
  if (finished_) return;
  ScalarOrigin o;
  o.sent = tx_.total;
  o.received = rx_.received();
  o.lost = rx_.lost();
  o.delaySumMs = rx_.delaySumMs();
  origin_ = o;
  if (pathInterval_.count() > 0) {
    samplePaths();  // the state at the end of the warm-up, the base of the counters
    for (auto& [id, summary] : pathSummaries_) summary.restart();
  }
}

// ------------------------------------------------------------------------- threads

asio::awaitable<void> askOwners(std::vector<std::shared_ptr<Flow>> flows, std::function<void(Flow&, std::size_t)> fn) {
  // Batches in the order of the flows' contexts' first appearance (a handful of contexts).
  std::vector<std::pair<asio::io_context*, std::vector<std::size_t>>> batches;
  for (std::size_t i = 0; i < flows.size(); ++i) {
    if (!flows[i]) continue;
    asio::io_context* context = &flows[i]->context();
    auto it = std::find_if(batches.begin(), batches.end(), [context](const auto& b) { return b.first == context; });
    if (it == batches.end()) it = batches.insert(batches.end(), {context, {}});
    it->second.push_back(i);
  }
  for (const auto& batch : batches) {
    std::function<void()> run = [&flows, &fn, &batch] {
      for (std::size_t i : batch.second) fn(*flows[i], i);
    };
    asio::io_context& context = *batch.first;
    if (context.get_executor().running_in_this_thread() || context.stopped()) {
      run();
    } else {
      co_await transport::runThere(context.get_executor(), std::move(run));
    }
  }
}

}  // namespace npm::measure
