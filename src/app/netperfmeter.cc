// netperfmeter: main() — argument parsing and wiring only.
#include "common/asio_awaitable.h"  // first: Boost 1.74 (see there)

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <sched.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "app/cli.h"
#include "app/transports.h"
#include "common/log.h"
#include "common/text.h"
#include "control/active.h"
#include "control/control_channel.h"
#include "control/display.h"
#include "control/passive.h"
#include "transport/io_threads.h"
#include "transport/sockets.h"

namespace {

using namespace npm;

bool applyLog(const app::LogSettings& s) {
  log::setLevel(s.level);
  log::setColour(s.colour);
  if (!s.file.empty() && !log::setFile(s.file, s.append)) {
    std::fprintf(stderr, "netperfmeter: cannot open log file %s: %s\n", s.file.c_str(), std::strerror(errno));
    return false;
  }
  return true;
}

int runPassive(const app::PassiveCommand& c) {
  // A descriptor per data connection: the soft limit (often 1024) up to the hard one.
  const auto descriptors = transport::raiseDescriptorLimit();
  if (descriptors.soft != 0 &&
      descriptors.soft < c.options.limits.flowsPerSession + control::PassiveLimits::kReservedDescriptors) {
    // A warning when the user asked for more flows than that; with the default --max-flows a
    // common hard limit (4096) is no mistake, and a run beyond it is refused clearly (status 7).
    const std::string line = "This process may open only " + std::to_string(descriptors.soft) +
                             " file descriptors (its hard limit): fewer flows than --max-flows=" +
                             std::to_string(c.options.limits.flowsPerSession) +
                             " can connect; raise it (ulimit -Hn, LimitNOFILE=)";
    if (c.options.limits.flowsPerSession != control::PassiveLimits{}.flowsPerSession) {
      log::warning(line);
    } else {
      log::info(line);
    }
  }
  control::PassiveOptions options = c.options;
  options.limits.descriptors = static_cast<std::size_t>(descriptors.soft);
  // First, so that its contexts outlive everything bound to them.
  transport::IoThreads threads(options.threads != 0 ? options.threads : transport::defaultThreads());
  boost::asio::io_context& io = threads.main();
  threads.start();
  control::PassiveServer server(threads, options, app::passiveTransports(options));
  // Signals first: once a listener is open, a SIGINT must already mean a clean stop.
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  int signalled = 0;
  std::function<void(const boost::system::error_code&, int)> onSignal = [&](const boost::system::error_code& ec,
                                                                            int n) {
    if (ec) return;
    if (++signalled > 1) std::_Exit(1);
    std::fprintf(stderr, "\n*** Break ***    Signal #%d\n", n);
    server.stop();
    io.stop();
  };
  signals.async_wait(onSignal);
  try {
    server.start();
  } catch (const std::exception& e) {
    log::error(e.what());
    return 1;
  }
  boost::asio::steady_timer lifetime(io);
  if (c.runtime) {
    lifetime.expires_after(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(*c.runtime)));
    lifetime.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      log::info("Runtime is over; the passive exits");
      server.stop();
      io.stop();
    });
  }
  control::StatusLine status(c.display);
  boost::asio::steady_timer tick(io);
  std::function<void()> schedule = [&] {
    tick.expires_after(std::chrono::seconds(1));
    tick.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      boost::asio::co_spawn(io, server.status(), [&](const std::exception_ptr& error, const control::PassiveStatus& s) {
        if (!error) status.update(s.flows, s.measurements, s.transmitted, s.received);
        schedule();
      });
    });
  };
  schedule();
  control::runLoop(io);
  threads.stop();
  status.finish();
  return 0;
}

// --cpus: this process and every thread it starts after this (network threads, usrsctp's) on
// those CPUs only; false after saying why.
bool applyCpus(const std::vector<unsigned>& cpus) {
  if (cpus.empty()) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  std::string list;
  for (const unsigned c : cpus) {
    CPU_SET(c, &set);
    list += (list.empty() ? "" : ",") + std::to_string(c);
  }
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    const int error = errno;
    std::fprintf(stderr, "netperfmeter: --cpus=%s: %s (this host has CPUs 0 to %ld)\n", list.c_str(),
                 std::strerror(error), sysconf(_SC_NPROCESSORS_CONF) - 1);
    return false;
  }
  log::info("Running on CPUs " + list + " (--cpus)");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  const app::Command command = app::parseCommandLine(args);
  if (const auto* info = std::get_if<app::InfoCommand>(&command)) {
    std::fputs(info->text.c_str(), stdout);
    return 0;
  }
  if (const auto* error = std::get_if<app::CliError>(&command)) {
    std::fprintf(stderr, "netperfmeter: %s\n", printable(error->message).c_str());
    return 1;
  }
  if (const auto* passive = std::get_if<app::PassiveCommand>(&command)) {
    if (!applyLog(passive->log) || !applyCpus(passive->cpus)) return 1;
    log::info(std::string("NetPerfMeter ") + NPM_VERSION + " - passive mode on port " +
              std::to_string(passive->options.port));
    for (const auto& warning : passive->warnings) log::warning(warning);
    return runPassive(*passive);
  }
  const auto& active = std::get<app::ActiveCommand>(command);
  if (!applyLog(active.log) || !applyCpus(active.cpus)) return 1;
  log::info(std::string("NetPerfMeter ") + NPM_VERSION + " - active mode");
  for (const auto& warning : active.warnings) log::warning(warning);
  return control::runActive(active.options, app::activeTransports(active.options));
}
