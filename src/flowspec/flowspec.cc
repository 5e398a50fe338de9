#include "flowspec/flowspec.h"

#include <cerrno>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>

#include "common/numbers.h"
#include "common/text.h"
#include "flowspec/random.h"

namespace npm::flowspec {

namespace {

using npmp::Protocol;
using npmp::RandomSpec;

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

std::optional<double> parseNumber(std::string_view text) {
  if (text.empty() || text.size() > 64) return std::nullopt;
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<bool> parseBool(std::string_view text) {
  if (text == "on" || text == "true" || text == "yes" || text == "1") return true;
  if (text == "off" || text == "false" || text == "no" || text == "0") return false;
  return std::nullopt;
}

struct DistributionName {
  std::string_view name;
  Rng rng;
};
// Longest names first, so that "truncnormal" is not read as "trunc" + "normal".
constexpr DistributionName kDistributions[] = {
    {"truncnormal", Rng::TruncNormal}, {"uniform", Rng::Uniform}, {"pareto", Rng::Pareto},
    {"normal", Rng::Normal},           {"const", Rng::Constant},  {"exp", Rng::Exponential},
};

// Checks the parameters of a distribution; returns an error text or "".
std::string checkParameters(const RandomSpec& r) {
  const auto& p = r.values;
  switch (static_cast<Rng>(r.rng)) {
    case Rng::Constant:
      return p[0] < 0 ? "a constant must not be negative" : "";
    case Rng::Uniform:
      if (p[0] < 0 || p[1] < p[0]) return "uniform needs 0 <= lower <= upper";
      return "";
    case Rng::Exponential:
      return p[0] <= 0 ? "exp needs a mean > 0" : "";
    case Rng::Pareto:
      return (p[0] <= 0 || p[1] <= 0) ? "pareto needs location > 0 and shape > 0" : "";
    case Rng::Normal:
    case Rng::TruncNormal:
      return p[1] < 0 ? "the standard deviation must not be negative" : "";
  }
  return "unknown distribution";
}

// Default traffic of the "default" FLOWSPEC, as the reference.
Traffic defaultTraffic(Protocol protocol) {
  Traffic t;
  double size = 1440, rate = 0;
  switch (protocol) {
    case Protocol::UDP: size = 1452; rate = 25; break;
    case Protocol::DCCP: size = 1420; break;
    case Protocol::SCTP: size = 1432; break;
    case Protocol::QUIC: size = 1400; break;
    default: break;
  }
  t.rate.values[0] = rate;
  t.size.values[0] = size;
  return t;
}

bool looksLikeOption(std::string_view token) {
  return token.find('=') != std::string_view::npos || token == "v6only";
}

std::optional<std::vector<npmp::OnOffEvent>> parseOnOff(std::string_view value, bool& repeat,
                                                        std::string& error) {
  std::vector<npmp::OnOffEvent> events;
  const auto tokens = split(value, ',');
  repeat = false;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    std::string_view token = tokens[i];
    if (token == "repeat") {
      if (i + 1 != tokens.size()) {
        error = "\"repeat\" must be the last entry of onoff=";
        return std::nullopt;
      }
      repeat = true;
      break;
    }
    npmp::OnOffEvent event;
    if (!token.empty() && token.front() == '+') {
      event.relative = true;
      token.remove_prefix(1);
    }
    std::string text(token);
    // A two-parameter distribution swallows the next comma-separated number.
    for (const auto& d : kDistributions) {
      if (token.substr(0, d.name.size()) == d.name) {
        if (parameterCount(static_cast<std::uint8_t>(d.rng)) == 2 && i + 1 < tokens.size()) {
          text += ",";
          text += tokens[++i];
        }
        break;
      }
    }
    std::string why;
    const auto spec = parseDistribution(text, &why);
    if (!spec) {
      error = "bad on/off time \"" + text + "\": " + why;
      return std::nullopt;
    }
    event.spec = *spec;
    events.push_back(event);
  }
  if (events.empty()) {
    error = "onoff= needs at least one time";
    return std::nullopt;
  }
  if (events.size() > npmp::kMaxOnOffEvents) {
    error = "onoff= has " + std::to_string(events.size()) + " events, at most " +
            std::to_string(npmp::kMaxOnOffEvents) + " fit into one ADD_FLOW message";
    return std::nullopt;
  }
  if (repeat) {
    if (events.size() % 2 != 0) {
      error = "onoff=...,repeat needs an even number of times (on/off pairs)";
      return std::nullopt;
    }
    for (const auto& e : events) {
      if (!e.relative) {
        error = "onoff=...,repeat needs relative times (+...) only";
        return std::nullopt;
      }
    }
  }
  return events;
}

}  // namespace

bool Traffic::enabled() const {
  return !(size.rng == static_cast<std::uint8_t>(Rng::Constant) && size.values[0] <= 0.0);
}

bool Traffic::saturated() const {
  return rate.rng == static_cast<std::uint8_t>(Rng::Constant) && rate.values[0] == 0.0;
}

std::optional<RandomSpec> parseDistribution(std::string_view text, std::string* error) {
  RandomSpec r;
  std::string_view rest = text;
  bool named = false;
  for (const auto& d : kDistributions) {
    if (rest.substr(0, d.name.size()) == d.name) {
      r.rng = static_cast<std::uint8_t>(d.rng);
      rest.remove_prefix(d.name.size());
      named = true;
      break;
    }
  }
  const auto params = split(rest, ',');
  const std::size_t wanted = static_cast<std::size_t>(parameterCount(r.rng));
  auto setError = [&](std::string why) {
    if (error != nullptr) *error = std::move(why);
    return std::nullopt;
  };
  if (!named && (rest.empty() || !(std::isdigit(static_cast<unsigned char>(rest[0])) ||
                                   rest[0] == '.' || rest[0] == '-'))) {
    return setError("not a distribution (const, uniform, exp, pareto, normal, truncnormal) or a number");
  }
  if (params.size() != wanted) {
    return setError(std::string(specName(r.rng)) + " takes " + std::to_string(wanted) +
                    (wanted == 1 ? " parameter" : " comma-separated parameters"));
  }
  for (std::size_t i = 0; i < wanted; ++i) {
    const auto v = parseNumber(params[i]);
    if (!v) return setError("\"" + std::string(params[i]) + "\" is not a number");
    r.values[i] = *v;
  }
  if (auto why = checkParameters(r); !why.empty()) return setError(why);
  return r;
}

std::optional<std::uint8_t> parseCmt(std::string_view text) {
  if (text == "off") return 0;
  if (text == "cmt" || text == "normal" || text == "on") return 1;
  if (text == "cmtrpv1" || text == "rp") return 2;
  if (text == "cmtrpv2") return 3;
  if (text == "mptcp" || text == "like-mptcp" || text == "mptcp-like") return kCmtLikeMptcp;
  if (auto v = parseUnsigned(text, 255)) return static_cast<std::uint8_t>(*v);
  return std::nullopt;
}

const char* cmtName(std::uint8_t cmt) {
  switch (cmt) {
    case 0: return "off";
    case 1: return "cmt";
    case 2: return "cmtrpv1";
    case 3: return "cmtrpv2";
    case 4: return "like-mptcp";
    default: return "custom";
  }
}

const char* bufferSplittingName(std::uint8_t value) {
  static const char* const names[] = {"none", "sender", "receiver", "both"};
  return value < 4 ? names[value] : "unknown";
}

namespace {

// ------------------------------------------------------------ FLOWSPEC options
// One handler per option: it reads `value` into `spec` and returns "" or why the value is bad.
using OptionHandler = std::string (*)(std::string_view key, std::string_view value, FlowSpec& spec);

std::string setFlowId(std::string_view, std::string_view value, FlowSpec& spec) {
  const auto v = parseUnsigned(value, 0xFFFFFFFFULL);
  if (!v) return "expected a flow ID from 0 to 4294967295";
  spec.flowId = static_cast<std::uint32_t>(*v);
  return {};
}

std::string setDescription(std::string_view, std::string_view value, FlowSpec& spec) {
  if (value.size() > 255) return "a description has at most 255 characters";
  for (unsigned char c : value) {
    if (c < 0x20 || c == 0x7F) return "a description must not contain control characters";
  }
  spec.description = std::string(value);
  return {};
}

std::string setMaxMsgSize(std::string_view, std::string_view value, FlowSpec& spec) {
  const bool udp = spec.protocol == Protocol::UDP;
  const std::uint64_t limit = udp ? 65507 : 65535;
  const auto v = parseUnsigned(value, 1000000);
  if (!v || *v < 128 || *v > limit) {
    return "expected a message size from 128 to " + std::to_string(limit) + (udp ? " (the largest UDP datagram)" : "");
  }
  spec.maxMsgSize = static_cast<std::uint16_t>(*v);
  return {};
}

std::string setDefragTimeout(std::string_view, std::string_view value, FlowSpec& spec) {
  const auto v = parseUnsigned(value, 3600000);
  if (!v) return "expected milliseconds from 0 to 3600000";
  spec.defragTimeoutMs = static_cast<std::uint32_t>(*v);
  return {};
}

// ordered=, unordered=, reliable=, unreliable=
std::string setFraction(std::string_view key, std::string_view value, FlowSpec& spec) {
  const auto v = parseNumber(value);
  if (!v || *v < 0.0 || *v > 1.0) return "expected a fraction from 0 to 1";
  if (key == "ordered") spec.ordered = *v;
  if (key == "unordered") spec.ordered = 1.0 - *v;
  if (key == "reliable") spec.reliable = *v;
  if (key == "unreliable") spec.reliable = 1.0 - *v;
  return {};
}

std::string setRtxTimeout(std::string_view, std::string_view value, FlowSpec& spec) {
  const auto v = parseUnsigned(value, 0x7FFFFFFEULL);
  if (!v) return "expected milliseconds";
  spec.retransmissionTrials = npmp::kRetransmitTimeFlag | static_cast<std::uint32_t>(*v);
  return {};
}

std::string setRtxTrials(std::string_view, std::string_view value, FlowSpec& spec) {
  const auto v = parseUnsigned(value, 0x7FFFFFFEULL);
  if (!v) return "expected a number of retransmissions";
  spec.retransmissionTrials = static_cast<std::uint32_t>(*v);
  return {};
}

// rcvbuf=, sndbuf=
std::string setBuffer(std::string_view key, std::string_view value, FlowSpec& spec) {
  const auto v = parseUnsigned(value, 0x7FFFFFFFULL);
  if (!v) return "expected a buffer size in bytes";
  (key == "rcvbuf" ? spec.rcvBufferSize : spec.sndBufferSize) = static_cast<std::uint32_t>(*v);
  return {};
}

std::string setCmt(std::string_view, std::string_view value, FlowSpec& spec) {
  const auto v = parseCmt(value);
  if (!v) return "expected off, cmt, cmtrpv1, cmtrpv2, like-mptcp or a number from 0 to 255";
  spec.cmt = *v;
  return {};
}

std::string setSctpCc(std::string_view, std::string_view value, FlowSpec& spec) {
  static const char* const names[] = {"rfc2581", "hstcp", "htcp", "rtcc"};
  auto it = std::find(std::begin(names), std::end(names), value);
  if (it == std::end(names)) return "expected rfc2581, hstcp, htcp or rtcc";
  spec.sctpCc = static_cast<std::uint8_t>(it - std::begin(names));
  return {};
}

std::string setBufSplit(std::string_view, std::string_view value, FlowSpec& spec) {
  static const char* const names[] = {"none", "sender", "receiver", "both"};
  auto it = std::find(std::begin(names), std::end(names), value);
  if (it == std::end(names)) return "expected none, sender, receiver or both";
  spec.bufferSplitting = static_cast<std::uint8_t>(it - std::begin(names));
  return {};
}

// nrsack=, dac=, error_on_abort=, nodelay=, debug=
std::string setSwitch(std::string_view key, std::string_view value, FlowSpec& spec) {
  const auto b = parseBool(value);
  if (!b) return "expected on or off";
  bool& target = key == "nrsack"           ? spec.nrSack
                 : key == "dac"            ? spec.dac
                 : key == "error_on_abort" ? spec.errorOnAbort
                 : key == "nodelay"        ? spec.noDelay
                                           : spec.debug;
  target = *b;
  return {};
}

std::string setRtoMin(std::string_view, std::string_view value, FlowSpec& spec) {
  const auto v = parseUnsigned(value, npmp::kSctpRtoMinMask);
  if (!v || *v == 0) return "expected milliseconds from 1 to 32767";
  spec.rtoMinMs = static_cast<std::uint16_t>(*v);
  return {};
}

std::string setCcid(std::string_view, std::string_view value, FlowSpec& spec) {
  const auto v = parseUnsigned(value, 255);
  if (!v) return "expected a DCCP CCID from 0 to 255";
  spec.ccid = static_cast<std::uint8_t>(*v);
  return {};
}

std::string setCongestionControl(std::string_view, std::string_view value, FlowSpec& spec) {
  if (value.empty() || value.size() >= npmp::kCongestionControlSize) {
    return "a congestion control name has 1 to 15 characters";
  }
  for (char c : value) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) {
      return "a congestion control name consists of letters, digits, '_' and '-'";
    }
  }
  spec.congestionControl = value == "default" ? "" : std::string(value);
  return {};
}

