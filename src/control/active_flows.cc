// The active's flows: per flow ADD_FLOW, the data connection (TCP, MPTCP, UDP, DCCP, a stream
// of an SCTP association, or a stream pair of a QUIC connection), IDENTIFY on it; which flows
// sample paths.
#include "control/active_internal.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/fileio.h"
#include "common/handle.h"
#include "common/log.h"
#include "control/flow_mapping.h"
#include "sctp/sockaddr.h"
#include "transport/sockets.h"

namespace npm::control {

using asio::ip::tcp;
using asio::ip::udp;
using npmp::Protocol;

asio::awaitable<std::shared_ptr<sctp::Association>> Active::association(const flowspec::FlowSpec& spec) {
  if (auto it = associations_.find(spec.association); it != associations_.end()) {
    json_.sctpAddresses(*spec.flowId, it->second->socket().localAddresses(), it->second->socket().peerAddresses());
    co_return it->second;
  }
  const sctp::Tuning tuning = sctpTuning(spec);
  const sctp::Stack stack = sctp::resolve(options_.sctpStack, tuning.needsUserland());
  if (options_.sctpStack == sctp::StackChoice::Auto && stack == sctp::Stack::Userland && sctp::kernelAvailable()) {
    log::info("Flow #" + std::to_string(*spec.flowId) + ": CMT-SCTP needs the userland SCTP stack; using it");
  }
  const int family = options_.remote.is_v6() ? AF_INET6 : AF_INET;
  json_.sctpStack(sctp::stackName(stack));
  auto socket = sctp::open(stack, io_, family, sctpSettings());
  sctp::SocketOptions options;
  options.streams =
      static_cast<std::uint16_t>(std::count_if(options_.flows.begin(), options_.flows.end(), [&](const auto& f) {
        return f.protocol == Protocol::SCTP && f.association == spec.association;
      }));
  options.rcvBufferSize = spec.rcvBufferSize;
  options.sndBufferSize = spec.sndBufferSize;
  options.noDelay = spec.noDelay;
  if (stack == sctp::Stack::Userland) {
    options.nrSack = tuning.nrSack;
    if (tuning.pktDrop) options.pktDrop = true;
  }
  if (family == AF_INET6) options.v6only = spec.v6only || options_.v6only;
  socket->configure(options);
  socket->tune(tuning);
  // Multi-homing: bind every local address given with -L (bindx), connect to the peer (connectx).
  // Without -L both sides offer every address of their host: an association to a passive on
  // loopback has a path to each of the passive's addresses, said below. (Binding loopback alone
  // here does not help: the passive still offers its others, and that path from 127.0.0.1 fails.)
  if (!options_.localAddresses.empty()) socket->bind(options_.localAddresses, 0);
  const bool onLoopback = std::all_of(options_.remotes.begin(), options_.remotes.end(),
                                      [](const asio::ip::address& a) { return transport::unmapped(a).is_loopback(); });
  const std::string name = transport::endpointName(options_.remote, options_.port);
  log::info("Flow #" + std::to_string(*spec.flowId) + ": connecting SCTP association (" + sctp::stackName(stack) +
            " stack" + (spec.cmt != 0 ? std::string(", CMT ") + flowspec::cmtName(spec.cmt) : std::string()) + ") to " +
            name + " from " +
            (options_.localAddresses.empty() ? std::string("(any)") : sctp::addressList(options_.localAddresses)));
  socket->connect(options_.remotes, options_.port);  // connectx: every address the peer's name has
  auto association = std::make_shared<sctp::Association>(io_, std::move(socket), name);
  co_await waitConnected(*association, kConnectTimeout);
  const auto peers = association->socket().peerAddresses();
  json_.sctpAddresses(*spec.flowId, association->socket().localAddresses(), peers);
  if (onLoopback && peers.size() > 1) {
    // The passive bound more than loopback and offered its other addresses: said, as they are
    // paths of their own in the per-path results.
    log::warning("Flow #" + std::to_string(*spec.flowId) + ": the SCTP association to " + name + " has " +
                 std::to_string(peers.size()) + " paths, to the passive's addresses " + sctp::addressList(peers) +
                 " (both sides bind every address of their host; give both -L 127.0.0.1 to keep to loopback)");
  }
  if (const auto nrSack = association->socket().nrSackNegotiated(); tuning.nrSack && nrSack && !*nrSack) {
    // Offered by this side and not by the peer (e.g. a passive on another SCTP stack).
    log::warning("Flow #" + std::to_string(*spec.flowId) +
                 ": nrsack=on was asked for, but the passive's SCTP "
                 "stack did not agree to NR-SACK; the association uses plain SACKs");
  }
  if (const auto held = association->socket().tuningInForce()) {
    log::info("Flow #" + std::to_string(*spec.flowId) + ": SCTP association up, the stack holds " +
              sctp::describe(*held));
    if (tuning.pktDrop && !held->pktDrop) {
      log::warning("Flow #" + std::to_string(*spec.flowId) +
                   ": pktdrop=on was asked for, but the passive's SCTP "
                   "stack did not agree to packet-drop reporting");
    }
  }
  association->start(nullptr, nullptr);
  associations_[spec.association] = association;
  co_return association;
}

#ifdef NPM_QUIC_BUILT
// Like an SCTP association, a QUIC connection carries the flows of one option and cannot move
// to another thread (quic/README.md): it lives on the control thread, with its flows.
asio::awaitable<std::shared_ptr<quic::Connection>> Active::quicConnection(const flowspec::FlowSpec& spec) {
  if (auto it = quicConnections_.find(spec.association); it != quicConnections_.end()) co_return it->second;
  const auto port = static_cast<std::uint16_t>(options_.port - 1);
  const udp::endpoint server(options_.remote, port);
  const std::string name = transport::endpointName(options_.remote, port);
  quic::ClientOptions client;
  client.caFile = options_.tlsCaFile;
  client.hostName = options_.tlsHostName;
  if (!options_.localAddresses.empty()) client.local = options_.localAddresses.front();  // -L, as TCP's
  client.v6only = spec.v6only || options_.v6only;  // -6 and v6only, as TCP's (IPv6 sockets only)
  client.limits.congestionControl = spec.congestionControl == "cubic" ? quic::Limits::CongestionControl::Cubic
                                                                      : quic::Limits::CongestionControl::Reno;
  log::info("Flow #" + std::to_string(*spec.flowId) + ": connecting QUIC connection (" +
            (spec.congestionControl == "cubic" ? "CUBIC" : "Reno") + ") to " + name + " from " +
            (client.local ? client.local->to_string() : std::string("(any)")) + ", certificate name " +
            (client.hostName.empty() ? std::string("(not checked)") : client.hostName) + ", CAs from " +
            (client.caFile.empty() ? std::string("the system's trust store") : client.caFile));
  auto made = quic::Connection::connect(io_, server, client);
  if (!made) throw ActiveError("Flow #" + std::to_string(*spec.flowId) + ": " + made.error());
  auto connection = *made;
  Completion<Result<void>> handshake(io_.get_executor());
  connection->onHandshake(handshake.reporter());
  // The connection's own handshake timeout reports first; this bounds the wait regardless.
  const auto result = co_await handshake.wait(Clock::now() + client.limits.handshakeTimeout + std::chrono::seconds(2));
  if (!result || !*result) {
    connection->close();
    throw ActiveError("cannot set up the QUIC connection of flow #" + std::to_string(*spec.flowId) + " to " + name +
                      ": " + (result ? result->error() : std::string("the handshake did not end in time")));
  }
  log::info("Flow #" + std::to_string(*spec.flowId) + ": QUIC connection to " + name + " up");
  quicConnections_[spec.association] = connection;
  co_return connection;
}
#endif

void Active::closeQuicConnections() {
#ifdef NPM_QUIC_BUILT
  for (auto& [id, c] : quicConnections_) c->close();
#endif
}

asio::io_context& Active::ownerFor(const flowspec::FlowSpec& spec) {
  return spec.protocol == Protocol::SCTP || spec.protocol == Protocol::QUIC ? io_ : threads_.pick();
}

asio::awaitable<std::shared_ptr<transport::DataChannel>> Active::connectData(const flowspec::FlowSpec& spec,
                                                                             asio::io_context& owner) {
  const Protocol protocol = spec.protocol;
  if (protocol == Protocol::SCTP) {
    auto a = co_await association(spec);
    co_return a->stream(spec.streamId, activeStreamPolicy(spec, options_.seed));
  }
  if (protocol == Protocol::QUIC) {
#ifdef NPM_QUIC_BUILT
    auto c = co_await quicConnection(spec);
    co_return c->channel(spec.streamId);
#else
    throw ActiveError("QUIC support is not compiled in");
#endif
  }
  const int family = options_.remote.is_v6() ? AF_INET6 : AF_INET;
  const std::uint16_t port =
      protocol == Protocol::MPTCP ? static_cast<std::uint16_t>(options_.port - 1) : options_.port;
  UniqueFd fd(transport::openSocket(protocol, family));
  transport::SocketOptions options;
  options.reuseAddress = !options_.localAddresses.empty();
  options.rcvBufferSize = spec.rcvBufferSize;
  options.sndBufferSize = spec.sndBufferSize;
  options.noDelay = spec.noDelay;
  options.congestionControl = spec.congestionControl;
  options.ccid = spec.ccid;
  options.tos = spec.tos;
  if (family == AF_INET6) options.v6only = spec.v6only || options_.v6only;
  transport::configureSocket(fd.get(), protocol, family, options);
  if (!options_.localAddresses.empty()) transport::bindSocket(fd.get(), options_.localAddresses.front(), 0);
  log::info("Flow #" + std::to_string(*spec.flowId) + ": connecting " + npmp::protocolName(protocol) + " socket to " +
            transport::endpointName(options_.remote, port) + " from " +
            (options_.localAddresses.empty() ? std::string("(any)") : options_.localAddresses.front().to_string()));
  switch (protocol) {
    case Protocol::TCP:
    case Protocol::MPTCP: {
      tcp::socket socket(io_);
      socket.assign(family == AF_INET6 ? tcp::v6() : tcp::v4(), fd.release());
      co_await connectWithin(socket, tcp::endpoint(options_.remote, port), kConnectTimeout);
      if (&owner == &io_) co_return transport::makeStreamChannel(std::move(socket));
      // Connected here, with this thread's timers; then handed to its owner's context.
      tcp::socket moved(owner);
      moved.assign(family == AF_INET6 ? tcp::v6() : tcp::v4(), socket.release());
      co_return transport::makeStreamChannel(std::move(moved));
    }
    case Protocol::UDP: {
      udp::socket socket(owner);  // connected at once: no waiting on this thread
      socket.assign(family == AF_INET6 ? udp::v6() : udp::v4(), fd.release());
      boost::system::error_code ec;
      socket.connect(udp::endpoint(options_.remote, port), ec);
      if (ec) {
        throw ActiveError("cannot connect the UDP socket to " + transport::endpointName(options_.remote, port) + ": " +
                          ec.message());
      }
      co_return transport::makeUdpChannel(std::move(socket));
    }
    case Protocol::DCCP: {
      udp::endpoint to(options_.remote, port);  // only for its sockaddr
      if (::connect(fd.get(), to.data(), static_cast<socklen_t>(to.size())) != 0 && errno != EINPROGRESS) {
        throw ActiveError("cannot connect the DCCP socket to " + transport::endpointName(options_.remote, port) + ": " +
                          std::strerror(errno));
      }
      asio::posix::stream_descriptor waiter(io_, fd.release());  // owns it while it waits
      boost::system::error_code ec;
      {
        Deadline deadline(io_.get_executor(), kConnectTimeout, [&waiter] { waiter.cancel(); });
        co_await waiter.async_wait(asio::posix::stream_descriptor::wait_write,
                                   asio::redirect_error(asio::use_awaitable, ec));
      }
      fd.reset(waiter.release());
      int error = 0;
      socklen_t len = sizeof(error);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len);
      if (ec || error != 0) {
        throw ActiveError("cannot connect the DCCP socket to " + transport::endpointName(options_.remote, port) + ": " +
                          (error != 0 ? std::strerror(error) : "timed out"));
      }
      co_return transport::makeDccpChannel(owner, fd.release(), transport::endpointName(options_.remote, port));
    }
    default: throw ActiveError(std::string(npmp::protocolName(protocol)) + " flows are not supported yet");
  }
}

