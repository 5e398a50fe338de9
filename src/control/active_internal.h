// The active controller inside (not a public interface; that is active.h): the Active class,
// its limits and its error. Its members live in active.cc (the run), active_control.cc (the
// control connection), active_flows.cc (the flows) and active_results.cc (the result files).
#pragma once

#include "common/asio_awaitable.h"  // first: Boost 1.74 (see there)

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <utility>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "control/active.h"
#include "control/control_channel.h"
#include "control/display.h"
#include "control/json_output.h"
#include "measure/measurement.h"
#include "sctp/association.h"
#include "transport/async.h"
#include "transport/data_channel.h"
#include "transport/data_transport.h"
#include "transport/io_threads.h"

namespace npm::control {

constexpr auto kConnectTimeout = std::chrono::seconds(10);

// What a passive's refusal of a session (kStatusBusy*) means, said to the user; none for other statuses.
std::optional<std::string> busyText(std::uint32_t status);
constexpr auto kAckTimeout = std::chrono::seconds(10);
// What the wait for REMOVE_FLOW's answer allows per message sent on the flow: the passive
// formats and compresses its per-flow vector then (bzip2: about 7 µs a row on one core of a
// small host; 25 leaves room for a loaded or sanitizer-built passive).
constexpr std::uint64_t kPassiveMicrosPerVectorRow = 25;
constexpr auto kStopTimeout = std::chrono::seconds(30);
constexpr auto kResultsTimeout = std::chrono::seconds(30);  // for each RESULTS message
constexpr auto kDownloadGrace = std::chrono::seconds(60);
constexpr double kMinDownloadRate = 8192.0;  // bytes/s over a whole file, after the grace period

class ActiveError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct FlowRun {
  flowspec::FlowSpec spec;
  std::shared_ptr<measure::Flow> flow;
};

class Active {
public:
  Active(transport::IoThreads& threads, const ActiveOptions& o, const transport::Registry& transports);

  asio::awaitable<int> run();
  void onSignal(int number);

private:
  // active_control.cc
  asio::awaitable<void> connectControl();
  asio::awaitable<void> authenticate();
  // `fallback`: TCP follows if this fails (no -x): fail early where the answer is known.
  asio::awaitable<void> connectSctpControl(Clock::duration timeout, bool fallback);
  // The next message must be the acknowledgement of `what`; nullopt on timeout.
  asio::awaitable<std::optional<npmp::Acknowledge>> nextAck(std::uint32_t flowId, std::uint16_t streamId,
                                                            const char* what, Clock::duration timeout);
  asio::awaitable<npmp::Acknowledge> awaitAck(std::uint32_t flowId, std::uint16_t streamId, const char* what,
                                              Clock::duration timeout = kAckTimeout);
  asio::awaitable<void> endAssociations();

  // active_flows.cc
  transport::ActiveSide activeSide();
  transport::Connector& connectorFor(const flowspec::FlowSpec& spec);
  // The end of the run: the connections that flows share (SCTP associations, QUIC connections).
  void closeConnectors();
  // How many flows share the flow's association or connection (its FLOWSPEC option).
  std::size_t groupSize(const flowspec::FlowSpec& spec);
  // The thread (context) that will own a flow's connection: SCTP and QUIC flows share their
  // association's or connection's, which is the control thread's; the others are spread over
  // all threads.
  asio::io_context& ownerFor(const flowspec::FlowSpec& spec);
  // Through the flow's transport, with the settings of the ADD_FLOW sent for it.
  asio::awaitable<std::shared_ptr<transport::DataChannel>> connectData(const flowspec::FlowSpec& spec,
                                                                       const npmp::AddFlow& wire,
                                                                       asio::io_context& owner);
  asio::awaitable<void> setupFlow(FlowRun& run);
  ActiveError processWideConflict(std::uint32_t flowId) const;  // the one line for kStatusProcessWideConflict
  // Sends one message on a flow's channel, on the channel's own thread.
  asio::awaitable<void> sendIdentify(transport::DataChannel& channel, const npmp::Bytes& message,
                                     asio::io_context& owner);
  asio::awaitable<void> sendOnData(transport::DataChannel& channel, const npmp::Bytes& message);
  bool samplesPaths(npmp::Protocol protocol) const;
  bool recordsPaths(npmp::Protocol protocol) const;
  std::vector<std::shared_ptr<measure::Flow>> flowPointers() const;
  std::size_t fixedSizeFlows() const;  // with transfer= or frames=
  bool endsWithTransfers() const;      // the run ends when their transfers are sent

  // active_results.cc
  // What a result file of the passive may take (--max-download, or what this run could need).
  enum class Download { Scalars, Vector, FlowVector, PathVector };
  std::uint64_t downloadLimit(Download kind, const FlowRun* flow) const;
  asio::awaitable<void> download(const std::string& fileName, const char* what, std::uint64_t limit,
                                 std::string* keep = nullptr);
  asio::awaitable<bool> downloadPassiveResults();
  asio::awaitable<void> openOwnFiles();
  void writeConfig();
  void writeOwnResults(const measure::MeasurementResult& result);
  void printStatistics(const measure::MeasurementResult& own) const;

  // active.cc: run() is setUp(), runMeasurement(), stopAndCollect()
  asio::awaitable<void> setUp();
  // --start-at: waits until the wall clock reads `when` (µs since the epoch); a signal or a
  // flow's failure ends the wait with ActiveError. `why`: for the log line.
  asio::awaitable<void> waitUntilWallClock(std::uint64_t when, const char* why);
  asio::awaitable<void> runMeasurement();
  asio::awaitable<int> stopAndCollect();
  asio::awaitable<void> statusLoop();
  asio::awaitable<void> reportStatus(bool last);

  transport::IoThreads& threads_;
  asio::io_context& io_;  // the control thread's (threads_.main())
  const ActiveOptions& options_;
  std::uint64_t measurementId_;
  std::shared_ptr<ControlChannel> control_;
  std::vector<FlowRun> flows_;
  const transport::Registry& transports_;
  std::map<npmp::Protocol, std::unique_ptr<transport::Connector>> connectors_;  // made at a transport's first flow
  std::map<std::pair<npmp::Protocol, std::uint32_t>, std::size_t> groupSizes_;  // flows per FLOWSPEC option
  std::shared_ptr<measure::Measurement> measurement_;
  Event runEvent_;
  asio::signal_set signals_;
  int signalCount_ = 0;
  bool interrupted_ = false;
  std::optional<std::string> flowFailure_;  // the first flow's failure before STOP
  // Once STOP is on its way, a passive may close data connections (the reference does when it
  // stops the measurement): their end is no failure any more.
  bool stopSent_ = false;
  bool pathsUnsupportedSaid_ = false;
  std::size_t transfersDone_ = 0;  // fixed-size flows whose transfer is sent
  std::unique_ptr<StatusLine> status_;
  std::unique_ptr<asio::steady_timer> statusTimer_;
  bool statusRunning_ = false;
  std::uint64_t lastStatus_ = 0;                          // when the last status (and stream) line was taken
  static constexpr std::uint64_t kLastStatusGap = 50000;  // microseconds
  JsonOutput json_;
};

}  // namespace npm::control
