#include "control/passive.h"
#include <utility>  // before Boost 1.74's awaitable.hpp, which needs std::exchange

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <set>

#include "common/fileio.h"
#include "common/log.h"
#include "common/text.h"
#include "control/control_channel.h"
#include "flowspec/flowspec.h"
#include "measure/measurement.h"
#include "transport/channel.h"
#include "transport/sctp_channel.h"
#include "transport/sockets.h"

namespace npm::control {

namespace {

using asio::ip::tcp;
using asio::ip::udp;
using npmp::Protocol;

constexpr auto kIdentifyTimeout = std::chrono::seconds(30);   // accepted, never identified
constexpr auto kIdleTimeout = std::chrono::minutes(10);       // control without a measurement
constexpr std::size_t kMaxPendingConnections = 1024;
constexpr std::size_t kMaxFlowsPerSession = 4096;
constexpr std::size_t kMaxSessions = 256;
constexpr std::size_t kUploadWindow = 256 * 1024;

struct FlowKey {
  std::uint64_t measurementId;
  std::uint32_t flowId;
  std::uint16_t streamId;
  auto operator<=>(const FlowKey&) const = default;
};

std::string keyName(const FlowKey& k) {
  char b[96];
  std::snprintf(b, sizeof(b), "flow %u (measurement $%llx, stream %u)", k.flowId,
                static_cast<unsigned long long>(k.measurementId), k.streamId);
  return b;
}

asio::ip::address unmapped(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  return a;
}

npmp::Bytes ack(std::uint32_t flowId, std::uint64_t measurementId, std::uint16_t streamId, std::uint32_t status) {
  npmp::Bytes b;
  npmp::encode(npmp::Acknowledge{flowId, measurementId, streamId, status}, b);
  return b;
}

// Connections (or SCTP associations) accepted but not identified yet: each one that has not
// sent its IDENTIFY within kIdentifyTimeout is closed, and at most kMaxPendingConnections wait.
template <class T>
class PendingTable {
public:
  PendingTable(asio::io_context& io, std::string what) : io_(io), what_(std::move(what)) {}

  // False (and the object closed) when too many are waiting already.
  bool add(const std::shared_ptr<T>& object) {
    if (entries_.size() >= kMaxPendingConnections) {
      log::warning("Closing " + what_ + " from " + object->peerName() + ": too many unidentified ones");
      object->close();
      return false;
    }
    auto timer = std::make_shared<asio::steady_timer>(io_, kIdentifyTimeout);
    T* raw = object.get();
    entries_[raw] = Entry{object, timer};
    timer->async_wait([this, raw](const boost::system::error_code& ec) {
      if (ec) return;  // identified, or the server stops
      auto it = entries_.find(raw);
      if (it == entries_.end()) return;
      log::warning("Closing " + what_ + " from " + raw->peerName() + ": no IDENTIFY within " +
                   std::to_string(kIdentifyTimeout.count()) + " s");
      it->second.object->close();
      entries_.erase(it);
    });
    return true;
  }

  // Takes it out of the table (it stays open); nullptr if it was not waiting.
  std::shared_ptr<T> take(T* raw) {
    auto it = entries_.find(raw);
    if (it == entries_.end()) return nullptr;
    auto object = std::move(it->second.object);
    it->second.timer->cancel();
    entries_.erase(it);
    return object;
  }

  void closeAll() {
    for (auto& [raw, e] : entries_) {
      e.timer->cancel();
      e.object->close();
    }
    entries_.clear();
  }

private:
  struct Entry {
    std::shared_ptr<T> object;
    std::shared_ptr<asio::steady_timer> timer;
  };
  asio::io_context& io_;
  std::string what_;
  std::map<T*, Entry> entries_;
};

}  // namespace

class Session;

// Everything the server knows about one flow.
struct FlowEntry {
  std::shared_ptr<measure::Flow> flow;
  std::weak_ptr<Session> session;
  transport::SocketOptions socketOptions;
  sctp::Tuning sctpTuning;                // SCTP: CMT and its tuning, from ADD_FLOW
  transport::StreamPolicy streamPolicy;   // SCTP: per-message delivery of the passive's sending
  bool identified = false;
  std::optional<udp::endpoint> udpPeer;
};

struct PassiveMeasurement {
  std::unique_ptr<measure::Measurement> measurement;
  std::uint8_t flags = 0;
};

class PassiveServer::Impl : public std::enable_shared_from_this<PassiveServer::Impl> {
public:
  Impl(asio::io_context& io, PassiveOptions options) : io_(io), options_(std::move(options)), udp_(io) {}

  void start();
  void stop();
  PassiveStatus status() const;