std::string setOnOff(std::string_view, std::string_view value, FlowSpec& spec) {
  std::string why;
  auto events = parseOnOff(value, spec.repeatOnOff, why);
  if (!events) return why;
  spec.onOff = std::move(*events);
  return {};
}

struct FlowOption {
  std::string_view key;
  OptionHandler handler;
};

constexpr FlowOption kFlowOptions[] = {
    {"id", setFlowId},         {"description", setDescription}, {"maxmsgsize", setMaxMsgSize},
    {"defragtimeout", setDefragTimeout},
    {"ordered", setFraction},  {"unordered", setFraction},      {"reliable", setFraction},
    {"unreliable", setFraction},
    {"rtx_timeout", setRtxTimeout}, {"rtx_trials", setRtxTrials},
    {"rcvbuf", setBuffer},     {"sndbuf", setBuffer},
    {"cmt", setCmt},           {"sctpcc", setSctpCc},           {"bufsplit", setBufSplit},
    {"nrsack", setSwitch},     {"dac", setSwitch},              {"rtomin", setRtoMin},
    {"ccid", setCcid},
    {"error_on_abort", setSwitch}, {"nodelay", setSwitch},      {"debug", setSwitch},
    {"cc", setCongestionControl},  {"onoff", setOnOff},
};

