// The passive's limits on the command line (per-host defaults that follow the totals) and the
// active's file-descriptor check for many flows.
#include <catch2/catch.hpp>

#include <string>
#include <variant>
#include <vector>

#include "app/cli.h"
#include "app/transports.h"
#include "control/active.h"
#include "transport/sockets.h"

using namespace npm;

namespace {

control::PassiveLimits passiveLimits(const std::vector<std::string>& args) {
  auto command = app::parseCommandLine(args);
  if (auto* e = std::get_if<app::CliError>(&command)) FAIL(e->message);
  REQUIRE(std::holds_alternative<app::PassiveCommand>(command));
  return std::get<app::PassiveCommand>(command).options.limits;
}

control::ActiveOptions active(const std::vector<std::string>& args) {
  auto command = app::parseCommandLine(args);
  if (auto* e = std::get_if<app::CliError>(&command)) FAIL(e->message);
  REQUIRE(std::holds_alternative<app::ActiveCommand>(command));
  return std::get<app::ActiveCommand>(command).options;
}

}  // namespace

TEST_CASE("Passive limits: the defaults stay as they were") {
  const auto l = passiveLimits({"9000", "-X"});
  CHECK(l.sessions == 256);
  CHECK(l.sessionsPerHost == 32);
  CHECK(l.sessionsPerPrefix == 64);
  CHECK(l.prefixV4 == 24);
  CHECK(l.prefixV6 == 64);
  CHECK(l.flowsPerSession == 4096);
  CHECK(l.pendingConnections == 1024);
  CHECK(l.pendingPerHost == 128);
  CHECK(l.pendingPerPrefix == 256);
}

TEST_CASE("Passive limits: raising a total raises the per-host limits that are not given") {
  const auto l = passiveLimits({"9000", "-X", "--max-flows=20000", "--max-sessions=1024"});
  CHECK(l.flowsPerSession == 20000);
  CHECK(l.pendingConnections == 5000);  // a quarter of --max-flows
  CHECK(l.pendingPerHost == 625);       // an eighth of that
  CHECK(l.pendingPerPrefix == 1250);    // a quarter of it
  CHECK(l.sessions == 1024);
  CHECK(l.sessionsPerHost == 128);
  CHECK(l.sessionsPerPrefix == 256);  // a quarter
  // --max-pending given: the per-host value follows it, not --max-flows.
  const auto p = passiveLimits({"9000", "-X", "--max-flows=20000", "--max-pending=2048"});
  CHECK(p.pendingConnections == 2048);
  CHECK(p.pendingPerHost == 256);
  // Lowering a total never lowers the per-host defaults below the hardened figures.
  const auto low = passiveLimits({"9000", "-X", "--max-flows=10", "--max-sessions=4"});
  CHECK(low.pendingConnections == 1024);
  CHECK(low.pendingPerHost == 128);
  CHECK(low.sessionsPerHost == 32);
}

TEST_CASE("Passive limits: per-host options given win over the derived values") {
  const auto l = passiveLimits({"9000", "-X", "--max-flows=20000", "--max-pending-per-host=7", "--max-sessions=1024",
                                "--max-sessions-per-host=3", "--max-pending=99", "--max-pending-per-prefix=11"});
  CHECK(l.pendingConnections == 99);
  CHECK(l.pendingPerPrefix == 11);
  CHECK(l.pendingPerHost == 7);
  CHECK(l.sessionsPerHost == 3);
}

