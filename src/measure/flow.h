// A flow at run time, on either side: its traffic generator (saturated or rate-driven
// against an absolute timeline, on/off schedule), its receiver accounting and its vector.
#pragma once

#include <utility>  // Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/awaitable.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "flowspec/flowspec.h"
#include "flowspec/random.h"
#include "measure/results.h"
#include "measure/statistics.h"
#include "transport/channel_end.h"
#include "transport/data_channel.h"

namespace npm::measure {

namespace asio = boost::asio;

// What one side needs to run a flow.
struct FlowParameters {
  std::uint64_t measurementId = 0;
  std::uint32_t flowId = 0;
  std::uint16_t streamId = 0;
  npmp::Protocol protocol = npmp::Protocol::TCP;
  std::string description;
  flowspec::Traffic outbound;  // what this side sends
  std::vector<npmp::OnOffEvent> onOff;
  bool repeatOnOff = false;
  std::uint16_t maxMsgSize = 16000;
  std::uint32_t defragTimeoutMs = 5000;
  bool errorOnAbort = true;
  bool debug = false;
};

// A flow lives on one network thread, the one running the io_context it was made with (see
// transport/io_threads.h): its connection's handlers and its timers run there, and every other
// call must be made there too; other threads go through onOwners() or tellOwner().
class Flow : public std::enable_shared_from_this<Flow> {
public:
  Flow(asio::io_context& io, FlowParameters parameters, bool activeSide);
  ~Flow();

  // The context (thread) that owns the flow.
  asio::io_context& context() const { return io_; }
  // Where the owner's callbacks (onFailure, stopSending's `done`) run: the thread of the
  // control connection. By default the flow's own context.
  void reportTo(asio::io_context& home) { home_ = &home; }

  const FlowParameters& parameters() const { return params_; }
  std::uint32_t flowId() const { return params_.flowId; }
  std::uint64_t measurementId() const { return params_.measurementId; }
  std::uint16_t streamId() const { return params_.streamId; }

  // The channel the flow sends on (and, unless shared, receives from).
  void attach(std::shared_ptr<transport::DataChannel> channel);
  transport::DataChannel* channel() const { return channel_.get(); }
  // Starts reading from the channel (not for the passive's shared UDP socket).
  void startReceiving();
  // One received message (already framed). Returns false (and reports) if it is not a DATA
  // message of this flow.
  bool deliver(std::span<const std::uint8_t> message, std::uint64_t now);

  // Called when the flow cannot go on (send error with error_on_abort, garbage, peer gone).
  void onFailure(std::function<void(const transport::ChannelEnd&)> handler) { onFailure_ = std::move(handler); }

  void setVector(FlowVectorWriter writer) { vector_.emplace(std::move(writer)); }
  FlowVectorWriter* vector() { return vector_ ? &*vector_ : nullptr; }
  // Why the vector had to be given up during the run (nothing if it did not).
  const std::optional<std::string>& vectorError() const { return vectorError_; }

  // Samples the transport's per-path state every `interval` from start() to
  // finishReceiving() (and once more then), for the per-path scalars (result()) and, with a
  // writer, into the per-path vector.
  void samplePathsEvery(std::chrono::milliseconds interval) { pathInterval_ = interval; }
  void setPathVector(PathVectorWriter writer) { pathVector_.emplace(std::move(writer)); }
  PathVectorWriter* pathVector() { return pathVector_ ? &*pathVector_ : nullptr; }
  const std::optional<std::string>& pathVectorError() const { return pathVectorError_; }

  // Begins the measurement at `startTime` (µs), which is `steadyStart` on the steady clock:
  // the sender starts (off first if it has an on/off schedule) and receptions are recorded
  // relative to it. A rate-driven sender's frames are due at `steadyStart` and then one
  // interval after the other (on/off times count from it too), and none due after
  // `sendUntil` is sent (the runtime: the active's own, the passive's from ADD_FLOW; none: until
  // STOP).
  void start(std::uint64_t startTime, std::chrono::steady_clock::time_point steadyStart,
             std::chrono::steady_clock::time_point sendUntil = std::chrono::steady_clock::time_point::max());
  // The end of the warm-up (--warmup): from here on result() covers only what follows, and
  // the per-path summaries start afresh; the vectors and snapshot() keep counting from start().
  void beginScalars();
  // Stops generating traffic; `done` runs once no write is outstanding any more (or after
  // a bounded wait, when the peer does not read).
  void stopSending(std::function<void()> done);
  // Ends reception accounting: incomplete frames are lost.
  void finishReceiving();
  void close();

  FlowSnapshot snapshot() const;
  FlowResult result() const;
  const TransmitStatistics& transmitted() const { return tx_; }
  const ReceiveStatistics& received() const { return rx_; }
  bool sending() const { return sending_; }
  // The flow could not go on (see onFailure), before the end of its measurement. Any thread.
  bool failed() const { return failed_.load(std::memory_order_acquire); }

private:
  struct Pending {
    std::uint8_t header[npmp::kDataHeaderSize];
    std::uint16_t length;  // whole message
    bool frameEnd;
  };

  bool queueFrame(std::uint64_t now);
  void cutMessages();
  void pump();
  void dropUnsent();
  void onSent(const boost::system::error_code& ec, std::size_t sent, std::size_t dropped);
  void queueDueFrames(std::chrono::steady_clock::time_point now);
  void onFrameTimer();
  void scheduleOnOff();
  void setOn(bool on, std::chrono::steady_clock::time_point at);
  void fail(transport::ChannelEnd end);
  std::optional<double> drawInterval();

