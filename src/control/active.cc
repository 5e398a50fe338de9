// The active's run: set-up, the measurement until the runtime or a signal, and the stop sequence
// (STOP, results, REMOVE_FLOW, statistics); signals, the status line, and runActive().
#include "control/active_internal.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>

#include "common/clock.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/text.h"
#include "control/stop_flows.h"
#include "transport/sockets.h"

namespace npm::control {

namespace {

std::uint64_t randomMeasurementId() {
  std::random_device device;
  return (std::uint64_t{device()} << 32) | device();
}

constexpr std::uint64_t kReservedDescriptors = 64;

}  // namespace

namespace {

bool sharesConnection(const transport::Registry& transports, npmp::Protocol protocol) {
  const transport::DataTransport* transport = transports.find(protocol);
  return transport != nullptr && transport->flowsShareConnection();
}

}  // namespace

unsigned networkThreads(const ActiveOptions& o, const transport::Registry& transports) {
  const unsigned wanted = o.threads != 0 ? o.threads : transport::defaultThreads();
  // Flows that share a connection stay with it on the control thread; a thread per other flow
  // at most.
  const auto spread = std::count_if(o.flows.begin(), o.flows.end(),
                                    [&](const auto& f) { return !sharesConnection(transports, f.protocol); });
  return std::max(1u, std::min(wanted, static_cast<unsigned>(spread)));
}

std::uint64_t descriptorsNeeded(const ActiveOptions& o, const transport::Registry& transports) {
  std::uint64_t n = kReservedDescriptors;
  std::set<std::pair<npmp::Protocol, std::uint32_t>> shared;  // (protocol, FLOWSPEC option)
  const bool vectors = !o.vectorPattern.empty();
  for (const auto& f : o.flows) {
    if (!sharesConnection(transports, f.protocol) || shared.insert({f.protocol, f.association}).second) ++n;
    if (vectors) n += 1 + (o.pathInterval.count() > 0 && measure::hasPaths(f.protocol) ? 1 : 0);
  }
  return n;
}

Result<void> checkDescriptors(const ActiveOptions& o, const transport::Registry& transports, std::uint64_t soft,
                              std::uint64_t hard) {
  const std::uint64_t needed = descriptorsNeeded(o, transports);
  if (soft == 0 || needed <= soft) return {};
  return Failure{std::to_string(o.flows.size()) + " flows need up to " + std::to_string(needed) +
                 " file descriptors, but this process may open only " + std::to_string(soft) + " (hard limit " +
                 std::to_string(hard) + "): raise it (e.g. ulimit -Hn " + std::to_string(needed) +
                 " as root, or LimitNOFILE= / nofile in limits.conf) or run fewer flows"};
}

Active::Active(transport::IoThreads& threads, const ActiveOptions& o, const transport::Registry& transports)
    : threads_(threads),
      io_(threads.main()),
      options_(o),
      measurementId_(randomMeasurementId()),
      transports_(transports),
      runEvent_(io_.get_executor()),
      signals_(io_, SIGINT, SIGTERM),
      json_(o, transports) {}

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

// Once a second while the measurement runs: the status line and the JSON stream.
asio::awaitable<void> Active::statusLoop() {
  asio::steady_timer& timer = *statusTimer_;
  for (;;) {
    timer.expires_after(std::chrono::seconds(1));
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !statusRunning_ || !measurement_->running()) co_return;
    co_await reportStatus(false);
  }
}

// The status line and the JSON stream's interval line, from what the flows report on their own
// threads. `last`: the line at the end of the runtime (or of the run, when it is interrupted),
// left out when the loop's line is less than kLastStatusGap old, which covers the end then.
asio::awaitable<void> Active::reportStatus(bool last) {
  const auto flows = flowPointers();
  measure::Counters tx, rx;
  std::vector<measure::JsonFlowSample> samples(flows.size());
  co_await measure::onOwners(flows, [&tx, &rx, &samples](measure::Flow& f, std::size_t i) {
    tx += f.transmitted().total;
    rx += f.received().received();
    samples[i] = JsonOutput::sample(f);
  });
  if (!last && !statusRunning_) co_return;  // the measurement ended meanwhile: its last line is written
  const std::uint64_t now = nowMicros();
  if (last && lastStatus_ != 0 && now < lastStatus_ + kLastStatusGap) co_return;
  lastStatus_ = now;
  status_->update(flows_.size(), 1, tx, rx);
  json_.tick(measurementId_, now, measurement_->startTime(), samples, status_->cpuUsage());
}

