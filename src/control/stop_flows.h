// The one way to stop a set of flows, on either side: every sender stops generating, and the
// caller waits until no write is outstanding any more (or for at most `limit`, when a peer
// does not read). Late completions after the limit touch nothing of the caller's.
#pragma once

#include <memory>
#include <vector>

#include "measure/flow.h"
#include "transport/async.h"

namespace npm::control {

asio::awaitable<void> stopSending(const asio::any_io_executor& executor,
                                  const std::vector<std::shared_ptr<measure::Flow>>& flows,
                                  Clock::duration limit = std::chrono::seconds(5));

// Waits (polling every 5 ms, for at most `limit`) until no flow's transport holds anything
// in the given direction any more: kUnsent before the active sends STOP and before the
// passive acknowledges it (the peer gets what is in flight), kUnread before either side
// finishes receiving (it counts what has arrived but not been read yet, however slowly it
// reads; confirmed by a second look after a round through the flows' threads with nothing
// read in between; kUnsent leaves out the flows whose connection the peer has ended: nothing
// more leaves those). Returns what is still held at the end (bytes; SCTP: chunks), 0 when
// everything went.
enum class Held { kUnsent, kUnread };
asio::awaitable<long> waitUntilEmpty(const asio::any_io_executor& executor,
                                     const std::vector<std::shared_ptr<measure::Flow>>& flows, Held what,
                                     Clock::duration limit);

}  // namespace npm::control
