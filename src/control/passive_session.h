// One control connection of the passive: the flows it adds, the measurements it starts and
// stops, and the result files it uploads. It registers itself with the shared state while
// its coroutine runs and removes every flow and measurement of its own when it ends.
#pragma once

#include "common/asio_awaitable.h"  // first: Boost 1.74 (see there)

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>

#include "common/handle.h"
#include "common/log.h"
#include "control/control_channel.h"
#include "control/passive_state.h"
#include "measure/measurement.h"
#include "transport/async.h"

namespace npm::control {

class Session : public FlowOwner, public std::enable_shared_from_this<Session> {
public:
  Session(std::shared_ptr<PassiveState> state, std::shared_ptr<ControlChannel> control);
  // Leaves the shared state also if its coroutine never finished (io_context torn down).
  ~Session() override { state_->leave(this); }

  void start();
  void close();

  std::size_t measurementCount() const { return measurements_.size(); }
  // When it last sent a control message (or connected).
  std::chrono::steady_clock::time_point lastMessage() const { return lastMessage_; }
  // Whether it has a measurement with flows under way (PassiveState::admit never closes such a
  // session): within its runtime (ADD_FLOW says it) and kOverrunGrace; one whose active did not
  // say its runtime (the reference) for as long as it runs.
  bool working(std::chrono::steady_clock::time_point now) const;
  static constexpr std::chrono::seconds kOverrunGrace{30};
  // Closed to make room for another peer: leaves the state at once.
  void evict();

  // For the flow registry (FlowOwner).
  std::string peerName() const override { return control_->peerName(); }
  const asio::ip::address& peerAddress() const override { return control_->peerAddress(); }
  std::chrono::milliseconds pathInterval() const override { return state_->limits.pathInterval; }
  const std::shared_ptr<measure::SpoolBudget>& spool() const override { return spool_; }
  bool measuring(std::uint64_t measurementId) const override;
  // When every flow of a running measurement has lost its data connection (and none is UDP,
  // which cannot tell), the active is gone — even if its control association does not know it
  // yet (SCTP notices a dead peer only after minutes). The session ends if the measurement is
  // still running kDataGoneGrace later.
  void flowFailed(std::uint64_t measurementId) override;
  void acknowledge(std::uint32_t flowId, std::uint64_t measurementId, std::uint16_t streamId,
                   std::uint32_t status) override;
  static constexpr std::chrono::seconds kDataGoneGrace{3};

private:
  struct PassiveMeasurement {
    std::shared_ptr<measure::Measurement> measurement;
    std::uint8_t flags = 0;  // of START: which result files, compressed or not
    bool stopping = false;   // STOP received: the flows are being stopped
    std::chrono::steady_clock::time_point started{};
    std::optional<std::chrono::steady_clock::duration> runtime;  // from the ADD_FLOWs
  };

  asio::awaitable<void> run();
  void handleAddFlow(const npmp::AddFlow& m);
  asio::awaitable<void> handleStart(const npmp::Start& m);
  asio::awaitable<void> handleStop(const npmp::Stop& m);
  asio::awaitable<void> handleRemoveFlow(const npmp::RemoveFlow& m);
  asio::awaitable<void> upload(std::FILE* file);
  // A flow's per-flow vector being formatted on the workers: from STOP on, while the active
  // writes its own files, so that REMOVE_FLOW finds it ready (or waits for it).
  struct FormattedVector {
    explicit FormattedVector(const asio::any_io_executor& executor) : done(executor) {}
    UniqueFile file;  // null if formatting failed (logged)
    bool finished = false;
    Event done;
  };
  std::shared_ptr<FormattedVector> formatVector(const FlowKey& key, const std::shared_ptr<measure::Flow>& flow);
  static asio::awaitable<void> formatOnWorkers(std::shared_ptr<measure::Flow> flow, std::string who,
                                               std::shared_ptr<FormattedVector> formatted,
                                               asio::any_io_executor workers);
  bool measuring() const;
  bool allFlowsGone(std::uint64_t measurementId) const;
  void cleanup();

  std::shared_ptr<PassiveState> state_;
  std::shared_ptr<ControlChannel> control_;
  std::set<FlowKey> flows_;
  std::map<std::uint64_t, PassiveMeasurement> measurements_;
  std::map<FlowKey, std::shared_ptr<FormattedVector>> formatting_;  // started at STOP, taken at REMOVE_FLOW
  std::shared_ptr<measure::SpoolBudget> spool_;
  std::size_t onOffEvents_ = 0;  // of all its flows
  log::Repeated unknownRemovals_{"REMOVE_FLOWs for unknown flows"};
  bool flowLimitSaid_ = false;        // the --max-flows warning, once
  bool descriptorLimitSaid_ = false;  // the descriptor warning, once
  bool closing_ = false;
  std::chrono::steady_clock::time_point lastMessage_ = std::chrono::steady_clock::now();
};

}  // namespace npm::control