  // Called by sessions.
  std::uint32_t addFlow(const std::shared_ptr<Session>& session, const npmp::AddFlow& m);
  std::shared_ptr<FlowEntry> findFlow(const FlowKey& key) {
    auto it = flows_.find(key);
    return it == flows_.end() ? nullptr : it->second;
  }
  void removeFlow(const FlowKey& key);
  void removeSession(Session* session);
  asio::io_context& io() { return io_; }

private:
  int listenerFamily(const std::vector<asio::ip::address>& addresses) const;
  void openStreamListener(Protocol protocol, std::uint16_t port, const std::vector<asio::ip::address>& addresses,
                          bool control, bool mptcpControl);
  void openUdp();
  void openDccp();
  void acceptControl(std::shared_ptr<tcp::acceptor> acceptor);
  void acceptData(std::shared_ptr<tcp::acceptor> acceptor, Protocol protocol);
  void acceptDccp();
  void openSctp();
  void acceptSctp(std::shared_ptr<sctp::Socket> listener, bool control);
  void adoptSctpData(std::shared_ptr<transport::SctpAssociation> association);
  void adoptPending(std::shared_ptr<transport::DataChannel> channel, Protocol protocol);
  void identify(const npmp::IdentifyFlow& id, std::shared_ptr<transport::DataChannel> channel,
                Protocol protocol, const asio::ip::address& from, std::optional<udp::endpoint> udpPeer);
  void receiveUdp();
  void drainUdp();

  asio::io_context& io_;
  PassiveOptions options_;
  std::vector<std::shared_ptr<tcp::acceptor>> acceptors_;
  udp::socket udp_;
  std::vector<std::uint8_t> udpBuffer_;
  std::unique_ptr<asio::posix::stream_descriptor> dccp_;
  std::vector<std::shared_ptr<sctp::Socket>> sctpListeners_;
  PendingTable<transport::SctpAssociation> pendingSctp_{io_, "SCTP association"};
  std::map<FlowKey, std::shared_ptr<FlowEntry>> flows_;
  std::map<udp::endpoint, FlowKey> udpFlows_;
  PendingTable<transport::DataChannel> pending_{io_, "data connection"};
  std::set<std::shared_ptr<Session>> sessions_;
  std::uint64_t udpGarbage_ = 0;
  bool stopped_ = false;

  friend class Session;
};

// ------------------------------------------------------------------------- session

class Session : public std::enable_shared_from_this<Session> {
public:
  Session(std::shared_ptr<PassiveServer::Impl> server, std::shared_ptr<ControlChannel> control)
      : server_(std::move(server)), control_(std::move(control)) {}

  void start() {
    control_->start();
    asio::co_spawn(server_->io(), [self = shared_from_this()]() { return self->run(); }, asio::detached);
  }
  void close() {
    closing_ = true;
    control_->close();
  }
  ControlChannel& control() { return *control_; }
  const asio::ip::address& peerAddress() const { return control_->peerAddress(); }
  std::set<FlowKey>& flows() { return flows_; }
  std::size_t measurementCount() const { return measurements_.size(); }

private:
  asio::awaitable<void> run();
  void handleAddFlow(const npmp::AddFlow& m);
  void handleStart(const npmp::Start& m);
  asio::awaitable<void> handleStop(const npmp::Stop& m);
  asio::awaitable<void> handleRemoveFlow(const npmp::RemoveFlow& m);
  asio::awaitable<void> stopFlows(const std::vector<std::shared_ptr<measure::Flow>>& flows);
  asio::awaitable<void> upload(std::FILE* file);
  void cleanup();