// Applies the option `token` (the `index`th field of the FLOWSPEC); returns "" or the error
// (without the "invalid FLOWSPEC" prefix).
std::string applyOption(std::string_view token, std::size_t index, FlowSpec& spec) {
  if (token.empty()) return "empty field between two ':'";
  const std::size_t eq = token.find('=');
  const std::string_view key = token.substr(0, eq);
  const std::string_view value = eq == std::string_view::npos ? std::string_view() : token.substr(eq + 1);
  auto bad = [&](const std::string& why) { return "option \"" + std::string(token) + "\": " + why; };
  if (key == "v6only") {  // the one option that may stand alone
    const auto b = eq == std::string_view::npos ? std::optional<bool>(true) : parseBool(value);
    if (!b) return bad("expected on or off");
    spec.v6only = *b;
    return {};
  }
  if (eq == std::string_view::npos) {
    return index < 4 ? "\"" + std::string(token) + "\" is neither a traffic entry nor an option"
                     : "unknown option \"" + std::string(token) + "\"";
  }
  for (const auto& option : kFlowOptions) {
    if (option.key != key) continue;
    if (auto why = option.handler(key, value, spec); !why.empty()) return bad(why);
    return {};
  }
  return "unknown option \"" + std::string(token) + "\"";
}

// Reads "default" or up to four traffic entries from the front of `tokens`; `index` is left
// at the first option. Returns "" or the error.
std::string parseTraffic(const std::vector<std::string_view>& tokens, FlowSpec& spec, std::size_t& index) {
  if (tokens[0] == "default") {
    spec.outbound = defaultTraffic(spec.protocol);
    index = 1;
    return {};
  }
  RandomSpec* entries[4] = {&spec.outbound.rate, &spec.outbound.size, &spec.inbound.rate, &spec.inbound.size};
  static const char* const names[4] = {"outbound frame rate", "outbound frame size", "inbound frame rate",
                                       "inbound frame size"};
  for (; index < tokens.size() && index < 4 && !looksLikeOption(tokens[index]); ++index) {
    if (tokens[index].empty()) return "empty field between two ':'";
    std::string why;
    const auto r = parseDistribution(tokens[index], &why);
    if (!r) return std::string(names[index]) + " \"" + std::string(tokens[index]) + "\": " + why;
    *entries[index] = *r;
  }
  if (index == 0) return "it must start with the outbound frame rate or \"default\"";
  return {};
}

