#include "app/cli.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <span>

#include "common/clock.h"
#include "common/numbers.h"
#include "common/options.h"
#include "common/result.h"
#include "common/text.h"
#include "control/auth.h"
#include "control/flow_mapping.h"
#include "flowspec/flowspec.h"
#include "flowspec/random.h"
#include "sctp/socket.h"
#include "transport/sockets.h"

namespace npm::app {

namespace {

using npmp::Protocol;

enum class Arg { None, Required, Optional };  // Optional: only as --name=VALUE

struct OptionDef;

struct Parsed {
  const OptionDef* def;
  std::string value;
  std::string spelled;  // as written, for messages
};

// Everything the options set, before the command is put together.
struct Settings {
  LogSettings log;
  control::ActiveOptions active;
  std::optional<double> runtime;
  bool display = true;
  bool controlSctp = false, controlTcp = false, controlMptcp = false;
  bool noSctp = false, noTcp = false, noMptcp = false;
  std::uint64_t count = 1;
  std::uint32_t defaultSndBuf = 0, defaultRcvBuf = 0;
  sctp::StackChoice sctpStack = sctp::StackChoice::Auto;
  std::uint16_t sctpUdpPort = 0, sctpRemoteUdpPort = sctp::kDefaultUdpEncapsulationPort;
  sctp::InitRateLimit sctpInitRate = sctp::kDefaultInitRateLimit;
  std::vector<std::pair<Protocol, std::string>> specs;
  std::vector<transport::AddressPrefix> allow;
  control::PassiveLimits limits;
  control::GivenLimits givenLimits;  // the others follow the totals (deriveLimits)
  std::optional<control::AuthKey> authKey;
  bool passiveOnly = false;    // an option that only a passive takes was given
  std::string activeOnly;      // the first option given that only an active takes, as spelled
  bool validateOnly = false;   // --validate: check the command line, run nothing
  unsigned threads = 0;        // --threads; 0 = one per core
  std::vector<unsigned> cpus;  // --cpus: the CPUs this process runs on; empty: those it was started with
  // -tls-key, -tls-cert (passive), -tls-ca (both), -tls-hostname (active): QUIC's TLS.
  std::string tlsKey, tlsCert, tlsCa, tlsHostName;
  bool startAtUnsynchronised = false;  // --start-at-unsynchronised
  std::vector<std::string> warnings;
};

// A buffer size this small is almost certainly a habit from another tool (iperf3's -i 1 is a
// report interval; here -i is the receive buffer in bytes).
constexpr std::uint32_t kSmallBuffer = 1024;

// Applies one option to the settings; an error ends the parsing.
using Handler = std::optional<CliError> (*)(Settings&, const Parsed&);

struct OptionDef {
  const char* name;
  char shortName;  // 0 = long only
  Arg arg;
  Handler handler;
};

// The command line's numbers: digits only, at most 19 characters (a longer zero-padded
// number is refused here, as it always was, although FLOWSPEC takes 20).
std::optional<std::uint64_t> parseNumber(const std::string& s, std::uint64_t max) {
  return npm::parseUnsigned(s, max, 19);
}

CliError bad(const Parsed& p, const std::string& why) { return CliError{"option \"" + p.spelled + "\": " + why}; }

// What iperf3's option with this letter is here, for an argument that fails the reference's
// meaning of the letter (or a letter the reference does not have); empty for the others.
std::string iperf3Hint(char letter) {
  switch (letter) {
    case 't':
      return "-t is -tcp FLOWSPEC here (as in the reference NetPerfMeter); iperf3's -t SECONDS is -runtime=SECONDS";
    case 'J': return "-J is -tls-cert FILE here; iperf3's -J (JSON output) is --json or --json=FILE";
    case 'P': return "-P is -passivenodename NAME here; iperf3's -P N (parallel flows) is -N N or N FLOWSPEC options";
    case 'i':
      return "-i is -rcvbuf BYTES here (the receive buffer); iperf3's -i SECONDS (the report interval) is "
             "--interval=SECONDS";
    case 's': return "-s is -sctp FLOWSPEC here; iperf3's -s (server) is a passive: netperfmeter PORT";
    case 'u': return "-u is -udp FLOWSPEC here (e.g. -udp const1000:const1400)";
    case 'l':
      return "-l is -controllocal ADDRESSES here; iperf3's -l BYTES is the frame size in the FLOWSPEC "
             "(const0:constBYTES)";
    case 'w':
      return "-w is -control-over-mptcp here; iperf3's -w BYTES is -i/-o BYTES or rcvbuf=/sndbuf= in a FLOWSPEC";
    case 'C': return "-C is -config FILE here; iperf3's -C ALGO is cc=ALGO in a FLOWSPEC";
    case 'V': return "-V is -vector FILE here; iperf3's -V (verbose) is -verbose or -loglevel=1";
    case 'T': return "-T is -runtime SECONDS here; iperf3's -T (title) has no counterpart (description= names a flow)";
    case 'c': return "iperf3's -c HOST is HOST:PORT here (the active), with a FLOWSPEC option per flow";
    case 'p': return "iperf3's -p PORT is part of HOST:PORT here (and the passive's PORT)";
    case 'b':
      return "iperf3's -b RATE is the frame rate of a FLOWSPEC here (constN frames/s, or rate=RATE in bit/s, "
             "e.g. -udp const0:const1400:rate=10M)";
    case 'R': return "iperf3's -R (reverse) is the inbound half of a FLOWSPEC here (out rate:out size:in rate:in size)";
    case 'n':
      return "iperf3's -n BYTES is transfer=BYTES in a FLOWSPEC (e.g. -tcp const0:const1400:transfer=100M; "
             "frames=N for iperf3's -k N)";
    case 'O': return "iperf3's -O SECONDS (omit) is --warmup=SECONDS here";
    case 'S': return "-S is -scalar FILE here; iperf3's -S TOS is tos=TOS (or dscp=DSCP) in a FLOWSPEC";
    default: return {};
  }
}

// An iperf3 letter given where the reference means something else: the error names both.
CliError badWithHint(const Parsed& p, const std::string& why) {
  const std::string hint = p.spelled.size() == 2 && p.spelled[0] == '-' ? iperf3Hint(p.spelled[1]) : std::string();
  return CliError{"option \"" + p.spelled + "\": " + why + (hint.empty() ? std::string() : " (" + hint + ")")};
}

bool plainNumber(const std::string& v) { return !v.empty() && v.find_first_not_of("0123456789.") == std::string::npos; }

// -------------------------------------------------------------- option handlers

std::optional<CliError> setAddresses(Settings& s, const Parsed& p) {  // -L, -l
  auto list = transport::parseAddressList(p.value);
  if (!list) return bad(p, list.error());
  (p.def->shortName == 'L' ? s.active.localAddresses : s.active.controlAddresses) = *list;
  return std::nullopt;
}

std::optional<CliError> setRuntime(Settings& s, const Parsed& p) {
  const std::string& v = p.value;
  char* end = nullptr;
  const double t = std::strtod(v.c_str(), &end);
  // ADD_FLOW carries it in milliseconds (32 bits), and less than a millisecond would be none.
  if (v.empty() || *end != '\0' || !std::isfinite(t) || t < 0.001 || t > flowspec::kMaxSeconds) {
    return bad(p, "expected a duration in seconds from 0.001 to 4294967 (49.7 days, the most ADD_FLOW carries)");
  }
  s.runtime = t;
  return std::nullopt;
}

std::optional<CliError> setBuffer(Settings& s, const Parsed& p) {  // -o, -i
  const auto b = parseNumber(p.value, 0x7FFFFFFF);
  if (!b) return badWithHint(p, "expected a buffer size in bytes");
  // No buffer of under 1 KiB is meant (the kernel's minimum is larger): iperf3's -i SECONDS.
  if (*b > 0 && *b < kSmallBuffer)
    return badWithHint(p, "a buffer of " + std::to_string(*b) + " bytes is too small to be meant");
  (p.def->shortName == 'o' ? s.defaultSndBuf : s.defaultRcvBuf) = static_cast<std::uint32_t>(*b);
  return std::nullopt;
}

// -tls-*: the reference's QUIC settings (its -K, -J, -I, -H). Without QUIC in the build they
// are accepted and said to do nothing (the reference ignores them silently there).
std::optional<CliError> setTls(Settings& s, const Parsed& p) {
#ifdef NPM_QUIC_BUILT
  if (p.value.empty()) return bad(p, p.def->shortName == 'H' ? "expected a host name" : "expected a file name");
  const std::string_view name = p.def->name;
  if (name == "tls-hostname") {
    s.tlsHostName = p.value;
    return std::nullopt;
  }
  if (::access(p.value.c_str(), R_OK) != 0) return bad(p, "cannot read \"" + p.value + "\": " + std::strerror(errno));
  (name == "tls-key" ? s.tlsKey : name == "tls-cert" ? s.tlsCert : s.tlsCa) = p.value;
#else
  s.warnings.push_back("option \"" + p.spelled +
                       "\" is for QUIC flows (-quic), which this build does not have; ignored");
#endif
  return std::nullopt;
}

#ifdef NPM_QUIC_BUILT
constexpr bool kQuicBuilt = true;
#else
constexpr bool kQuicBuilt = false;
#endif

std::optional<CliError> setCount(Settings& s, const Parsed& p) {
  const auto n = parseNumber(p.value, 1000000);
  if (!n || *n < 1) return bad(p, "expected a flow count from 1 to 1000000");
  s.count = *n;
  return std::nullopt;
}

template <Protocol P>
std::optional<CliError> addFlow(Settings& s, const Parsed& p) {
  if (plainNumber(p.value))
    return badWithHint(p, "\"" + p.value + "\" is no FLOWSPEC (out rate:out size[:in rate:in size])");
  s.specs.emplace_back(P, p.value);
  return std::nullopt;
}

std::optional<CliError> setLogLevel(Settings& s, const Parsed& p) {
  const auto l = parseNumber(p.value, 5);
  if (!l) return bad(p, "expected a log level from 0 (trace) to 5 (fatal)");
  s.log.level = static_cast<int>(*l);
  return std::nullopt;
}

std::optional<CliError> setLogColour(Settings& s, const Parsed& p) {
  if (p.value != "on" && p.value != "off") return bad(p, "expected on or off");
  s.log.colour = p.value == "on";
  return std::nullopt;
}

std::optional<CliError> setLogFile(Settings& s, const Parsed& p) {  // --logfile, --logappend
  s.log.file = p.value;
  s.log.append = std::string_view(p.def->name) == "logappend";
  return std::nullopt;
}

std::optional<CliError> setSctpStack(Settings& s, const Parsed& p) {
  const std::string& v = p.value;
  if (v == "auto")
    s.sctpStack = sctp::StackChoice::Auto;
  else if (v == "kernel")
    s.sctpStack = sctp::StackChoice::Kernel;
  else if (v == "userland")
    s.sctpStack = sctp::StackChoice::Userland;
  else
    return bad(p, "expected auto, kernel or userland");
  return std::nullopt;
}

std::optional<CliError> setSctpUdpPort(Settings& s, const Parsed& p) {  // --sctp-udp-port, --sctp-remote-udp-port
  const auto port = parseNumber(p.value, 65535);
  if (!port || *port == 0) return bad(p, "expected a UDP port from 1 to 65535");
  (std::string_view(p.def->name) == "sctp-udp-port" ? s.sctpUdpPort : s.sctpRemoteUdpPort) =
      static_cast<std::uint16_t>(*port);
  return std::nullopt;
}

std::optional<CliError> setSctpInitRate(Settings& s, const Parsed& p) {  // --sctp-init-rate
  const auto limit = sctp::parseInitRateLimit(p.value);
  if (!limit) {
    return bad(p, "expected INITs per second [/burst] (N or N/BURST, N up to " + std::to_string(sctp::kMaxInitRate) +
                      ", BURST from 1; 0 = unlimited)");
  }
  s.sctpInitRate = *limit;
  s.passiveOnly = true;
  return std::nullopt;
}

std::optional<CliError> addAllow(Settings& s, const Parsed& p) {
  auto ranges = transport::parsePrefixList(p.value);
  if (!ranges) return bad(p, ranges.error());
  s.allow.insert(s.allow.end(), ranges->begin(), ranges->end());
  s.passiveOnly = true;
  return std::nullopt;
}

std::optional<CliError> setAuthKeyFile(Settings& s, const Parsed& p) {
  auto key = control::readAuthKey(p.value);
  if (!key) return CliError{key.error()};
  s.authKey = std::move(*key);
  return std::nullopt;
}

std::optional<CliError> setPathInterval(Settings& s, const Parsed& p) {
  const auto n = parseNumber(p.value, 3600000);
  if (!n) return bad(p, "expected milliseconds from 0 (no per-path statistics) to 3600000");
  s.active.pathInterval = s.limits.pathInterval = std::chrono::milliseconds(*n);
  return std::nullopt;
}

std::optional<CliError> setWarmup(Settings& s, const Parsed& p) {
  const std::string& v = p.value;
  char* end = nullptr;
  const double w = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(w) || w < 0.0 || w > 86400.0) {
    return bad(p, "expected seconds from 0 (no warm-up) to 86400");
  }
  s.active.warmup = std::chrono::milliseconds(std::llround(w * 1000.0));
  return std::nullopt;
}

// --interval=SECONDS: iperf3's -i; 0 = none (the status line), else 0.1 to 3600 s in ms.
std::optional<CliError> setInterval(Settings& s, const Parsed& p) {
  const std::string& v = p.value;
  char* end = nullptr;
  const double t = std::strtod(v.c_str(), &end);
  if (v.empty() || v.find_first_not_of("0123456789.") != std::string::npos || *end != '\0' || !std::isfinite(t) ||
      (t != 0.0 && (t < 0.1 || t > 3600.0))) {
    return bad(p, "expected seconds from 0.1 to 3600 between the per-interval lines (0: none, the status line)");
  }
  if (s.activeOnly.empty()) s.activeOnly = p.spelled;
  s.active.interval = std::chrono::milliseconds(std::llround(t * 1000.0));
  return std::nullopt;
}

std::optional<CliError> setSeed(Settings& s, const Parsed& p) {
  const auto n = parseNumber(p.value, flowspec::kMaxRunSeed);
  if (!n || *n < 1) {
    return bad(p, "expected a seed from 1 to " + std::to_string(flowspec::kMaxRunSeed) +
                      " (2^53 - 1, which every JSON reader holds exactly)");
  }
  s.active.seed = *n;
  return std::nullopt;
}

// --start-at=EPOCH_SECONDS[.FRACTION]: digits, optionally a point and up to six more (µs).
std::optional<CliError> setStartAt(Settings& s, const Parsed& p) {
  const std::string& v = p.value;
  const auto point = v.find('.');
  const std::string whole = v.substr(0, point), fraction = point == std::string::npos ? "" : v.substr(point + 1);
  const auto seconds = parseNumber(whole, std::uint64_t{1} << 40);
  const bool digits = std::all_of(fraction.begin(), fraction.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (whole.empty() || !seconds || !digits || fraction.size() > 6 || (point != std::string::npos && fraction.empty())) {
    return bad(p,
               "expected the start time in seconds since the epoch, with at most six decimals "
               "(e.g. $(($(date +%s) + 10)) or 1764300000.250)");
  }
  std::uint64_t micros = *seconds * 1000000;
  if (!fraction.empty()) micros += std::stoull(fraction + std::string(6 - fraction.size(), '0'));
  s.active.startAt = micros;
  return std::nullopt;
}

std::optional<CliError> setMaxDownload(Settings& s, const Parsed& p) {
  const auto n = parseNumber(p.value, std::uint64_t{1} << 40);
  if (!n || *n < 1) return bad(p, "expected a size in MiB from 1 to 2^40");
  s.active.maxDownloadBytes = *n << 20;
  if (s.activeOnly.empty()) s.activeOnly = p.spelled;
  return std::nullopt;
}

// The passive's limits: --max-sessions, --max-flows, ..., --idle-timeout.
std::optional<CliError> setLimit(Settings& s, const Parsed& p) {
  const std::string_view name = p.def->name;
  const std::uint64_t most = name == "idle-timeout" ? 86400 : 1000000;
  const std::uint64_t least = name == "quic-retry-above" ? 0 : 1;
  const auto n = parseNumber(p.value, most);
  if (!n || *n < least) {
    return bad(p, "expected a whole number from " + std::to_string(least) + " to " + std::to_string(most));
  }
  auto& limits = s.limits;
  if (name == "max-sessions")
    limits.sessions = *n;
  else if (name == "max-sessions-per-host")
    limits.sessionsPerHost = *n, s.givenLimits.sessionsPerHost = true;
  else if (name == "max-sessions-per-prefix")
    limits.sessionsPerPrefix = *n, s.givenLimits.sessionsPerPrefix = true;
  else if (name == "max-flows")
    limits.flowsPerSession = *n;
  else if (name == "max-pending")
    limits.pendingConnections = *n, s.givenLimits.pendingConnections = true;
  else if (name == "max-pending-per-host")
    limits.pendingPerHost = *n, s.givenLimits.pendingPerHost = true;
  else if (name == "max-pending-per-prefix")
    limits.pendingPerPrefix = *n, s.givenLimits.pendingPerPrefix = true;
  else if (name == "max-quic-connections")
    limits.quicConnections = *n;
  else if (name == "max-quic-connections-per-prefix")
    limits.quicPerPrefix = *n, s.givenLimits.quicPerPrefix = true;
  else if (name == "quic-retry-above")
    limits.quicRetryAbove = *n, s.givenLimits.quicRetryAbove = true;
  else if (name == "max-spool")
    limits.spoolPerSession = *n << 20;
  else if (name == "max-spool-total")
    limits.spoolTotal = *n << 20;
  else
    limits.idleTimeout = std::chrono::seconds(*n);
  s.passiveOnly = true;
  return std::nullopt;
}

// --session-prefix=V4BITS[,V6BITS]: what counts as one network for --max-sessions-per-prefix.
std::optional<CliError> setSessionPrefix(Settings& s, const Parsed& p) {
  const std::string v = p.value;
  const auto comma = v.find(',');
  const auto v4 = parseNumber(v.substr(0, comma), 32);
  const auto v6 = comma == std::string::npos ? std::optional<std::uint64_t>(s.limits.prefixV6)
                                             : parseNumber(v.substr(comma + 1), 128);
  if (!v4 || !v6) return bad(p, "expected V4BITS[,V6BITS]: prefix lengths from 0 to 32 and from 0 to 128 (e.g. 24,64)");
  s.limits.prefixV4 = static_cast<unsigned>(*v4);
  s.limits.prefixV6 = static_cast<unsigned>(*v6);
  s.passiveOnly = true;
  return std::nullopt;
}

std::optional<CliError> setThreads(Settings& s, const Parsed& p) {
  const auto n = parseNumber(p.value, 256);
  if (!n || *n < 1) return bad(p, "expected a number of network threads from 1 to 256");
  s.threads = static_cast<unsigned>(*n);
  return std::nullopt;
}

// --cpus=LIST: CPU numbers and ranges (0,2-3), as taskset -c takes them.
std::optional<CliError> setCpus(Settings& s, const Parsed& p) {
  constexpr std::uint64_t kMax = 1023;  // CPU_SETSIZE - 1
  const auto fail = [&] { return bad(p, "expected CPU numbers and ranges from 0 to 1023, e.g. 0 or 0,2-3"); };
  std::vector<unsigned> cpus;
  std::size_t from = 0;
  while (from <= p.value.size()) {
    const std::size_t comma = std::min(p.value.find(',', from), p.value.size());
    const std::string item = p.value.substr(from, comma - from);
    const std::size_t dash = item.find('-');
    const auto first = parseNumber(item.substr(0, dash), kMax);
    const auto last = dash == std::string::npos ? first : parseNumber(item.substr(dash + 1), kMax);
    if (!first || !last) return fail();
    if (*last < *first) return bad(p, "the range " + item + " runs backwards");
    for (auto c = *first; c <= *last; ++c) cpus.push_back(static_cast<unsigned>(c));
    from = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  s.cpus = std::move(cpus);
  return std::nullopt;
}

std::optional<CliError> setJson(Settings& s, const Parsed& p) {
  if (p.value.empty()) return bad(p, "expected --json (standard output) or --json=FILE");
  s.active.jsonFile = p.value;
  return std::nullopt;
}

// Handlers of options that only set a field.
#define NPM_SET(expression)                                     \
  [](Settings& s, const Parsed& p) -> std::optional<CliError> { \
    (void)p;                                                    \
    expression;                                                 \
    return std::nullopt;                                        \
  }

// ... of an option that only the active takes: a passive refuses it (Settings::activeOnly).
#define NPM_ACTIVE(expression)                                  \
  [](Settings& s, const Parsed& p) -> std::optional<CliError> { \
    if (s.activeOnly.empty()) s.activeOnly = p.spelled;         \
    expression;                                                 \
    return std::nullopt;                                        \
  }

constexpr Handler kIgnore = [](Settings&, const Parsed&) -> std::optional<CliError> { return std::nullopt; };

constexpr OptionDef kOptions[] = {
    {"control-over-sctp", 'x', Arg::None, NPM_SET(s.controlSctp = true)},
    {"no-control-over-sctp", 'X', Arg::None, NPM_SET(s.noSctp = true)},
    {"control-over-tcp", 'y', Arg::None, NPM_SET(s.controlTcp = true)},
    {"no-control-over-tcp", 'Y', Arg::None, NPM_SET(s.noTcp = true)},
    {"control-over-mptcp", 'w', Arg::None, NPM_SET(s.controlMptcp = true)},
    {"no-control-over-mptcp", 'W', Arg::None, NPM_SET(s.noMptcp = true)},
    {"local", 'L', Arg::Required, setAddresses},
    {"controllocal", 'l', Arg::Required, setAddresses},
    {"display", 0, Arg::None, NPM_SET(s.display = true)},
    {"nodisplay", 0, Arg::None, NPM_SET(s.display = false)},
    {"v6only", '6', Arg::None, NPM_SET(s.active.v6only = true)},
    {"runtime", 'T', Arg::Required, setRuntime},
    {"sndbuf", 'o', Arg::Required, setBuffer},
    {"rcvbuf", 'i', Arg::Required, setBuffer},
    {"count", 'N', Arg::Required, setCount},
    {"config", 'C', Arg::Required, NPM_ACTIVE(s.active.configFile = p.value)},
    {"scalar", 'S', Arg::Required, NPM_ACTIVE(s.active.scalarPattern = p.value)},
    {"vector", 'V', Arg::Required, NPM_ACTIVE(s.active.vectorPattern = p.value)},
    {"activenodename", 'A', Arg::Required, NPM_ACTIVE(s.active.activeNodeName = p.value)},
    {"passivenodename", 'P', Arg::Required,
     [](Settings& s, const Parsed& p) -> std::optional<CliError> {
       // A node name that is a number is iperf3's -P N.
       if (plainNumber(p.value))
         return badWithHint(p, "a node name that is a number (\"" + p.value + "\") is not meant");
       if (s.activeOnly.empty()) s.activeOnly = p.spelled;
       s.active.passiveNodeName = p.value;
       return std::nullopt;
     }},
    // QUIC's TLS (without QUIC in the build: accepted with a warning).
    {"tls-key", 'K', Arg::Required, setTls},
    {"tls-cert", 'J', Arg::Required, setTls},
    {"tls-ca", 'I', Arg::Required, setTls},
    {"tls-hostname", 'H', Arg::Required, setTls},
    {"tcp", 't', Arg::Required, addFlow<Protocol::TCP>},
    {"mptcp", 'm', Arg::Required, addFlow<Protocol::MPTCP>},
    {"udp", 'u', Arg::Required, addFlow<Protocol::UDP>},
    {"dccp", 'd', Arg::Required, addFlow<Protocol::DCCP>},
    {"sctp", 's', Arg::Required, addFlow<Protocol::SCTP>},
    {"quic", 'k', Arg::Required,
     [](Settings& s, const Parsed& p) -> std::optional<CliError> {
       if (!kQuicBuilt) return bad(p, "QUIC support is not compiled in");
       return addFlow<Protocol::QUIC>(s, p);
     }},
    {"loglevel", 0, Arg::Required, setLogLevel},
    {"logcolor", 0, Arg::Required, setLogColour},
    {"logfile", 0, Arg::Required, setLogFile},
    {"logappend", 0, Arg::Required, setLogFile},
    {"quiet", 'q', Arg::None, NPM_SET(s.log.level = 4)},
    {"verbose", '!', Arg::None, NPM_SET(s.log.level = 0)},
    {"help", 'h', Arg::None, kIgnore},     // handled before all others
    {"version", 'v', Arg::None, kIgnore},  // handled before all others
    {"sctp-stack", 0, Arg::Required, setSctpStack},
    {"sctp-udp-port", 0, Arg::Required, setSctpUdpPort},
    {"sctp-remote-udp-port", 0, Arg::Required, setSctpUdpPort},
    {"sctp-init-rate", 0, Arg::Required, setSctpInitRate},
    // The passive's access control and limits.
    {"allow", 0, Arg::Required, addAllow},
    {"max-sessions", 0, Arg::Required, setLimit},
    {"max-sessions-per-host", 0, Arg::Required, setLimit},
    {"max-sessions-per-prefix", 0, Arg::Required, setLimit},
    {"session-prefix", 0, Arg::Required, setSessionPrefix},
    {"max-flows", 0, Arg::Required, setLimit},
    {"max-pending", 0, Arg::Required, setLimit},
    {"max-pending-per-host", 0, Arg::Required, setLimit},
    {"max-pending-per-prefix", 0, Arg::Required, setLimit},
    {"idle-timeout", 0, Arg::Required, setLimit},
    {"max-quic-connections", 0, Arg::Required, setLimit},
    {"max-quic-connections-per-prefix", 0, Arg::Required, setLimit},
    {"quic-retry-above", 0, Arg::Required, setLimit},
    {"max-spool", 0, Arg::Required, setLimit},
    {"max-spool-total", 0, Arg::Required, setLimit},
    {"max-download", 0, Arg::Required, setMaxDownload},
    {"auth-key-file", 0, Arg::Required, setAuthKeyFile},
    {"path-interval", 0, Arg::Required, setPathInterval},
    {"warmup", 0, Arg::Required, setWarmup},
    {"seed", 0, Arg::Required, setSeed},
    {"interval", 0, Arg::Required, setInterval},
    {"start-at", 0, Arg::Required, setStartAt},
    {"start-at-unsynchronised", 0, Arg::None, NPM_SET(s.startAtUnsynchronised = true)},
    {"json", 0, Arg::Optional, setJson},
    {"json-stream", 0, Arg::None, NPM_SET(s.active.jsonStream = true)},
    {"threads", 0, Arg::Required, setThreads},
    {"cpus", 0, Arg::Required, setCpus},
    {"validate", 0, Arg::None, NPM_SET(s.validateOnly = true)},
};

#undef NPM_SET
#undef NPM_ACTIVE

// ------------------------------------------------------------- the scanner

// Finds a long option by exact name or unique prefix (getopt_long_only: unlike the tools,
// an abbreviation of several names is ambiguous, and "--" abbreviates them all): the option,
// nullptr if there is none, a failure if the name abbreviates several.
Result<const OptionDef*> findLong(const std::string& name) {
  const auto match = options::findLongOption(
      std::span<const OptionDef>(kOptions), name, options::Abbreviations::Unique,
      [](const OptionDef& o) { return o.name; }, [](const OptionDef& a, const OptionDef& b) { return &a == &b; });
  if (match.ambiguous) return Failure{"option \"" + name + "\" is ambiguous"};
  return match.option;
}

const OptionDef* findShort(char c) {
  for (const auto& o : kOptions) {
    if (o.shortName == c) return &o;
  }
  return nullptr;
}

bool looksLikeFlowSpec(const std::string& word) {
  if (word.empty() || word[0] == '-') return false;
  const std::string first = word.substr(0, word.find(':'));
  if (first == "default") return true;
  return flowspec::parseDistribution(first, flowspec::Quantity::FrameRate).ok() && word.find(':') != std::string::npos;
}

// getopt_long_only: a word that is no long option is short option(s), e.g. -T3 or -q, or
// bundled flags such as -qy (whose later flags are recorded first, as before).
std::optional<CliError> findShortOptions(const std::string& a, const std::string& body, const OptionDef*& def,
                                         std::string& value, bool& hasValue, std::vector<Parsed>& options) {
  const OptionDef* s = findShort(body[0]);
  if (s == nullptr) return std::nullopt;
  def = s;
  if (s->arg == Arg::Required && body.size() > 1) {
    value = body.substr(1);
    hasValue = true;
  } else if (s->arg == Arg::None && body.size() > 1) {
    for (char c : body) {
      const OptionDef* f = findShort(c);
      if (f == nullptr || f->arg != Arg::None) return CliError{"unknown option \"" + a + "\" (see --help)"};
    }
    for (char c : body.substr(1)) options.push_back({findShort(c), "", a});
  }
  return std::nullopt;
}

// Splits the arguments into options (with their values) and positional words.
std::optional<CliError> scanArguments(const std::vector<std::string>& args, std::vector<Parsed>& options,
                                      std::vector<std::string>& positional) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a[0] != '-') {
      positional.push_back(a);
      continue;
    }
    const bool doubleDash = a[1] == '-';
    std::string body = a.substr(doubleDash ? 2 : 1);
    std::string value;
    bool hasValue = false;
    if (const auto eq = body.find('='); eq != std::string::npos) {
      value = body.substr(eq + 1);
      body = body.substr(0, eq);
      hasValue = true;
    }
    // As getopt_long_only: a single letter that is a short option is that option ("-w" is
    // --control-over-mptcp, not --warmup, the only long option beginning with w).
    const bool shortLetter = !doubleDash && !hasValue && body.size() == 1 && findShort(body[0]) != nullptr;
    const Result<const OptionDef*> longOption = shortLetter ? nullptr : findLong(body);
    const OptionDef* def = longOption ? *longOption : nullptr;
    if (def == nullptr && !doubleDash && !hasValue) {
      if (auto e = findShortOptions(a, body, def, value, hasValue, options)) return e;
    }
    if (def == nullptr) {
      const std::string hint = !doubleDash && body.size() == 1 ? iperf3Hint(body[0]) : std::string();
      if (!hint.empty()) return CliError{"unknown option \"" + a + "\": " + hint};
      return CliError{longOption ? "unknown option \"" + a + "\" (see --help)" : longOption.error() + " (see --help)"};
    }
    if (def->arg == Arg::Required && !hasValue) {
      const std::string hint = !doubleDash && body.size() == 1 ? iperf3Hint(body[0]) : std::string();
      const std::string why = hint.empty() ? std::string() : " (" + hint + ")";
      if (i + 1 >= args.size()) return CliError{"option \"" + a + "\" needs a value" + why};
      // A value that is another option is not one (iperf3's -J takes none: it would swallow -tcp).
      const std::string& next = args[i + 1];
      std::string nextName = next.substr(next.rfind('-', 1) + 1);
      nextName = nextName.substr(0, nextName.find('='));
      if (next.size() > 1 && next[0] == '-' && !std::isdigit(static_cast<unsigned char>(next[1])) &&
          ((nextName.size() == 1 && findShort(nextName[0]) != nullptr) ||
           (nextName.size() > 1 && findLong(nextName).ok() && *findLong(nextName) != nullptr))) {
        return CliError{"option \"" + a + "\" needs a value, but the option \"" + next + "\" follows" + why};
      }
      value = args[++i];
    } else if (def->arg == Arg::Optional && !hasValue) {
      value = "-";
    } else if (def->arg == Arg::None && hasValue) {
      return CliError{"option \"" + a + "\" takes no value"};
    }
    options.push_back({def, value, a});
    if (def->shortName == 's' || def->shortName == 'k') {
      // Further FLOWSPECs are more streams of the same association; an address is not.
      while (i + 1 < args.size() && looksLikeFlowSpec(args[i + 1])) options.back().value += "\n" + args[++i];
    }
  }
  return std::nullopt;
}

