#include "control/stop_flows.h"


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

asio::awaitable<void> waitUntilEmpty(const asio::any_io_executor& executor,
                                     const std::vector<std::shared_ptr<measure::Flow>>& flows, Held what,
                                     Clock::duration limit) {
  // The flows that still held data at the last look (asked on their own threads).
  auto holding = [what](const std::vector<std::shared_ptr<measure::Flow>>& among) {
    std::vector<char> held(among.size(), 0);
    measure::onOwners(among, [what, &held](measure::Flow& f, std::size_t i) {
      auto* channel = f.channel();
      held[i] = channel != nullptr && (what == Held::kUnsent ? channel->unsent() : channel->unread()) > 0;
    });
    std::vector<std::shared_ptr<measure::Flow>> still;
    for (std::size_t i = 0; i < among.size(); ++i) {
      if (held[i]) still.push_back(among[i]);
    }
    return still;
  };
  // With thousands of flows, each poll asks only the flows that still held data (a syscall
  // per flow and poll made the stop take seconds); done when a whole pass finds every flow
  // empty, as before.
  std::vector<std::shared_ptr<measure::Flow>> pending = flows;
  co_await pollUntil(
      executor,
      [&] {
        pending = holding(pending);
        if (!pending.empty()) return false;
        pending = holding(flows);
        return pending.empty();
      },
      limit);
}

}  // namespace npm::control
