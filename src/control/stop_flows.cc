#include "control/stop_flows.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <optional>

namespace npm::control {

asio::awaitable<void> stopSending(const asio::any_io_executor& executor,
                                  const std::vector<std::shared_ptr<measure::Flow>>& flows, Clock::duration limit) {
  if (flows.empty()) co_return;
  Completion<bool> allStopped(executor);
  auto remaining = std::make_shared<std::size_t>(flows.size());
  auto report = allStopped.reporter();
  // Each flow stops on its own thread; its `done` comes back to this one (Flow::reportTo).
  co_await measure::onOwners(flows, [&remaining, &report](measure::Flow& f, std::size_t) {
    f.stopSending([remaining, report] {
      if (--*remaining == 0) report(true);
    });
  });
  co_await allStopped.wait(Clock::now() + limit);
}

namespace {

// What `among` still holds (asked on the flows' own threads): the flows that hold something,
// how much in all, and the bytes all of them have read so far.
struct Holding {
  std::vector<std::shared_ptr<measure::Flow>> still;
  long total = 0;
  std::uint64_t read = 0;
};

asio::awaitable<Holding> holding(std::vector<std::shared_ptr<measure::Flow>> among, Held what) {
  std::vector<long> held(among.size(), 0);
  std::vector<std::uint64_t> taken(among.size(), 0);
  co_await measure::onOwners(among, [what, &held, &taken](measure::Flow& f, std::size_t i) {
    auto* channel = f.channel();
    // A flow whose connection the peer has ended sends nothing more: what it holds stays.
    if (channel == nullptr || (what == Held::kUnsent && f.failed())) return;
    held[i] = std::max(0L, what == Held::kUnsent ? channel->unsent() : channel->unread());
    taken[i] = channel->bytesRead();
  });
  Holding h;
  for (std::size_t i = 0; i < among.size(); ++i) {
    h.read += taken[i];
    if (held[i] > 0) {
      h.still.push_back(among[i]);
      h.total += held[i];
    }
  }
  co_return h;
}

}  // namespace

asio::awaitable<long> waitUntilEmpty(const asio::any_io_executor& executor,
                                     const std::vector<std::shared_ptr<measure::Flow>>& flows, Held what,
                                     Clock::duration limit) {
  // With thousands of flows, each poll asks only the flows that still held data (a syscall
  // per flow and poll made the stop take seconds); then a whole pass must find every flow
  // empty. For kUnread, twice, with nothing read in between: the last read may have emptied
  // the socket with its handler still queued behind this poll on the flow's thread (seen:
  // 848 kB delivered after the end), and a round through the threads' queues runs it.
  const auto deadline = Clock::now() + limit;
  asio::steady_timer timer(executor);
  std::vector<std::shared_ptr<measure::Flow>> pending = flows;
  std::optional<std::uint64_t> quiet;  // bytes read at the last whole pass that found nothing
  long total = 0;
  for (;;) {
    Holding h = co_await holding(pending, what);
    if (h.still.empty()) h = co_await holding(flows, what);
    pending = std::move(h.still);
    total = h.total;
    if (!pending.empty()) {
      quiet.reset();
    } else if (what == Held::kUnsent || (quiet && *quiet == h.read)) {
      break;
    } else {
      quiet = h.read;
    }
    if (Clock::now() >= deadline) break;
    timer.expires_after(std::chrono::milliseconds(5));
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return pending.empty() ? 0 : total;
}

}  // namespace npm::control