  std::shared_ptr<PassiveServer::Impl> server_;
  std::shared_ptr<ControlChannel> control_;
  std::set<FlowKey> flows_;
  std::map<std::uint64_t, PassiveMeasurement> measurements_;
  bool closing_ = false;
};

asio::awaitable<void> Session::run() {
  auto self = shared_from_this();
  log::debug("Control connection from " + control_->peerName());
  try {
    for (;;) {
      auto message = co_await control_->next(kIdleTimeout);
      if (!message) {
        bool running = false;
        for (auto& [id, m] : measurements_) running = running || m.measurement->running();
        if (running) continue;
        log::warning("Closing control connection from " + control_->peerName() + ": idle for " +
                     std::to_string(std::chrono::duration_cast<std::chrono::minutes>(kIdleTimeout).count()) +
                     " minutes");
        break;
      }
      const auto decoded = npmp::decode(*message);
      if (!decoded) {
        log::warning("Closing control connection from " + control_->peerName() + ": " + decoded.error);
        break;
      }
      const npmp::Message& m = *decoded.message;
      if (const auto* add = std::get_if<npmp::AddFlow>(&m)) {
        handleAddFlow(*add);
      } else if (const auto* start = std::get_if<npmp::Start>(&m)) {
        handleStart(*start);
      } else if (const auto* stop = std::get_if<npmp::Stop>(&m)) {
        co_await handleStop(*stop);
      } else if (const auto* remove = std::get_if<npmp::RemoveFlow>(&m)) {
        co_await handleRemoveFlow(*remove);
      } else {
        log::warning("Closing control connection from " + control_->peerName() + ": unexpected " +
                     npmp::typeName((*message)[0]) + " message");
        break;
      }
    }
  } catch (const ControlError& e) {
    if (!closing_) log::debug("Control connection from " + control_->peerName() + " ended: " + e.what());
  } catch (const std::exception& e) {
    log::error("Control connection from " + control_->peerName() + ": " + e.what());
  }
  cleanup();
}

void Session::handleAddFlow(const npmp::AddFlow& m) {
  const FlowKey key{m.measurementId, m.flowId, m.streamId};
  const std::uint32_t status = server_->addFlow(shared_from_this(), m);
  if (status == npmp::kStatusOk) flows_.insert(key);
  control_->send(ack(m.flowId, m.measurementId, m.streamId, status));
}

void Session::handleStart(const npmp::Start& m) {
  auto& pm = measurements_[m.measurementId];
  if (pm.measurement && pm.measurement->running()) {
    log::warning("START for measurement already running, from " + control_->peerName());
    control_->send(ack(0, m.measurementId, 0, npmp::kStatusError));
    return;
  }
  pm.measurement = std::make_unique<measure::Measurement>(server_->io(), m.measurementId);
  pm.flags = m.flags;
  std::uint32_t status = npmp::kStatusOk;
  try {
    if (!(m.flags & npmp::kStartNoVectors)) {
      pm.measurement->setVector(measure::MeasurementVectorWriter(
          OutputFile::anonymous((m.flags & npmp::kStartCompressVectors) != 0)));
    }
  } catch (const FileError& e) {
    log::error(std::string("Measurement vector: ") + e.what());
    status = npmp::kStatusError;
  }
  for (const FlowKey& key : flows_) {
    if (key.measurementId != m.measurementId) continue;
    auto entry = server_->findFlow(key);
    if (entry && entry->identified) pm.measurement->flows().push_back(entry->flow);
  }
  pm.measurement->start(transport::nowMicros());
  log::info("Starting measurement $" + [&] {
    char b[32];
    std::snprintf(b, sizeof(b), "%llx", static_cast<unsigned long long>(m.measurementId));
    return std::string(b);
  }() + " with " + std::to_string(pm.measurement->flows().size()) + " flow(s) for " + control_->peerName());
  control_->send(ack(0, m.measurementId, 0, status));
}

asio::awaitable<void> Session::stopFlows(const std::vector<std::shared_ptr<measure::Flow>>& flows) {
  Event allStopped(server_->io().get_executor());
  auto remaining = std::make_shared<std::size_t>(flows.size());
  for (const auto& f : flows) {
    f->stopSending([remaining, &allStopped] {
      if (--*remaining == 0) allStopped.notify();
    });
  }
  if (!flows.empty()) co_await allStopped.wait(Clock::now() + std::chrono::seconds(5));
  // Give late completions nothing to touch: `allStopped` lives in this frame only.
  *remaining = static_cast<std::size_t>(-1) / 2;
}

asio::awaitable<void> Session::handleStop(const npmp::Stop& m) {
  auto it = measurements_.find(m.measurementId);
  if (it == measurements_.end() || !it->second.measurement->running()) {
    control_->send(ack(0, m.measurementId, 0, npmp::kStatusError));
    co_return;
  }
  PassiveMeasurement& pm = it->second;
  auto& flows = pm.measurement->flows();
  co_await stopFlows(flows);
  for (auto& f : flows) f->finishReceiving();
  const measure::MeasurementResult result = pm.measurement->stop(transport::nowMicros());

  std::FILE* vectorFile = nullptr;
  std::FILE* scalarFile = nullptr;
  std::uint32_t status = npmp::kStatusOk;
  try {
    if (auto* v = pm.measurement->vector()) vectorFile = v->file().takeForReading();
    if (!(pm.flags & npmp::kStartNoScalars)) {
      OutputFile scalars = OutputFile::anonymous((pm.flags & npmp::kStartCompressScalars) != 0);
      measure::writeScalars(scalars, "passive", result);
      scalarFile = scalars.takeForReading();
    }
  } catch (const FileError& e) {
    log::error(std::string("Results of the measurement: ") + e.what());
    status = npmp::kStatusError;
  }
  control_->send(ack(0, m.measurementId, 0, status));
  if (status == npmp::kStatusOk) {
    if (vectorFile != nullptr) co_await upload(vectorFile);
    if (scalarFile != nullptr) co_await upload(scalarFile);
  }
  if (vectorFile != nullptr) std::fclose(vectorFile);
  if (scalarFile != nullptr) std::fclose(scalarFile);
  measurements_.erase(it);
}

asio::awaitable<void> Session::handleRemoveFlow(const npmp::RemoveFlow& m) {
  const FlowKey key{m.measurementId, m.flowId, m.streamId};
  auto entry = flows_.count(key) ? server_->findFlow(key) : nullptr;
  if (!entry) {
    log::warning("REMOVE_FLOW for unknown " + keyName(key) + " from " + control_->peerName());
    control_->send(ack(m.flowId, m.measurementId, m.streamId, npmp::kStatusError));
    co_return;
  }
  auto flow = entry->flow;
  if (flow->sending()) {
    const std::vector<std::shared_ptr<measure::Flow>> one{flow};
    co_await stopFlows(one);
  }
  flow->finishReceiving();
  std::FILE* vectorFile = nullptr;
  if (auto* v = flow->vector()) {
    try {
      v->flush();
      vectorFile = v->file().takeForReading();
    } catch (const FileError& e) {
      log::error(std::string("Per-flow vector: ") + e.what());
    }
  }
  flows_.erase(key);
  server_->removeFlow(key);
  // As the reference: without a vector file, REMOVE_FLOW is not answered.
  if (flow->vector() != nullptr) {
    control_->send(ack(m.flowId, m.measurementId, m.streamId,
                       vectorFile != nullptr ? npmp::kStatusOk : npmp::kStatusError));
    if (vectorFile != nullptr) {
      co_await upload(vectorFile);
      std::fclose(vectorFile);
    }
  }
}

asio::awaitable<void> Session::upload(std::FILE* file) {
  std::vector<std::uint8_t> chunk(npmp::kResultsMaxData);
  for (;;) {
    const std::size_t n = std::fread(chunk.data(), 1, chunk.size(), file);
    const bool eof = std::feof(file) || std::ferror(file);
    npmp::Bytes message;
    npmp::encode(npmp::Results{static_cast<std::uint8_t>(eof ? npmp::kResultsEof : 0),
                               std::span<const std::uint8_t>(chunk.data(), n)},
                 message);
    control_->send(std::move(message));
    co_await control_->drained(kUploadWindow);
    if (eof) break;
  }
}

void Session::cleanup() {
  for (auto& [id, pm] : measurements_) {
    if (pm.measurement->running()) {
      for (auto& f : pm.measurement->flows()) f->close();
      pm.measurement->stop(transport::nowMicros());
    }
  }
  measurements_.clear();
  for (const FlowKey& key : flows_) server_->removeFlow(key);
  flows_.clear();
  control_->close();
  server_->removeSession(this);
}

// -------------------------------------------------------------------------- server

std::uint32_t PassiveServer::Impl::addFlow(const std::shared_ptr<Session>& session, const npmp::AddFlow& m) {
  const FlowKey key{m.measurementId, m.flowId, m.streamId};
  const std::string from = " from " + session->control().peerName();
  if (flows_.count(key)) {
    log::warning("ADD_FLOW for existing " + keyName(key) + from);
    return npmp::kStatusError;
  }
  if (session->flows().size() >= kMaxFlowsPerSession) {
    log::warning("ADD_FLOW rejected" + from + ": more than " + std::to_string(kMaxFlowsPerSession) + " flows");
    return npmp::kStatusError;
  }
  std::string why;
  switch (m.protocol) {
    case Protocol::TCP:
    case Protocol::MPTCP:
    case Protocol::UDP:
      break;
    case Protocol::SCTP:
      if (sctpListeners_.empty()) {
        log::warning("ADD_FLOW for an SCTP flow rejected" + from + ": no SCTP data listener");
        return npmp::kStatusError;
      }
      break;
    case Protocol::DCCP:
      if (!dccp_) {
        log::warning("ADD_FLOW for a DCCP flow rejected" + from + ": DCCP is not supported by this kernel");
        return npmp::kStatusError;
      }
      break;
    default:
      log::warning("ADD_FLOW rejected" + from + ": " + npmp::protocolName(m.protocol) +
                   " data flows are not supported by this passive");
      return npmp::kStatusError;
  }
  if (m.maxMsgSize < npmp::kDataHeaderSize) {
    log::warning("ADD_FLOW rejected" + from + ": MaxMsgSize " + std::to_string(m.maxMsgSize) + " is too small");
    return npmp::kStatusError;
  }
  if (auto error = transport::checkCongestionControl(m.congestionControl); !error.empty()) {
    log::warning("ADD_FLOW rejected" + from + ": " + error);
    return npmp::kStatusError;
  }
  measure::FlowParameters p;
  p.measurementId = m.measurementId;
  p.flowId = m.flowId;
  p.streamId = m.streamId;
  p.protocol = m.protocol;
  p.description = printable(m.description);  // from the network: no control characters in our files
  p.outbound.rate = m.frameRate;
  p.outbound.size = m.frameSize;
  p.onOff = m.onOffEvents;
  p.repeatOnOff = (m.flags & npmp::kAddFlowRepeatOnOff) != 0;
  p.maxMsgSize = m.maxMsgSize;
  p.debug = (m.flags & npmp::kAddFlowDebug) != 0;
  p.errorOnAbort = false;  // the passive ignores send errors, as the reference
  auto entry = std::make_shared<FlowEntry>();
  entry->flow = std::make_shared<measure::Flow>(io_, std::move(p), false);
  entry->session = session;
  entry->socketOptions.rcvBufferSize = m.rcvBufferSize;
  entry->socketOptions.sndBufferSize = m.sndBufferSize;
  entry->socketOptions.noDelay = (m.flags & npmp::kAddFlowNoDelay) != 0;
  entry->socketOptions.congestionControl = m.congestionControl;
  entry->socketOptions.ccid = m.ccid;
  entry->sctpTuning.cmt = m.cmt;
  entry->sctpTuning.nrSack = (m.flags & npmp::kAddFlowNrSack) != 0;
  entry->sctpTuning.bufferSplitting = (m.flags >> npmp::kAddFlowBufferSplitShift) & 3;
  entry->sctpTuning.ccModule = (m.flags >> npmp::kAddFlowSctpCcShift) & 3;
  entry->sctpTuning.rtoMinMs = m.sctpRtoMinAndDac & npmp::kSctpRtoMinMask;
  entry->sctpTuning.dac = (m.sctpRtoMinAndDac & npmp::kSctpDacBit) != 0;
  entry->streamPolicy = transport::streamPolicy(flowspec::wireToFraction(m.orderedMode),
                                                flowspec::wireToFraction(m.reliableMode), m.retransmissionTrials);
  if (m.protocol != Protocol::SCTP && m.cmt != 0 && !(m.cmt == 4 && m.protocol == Protocol::MPTCP)) {
    log::warning("ADD_FLOW rejected" + from + ": CMT applies to SCTP flows only");
    return npmp::kStatusError;
  }
  flows_[key] = entry;
  log::debug("Added " + keyName(key) + " (" + npmp::protocolName(m.protocol) + ")" + from);
  return npmp::kStatusOk;
}

void PassiveServer::Impl::removeFlow(const FlowKey& key) {
  auto it = flows_.find(key);
  if (it == flows_.end()) return;
  if (it->second->udpPeer) udpFlows_.erase(*it->second->udpPeer);
  it->second->flow->close();
  flows_.erase(it);
}

void PassiveServer::Impl::removeSession(Session* session) {
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (it->get() == session) {
      // Destroy later: the session's coroutine is still on the stack.
      auto keep = *it;
      sessions_.erase(it);
      asio::post(io_, [keep] {});
      return;
    }
  }
}