asio::awaitable<int> Active::run() {
  signals_.async_wait([this](const boost::system::error_code& ec, int n) {
    if (ec) return;
    onSignal(n);
    signals_.async_wait([this](const boost::system::error_code& ec2, int n2) {
      if (!ec2) onSignal(n2);
    });
  });
  log::info("Active mode: measurement ID $" + hex64(measurementId_) +
            (options_.seed != 0 ? ", seed " + std::to_string(options_.seed) : std::string()));
  try {
    const auto limit = transport::raiseDescriptorLimit();
    if (const auto enough = checkDescriptors(options_, transports_, limit.soft, limit.hard); !enough) {
      throw ActiveError(enough.error());
    }
    if (options_.startAt) {
      const std::uint64_t lead = std::chrono::duration_cast<std::chrono::microseconds>(kStartAtLead).count();
      if (*options_.startAt > nowMicros() + lead) co_await waitUntilWallClock(*options_.startAt - lead, "to set up");
    }
    co_await setUp();
  } catch (const std::exception& e) {
    json_.error(e.what());
    co_return json_.finish(1, measurementId_, nullptr);
  }
  co_await runMeasurement();
  co_return co_await stopAndCollect();
}

// Control connection, authentication, the flows one by one, the config file, START.
asio::awaitable<void> Active::setUp() {
  co_await connectControl();
  if (options_.authKey) co_await authenticate();
  for (const auto& spec : options_.flows) {
    flows_.push_back(FlowRun{spec, nullptr});
    co_await setupFlow(flows_.back());
    if (interrupted_) throw ActiveError("interrupted while setting up the flows");
  }
  writeConfig();
  measurement_ = std::make_shared<measure::Measurement>(io_, measurementId_);
  for (auto& f : flows_) measurement_->flows().push_back(f.flow);
  co_await openOwnFiles();

  npmp::Start start;
  start.measurementId = measurementId_;
  start.warmupMs = static_cast<std::uint32_t>(options_.warmup.count());
  if (options_.vectorPattern.empty()) start.flags |= npmp::kStartNoVectors;
  const Compression vectors = measure::resultCompression(options_.vectorPattern);
  const Compression scalars = measure::resultCompression(options_.scalarPattern);
  if (vectors == Compression::kBzip2) start.flags |= npmp::kStartCompressVectors;
  if (vectors == Compression::kGzip) start.flags |= npmp::kStartGzipVectors;
  if (options_.scalarPattern.empty() && !json_.wantsPassiveScalars()) start.flags |= npmp::kStartNoScalars;
  if (scalars == Compression::kBzip2) start.flags |= npmp::kStartCompressScalars;
  if (scalars == Compression::kGzip) start.flags |= npmp::kStartGzipScalars;
  npmp::Bytes message;
  npmp::encode(start, message);
  if (options_.startAt) {
    if (const std::uint64_t now = nowMicros(); now > *options_.startAt) {
      throw ActiveError("--start-at: the start time passed " + std::to_string((now - *options_.startAt) / 1000) +
                        " ms ago while the flows were set up");
    }
    co_await waitUntilWallClock(*options_.startAt, "to send START");
  }
  control_->send(std::move(message));
  const auto started = co_await awaitAck(0, 0, "START");
  if (started.status != npmp::kStatusOk) throw ActiveError("the passive could not start the measurement");
}

asio::awaitable<void> Active::waitUntilWallClock(std::uint64_t when, const char* why) {
  char text[96];
  std::snprintf(text, sizeof(text), "Waiting %.3f s %s (--start-at)",
                static_cast<double>(when - std::min(when, nowMicros())) / 1e6, why);
  log::info(text);
  // The steady clock runs the wait; the wall clock decides when it is over (a daemon may slew
  // it meanwhile): wait again for what is left, until nothing is.
  for (std::uint64_t now = nowMicros(); now < when; now = nowMicros()) {
    co_await runEvent_.wait(Clock::now() + std::chrono::microseconds(when - now));
    if (interrupted_) throw ActiveError("interrupted while waiting for the start time");
    if (flowFailure_) throw ActiveError(*flowFailure_);
  }
}

// Runs the measurement until the runtime has passed, a signal comes, or something fails.
asio::awaitable<void> Active::runMeasurement() {
  const bool transfers = endsWithTransfers();
  log::info("Starting measurement $" + hex64(measurementId_) +
            (transfers ? std::string(" until the fixed-size transfers are sent") +
                             (options_.runtime ? ", at most " + std::to_string(*options_.runtime) + " s" : "")
             : options_.runtime ? " for " + std::to_string(*options_.runtime) + " s"
                                : std::string(" until interrupted (Ctrl+C)")));
  // The runtime counts from the flows' common start, as their frames do: a rate-driven flow
  // sends the frames due from the start to the end of the runtime, however long starting
  // thousands of flows takes.
  std::optional<Clock::duration> runtime;
  if (options_.runtime) {
    runtime = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*options_.runtime));
  }
  const bool intervals = options_.interval.count() > 0 && log::enabled(log::Info);  // -quiet: none
  if (intervals) {
    std::vector<IntervalLines::Flow> shown;
    for (const auto& f : flows_) shown.push_back({*f.spec.flowId, f.spec.outbound.enabled(), f.spec.inbound.enabled()});
    measurement_->reportIntervals(options_.interval,
                                  [lines = std::make_shared<IntervalLines>(std::move(shown)), out = json_.humanOut(),
                                   measurement = std::weak_ptr<measure::Measurement>(measurement_)](
                                      std::uint64_t now, const std::vector<measure::FlowSnapshot>& flows, bool) {
                                    const auto m = measurement.lock();
                                    const std::string text = lines->format(now, m ? m->startTime() : now, flows);
                                    std::fwrite(text.data(), 1, text.size(), out);
                                    std::fflush(out);
                                  });
  }
  co_await measurement_->start(nowMicros(), options_.warmup, runtime);
  json_.start(measurementId_, measurement_->startTime());
  // The per-interval lines replace the status line, which would rewrite them.
  status_ = std::make_unique<StatusLine>(options_.display && !intervals, json_.humanOut());
  statusTimer_ = std::make_unique<asio::steady_timer>(io_);
  statusRunning_ = true;
  asio::co_spawn(io_, statusLoop(), asio::detached);
  const auto deadline = runtime ? measurement_->steadyStart() + *runtime : Clock::time_point::max();
  co_await runEvent_.wait(deadline);
  if (const std::size_t fixed = fixedSizeFlows(); transfersDone_ < fixed && !interrupted_ && !flowFailure_) {
    log::warning(std::to_string(fixed - transfersDone_) + " of " + std::to_string(fixed) +
                 " fixed-size transfers (transfer=, frames=) were not sent completely within the runtime");
  }
  statusRunning_ = false;
  statusTimer_->cancel();
  co_await reportStatus(true);  // the last interval, up to the end
  status_->finish();
}

