// What the parts of the passive share (as Beast's chat-multi shares its state): the
// io_context, the limits, the flow registry, and the open sessions. Sessions hold this state;
// it only points at them (a session lives as long as its control connection's coroutine), and
// they join and leave it; what changes is private to it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <memory>
#include <set>
#include <vector>

#include "common/log.h"
#include "control/flow_registry.h"
#include "control/passive_options.h"

namespace npm::control {

class Session;

class PassiveState {
public:
  PassiveState(transport::IoThreads& threads, const PassiveOptions& options, transport::Registry transports)
      : io(threads.main()),
        limits(options.limits),
        allow(options.allow),
        authKey(options.authKey),
        flows(std::make_shared<FlowRegistry>(threads.main(), std::move(transports),
                                             FlowLimits{.limit = options.limits.pendingConnections,
                                                        .perHost = options.limits.pendingPerHost,
                                                        .perPrefix = options.limits.pendingPerPrefix,
                                                        .prefixV4 = options.limits.prefixV4,
                                                        .prefixV6 = options.limits.prefixV6},
                                             options.allow, &threads)) {}

  // A session is in the state from its start to its end (or its destruction).
  void join(Session* session) { sessions_.insert(session); }
  void leave(Session* session) { sessions_.erase(session); }
  std::size_t sessionCount() const { return sessions_.size(); }
  // Sessions of one host at the moment.
  std::size_t sessionsOf(const asio::ip::address& host) const;

  // Whether a control connection from `peer` may have a session: within --max-sessions, and
  // within what one host and one network may have. When a limit is reached, a session in the
  // limit's scope without a measurement under way (Session::working) is closed to make room: one
  // quiet for the limits' quietGrace, or one whose network (then host) holds more sessions than
  // the newcomer's would -- of the network with the most sessions first, then of the host with the
  // most, then the one quiet the longest. So no set of peers that hold sessions without measuring
  // keeps another peer out, however fast they reconnect; a peer is refused only when the sessions
  // in its way all measure, or are fewer per network and host than its own.
  enum class Admission { Admitted, SessionsFull, HostFull, PrefixFull };
  Admission admit(const asio::ip::address& peer);
  // The line that tells a refused peer why, and the ACKNOWLEDGE status that carries it.
  std::string refusalText(Admission a) const;
  static std::uint32_t refusalStatus(Admission a);
  // Control connections being told why they are refused at the moment (each waits at most
  // kRefusalWait for the first message); beyond kRefusing more are closed without an answer.
  static constexpr std::size_t kRefusing = 64;
  static constexpr std::chrono::seconds kRefusalWait{2};
  std::size_t refusing = 0;
  // Measurements of all sessions at the moment.
  std::size_t measurementCount() const;
  // The passive stops: no new sessions or connections are taken, and every session is closed.
  void stop();
  bool stopped() const { return stopped_; }
  // Gives memory freed by ended sessions back to the system (at most once a second).
  void releaseMemory();

  asio::io_context& io;
  const PassiveLimits limits;
  // What the result files of all sessions may take in the temporary directory.
  const std::shared_ptr<measure::SpoolBudget> spool =
      std::make_shared<measure::SpoolBudget>(limits.spoolTotal, "in all (--max-spool-total)");
  const std::vector<transport::AddressPrefix> allow;
  const std::optional<std::vector<std::uint8_t>> authKey;
  std::shared_ptr<FlowRegistry> flows;
  // Where vectors are formatted after a measurement (transport::runThere), off the network thread; joined
  // when the passive stops, while the io_context still exists.
  const std::shared_ptr<asio::thread_pool> workers = std::make_shared<asio::thread_pool>(measure::compressionThreads());

  // The passive's own refusals and closings that a peer can cause at will, said rate-limited.
  log::Repeated refusedControl{"Refused control connections"};
  log::Repeated evicted{"Closed control connections that made no progress, to make room"};
  log::Repeated quiet{"Closed quiet control connections"};
  log::Repeated refusedRequests{"Refused requests on control connections"};

private:
  std::set<Session*> sessions_;  // not owned
  bool stopped_ = false;
  std::chrono::steady_clock::time_point lastRelease_{};
};

}  // namespace npm::control
