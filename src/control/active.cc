#include <utility>  // before Boost 1.74's awaitable.hpp, which needs std::exchange

#include "control/active.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <map>
#include <random>

#include "common/fileio.h"
#include "common/log.h"
#include "common/text.h"
#include "control/control_channel.h"
#include "control/auth.h"
#include "control/display.h"
#include "control/flow_mapping.h"
#include "control/json_output.h"
#include "control/stop_flows.h"
#include "measure/measurement.h"
#include "transport/channel.h"
#include "transport/sctp_channel.h"
#include "sctp/sockaddr.h"
#include "transport/sockets.h"

namespace npm::control {

namespace {

using asio::ip::tcp;
using asio::ip::udp;
using npmp::Protocol;

constexpr auto kConnectTimeout = std::chrono::seconds(10);
constexpr auto kAckTimeout = std::chrono::seconds(10);
constexpr auto kStopTimeout = std::chrono::seconds(30);
constexpr auto kResultsTimeout = std::chrono::seconds(30);  // for each RESULTS message
constexpr auto kDownloadGrace = std::chrono::seconds(60);
constexpr double kMinDownloadRate = 8192.0;  // bytes/s over a whole file, after the grace period

class ActiveError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

std::uint64_t randomMeasurementId() {
  std::random_device device;
  return (std::uint64_t{device()} << 32) | device();
}

// Connects a non-blocking socket within the timeout.
asio::awaitable<void> connectWithin(tcp::socket& socket, const tcp::endpoint& to, Clock::duration timeout) {
  Deadline deadline(socket.get_executor(), timeout, [&socket] {
    boost::system::error_code ignored;
    socket.cancel(ignored);
  });
  boost::system::error_code ec;
  co_await socket.async_connect(to, asio::redirect_error(asio::use_awaitable, ec));
  if (deadline.expired()) throw ActiveError("cannot connect to " + transport::endpointName(to.address(), to.port()) + ": timed out");
  if (ec) throw ActiveError("cannot connect to " + transport::endpointName(to.address(), to.port()) + ": " + ec.message());
}

struct FlowRun {
  flowspec::FlowSpec spec;
  std::shared_ptr<measure::Flow> flow;
};

class Active {
public:
  Active(asio::io_context& io, const ActiveOptions& o)
      : io_(io), o_(o), runEvent_(io.get_executor()), signals_(io, SIGINT, SIGTERM), json_(o) {}

  asio::awaitable<int> run();
  void onSignal(int number);

private:
  asio::awaitable<void> connectControl();
  asio::awaitable<void> authenticate();
  asio::awaitable<void> connectSctpControl(Clock::duration timeout);
  asio::awaitable<void> waitConnected(transport::SctpAssociation& association, Clock::duration timeout);
  asio::awaitable<std::shared_ptr<transport::SctpAssociation>> association(const flowspec::FlowSpec& spec);
  sctp::StackSettings sctpSettings() const {
    return sctp::StackSettings{o_.sctpUdpPort, o_.sctpRemoteUdpPort};
  }
  // The next message must be the acknowledgement of `what`; nullopt on timeout.
  asio::awaitable<std::optional<npmp::Acknowledge>> nextAck(std::uint32_t flowId, std::uint16_t streamId,
                                                            const char* what, Clock::duration timeout);
  asio::awaitable<npmp::Acknowledge> awaitAck(std::uint32_t flowId, std::uint16_t streamId, const char* what,
                                              Clock::duration timeout = kAckTimeout);
  asio::awaitable<std::shared_ptr<transport::DataChannel>> connectData(const flowspec::FlowSpec& spec);
  asio::awaitable<void> setupFlow(FlowRun& run);
  asio::awaitable<void> sendOnData(transport::DataChannel& channel, const npmp::Bytes& message);
  asio::awaitable<void> stopFlows();
  asio::awaitable<void> endAssociations();
  bool samplesPaths(npmp::Protocol protocol) const;
  bool recordsPaths(npmp::Protocol protocol) const;
  std::vector<std::shared_ptr<measure::Flow>> flowPointers() const;
  asio::awaitable<void> download(const std::string& fileName, const char* what, std::string* keep = nullptr);
  void openOwnFiles();
  void writeConfig();
  void writeOwnResults(const measure::MeasurementResult& result);
  void printStatistics(const measure::MeasurementResult& own) const;
  void statusTick();