asio::awaitable<void> Active::sendIdentify(transport::DataChannel& channel, const npmp::Bytes& message,
                                           asio::io_context& owner) {
  if (&owner == &io_) {
    co_await sendOnData(channel, message);
    co_return;
  }
  // On the owner's thread, which sendOnData's timers and the channel's handlers are bound to.
  co_await asio::co_spawn(owner, sendOnData(channel, message), asio::use_awaitable);
}

// Runs on the channel's thread (sendIdentify).
asio::awaitable<void> Active::sendOnData(transport::DataChannel& channel, const npmp::Bytes& message) {
  const auto executor = co_await asio::this_coro::executor;
  // The send owns what the channel keeps until it completes (a copy of the message and the
  // buffers, held by its handler): a send that outlives the wait here touches nothing of this
  // frame. One that has not completed in time is also given up on the channel (closed).
  struct Outgoing {
    npmp::Bytes message;
    std::vector<asio::const_buffer> buffers;
  };
  auto outgoing = std::make_shared<Outgoing>();
  outgoing->message = message;
  outgoing->buffers = {asio::buffer(outgoing->message), asio::const_buffer()};  // (header, payload)
  Completion<boost::system::error_code> sent(executor);
  auto report = sent.reporter();
  channel.send(outgoing->buffers, 1,
               [report, outgoing](const boost::system::error_code& ec, std::size_t, std::size_t) { report(ec); });
  const auto result = co_await sent.wait(Clock::now() + kAckTimeout);
  if (!result) {
    channel.close();
    throw ActiveError("cannot send IDENTIFY on the data connection: timed out");
  }
  if (*result) throw ActiveError("cannot send IDENTIFY on the data connection: " + result->message());
}