void PassiveServer::Impl::identify(const npmp::IdentifyFlow& id, std::shared_ptr<transport::DataChannel> channel,
                                   Protocol protocol, const asio::ip::address& from,
                                   std::optional<udp::endpoint> udpPeer) {
  const FlowKey key{id.measurementId, id.flowId, id.streamId};
  auto entry = findFlow(key);
  const std::string where = " on " + std::string(npmp::protocolName(protocol)) + " from " +
                            (channel ? channel->peerName() : transport::endpointName(udpPeer->address(), udpPeer->port()));
  auto reject = [&](const std::string& why) {
    log::warning("Rejected IDENTIFY for " + keyName(key) + where + ": " + why);
    if (channel) channel->close();
  };
  if (!entry) return reject("no such flow");
  if (entry->identified) return reject("the flow is already identified");
  if (entry->flow->parameters().protocol != protocol) {
    return reject(std::string("the flow was added as ") + npmp::protocolName(entry->flow->parameters().protocol));
  }
  auto session = entry->session.lock();
  if (!session) return reject("its control connection is gone");
  if (udpPeer && unmapped(from) != session->peerAddress()) {
    // No traffic reflection: UDP data goes only to the host that controls the flow (the
    // connection-oriented transports prove their address in the handshake).
    return reject("the control connection came from " + session->peerAddress().to_string());
  }
  if (udpPeer) {
    udpFlows_[*udpPeer] = key;
    entry->udpPeer = udpPeer;
    channel = transport::makeUdpPeerChannel(udp_, *udpPeer);
  } else if (protocol == Protocol::SCTP) {
    // `channel` is the association's stream; its tuning is set up by the caller.
  } else {
    try {
      const int family = channel->fd() >= 0 ? [&] {
        sockaddr_storage ss{};
        socklen_t len = sizeof(ss);
        ::getsockname(channel->fd(), reinterpret_cast<sockaddr*>(&ss), &len);
        return static_cast<int>(ss.ss_family);
      }() : AF_INET;
      auto options = entry->socketOptions;
      transport::configureSocket(channel->fd(), protocol, family, options);
    } catch (const transport::TransportError& e) {
      log::warning("Flow " + std::to_string(id.flowId) + ": " + e.what());
    }
  }
  entry->identified = true;
  auto flow = entry->flow;
  flow->attach(channel);
  if (!(id.flags & npmp::kIdentifyNoVectors)) {
    try {
      flow->setVector(measure::FlowVectorWriter(OutputFile::anonymous((id.flags & npmp::kIdentifyCompressVectors) != 0)));
    } catch (const FileError& e) {
      log::error(std::string("Per-flow vector: ") + e.what());
    }
  }
  flow->onFailure([key, peer = channel->peerName()](const std::string& reason) {
    log::warning("Data connection of " + keyName(key) + " from " + peer + ": " + reason);
  });
  if (!udpPeer) {
    channel->expect(npmp::Channel::Data);
    flow->startReceiving();
  }

  log::debug("Identified " + keyName(key) + where);
  session->control().send(ack(id.flowId, id.measurementId, id.streamId, npmp::kStatusOk));
}