// Checks that a result file can be created where the pattern points.
Result<void> checkWritable(const std::string& path, const char* what) {
  if (path.empty()) return {};
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Failure{std::string("cannot write the ") + what + " files: directory \"" + dir.string() +
                   "\" does not exist"};
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    return Failure{std::string("cannot write the ") + what + " files into \"" + dir.string() +
                   "\": " + std::strerror(errno)};
  }
  return {};
}

// --start-at: the time must lie ahead, and several hosts only start together on synchronised
// clocks, which the kernel can tell (adjtimex: STA_UNSYNC, set until chrony, ntpd or
// systemd-timesyncd has disciplined the clock). On one host all actives share one clock:
// --start-at-unsynchronised says so.
std::optional<CliError> checkStartAt(const std::optional<std::uint64_t>& startAt, bool unsynchronisedOk) {
  if (!startAt) {
    if (unsynchronisedOk) return CliError{"--start-at-unsynchronised goes with --start-at"};
    return std::nullopt;
  }
  const std::uint64_t now = nowMicros();
  if (*startAt <= now) {
    char text[160];
    std::snprintf(text, sizeof(text), "--start-at: the time is %.3f s in the past (now: %.3f)",
                  static_cast<double>(now - *startAt) / 1e6, static_cast<double>(now) / 1e6);
    return CliError{text};
  }
  const ClockStatus clock = clockStatus();
  if (!clock.synchronised && !unsynchronisedOk) {
    return CliError{
        "--start-at: the local clock is not synchronised (the kernel's STA_UNSYNC is set: is chrony, "
        "ntpd or systemd-timesyncd running?); hosts would start apart by their clocks' offset "
        "(--start-at-unsynchronised: every active runs on this host's clock)"};
  }
  return std::nullopt;
}

