#include "transport/async.h"

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <exception>

namespace npm {

asio::awaitable<bool> Event::wait(Clock::time_point deadline) {
  if (notified_) co_return true;
  timer_.expires_at(deadline);
  boost::system::error_code ec;
  co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return notified_;
}

void Event::notify() {
  notified_ = true;
  timer_.cancel();
}

Deadline::Deadline(const asio::any_io_executor& executor, Clock::duration after, std::function<void()> action)
    : state_(std::make_shared<State>(executor, std::move(action))) {
  state_->timer.expires_after(after);
  state_->timer.async_wait([weak = std::weak_ptr<State>(state_)](const boost::system::error_code& ec) {
    auto state = weak.lock();
    if (ec || !state || !state->action) return;
    state->expired = true;
    auto action = std::move(state->action);  // it may destroy the Deadline
    state->action = nullptr;
    action();
  });
}

void Deadline::disarm() {
  state_->action = nullptr;
  state_->timer.cancel();
}

Deadline::~Deadline() { disarm(); }

asio::awaitable<void> pollUntil(const asio::any_io_executor& executor, std::function<bool()> done,
                                Clock::duration limit) {
  asio::steady_timer timer(executor);
  const auto deadline = Clock::now() + limit;
  while (!done() && Clock::now() < deadline) {
    timer.expires_after(std::chrono::milliseconds(5));
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

}  // namespace npm
