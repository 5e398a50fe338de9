// A flow at run time, on either side: its traffic generator (saturated or rate-driven
// against an absolute timeline, on/off schedule), its receiver accounting, its vectors and
// its per-path sampling.
#pragma once

#include "common/asio_awaitable.h"  // first: Boost 1.74 (see there)

#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "flowspec/flowspec.h"
#include "measure/flow_parameters.h"
#include "measure/flow_receiver.h"
#include "measure/flow_recorder.h"
#include "measure/flow_sender.h"
#include "measure/path_sampler.h"
#include "measure/results.h"
#include "measure/statistics.h"
#include "transport/channel_end.h"
#include "transport/data_channel.h"

namespace npm::measure {

namespace asio = boost::asio;

// A flow lives on one network thread, the one running the io_context it was made with (see
// transport/io_threads.h): its connection's handlers and its timers run there, and every other
// call must be made there too; other threads go through onOwners() or tellOwner().
//
// The flow owns its channel and four parts with one job each, and connects them: the sender
// (traffic generation, measure/flow_sender.h), the receiver (accounting of what arrives,
// measure/flow_receiver.h), the recorder (per-flow vector and the scalars' window,
// measure/flow_recorder.h) and the path sampler (measure/path_sampler.h).
class Flow : public std::enable_shared_from_this<Flow> {
public:
  Flow(asio::io_context& io, FlowParameters parameters, bool activeSide);
  ~Flow();
  Flow(const Flow&) = delete;
  Flow& operator=(const Flow&) = delete;

  // The context (thread) that owns the flow.
  asio::io_context& context() const { return io_; }
  // Where the owner's callbacks (onFailure, stopSending's `done`) run: the thread of the
  // control connection. By default the flow's own context.
  void reportTo(asio::io_context& home);

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
  // Called (on the home context) when a fixed-size transfer has handed its last message to the
  // transport.
  void onTransferDone(std::function<void()> handler) { onTransferDone_ = std::move(handler); }

  void setVector(FlowVectorWriter writer) { recorder_.setVector(std::move(writer)); }
  FlowVectorWriter* vector() { return recorder_.vector(); }
  // Why the vector had to be given up during the run (nothing if it did not).
  const std::optional<std::string>& vectorError() const { return recorder_.vectorError(); }

  // Samples the transport's per-path state every `interval` from start() to
  // finishReceiving() (and once more then), for the per-path scalars (result()) and, with a
  // writer, into the per-path vector.
  void samplePathsEvery(std::chrono::milliseconds interval) { paths_.every(interval); }
  void setPathVector(PathVectorWriter writer) { paths_.setVector(std::move(writer)); }
  PathVectorWriter* pathVector() { return paths_.vector(); }
  const std::optional<std::string>& pathVectorError() const { return paths_.vectorError(); }

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
  // a bounded wait, when the peer does not read; at once when the peer has ended the flow's
  // connection: a write blocked on it would hold the stop for the whole wait).
  void stopSending(std::function<void()> done) { sender_.stop(std::move(done), failed()); }
  // Ends reception accounting: incomplete frames are lost.
  void finishReceiving();
  // Ends the flow's connection at once (DataChannel::abort): what it still holds belongs to no
  // measurement.
  void close();

  // The counters now; `paths`: and the sending side's transport state (FlowSnapshot).
  FlowSnapshot snapshot(bool paths = false) const;
  FlowResult result() const;
  const TransmitStatistics& transmitted() const { return sender_.transmitted(); }
  const ReceiveStatistics& received() const { return receiver_.statistics(); }
  bool sending() const { return sender_.sending(); }
  // The flow could not go on (see onFailure), before the end of its measurement. Any thread.
  bool failed() const { return failed_.load(std::memory_order_acquire); }

private:
  void fail(transport::ChannelEnd end);

  asio::io_context& io_;
  asio::io_context* home_ = &io_;
  const FlowParameters params_;  // before the parts, which refer to it
  std::shared_ptr<transport::DataChannel> channel_;
  FlowSender sender_;
  FlowReceiver receiver_;
  FlowRecorder recorder_;
  PathSampler paths_;
  std::function<void(const transport::ChannelEnd&)> onFailure_;
  std::function<void()> onTransferDone_;
  std::atomic<bool> failed_ = false;
};

// Asks the flows' own threads: runs fn(flow, i) for every flows[i] on the flow's own thread and
// resumes the calling coroutine when all have run. Inline for flows of the calling thread's
// context (or of one that no thread runs any more); otherwise one batch per context, posted
// with transport::runThere, the batches one after the other, never at the same time, so fn
// needs no locking of its own; what it writes is visible to the caller afterwards. The calling
// thread is not blocked meanwhile: its other handlers run (on the passive, the other sessions),
// so what fn writes belongs to the waiting frame, and whatever else the caller reads may have
// changed when it resumes.
[[nodiscard]] asio::awaitable<void> askOwners(std::vector<std::shared_ptr<Flow>> flows,
                                              std::function<void(Flow&, std::size_t)> fn);

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
