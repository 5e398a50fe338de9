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
  co_await pollUntil(
      executor,
      [&] {
        for (const auto& f : flows) {
          auto* channel = f->channel();
          if (channel != nullptr && (what == Held::kUnsent ? channel->unsent() : channel->unread()) > 0) return false;
        }
        return true;
      },
      limit);
}

}  // namespace npm::control