// The rules between options and the protocol (`protocol`: the one the FLOWSPEC was given to;
// TCP with cmt=mptcp becomes MPTCP here). Returns "" or the error.
std::string checkProtocolRules(FlowSpec& spec, Protocol protocol) {
  if (spec.cmt != 0) {
    if (protocol == Protocol::TCP && spec.cmt == kCmtLikeMptcp) {
      spec.protocol = Protocol::MPTCP;  // as the reference: TCP with cmt=mptcp is an MPTCP flow
    } else if (protocol == Protocol::MPTCP && spec.cmt == kCmtLikeMptcp) {
      // fine
    } else if (protocol != Protocol::SCTP) {
      return std::string("cmt=") + cmtName(spec.cmt) + " applies only to SCTP flows" +
             (protocol == Protocol::TCP || protocol == Protocol::MPTCP ? " (and cmt=mptcp to TCP)" : "");
    }
  }
  const bool sctpTuning = spec.sctpCc != 0 || spec.bufferSplitting != 0 || spec.nrSack || spec.rtoMinMs != 0 || spec.dac;
  if (sctpTuning && spec.protocol != Protocol::SCTP) {
    return "sctpcc=, bufsplit=, nrsack=, rtomin= and dac= apply only to SCTP flows";
  }
  if (spec.protocol == Protocol::SCTP && spec.nrSack && spec.partiallyReliable() && spec.maxMsgSize > 1200) {
    // usrsctp 0.9.5 aborts the association when PR-SCTP, NR-SACK and fragmented messages meet.
    return "PR-SCTP (unreliable=/rtx_*) with nrsack=on needs messages that fit into one packet: "
           "add maxmsgsize=1200 (or leave NR-SACK off); otherwise the userland stack aborts the association";
  }
  if (!spec.outbound.enabled() && !spec.inbound.enabled()) {
    return "both directions have frame size 0, so the flow would send nothing";
  }
  return {};
}

}  // namespace