// ------------------------------------------------------------ the passive

Command passiveCommand(Settings& s, const std::string& where) {
  const auto port = *parseNumber(where, 0xFFFFFFFF);
  if (port < 2 || port > 65534) {
    return CliError{"port " + where +
                    " is out of range: the passive uses PORT-1, PORT and PORT+1, so PORT is 2 to 65534"};
  }
  if (!s.specs.empty()) return CliError{"flows are given to the active side (HOST:PORT), not to a passive PORT"};
  if (!s.activeOnly.empty()) {
    return CliError{"option \"" + s.activeOnly +
                    "\" is an option of the active side (HOST:PORT); a passive writes no "
                    "result files or node names of its own (its actives download and name them)"};
  }
  if (s.active.warmup.count() > 0) {
    return CliError{"--warmup is given to the active side (HOST:PORT); a passive takes it from the active's START"};
  }
  if (!s.active.jsonFile.empty() || s.active.jsonStream)
    return CliError{"--json and --json-stream are options of the active side"};
  if (s.active.seed != 0) {
    return CliError{"-seed is given to the active side (HOST:PORT); a passive takes it from the active's ADD_FLOW"};
  }
  if (s.active.startAt || s.startAtUnsynchronised) {
    return CliError{"--start-at is an option of the active side (HOST:PORT): it sends START then"};
  }
  if (s.noSctp && s.noTcp) return CliError{"at least one control channel protocol must be enabled (-X and -Y given)"};
  if (s.tlsKey.empty() != s.tlsCert.empty()) {
    return CliError{
        "-tls-key and -tls-cert go together: the passive serves QUIC with both, or without either refuses it"};
  }
  if (!s.tlsHostName.empty()) {
    return CliError{"-tls-hostname is an option of the active side (the name it checks in the passive's certificate)"};
  }
  PassiveCommand c;
  c.options.tlsKeyFile = s.tlsKey;
  c.options.tlsCertFile = s.tlsCert;
  if (!s.tlsCa.empty()) {
    // As the reference's passive: it asks actives for no certificate, so it has no use for CAs.
    s.warnings.push_back(
        "-tls-ca: the passive asks actives for no certificate, so it checks none; the CA file is "
        "for actives (-tls-ca with -quic)");
  }
  c.options.controlOverSctp = !s.noSctp;
  c.options.sctpStack = s.sctpStack;
  c.options.sctpUdpPort = s.sctpUdpPort != 0 ? s.sctpUdpPort : sctp::kDefaultUdpEncapsulationPort;
  c.options.sctpInitRate = s.sctpInitRate;
  if (s.sctpStack == sctp::StackChoice::Kernel && !s.noSctp) {
    if (auto kernel = sctp::kernelAvailable(); !kernel) return CliError{"--sctp-stack=kernel: " + kernel.error()};
  }
  c.options.port = static_cast<std::uint16_t>(port);
  c.options.controlOverTcp = !s.noTcp;
  c.options.controlOverMptcp = s.controlMptcp && !s.noMptcp;
  c.options.localAddresses = s.active.localAddresses;
  c.options.controlAddresses = s.active.controlAddresses;
  c.options.v6only = s.active.v6only;
  c.options.rcvBufferSize = s.defaultRcvBuf;
  c.options.sndBufferSize = s.defaultSndBuf;
  c.options.allow = std::move(s.allow);
  c.options.authKey = std::move(s.authKey);
  c.options.threads = s.threads;
  c.cpus = s.cpus;
  c.options.limits = control::deriveLimits(s.limits, s.givenLimits);
  c.runtime = s.runtime;
  c.display = s.display;
  c.log = s.log;
  c.warnings = std::move(s.warnings);
  // -x and -y ask a passive for what it does anyway: SCTP and TCP control listeners.
  return c;
}

