#include "control/passive.h"

#include <malloc.h>

#include <algorithm>

#include "common/log.h"
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>

#include <map>
#include <tuple>

#include "control/passive_admission.h"
#include "control/passive_listeners.h"
#include "control/passive_session.h"
#include "control/passive_state.h"

namespace npm::control {

PassiveLimits deriveLimits(PassiveLimits limits, const GivenLimits& given) {
  if (!given.sessionsPerHost) limits.sessionsPerHost = std::max(PassiveLimits::kSessionsPerHost, limits.sessions / 8);
  if (!given.sessionsPerPrefix) {
    limits.sessionsPerPrefix = std::max(PassiveLimits::kSessionsPerPrefix, limits.sessions / 4);
  }
  if (!given.pendingConnections) {
    limits.pendingConnections = std::max(PassiveLimits::kPendingConnections, limits.flowsPerSession / 4);
  }
  if (!given.pendingPerHost) {
    limits.pendingPerHost = std::max(PassiveLimits::kPendingPerHost, limits.pendingConnections / 8);
  }
  if (!given.pendingPerPrefix) {
    limits.pendingPerPrefix = std::max(PassiveLimits::kPendingPerPrefix, limits.pendingConnections / 4);
  }
  if (!given.quicRetryAbove) limits.quicRetryAbove = std::max<std::size_t>(1, limits.quicConnections / 16);
  if (!given.quicPerPrefix) limits.quicPerPrefix = std::max<std::size_t>(1, limits.quicConnections / 4);
  return limits;
}

std::size_t PassiveState::sessionsOf(const asio::ip::address& host) const {
  std::size_t n = 0;
  for (const Session* s : sessions_) n += s->peerAddress() == host ? 1 : 0;
  return n;
}

PassiveState::Admission PassiveState::admit(const asio::ip::address& peer) {
  const auto now = std::chrono::steady_clock::now();
  auto network = [&](const asio::ip::address& a) {
    return transport::prefixOf(a, limits.prefixV4, limits.prefixV6).network;
  };
  const asio::ip::address host = transport::unmapped(peer), net = network(peer);
  for (;;) {
    std::map<asio::ip::address, std::size_t> perHost, perNetwork;
    for (const Session* s : sessions_) {
      ++perHost[transport::unmapped(s->peerAddress())];
      ++perNetwork[network(s->peerAddress())];
    }
    Admission full = Admission::Admitted;
    if (perHost[host] >= limits.sessionsPerHost)
      full = Admission::HostFull;
    else if (perNetwork[net] >= limits.sessionsPerPrefix)
      full = Admission::PrefixFull;
    else if (sessions_.size() >= limits.sessions)
      full = Admission::SessionsFull;
    if (full == Admission::Admitted) return full;
    // What the newcomer's network and host would hold with it, against what a session's hold
    // (inside one network only the hosts are compared; inside one host, nothing).
    const bool networks = full == Admission::SessionsFull, hosts = full != Admission::HostFull;
    const auto newcomer = std::make_pair(networks ? perNetwork[net] + 1 : 0, hosts ? perHost[host] + 1 : 0);
    auto share = [&](const Session* s) {
      return std::make_pair(networks ? perNetwork[network(s->peerAddress())] : 0,
                            hosts ? perHost[transport::unmapped(s->peerAddress())] : 0);
    };
    Session* victim = nullptr;
    for (Session* s : sessions_) {
      const bool inScope = full == Admission::SessionsFull ||
                           (full == Admission::HostFull ? transport::unmapped(s->peerAddress()) == host
                                                        : network(s->peerAddress()) == net);
      if (!inScope || s->working(now)) continue;
      const bool quiet = now - s->lastMessage() >= limits.quietGrace;
      if (!quiet && !(share(s) > newcomer)) continue;  // a session in its set-up, of a group no larger
      if (victim == nullptr || std::make_pair(share(s), now - s->lastMessage()) >
                                   std::make_pair(share(victim), now - victim->lastMessage())) {
        victim = s;
      }
    }
    if (victim == nullptr) return full;
    evicted.say(
        "Closing control connection from " + victim->peerName() + " (no measurement under way, quiet for " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now - victim->lastMessage()).count()) +
        " ms) to make room for " + host.to_string() + ": " + refusalText(full));
    victim->evict();  // leaves the state at once
  }
}

std::string PassiveState::refusalText(Admission a) const {
  switch (a) {
    case Admission::HostFull:
      return std::to_string(limits.sessionsPerHost) + " sessions of this host are open (--max-sessions-per-host)";
    case Admission::PrefixFull:
      return std::to_string(limits.sessionsPerPrefix) + " sessions of this network (/" +
             std::to_string(limits.prefixV4) + ", /" + std::to_string(limits.prefixV6) +
             ") are open (--max-sessions-per-prefix)";
    case Admission::SessionsFull: return std::to_string(limits.sessions) + " sessions are open (--max-sessions)";
    case Admission::Admitted: break;
  }
  return "admitted";
}

