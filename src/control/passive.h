// The passive side: a daemon that any number of active instances control at once.
// Listens for NPMP-CONTROL on BASE+1 (TCP, or MPTCP with -w) and for NPMP-DATA on BASE
// (TCP, UDP, DCCP where the kernel has it) and BASE-1 (MPTCP).
#pragma once

#include "common/asio_awaitable.h"  // first: Boost 1.74 (see there)

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "control/passive_options.h"
#include "measure/statistics.h"
#include "sctp/socket.h"
#include "transport/data_transport.h"
#include "transport/io_threads.h"
#include "transport/sockets.h"

namespace npm::control {

namespace asio = boost::asio;

struct PassiveStatus {
  std::size_t flows = 0, measurements = 0;
  measure::Counters transmitted, received;
};

class PassiveServer {
public:
  // Runs on threads.main(); TCP and MPTCP data connections are spread over all of `threads`,
  // which the caller starts and stops. `transports`: the data transports it can serve
  // (app/transports), of which those without a listener refuse their flows.
  PassiveServer(transport::IoThreads& threads, PassiveOptions options, transport::Registry transports);
  ~PassiveServer();
  // Opens the listeners; throws transport::TransportError when no control listener works.
  void start();
  void stop();
  // Flows, measurements and their traffic so far (asked on the flows' own threads).
  [[nodiscard]] asio::awaitable<PassiveStatus> status() const;

  class Impl;

private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace npm::control