// ------------------------------------------------------------- the active

// HOST:PORT, [ADDRESS]:PORT, [ADDRESS]!PORT or a bare address or name (port 9000).
std::optional<CliError> splitRemote(const std::string& where, std::string& host, std::uint16_t& port) {
  host = where;
  port = 9000;
  if (!host.empty() && host[0] == '[') {
    const auto close = host.find(']');
    if (close == std::string::npos) return CliError{"\"" + where + "\": missing ']' after the IPv6 address"};
    const std::string rest = host.substr(close + 1);
    host = host.substr(1, close - 1);
    if (!rest.empty()) {
      if (rest[0] != ':' && rest[0] != '!') return CliError{"\"" + where + "\": expected [ADDRESS]:PORT"};
      const auto p = parseNumber(rest.substr(1), 65535);
      if (!p || *p < 2 || *p > 65534) return CliError{"\"" + where + "\": the port must be 2 to 65534"};
      port = static_cast<std::uint16_t>(*p);
    }
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    const auto colon = host.find(':');
    const auto p = parseNumber(host.substr(colon + 1), 65535);
    if (!p || *p < 2 || *p > 65534) return CliError{"\"" + where + "\": the port must be 2 to 65534"};
    port = static_cast<std::uint16_t>(*p);
    host = host.substr(0, colon);
  }  // else: a bare IPv6 literal or host name, default port 9000
  return std::nullopt;
}

