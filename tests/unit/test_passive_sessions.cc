// A passive in this process, its control thread and a network thread of its own: while a flow's
// thread is held up, a session that waits for it waits alone — the other sessions' control
// messages are answered meanwhile.
#include <catch2/catch.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include <poll.h>

#include <chrono>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "app/transports.h"
#include "control/passive.h"
#include "npmp/messages.h"
#include "transport/io_threads.h"

using namespace npm;
namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// A control connection of a test "active": blocking sends, reads with a deadline.
class Peer {
public:
  explicit Peer(std::uint16_t port) : socket_(io_) {
    socket_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    socket_.set_option(tcp::no_delay(true));  // each message leaves at once (no Nagle wait)
  }
  std::uint16_t localPort() const { return socket_.local_endpoint().port(); }

  template <class M>
  void send(const M& m) {
    npmp::Bytes bytes;
    npmp::encode(m, bytes);
    asio::write(socket_, asio::buffer(bytes));
  }
  // The next message, or nullopt when none is complete by the deadline.
  std::optional<npmp::Message> next(Clock::time_point deadline) {
    while (true) {
      if (buffer_.size() >= npmp::kHeaderSize) {
        auto length = npmp::declaredLength(buffer_);
        REQUIRE(length);
        if (buffer_.size() >= *length) {
          auto decoded = npmp::decode(std::span<const std::uint8_t>(buffer_.data(), *length));
          REQUIRE(decoded);
          buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(*length));
          return *decoded;
        }
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{socket_.native_handle(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      std::uint8_t chunk[4096];
      boost::system::error_code ec;
      const std::size_t n = socket_.read_some(asio::buffer(chunk), ec);
      if (ec) return std::nullopt;
      buffer_.insert(buffer_.end(), chunk, chunk + n);
    }
  }
  npmp::Acknowledge acknowledgement(Clock::duration within) {
    auto m = next(Clock::now() + within);
    REQUIRE(m);
    REQUIRE(std::holds_alternative<npmp::Acknowledge>(*m));
    return std::get<npmp::Acknowledge>(*m);
  }

private:
  asio::io_context io_;
  tcp::socket socket_;
  std::vector<std::uint8_t> buffer_;
};

// What a connection's socket holds (bytes), from /proc/net/tcp{,6}: the socket with local port
// `port` whose peer is at `peerPort`; its send queue (unsent or unacknowledged) or its receive
// queue (not read yet).
enum class Queue { kSend, kReceive };
std::optional<long> queued(std::uint16_t port, std::uint16_t peerPort, Queue which) {
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues;
      fields >> slot >> local >> remote >> state >> queues;
      const auto portOf = [](const std::string& address) {
        return static_cast<std::uint16_t>(std::stoul(address.substr(address.find(':') + 1), nullptr, 16));
      };
      if (portOf(local) != port || portOf(remote) != peerPort) continue;
      const std::size_t colon = queues.find(':');
      return std::stol(which == Queue::kSend ? queues.substr(0, colon) : queues.substr(colon + 1), nullptr, 16);
    }
  }
  return std::nullopt;
}

npmp::AddFlow tcpFlow(std::uint64_t measurementId, std::uint32_t flowId) {
  npmp::AddFlow add;
  add.measurementId = measurementId;
  add.flowId = flowId;
  add.protocol = npmp::Protocol::TCP;
  add.description = "held-up test";
  return add;
}

// A passive on a free port: its control thread (the main context) runs on a thread of this
// test, the network thread is the threads' context 1.
struct RunningPassive {
  transport::IoThreads threads{2};
  std::optional<control::PassiveServer> server;
  std::uint16_t controlPort = 0;
  std::thread loop;

  RunningPassive() {
    threads.start();
    for (int attempt = 0; attempt < 20 && !server; ++attempt) {
      asio::io_context probe;
      tcp::acceptor free(probe, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
      const auto port = static_cast<std::uint16_t>(free.local_endpoint().port() - 1);
      free.close();
      control::PassiveOptions options;
      options.port = port;
      options.controlOverSctp = false;  // TCP control only: this test is about the threads
      options.threads = 2;
      server.emplace(threads, options, app::passiveTransports(options));
      try {
        server->start();
        controlPort = static_cast<std::uint16_t>(port + 1);
      } catch (const std::exception&) {
        server.reset();
      }
    }
    REQUIRE(server);
    loop = std::thread([this] {
      auto guard = asio::make_work_guard(threads.main());
      threads.main().run();
    });
  }
  ~RunningPassive() {
    std::promise<void> stopped;
    asio::post(threads.main(), [this, &stopped] {
      server->stop();
      threads.main().stop();
      stopped.set_value();
    });
    stopped.get_future().wait();
    loop.join();
    threads.stop();
  }
};

}  // namespace

TEST_CASE("a held-up flow thread holds up its own session only: the others are answered") {
  RunningPassive passive;

  // Session A: two TCP flows, the passive's contexts taken in turn, so one of them belongs to
  // the network thread (context 1).
  Peer a(passive.controlPort);
  for (std::uint32_t flow : {1U, 2U}) {
    a.send(tcpFlow(0xA, flow));
    CHECK(a.acknowledgement(std::chrono::seconds(5)).status == npmp::kStatusOk);
  }

  // The network thread is held up until released below (10 s at most).
  std::promise<void> release;
  asio::post(passive.threads.context(1),
             [held = release.get_future().share()] { held.wait_for(std::chrono::seconds(10)); });
  // A removes both flows: for the one on the held-up thread its session waits (it asks the flow
  // whether it still sends). Once the passive has read the messages (nothing left in A's send
  // queue nor in the passive's receive queue), its control thread is in that wait — or, if it
  // blocked there, stuck in it.
  a.send(npmp::RemoveFlow{1, 0xA, 0});
  a.send(npmp::RemoveFlow{2, 0xA, 0});
  const auto delivered = [&] {
    return queued(a.localPort(), passive.controlPort, Queue::kSend) == std::optional<long>(0) &&
           queued(passive.controlPort, a.localPort(), Queue::kReceive) == std::optional<long>(0);
  };
  const auto readBy = Clock::now() + std::chrono::seconds(5);
  while (!delivered() && Clock::now() < readBy) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(delivered());

  // Session B, meanwhile: connected, its ADD_FLOW answered within the bound.
  const auto begin = Clock::now();
  Peer b(passive.controlPort);
  b.send(tcpFlow(0xB, 1));
  auto answer = b.next(Clock::now() + std::chrono::seconds(2));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - begin);
  release.set_value();
  INFO("session B answered after " << took.count() << " ms with the network thread held up");
  REQUIRE(answer);
  REQUIRE(std::holds_alternative<npmp::Acknowledge>(*answer));
  CHECK(std::get<npmp::Acknowledge>(*answer).status == npmp::kStatusOk);
  CHECK(took < std::chrono::seconds(2));

  // And A's session goes on once the thread is free: its next message is answered.
  a.send(tcpFlow(0xA, 3));
  CHECK(a.acknowledgement(std::chrono::seconds(5)).flowId == 3);
}