  asio::io_context& io_;
  asio::io_context* home_ = &io_;
  FlowParameters params_;
  bool activeSide_;
  std::shared_ptr<transport::DataChannel> channel_;
  flowspec::Random random_;

  // Sender.
  bool sending_ = false, on_ = false, writing_ = false, stopping_ = false;
  // A frame waiting to be sent: messages are cut off it as they are written.
  struct PendingFrame {
    std::uint32_t frameId;
    std::uint64_t remaining;  // bytes
    std::uint64_t timeStamp;  // µs, when the frame was generated (all its messages carry it)
    bool begun;               // its first message is cut
  };
  std::deque<PendingFrame> frames_;
  std::deque<Pending> queue_;  // messages of the write in progress (at most one write's worth)
  std::vector<asio::const_buffer> iov_;
  // A byte stream's batch of messages of one size, laid out in one buffer: the payload
  // pattern is written once, only the headers are rewritten per batch. At most one write's
  // worth (about 1 MiB), and only for flows that queue several messages per write.
  std::vector<std::uint8_t> batch_;
  std::size_t batchLength_ = 0;  // the message length batch_ is laid out for
  bool layOutBatch(std::size_t n);
  std::size_t inFlight_ = 0;
  std::uint32_t frameId_ = 0;
  std::uint64_t seqNumber_ = 0, byteSeqNumber_ = 0;
  asio::steady_timer frameTimer_, onOffTimer_, stopTimer_;
  std::chrono::steady_clock::time_point nextFrame_;
  std::chrono::steady_clock::time_point startSteady_, lastEvent_;
  std::chrono::steady_clock::time_point sendUntil_ = std::chrono::steady_clock::time_point::max();
  // When the current on period ends (its off event's time on the timeline): no frame due at or
  // after it is sent, however late the off event's timer runs.
  std::chrono::steady_clock::time_point offAt_ = std::chrono::steady_clock::time_point::max();
  std::size_t onOffIndex_ = 0;
  std::function<void()> stopped_;

  // Receiver.
  std::uint64_t startTime_ = 0;
  TransmitStatistics tx_;
  ReceiveStatistics rx_;
  // The totals at the end of the warm-up, which result() subtracts.
  struct ScalarOrigin {
    Counters sent, received, lost;
    double delaySumMs = 0.0;
    std::uint64_t firstTransmission = 0, firstReception = 0;  // since the warm-up, 0 = none yet
  };
  std::optional<ScalarOrigin> origin_;
  std::optional<FlowVectorWriter> vector_;
  std::optional<std::string> vectorError_;
  std::optional<PathVectorWriter> pathVector_;
  std::optional<std::string> pathVectorError_;
  std::chrono::milliseconds pathInterval_{0};
  asio::steady_timer pathTimer_;
  std::vector<transport::PathSample> pathSamples_;  // reused
  std::map<std::int64_t, PathSummary> pathSummaries_;
  void samplePaths();
  void schedulePathSample();
  std::function<void(const transport::ChannelEnd&)> onFailure_;
  std::atomic<bool> failed_ = false;
  bool finished_ = false;
};

// Asks the flows' own threads: runs fn(flow, i) for every flows[i] on the flow's own thread and
// resumes the calling coroutine when all have run. Inline for flows of the calling thread's
// context (or of one that no thread runs any more); otherwise one batch per context, posted
// with transport::runThere, the batches one after the other, never at the same time, so fn
// needs no locking of its own; what it writes is visible to the caller afterwards. The calling
// thread is not blocked meanwhile: its other handlers run (on the passive, the other sessions),
// so what fn writes belongs to the waiting frame, and whatever else the caller reads may have
// changed when it resumes.
[[nodiscard]] asio::awaitable<void> askOwners(std::vector<std::shared_ptr<Flow>> flows, std::function<void(Flow&, std::size_t)> fn);

// The forms to call: fn a lambda that captures only references and plain values, and flows a
// named vector. (GCC 12 destroys a lambda temporary of a co_await expression twice; the
// std::function that askOwners keeps is made in here, outside that expression.)
template <class Fn>
[[nodiscard]] asio::awaitable<void> onOwners(const std::vector<std::shared_ptr<Flow>>& flows, Fn fn) {
  static_assert(std::is_trivially_destructible_v<Fn>, "capture references and plain values only");
  return askOwners(flows, std::function<void(Flow&, std::size_t)>(fn));
}
template <class Fn>
asio::awaitable<void> onOwners(std::vector<std::shared_ptr<Flow>>&& flows, Fn fn) = delete;  // name the vector
template <class Fn>
[[nodiscard]] asio::awaitable<void> onOwner(const std::shared_ptr<Flow>& flow, Fn fn) {
  static_assert(std::is_trivially_destructible_v<Fn>, "capture references and plain values only");
  return askOwners({flow}, [fn](Flow& f, std::size_t) { fn(f); });
}

// Tells a flow's own thread: runs fn(flow) there (at once when called there), without waiting.
// For what nobody waits for: closing, starting to read.
template <class Fn>
void tellOwner(const std::shared_ptr<Flow>& flow, Fn fn) {
  asio::dispatch(flow->context(), [flow, fn] { fn(*flow); });
}

}  // namespace npm::measure