// The FLOWSPECs of one -tcp/-sctp/... option (SCTP: the streams of one association).
std::optional<CliError> parseGroup(const Settings& s, Protocol protocol, const std::string& text,
                                   std::vector<flowspec::FlowSpec>& group) {
  std::vector<std::string> texts;
  std::size_t start = 0;
  for (std::size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    texts.push_back(text.substr(start, nl - start));
  texts.push_back(text.substr(start));
  for (const auto& t : texts) {
    auto r = flowspec::parse(t, protocol);
    if (!r) return CliError{r.error()};
    if (protocol != Protocol::QUIC) {  // QUIC: the connection's socket is not the flow's (flowspec.cc)
      if (r->rcvBufferSize == 0) r->rcvBufferSize = s.defaultRcvBuf;
      if (r->sndBufferSize == 0) r->sndBufferSize = s.defaultSndBuf;
    }
    r->streamId = static_cast<std::uint16_t>(group.size());
    if (!group.empty() && protocol == Protocol::SCTP && control::sctpTuning(*r) != control::sctpTuning(group[0])) {
      return CliError{
          "invalid FLOWSPEC \"" + t +
          "\": all streams of one SCTP association share its cmt=, sctpcc=, "
          "bufsplit=, bufsplit-on=, nrsack=, pktdrop=, rtomin=, dac=, smartfr= and reschedule= settings (give "
          "them on every stream or on none)"};
    }
    if (!group.empty() && protocol == Protocol::QUIC && r->congestionControl != group[0].congestionControl) {
      return CliError{"invalid FLOWSPEC \"" + t +
                      "\": all streams of one QUIC connection share its congestion control "
                      "(give the same cc= on every stream or on none)"};
    }
    group.push_back(*r);
  }
  return std::nullopt;
}

std::optional<CliError> buildFlows(const Settings& s, std::vector<flowspec::FlowSpec>& flows) {
  std::uint32_t associations = 0;
  for (const auto& [protocol, text] : s.specs) {
    std::vector<flowspec::FlowSpec> group;
    if (auto error = parseGroup(s, protocol, text, group)) return error;
    // -N: every flow (SCTP: every association with all its streams) N times.
    for (std::uint64_t k = 0; k < s.count; ++k) {
      for (auto spec : group) {
        spec.association = associations;
        if (k > 0) spec.flowId.reset();  // copies get the next free IDs
        flows.push_back(spec);
      }
      ++associations;
    }
  }
  if (auto ids = flowspec::assignFlowIds(flows); !ids) return CliError{ids.error()};
  // What the linked usrsctp cannot do is refused here, not ignored later.
  for (const auto& f : flows) {
    if (f.protocol != Protocol::SCTP) continue;
    if (auto supported = sctp::userlandSupports(control::sctpTuning(f)); !supported) {
      return CliError{"invalid FLOWSPEC \"" + f.text + "\": " + supported.error()};
    }
  }
  // The CMT associations of one process share usrsctp's process-wide settings.
  const flowspec::FlowSpec* first = nullptr;
  for (const auto& f : flows) {
    const auto wanted = f.protocol == Protocol::SCTP ? sctp::processWideOf(control::sctpTuning(f)) : std::nullopt;
    if (!wanted) continue;
    if (first == nullptr) {
      first = &f;
    } else if (const auto held = *sctp::processWideOf(control::sctpTuning(*first)); !(*wanted == held)) {
      return CliError{"flows #" + std::to_string(*first->flowId) + " and #" + std::to_string(*f.flowId) +
                      " are CMT-SCTP flows with different process-wide settings (" + sctp::describe(held) + ", " +
                      sctp::describe(*wanted) +
                      "), which usrsctp has only once per process; run them in separate "
                      "netperfmeter processes"};
    }
  }
  return std::nullopt;
}

// What this host can do, checked before connecting.
std::optional<CliError> checkHostCapabilities(const Settings& s, const std::vector<flowspec::FlowSpec>& flows) {
  std::set<Protocol> checked;
  for (const auto& f : flows) {
    if (f.protocol == Protocol::SCTP) {
      try {
        sctp::resolve(s.sctpStack, control::sctpTuning(f).needsUserland());
      } catch (const transport::TransportError& e) {
        return CliError{"flow #" + std::to_string(*f.flowId) + ": " + e.what()};
      }
      continue;
    }
    if (f.protocol == Protocol::QUIC) continue;  // userland, in this build (-quic refuses it otherwise); cc= checked
    if (checked.insert(f.protocol).second) {
      if (auto available = transport::protocolAvailable(f.protocol); !available) {
        return CliError{"flow #" + std::to_string(*f.flowId) + ": " + available.error()};
      }
    }
    if (auto usable = transport::checkCongestionControl(f.congestionControl); !usable) {
      return CliError{"flow #" + std::to_string(*f.flowId) + ": " + usable.error()};
    }
  }
  const auto& active = s.active;
  for (const auto& [pattern, what] : {std::pair{active.configFile, "config"}, std::pair{active.scalarPattern, "scalar"},
                                      std::pair{active.vectorPattern, "vector"},
                                      std::pair{active.jsonFile == "-" ? std::string() : active.jsonFile, "JSON"}}) {
    if (auto writable = checkWritable(pattern, what); !writable) return CliError{writable.error()};
  }
  return std::nullopt;
}

Command activeCommand(Settings& s, const std::string& where, const std::vector<std::string>& args) {
  std::string host;
  std::uint16_t port = 9000;
  if (auto error = splitRemote(where, host, port)) return *error;
  if (s.specs.empty()) return CliError{"no flows specified (e.g. -tcp const0:const1400:const0:const1400)"};
  if (s.noSctp || s.noTcp || s.noMptcp) return CliError{"-X, -Y and -W are options of the passive side"};
  if (s.passiveOnly) {
    return CliError{
        "--allow, --max-*, --idle-timeout, --quic-retry-above and --sctp-init-rate are options of the passive "
        "side"};
  }
  if (!s.tlsKey.empty() || !s.tlsCert.empty()) {
    return CliError{
        "-tls-key and -tls-cert are options of the passive side (an active checks the passive's "
        "certificate with -tls-ca and -tls-hostname)"};
  }
  auto& active = s.active;
  active.commandLine = args;
  active.sctpStack = s.sctpStack;
  active.sctpUdpPort = s.sctpUdpPort;
  active.sctpRemoteUdpPort = s.sctpRemoteUdpPort;
  active.control = s.controlSctp    ? control::ControlProtocol::Sctp
                   : s.controlMptcp ? control::ControlProtocol::Mptcp
                   : s.controlTcp   ? control::ControlProtocol::Tcp
                                    : control::ControlProtocol::Default;
  std::vector<flowspec::FlowSpec> flows;
  if (auto error = buildFlows(s, flows)) return *error;
  if (auto error = checkHostCapabilities(s, flows)) return *error;
  for (const auto& f : flows) {  // tiny buffers given in the FLOWSPEC (-i/-o warned already)
    for (const auto& [size, fallback, name] : {std::tuple{f.rcvBufferSize, s.defaultRcvBuf, "rcvbuf"},
                                               std::tuple{f.sndBufferSize, s.defaultSndBuf, "sndbuf"}}) {
      if (size > 0 && size < kSmallBuffer && size != fallback) {
        s.warnings.push_back("flow #" + std::to_string(*f.flowId) + ": " + name + "=" + std::to_string(size) +
                             " is a buffer of " + std::to_string(size) + " bytes (the kernel's minimum applies)");
      }
    }
  }
  const auto address = transport::resolveHost(host, 0);
  if (!address) return CliError{address.error()};

  if (s.runtime && active.warmup.count() > 0 && static_cast<double>(active.warmup.count()) >= *s.runtime * 1000.0) {
    char text[160];
    std::snprintf(text, sizeof(text),
                  "--warmup (%g s) must be shorter than --runtime (%g s): the scalars would cover nothing",
                  static_cast<double>(active.warmup.count()) / 1000.0, *s.runtime);
    return CliError{text};
  }
  if (auto error = checkStartAt(active.startAt, s.startAtUnsynchronised)) return *error;
  // Every run has a seed: without -seed one from entropy, recorded, so that -seed repeats it.
  if (active.seed == 0) active.seed = flowspec::entropyRunSeed();
  ActiveCommand c;
  c.options = std::move(active);
  c.options.remoteName = where;
  c.options.remote = *address;
  c.options.remotes = transport::resolveAll(host, address->is_v6() ? AF_INET6 : AF_INET);
  if (c.options.remotes.empty()) c.options.remotes = {*address};
  c.options.port = port;
  c.options.runtime = s.runtime;
  c.options.display = s.display;
  c.options.flows = std::move(flows);
  c.options.authKey = std::move(s.authKey);
  c.options.threads = s.threads;
  c.cpus = s.cpus;
  c.options.tlsCaFile = s.tlsCa;
  // The name in the passive's certificate: -tls-hostname, else the passive's host as given.
  c.options.tlsHostName = s.tlsHostName.empty() ? host : s.tlsHostName;
  c.log = s.log;
  c.warnings = std::move(s.warnings);
  return c;
}

}  // namespace

