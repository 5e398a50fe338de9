// A rate-driven flow's frames follow one timeline from the measurement's start: a flow that
// is started late (the last of thousands) catches up, none due after the end of the runtime
// is sent, a stop that overtakes a frame's timer still sends the frames already due, and an
// on period ends on the timeline, not when its timer happens to run.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "common/clock.h"
#include "loopback.h"
#include "measure/flow.h"
#include "transport/data_channel.h"

using namespace npm;
using SteadyClock = std::chrono::steady_clock;

namespace {

// A flow of 100 frames/s × 100 bytes, sending on one end of a loopback TCP connection (the
// other end's receive queue holds everything these tests send).
struct RateFlow : test::LoopbackConnection {
  std::shared_ptr<measure::Flow> flow;

  explicit RateFlow(std::vector<npmp::OnOffEvent> onOff = {}) {
    measure::FlowParameters p;
    p.flowId = 1;
    p.outbound.rate = npmp::RandomSpec{0, {100.0}};
    p.outbound.size = npmp::RandomSpec{0, {100.0}};
    p.onOff = std::move(onOff);
    flow = std::make_shared<measure::Flow>(io, p, true);
    flow->attach(transport::makeStreamChannel(std::move(local)));
  }
  std::uint64_t frames() const { return flow->transmitted().total.frames; }
  // Runs the flow's context until `done` holds (10 s at most: a loaded machine may run its
  // timers late, never early), then `more` on, for what must not happen after it.
  template <class Done>
  void runUntil(Done done, std::chrono::milliseconds more) {
    const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
    while (!done() && SteadyClock::now() < deadline) io.run_for(std::chrono::milliseconds(10));
    io.run_for(more);
  }
};

}  // namespace

TEST_CASE(
    "a late-started rate-driven flow sends exactly the frames due from the common start to the end of the runtime") {
  RateFlow f;
  // Started 300 ms after the measurement's start (31 frames are due at once), runtime 1 s.
  const auto start = SteadyClock::now() - std::chrono::milliseconds(300);
  f.flow->start(nowMicros(), start, start + std::chrono::seconds(1));
  // Past the end of the runtime, and 300 ms on.
  f.runUntil([&] { return SteadyClock::now() > start + std::chrono::seconds(1); }, std::chrono::milliseconds(300));
  // Due at 0, 10, ..., 1000 ms: 101, none after the end although the flow kept running.
  CHECK(f.frames() == 101);
}

TEST_CASE("stopping a rate-driven flow sends the frames that fell due before the stop") {
  RateFlow f;
  const auto start = SteadyClock::now();
  f.flow->start(nowMicros(), start);
  CHECK(f.frames() == 0);  // counted when written
  // Its timer does not run (the thread is busy elsewhere) while 200 ms pass.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  bool stopped = false;
  const auto due = [start] {  // frames due at 0, 10, 20, ... ms by now
    return static_cast<std::uint64_t>((SteadyClock::now() - start) / std::chrono::milliseconds(10)) + 1;
  };
  const auto dueBefore = due();
  f.flow->stopSending([&stopped] { stopped = true; });
  const auto dueAfter = due();
  f.runUntil([&stopped] { return stopped; }, std::chrono::milliseconds(100));
  CHECK(stopped);
  CHECK(dueBefore >= 21);
  CHECK(f.frames() >= dueBefore);
  CHECK(f.frames() <= dueAfter);
}

TEST_CASE("a rate-driven flow started after the end of its runtime sends what was due and no more") {
  RateFlow f;
  // The measurement began 500 ms earlier and its runtime is over: what was due goes out at once.
  const auto start = SteadyClock::now() - std::chrono::milliseconds(500);
  f.flow->start(nowMicros(), start, start + std::chrono::milliseconds(500));
  f.runUntil([&f] { return f.frames() >= 51; }, std::chrono::milliseconds(200));
  CHECK(f.frames() == 51);
}

TEST_CASE("an on period ends at its time on the timeline, however late its off event runs") {
  // On from 0 s to 0.3 s (absolute times): frames due at 0, 10, ..., 290 ms, 30 of them.
  RateFlow f(
      {npmp::OnOffEvent{npmp::RandomSpec{0, {0.0}}, false}, npmp::OnOffEvent{npmp::RandomSpec{0, {0.3}}, false}});
  const auto start = SteadyClock::now();
  f.flow->start(nowMicros(), start);
  f.runUntil([&f] { return f.frames() > 0; }, std::chrono::milliseconds(0));
  // The thread is busy elsewhere past the end of the on period: when it comes back, the frame
  // timer (due first) and the off event are both late.
  std::this_thread::sleep_for(start + std::chrono::milliseconds(500) - SteadyClock::now());
  f.runUntil([&start] { return SteadyClock::now() > start + std::chrono::milliseconds(600); },
             std::chrono::milliseconds(100));
  CHECK(f.frames() == 30);
}
