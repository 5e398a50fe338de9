// The network threads: contexts on threads of their own, flows asked on their owner's thread
// (without blocking the caller's),
// a stream connection handed from one thread to another with what it had read already.
#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "measure/flow.h"
#include "transport/data_channel.h"
#include "transport/io_threads.h"

using namespace npm;
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::thread::id threadOf(asio::io_context& context) {
  std::promise<std::thread::id> id;
  asio::post(context, [&id] { id.set_value(std::this_thread::get_id()); });
  return id.get_future().get();
}

std::shared_ptr<measure::Flow> flowOn(asio::io_context& context, std::uint32_t id) {
  measure::FlowParameters p;
  p.flowId = id;
  return std::make_shared<measure::Flow>(context, p, true);
}

// A connected pair of TCP sockets on loopback: `a` on context `ca`, `b` on context `cb`.
std::pair<tcp::socket, tcp::socket> connectedPair(asio::io_context& ca, asio::io_context& cb) {
  tcp::acceptor acceptor(ca, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket b(cb);
  b.connect(acceptor.local_endpoint());
  tcp::socket a(ca);
  acceptor.accept(a);
  return {std::move(a), std::move(b)};
}

// Runs `a` on `io` (run here, by this thread) to its end; its result or exception.
template <class T>
T complete(asio::io_context& io, asio::awaitable<T> a) {
  auto result = asio::co_spawn(io, std::move(a), asio::use_future);
  io.restart();
  io.run();
  return result.get();
}

}  // namespace

TEST_CASE("network threads: one context per thread, round robin from the main one") {
  transport::IoThreads threads(3);
  REQUIRE(threads.size() == 3);
  threads.start();
  threads.start();  // idempotent
  CHECK(&threads.pick() == &threads.main());
  CHECK(&threads.pick() == &threads.context(1));
  CHECK(&threads.pick() == &threads.context(2));
  CHECK(&threads.pick() == &threads.main());
  const auto one = threadOf(threads.context(1)), two = threadOf(threads.context(2));
  CHECK(one != two);
  CHECK(one != std::this_thread::get_id());
  CHECK(two != std::this_thread::get_id());
  threads.stop();
  threads.stop();
  CHECK(threads.context(1).stopped());

  transport::IoThreads single(0);  // 0 counts as 1: only the caller's context
  CHECK(single.size() == 1);
  single.start();  // no thread to start
  CHECK(&single.pick() == &single.main());
}

TEST_CASE("onOwners: every flow on its owner's thread, in the flows' order, one batch at a time") {
  transport::IoThreads threads(2);
  threads.start();
  asio::io_context& main = threads.main();
  std::vector<std::shared_ptr<measure::Flow>> flows;
  for (std::uint32_t i = 0; i < 6; ++i) flows.push_back(flowOn(i % 2 == 0 ? main : threads.context(1), i));
  flows.insert(flows.begin() + 3, nullptr);  // skipped
  const auto worker = threadOf(threads.context(1));

  std::vector<std::uint32_t> seen(flows.size(), 99);
  std::vector<std::thread::id> where(flows.size());
  std::atomic<int> running = 0, most = 0;
  // The main context's flows run inline where this thread runs it.
  complete(main, measure::onOwners(flows, [&seen, &where, &running, &most](measure::Flow& f, std::size_t i) {
             most = std::max(most.load(), ++running);
             seen[i] = f.flowId();
             where[i] = std::this_thread::get_id();
             CHECK(f.context().get_executor().running_in_this_thread());
             std::this_thread::sleep_for(std::chrono::milliseconds(2));
             --running;
           }));
  CHECK(most == 1);
  for (std::size_t i = 0; i < flows.size(); ++i) {
    if (!flows[i]) {
      CHECK(seen[i] == 99);
      continue;
    }
    CHECK(seen[i] == flows[i]->flowId());
    CHECK(where[i] == (&flows[i]->context() == &main ? std::this_thread::get_id() : worker));
  }

  // An exception on the owner's thread reaches the caller.
  CHECK_THROWS_WITH(
      complete(main, measure::onOwner(flows[1], [](measure::Flow&) { throw std::runtime_error("on the worker"); })),
      "on the worker");

  // Told, not asked: runs on the owner's thread, the caller does not wait.
  std::promise<std::thread::id> told;
  measure::tellOwner(flows[1], [&told](measure::Flow&) { told.set_value(std::this_thread::get_id()); });
  CHECK(told.get_future().get() == worker);

  // Once the threads have stopped, nothing runs the contexts: inline, on the caller's thread.
  threads.stop();
  std::thread::id after;
  complete(main, measure::onOwner(flows[1], [&after](measure::Flow&) { after = std::this_thread::get_id(); }));
  CHECK(after == std::this_thread::get_id());
}

TEST_CASE("a caller waiting for a held-up flow thread goes on with its other work") {
  // The passive's control thread asks flows' threads for their state (STOP, REMOVE_FLOW, the
  // status); one held-up flow thread must not hold up the other sessions on the control thread.
  transport::IoThreads threads(2);
  threads.start();
  asio::io_context& main = threads.main();
  auto flow = flowOn(threads.context(1), 1);
  std::promise<void> release;
  // Held up until released (by the other work below), for 10 s at most.
  asio::post(threads.context(1), [held = release.get_future().share()] { held.wait_for(std::chrono::seconds(10)); });
  std::atomic<bool> asked = false;
  auto waiting =
      asio::co_spawn(main, measure::onOwner(flow, [&asked](measure::Flow&) { asked = true; }), asio::use_future);
  // Queued on the caller's thread behind the caller, which has asked by then: it runs while the
  // caller waits (a caller blocking its thread would run it only after the 10 s).
  bool otherWorkFirst = false;
  asio::post(main, [&] {
    otherWorkFirst = !asked;
    release.set_value();
  });
  main.run();
  waiting.get();
  CHECK(otherWorkFirst);
  CHECK(asked);
}