ActiveError Active::processWideConflict(std::uint32_t flowId) const {
  return ActiveError("the passive at " + control_->peerName() + " refused flow #" + std::to_string(flowId) +
                     ": its userland SCTP stack serves a CMT association with other buffer splitting or DAC settings, "
                     "which usrsctp has only process-wide (see the passive's log); use a passive of its own");
}

asio::awaitable<void> Active::setupFlow(FlowRun& run) {
  const flowspec::FlowSpec& spec = run.spec;
  const std::uint32_t flowId = *spec.flowId;
  // ADD_FLOW first: a passive that cannot serve the transport says so before anything connects.
  npmp::Bytes message;
  const std::uint32_t runtimeMs =
      options_.runtime ? static_cast<std::uint32_t>(std::min(*options_.runtime * 1000.0, 4294967295.0) + 0.5) : 0;
  npmp::encode(toAddFlow(spec, measurementId_, runtimeMs, options_.seed), message);
  control_->send(std::move(message));
  const auto added = co_await awaitAck(flowId, spec.streamId, "ADD_FLOW");
  if (added.status == npmp::kStatusNotAllowed) {
    throw ActiveError("the passive at " + control_->peerName() + " does not allow this host (its --allow list)");
  }
  if (const auto busy = busyText(added.status))
    throw ActiveError("the passive at " + control_->peerName() + " " + *busy);
  if (added.status == npmp::kStatusUnsupported && spec.protocol == Protocol::QUIC) {
    throw ActiveError("the passive at " + control_->peerName() + " refused QUIC flow #" + std::to_string(flowId) +
                      ": it serves QUIC only when started with -tls-key and -tls-cert (or it was built without QUIC)");
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
  if (added.status == npmp::kStatusTooManyFlows) {
    throw ActiveError("the passive at " + control_->peerName() + " refused flow #" + std::to_string(flowId) +
                      ": more flows than it grants one control connection (" + std::to_string(flows_.size() - 1) +
                      " accepted); start the passive with a higher --max-flows");
  }
  if (added.status == npmp::kStatusNoDescriptors) {
    throw ActiveError("the passive at " + control_->peerName() + " refused flow #" + std::to_string(flowId) +
                      ": it may not open more file descriptors (" + std::to_string(flows_.size() - 1) +
                      " flows accepted); raise the passive's limit of open files (ulimit -Hn, LimitNOFILE=) or run "
                      "fewer flows");
  }
  if (added.status == npmp::kStatusProcessWideConflict) throw processWideConflict(flowId);
  if (added.status != npmp::kStatusOk) {
    throw ActiveError("the passive rejected flow #" + std::to_string(flowId) + " (see the passive's log for why)");
  }

  asio::io_context& owner = ownerFor(spec);
  auto channel = co_await connectData(spec, owner);

  run.flow = std::make_shared<measure::Flow>(owner, activeFlowParameters(spec, measurementId_, options_.seed), true);
  run.flow->reportTo(io_);
  channel->expect(npmp::MessageSet::Data);
  run.flow->attach(channel);
  run.flow->onFailure([this, flowId](const transport::ChannelEnd& end) {
    if (stopSent_) return;
    if (!flowFailure_) flowFailure_ = "Flow #" + std::to_string(flowId) + ": " + end.text();
    runEvent_.notify();
  });
  if (spec.fixedSize()) {
    run.flow->onTransferDone([this, flowId] {
      log::info("Flow #" + std::to_string(flowId) + ": its fixed-size transfer has been sent");
      if (++transfersDone_ == fixedSizeFlows() && endsWithTransfers()) runEvent_.notify();
    });
  }
  measure::tellOwner(run.flow, [](measure::Flow& f) { f.startReceiving(); });

  npmp::IdentifyFlow identify;
  identify.flowId = flowId;
  identify.measurementId = measurementId_;
  identify.streamId = spec.streamId;
  if (options_.vectorPattern.empty()) identify.flags |= npmp::kIdentifyNoVectors;
  const Compression vectors = measure::resultCompression(options_.vectorPattern);
  if (vectors == Compression::kBzip2) identify.flags |= npmp::kIdentifyCompressVectors;
  if (vectors == Compression::kGzip) identify.flags |= npmp::kIdentifyGzipVectors;
  if (samplesPaths(run.flow->parameters().protocol)) identify.flags |= npmp::kIdentifyPathVectors;
  npmp::Bytes identifyMessage;
  npmp::encode(identify, identifyMessage);
  if (channel->reliable()) {
    co_await sendIdentify(*channel, identifyMessage, owner);
    const auto a = co_await awaitAck(flowId, spec.streamId, "IDENTIFY_FLOW");
    if (a.status == npmp::kStatusProcessWideConflict) throw processWideConflict(flowId);
    if (a.status != npmp::kStatusOk)
      throw ActiveError("the passive rejected the data connection of flow #" + std::to_string(flowId));
    co_return;
  }
  // Datagrams may be lost: repeat IDENTIFY with growing intervals (≈10 s in all).
  auto interval = std::chrono::milliseconds(250);
  for (int attempt = 1;; ++attempt) {
    co_await sendIdentify(*channel, identifyMessage, owner);
    if (const auto a = co_await nextAck(flowId, 0, "IDENTIFY_FLOW", interval)) {
      if (a->status != npmp::kStatusOk)
        throw ActiveError("the passive rejected the data of flow #" + std::to_string(flowId));
      co_return;
    }
    if (attempt == 7) {
      throw ActiveError("the passive did not acknowledge the IDENTIFY of flow #" + std::to_string(flowId) +
                        " (is UDP to port " + std::to_string(options_.port) + " blocked?)");
    }
    interval = std::min(interval * 2, std::chrono::milliseconds(2000));
  }
}

// Per-path state is sampled for the scalars, the JSON document and the vectors; recorded as
// vectors with -vector.
bool Active::samplesPaths(npmp::Protocol protocol) const {
  return (!options_.vectorPattern.empty() || !options_.scalarPattern.empty() || !options_.jsonFile.empty()) &&
         options_.pathInterval.count() > 0 && measure::hasPaths(protocol);
}

bool Active::recordsPaths(npmp::Protocol protocol) const {
  return !options_.vectorPattern.empty() && samplesPaths(protocol);
}

std::size_t Active::fixedSizeFlows() const {
  return static_cast<std::size_t>(
      std::count_if(options_.flows.begin(), options_.flows.end(), [](const auto& f) { return f.fixedSize(); }));
}

// As iperf3's -n: the run ends when the fixed-size transfers are sent, if nothing else runs (a
// flow without a limit, or traffic from the passive, which nothing limits).
bool Active::endsWithTransfers() const {
  return !options_.flows.empty() && std::all_of(options_.flows.begin(), options_.flows.end(),
                                                [](const auto& f) { return f.fixedSize() && !f.inbound.enabled(); });
}

std::vector<std::shared_ptr<measure::Flow>> Active::flowPointers() const {
  std::vector<std::shared_ptr<measure::Flow>> flows;
  for (const auto& f : flows_) flows.push_back(f.flow);
  return flows;
}

}  // namespace npm::control
