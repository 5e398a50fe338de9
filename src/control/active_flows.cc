// The active's flows: per flow ADD_FLOW, the data connection through its transport's
// connector (transport/data_transport.h: TCP, MPTCP, UDP, DCCP, a stream of an SCTP association,
// or a stream pair of a QUIC connection), IDENTIFY on it; which flows sample paths.
#include "control/active_internal.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

#include "common/log.h"
#include "control/flow_mapping.h"

namespace npm::control {

using npmp::Protocol;

transport::ActiveSide Active::activeSide() {
  transport::ActiveSide side;
  side.control = &io_;
  side.remote = options_.remote;
  side.remotes = options_.remotes;
  side.basePort = options_.port;
  side.locals = options_.localAddresses;
  side.v6only = options_.v6only;
  side.timeout = kConnectTimeout;
  side.stackUsed = [this](const char* stack) { json_.sctpStack(stack); };
  side.addresses = [this](std::uint32_t flowId, const std::vector<asio::ip::address>& local,
                          const std::vector<asio::ip::address>& peer) { json_.sctpAddresses(flowId, local, peer); };
  return side;
}

// The flow's transport, as registered (app/transports): its connector, made at its first flow.
transport::Connector& Active::connectorFor(const flowspec::FlowSpec& spec) {
  if (auto it = connectors_.find(spec.protocol); it != connectors_.end()) return *it->second;
  const transport::DataTransport* transport = transports_.find(spec.protocol);
  if (transport == nullptr) throw ActiveError(transports_.whyAbsent(spec.protocol));
  return *(connectors_[spec.protocol] = transport->connector(activeSide()));
}

void Active::closeConnectors() {
  for (auto& [protocol, connector] : connectors_) connector->close();
}

// Flows whose transport shares a connection (SCTP, QUIC) stay on the control thread with it;
// the others are spread over all threads.
asio::io_context& Active::ownerFor(const flowspec::FlowSpec& spec) {
  const transport::DataTransport* transport = transports_.find(spec.protocol);
  return transport != nullptr && !transport->flowsShareConnection() ? threads_.pick() : io_;
}

// Counted once per run, not once per flow (a run may have thousands).
std::size_t Active::groupSize(const flowspec::FlowSpec& spec) {
  if (groupSizes_.empty()) {
    for (const auto& f : options_.flows) ++groupSizes_[{f.protocol, f.association}];
  }
  return groupSizes_[{spec.protocol, spec.association}];
}

asio::awaitable<std::shared_ptr<transport::DataChannel>> Active::connectData(const flowspec::FlowSpec& spec,
                                                                             const npmp::AddFlow& wire,
                                                                             asio::io_context& owner) {
  transport::Connector& connector = connectorFor(spec);
  transport::FlowConnect flow;
  flow.wire = &wire;
  flow.group = spec.association;
  flow.groupSize = groupSize(spec);
  flow.tos = spec.tos;
  flow.v6only = spec.v6only;
  flow.owner = &owner;
  co_return co_await connector.connect(flow);
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
  // The flow's settings, for the passive and for this side's own connection: the one mapping.
  const npmp::AddFlow wire = toAddFlow(spec, measurementId_, runtimeMs, options_.seed);
  npmp::encode(wire, message);
  control_->send(std::move(message));
  const auto added = co_await awaitAck(flowId, spec.streamId, "ADD_FLOW");
  if (added.status == npmp::kStatusNotAllowed) {
    throw ActiveError("the passive at " + control_->peerName() + " does not allow this host (its --allow list)");
  }
  if (const auto busy = busyText(added.status))
    throw ActiveError("the passive at " + control_->peerName() + " " + *busy);
  if (added.status == npmp::kStatusUnsupported) {
    const transport::DataTransport* transport = transports_.find(spec.protocol);
    throw ActiveError("the passive at " + control_->peerName() + " cannot serve " + npmp::protocolName(spec.protocol) +
                      " flows (flow #" + std::to_string(flowId) +
                      "): " + (transport != nullptr ? transport->whyUnsupported() : "see its log"));
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
  auto channel = co_await connectData(spec, wire, owner);

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