TEST_CASE("runThere: work on a worker pool, its result and its exception back on the caller's thread") {
  transport::IoThreads threads(1);
  asio::io_context& main = threads.main();
  asio::thread_pool pool(1);
  std::thread::id ranOn;
  std::function<void()> work = [&ranOn] { ranOn = std::this_thread::get_id(); };
  complete(main, transport::runThere(pool.get_executor(), std::move(work)));
  CHECK(ranOn != std::thread::id());
  CHECK(ranOn != std::this_thread::get_id());
  std::function<void()> failing = [] { throw std::runtime_error("in the pool"); };
  CHECK_THROWS_WITH(complete(main, transport::runThere(pool.get_executor(), std::move(failing))), "in the pool");
  pool.join();
}

TEST_CASE("a stream channel moves to another thread with the bytes it had read already") {
  transport::IoThreads threads(2);
  threads.start();
  asio::io_context& main = threads.main();
  auto [server, client] = connectedPair(main, main);
  // Two messages in one segment, then a third later: the first is read on the main thread,
  // the second was read with it and must reach the moved channel, the third is read there.
  const std::uint8_t first[] = {0x05, 0, 0, 8, 1, 2, 3, 4};
  const std::uint8_t second[] = {0x05, 0, 0, 6, 5, 6};
  const std::uint8_t third[] = {0x05, 0, 0, 5, 7};
  std::vector<std::uint8_t> both(std::begin(first), std::end(first));
  both.insert(both.end(), std::begin(second), std::end(second));
  asio::write(client, asio::buffer(both));

  auto channel = transport::makeStreamChannel(std::move(server));
  std::shared_ptr<transport::DataChannel> moved;
  std::vector<std::vector<std::uint8_t>> onMain;
  channel->receive(
      [&](std::span<const std::uint8_t> m, std::uint64_t) {
        onMain.emplace_back(m.begin(), m.end());
        moved = channel->moveTo(threads.context(1));
      },
      [](const transport::ChannelEnd& end) { FAIL("main channel: " << end.text()); });
  while (!moved) main.run_one();
  REQUIRE(onMain.size() == 1);
  CHECK(onMain[0] == std::vector<std::uint8_t>(std::begin(first), std::end(first)));
  CHECK(moved->fd() >= 0);
  CHECK(channel->fd() < 0);  // the old channel let go of the socket

  std::mutex mutex;
  std::vector<std::vector<std::uint8_t>> onWorker;
  std::atomic<bool> wrongThread = false;
  std::promise<void> gotBoth;
  asio::post(threads.context(1), [&] {
    moved->receive(
        [&](std::span<const std::uint8_t> m, std::uint64_t) {
          if (!threads.context(1).get_executor().running_in_this_thread()) wrongThread = true;
          std::lock_guard lock(mutex);
          onWorker.emplace_back(m.begin(), m.end());
          if (onWorker.size() == 2) gotBoth.set_value();
        },
        [](const transport::ChannelEnd&) {});
  });
  asio::write(client, asio::buffer(third));
  REQUIRE(gotBoth.get_future().wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  std::lock_guard lock(mutex);
  CHECK(onWorker[0] == std::vector<std::uint8_t>(std::begin(second), std::end(second)));
  CHECK(onWorker[1] == std::vector<std::uint8_t>(std::begin(third), std::end(third)));
  CHECK_FALSE(wrongThread);
  std::promise<void> closed;
  asio::post(threads.context(1), [&] {
    moved->close();
    closed.set_value();
  });
  closed.get_future().get();
}

namespace {

// A channel that says on which thread it was closed.
struct ClosedWhere final : transport::DataChannel {
  std::promise<std::thread::id> closedOn;
  void send(const std::vector<asio::const_buffer>&, std::size_t, transport::SendHandler) override {}
  void receive(transport::MessageHandler, transport::ErrorHandler) override {}
  void close() override { closedOn.set_value(std::this_thread::get_id()); }
  int fd() const override { return -1; }
  bool isByteStream() const override { return true; }
  std::string peerName() const override { return "test"; }
  long unsent() override { return 0; }
  long unread() override { return 0; }
  std::uint64_t bytesRead() const override { return 0; }
};

}  // namespace

TEST_CASE("a flow let go of on another thread closes its channel on its own thread") {
  // The passive's control thread holds the last reference at the end of REMOVE_FLOW while a
  // read of the flow's connection may be completing on the flow's thread.
  transport::IoThreads threads(2);
  threads.start();
  const auto flowThread = threadOf(threads.context(1));
  auto channel = std::make_shared<ClosedWhere>();
  auto closedOn = channel->closedOn.get_future();
  auto flow = flowOn(threads.context(1), 3);
  flow->attach(channel);
  channel.reset();
  flow.reset();  // here, on the test's thread
  REQUIRE(closedOn.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK(closedOn.get() == flowThread);
}