int PassiveServer::Impl::listenerFamily(const std::vector<asio::ip::address>& addresses) const {
  if (!addresses.empty()) return addresses.front().is_v6() ? AF_INET6 : AF_INET;
  const int probe = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return AF_INET;
  ::close(probe);
  return AF_INET6;
}

void PassiveServer::Impl::openStreamListener(Protocol protocol, std::uint16_t port,
                                             const std::vector<asio::ip::address>& addresses, bool control,
                                             bool mptcpControl) {
  const int family = listenerFamily(addresses);
  const Protocol socketProtocol = mptcpControl ? Protocol::MPTCP : protocol;
  const int fd = transport::openSocket(socketProtocol, family);
  try {
    transport::SocketOptions o;
    o.reuseAddress = true;
    if (family == AF_INET6) o.v6only = options_.v6only;
    if (!control) {
      o.rcvBufferSize = options_.rcvBufferSize;
      o.sndBufferSize = options_.sndBufferSize;
    } else {
      o.noDelay = socketProtocol == Protocol::TCP || socketProtocol == Protocol::MPTCP;
    }
    transport::configureSocket(fd, socketProtocol, family, o);
    const auto any = family == AF_INET6 ? asio::ip::address(asio::ip::address_v6::any())
                                        : asio::ip::address(asio::ip::address_v4::any());
    transport::bindSocket(fd, addresses.empty() ? any : addresses.front(), port);
    if (::listen(fd, 128) != 0) {
      throw transport::TransportError("cannot listen on port " + std::to_string(port) + ": " + std::strerror(errno));
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  auto acceptor = std::make_shared<tcp::acceptor>(io_);
  acceptor->assign(family == AF_INET6 ? tcp::v6() : tcp::v4(), fd);
  acceptors_.push_back(acceptor);
  if (control) {
    acceptControl(acceptor);
  } else {
    acceptData(acceptor, protocol);
  }
}

void PassiveServer::Impl::acceptControl(std::shared_ptr<tcp::acceptor> acceptor) {
  acceptor->async_accept([self = shared_from_this(), acceptor](const boost::system::error_code& ec, tcp::socket socket) {
    if (self->stopped_) return;
    if (!ec) {
      if (self->sessions_.size() >= kMaxSessions) {
        log::warning("Refusing control connection: " + std::to_string(kMaxSessions) + " sessions are open");
      } else {
        boost::system::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        const auto remote = socket.remote_endpoint(ignored);
        auto control = std::make_shared<ControlChannel>(
            self->io_.get_executor(),
            tcpControl(std::move(socket), npmp::Channel::ControlToPassive, self->options_.controlOverMptcp),
            transport::endpointName(remote.address(), remote.port()), remote.address());
        auto session = std::make_shared<Session>(self, std::move(control));
        self->sessions_.insert(session);
        session->start();
      }
    } else if (ec == asio::error::operation_aborted) {
      return;
    } else {
      log::warning("Accepting a control connection failed: " + ec.message());
    }
    self->acceptControl(acceptor);
  });
}

void PassiveServer::Impl::acceptData(std::shared_ptr<tcp::acceptor> acceptor, Protocol protocol) {
  acceptor->async_accept([self = shared_from_this(), acceptor, protocol](const boost::system::error_code& ec,
                                                                          tcp::socket socket) {
    if (self->stopped_ || ec == asio::error::operation_aborted) return;
    if (!ec) {
      self->adoptPending(transport::makeStreamChannel(std::move(socket)), protocol);
    } else {
      log::warning("Accepting a data connection failed: " + ec.message());
    }
    self->acceptData(acceptor, protocol);
  });
}

void PassiveServer::Impl::adoptPending(std::shared_ptr<transport::DataChannel> channel, Protocol protocol) {
  if (!pending_.add(channel)) return;
  transport::DataChannel* raw = channel.get();
  channel->expect(npmp::Channel::DataFirst);
  std::weak_ptr<Impl> weak = shared_from_this();
  channel->receive(
      [weak, raw, protocol](std::span<const std::uint8_t> message, std::uint64_t) {
        auto self = weak.lock();
        if (!self) return;
        auto channel = self->pending_.take(raw);
        if (!channel) return;
        const auto decoded = npmp::decode(message);
        const auto* id = decoded ? std::get_if<npmp::IdentifyFlow>(&*decoded.message) : nullptr;
        if (id == nullptr) {
          log::warning("Closing data connection from " + channel->peerName() + ": expected IDENTIFY_FLOW, got " +
                       (decoded ? std::string(npmp::typeName(message[0])) : decoded.error));
          channel->close();
          return;
        }
        sockaddr_storage ss{};
        socklen_t len = sizeof(ss);
        ::getpeername(channel->fd(), reinterpret_cast<sockaddr*>(&ss), &len);
        asio::ip::tcp::endpoint peer;
        std::memcpy(peer.data(), &ss, std::min<std::size_t>(len, sizeof(ss)));
        self->identify(*id, channel, protocol, peer.address(), std::nullopt);
      },
      [weak, raw](const std::string& reason) {
        auto self = weak.lock();
        if (!self) return;
        if (auto channel = self->pending_.take(raw)) {
          log::warning("Closing data connection from " + channel->peerName() + ": " + reason);
          channel->close();
        }
      });
}

void PassiveServer::Impl::openUdp() {
  const int family = listenerFamily(options_.localAddresses);
  const int fd = transport::openSocket(Protocol::UDP, family);
  try {
    transport::SocketOptions o;
    o.reuseAddress = true;
    if (family == AF_INET6) o.v6only = options_.v6only;
    o.rcvBufferSize = options_.rcvBufferSize;
    o.sndBufferSize = options_.sndBufferSize;
    transport::configureSocket(fd, Protocol::UDP, family, o);
    const auto any = family == AF_INET6 ? asio::ip::address(asio::ip::address_v6::any())
                                        : asio::ip::address(asio::ip::address_v4::any());
    transport::bindSocket(fd, options_.localAddresses.empty() ? any : options_.localAddresses.front(), options_.port);
  } catch (...) {
    ::close(fd);
    throw;
  }
  udp_.assign(family == AF_INET6 ? udp::v6() : udp::v4(), fd);
  udp_.non_blocking(true);  // drainUdp() reads until would_block
  udpBuffer_.resize(65536);
  receiveUdp();
}

void PassiveServer::Impl::receiveUdp() {
  udp_.async_wait(udp::socket::wait_read, [self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->stopped_) return;
    self->drainUdp();
    self->receiveUdp();
  });
}

void PassiveServer::Impl::drainUdp() {
  for (int i = 0; i < 64; ++i) {
    udp::endpoint from;
    boost::system::error_code ec;
    const std::size_t n = udp_.receive_from(asio::buffer(udpBuffer_), from, 0, ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) return;
    if (ec) continue;  // ICMP errors of earlier sends
    const std::uint64_t now = transport::nowMicros();
    const std::span<const std::uint8_t> message(udpBuffer_.data(), n);
    auto it = udpFlows_.find(from);
    if (it != udpFlows_.end()) {
      if (auto entry = findFlow(it->second)) entry->flow->deliver(message, now);
      continue;
    }
    if (n >= 4 && message[0] == static_cast<std::uint8_t>(npmp::Type::IdentifyFlow)) {
      const auto decoded = npmp::decode(message);
      if (decoded) {
        identify(std::get<npmp::IdentifyFlow>(*decoded.message), nullptr, Protocol::UDP, from.address(), from);
        continue;
      }
    }
    // Rate-limited: a flood of garbage must not flood the log.
    if (++udpGarbage_ <= 10 || (udpGarbage_ & (udpGarbage_ - 1)) == 0) {
      log::warning("Ignored " + std::to_string(n) + " bytes of UDP from " +
                   transport::endpointName(from.address(), from.port()) + ": not from an identified flow (" +
                   std::to_string(udpGarbage_) + " so far)");
    }
  }
}

void PassiveServer::Impl::openDccp() {
  const int family = listenerFamily(options_.localAddresses);
  int fd = -1;
  try {
    fd = transport::openSocket(Protocol::DCCP, family);
    transport::SocketOptions o;
    o.reuseAddress = true;
    if (family == AF_INET6) o.v6only = options_.v6only;
    transport::configureSocket(fd, Protocol::DCCP, family, o);
    const auto any = family == AF_INET6 ? asio::ip::address(asio::ip::address_v6::any())
                                        : asio::ip::address(asio::ip::address_v4::any());
    transport::bindSocket(fd, options_.localAddresses.empty() ? any : options_.localAddresses.front(), options_.port);
    if (::listen(fd, 128) != 0) throw transport::TransportError(std::string("listen: ") + std::strerror(errno));
  } catch (const transport::TransportError& e) {
    if (fd >= 0) ::close(fd);
    log::info(std::string("No DCCP data listener: ") + e.what());
    return;
  }
  dccp_ = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
  acceptDccp();
}

void PassiveServer::Impl::acceptDccp() {
  dccp_->async_wait(asio::posix::stream_descriptor::wait_read, [self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->stopped_) return;
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    const int fd = ::accept4(self->dccp_->native_handle(), reinterpret_cast<sockaddr*>(&ss), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      asio::ip::tcp::endpoint peer;
      std::memcpy(peer.data(), &ss, std::min<std::size_t>(len, sizeof(ss)));
      self->adoptPending(transport::makeDccpChannel(self->io_, fd,
                                                    transport::endpointName(peer.address(), peer.port())),
                         Protocol::DCCP);
    }
    self->acceptDccp();
  });
}

