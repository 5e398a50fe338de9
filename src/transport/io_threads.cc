#include "transport/io_threads.h"

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <exception>
#include <string>

#include "common/log.h"

namespace npm::transport {

unsigned defaultThreads() {
  // The CPUs this process may run on (--cpus, taskset, a cgroup's cpuset), not the host's.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return static_cast<unsigned>(CPU_COUNT(&set));
  const unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 ? 1 : cores;
}

IoThreads::IoThreads(unsigned threads) {
  if (threads == 0) threads = 1;
  for (unsigned i = 0; i < threads; ++i) {
    contexts_.push_back(std::make_unique<asio::io_context>());
  }
}

IoThreads::~IoThreads() {
  stop();
  // Main first: its queued handlers may hold flows whose sockets belong to the others.
  for (auto& context : contexts_) context.reset();
}

asio::io_context& IoThreads::pick() {
  asio::io_context& chosen = *contexts_[next_];
  next_ = (next_ + 1) % size();
  return chosen;
}

void IoThreads::start() {
  if (!threads_.empty() || contexts_.size() < 2) return;
  for (std::size_t i = 1; i < contexts_.size(); ++i) {
    asio::io_context& context = *contexts_[i];
    // Its reactor (epoll, eventfd, timerfd) now rather than with its first flow: the passive's
    // descriptors stay what they were at the start after every measurement.
    { asio::steady_timer warm(context); }
    guards_.push_back(asio::make_work_guard(context));
    threads_.emplace_back([&context, i] {
      // Named, so that top -H, perf and /proc/PID/task/*/comm tell the network threads apart.
      const std::string name = "npm-net" + std::to_string(i);
      ::pthread_setname_np(::pthread_self(), name.c_str());
      for (;;) {
        try {
          context.run();
          return;
        } catch (const std::exception& e) {
          log::error("internal error on network thread " + std::to_string(i) + ": " + e.what());
        }
      }
    });
  }
}

void IoThreads::stop() {
  if (threads_.empty()) return;
  guards_.clear();
  for (std::size_t i = 1; i < contexts_.size(); ++i) contexts_[i]->stop();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
}

asio::awaitable<void> runThere(asio::any_io_executor where, std::function<void()> work) {
  const asio::any_io_executor home = co_await asio::this_coro::executor;
  struct Outcome {
    std::atomic<bool> done = false;
    std::exception_ptr error;  // written before `done`, read after it
  };
  auto outcome = std::make_shared<Outcome>();
  // The waiter's wake-up: a timer of the caller's context, touched on that context's thread
  // only (the worker holds a weak reference and posts the wake-up home).
  auto wake = std::make_shared<asio::steady_timer>(home, asio::steady_timer::time_point::max());
  asio::post(where, [work = std::move(work), outcome, weak = std::weak_ptr<asio::steady_timer>(wake), home] {
    try {
      work();
    } catch (...) {
      outcome->error = std::current_exception();
    }
    outcome->done.store(true, std::memory_order_release);
    asio::post(home, [weak] {
      // An expiry in the past also ends a wait that has not begun yet.
      if (auto timer = weak.lock()) timer->expires_at(asio::steady_timer::time_point::min());
    });
  });
  while (!outcome->done.load(std::memory_order_acquire)) {
    boost::system::error_code ec;
    co_await wake->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (outcome->error) std::rethrow_exception(outcome->error);
}

}  // namespace npm::transport
