#include "control/stop_flows.h"

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
  measure::onOwners(flows, [&remaining, &report](measure::Flow& f, std::size_t) {
    f.stopSending([remaining, report] {
      if (--*remaining == 0) report(true);
    });
  });
  co_await allStopped.wait(Clock::now() + limit);
}

asio::awaitable<long> waitUntilEmpty(const asio::any_io_executor& executor,
                                     const std::vector<std::shared_ptr<measure::Flow>>& flows, Held what,
                                     Clock::duration limit) {
  // The flows that still held data at the last look (asked on their own threads), how much,
  // and (a whole pass) the bytes all flows have read so far.
  long total = 0;
  std::uint64_t read = 0;
  auto holding = [what, &total, &read](const std::vector<std::shared_ptr<measure::Flow>>& among) {
    std::vector<long> held(among.size(), 0);
    std::vector<std::uint64_t> taken(among.size(), 0);
    measure::onOwners(among, [what, &held, &taken](measure::Flow& f, std::size_t i) {
      auto* channel = f.channel();
      if (channel == nullptr) return;
      held[i] = std::max(0L, what == Held::kUnsent ? channel->unsent() : channel->unread());
      taken[i] = channel->bytesRead();
    });
    std::vector<std::shared_ptr<measure::Flow>> still;
    total = 0;
    read = 0;
    for (std::size_t i = 0; i < among.size(); ++i) {
      read += taken[i];
      if (held[i] > 0) {
        still.push_back(among[i]);
        total += held[i];
      }
    }
    return still;
  };
  // With thousands of flows, each poll asks only the flows that still held data (a syscall
  // per flow and poll made the stop take seconds); then a whole pass must find every flow
  // empty. For kUnread, twice, with nothing read in between: the last read may have emptied
  // the socket with its handler still queued behind this poll on the flow's thread (seen:
  // 848 kB delivered after the end), and a round through the threads' queues runs it.
  std::vector<std::shared_ptr<measure::Flow>> pending = flows;
  std::optional<std::uint64_t> quiet;  // bytes read at the last whole pass that found nothing
  co_await pollUntil(
      executor,
      [&] {
        pending = holding(pending);
        if (pending.empty()) pending = holding(flows);
        if (!pending.empty()) {
          quiet.reset();
          return false;
        }
        if (what == Held::kUnsent || (quiet && *quiet == read)) return true;
        quiet = read;
        return false;
      },
      limit);
  co_return pending.empty() ? 0 : total;
}

}  // namespace npm::control