// Stops the flows and the measurement on both sides, writes or downloads every result, ends
// the connections; returns the exit code.
asio::awaitable<int> Active::stopAndCollect() {
  int exitCode = 0;
  log::info("Shutdown");
  const auto flows = flowPointers();
  co_await stopSending(io_.get_executor(), flows);  // as the passive does at STOP
  const bool controlLost = control_->failed();
  measure::MeasurementResult own;
  bool ownWritten = false;
  try {
    if (controlLost) throw ActiveError("lost the control connection to the passive: " + control_->failure());
    // The passive gets what the transports still hold for it (TCP, MPTCP, SCTP), for at most a second.
    if (const long held = co_await waitUntilEmpty(io_.get_executor(), flows, Held::kUnsent, std::chrono::seconds(1))) {
      log::info("Stop: " + std::to_string(held) + " bytes (SCTP: chunks) still on their way to the passive after 1 s;" +
                " they count as sent, not as received");
    }
    npmp::Bytes message;
    npmp::encode(npmp::Stop{measurementId_}, message);
    stopSent_ = true;
    control_->send(std::move(message));
    const auto stopped = co_await awaitAck(0, 0, "STOP", kStopTimeout);
    // The passive's last messages have left its send queues by its ACK; what has arrived but
    // not been read yet (on the flows' own threads) counts, as at the passive.
    if (const long held = co_await waitUntilEmpty(io_.get_executor(), flows, Held::kUnread, std::chrono::seconds(2))) {
      log::info("Stop: " + std::to_string(held) + " bytes arrived but were not read within 2 s; they are not counted");
    }
    co_await measure::onOwners(flows, [](measure::Flow& f, std::size_t) { f.finishReceiving(); });
    own = co_await measurement_->stop(nowMicros());
    ownWritten = true;  // attempted: a failure (full disk, ...) is reported once, not retried
    writeOwnResults(own);
    if (stopped.status != npmp::kStatusOk) throw ActiveError("the passive could not stop the measurement");
    const bool passiveVectorLost = co_await downloadPassiveResults();
    co_await control_->drained(0);
    if (passiveVectorLost) exitCode = 1;
  } catch (const std::exception& e) {
    json_.error(e.what());
    exitCode = 1;
  }
  if (!ownWritten) {
    // Whatever happened to the passive, the active's own results are kept.
    try {
      co_await measure::onOwners(flows, [](measure::Flow& f, std::size_t) { f.finishReceiving(); });
      own = co_await measurement_->stop(nowMicros());
      writeOwnResults(own);
      log::info("The active's own results have been written");
    } catch (const std::exception& e) {
      json_.error(e.what());
    }
    exitCode = 1;
  }
  printStatistics(own);
  json_.printTable(own.lastStatisticsEvent != 0 ? &own : nullptr);
  if (flowFailure_) {
    json_.error(*flowFailure_);
    exitCode = 1;
  }
  co_await endAssociations();
  for (const auto& flow : flows) measure::tellOwner(flow, [](measure::Flow& f) { f.close(); });
  closeConnectors();
  control_->close();
  if (exitCode == 0) log::info("Stopped measurement $" + hex64(measurementId_));
  co_return json_.finish(exitCode, measurementId_, own.lastStatisticsEvent != 0 ? &own : nullptr);
}

int runActive(const ActiveOptions& options, const transport::Registry& transports) {
  transport::IoThreads threads(networkThreads(options, transports));
  asio::io_context& io = threads.main();
  threads.start();
  Active active(threads, options, transports);
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
  threads.stop();  // before the flows go: no handler of theirs runs any more
  return exitCode;
}

}  // namespace npm::control