ParseResult parse(std::string_view text, Protocol protocol) {
  ParseResult result;
  FlowSpec spec;
  spec.protocol = protocol;
  spec.text = std::string(text);
  auto fail = [&](std::string why) {
    result.error = printable("invalid FLOWSPEC \"" + std::string(text) + "\": " + why);  // one line, whatever came in
    return result;
  };
  if (text.empty()) return fail("it is empty");

  const auto tokens = split(text, ':');
  std::size_t index = 0;
  if (auto why = parseTraffic(tokens, spec, index); !why.empty()) return fail(why);
  for (; index < tokens.size(); ++index) {
    if (auto why = applyOption(tokens[index], index, spec); !why.empty()) return fail(why);
  }
  if (auto why = checkProtocolRules(spec, protocol); !why.empty()) return fail(why);
  result.spec = std::move(spec);
  return result;
}

std::string assignFlowIds(std::vector<FlowSpec>& flows) {
  std::set<std::uint32_t> used;
  std::uint64_t next = 0;
  for (auto& f : flows) {
    if (!f.flowId) {
      if (next > 0xFFFFFFFFULL) return "no flow ID left after 4294967295";
      f.flowId = static_cast<std::uint32_t>(next);
    }
    if (!used.insert(*f.flowId).second) {
      return "flow ID " + std::to_string(*f.flowId) + " is used twice (in \"" + f.text + "\")";
    }
    next = std::uint64_t{*f.flowId} + 1;
    if (f.description.empty()) f.description = "Flow " + std::to_string(*f.flowId);
  }
  return {};
}

}  // namespace npm::flowspec