std::string usage() {
  return "Usage:\n"
         "  netperfmeter PORT [options]                      passive: wait for active instances\n"
         "  netperfmeter HOST:PORT FLOW... [options]         active: run a measurement against a passive\n"
         "\n"
         "Flows (FLOWSPEC = out_rate:out_size:in_rate:in_size[:option...], rates in frames/s, sizes in bytes,\n"
         "each a number or const|uniform|exp|pareto|normal|truncnormal with parameters; rate 0 = saturated):\n"
         "  -tcp FLOWSPEC  -mptcp FLOWSPEC  -udp FLOWSPEC  -dccp FLOWSPEC  -sctp FLOWSPEC [FLOWSPEC...]\n"
         "  -quic FLOWSPEC [FLOWSPEC...]  (-k, --quic: one QUIC connection to PORT-1, a stream per FLOWSPEC; "
         "cc=reno|cubic)\n"
         "  flow options: id= description= maxmsgsize= defragtimeout= ordered= unordered= reliable=\n"
         "    unreliable= rtx_timeout= rtx_trials= rcvbuf= sndbuf= cmt= ccid= error_on_abort=on|off\n"
         "    nodelay=on|off debug=on|off v6only cc=NAME onoff=[+]T,[+]T,...[,repeat]\n"
         "  CMT-SCTP: cmt=off|cmt|cmtrpv1|cmtrpv2|like-mptcp|wprsctp sctpcc=rfc2581|hstcp|htcp|rtcc\n"
         "    bufsplit=none|sender|receiver|both bufsplit-on=outstanding|buffered nrsack=on|off rtomin=MS dac=on|off\n"
         "    smartfr=on|off reschedule=on|off pktdrop=on|off\n"
         "\n"
         "Options:\n"
         "  -x, --control-over-sctp      control over SCTP (the default; without -x it falls back to TCP)\n"
         "  -y, --control-over-tcp       control over TCP          -w, --control-over-mptcp  control over MPTCP\n"
         "  -X, -Y, -W                   passive: disable the SCTP / TCP / MPTCP control listener\n"
         "  -L, --local=A[,B...]         local data address(es)    -l, --controllocal=A[,B...]  local control "
         "address(es)\n"
         "  -6, --v6only                 IPv6 sockets accept IPv6 only\n"
         "  -T, --runtime=SECONDS        measurement duration (active) / lifetime (passive)\n"
         "  -o, --sndbuf=BYTES           default SO_SNDBUF of data sockets\n"
         "  -i, --rcvbuf=BYTES           default SO_RCVBUF of data sockets\n"
         "  -N, --count=N                create every flow N times\n"
         "  -C, --config=FILE            write the config file\n"
         "  -S, --scalar=PATTERN         write scalar files (NAME.sca[.bz2] -> NAME-active.sca, NAME-passive.sca)\n"
         "  -V, --vector=PATTERN         write vector files (NAME.vec[.bz2], also per flow and per path)\n"
         "  --path-interval=MS           sample each flow's paths (TCP, MPTCP subflows, SCTP addresses) every MS\n"
         "                               into NAME-paths-active/passive-FLOW-STREAM.vec (100; 0 = none)\n"
         "  --warmup=SECONDS             leave the first SECONDS out of both sides' scalars (vectors keep them)\n"
         "  --seed=N                     the run's seed (1 to 2^53-1): repeats every random choice of both sides\n"
         "                               (rates, sizes, on/off, SCTP per-message); without it one is drawn and "
         "recorded\n"
         "  --start-at=EPOCH[.FRACTION]  send START at this wall-clock time (synchronised start of several actives);\n"
         "                               refused when it is past or the clock is not synchronised\n"
         "  --start-at-unsynchronised    allow --start-at on an unsynchronised clock (all actives on this host)\n"
         "  --json[=FILE]                the result document as JSON into FILE (\"-\" or none: standard output;\n"
         "                               the status line then goes to standard error)\n"
         "  --json-stream                JSON lines on standard output: start, one per second, end with the document\n"
         "  --threads=N                  network threads (default: one per CPU it may use); the active spreads its "
         "flows\n"
         "                               over them, the passive its TCP and MPTCP data connections\n"
         "  --cpus=LIST                  run on these CPUs only (0,2-3; as taskset -c), all threads; e.g. the active\n"
         "                               on one core and the passive on another for a single flow on loopback\n"
         "  -A, --activenodename=NAME    -P, --passivenodename=NAME   node names for the config file\n"
         "  --display, --nodisplay       the one-second status line (default: on)\n"
         "  --interval=SECONDS           active: a persistent line per flow and direction every SECONDS (0.1 to\n"
         "                               3600), as iperf3's -i, instead of the status line; -quiet: none\n"
         "  --sctp-stack=auto|kernel|userland   SCTP stack (auto: the kernel's if it has SCTP and no CMT is asked "
         "for)\n"
         "  --sctp-udp-port=PORT         local UDP port of userland SCTP (passive default 9899, active: any)\n"
         "  --sctp-remote-udp-port=PORT  the passive's UDP port of userland SCTP (default 9899)\n"
         "  --sctp-init-rate=N[/BURST]   passive: answer at most N SCTP INITs per second on that UDP port, BURST\n"
         "                               at once (500/1000; 0 = unlimited); a BPF socket filter, needs root\n" +
         std::string(
             kQuicBuilt
                 ? "  -K, --tls-key=FILE  -J, --tls-cert=FILE   passive: its TLS key and certificate chain (PEM); with "
                   "both\n"
                   "                               it serves QUIC on UDP port PORT-1, without them it refuses QUIC "
                   "flows\n"
                   "  -I, --tls-ca=FILE            active: the CAs that sign the passive's certificate (default: the "
                   "system's)\n"
                   "  -H, --tls-hostname=NAME      active: the name the passive's certificate must carry, and SNI\n"
                   "                               (default: the passive's host as given)\n"
                 : "  -k, --quic=FLOWSPEC, --tls-key, --tls-cert, --tls-ca, --tls-hostname   the reference's QUIC "
                   "options:\n"
                   "                               this build has no QUIC (-quic is refused, -tls-* warn and do "
                   "nothing)\n") +
         "Passive access control and limits (per passive; per host; per control connection):\n"
         "  --allow=CIDR[,CIDR...]       only these hosts may control the passive and send it data (repeatable)\n"
         "  --max-sessions=N (256)  --max-sessions-per-host=N (32; not given: max-sessions/8)\n"
         "  --max-sessions-per-prefix=N (64; not given: max-sessions/4)  sessions of one network, which is\n"
         "  --session-prefix=V4BITS[,V6BITS] (24,64)  addresses sharing this prefix; when a limit is reached,\n"
         "                               sessions quiet for 5 s with no measurement under way make room first\n"
         "  --max-flows=N (4096)         flows per session\n"
         "  --max-pending=N (1024; not given: max-flows/4)  --max-pending-per-host=N (128; not given:\n"
         "                               max-pending/8)  --max-pending-per-prefix=N (256; not given:\n"
         "                               max-pending/4)  data connections not identified yet; when full,\n"
         "                               the one of the fullest group that waited longest makes room\n"
         "  --idle-timeout=SECONDS (120) close a control connection without a running measurement\n"
         "  --max-quic-connections=N (1024)  QUIC connections at once (handshaking or established)\n"
         "  --max-quic-connections-per-prefix=N (not given: max-quic-connections/4)  of one network\n"
         "  --quic-retry-above=N (not given: max-quic-connections/16)  QUIC handshakes under way from which on\n"
         "                               a new client must prove its address with a Retry first (0 = always)\n"
         "  --max-spool=MIB (2048) per session, --max-spool-total=MIB (8192): per-flow vectors awaiting upload\n"
         "  --validate                   check the whole command line (as before a run) and exit: 0 and \"valid: "
         "...\"\n"
         "                               on standard output, or 1 and the one-line error; nothing connects\n"
         "  --max-download=MIB           active: the largest result file it accepts from the passive\n"
         "                               (default: what the run could need: its flows, duration, rows)\n"
         "  --auth-key-file=FILE         both: a shared key (mode 600, >= 16 bytes) that both sides prove (HMAC)\n"
         "  --loglevel=0..5  --logcolor=on|off  --logfile=FILE  --logappend=FILE  -q, --quiet  -!, --verbose\n"
         "  -h, --help                   -v, --version\n";
}

