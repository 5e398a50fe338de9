#include "control/stop_flows.h"


namespace npm::control {

asio::awaitable<void> stopSending(const asio::any_io_executor& executor,
                                  const std::vector<std::shared_ptr<measure::Flow>>& flows, Clock::duration limit) {
  if (flows.empty()) co_return;
  Completion<bool> allStopped(executor);
  auto remaining = std::make_shared<std::size_t>(flows.size());
  auto report = allStopped.reporter();
  for (const auto& f : flows) {
    f->stopSending([remaining, report] {
      if (--*remaining == 0) report(true);
    });
  }
  co_await allStopped.wait(Clock::now() + limit);
}

asio::awaitable<void> waitUntilEmpty(const asio::any_io_executor& executor,
                                     const std::vector<std::shared_ptr<measure::Flow>>& flows, Held what,
                                     Clock::duration limit) {
  auto empty = [&](const std::shared_ptr<measure::Flow>& f) {
    auto* channel = f->channel();
    return channel == nullptr || (what == Held::kUnsent ? channel->unsent() : channel->unread()) <= 0;
  };
  // With thousands of flows, each poll goes on from the first flow that still held data
  // (a syscall per flow and poll made the stop take seconds); done when a whole pass finds
  // every flow empty, as before.
  std::size_t from = 0;
  co_await pollUntil(
      executor,
      [&] {
        while (from < flows.size() && empty(flows[from])) ++from;
        if (from < flows.size()) return false;
        for (std::size_t i = 0; i < flows.size(); ++i) {
          if (!empty(flows[i])) {
            from = i;
            return false;
          }
        }
        return true;
      },
      limit);
}

}  // namespace npm::control
