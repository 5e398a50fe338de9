#include "control/passive_session.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cinttypes>

#include "common/clock.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/text.h"
#include "control/passive_admission.h"
#include "control/stop_flows.h"
#include "transport/async.h"
#include "transport/data_channel.h"
#include "transport/io_threads.h"
#include "transport/sockets.h"

namespace npm::control {

namespace {

constexpr std::size_t kUploadWindow = 256 * 1024;  // RESULTS bytes queued before waiting for the peer

}  // namespace

Session::Session(std::shared_ptr<PassiveState> state, std::shared_ptr<ControlChannel> control)
    : state_(std::move(state)),
      control_(std::move(control)),
      spool_(std::make_shared<measure::SpoolBudget>(state_->limits.spoolPerSession, "per session (--max-spool)",
                                                    state_->spool)) {}

void Session::start() {
  state_->join(this);
  control_->limitQueue(state_->limits.controlQueueBytes);
  control_->start();
  asio::co_spawn(
      state_->io, [self = shared_from_this()]() { return self->run(); }, asio::detached);
}

void Session::close() {
  closing_ = true;
  control_->close();
}

void Session::evict() {
  close();
  state_->leave(this);
}

bool Session::working(std::chrono::steady_clock::time_point now) const {
  if (closing_) return false;
  for (const auto& [id, m] : measurements_) {
    if (!m.measurement || !m.measurement->running() || m.measurement->flows().empty()) continue;
    if (!m.runtime || now < m.started + *m.runtime + kOverrunGrace) return true;
  }
  return false;
}

void Session::acknowledge(std::uint32_t flowId, std::uint64_t measurementId, std::uint16_t streamId,
                          std::uint32_t status) {
  sendAcknowledge(*control_, flowId, measurementId, streamId, status);
}

void Session::flowFailed(std::uint64_t measurementId) {
  if (!allFlowsGone(measurementId)) return;
  // An active may end its data connections just before or after it sends STOP (they travel on
  // other connections, in any order): it gets a grace period to stop the measurement and collect
  // the results before the session is given up.
  auto timer = std::make_shared<asio::steady_timer>(state_->io, kDataGoneGrace);
  timer->async_wait([weak = weak_from_this(), timer, measurementId](const boost::system::error_code&) {
    auto self = weak.lock();
    if (!self || self->closing_ || !self->allFlowsGone(measurementId)) return;
    log::warning("Closing control connection from " + self->control_->peerName() +
                 ": every data connection of measurement $" + hex64(measurementId) + " is gone");
    self->close();
  });
}

bool Session::measuring(std::uint64_t measurementId) const {
  auto it = measurements_.find(measurementId);
  return it != measurements_.end() && it->second.measurement && it->second.measurement->running() &&
         !it->second.stopping;
}

bool Session::allFlowsGone(std::uint64_t measurementId) const {
  auto it = measurements_.find(measurementId);
  // After STOP the active is collecting the results: it has not gone.
  if (it == measurements_.end() || it->second.stopping || !it->second.measurement->running()) return false;
  const auto& flows = it->second.measurement->flows();
  if (flows.empty()) return false;
  for (const auto& f : flows) {
    const transport::DataTransport* transport = state_->flows->transports().find(f->parameters().protocol);
    if (!f->failed() || (transport != nullptr && transport->connectionless())) return false;
  }
  return true;
}

// A measurement without flows is no reason to stay: its session is closed when quiet as any other.
bool Session::measuring() const {
  for (const auto& [id, m] : measurements_) {
    if (m.measurement->running() && !m.measurement->flows().empty()) return true;
  }
  return false;
}

asio::awaitable<void> Session::run() {
  auto self = shared_from_this();
  log::debug("Control connection from " + control_->peerName());
  try {
    if (!transport::allowed(state_->allow, control_->peerAddress())) {
      state_->refusedControl.say("Refused control connection from " + control_->peerName() +
                                 ": not in the --allow list");
      co_await refuseControl(*control_, state_->limits.firstMessageTimeout, npmp::kStatusNotAllowed);
      cleanup();
      co_return;
    }
    if (state_->authKey &&
        !co_await authenticateControl(*control_, *state_->authKey, state_->limits.firstMessageTimeout)) {
      cleanup();
      co_return;
    }
    for (bool first = true;; first = false) {
      // Quiet control connections are closed soon: seconds before the first message, and
      // when no measurement runs; a running measurement may be silent as long as it lasts.
      const auto timeout = first ? state_->limits.firstMessageTimeout : state_->limits.idleTimeout;
      auto message = co_await control_->next(timeout);
      if (!message) {
        if (measuring()) continue;
        state_->quiet.say("Closing control connection from " + control_->peerName() + ": no message for " +
                          std::to_string(timeout.count()) + " s" + (first ? " after connecting" : ""));
        break;
      }
      lastMessage_ = std::chrono::steady_clock::now();
      const auto decoded = npmp::decode(*message);
      if (!decoded) {
        state_->refusedRequests.say("Closing control connection from " + control_->peerName() + ": " + decoded.error());
        break;
      }
      const npmp::Message& m = *decoded;
      if (const auto* add = std::get_if<npmp::AddFlow>(&m)) {
        handleAddFlow(*add);
      } else if (const auto* start = std::get_if<npmp::Start>(&m)) {
        co_await handleStart(*start);
      } else if (const auto* stop = std::get_if<npmp::Stop>(&m)) {
        co_await handleStop(*stop);
      } else if (const auto* remove = std::get_if<npmp::RemoveFlow>(&m)) {
        co_await handleRemoveFlow(*remove);
      } else if (std::holds_alternative<npmp::AuthHello>(m) && !state_->authKey) {
        state_->refusedRequests.say("Control connection from " + control_->peerName() +
                                    " asks to authenticate, but this passive has no --auth-key-file");
        acknowledge(0, 0, 0, npmp::kStatusError);
      } else {
        state_->refusedRequests.say("Closing control connection from " + control_->peerName() + ": unexpected " +
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
  std::uint32_t status = npmp::kStatusError;
  if (flows_.size() >= state_->limits.flowsPerSession) {
    if (!flowLimitSaid_) {  // once per session: an active may try thousands more
      flowLimitSaid_ = true;
      log::warning("ADD_FLOW rejected from " + control_->peerName() + ": more than " +
                   std::to_string(state_->limits.flowsPerSession) + " flows (--max-flows)");
    }
    status = npmp::kStatusTooManyFlows;
  } else if (state_->limits.descriptors != 0 &&
             state_->flows->size() + PassiveLimits::kReservedDescriptors >= state_->limits.descriptors) {
    if (!descriptorLimitSaid_) {
      descriptorLimitSaid_ = true;
      log::warning("ADD_FLOW rejected from " + control_->peerName() + ": " + std::to_string(state_->flows->size()) +
                   " flows use the file descriptors this process may open (" +
                   std::to_string(state_->limits.descriptors) + "; raise its hard limit: ulimit -Hn, LimitNOFILE=)");
    }
    status = npmp::kStatusNoDescriptors;
  } else if (onOffEvents_ + m.onOffEvents.size() > state_->limits.onOffEventsPerSession) {
    state_->refusedRequests.say("ADD_FLOW rejected from " + control_->peerName() + ": more than " +
                                std::to_string(state_->limits.onOffEventsPerSession) + " on/off events in one session");
  } else {
    status = state_->flows->add(shared_from_this(), m);
  }
  if (status == npmp::kStatusOk) {
    flows_.insert(FlowKey{m.measurementId, m.flowId, m.streamId});
    onOffEvents_ += m.onOffEvents.size();
  }
  acknowledge(m.flowId, m.measurementId, m.streamId, status);
}

asio::awaitable<void> Session::handleStart(const npmp::Start& m) {
  if (!measurements_.count(m.measurementId) && measurements_.size() >= state_->limits.measurementsPerSession) {
    state_->refusedRequests.say("START rejected from " + control_->peerName() + ": more than " +
                                std::to_string(state_->limits.measurementsPerSession) + " measurements in one session");
    acknowledge(0, m.measurementId, 0, npmp::kStatusError);
    co_return;
  }
  auto& pm = measurements_[m.measurementId];
  if (pm.measurement && pm.measurement->running()) {
    state_->refusedRequests.say("START for measurement already running, from " + control_->peerName());
    acknowledge(0, m.measurementId, 0, npmp::kStatusError);
    co_return;
  }
  pm.measurement = std::make_shared<measure::Measurement>(state_->io, m.measurementId);
  pm.flags = m.flags;
  pm.stopping = false;
  std::uint32_t status = npmp::kStatusOk;
  try {
    if (!(m.flags & npmp::kStartNoVectors)) {
      pm.measurement->setVector(measure::MeasurementVectorWriter(measure::anonymousResultFile(
          measure::compressionAsked(m.flags, npmp::kStartGzipVectors, npmp::kStartCompressVectors))));
    }
  } catch (const FileError& e) {
    log::error(std::string("Measurement vector: ") + e.what());
    status = npmp::kStatusError;
  }
  // The active's runtime (in its ADD_FLOWs): the flows send nothing due after it, on this
  // side's own timeline, whenever STOP comes. Without it (a reference active), until STOP.
  std::uint32_t runtimeMs = 0;
  for (const FlowKey& key : flows_) {
    if (key.measurementId != m.measurementId) continue;
    auto entry = state_->flows->find(key);
    if (entry && entry->identified) {
      pm.measurement->flows().push_back(entry->flow);
      runtimeMs = std::max(runtimeMs, entry->request.runtimeMs);
    }
  }
  std::optional<std::chrono::steady_clock::duration> runtime;
  if (runtimeMs > 0) runtime = std::chrono::milliseconds(runtimeMs);
  // Only this session's own handlers change its measurements, one after the other: `pm` stays.
  pm.started = std::chrono::steady_clock::now();
  pm.runtime = runtime;
  co_await pm.measurement->start(nowMicros(), std::chrono::milliseconds(m.warmupMs), runtime);
  log::info("Starting measurement $" + hex64(m.measurementId) + " with " +
            std::to_string(pm.measurement->flows().size()) + " flow(s) for " + control_->peerName() +
            (m.warmupMs > 0 ? ", warm-up " + std::to_string(m.warmupMs) + " ms" : std::string()));
  acknowledge(0, m.measurementId, 0, status);
}

asio::awaitable<void> Session::handleStop(const npmp::Stop& m) {
  auto it = measurements_.find(m.measurementId);
  if (it == measurements_.end() || !it->second.measurement->running()) {
    acknowledge(0, m.measurementId, 0, npmp::kStatusError);
    co_return;
  }
  // Owned here: the measurement outlives this frame's waits whatever happens to the session.
  const std::shared_ptr<measure::Measurement> measurement = it->second.measurement;
  const std::uint8_t flags = it->second.flags;
  it->second.stopping = true;
  auto& flows = measurement->flows();
  co_await stopSending(state_->io.get_executor(), flows);
  // What this side sent leaves its send queues before the ACK, as the active lets its own
  // leave before STOP: the active reads until the ACK and counts what has arrived then.
  if (const long held =
          co_await waitUntilEmpty(state_->io.get_executor(), flows, Held::kUnsent, std::chrono::seconds(1))) {
    log::info("STOP: " + std::to_string(held) + " bytes (SCTP: chunks) still on their way to the active after 1 s;" +
              " they count as sent, not as received");
  }
  // What has arrived but not been read yet counts: a slow passive (a busy core, a sanitizer
  // build) may hold megabytes in its receive queues when STOP comes.
  if (const long held =
          co_await waitUntilEmpty(state_->io.get_executor(), flows, Held::kUnread, std::chrono::seconds(2))) {
    log::info("STOP: " + std::to_string(held) + " bytes arrived but were not read within 2 s; they are not counted");
  }
  co_await measure::onOwners(flows, [](measure::Flow& f, std::size_t) { f.finishReceiving(); });
  const measure::MeasurementResult result = co_await measurement->stop(nowMicros());
  // The flows record nothing more: their per-flow vectors are formatted from now on, while the
  // active writes its own, and each REMOVE_FLOW uploads one that is ready.
  for (const auto& flow : flows) {
    const FlowKey key{m.measurementId, flow->flowId(), flow->streamId()};
    if (flow->vector() != nullptr && flows_.count(key) != 0 && formatting_.count(key) == 0) {
      formatting_[key] = formatVector(key, flow);
    }
  }

  // Owned here: closed (and so deleted) on every way out, also when the peer leaves during
  // an upload and the upload throws.
  UniqueFile vectorFile, scalarFile;
  std::uint32_t status = npmp::kStatusOk;
  try {
    if (auto* v = measurement->vector()) vectorFile = v->file().takeForReading();
    if (!(flags & npmp::kStartNoScalars)) {
      OutputFile scalars = measure::anonymousResultFile(
          measure::compressionAsked(flags, npmp::kStartGzipScalars, npmp::kStartCompressScalars));
      measure::writeScalars(scalars, "passive", result);
      scalarFile = scalars.takeForReading();
    }
  } catch (const FileError& e) {
    log::error(std::string("Results of the measurement: ") + e.what());
    status = npmp::kStatusError;
  }
  acknowledge(0, m.measurementId, 0, status);
  measurements_.erase(m.measurementId);
  if (status == npmp::kStatusOk) {
    if (vectorFile) co_await upload(vectorFile.get());
    if (scalarFile) co_await upload(scalarFile.get());
  }
}

asio::awaitable<void> Session::handleRemoveFlow(const npmp::RemoveFlow& m) {
  const FlowKey key{m.measurementId, m.flowId, m.streamId};
  auto entry = flows_.count(key) ? state_->flows->find(key) : nullptr;
  if (!entry) {
    unknownRemovals_.say("REMOVE_FLOW for unknown " + keyName(key) + " from " + control_->peerName() + " (" +
                         std::to_string(unknownRemovals_.count() + 1) + " so far)");
    acknowledge(m.flowId, m.measurementId, m.streamId, npmp::kStatusError);
    co_return;
  }
  auto flow = entry->flow;
  bool sending = false;
  co_await measure::onOwner(flow, [&sending](measure::Flow& f) { sending = f.sending(); });
  if (sending) {
    const std::vector<std::shared_ptr<measure::Flow>> one{flow};
    co_await stopSending(state_->io.get_executor(), one);
  }
  co_await measure::onOwner(flow, [](measure::Flow& f) { f.finishReceiving(); });
  UniqueFile vectorFile;
  if (flow->vector() != nullptr) {
    // Formatting began at STOP; without a STOP (a flow removed from a running measurement,
    // or a measurement never started), it begins now.
    std::shared_ptr<FormattedVector> formatted;
    if (auto it = formatting_.find(key); it != formatting_.end()) {
      formatted = it->second;
      formatting_.erase(it);
    } else {
      formatted = formatVector(key, flow);
    }
    while (!formatted->finished) co_await formatted->done.wait(Clock::time_point::max());
    vectorFile = std::move(formatted->file);
  }
  UniqueFile pathFile;  // only with the flow's vector: it follows it
  if (auto* v = flow->pathVector(); v != nullptr && vectorFile) {
    try {
      v->flush();
      pathFile = v->file().takeForReading();
    } catch (const FileError& e) {
      log::error(std::string("Per-path vector: ") + e.what());
    }
  }
  flows_.erase(key);
  state_->flows->remove(key);
  // As the reference: without a vector file, REMOVE_FLOW is not answered; a vector that had
  // to be given up (full disk, spool limit) is answered with ERROR, so that the active knows.
  if (flow->vector() == nullptr && flow->vectorError()) {
    acknowledge(m.flowId, m.measurementId, m.streamId, npmp::kStatusError);
  } else if (flow->vector() != nullptr) {
    acknowledge(m.flowId, m.measurementId, m.streamId,
                !vectorFile ? npmp::kStatusError
                : pathFile  ? npmp::kStatusOkPathVectorFollows
                            : npmp::kStatusOk);
    if (vectorFile) co_await upload(vectorFile.get());
    if (pathFile) co_await upload(pathFile.get());
  }
  // A removed flow's own connection (TCP, MPTCP) has nothing more to carry; as the reference
  // does, it is closed now rather than at the end of the session. (UDP shares the passive's
  // socket, an SCTP stream its association.)
  if (auto* channel = flow->channel(); channel != nullptr && channel->isByteStream()) {
    measure::tellOwner(flow, [](measure::Flow& f) { f.close(); });
  }
}

std::shared_ptr<Session::FormattedVector> Session::formatVector(const FlowKey& key,
                                                                const std::shared_ptr<measure::Flow>& flow) {
  auto formatted = std::make_shared<FormattedVector>(state_->io.get_executor());
  asio::co_spawn(state_->io, formatOnWorkers(flow, keyName(key), formatted, state_->workers->get_executor()),
                 asio::detached);
  return formatted;
}

// Formatting the recorded rows takes seconds after a long saturated run: on a worker, so that
// the other sessions' measurements go on undisturbed. The frame holds the flow and the result:
// a session that ends meanwhile drops only its wait.
asio::awaitable<void> Session::formatOnWorkers(std::shared_ptr<measure::Flow> flow, std::string who,
                                               std::shared_ptr<FormattedVector> formatted,
                                               asio::any_io_executor workers) {
  auto file = std::make_shared<UniqueFile>();  // the worker's, not this frame's
  // A named function, not a lambda temporary in the co_await expression (GCC 12 destroys such
  // temporaries twice).
  std::function<void()> work = [flow, file, who] {
    measure::formatFlowVector(*flow->vector(), who);
    *file = flow->vector()->file().takeForReading();
  };
  try {
    co_await transport::runThere(workers, std::move(work));
    formatted->file = std::move(*file);
  } catch (const std::exception& e) {
    log::error(std::string("Per-flow vector: ") + e.what());
  }
  formatted->finished = true;
  formatted->done.notify();
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
      for (const auto& flow : pm.measurement->flows()) measure::tellOwner(flow, [](measure::Flow& f) { f.close(); });
      pm.measurement->abandon();
    }
  }
  measurements_.clear();
  for (const FlowKey& key : flows_) state_->flows->remove(key);
  flows_.clear();
  control_->close();
  state_->leave(this);
  state_->releaseMemory();
}

}  // namespace npm::control
