// The network threads: one io_context per thread, each flow's connection owned by one of them.
//
// Context 0 is the main one: the caller runs it (runLoop), and it carries the control
// connections, the timers of the measurement, the SCTP associations and the passive's shared
// UDP socket. Contexts 1..n-1 each run on a thread of their own. A flow's data connection and
// its timers live on the context pick() gave it; whatever the main thread wants of a flow it
// asks on the flow's own thread (measure::onOwners), so no flow is ever touched by two threads.
//
// runThere is the one way work goes to another thread and its result comes back: the caller, a
// coroutine, is suspended meanwhile and its thread goes on with its other handlers (the other
// sessions of a passive), instead of blocking on a future.
//
// Lifetime: every object bound to a context must go before the context. The IoThreads object
// therefore owns the main context too and destroys it first: whatever its pending handlers
// still hold (flows, with their worker-bound sockets and timers) is destroyed while the worker
// contexts exist.
#pragma once

#include "common/asio_awaitable.h"  // first: Boost 1.74 (see there)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace npm::transport {

namespace asio = boost::asio;

// The default of --threads: one network thread per core.
unsigned defaultThreads();

class IoThreads {
public:
  // `threads` ≥ 1 (0 counts as 1); only the main context runs where threads == 1.
  explicit IoThreads(unsigned threads);
  ~IoThreads();
  IoThreads(const IoThreads&) = delete;
  IoThreads& operator=(const IoThreads&) = delete;

  asio::io_context& main() { return *contexts_.front(); }
  unsigned size() const { return static_cast<unsigned>(contexts_.size()); }
  asio::io_context& context(unsigned i) { return *contexts_.at(i); }
  // The context for the next flow: round robin over all of them, the main one first.
  asio::io_context& pick();

  // Starts the threads of contexts 1..n-1 (idempotent).
  void start();
  // Stops them and waits for them (idempotent); what they had queued stays queued and is
  // destroyed with the contexts. The main context is the caller's to run and stop.
  void stop();

private:
  std::vector<std::unique_ptr<asio::io_context>> contexts_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
  std::vector<std::thread> threads_;
  unsigned next_ = 0;
};

// Runs `work` on `where` (a network thread's context, a worker pool) and resumes the calling
// coroutine on its own executor when it has run, rethrowing what it threw. `work` may refer to
// the caller's frame: a suspended frame is destroyed only when its context is torn down, and
// that happens after the other threads have been joined (IoThreads, the passive's workers), so
// no work runs on a frame that is gone. Work that never ran (its context stopped first) is
// destroyed with its context, without running.
[[nodiscard]] asio::awaitable<void> runThere(asio::any_io_executor where, std::function<void()> work);

}  // namespace npm::transport