void PassiveServer::Impl::openSctp() {
  sctp::Stack stack;
  try {
    stack = sctp::resolve(options_.sctpStack, false);
  } catch (const transport::TransportError& e) {
    log::warning(std::string("No SCTP listeners: ") + e.what());
    return;
  }
  const int family = listenerFamily(options_.localAddresses);
  const sctp::StackSettings settings{options_.sctpUdpPort, sctp::kDefaultUdpEncapsulationPort};
  try {
    for (const bool control : {true, false}) {
      std::shared_ptr<sctp::Socket> listener = sctp::open(stack, io_, family, settings);
      sctp::SocketOptions o;
      o.streams = 65535;
      o.noDelay = true;
      if (family == AF_INET6) o.v6only = options_.v6only;
      if (!control) {
        o.rcvBufferSize = options_.rcvBufferSize;
        o.sndBufferSize = options_.sndBufferSize;
      }
      listener->configure(o);
      const auto& addresses = control ? options_.controlAddresses : options_.localAddresses;
      listener->bind(addresses, static_cast<std::uint16_t>(control ? options_.port + 1 : options_.port));
      listener->listen();
      sctpListeners_.push_back(listener);
      acceptSctp(listener, control);
    }
  } catch (const transport::TransportError& e) {
    log::warning(std::string("No SCTP listeners: ") + e.what());
    for (auto& l : sctpListeners_) l->close();
    sctpListeners_.clear();
    return;
  }
  if (stack == sctp::Stack::Userland) {
    log::info("SCTP: userland stack (usrsctp) over UDP port " + std::to_string(sctp::userlandEncapsulationPort()));
  } else {
    log::info("SCTP: kernel stack");
  }
}

