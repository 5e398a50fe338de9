#include "measure/flow.h"

#include <boost/asio/dispatch.hpp>

#include <algorithm>

#include "transport/io_threads.h"

namespace npm::measure {

Flow::Flow(asio::io_context& io, FlowParameters parameters, bool activeSide)
    : io_(io),
      params_(std::move(parameters)),
      sender_(io, params_, activeSide,
              FlowSender::Events{[this](transport::ChannelEnd end) { fail(std::move(end)); },
                                 [this](std::uint64_t now) { recorder_.transmitted(now); },
                                 [this] {
                                   if (onTransferDone_) asio::dispatch(*home_, onTransferDone_);
                                 }}),
      receiver_(params_),
      paths_(io) {}

// The channel is its thread's, like every other part: its reads and writes complete there. The
// last owner may let go of the flow on another thread (the passive's control thread at the end
// of REMOVE_FLOW), so the close is dispatched to the flow's thread (run here if that is this
// thread) and takes the channel with it. Closing from here raced with a read's completion on
// the flow's thread (ThreadSanitizer in test_threads; a socket object is not thread-safe).
Flow::~Flow() {
  if (channel_) asio::dispatch(io_, [channel = std::move(channel_)] { channel->close(); });
}

void Flow::reportTo(asio::io_context& home) {
  home_ = &home;
  sender_.reportTo(home);
}

// The parts' handlers keep the flow (and with it the part) alive while they run.
void Flow::attach(std::shared_ptr<transport::DataChannel> channel) {
  channel_ = std::move(channel);
  const std::weak_ptr<void> owner = weak_from_this();
  sender_.attach(channel_.get(), owner);
  paths_.attach(channel_.get(), owner);
}

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
  if (receiver_.finished()) return true;  // in flight at STOP: after the end of the measurement
  const auto reception = receiver_.accept(message, now);
  if (!reception) {
    fail(transport::ChannelEnd::protocolViolation(reception.error()));
    return false;
  }
  recorder_.received(*reception, receiver_.statistics().received());
  return true;
}

void Flow::fail(transport::ChannelEnd end) {
  if (failed() || receiver_.finished()) return;  // after the end, the peer may close as it likes
  failed_.store(true, std::memory_order_release);
  if (onFailure_) asio::dispatch(*home_, [handler = onFailure_, end = std::move(end)] { handler(end); });
}

void Flow::start(std::uint64_t startTime, std::chrono::steady_clock::time_point steadyStart,
                 std::chrono::steady_clock::time_point sendUntil) {
  recorder_.start(startTime);
  paths_.start(startTime);
  sender_.start(steadyStart, sendUntil);
}

void Flow::beginScalars() {
  if (receiver_.finished()) return;
  recorder_.beginScalars(sender_.transmitted(), receiver_.statistics());
  paths_.restart();
}

void Flow::finishReceiving() {
  paths_.finish();
  if (!receiver_.finished()) receiver_.finish();
}

void Flow::close() {
  sender_.close();
  paths_.close();
  if (channel_) channel_->abort();
}

FlowSnapshot Flow::snapshot(bool paths) const {
  const ReceiveStatistics& rx = receiver_.statistics();
  FlowSnapshot s;
  s.flowId = params_.flowId;
  s.description = params_.description;
  s.jitterMs = rx.jitterMs();
  s.sent = sender_.transmitted().total;
  s.received = rx.received();
  s.lost = rx.lost();
  if (paths && channel_ && params_.outbound.enabled()) {
    std::vector<transport::PathSample> samples;
    channel_->samplePaths(samples);
    summarisePaths(samples, s);
  }
  return s;
}

FlowResult Flow::result() const {
  return recorder_.result(params_, sender_.transmitted(), receiver_.statistics(), paths_.summaries());
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
