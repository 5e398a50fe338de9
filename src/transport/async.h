// Waiting with deadlines: the one mechanism for asynchronous operations that can hang
// (connect, first message, acknowledgement, send completion, stop drain).
//
// The rule it enforces: a handler never reaches state that its owner has given up. The
// waiting frame owns the state; whatever completes late (a send callback, a timer already
// queued when it was cancelled) holds only a weak reference to it and finds it gone.
//
//   Event          a coroutine waits for notify() until a deadline (single owner).
//   Completion<T>  an operation's result, reported by a callback that may outlive the waiter.
//   Deadline       an action (cancel a socket, close a connection) taken when an operation
//                  has not finished in time; never taken after the Deadline is destroyed.
//   pollUntil      for states that report no event (socket queues, an association's end):
//                  checks `done` every 5 ms until it holds or `limit` has passed.
//
// Work on another thread (a flow's, a worker pool's) is transport::runThere, under
// measure::onOwners for the flows.
#pragma once

#include "common/asio_awaitable.h"  // first: Boost 1.74 (see there)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

namespace npm {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// A one-shot or repeatable wake-up for a waiting coroutine (single-threaded use). Only its
// owner (or objects it owns) may hold a reference to it.
class Event {
public:
  explicit Event(const asio::any_io_executor& executor) : timer_(executor) {}
  // Waits until notify() or the deadline; true if notified.
  asio::awaitable<bool> wait(Clock::time_point deadline);
  void notify();
  void reset() { notified_ = false; }
  bool notified() const { return notified_; }

private:
  asio::steady_timer timer_;
  bool notified_ = false;
};

// The result of an operation whose callback may run after the waiter gave up: hand out
// reporter(); copies of it may live on in the operation, and reporting to a Completion that
// has gone does nothing.
template <class T>
class Completion {
public:
  explicit Completion(const asio::any_io_executor& executor) : state_(std::make_shared<State>(executor)) {}

  std::function<void(T)> reporter() const {
    return [weak = std::weak_ptr<State>(state_)](T value) {
      auto state = weak.lock();
      if (!state || state->value) return;  // gone, or reported already
      state->value.emplace(std::move(value));
      state->event.notify();
    };
  }
  // The reported value, or nullopt when the deadline came first.
  asio::awaitable<std::optional<T>> wait(Clock::time_point deadline) {
    auto state = state_;
    if (!state->value) co_await state->event.wait(deadline);
    co_return state->value;
  }

private:
  struct State {
    explicit State(const asio::any_io_executor& executor) : event(executor) {}
    Event event;
    std::optional<T> value;
  };
  std::shared_ptr<State> state_;
};

// Takes `action` once `after` has passed, unless destroyed (or disarmed) before. Owned by
// the frame of the operation it guards, so the action may refer to that frame's locals.
class Deadline {
public:
  Deadline(const asio::any_io_executor& executor, Clock::duration after, std::function<void()> action);
  ~Deadline();
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  bool expired() const { return state_->expired; }
  void disarm();

private:
  struct State {
    State(const asio::any_io_executor& executor, std::function<void()> a) : timer(executor), action(std::move(a)) {}
    asio::steady_timer timer;
    std::function<void()> action;
    bool expired = false;
  };
  std::shared_ptr<State> state_;
};

asio::awaitable<void> pollUntil(const asio::any_io_executor& executor, std::function<bool()> done,
                                Clock::duration limit);

}  // namespace npm
