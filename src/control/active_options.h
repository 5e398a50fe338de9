// What an active is started with (the command line's ActiveCommand): plain data, for the
// command line and the active's parts, apart from running it (active.h).
#pragma once

#include <boost/asio/ip/address.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flowspec/flowspec.h"
#include "sctp/socket.h"

namespace npm::control {

namespace asio = boost::asio;

enum class ControlProtocol { Default, Sctp, Tcp, Mptcp };

struct ActiveOptions {
  std::string remoteName;  // as given, for messages
  asio::ip::address remote;
  std::vector<asio::ip::address> remotes;  // every address of the host (SCTP connects to all)
  std::uint16_t port = 9000;               // BASE
  ControlProtocol control = ControlProtocol::Default;
  std::vector<asio::ip::address> localAddresses;    // -L
  std::vector<asio::ip::address> controlAddresses;  // -l
  bool v6only = false;
  std::optional<double> runtime;  // seconds; none = until SIGINT
  std::string configFile, scalarPattern, vectorPattern;
  // --path-interval: per-path vectors (with -vector) sampled this often on both sides; 0 = none.
  std::chrono::milliseconds pathInterval{100};
  // --warmup: the first part of the measurement that both sides' scalars leave out (the
  // vectors keep it); sent to the passive in START, recorded as WARMUP in the config file.
  std::chrono::milliseconds warmup{0};
  // -seed: the run's seed, from which both sides derive the seeds of every random choice (frame
  // rates and sizes, on/off times, SCTP's per-message choices; flowspec::deriveSeed); the
  // command line draws one from entropy when none is given, so that every run records its seed.
  // Recorded as SEED in the config file and in the JSON document. 0: none (entropy everywhere).
  std::uint64_t seed = 0;
  // --start-at: the wall-clock time (µs since the epoch) to send START at; the active connects
  // and sets its flows up in the kStartAtLead before it.
  std::optional<std::uint64_t> startAt;
  std::string activeNodeName = "Client", passiveNodeName = "Server";
  bool display = true;
  // --interval: persistent per-interval lines (control/display.h IntervalLines) this often
  // instead of the status line; 0 = none.
  std::chrono::milliseconds interval{0};
  sctp::StackChoice sctpStack = sctp::StackChoice::Auto;
  std::uint16_t sctpUdpPort = 0;  // local UDP encapsulation port of userland SCTP; 0 = any
  std::uint16_t sctpRemoteUdpPort = sctp::kDefaultUdpEncapsulationPort;
  std::vector<flowspec::FlowSpec> flows;  // validated, IDs assigned
  // --max-download: the most bytes a result file of the passive may have; 0: what the run could
  // need (Active::downloadLimit), so that a hostile passive cannot fill the active's disk.
  std::uint64_t maxDownloadBytes = 0;
  std::optional<std::vector<std::uint8_t>> authKey;  // --auth-key-file: prove it to the passive
  // --json[=FILE]: the result document ("-" = standard output); --json-stream: one line per
  // status interval on standard output. Either on standard output moves the status line to stderr.
  std::string jsonFile;
  bool jsonStream = false;
  std::vector<std::string> commandLine;  // the arguments, for the result document
  // --threads: network threads; 0 = one per core. A run uses at most one per flow that is not
  // SCTP or QUIC (those share their association or connection, on the control thread).
  unsigned threads = 0;
  // QUIC flows (-quic): the CAs to trust (-tls-ca; empty: the system's) and the name the
  // passive's certificate must carry, also sent as SNI (-tls-hostname; the command line puts
  // the passive's host as given here when it is not given).
  std::string tlsCaFile, tlsHostName;
};

// The active's SCTP stack settings (control and data associations alike): its UDP ports, and no
// INIT rate limit (it answers no INIT).
inline sctp::StackSettings sctpSettings(const ActiveOptions& o) {
  return sctp::StackSettings{o.sctpUdpPort, o.sctpRemoteUdpPort, std::nullopt};
}

}  // namespace npm::control