void PassiveServer::Impl::acceptSctp(std::shared_ptr<sctp::Socket> listener, bool control) {
  listener->asyncWait(false, [weak = weak_from_this(), listener, control] {
    auto self = weak.lock();
    if (!self || self->stopped_) return;
    while (auto socket = listener->accept()) {
      const auto peers = socket->peerAddresses();
      const asio::ip::address peer = peers.empty() ? asio::ip::address() : unmapped(peers.front());
      const std::string name = (peer.is_v6() ? "[" + peer.to_string() + "]" : peer.to_string()) + " (SCTP)";
      auto association = std::make_shared<transport::SctpAssociation>(self->io_, std::move(socket), name);
      if (!control) {
        self->adoptSctpData(association);
      } else if (self->sessions_.size() >= kMaxSessions) {
        log::warning("Refusing control association: " + std::to_string(kMaxSessions) + " sessions are open");
        association->close();
      } else {
        auto channel = std::make_shared<ControlChannel>(
            self->io_.get_executor(), sctpControl(association, npmp::Channel::ControlToPassive), name, peer);
        auto session = std::make_shared<Session>(self, std::move(channel));
        self->sessions_.insert(session);
        session->start();
      }
    }
    self->acceptSctp(listener, control);
  });
}

// An SCTP data association: each stream announces its flow with IDENTIFY (PPID 36).
void PassiveServer::Impl::adoptSctpData(std::shared_ptr<transport::SctpAssociation> association) {
  if (!pendingSctp_.add(association)) return;
  transport::SctpAssociation* raw = association.get();
  std::weak_ptr<Impl> weak = shared_from_this();
  std::weak_ptr<transport::SctpAssociation> weakAssociation = association;
  association->start(
      [weak, weakAssociation, raw](std::uint16_t stream, std::uint32_t, std::span<const std::uint8_t> message,
                                   std::uint64_t) {
        auto self = weak.lock();
        auto association = weakAssociation.lock();
        if (!self || !association) return;
        const auto decoded = npmp::decode(message);
        const auto* id = decoded ? std::get_if<npmp::IdentifyFlow>(&*decoded.message) : nullptr;
        if (id == nullptr || id->streamId != stream) {
          log::warning("Closing SCTP association from " + association->peerName() + ": expected IDENTIFY_FLOW on stream " +
                       std::to_string(stream) + ", got " + (decoded ? npmp::typeName(message[0]) : decoded.error));
          association->close();
          self->pendingSctp_.take(raw);
          return;
        }
        const FlowKey key{id->measurementId, id->flowId, id->streamId};
        auto entry = self->findFlow(key);
        if (entry && entry->flow->parameters().protocol == Protocol::SCTP && !entry->identified) {
          try {
            association->socket().tune(entry->sctpTuning);
          } catch (const transport::TransportError& e) {
            log::warning("Flow " + std::to_string(id->flowId) + ": " + e.what());
          }
        }
        const auto peers = association->socket().peerAddresses();
        self->identify(*id, association->stream(stream, entry ? entry->streamPolicy : transport::StreamPolicy{}),
                       Protocol::SCTP, peers.empty() ? asio::ip::address() : peers.front(), std::nullopt);
        // Identified at least once: no longer pending; closed with its last flow.
        if (association->hasClaims()) self->pendingSctp_.take(raw);
      },
      [weak, raw](const std::string& reason) {
        auto self = weak.lock();
        if (!self) return;
        if (self->pendingSctp_.take(raw)) log::debug("SCTP association from " + raw->peerName() + ": " + reason);
      });
}

