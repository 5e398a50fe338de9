// A flow's traffic generator: saturated or rate-driven against an absolute timeline, on/off
// schedule, the runtime's end, the stop with its bounded drain; what it sent. Part of a
// measure::Flow, which owns it and runs it on the flow's thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "flowspec/random.h"
#include "measure/frame_cutter.h"
#include "measure/statistics.h"
#include "transport/channel_end.h"
#include "transport/data_channel.h"

namespace npm::measure {

struct FlowParameters;

class FlowSender {
public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // What the sender tells its flow, on the flow's thread.
  struct Events {
    std::function<void(transport::ChannelEnd)> failed;   // sending failed, error_on_abort=on
    std::function<void(std::uint64_t now)> transmitted;  // a write took messages (µs)
    std::function<void()> transferDone;                  // a fixed-size transfer's last message is handed over
  };

  // `params` and `home` outlive the sender (they are its flow's).
  FlowSender(boost::asio::io_context& io, const FlowParameters& params, bool activeSide, Events events);

  // The channel to send on; `owner` keeps the sender alive in its handlers (the flow).
  void attach(transport::DataChannel* channel, std::weak_ptr<void> owner);
  void reportTo(boost::asio::io_context& home) { home_ = &home; }

  // Starts sending (see Flow::start): off first with an on/off schedule; rate-driven frames
  // due at `steadyStart` and one interval after the other, none due after `sendUntil`.
  void start(TimePoint steadyStart, TimePoint sendUntil);
  // Stops generating; `done` runs on the home context once no write is outstanding any more
  // (or after a bounded wait, when the peer does not read). `peerGone`: the peer has ended
  // the connection, so an outstanding write cannot complete usefully: `done` runs at once.
  void stop(std::function<void()> done, bool peerGone = false);
  void close();

  const TransmitStatistics& transmitted() const { return tx_; }
  bool sending() const { return sending_; }

private:
  void pump();
  void onSent(const boost::system::error_code& ec, std::size_t sent, std::size_t dropped);
  void queueDueFrames(TimePoint now);
  std::uint64_t queueFrame(std::uint64_t stamp);  // its bytes, 0: none
  void onFrameTimer();
  void scheduleOnOff();
  void setOn(bool on, TimePoint at);
  std::optional<double> drawInterval();
  void dropUnsent();
  void finishStop();
  void checkTransferDone();

  boost::asio::io_context* home_;
  const FlowParameters& params_;
  Events events_;
  transport::DataChannel* channel_ = nullptr;
  std::weak_ptr<void> owner_;
  flowspec::Random random_;
  FrameCutter cutter_;
  std::vector<boost::asio::const_buffer> iov_;
  TransmitStatistics tx_;

  bool sending_ = false, on_ = false, writing_ = false, stopping_ = false, transferDone_ = false;
  std::size_t inFlight_ = 0;  // messages of the write under way
  boost::asio::steady_timer frameTimer_, onOffTimer_, stopTimer_;
  TimePoint nextFrame_, startSteady_, lastEvent_;
  TimePoint sendUntil_ = TimePoint::max();
  // When the current on period ends (its off event's time on the timeline): no frame due at or
  // after it is sent, however late the off event's timer runs.
  TimePoint offAt_ = TimePoint::max();
  std::size_t onOffIndex_ = 0;
  std::function<void()> stopped_;
};

}  // namespace npm::measure
