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

#include "control/auth.h"
#include "control/flow_mapping.h"
#include "flowspec/flowspec.h"
#include "sctp/socket.h"
#include "transport/sockets.h"

namespace npm::app {

namespace {

using npmp::Protocol;

enum class Arg { None, Required, Optional };  // Optional: only as --name=VALUE

struct OptionDef {
  const char* name;
  char shortName;  // 0 = long only
  Arg arg;
};

constexpr OptionDef kOptions[] = {
    {"control-over-sctp", 'x', Arg::None},    {"no-control-over-sctp", 'X', Arg::None},
    {"control-over-tcp", 'y', Arg::None},     {"no-control-over-tcp", 'Y', Arg::None},
    {"control-over-mptcp", 'w', Arg::None},   {"no-control-over-mptcp", 'W', Arg::None},
    {"local", 'L', Arg::Required},            {"controllocal", 'l', Arg::Required},
    {"display", 0, Arg::None},                {"nodisplay", 0, Arg::None},
    {"v6only", '6', Arg::None},               {"runtime", 'T', Arg::Required},
    {"sndbuf", 'o', Arg::Required},           {"rcvbuf", 'i', Arg::Required},
    {"count", 'N', Arg::Required},            {"config", 'C', Arg::Required},
    {"scalar", 'S', Arg::Required},           {"vector", 'V', Arg::Required},
    {"activenodename", 'A', Arg::Required},   {"passivenodename", 'P', Arg::Required},
    {"tls-key", 'K', Arg::Required},          {"tls-cert", 'J', Arg::Required},
    {"tls-ca", 'I', Arg::Required},           {"tls-hostname", 'H', Arg::Required},
    {"tcp", 't', Arg::Required},              {"mptcp", 'm', Arg::Required},
    {"udp", 'u', Arg::Required},              {"dccp", 'd', Arg::Required},
    {"sctp", 's', Arg::Required},             {"quic", 'k', Arg::Required},
    {"loglevel", 0, Arg::Required},           {"logcolor", 0, Arg::Required},
    {"logfile", 0, Arg::Required},            {"logappend", 0, Arg::Required},
    {"quiet", 'q', Arg::None},                {"verbose", '!', Arg::None},
    {"help", 'h', Arg::None},                 {"version", 'v', Arg::None},
    {"sctp-stack", 0, Arg::Required},         {"sctp-udp-port", 0, Arg::Required},
    {"sctp-remote-udp-port", 0, Arg::Required},
    // The passive's access control and limits.
    {"allow", 0, Arg::Required},              {"max-sessions", 0, Arg::Required},
    {"max-sessions-per-host", 0, Arg::Required}, {"max-flows", 0, Arg::Required},
    {"max-pending", 0, Arg::Required},        {"max-pending-per-host", 0, Arg::Required},
    {"idle-timeout", 0, Arg::Required},       {"max-spool", 0, Arg::Required},
    {"max-spool-total", 0, Arg::Required},    {"max-download", 0, Arg::Required},
    {"auth-key-file", 0, Arg::Required},      {"path-interval", 0, Arg::Required},
    {"warmup", 0, Arg::Required},
    {"json", 0, Arg::Optional},               {"json-stream", 0, Arg::None},
};

struct Parsed {
  const OptionDef* def;
  std::string value;
  std::string spelled;  // as written, for messages
};

// Finds a long option by exact name or unique prefix; "" error if none, ambiguous message if many.
const OptionDef* findLong(const std::string& name, std::string& error) {
  const OptionDef* found = nullptr;
  int matches = 0;
  for (const auto& o : kOptions) {
    if (name == o.name) return &o;
    if (std::string_view(o.name).substr(0, name.size()) == name) {
      found = &o;
      ++matches;
    }
  }
  if (matches == 1) return found;
  if (matches > 1) error = "option \"" + name + "\" is ambiguous";
  return nullptr;
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
  return flowspec::parseDistribution(first, nullptr).has_value() && word.find(':') != std::string::npos;
}

std::optional<std::uint64_t> parseUnsigned(const std::string& s, std::uint64_t max) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  const std::uint64_t v = std::stoull(s);
  if (v > max) return std::nullopt;
  return v;
}

// Checks that a result file can be created where the pattern points.
std::string checkWritable(const std::string& path, const char* what) {
  if (path.empty()) return {};
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return std::string("cannot write the ") + what + " files: directory \"" + dir.string() + "\" does not exist";
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    return std::string("cannot write the ") + what + " files into \"" + dir.string() + "\": " + std::strerror(errno);
  }
  return {};
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
         "  flow options: id= description= maxmsgsize= defragtimeout= ordered= unordered= reliable=\n"
         "    unreliable= rtx_timeout= rtx_trials= rcvbuf= sndbuf= cmt= ccid= error_on_abort=on|off\n"
         "    nodelay=on|off debug=on|off v6only cc=NAME onoff=[+]T,[+]T,...[,repeat]\n"
         "  CMT-SCTP: cmt=off|cmt|cmtrpv1|cmtrpv2|like-mptcp sctpcc=rfc2581|hstcp|htcp|rtcc\n"
         "    bufsplit=none|sender|receiver|both nrsack=on|off rtomin=MS dac=on|off\n"
         "\n"
         "Options:\n"
         "  -x, --control-over-sctp      control over SCTP (the default; without -x it falls back to TCP)\n"
         "  -y, --control-over-tcp       control over TCP          -w, --control-over-mptcp  control over MPTCP\n"
         "  -X, -Y, -W                   passive: disable the SCTP / TCP / MPTCP control listener\n"
         "  -L, --local=A[,B...]         local data address(es)    -l, --controllocal=A[,B...]  local control address(es)\n"
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
         "  --json[=FILE]                the result document as JSON into FILE (\"-\" or none: standard output;\n"
         "                               the status line then goes to standard error)\n"
         "  --json-stream                a JSON line per second on standard output (status line to standard error)\n"
         "  -A, --activenodename=NAME    -P, --passivenodename=NAME   node names for the config file\n"
         "  --display, --nodisplay       the one-second status line (default: on)\n"
         "  --sctp-stack=auto|kernel|userland   SCTP stack (auto: the kernel's if it has SCTP and no CMT is asked for)\n"
         "  --sctp-udp-port=PORT         local UDP port of userland SCTP (passive default 9899, active: any)\n"
         "  --sctp-remote-udp-port=PORT  the passive's UDP port of userland SCTP (default 9899)\n"
         "Passive access control and limits (per passive; per host; per control connection):\n"
         "  --allow=CIDR[,CIDR...]       only these hosts may control the passive and send it data (repeatable)\n"
         "  --max-sessions=N (256)  --max-sessions-per-host=N (32)  --max-flows=N per session (4096)\n"
         "  --max-pending=N (1024)  --max-pending-per-host=N (128)  data connections not identified yet\n"
         "  --idle-timeout=SECONDS (120) close a control connection without a running measurement\n"
         "  --max-spool=MIB (2048) per session, --max-spool-total=MIB (8192): per-flow vectors awaiting upload\n"
         "  --max-download=MIB (32768)   active: the largest result file it accepts from the passive\n"
         "  --auth-key-file=FILE         both: a shared key (mode 600, >= 16 bytes) that both sides prove (HMAC)\n"
         "  --loglevel=0..5  --logcolor=on|off  --logfile=FILE  --logappend=FILE  -q, --quiet  -!, --verbose\n"
         "  -h, --help                   -v, --version\n";
}