std::uint32_t PassiveState::refusalStatus(Admission a) {
  switch (a) {
    case Admission::HostFull: return npmp::kStatusBusyHost;
    case Admission::PrefixFull: return npmp::kStatusBusyPrefix;
    default: return npmp::kStatusBusy;
  }
}

std::size_t PassiveState::measurementCount() const {
  std::size_t n = 0;
  for (const Session* s : sessions_) n += s->measurementCount();
  return n;
}

void PassiveState::stop() {
  stopped_ = true;
  const auto sessions = sessions_;  // closing may end a session
  for (Session* s : sessions) s->close();
}

void PassiveState::releaseMemory() {
  const auto now = std::chrono::steady_clock::now();
  if (now - lastRelease_ < std::chrono::seconds(1)) return;
  lastRelease_ = now;
  ::malloc_trim(0);
}

// Wires the listeners to the sessions and the flow registry.
class PassiveServer::Impl {
public:
  Impl(transport::IoThreads& threads, PassiveOptions options, transport::Registry transports)
      : options_(std::move(options)), state_(std::make_shared<PassiveState>(threads, options_, std::move(transports))) {
    asio::io_context& io = threads.main();
    std::weak_ptr<PassiveState> weak = state_;
    auto control = [weak](std::shared_ptr<ControlChannel> channel) {
      auto state = weak.lock();
      if (!state || state->stopped()) return channel->close();
      const auto admission = state->admit(channel->peerAddress());
      if (admission == PassiveState::Admission::Admitted) {
        return std::make_shared<Session>(state, std::move(channel))->start();
      }
      state->refusedControl.say("Refusing control connection from " + channel->peerName() + ": " +
                                state->refusalText(admission));
      if (state->refusing >= PassiveState::kRefusing) return channel->close();
      // The active learns why from the ACKNOWLEDGE of its first message.
      ++state->refusing;
      channel->start();
      asio::co_spawn(
          state->io,
          [state, channel, admission]() -> asio::awaitable<void> {
            co_await refuseControl(*channel, PassiveState::kRefusalWait, PassiveState::refusalStatus(admission));
          },
          [state, channel](std::exception_ptr) {
            --state->refusing;
            channel->close();
          });
    };
    listeners_ = std::make_shared<Listeners>(io, options_, std::move(control));
  }

  void start() {
    flushLog();
    const auto& flows = state_->flows;
    transport::PassiveSide data;
    data.control = &state_->io;
    data.basePort = options_.port;
    data.locals = options_.localAddresses;
    data.v6only = options_.v6only;
    data.rcvBufferSize = options_.rcvBufferSize;
    data.sndBufferSize = options_.sndBufferSize;
    data.pending = flows->pendingLimits();
    data.connections = flows->connections();
    data.flows = flows;
    for (auto& [protocol, why] : listeners_->open(flows->transports(), data)) flows->unserved(protocol, why);
  }

  void stop() {
    if (state_->stopped()) return;
    listeners_->close();
    logTimer_.cancel();
    state_->stop();
    state_->flows->closeAll();
    state_->workers->join();  // a vector being formatted is finished (and then dropped)
  }

  // A coroutine of its own, holding what it reads: the status may be asked for while the
  // passive stops.
  static asio::awaitable<PassiveStatus> status(std::shared_ptr<const Impl> self) {
    const std::shared_ptr<PassiveState> state = self->state_;
    const std::shared_ptr<FlowRegistry> flows = state->flows;
    PassiveStatus s;
    s.flows = flows->size();
    s.measurements = state->measurementCount();
    const FlowTraffic traffic = co_await flows->traffic();
    s.transmitted = traffic.transmitted;
    s.received = traffic.received;
    co_return s;
  }

private:
  // The summaries of rate-limited log lines, said once their interval is over (log::Repeated).
  void flushLog() {
    log::Repeated::flushAll();
    logTimer_.expires_after(std::chrono::seconds(1));
    logTimer_.async_wait([weak = std::weak_ptr<PassiveState>(state_), this](const boost::system::error_code& ec) {
      if (!ec && weak.lock() && !weak.lock()->stopped()) flushLog();
    });
  }

  PassiveOptions options_;  // before the listeners, which keep a reference
  std::shared_ptr<PassiveState> state_;
  std::shared_ptr<Listeners> listeners_;
  asio::steady_timer logTimer_{state_->io};
};

PassiveServer::PassiveServer(transport::IoThreads& threads, PassiveOptions options, transport::Registry transports)
    : impl_(std::make_shared<Impl>(threads, std::move(options), std::move(transports))) {}
PassiveServer::~PassiveServer() { impl_->stop(); }
void PassiveServer::start() { impl_->start(); }
void PassiveServer::stop() { impl_->stop(); }
asio::awaitable<PassiveStatus> PassiveServer::status() const { return Impl::status(impl_); }

}  // namespace npm::control