void PassiveServer::Impl::start() {
  const std::uint16_t base = options_.port;
  std::vector<std::string> control;
  if (options_.controlOverTcp || options_.controlOverMptcp) {
    openStreamListener(Protocol::TCP, static_cast<std::uint16_t>(base + 1), options_.controlAddresses, true,
                       options_.controlOverMptcp);
    control.push_back(options_.controlOverMptcp ? "MPTCP/TCP" : "TCP");
  }
  openStreamListener(Protocol::TCP, base, options_.localAddresses, false, false);
  std::string data = "TCP/UDP";
  openUdp();
  openDccp();
  if (dccp_) data += "/DCCP";
  if (options_.controlOverSctp) openSctp();
  if (!sctpListeners_.empty()) {
    control.insert(control.begin(), "SCTP");
    data = "SCTP/" + data;
  }
  if (control.empty()) {
    throw transport::TransportError("no control listener could be opened (SCTP is not available and -Y was given)");
  }
  std::string mptcp;
  try {
    openStreamListener(Protocol::MPTCP, static_cast<std::uint16_t>(base - 1), options_.localAddresses, false, false);
    mptcp = ", and MPTCP on port " + std::to_string(base - 1);
  } catch (const transport::TransportError& e) {
    log::info(std::string("No MPTCP data listener: ") + e.what());
  }
  std::string controlNames;
  for (const auto& c : control) controlNames += (controlNames.empty() ? "" : "/") + c;
  log::info("Passive mode: waiting for incoming connections: control channel = " + controlNames + " on port " +
            std::to_string(base + 1) + ", data channel = " + data + " on port " + std::to_string(base) + mptcp);
}

void PassiveServer::Impl::stop() {
  stopped_ = true;
  for (auto& a : acceptors_) {
    boost::system::error_code ec;
    a->close(ec);
  }
  boost::system::error_code ec;
  udp_.close(ec);
  if (dccp_) dccp_->close(ec);
  for (auto& l : sctpListeners_) l->close();
  pendingSctp_.closeAll();
  pending_.closeAll();
  auto sessions = sessions_;
  for (auto& s : sessions) s->close();
  for (auto& [key, entry] : flows_) entry->flow->close();
}

PassiveStatus PassiveServer::Impl::status() const {
  PassiveStatus s;
  s.flows = flows_.size();
  for (const auto& session : sessions_) s.measurements += session->measurementCount();
  for (const auto& [key, entry] : flows_) {
    s.transmitted += entry->flow->transmitted().total;
    s.received += entry->flow->received().received();
  }
  return s;
}

PassiveServer::PassiveServer(asio::io_context& io, PassiveOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {}
PassiveServer::~PassiveServer() { impl_->stop(); }
void PassiveServer::start() { impl_->start(); }
void PassiveServer::stop() { impl_->stop(); }
PassiveStatus PassiveServer::status() const { return impl_->status(); }

}  // namespace npm::control