Command parseCommandLine(const std::vector<std::string>& args) {
  std::vector<Parsed> options;
  std::vector<std::string> positional;
  std::vector<std::pair<Protocol, std::string>> flowTexts;
  std::vector<std::vector<std::string>> sctpGroups;

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
    std::string error;
    const OptionDef* def = findLong(body, error);
    if (def == nullptr && !doubleDash && !hasValue) {
      // getopt_long_only: not a long option -> short option(s), e.g. -T3 or -q
      const OptionDef* s = findShort(body[0]);
      if (s != nullptr) {
        def = s;
        if (s->arg == Arg::Required && body.size() > 1) {
          value = body.substr(1);
          hasValue = true;
        } else if (s->arg == Arg::None && body.size() > 1) {
          // bundled flags such as -qy
          bool ok = true;
          for (char c : body) {
            const OptionDef* f = findShort(c);
            if (f == nullptr || f->arg != Arg::None) ok = false;
          }
          if (!ok) return CliError{"unknown option \"" + a + "\" (see --help)"};
          for (char c : body.substr(1)) options.push_back({findShort(c), "", a});
        }
      }
    }
    if (def == nullptr) {
      return CliError{error.empty() ? "unknown option \"" + a + "\" (see --help)" : error + " (see --help)"};
    }
    if (def->arg == Arg::Required && !hasValue) {
      if (i + 1 >= args.size()) return CliError{"option \"" + a + "\" needs a value"};
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

  // --help / --version win over everything else.
  for (const auto& p : options) {
    if (p.def->shortName == 'h') return InfoCommand{usage()};
    if (p.def->shortName == 'v') return InfoCommand{std::string("NetPerfMeter ") + NPM_VERSION + "\n"};
  }
  if (positional.size() != 1) {
    return CliError{positional.empty() ? "missing PORT (passive) or HOST:PORT (active); see --help"
                                       : "more than one address or port given: \"" + positional[1] + "\"; see --help"};
  }

  LogSettings logSettings;
  control::ActiveOptions active;
  control::PassiveOptions passive;
  std::optional<double> runtime;
  bool display = true;
  bool controlSctp = false, controlTcp = false, controlMptcp = false;
  bool noSctp = false, noTcp = false, noMptcp = false;
  std::uint64_t count = 1;
  std::uint32_t defaultSndBuf = 0, defaultRcvBuf = 0;
  sctp::StackChoice sctpStack = sctp::StackChoice::Auto;
  std::uint16_t sctpUdpPort = 0, sctpRemoteUdpPort = sctp::kDefaultUdpEncapsulationPort;
  std::vector<std::pair<Protocol, std::string>> specs;
  std::vector<transport::AddressPrefix> allow;
  control::PassiveLimits limits;
  std::optional<control::AuthKey> authKey;
  bool passiveOnly = false;  // an option that only a passive takes was given

  for (const auto& p : options) {
    const std::string& v = p.value;
    const std::string name = p.def->name;
    auto bad = [&](const std::string& why) { return CliError{"option \"" + p.spelled + "\": " + why}; };
    switch (p.def->shortName) {
      case 'x': controlSctp = true; break;
      case 'X': noSctp = true; break;
      case 'y': controlTcp = true; break;
      case 'Y': noTcp = true; break;
      case 'w': controlMptcp = true; break;
      case 'W': noMptcp = true; break;
      case 'L':
      case 'l': {
        std::string why;
        auto list = transport::parseAddressList(v, &why);
        if (!list) return bad(why);
        (p.def->shortName == 'L' ? active.localAddresses : active.controlAddresses) = *list;
        break;
      }
      case '6': active.v6only = true; break;
      case 'T': {
        char* end = nullptr;
        const double t = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !std::isfinite(t) || t <= 0.0) return bad("expected a duration in seconds > 0");
        runtime = t;
        break;
      }
      case 'o':
      case 'i': {
        const auto b = parseUnsigned(v, 0x7FFFFFFF);
        if (!b) return bad("expected a buffer size in bytes");
        (p.def->shortName == 'o' ? defaultSndBuf : defaultRcvBuf) = static_cast<std::uint32_t>(*b);
        break;
      }
      case 'N': {
        const auto n = parseUnsigned(v, 4096);
        if (!n || *n < 1) return bad("expected a flow count from 1 to 4096");
        count = *n;
        break;
      }
      case 'C': active.configFile = v; break;
      case 'S': active.scalarPattern = v; break;
      case 'V': active.vectorPattern = v; break;
      case 'A': active.activeNodeName = v; break;
      case 'P': active.passiveNodeName = v; break;
      case 'K':
      case 'J':
      case 'I':
      case 'H': break;  // QUIC/TLS settings: accepted for compatibility, QUIC is not built
      case 't': specs.emplace_back(Protocol::TCP, v); break;
      case 'm': specs.emplace_back(Protocol::MPTCP, v); break;
      case 'u': specs.emplace_back(Protocol::UDP, v); break;
      case 'd': specs.emplace_back(Protocol::DCCP, v); break;
      case 's': specs.emplace_back(Protocol::SCTP, v); break;
      case 'k': return bad("QUIC support is not compiled in");
      case 'q': logSettings.level = 4; break;
      case '!': logSettings.level = 0; break;
      default:
        if (name == "display") display = true;
        else if (name == "nodisplay") display = false;
        else if (name == "loglevel") {
          const auto l = parseUnsigned(v, 5);
          if (!l) return bad("expected a log level from 0 (trace) to 5 (fatal)");
          logSettings.level = static_cast<int>(*l);
        } else if (name == "logcolor") {
          if (v != "on" && v != "off") return bad("expected on or off");
          logSettings.colour = v == "on";
        } else if (name == "sctp-stack") {
          if (v == "auto") sctpStack = sctp::StackChoice::Auto;
          else if (v == "kernel") sctpStack = sctp::StackChoice::Kernel;
          else if (v == "userland") sctpStack = sctp::StackChoice::Userland;
          else return bad("expected auto, kernel or userland");
        } else if (name == "sctp-udp-port" || name == "sctp-remote-udp-port") {
          const auto port = parseUnsigned(v, 65535);
          if (!port || *port == 0) return bad("expected a UDP port from 1 to 65535");
          (name == "sctp-udp-port" ? sctpUdpPort : sctpRemoteUdpPort) = static_cast<std::uint16_t>(*port);
        } else if (name == "allow") {
          std::string why;
          auto ranges = transport::parsePrefixList(v, &why);
          if (!ranges) return bad(why);
          allow.insert(allow.end(), ranges->begin(), ranges->end());
          passiveOnly = true;
        } else if (name == "auth-key-file") {
          std::string why;
          authKey = control::readAuthKey(v, &why);
          if (!authKey) return CliError{why};
        } else if (name == "path-interval") {
          const auto n = parseUnsigned(v, 3600000);
          if (!n) return bad("expected milliseconds from 0 (no per-path statistics) to 3600000");
          active.pathInterval = limits.pathInterval = std::chrono::milliseconds(*n);
        } else if (name == "warmup") {
          char* end = nullptr;
          const double w = std::strtod(v.c_str(), &end);
          if (v.empty() || *end != '\0' || !std::isfinite(w) || w < 0.0 || w > 86400.0) {
            return bad("expected seconds from 0 (no warm-up) to 86400");
          }
          active.warmup = std::chrono::milliseconds(std::llround(w * 1000.0));
        } else if (name == "max-download") {
          const auto n = parseUnsigned(v, std::uint64_t{1} << 40);
          if (!n || *n < 1) return bad("expected a size in MiB from 1 to 2^40");
          active.maxDownloadBytes = *n << 20;
        } else if (name.rfind("max-", 0) == 0 || name == "idle-timeout") {
          const std::uint64_t most = name == "idle-timeout" ? 86400 : 1000000;
          const auto n = parseUnsigned(v, most);
          if (!n || *n < 1) return bad("expected a whole number from 1 to " + std::to_string(most));
          if (name == "max-sessions") limits.sessions = *n;
          else if (name == "max-sessions-per-host") limits.sessionsPerHost = *n;
          else if (name == "max-flows") limits.flowsPerSession = *n;
          else if (name == "max-pending") limits.pendingConnections = *n;
          else if (name == "max-pending-per-host") limits.pendingPerHost = *n;
          else if (name == "max-spool") limits.spoolPerSession = *n << 20;
          else if (name == "max-spool-total") limits.spoolTotal = *n << 20;
          else limits.idleTimeout = std::chrono::seconds(*n);
          passiveOnly = true;
        } else if (name == "json") {
          if (v.empty()) return bad("expected --json (standard output) or --json=FILE");
          active.jsonFile = v;
        } else if (name == "json-stream") {
          active.jsonStream = true;
        } else if (name == "logfile" || name == "logappend") {
          logSettings.file = v;
          logSettings.append = name == "logappend";
        }
        break;
    }
  }

  const std::string& where = positional[0];
  const bool activeMode = where.find(':') != std::string::npos || !parseUnsigned(where, 0xFFFFFFFF);
  if (!activeMode) {
    // ---------------------------------------------------------------- passive
    const auto port = *parseUnsigned(where, 0xFFFFFFFF);
    if (port < 2 || port > 65534) {
      return CliError{"port " + where + " is out of range: the passive uses PORT-1, PORT and PORT+1, so PORT is 2 to 65534"};
    }
    if (!specs.empty()) return CliError{"flows are given to the active side (HOST:PORT), not to a passive PORT"};
    if (active.warmup.count() > 0) {
      return CliError{"--warmup is given to the active side (HOST:PORT); a passive takes it from the active's START"};
    }
    if (!active.jsonFile.empty() || active.jsonStream) return CliError{"--json and --json-stream are options of the active side"};
    if (noSctp && noTcp) return CliError{"at least one control channel protocol must be enabled (-X and -Y given)"};
    PassiveCommand c;
    c.options.controlOverSctp = !noSctp;
    c.options.sctpStack = sctpStack;
    c.options.sctpUdpPort = sctpUdpPort != 0 ? sctpUdpPort : sctp::kDefaultUdpEncapsulationPort;
    if (sctpStack == sctp::StackChoice::Kernel && !noSctp) {
      std::string why;
      if (!sctp::kernelAvailable(&why)) return CliError{"--sctp-stack=kernel: " + why};
    }
    c.options.port = static_cast<std::uint16_t>(port);
    c.options.controlOverTcp = !noTcp;
    c.options.controlOverMptcp = controlMptcp && !noMptcp;
    c.options.localAddresses = active.localAddresses;
    c.options.controlAddresses = active.controlAddresses;
    c.options.v6only = active.v6only;
    c.options.rcvBufferSize = defaultRcvBuf;
    c.options.sndBufferSize = defaultSndBuf;
    c.options.allow = std::move(allow);
    c.options.authKey = std::move(authKey);
    c.options.limits = limits;
    c.runtime = runtime;
    c.display = display;
    c.log = logSettings;
    // -x and -y ask a passive for what it does anyway: SCTP and TCP control listeners.
    return c;
  }

  // ------------------------------------------------------------------ active
  std::string host = where;
  std::uint16_t port = 9000;
  if (!host.empty() && host[0] == '[') {
    const auto close = host.find(']');
    if (close == std::string::npos) return CliError{"\"" + where + "\": missing ']' after the IPv6 address"};
    const std::string rest = host.substr(close + 1);
    host = host.substr(1, close - 1);
    if (!rest.empty()) {
      if (rest[0] != ':' && rest[0] != '!') return CliError{"\"" + where + "\": expected [ADDRESS]:PORT"};
      const auto p = parseUnsigned(rest.substr(1), 65535);
      if (!p || *p < 2 || *p > 65534) return CliError{"\"" + where + "\": the port must be 2 to 65534"};
      port = static_cast<std::uint16_t>(*p);
    }
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    const auto colon = host.find(':');
    const auto p = parseUnsigned(host.substr(colon + 1), 65535);
    if (!p || *p < 2 || *p > 65534) return CliError{"\"" + where + "\": the port must be 2 to 65534"};
    port = static_cast<std::uint16_t>(*p);
    host = host.substr(0, colon);
  }  // else: a bare IPv6 literal or host name, default port 9000
  if (specs.empty()) return CliError{"no flows specified (e.g. -tcp const0:const1400:const0:const1400)"};
  if (noSctp || noTcp || noMptcp) return CliError{"-X, -Y and -W are options of the passive side"};
  if (passiveOnly) return CliError{"--allow, --max-* and --idle-timeout are options of the passive side"};
  active.commandLine = args;
  active.sctpStack = sctpStack;
  active.sctpUdpPort = sctpUdpPort;
  active.sctpRemoteUdpPort = sctpRemoteUdpPort;
  active.control = controlSctp    ? control::ControlProtocol::Sctp
                   : controlMptcp ? control::ControlProtocol::Mptcp
                   : controlTcp   ? control::ControlProtocol::Tcp
                                  : control::ControlProtocol::Default;

  std::vector<flowspec::FlowSpec> flows;
  std::uint32_t associations = 0;
  for (const auto& [protocol, text] : specs) {
    std::vector<std::string> texts;
    std::size_t start = 0;
    for (std::size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) texts.push_back(text.substr(start, nl - start));
    texts.push_back(text.substr(start));
    std::vector<flowspec::FlowSpec> group;
    for (const auto& t : texts) {
      auto r = flowspec::parse(t, protocol);
      if (!r.spec) return CliError{r.error};
      if (r.spec->rcvBufferSize == 0) r.spec->rcvBufferSize = defaultRcvBuf;
      if (r.spec->sndBufferSize == 0) r.spec->sndBufferSize = defaultSndBuf;
      r.spec->streamId = static_cast<std::uint16_t>(group.size());
      if (!group.empty() && protocol == Protocol::SCTP &&
          control::sctpTuning(*r.spec) != control::sctpTuning(group[0])) {
        return CliError{"invalid FLOWSPEC \"" + t + "\": all streams of one SCTP association share its cmt=, sctpcc=, "
                        "bufsplit=, nrsack=, rtomin= and dac= settings (give them on every stream or on none)"};
      }
      group.push_back(*r.spec);
    }
    // -N: every flow (SCTP: every association with all its streams) N times.
    for (std::uint64_t k = 0; k < count; ++k) {
      for (auto spec : group) {
        spec.association = associations;
        if (k > 0) spec.flowId.reset();  // copies get the next free IDs
        flows.push_back(spec);
      }
      ++associations;
    }
  }
  if (auto error = flowspec::assignFlowIds(flows); !error.empty()) return CliError{error};

  // What this host can do, checked before connecting.
  std::set<Protocol> checked;
  for (const auto& f : flows) {
    if (f.protocol == Protocol::SCTP) {
      try {
        sctp::resolve(sctpStack, control::sctpTuning(f).needsUserland());
      } catch (const transport::TransportError& e) {
        return CliError{"flow #" + std::to_string(*f.flowId) + ": " + e.what()};
      }
      continue;
    }
    if (checked.insert(f.protocol).second) {
      std::string why;
      if (!transport::protocolAvailable(f.protocol, &why)) return CliError{"flow #" + std::to_string(*f.flowId) + ": " + why};
    }
    if (auto error = transport::checkCongestionControl(f.congestionControl); !error.empty()) {
      return CliError{"flow #" + std::to_string(*f.flowId) + ": " + error};
    }
  }
  for (const auto& [pattern, what] : {std::pair{active.configFile, "config"}, std::pair{active.scalarPattern, "scalar"},
                                      std::pair{active.vectorPattern, "vector"},
                                      std::pair{active.jsonFile == "-" ? std::string() : active.jsonFile, "JSON"}}) {
    if (auto error = checkWritable(pattern, what); !error.empty()) return CliError{error};
  }
  std::string why;
  const auto address = transport::resolveHost(host, 0, &why);
  if (!address) return CliError{why};

  if (runtime && active.warmup.count() > 0 && static_cast<double>(active.warmup.count()) >= *runtime * 1000.0) {
    char why[160];
    std::snprintf(why, sizeof(why), "--warmup (%g s) must be shorter than --runtime (%g s): the scalars would cover nothing",
                  static_cast<double>(active.warmup.count()) / 1000.0, *runtime);
    return CliError{why};
  }
  ActiveCommand c;
  c.options = std::move(active);
  c.options.remoteName = where;
  c.options.remote = *address;
  c.options.remotes = transport::resolveAll(host, address->is_v6() ? AF_INET6 : AF_INET);
  if (c.options.remotes.empty()) c.options.remotes = {*address};
  c.options.port = port;
  c.options.runtime = runtime;
  c.options.display = display;
  c.options.flows = std::move(flows);
  c.options.authKey = std::move(authKey);
  c.log = logSettings;
  return c;
}

}  // namespace npm::app
