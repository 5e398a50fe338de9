// Handlers that run after their owner is gone. A timer whose handler is already queued
// when its owner is destroyed cannot be recalled by cancel(): the handler still runs, with
// success, and must find out that its owner has gone instead of touching freed memory.
// These tests line the two events up deterministically; the sanitizer build (ASan) turns
// any access to the freed owner into a failure.
#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "common/clock.h"
#include "measure/measurement.h"
#include "transport/data_channel.h"

using namespace npm;

TEST_CASE("a measurement destroyed while its vector-block handler is queued") {
  boost::asio::io_context io;
  auto measurement = std::make_shared<measure::Measurement>(io, 0x1234);
  boost::asio::co_spawn(io, measurement->start(nowMicros()), boost::asio::detached);
  io.poll();  // started (no flows: at once); the first block's timer is set
  std::weak_ptr<measure::Measurement> watch = measurement;

  // The first block is due after 1 s: let it expire while the loop does not run (the timers'
  // clock moved on by 1.05 s), then queue the owner's teardown ahead of it. The loop's first
  // turn moves the expired timer's handler into the queue behind the teardown, so the teardown
  // runs first.
  TimerClock::advance(std::chrono::milliseconds(1050));
  boost::asio::post(io, [&measurement] {
    measurement->abandon();  // as a session that ends
    measurement.reset();
  });
  const std::size_t handlers = io.run_for(std::chrono::milliseconds(200));
  CHECK(handlers >= 2);  // the teardown and the block handler both ran
  CHECK(watch.expired());
}