  asio::io_context& io_;
  const ActiveOptions& o_;
  std::uint64_t measurementId_ = randomMeasurementId();
  std::shared_ptr<ControlChannel> control_;
  std::vector<FlowRun> flows_;
  std::map<std::uint32_t, std::shared_ptr<transport::SctpAssociation>> associations_;
  std::shared_ptr<measure::Measurement> measurement_;
  Event runEvent_;
  asio::signal_set signals_;
  int signalCount_ = 0;
  bool interrupted_ = false;
  std::string flowFailure_;
  // Once STOP is on its way, a passive may close data connections (the reference does when it
  // stops the measurement): their end is no failure any more.
  bool stopSent_ = false;
  bool pathsUnsupportedSaid_ = false;
  std::unique_ptr<StatusLine> status_;
  std::unique_ptr<asio::steady_timer> statusTimer_;
  JsonOutput json_;
};

void Active::onSignal(int number) {
  ++signalCount_;
  if (signalCount_ >= 2) {
    std::fprintf(stderr, "\n*** Kill ***\n");
    std::_Exit(1);
  }
  std::fprintf(stderr, "\n*** Break ***    Signal #%d\n", number);
  interrupted_ = true;
  runEvent_.notify();
  if (control_ && !measurement_) control_->close();  // still setting up: abort
}

asio::awaitable<void> Active::connectControl() {
  ControlProtocol transport = o_.control;
  if (transport == ControlProtocol::Default || transport == ControlProtocol::Sctp) {
    // SCTP is the reference's default. Without -x, a passive without SCTP is not an error.
    try {
      co_await connectSctpControl(transport == ControlProtocol::Sctp ? kConnectTimeout : std::chrono::seconds(2));
      co_return;
    } catch (const std::exception& e) {
      if (transport == ControlProtocol::Sctp) throw ActiveError(std::string("control over SCTP (-x): ") + e.what());
      log::info(std::string("No SCTP path to the passive (") + e.what() + "); using TCP for the control connection");
    }
    transport = ControlProtocol::Tcp;
  }
  const Protocol protocol = transport == ControlProtocol::Mptcp ? Protocol::MPTCP : Protocol::TCP;
  const int family = o_.remote.is_v6() ? AF_INET6 : AF_INET;
  const int fd = transport::openSocket(protocol, family);
  tcp::socket socket(io_);
  socket.assign(family == AF_INET6 ? tcp::v6() : tcp::v4(), fd);
  transport::SocketOptions options;
  if (family == AF_INET6) options.v6only = o_.v6only;
  options.noDelay = true;
  transport::configureSocket(fd, protocol, family, options);
  if (!o_.controlAddresses.empty()) transport::bindSocket(fd, o_.controlAddresses.front(), 0);
  const tcp::endpoint to(o_.remote, static_cast<std::uint16_t>(o_.port + 1));
  log::info(std::string("Connecting to the passive at ") + transport::endpointName(to.address(), to.port()) +
            " (control over " + npmp::protocolName(protocol) + ")");
  co_await connectWithin(socket, to, kConnectTimeout);
  boost::system::error_code ignored;
  const auto local = socket.local_endpoint(ignored);
  json_.control(npmp::protocolName(protocol), ignored ? "" : transport::endpointName(local.address(), local.port()),
                transport::endpointName(to.address(), to.port()));
  control_ = std::make_shared<ControlChannel>(
      io_.get_executor(), tcpControl(std::move(socket), npmp::Channel::ControlToActive, protocol == Protocol::MPTCP),
      transport::endpointName(to.address(), to.port()), to.address());
  control_->watchFailure(&runEvent_);
  control_->start();
}

// Proves the shared key to the passive, and makes it prove the key too (see auth.h).
asio::awaitable<void> Active::authenticate() {
  const npmp::AuthHello hello{newNonce()};
  npmp::Bytes out;
  npmp::encode(hello, out);
  control_->send(std::move(out));
  const std::string passive = "the passive at " + control_->peerName();
  auto next = [&]() -> asio::awaitable<npmp::Message> {
    std::optional<npmp::Bytes> message;
    try {
      message = co_await control_->next(kAckTimeout);
    } catch (const ControlError& e) {
      throw ActiveError(passive + " closed the control connection when asked to authenticate (" + e.what() +
                        "); it may not know authentication (the reference NetPerfMeter does not)");
    }
    if (!message) throw ActiveError(passive + " did not answer the authentication in time");
    auto decoded = npmp::decode(*message);
    if (!decoded) throw ActiveError(passive + " answered the authentication with garbage: " + decoded.error);
    co_return *decoded.message;
  };
  auto refused = [&](const npmp::Acknowledge& a) -> ActiveError {
    if (a.status == npmp::kStatusError) return ActiveError(passive + " does not use authentication (it has no --auth-key-file)");
    if (a.status == npmp::kStatusNotAllowed) return ActiveError(passive + " refused the key (wrong key, or its --allow list)");
    return ActiveError(passive + " refused the authentication (status " + std::to_string(a.status) + ")");
  };
  const npmp::Message first = co_await next();
  if (const auto* a = std::get_if<npmp::Acknowledge>(&first)) throw refused(*a);
  const auto* challenge = std::get_if<npmp::AuthChallenge>(&first);
  if (challenge == nullptr) throw ActiveError(passive + " answered the authentication with something else");
  if (!sameProof(challenge->mac, passiveProof(*o_.authKey, hello.nonce, challenge->nonce))) {
    throw ActiveError(passive + " could not prove the shared key: the keys differ, or it is not the passive you meant");
  }
  npmp::Bytes response;
  npmp::encode(npmp::AuthResponse{activeProof(*o_.authKey, challenge->nonce, hello.nonce)}, response);
  control_->send(std::move(response));
  const npmp::Message result = co_await next();
  const auto* a = std::get_if<npmp::Acknowledge>(&result);
  if (a == nullptr) throw ActiveError(passive + " answered the authentication with something else");
  if (a->status != npmp::kStatusOk) throw refused(*a);
  log::info("Authenticated with the passive (shared key)");
}

asio::awaitable<void> Active::waitConnected(transport::SctpAssociation& association, Clock::duration timeout) {
  Completion<std::string> connected(io_.get_executor());
  association.onConnected(connected.reporter());
  const auto error = co_await connected.wait(Clock::now() + timeout);
  if (!error) {
    association.onConnected(nullptr);
    association.close();
    throw ActiveError("cannot connect to " + association.peerName() + ": timed out");
  }
  if (!error->empty()) throw ActiveError("cannot connect to " + association.peerName() + ": " + *error);
}

asio::awaitable<void> Active::connectSctpControl(Clock::duration timeout) {
  const sctp::Stack stack = sctp::resolve(o_.sctpStack, false);
  const int family = o_.remote.is_v6() ? AF_INET6 : AF_INET;
  auto socket = sctp::open(stack, io_, family, sctpSettings());
  sctp::SocketOptions options;
  options.streams = 1;
  if (family == AF_INET6) options.v6only = o_.v6only;
  socket->configure(options);
  if (!o_.controlAddresses.empty()) socket->bind(o_.controlAddresses, 0);
  const std::uint16_t port = static_cast<std::uint16_t>(o_.port + 1);
  const std::string name = transport::endpointName(o_.remote, port);
  log::info("Connecting to the passive at " + name + " (control over SCTP, " + sctp::stackName(stack) + " stack)");
  socket->connect(o_.remotes, port);
  auto association = std::make_shared<transport::SctpAssociation>(io_, std::move(socket), name);
  try {
    co_await waitConnected(*association, timeout);
  } catch (const ActiveError& e) {
    // Userland SCTP reaches the passive through its UDP encapsulation port. When another
    // userland SCTP process on the passive's host holds that port, the passive serves no SCTP
    // (it says so in its log) and the INIT goes to the other process: a timeout, nothing else.
    if (stack != sctp::Stack::Userland || std::string_view(e.what()).find("timed out") == std::string_view::npos) {
      throw;
    }
    throw ActiveError(std::string(e.what()) + " (userland SCTP via UDP port " + std::to_string(o_.sctpRemoteUdpPort) +
                      ": does the passive own that port, or did another userland SCTP process take it? See the "
                      "passive's log; --sctp-udp-port and --sctp-remote-udp-port choose another)");
  }
  json_.control(std::string("SCTP (") + sctp::stackName(stack) + ")", "", name);
  json_.sctpStack(sctp::stackName(stack));
  control_ = std::make_shared<ControlChannel>(io_.get_executor(),
                                              sctpControl(association, npmp::Channel::ControlToActive), name, o_.remote);
  control_->watchFailure(&runEvent_);
  control_->start();
}

asio::awaitable<std::shared_ptr<transport::SctpAssociation>> Active::association(const flowspec::FlowSpec& spec) {
  if (auto it = associations_.find(spec.association); it != associations_.end()) co_return it->second;
  const sctp::Tuning tuning = sctpTuning(spec);
  const sctp::Stack stack = sctp::resolve(o_.sctpStack, tuning.needsUserland());
  if (o_.sctpStack == sctp::StackChoice::Auto && stack == sctp::Stack::Userland && sctp::kernelAvailable()) {
    log::info("Flow #" + std::to_string(*spec.flowId) + ": CMT-SCTP needs the userland SCTP stack; using it");
  }
  const int family = o_.remote.is_v6() ? AF_INET6 : AF_INET;
  json_.sctpStack(sctp::stackName(stack));
  auto socket = sctp::open(stack, io_, family, sctpSettings());
  sctp::SocketOptions options;
  options.streams = static_cast<std::uint16_t>(std::count_if(o_.flows.begin(), o_.flows.end(), [&](const auto& f) {
    return f.protocol == Protocol::SCTP && f.association == spec.association;
  }));
  options.rcvBufferSize = spec.rcvBufferSize;
  options.sndBufferSize = spec.sndBufferSize;
  options.noDelay = spec.noDelay;
  if (family == AF_INET6) options.v6only = spec.v6only || o_.v6only;
  socket->configure(options);
  socket->tune(tuning);
  // Multi-homing: bind every local address given with -L (bindx), connect to the peer (connectx).
  if (!o_.localAddresses.empty()) socket->bind(o_.localAddresses, 0);
  const std::string name = transport::endpointName(o_.remote, o_.port);
  log::info("Flow #" + std::to_string(*spec.flowId) + ": connecting SCTP association (" + sctp::stackName(stack) +
            " stack" + (spec.cmt != 0 ? std::string(", CMT ") + flowspec::cmtName(spec.cmt) : std::string()) + ") to " +
            name + " from " + (o_.localAddresses.empty() ? std::string("(any)") : sctp::addressList(o_.localAddresses)));
  socket->connect(o_.remotes, o_.port);  // connectx: every address the peer's name has
  auto association = std::make_shared<transport::SctpAssociation>(io_, std::move(socket), name);
  co_await waitConnected(*association, kConnectTimeout);
  association->start(nullptr, nullptr);
  associations_[spec.association] = association;
  co_return association;
}

asio::awaitable<std::optional<npmp::Acknowledge>> Active::nextAck(std::uint32_t flowId, std::uint16_t streamId,
                                                                  const char* what, Clock::duration timeout) {
  std::optional<npmp::Bytes> message;
  try {
    message = co_await control_->next(timeout);
  } catch (const ControlError& e) {
    throw ActiveError(std::string("lost the control connection while waiting for the acknowledgement of ") + what +
                      ": " + e.what());
  }
  if (!message) co_return std::nullopt;
  const auto decoded = npmp::decode(*message);
  const auto* a = decoded ? std::get_if<npmp::Acknowledge>(&*decoded.message) : nullptr;
  if (a == nullptr) {
    throw ActiveError(std::string("expected the acknowledgement of ") + what + ", got " +
                      (decoded ? npmp::typeName((*message)[0]) : decoded.error));
  }
  if (a->measurementId != measurementId_ || a->flowId != flowId || a->streamId != streamId) {
    throw ActiveError(std::string("the passive acknowledged something else than ") + what);
  }
  co_return *a;
}

asio::awaitable<npmp::Acknowledge> Active::awaitAck(std::uint32_t flowId, std::uint16_t streamId, const char* what,
                                                    Clock::duration timeout) {
  const auto a = co_await nextAck(flowId, streamId, what, timeout);
  if (!a) throw ActiveError(std::string("the passive did not acknowledge ") + what + " in time");
  co_return *a;
}

asio::awaitable<std::shared_ptr<transport::DataChannel>> Active::connectData(const flowspec::FlowSpec& spec) {
  const Protocol protocol = spec.protocol;
  if (protocol == Protocol::SCTP) {
    auto a = co_await association(spec);
    co_return a->stream(spec.streamId, transport::streamPolicy(spec.ordered, spec.reliable, spec.retransmissionTrials));
  }
  const int family = o_.remote.is_v6() ? AF_INET6 : AF_INET;
  const std::uint16_t port = protocol == Protocol::MPTCP ? static_cast<std::uint16_t>(o_.port - 1) : o_.port;
  const int fd = transport::openSocket(protocol, family);
  transport::SocketOptions options;
  options.reuseAddress = !o_.localAddresses.empty();
  options.rcvBufferSize = spec.rcvBufferSize;
  options.sndBufferSize = spec.sndBufferSize;
  options.noDelay = spec.noDelay;
  options.congestionControl = spec.congestionControl;
  options.ccid = spec.ccid;
  if (family == AF_INET6) options.v6only = spec.v6only || o_.v6only;
  try {
    transport::configureSocket(fd, protocol, family, options);
    if (!o_.localAddresses.empty()) transport::bindSocket(fd, o_.localAddresses.front(), 0);
  } catch (...) {
    ::close(fd);
    throw;
  }
  log::info("Flow #" + std::to_string(*spec.flowId) + ": connecting " + npmp::protocolName(protocol) + " socket to " +
            transport::endpointName(o_.remote, port) + " from " +
            (o_.localAddresses.empty() ? std::string("(any)") : o_.localAddresses.front().to_string()));
  switch (protocol) {
    case Protocol::TCP:
    case Protocol::MPTCP: {
      tcp::socket socket(io_);
      socket.assign(family == AF_INET6 ? tcp::v6() : tcp::v4(), fd);
      co_await connectWithin(socket, tcp::endpoint(o_.remote, port), kConnectTimeout);
      co_return transport::makeStreamChannel(std::move(socket));
    }
    case Protocol::UDP: {
      udp::socket socket(io_);
      socket.assign(family == AF_INET6 ? udp::v6() : udp::v4(), fd);
      boost::system::error_code ec;
      socket.connect(udp::endpoint(o_.remote, port), ec);
      if (ec) throw ActiveError("cannot connect the UDP socket to " + transport::endpointName(o_.remote, port) + ": " + ec.message());
      co_return transport::makeUdpChannel(std::move(socket));
    }
    case Protocol::DCCP: {
      udp::endpoint to(o_.remote, port);  // only for its sockaddr
      if (::connect(fd, to.data(), static_cast<socklen_t>(to.size())) != 0 && errno != EINPROGRESS) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        throw ActiveError("cannot connect the DCCP socket to " + transport::endpointName(o_.remote, port) + ": " + why);
      }
      asio::posix::stream_descriptor waiter(io_, fd);
      boost::system::error_code ec;
      {
        Deadline deadline(io_.get_executor(), kConnectTimeout, [&waiter] { waiter.cancel(); });
        co_await waiter.async_wait(asio::posix::stream_descriptor::wait_write,
                                   asio::redirect_error(asio::use_awaitable, ec));
      }
      int error = 0;
      socklen_t len = sizeof(error);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
      waiter.release();
      if (ec || error != 0) {
        ::close(fd);
        throw ActiveError("cannot connect the DCCP socket to " + transport::endpointName(o_.remote, port) + ": " +
                          (error != 0 ? std::strerror(error) : "timed out"));
      }
      co_return transport::makeDccpChannel(io_, fd, transport::endpointName(o_.remote, port));
    }
    default:
      ::close(fd);
      throw ActiveError(std::string(npmp::protocolName(protocol)) + " flows are not supported yet");
  }
}

asio::awaitable<void> Active::sendOnData(transport::DataChannel& channel, const npmp::Bytes& message) {
  // The channel keeps the buffers until its send completes; `message` lives in the caller's frame,
  // so a send that outlives the wait here is given up on the channel (closed) before returning.
  Completion<boost::system::error_code> sent(io_.get_executor());
  std::vector<asio::const_buffer> buffers{asio::buffer(message), asio::const_buffer()};
  auto report = sent.reporter();
  channel.send(buffers, [report](const boost::system::error_code& ec, std::size_t, std::size_t) { report(ec); });
  const auto result = co_await sent.wait(Clock::now() + kAckTimeout);
  if (!result) {
    channel.close();
    throw ActiveError("cannot send IDENTIFY on the data connection: timed out");
  }
  if (*result) throw ActiveError("cannot send IDENTIFY on the data connection: " + result->message());
}

asio::awaitable<void> Active::setupFlow(FlowRun& run) {
  const flowspec::FlowSpec& spec = run.spec;
  const std::uint32_t flowId = *spec.flowId;
  // ADD_FLOW first: a passive that cannot serve the transport says so before anything connects.
  npmp::Bytes message;
  npmp::encode(toAddFlow(spec, measurementId_), message);
  control_->send(std::move(message));
  const auto added = co_await awaitAck(flowId, spec.streamId, "ADD_FLOW");
  if (added.status == npmp::kStatusNotAllowed) {
    throw ActiveError("the passive at " + control_->peerName() + " does not allow this host (its --allow list)");
  }
  if (added.status == npmp::kStatusUnsupported) {
    throw ActiveError("the passive at " + control_->peerName() + " cannot serve " + npmp::protocolName(spec.protocol) +
                      " flows (flow #" + std::to_string(flowId) + "): its kernel lacks " +
                      npmp::protocolName(spec.protocol) + ", or its listener could not be opened (see its log)");
  }
  if (added.status == npmp::kStatusAuthenticationRequired) {
    throw ActiveError("the passive at " + control_->peerName() +
                      " requires authentication: give the shared key with --auth-key-file");
  }
  if (added.status != npmp::kStatusOk) {
    throw ActiveError("the passive rejected flow #" + std::to_string(flowId) + " (see the passive's log for why)");
  }

  auto channel = co_await connectData(spec);

  run.flow = std::make_shared<measure::Flow>(io_, activeFlowParameters(spec, measurementId_), true);
  channel->expect(npmp::Channel::Data);
  run.flow->attach(channel);
  run.flow->onFailure([this, flowId](const std::string& reason) {
    if (stopSent_) return;
    if (flowFailure_.empty()) flowFailure_ = "Flow #" + std::to_string(flowId) + ": " + reason;
    runEvent_.notify();
  });
  run.flow->startReceiving();

  npmp::IdentifyFlow identify;
  identify.flowId = flowId;
  identify.measurementId = measurementId_;
  identify.streamId = spec.streamId;
  if (o_.vectorPattern.empty()) identify.flags |= npmp::kIdentifyNoVectors;
  if (hasBz2Suffix(o_.vectorPattern)) identify.flags |= npmp::kIdentifyCompressVectors;
  if (samplesPaths(run.flow->parameters().protocol)) identify.flags |= npmp::kIdentifyPathVectors;
  npmp::Bytes identifyMessage;
  npmp::encode(identify, identifyMessage);
  if (channel->reliable()) {
    co_await sendOnData(*channel, identifyMessage);
    const auto a = co_await awaitAck(flowId, spec.streamId, "IDENTIFY_FLOW");
    if (a.status != npmp::kStatusOk) throw ActiveError("the passive rejected the data connection of flow #" + std::to_string(flowId));
    co_return;
  }
  // Datagrams may be lost: repeat IDENTIFY with growing intervals (≈10 s in all).
  auto interval = std::chrono::milliseconds(250);
  for (int attempt = 1;; ++attempt) {
    co_await sendOnData(*channel, identifyMessage);
    if (const auto a = co_await nextAck(flowId, 0, "IDENTIFY_FLOW", interval)) {
      if (a->status != npmp::kStatusOk) throw ActiveError("the passive rejected the data of flow #" + std::to_string(flowId));
      co_return;
    }
    if (attempt == 7) {
      throw ActiveError("the passive did not acknowledge the IDENTIFY of flow #" + std::to_string(flowId) +
                        " (is UDP to port " + std::to_string(o_.port) + " blocked?)");
    }
    interval = std::min(interval * 2, std::chrono::milliseconds(2000));
  }
}

void Active::writeConfig() {
  if (o_.configFile.empty()) return;
  measure::ConfigInfo info;
  info.activeNodeName = o_.activeNodeName;
  info.passiveNodeName = o_.passiveNodeName;
  info.scalarPattern = o_.scalarPattern;
  info.vectorPattern = o_.vectorPattern;
  info.pathVectors = o_.pathInterval.count() > 0;
  info.warmup = o_.warmup;
  for (const auto& f : flows_) info.flows.push_back(f.spec);
  OutputFile out(o_.configFile, false, 9);
  measure::writeConfig(out, info);
  out.commit();
}

void Active::openOwnFiles() {
  for (auto& f : flows_) {
    if (samplesPaths(f.flow->parameters().protocol)) f.flow->samplePathsEvery(o_.pathInterval);
  }
  if (o_.vectorPattern.empty()) return;
  measurement_->setVector(measure::MeasurementVectorWriter(OutputFile(measure::resultFileName(o_.vectorPattern, "active"))));
  for (auto& f : flows_) {
    f.flow->setVector(measure::FlowVectorWriter(
        OutputFile(measure::resultFileName(o_.vectorPattern, "active", f.flow->flowId(), f.flow->streamId()))));
    if (recordsPaths(f.flow->parameters().protocol)) {
      f.flow->setPathVector(measure::PathVectorWriter(OutputFile(measure::pathVectorFileName(
          o_.vectorPattern, "active", f.flow->flowId(), f.flow->streamId()))));
    }
  }
}

// Per-path state is sampled for the scalars, the JSON document and the vectors; recorded as
// vectors with -vector.
bool Active::samplesPaths(npmp::Protocol protocol) const {
  return (!o_.vectorPattern.empty() || !o_.scalarPattern.empty() || !o_.jsonFile.empty()) &&
         o_.pathInterval.count() > 0 && measure::hasPaths(protocol);
}

bool Active::recordsPaths(npmp::Protocol protocol) const {
  return !o_.vectorPattern.empty() && samplesPaths(protocol);
}

asio::awaitable<void> Active::stopFlows() {
  co_await stopSending(io_.get_executor(), flowPointers());
}

// Userland SCTP runs in this process's threads: an association still open when the process
// exits is never shut down, and the passive keeps it (and its session) until heartbeats fail.
// So the control association ends with SHUTDOWN first (at most 2 s); the passive then ends the
// session and closes the data associations itself.
asio::awaitable<void> Active::endAssociations() {
  if (!control_->shutdown()) co_return;
  co_await pollUntil(io_.get_executor(), [this] { return control_->failed(); }, std::chrono::seconds(2));
}

std::vector<std::shared_ptr<measure::Flow>> Active::flowPointers() const {
  std::vector<std::shared_ptr<measure::Flow>> flows;
  for (const auto& f : flows_) flows.push_back(f.flow);
  return flows;
}

asio::awaitable<void> Active::download(const std::string& fileName, const char* what, std::string* keep) {
  // No file name: kept in memory only (`keep`).
  log::info(std::string("Downloading ") + what + " results" + (fileName.empty() ? std::string() : " [" + fileName + "]"));
  OutputFile out;
  if (!fileName.empty()) out = OutputFile(fileName, false, 9);  // the passive has compressed it already if asked to
  const std::string name = fileName.empty() ? std::string("the passive's ") + what + " results" : fileName;
  // A passive is a peer like any other: a file may not exceed --max-download, and one
  // trickled in more slowly than kMinDownloadRate (after a grace period) is given up.
  const auto begin = Clock::now();
  std::uint64_t bytes = 0;
  for (;;) {
    std::optional<npmp::Bytes> message;
    try {
      message = co_await control_->next(kResultsTimeout);
    } catch (const ControlError& e) {
      throw ActiveError(std::string("lost the control connection while downloading ") + name + ": " + e.what());
    }
    if (!message) throw ActiveError("the passive stopped sending " + name);
    const auto decoded = npmp::decode(*message);
    const auto* r = decoded ? std::get_if<npmp::Results>(&*decoded.message) : nullptr;
    if (r == nullptr) {
      throw ActiveError("expected RESULTS for " + name + ", got " +
                        (decoded ? npmp::typeName((*message)[0]) : decoded.error));
    }
    if (out.isOpen()) out.write(r->data.data(), r->data.size());
    if (keep != nullptr) keep->append(reinterpret_cast<const char*>(r->data.data()), r->data.size());
    bytes += r->data.size();
    if (r->eof()) break;
    if (bytes > o_.maxDownloadBytes) {
      throw ActiveError("the passive sends more than " + std::to_string(o_.maxDownloadBytes >> 20) + " MiB for " +
                        name + " (--max-download)");
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - begin).count();
    if (seconds > kDownloadGrace.count() && static_cast<double>(bytes) / seconds < kMinDownloadRate) {
      throw ActiveError("the passive sends " + name + " too slowly (" + std::to_string(bytes) + " bytes in " +
                        std::to_string(static_cast<int>(seconds)) + " s)");
    }
  }
  if (out.isOpen()) out.commit();
}

void Active::writeOwnResults(const measure::MeasurementResult& result) {
  if (!o_.scalarPattern.empty()) {
    OutputFile out(measure::resultFileName(o_.scalarPattern, "active"));
    measure::writeScalars(out, "active", result);
    out.commit();
  }
  if (auto* v = measurement_->vector()) v->file().commit();
  for (auto& f : flows_) {
    if (!f.flow->vectorError().empty()) throw ActiveError(f.flow->vectorError());
    if (auto* v = f.flow->vector()) {
      v->flush();
      v->file().commit();
    }
    if (!f.flow->pathVectorError().empty()) throw ActiveError(f.flow->pathVectorError());
    if (auto* v = f.flow->pathVector()) {
      v->flush();
      v->file().commit();
    }
  }
}

void Active::printStatistics(const measure::MeasurementResult& own) const {
  for (const auto& f : own.flows) {
    const auto& spec = std::find_if(flows_.begin(), flows_.end(), [&](const FlowRun& r) { return *r.spec.flowId == f.flowId; })->spec;
    auto line = [](const char* what, const measure::Counters& c, std::uint64_t from, std::uint64_t to) {
      const double seconds = to > from ? static_cast<double>(to - from) / 1e6 : 0.0;
      const double s = seconds > 0 ? seconds : 1.0;
      char b[512];
      std::snprintf(b, sizeof(b),
                    "  - %-12s %llu bytes (%1.3f MiB, %1.1f Kbit/s), %llu packets (%1.1f/s), %llu frames (%1.1f/s) in %1.3f s",
                    what, static_cast<unsigned long long>(c.bytes), static_cast<double>(c.bytes) / 1048576.0,
                    seconds > 0 ? 8.0 * static_cast<double>(c.bytes) / s / 1000.0 : 0.0,
                    static_cast<unsigned long long>(c.packets), seconds > 0 ? static_cast<double>(c.packets) / s : 0.0,
                    static_cast<unsigned long long>(c.frames), seconds > 0 ? static_cast<double>(c.frames) / s : 0.0, seconds);
      return std::string(b);
    };
    log::info("Flow #" + std::to_string(f.flowId) + " (" + npmp::protocolName(spec.protocol) + ", \"" + f.description + "\"):");
    log::info(line("Transmission", f.transmitted.total, f.transmitted.first, f.transmitted.last));
    log::info(line("Reception", f.received, f.firstReception, f.lastReception));
    log::info(line("Loss", f.lost, own.firstStatisticsEvent, own.lastStatisticsEvent));
  }
}

void Active::statusTick() {
  if (!measurement_ || !measurement_->running()) return;
  measure::Counters tx, rx;
  for (const auto& f : flows_) {
    tx += f.flow->transmitted().total;
    rx += f.flow->received().received();
  }
  status_->update(flows_.size(), 1, tx, rx);
  json_.tick(measurementId_, transport::nowMicros(), measurement_->startTime(), flowPointers(), status_->cpuUsage());
  statusTimer_->expires_after(std::chrono::seconds(1));
  statusTimer_->async_wait([this](const boost::system::error_code& ec) {
    if (!ec) statusTick();
  });
}

asio::awaitable<int> Active::run() {
  signals_.async_wait([this](const boost::system::error_code& ec, int n) {
    if (ec) return;
    onSignal(n);
    signals_.async_wait([this](const boost::system::error_code& ec2, int n2) {
      if (!ec2) onSignal(n2);
    });
  });
  log::info("Active mode: measurement ID $" + hex64(measurementId_));
  try {
    co_await connectControl();
    if (o_.authKey) co_await authenticate();
    for (const auto& spec : o_.flows) {
      flows_.push_back(FlowRun{spec, nullptr});
      co_await setupFlow(flows_.back());
      if (interrupted_) throw ActiveError("interrupted while setting up the flows");
    }
    writeConfig();
    measurement_ = std::make_shared<measure::Measurement>(io_, measurementId_);
    for (auto& f : flows_) measurement_->flows().push_back(f.flow);
    openOwnFiles();

    npmp::Start start;
    start.measurementId = measurementId_;
    start.warmupMs = static_cast<std::uint32_t>(o_.warmup.count());
    if (o_.vectorPattern.empty()) start.flags |= npmp::kStartNoVectors;
    if (hasBz2Suffix(o_.vectorPattern)) start.flags |= npmp::kStartCompressVectors;
    if (o_.scalarPattern.empty() && !json_.wantsPassiveScalars()) start.flags |= npmp::kStartNoScalars;
    if (hasBz2Suffix(o_.scalarPattern)) start.flags |= npmp::kStartCompressScalars;
    npmp::Bytes message;
    npmp::encode(start, message);
    control_->send(std::move(message));
    const auto started = co_await awaitAck(0, 0, "START");
    if (started.status != npmp::kStatusOk) throw ActiveError("the passive could not start the measurement");
  } catch (const std::exception& e) {
    json_.error(e.what());
    co_return json_.finish(1, measurementId_, nullptr);
  }

  // ---- run
  log::info("Starting measurement $" + hex64(measurementId_) +
            (o_.runtime ? " for " + std::to_string(*o_.runtime) + " s" : std::string(" until interrupted (Ctrl+C)")));
  measurement_->start(transport::nowMicros(), o_.warmup);
  status_ = std::make_unique<StatusLine>(o_.display, json_.humanOut());
  statusTimer_ = std::make_unique<asio::steady_timer>(io_, std::chrono::seconds(1));
  statusTimer_->async_wait([this](const boost::system::error_code& ec) {
    if (!ec) statusTick();
  });
  const auto deadline = o_.runtime ? Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*o_.runtime))
                                   : Clock::time_point::max();
  co_await runEvent_.wait(deadline);
  statusTimer_->cancel();
  status_->finish();

  // ---- stop
  int exitCode = 0;
  log::info("Shutdown");
  co_await stopFlows();
  const bool controlLost = control_->failed();
  measure::MeasurementResult own;
  bool ownWritten = false;
  bool passiveVectorLost = false;
  try {
    if (controlLost) throw ActiveError("lost the control connection to the passive: " + control_->failure());
    // The passive gets what the transports still hold for it (TCP, MPTCP, SCTP), for at most a second.
    co_await waitUntilEmpty(io_.get_executor(), flowPointers(), Held::kUnsent, std::chrono::seconds(1));
    npmp::Bytes message;
    npmp::encode(npmp::Stop{measurementId_}, message);
    stopSent_ = true;
    control_->send(std::move(message));
    const auto stopped = co_await awaitAck(0, 0, "STOP", kStopTimeout);
    for (auto& f : flows_) f.flow->finishReceiving();
    own = measurement_->stop(transport::nowMicros());
    ownWritten = true;  // attempted: a failure (full disk, ...) is reported once, not retried
    writeOwnResults(own);
    if (stopped.status != npmp::kStatusOk) throw ActiveError("the passive could not stop the measurement");
    if (!o_.vectorPattern.empty()) co_await download(measure::resultFileName(o_.vectorPattern, "passive"), "vector");
    if (!o_.scalarPattern.empty() || json_.wantsPassiveScalars()) {
      co_await download(measure::resultFileName(o_.scalarPattern, "passive"), "scalar", &json_.passiveScalars());
    }
    for (auto& f : flows_) {
      npmp::Bytes remove;
      npmp::encode(npmp::RemoveFlow{f.flow->flowId(), measurementId_, f.flow->streamId()}, remove);
      control_->send(std::move(remove));
      if (!o_.vectorPattern.empty()) {
        const auto a = co_await awaitAck(f.flow->flowId(), f.flow->streamId(), "REMOVE_FLOW");
        if (a.status == npmp::kStatusOk || a.status == npmp::kStatusOkPathVectorFollows) {
          co_await download(measure::resultFileName(o_.vectorPattern, "passive", f.flow->flowId(), f.flow->streamId()),
                            "per-flow vector");
          if (a.status == npmp::kStatusOkPathVectorFollows) {
            co_await download(
                measure::pathVectorFileName(o_.vectorPattern, "passive", f.flow->flowId(), f.flow->streamId()),
                "per-path vector");
          } else if (recordsPaths(f.flow->parameters().protocol) && !pathsUnsupportedSaid_) {
            pathsUnsupportedSaid_ = true;
            log::info("The passive records no per-path vectors (an older NetPerfMeter?)");
          }
        } else {
          json_.error("Flow #" + std::to_string(f.flow->flowId()) +
                     ": the passive could not keep its per-flow vector (a full disk or its spool limit; see the "
                     "passive's log)");
          passiveVectorLost = true;
        }
      }
    }
    co_await control_->drained(0);
    if (passiveVectorLost) exitCode = 1;
  } catch (const std::exception& e) {
    json_.error(e.what());
    exitCode = 1;
  }
  if (!ownWritten) {
    // Whatever happened to the passive, the active's own results are kept.
    try {
      for (auto& f : flows_) f.flow->finishReceiving();
      own = measurement_->stop(transport::nowMicros());
      writeOwnResults(own);
      log::info("The active's own results have been written");
    } catch (const std::exception& e) {
      json_.error(e.what());
    }
    exitCode = 1;
  }
  printStatistics(own);
  if (!flowFailure_.empty()) {
    json_.error(flowFailure_);
    exitCode = 1;
  }
  co_await endAssociations();
  for (auto& f : flows_) f.flow->close();
  for (auto& [id, a] : associations_) a->close();
  control_->close();
  if (exitCode == 0) log::info("Stopped measurement $" + hex64(measurementId_));
  co_return json_.finish(exitCode, measurementId_, own.lastStatisticsEvent != 0 ? &own : nullptr);
}

}  // namespace

int runActive(const ActiveOptions& options) {
  asio::io_context io;
  Active active(io, options);
  int exitCode = 1;
  asio::co_spawn(io, active.run(), [&](std::exception_ptr error, int code) {
    exitCode = code;
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        log::error(e.what());
      }
      exitCode = 1;
    }
    io.stop();
  });
  runLoop(io);
  return exitCode;
}

}  // namespace npm::control
