#include "control/passive.h"

#include <malloc.h>

#include <algorithm>

#include "common/log.h"
#include "control/passive_listeners.h"
#include "control/passive_session.h"
#include "control/passive_state.h"

namespace npm::control {

PassiveLimits deriveLimits(PassiveLimits limits, const GivenLimits& given) {
  if (!given.sessionsPerHost) limits.sessionsPerHost = std::max(PassiveLimits::kSessionsPerHost, limits.sessions / 8);
  if (!given.pendingConnections) {
    limits.pendingConnections = std::max(PassiveLimits::kPendingConnections, limits.flowsPerSession / 4);
  }
  if (!given.pendingPerHost) {
    limits.pendingPerHost = std::max(PassiveLimits::kPendingPerHost, limits.pendingConnections / 8);
  }
  if (!given.quicRetryAbove) limits.quicRetryAbove = std::max<std::size_t>(1, limits.quicConnections / 16);
  return limits;
}

std::size_t PassiveState::sessionsOf(const asio::ip::address& host) const {
  std::size_t n = 0;
  for (const Session* s : sessions_) n += s->peerAddress() == host ? 1 : 0;
  return n;
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
  Impl(transport::IoThreads& threads, PassiveOptions options)
      : options_(std::move(options)), state_(std::make_shared<PassiveState>(threads, options_)) {
    asio::io_context& io = threads.main();
    std::weak_ptr<PassiveState> weak = state_;
    ListenerHandlers h;
    h.control = [weak](std::shared_ptr<ControlChannel> channel) {
      auto state = weak.lock();
      if (!state || state->stopped()) return channel->close();
      if (state->sessionCount() >= state->limits.sessions) {
        log::warning("Refusing control connection from " + channel->peerName() + ": " +
                     std::to_string(state->limits.sessions) + " sessions are open (--max-sessions)");
        return channel->close();
      }
      if (state->sessionsOf(channel->peerAddress()) >= state->limits.sessionsPerHost) {
        log::warning("Refusing control connection from " + channel->peerName() + ": " +
                     std::to_string(state->limits.sessionsPerHost) +
                     " sessions of this host are open (--max-sessions-per-host)");
        return channel->close();
      }
      std::make_shared<Session>(state, std::move(channel))->start();
    };
    h.connection = [weak](std::shared_ptr<transport::DataChannel> channel, npmp::Protocol protocol) {
      if (auto state = weak.lock(); state && !state->stopped()) return state->flows->adoptConnection(channel, protocol);
      channel->close();
    };
    h.association = [weak](std::shared_ptr<sctp::Association> association) {
      if (auto state = weak.lock(); state && !state->stopped()) return state->flows->adoptAssociation(association);
      association->close();
    };
    h.datagram = [weak](std::span<const std::uint8_t> message, const asio::ip::udp::endpoint& from, std::uint64_t now) {
      if (auto state = weak.lock(); state && !state->stopped()) state->flows->deliverDatagram(message, from, now);
    };
#ifdef NPM_QUIC_BUILT
    h.quic = [weak](std::shared_ptr<quic::Connection> connection) {
      if (auto state = weak.lock(); state && !state->stopped()) return state->flows->adoptQuic(connection);
      connection->close();
    };
#endif
    listeners_ = std::make_shared<Listeners>(io, options_, std::move(h));
  }

  void start() {
    listeners_->open();
    state_->flows->setDataTransports(listeners_->servesSctp(), listeners_->servesDccp(), listeners_->servesQuic());
    state_->flows->setUdpSocket(&listeners_->udp());
  }

  void stop() {
    if (state_->stopped()) return;
    listeners_->close();
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
  PassiveOptions options_;  // before the listeners, which keep a reference
  std::shared_ptr<PassiveState> state_;
  std::shared_ptr<Listeners> listeners_;
};

PassiveServer::PassiveServer(transport::IoThreads& threads, PassiveOptions options)
    : impl_(std::make_shared<Impl>(threads, std::move(options))) {}
PassiveServer::~PassiveServer() { impl_->stop(); }
void PassiveServer::start() { impl_->start(); }
void PassiveServer::stop() { impl_->stop(); }
asio::awaitable<PassiveStatus> PassiveServer::status() const { return Impl::status(impl_); }

}  // namespace npm::control