TEST_CASE("Passive limits: what one network is") {
  const auto l = passiveLimits({"9000", "-X", "--session-prefix=16,48", "--max-sessions-per-prefix=5"});
  CHECK(l.prefixV4 == 16);
  CHECK(l.prefixV6 == 48);
  CHECK(l.sessionsPerPrefix == 5);
  CHECK(passiveLimits({"9000", "-X", "--session-prefix=20"}).prefixV6 == 64);
  using transport::prefixOf;
  namespace asio = boost::asio;
  const auto a = asio::ip::make_address("192.0.2.77"), b = asio::ip::make_address("192.0.2.200");
  CHECK(prefixOf(a, 24, 64).network == prefixOf(b, 24, 64).network);
  CHECK(prefixOf(a, 25, 64).network != prefixOf(b, 25, 64).network);
  CHECK(prefixOf(asio::ip::make_address("::ffff:192.0.2.9"), 24, 64).network == prefixOf(a, 24, 64).network);
  CHECK(prefixOf(asio::ip::make_address("2001:db8:1:2:aaaa::1"), 24, 64).network ==
        prefixOf(asio::ip::make_address("2001:db8:1:2:ffff::9"), 24, 64).network);
  CHECK(prefixOf(asio::ip::make_address("2001:db8:1:2::1"), 24, 64).network !=
        prefixOf(asio::ip::make_address("2001:db8:1:3::1"), 24, 64).network);
  CHECK(prefixOf(a, 0, 0).network == asio::ip::make_address("0.0.0.0"));
}

TEST_CASE("Passive limits: QUIC's Retry begins at a sixteenth of --max-quic-connections unless given") {
  const auto d = passiveLimits({"9000", "-X"});
  CHECK(d.quicConnections == 1024);
  CHECK(d.quicRetryAbove == 64);
  const auto small = passiveLimits({"9000", "-X", "--max-quic-connections=8"});
  CHECK(small.quicConnections == 8);
  CHECK(small.quicRetryAbove == 1);
  const auto always = passiveLimits({"9000", "-X", "--max-quic-connections=32", "--quic-retry-above=0"});
  CHECK(always.quicRetryAbove == 0);
  CHECK(std::holds_alternative<app::CliError>(app::parseCommandLine({"9000", "--max-quic-connections=0"})));
  CHECK(std::holds_alternative<app::CliError>(
      app::parseCommandLine({"127.0.0.1:9000", "--quic-retry-above=3", "-tcp", "const1:const100"})));
}

TEST_CASE("option -N takes counts beyond 4096 (10000 flows)") {
  const auto o = active({"127.0.0.1:9000", "-N", "10000", "-tcp", "const10:const100"});
  CHECK(o.flows.size() == 10000);
  auto bad = app::parseCommandLine({"127.0.0.1:9000", "-N", "1000001", "-tcp", "const10:const100"});
  CHECK(std::holds_alternative<app::CliError>(bad));
}

TEST_CASE("Descriptors: what a run needs, and the one-line refusal when the limit is too low") {
  auto o = active({"127.0.0.1:9000", "-N", "10000", "-tcp", "const10:const100"});
  const auto transports = app::activeTransports(o);
  const auto needed = control::descriptorsNeeded(o, transports);
  CHECK(needed >= 10000);
  CHECK(needed < 10200);
  CHECK(control::checkDescriptors(o, transports, needed, needed));
  CHECK(control::checkDescriptors(o, transports, 0, 0));  // unknown limit: no refusal
  const std::string why = control::checkDescriptors(o, transports, 4096, 4096).error();
  CHECK(why.find("10000 flows") != std::string::npos);
  CHECK(why.find(std::to_string(needed)) != std::string::npos);
  CHECK(why.find("4096") != std::string::npos);
  CHECK(why.find("ulimit") != std::string::npos);
  CHECK(why.find('\n') == std::string::npos);
  // With -vector every flow also writes its vector file (and its per-path file).
  auto v = active({"127.0.0.1:9000", "-N", "100", "-tcp", "const10:const100", "-vector=x.vec"});
  CHECK(control::descriptorsNeeded(v, app::activeTransports(v)) >= 300);
  // The flows of one SCTP option share their association: one socket for the three.
  const auto sctp = active({"127.0.0.1:9000", "-sctp", "const10:const100", "const10:const100", "const10:const100"});
  const auto tcp = active({"127.0.0.1:9000", "-tcp", "const10:const100"});
  REQUIRE(sctp.flows.size() == 3);
  CHECK(control::descriptorsNeeded(sctp, app::activeTransports(sctp)) ==
        control::descriptorsNeeded(tcp, app::activeTransports(tcp)));
  CHECK(control::networkThreads(sctp, app::activeTransports(sctp)) == 1);
}