namespace {

Command parse(const std::vector<std::string>& args) {
  std::vector<Parsed> options;
  std::vector<std::string> positional;
  if (auto error = scanArguments(args, options, positional)) return *error;

  // --help / --version win over everything else.
  for (const auto& p : options) {
    if (p.def->shortName == 'h') return InfoCommand{usage()};
    if (p.def->shortName == 'v') {
      return InfoCommand{std::string("NetPerfMeter ") + NPM_VERSION +
                         "\nuserland SCTP: " + sctp::userlandStackDescription() + "\n"};
    }
  }
  if (positional.size() != 1) {
    return CliError{positional.empty() ? "missing PORT (passive) or HOST:PORT (active); see --help"
                                       : "more than one address or port given: \"" + positional[1] + "\"; see --help"};
  }
  Settings settings;
  for (const auto& p : options) {
    if (auto error = p.def->handler(settings, p)) return *error;
  }
  const std::string& where = positional[0];
  const bool activeMode = where.find(':') != std::string::npos || !parseNumber(where, 0xFFFFFFFF);
  Command command = activeMode ? activeCommand(settings, where, args) : passiveCommand(settings, where);
  if (!settings.validateOnly || std::holds_alternative<CliError>(command)) return command;
  // --validate: everything above was checked (as before a run), nothing connects.
  std::string text;
  if (const auto* a = std::get_if<ActiveCommand>(&command)) {
    text = "valid: an active run of " + std::to_string(a->options.flows.size()) + " flow" +
           (a->options.flows.size() == 1 ? "" : "s") + " to " + where + "\n";
    for (const auto& w : a->warnings) text += "warning: " + printable(w) + "\n";
  } else if (const auto* p = std::get_if<PassiveCommand>(&command)) {
    text = "valid: a passive on port " + where + "\n";
    for (const auto& w : p->warnings) text += "warning: " + printable(w) + "\n";
  }
  return InfoCommand{text};
}

}  // namespace

// Messages quote what was given: its control characters (a newline in an argument, a terminal's
// escape sequence) are shown as \xNN, so that each message stays one line of plain text.
Command parseCommandLine(const std::vector<std::string>& args) {
  Command command = parse(args);
  if (auto* error = std::get_if<CliError>(&command)) error->message = printable(error->message);
  auto clean = [](std::vector<std::string>& warnings) {
    for (auto& w : warnings) w = printable(w);
  };
  if (auto* a = std::get_if<ActiveCommand>(&command)) clean(a->warnings);
  if (auto* p = std::get_if<PassiveCommand>(&command)) clean(p->warnings);
  return command;
}

}  // namespace npm::app
