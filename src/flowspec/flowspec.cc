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

// A decimal number (strtod would also take hex, "inf" and "nan"), with the unit of `quantity`
// right after it: k/M/G decimal for rates, binary for sizes.
std::optional<double> parseNumber(std::string_view text, Quantity quantity = Quantity::Plain) {
  if (text.empty() || text.size() > 64) return std::nullopt;
  double scale = 1.0;
  if (quantity == Quantity::FrameRate || quantity == Quantity::FrameSize) {
    const bool binary = quantity == Quantity::FrameSize;
    switch (text.back()) {
      case 'k':
      case 'K': scale = binary ? 1024.0 : 1e3; break;
      case 'M': scale = binary ? 1048576.0 : 1e6; break;
      case 'G': scale = binary ? 1073741824.0 : 1e9; break;
      default: break;
    }
    if (scale != 1.0) text.remove_suffix(1);
  }
  if (text.empty() || text.find_first_not_of("0123456789.eE+-") != std::string_view::npos) return std::nullopt;
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v * scale;
}

// The range of a quantity's values (and whole bytes for a size that is not drawn).
Result<void> checkRange(const RandomSpec& r, Quantity quantity) {
  const std::size_t n = static_cast<std::size_t>(parameterCount(r.rng));
  const bool drawn =
      r.rng != static_cast<std::uint8_t>(Rng::Constant) && r.rng != static_cast<std::uint8_t>(Rng::Uniform);
  for (std::size_t i = 0; i < n; ++i) {
    // Normal distributions' second parameter is a spread; pareto's second a shape: only the
    // location-like first parameter (and uniform's bounds) are in the quantity's unit.
    if (i > 0 && r.rng != static_cast<std::uint8_t>(Rng::Uniform)) continue;
    const double v = r.values[i];
    switch (quantity) {
      case Quantity::FrameRate:
        if (v > kMaxFrameRate) return Failure{"a frame rate is at most 1G (10^9 frames/s)"};
        break;
      case Quantity::FrameSize:
        if (v > kMaxFrameSize) return Failure{"a frame size is at most 4294967295 bytes (4 GiB - 1)"};
        if (!drawn && v != std::floor(v)) return Failure{"a frame size is a whole number of bytes"};
        break;
      case Quantity::Seconds:
        if (v > kMaxSeconds) return Failure{"a time is at most 4294967 s (49.7 days)"};
        break;
      case Quantity::Plain: break;
    }
  }
  return {};
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

// Checks the parameters of a distribution.
Result<void> checkParameters(const RandomSpec& r) {
  const auto& p = r.values;
  switch (static_cast<Rng>(r.rng)) {
    case Rng::Constant:
      if (p[0] < 0) return Failure{"a constant must not be negative"};
      return {};
    case Rng::Uniform:
      if (p[0] < 0 || p[1] < p[0]) return Failure{"uniform needs 0 <= lower <= upper"};
      return {};
    case Rng::Exponential:
      if (p[0] <= 0) return Failure{"exp needs a mean > 0"};
      return {};
    case Rng::Pareto:
      if (p[0] <= 0 || p[1] <= 0) return Failure{"pareto needs location > 0 and shape > 0"};
      return {};
    case Rng::Normal:
    case Rng::TruncNormal:
      if (p[1] < 0) return Failure{"the standard deviation must not be negative"};
      return {};
  }
  return Failure{"unknown distribution"};
}

// Default traffic of the "default" FLOWSPEC, as the reference.
Traffic defaultTraffic(Protocol protocol) {
  Traffic t;
  double size = 1440, rate = 0;
  switch (protocol) {
    case Protocol::UDP:
      size = 1452;
      rate = 25;
      break;
    case Protocol::DCCP: size = 1420; break;
    case Protocol::SCTP: size = 1432; break;
    case Protocol::QUIC: size = 1400; break;
    default: break;
  }
  t.rate.values[0] = rate;
  t.size.values[0] = size;
  return t;
}

bool looksLikeOption(std::string_view token) { return token.find('=') != std::string_view::npos || token == "v6only"; }

std::string formatSeconds(double v) {
  char b[64];
  std::snprintf(b, sizeof(b), "%g", v);
  return b;
}

Result<std::vector<npmp::OnOffEvent>> parseOnOff(std::string_view value, bool& repeat) {
  std::vector<npmp::OnOffEvent> events;
  std::optional<double> known = 0.0;  // the time of the event before (at first: the start), when it is known
  const auto tokens = split(value, ',');
  repeat = false;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    std::string_view token = tokens[i];
    if (token == "repeat") {
      if (i + 1 != tokens.size()) {
        return Failure{"\"repeat\" must be the last entry of onoff="};
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
    const auto spec = parseDistribution(text, Quantity::Seconds);
    if (!spec) return Failure{"bad on/off time \"" + text + "\": " + spec.error()};
    event.spec = *spec;
    // Times run forwards: a constant time after the one before (as far as that is known
    // before drawing), a constant relative one after 0.
    const bool constant = spec->rng == static_cast<std::uint8_t>(Rng::Constant);
    if (constant && event.relative && spec->values[0] <= 0.0) {
      return Failure{"on/off time \"+" + text + "\" does not move forward: a relative time must be > 0"};
    }
    if (constant && !event.relative && known && !events.empty() && spec->values[0] <= *known) {
      return Failure{"on/off times must increase: " + text + " s comes after " + formatSeconds(*known) + " s"};
    }
    if (!constant)
      known.reset();
    else if (event.relative && known)
      *known += spec->values[0];
    else if (!event.relative)
      known = spec->values[0];
    if (known && *known > kMaxSeconds) return Failure{"on/off time beyond 4294967 s (49.7 days)"};
    events.push_back(event);
  }
  if (events.empty()) {
    return Failure{"onoff= needs at least one time"};
  }
  if (events.size() > npmp::kMaxOnOffEvents) {
    return Failure{"onoff= has " + std::to_string(events.size()) + " events, at most " +
                   std::to_string(npmp::kMaxOnOffEvents) + " fit into one ADD_FLOW message"};
  }
  if (repeat) {
    if (events.size() % 2 != 0) {
      return Failure{"onoff=...,repeat needs an even number of times (on/off pairs)"};
    }
    for (const auto& e : events) {
      if (!e.relative) {
        return Failure{"onoff=...,repeat needs relative times (+...) only"};
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

Result<RandomSpec> parseDistribution(std::string_view text, Quantity quantity) {
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
  auto setError = [](std::string why) { return Failure{std::move(why)}; };
  if (!named &&
      (rest.empty() || !(std::isdigit(static_cast<unsigned char>(rest[0])) || rest[0] == '.' || rest[0] == '-'))) {
    return setError("not a distribution (const, uniform, exp, pareto, normal, truncnormal) or a number");
  }
  if (params.size() != wanted) {
    return setError(std::string(specName(r.rng)) + " takes " + std::to_string(wanted) +
                    (wanted == 1 ? " parameter" : " comma-separated parameters"));
  }
  for (std::size_t i = 0; i < wanted; ++i) {
    // Only the parameters in the quantity's unit take its suffixes (not pareto's shape).
    const bool unit = i == 0 || r.rng == static_cast<std::uint8_t>(Rng::Uniform) ||
                      r.rng == static_cast<std::uint8_t>(Rng::Normal) ||
                      r.rng == static_cast<std::uint8_t>(Rng::TruncNormal);
    const auto v = parseNumber(params[i], unit ? quantity : Quantity::Plain);
    if (!v) {
      const char* units = quantity == Quantity::FrameRate   ? " (a decimal number, optionally with k, M or G)"
                          : quantity == Quantity::FrameSize ? " (a decimal number of bytes, optionally with k, M or G)"
                                                            : "";
      return setError("\"" + std::string(params[i]) + "\" is not a number" + units);
    }
    r.values[i] = *v;
  }
  if (auto checked = checkParameters(r); !checked) return setError(checked.error());
  if (auto range = checkRange(r, quantity); !range) return setError(range.error());
  return r;
}

std::optional<std::uint8_t> parseCmt(std::string_view text) {
  if (text == "off") return 0;
  if (text == "cmt" || text == "normal" || text == "on") return 1;
  if (text == "cmtrpv1" || text == "rp") return 2;
  if (text == "cmtrpv2") return 3;
  if (text == "mptcp" || text == "like-mptcp" || text == "mptcp-like") return kCmtLikeMptcp;
  if (text == "wprsctp" || text == "w-pr-sctp") return kCmtWprSctp;
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
    case 5: return "wprsctp";
    default: return "custom";
  }
}

const char* bufferSplittingName(std::uint8_t value) {
  static const char* const names[] = {"none", "sender", "receiver", "both"};
  return names[value & 3];
}

namespace {

// ------------------------------------------------------------ FLOWSPEC options
// One handler per option: it reads `value` into `spec`, or says why the value is bad.
using OptionHandler = Result<void> (*)(std::string_view key, std::string_view value, FlowSpec& spec);

Result<void> setFlowId(std::string_view, std::string_view value, FlowSpec& spec) {
  const auto v = parseUnsigned(value, 0xFFFFFFFFULL);
  if (!v) return Failure{"expected a flow ID from 0 to 4294967295"};
  spec.flowId = static_cast<std::uint32_t>(*v);
  return {};
}

Result<void> setDescription(std::string_view, std::string_view value, FlowSpec& spec) {
  if (value.size() > 255) return Failure{"a description has at most 255 characters"};
  for (unsigned char c : value) {
    if (c < 0x20 || c == 0x7F) return Failure{"a description must not contain control characters"};
  }
  spec.description = std::string(value);
  return {};
}

Result<void> setMaxMsgSize(std::string_view, std::string_view value, FlowSpec& spec) {
  const bool udp = spec.protocol == Protocol::UDP;
  const std::uint64_t limit = udp ? 65507 : 65535;
  const auto v = parseUnsigned(value, 1000000);
  if (!v || *v < 128 || *v > limit) {
    return Failure{"expected a message size from 128 to " + std::to_string(limit) +
                   (udp ? " (the largest UDP datagram)" : "")};
  }
  spec.maxMsgSize = static_cast<std::uint16_t>(*v);
  return {};
}

Result<void> setDefragTimeout(std::string_view, std::string_view value, FlowSpec& spec) {
  const auto v = parseUnsigned(value, 3600000);
  if (!v) return Failure{"expected milliseconds from 0 to 3600000"};
  spec.defragTimeoutMs = static_cast<std::uint32_t>(*v);
  return {};
}

// ordered=, unordered=, reliable=, unreliable=
Result<void> setFraction(std::string_view key, std::string_view value, FlowSpec& spec) {
  const auto v = parseNumber(value);
  if (!v || *v < 0.0 || *v > 1.0) return Failure{"expected a fraction from 0 to 1"};
  if (key == "ordered") spec.ordered = *v;
  if (key == "unordered") spec.ordered = 1.0 - *v;
  if (key == "reliable") spec.reliable = *v;
  if (key == "unreliable") spec.reliable = 1.0 - *v;
  return {};
}

Result<void> setRtxTimeout(std::string_view, std::string_view value, FlowSpec& spec) {
  const auto v = parseUnsigned(value, 0x7FFFFFFEULL);
  if (!v) return Failure{"expected milliseconds"};
  spec.retransmissionTrials = npmp::kRetransmitTimeFlag | static_cast<std::uint32_t>(*v);
  return {};
}

Result<void> setRtxTrials(std::string_view, std::string_view value, FlowSpec& spec) {
  const auto v = parseUnsigned(value, 0x7FFFFFFEULL);
  if (!v) return Failure{"expected a number of retransmissions"};
  spec.retransmissionTrials = static_cast<std::uint32_t>(*v);
  return {};
}

// rcvbuf=, sndbuf=
Result<void> setBuffer(std::string_view key, std::string_view value, FlowSpec& spec) {
  const auto v = parseUnsigned(value, 0x7FFFFFFFULL);
  if (!v) return Failure{"expected a buffer size in bytes"};
  (key == "rcvbuf" ? spec.rcvBufferSize : spec.sndBufferSize) = static_cast<std::uint32_t>(*v);
  return {};
}

Result<void> setCmt(std::string_view, std::string_view value, FlowSpec& spec) {
  const auto v = parseCmt(value);
  if (!v) return Failure{"expected off, cmt, cmtrpv1, cmtrpv2, like-mptcp, wprsctp or a number from 0 to 255"};
  spec.cmt = *v;
  return {};
}

Result<void> setSctpCc(std::string_view, std::string_view value, FlowSpec& spec) {
  static const char* const names[] = {"rfc2581", "hstcp", "htcp", "rtcc"};
  auto it = std::find(std::begin(names), std::end(names), value);
  if (it == std::end(names)) return Failure{"expected rfc2581, hstcp, htcp or rtcc"};
  spec.sctpCc = static_cast<std::uint8_t>(it - std::begin(names));
  return {};
}

Result<void> setBufSplit(std::string_view, std::string_view value, FlowSpec& spec) {
  static const char* const names[] = {"none", "sender", "receiver", "both"};
  auto it = std::find(std::begin(names), std::end(names), value);
  if (it == std::end(names)) return Failure{"expected none, sender, receiver or both"};
  spec.bufferSplitting =
      static_cast<std::uint8_t>((spec.bufferSplitting & kBufferSplitOnBuffered) | (it - std::begin(names)));
  return {};
}

Result<void> setBufSplitOn(std::string_view, std::string_view value, FlowSpec& spec) {
  if (value != "outstanding" && value != "buffered") return Failure{"expected outstanding or buffered"};
  spec.bufferSplitting =
      static_cast<std::uint8_t>((spec.bufferSplitting & 3) | (value == "buffered" ? kBufferSplitOnBuffered : 0));
  return {};
}

// nrsack=, dac=, smartfr=, reschedule=, pktdrop=, error_on_abort=, nodelay=, debug=
Result<void> setSwitch(std::string_view key, std::string_view value, FlowSpec& spec) {
  const auto b = parseBool(value);
  if (!b) return Failure{"expected on or off"};
  bool& target = key == "nrsack"           ? spec.nrSack
                 : key == "dac"            ? spec.dac
                 : key == "smartfr"        ? spec.smartFr
                 : key == "reschedule"     ? spec.reschedule
                 : key == "pktdrop"        ? spec.pktDrop
                 : key == "error_on_abort" ? spec.errorOnAbort
                 : key == "nodelay"        ? spec.noDelay
                                           : spec.debug;
  target = *b;
  return {};
}

Result<void> setRtoMin(std::string_view, std::string_view value, FlowSpec& spec) {
  const auto v = parseUnsigned(value, npmp::kSctpRtoMinMask);
  if (!v || *v == 0) return Failure{"expected milliseconds from 1 to 32767"};
  spec.rtoMinMs = static_cast<std::uint16_t>(*v);
  return {};
}

Result<void> setCcid(std::string_view, std::string_view value, FlowSpec& spec) {
  const auto v = parseUnsigned(value, 255);
  if (!v) return Failure{"expected a DCCP CCID from 0 to 255"};
  spec.ccid = static_cast<std::uint8_t>(*v);
  return {};
}

Result<void> setCongestionControl(std::string_view, std::string_view value, FlowSpec& spec) {
  if (value.empty() || value.size() >= npmp::kCongestionControlSize) {
    return Failure{"a congestion control name has 1 to 15 characters"};
  }
  for (char c : value) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) {
      return Failure{"a congestion control name consists of letters, digits, '_' and '-'"};
    }
  }
  spec.congestionControl = value == "default" ? "" : std::string(value);
  return {};
}

// rate=, in_rate=: bit/s with k, M, G (10^3, 10^6, 10^9).
Result<void> setBitRate(std::string_view key, std::string_view value, FlowSpec& spec) {
  const auto v = parseNumber(value, Quantity::FrameRate);  // the same decimal units
  if (!v || *v <= 0.0 || *v > 1e12)
    return Failure{"expected a bit rate in bit/s above 0, at most 1000G (e.g. 10M, 2.5G)"};
  (key == "rate" ? spec.outBitRate : spec.inBitRate) = *v;
  return {};
}

// The frame rate that carries `bitRate` in frames of `size` (a distribution with a known mean).
Result<void> applyBitRate(double bitRate, Traffic& t, const char* key) {
  const auto& p = t.size.values;
  double mean = 0.0;
  switch (static_cast<Rng>(t.size.rng)) {
    case Rng::Constant: mean = p[0]; break;
    case Rng::Uniform: mean = (p[0] + p[1]) / 2.0; break;
    case Rng::Exponential: mean = p[0]; break;
    default: return Failure{std::string(key) + "= needs a frame size whose mean is known (const, uniform or exp)"};
  }
  if (mean < 1.0) return Failure{std::string(key) + "= needs a frame size of at least one byte in its direction"};
  if (!(t.rate.rng == static_cast<std::uint8_t>(Rng::Constant) && t.rate.values[0] == 0.0)) {
    return Failure{std::string(key) + "= sets the frame rate: give the rate entry as const0 (or 0)"};
  }
  const double frames = bitRate / (8.0 * mean);
  if (frames > kMaxFrameRate) return Failure{std::string(key) + "= would be more than 10^9 frames/s"};
  t.rate.values[0] = frames;
  return {};
}

// transfer=BYTES (k/K, M, G: 2^10, 2^20, 2^30, as frame sizes), frames=N (k, M, G: 10^3, 10^6, 10^9).
Result<void> setTransfer(std::string_view key, std::string_view value, FlowSpec& spec) {
  const bool bytes = key == "transfer";
  const auto v = parseNumber(value, bytes ? Quantity::FrameSize : Quantity::FrameRate);
  const double low = bytes ? static_cast<double>(kMinTransferBytes) : 1.0;
  if (!v || *v != std::floor(*v) || *v < low || *v > static_cast<double>(kMaxTransfer)) {
    return Failure{bytes ? "expected a whole number of bytes from 48 (one DATA message header) to 2^53 - 1, "
                           "optionally with k, M or G (2^10, 2^20, 2^30)"
                         : "expected a whole number of frames from 1 to 2^53 - 1, optionally with k, M or G "
                           "(10^3, 10^6, 10^9)"};
  }
  (bytes ? spec.transferBytes : spec.transferFrames) = static_cast<std::uint64_t>(*v);
  return {};
}

// tos=BYTE (0 to 255, decimal or 0x hex), dscp=CODEPOINT (0 to 63): the TOS byte is DSCP << 2.
Result<void> setTos(std::string_view key, std::string_view value, FlowSpec& spec) {
  const bool dscp = key == "dscp";
  std::optional<std::uint64_t> v;
  if (!dscp && value.size() > 2 && value[0] == '0' && (value[1] == 'x' || value[1] == 'X')) {
    const std::string_view digits = value.substr(2);
    if (digits.size() <= 2 && digits.find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos) {
      v = std::stoul(std::string(digits), nullptr, 16);
    }
  } else {
    v = parseUnsigned(value, dscp ? 63 : 255);
  }
  if (!v)
    return Failure{dscp ? "expected a DSCP from 0 to 63 (e.g. 46 for EF)"
                        : "expected a TOS byte from 0 to 255 "
                          "(decimal or 0x00 to 0xff, e.g. 0xb8)"};
  if (!dscp && (*v & 3) != 0) {
    return Failure{
        "the two low bits of the TOS byte are ECN's, which the kernel sets: give a multiple of 4 "
        "(DSCP << 2, e.g. 0xb8 for EF) or dscp="};
  }
  if (spec.tos) return Failure{"tos= and dscp= set the same byte: give one of them once"};
  spec.tos = static_cast<std::uint8_t>(dscp ? *v << 2 : *v);
  return {};
}

Result<void> setOnOff(std::string_view, std::string_view value, FlowSpec& spec) {
  auto events = parseOnOff(value, spec.repeatOnOff);
  if (!events) return Failure{events.error()};
  spec.onOff = std::move(*events);
  return {};
}

struct FlowOption {
  std::string_view key;
  OptionHandler handler;
};

constexpr FlowOption kFlowOptions[] = {
    {"id", setFlowId},
    {"description", setDescription},
    {"maxmsgsize", setMaxMsgSize},
    {"defragtimeout", setDefragTimeout},
    {"ordered", setFraction},
    {"unordered", setFraction},
    {"reliable", setFraction},
    {"unreliable", setFraction},
    {"rtx_timeout", setRtxTimeout},
    {"rtx_trials", setRtxTrials},
    {"rcvbuf", setBuffer},
    {"sndbuf", setBuffer},
    {"cmt", setCmt},
    {"sctpcc", setSctpCc},
    {"bufsplit", setBufSplit},
    {"bufsplit-on", setBufSplitOn},
    {"nrsack", setSwitch},
    {"dac", setSwitch},
    {"rtomin", setRtoMin},
    {"smartfr", setSwitch},
    {"pktdrop", setSwitch},
    {"reschedule", setSwitch},
    {"ccid", setCcid},
    {"error_on_abort", setSwitch},
    {"nodelay", setSwitch},
    {"debug", setSwitch},
    {"cc", setCongestionControl},
    {"onoff", setOnOff},
    {"rate", setBitRate},
    {"in_rate", setBitRate},
    {"transfer", setTransfer},
    {"frames", setTransfer},
    {"tos", setTos},
    {"dscp", setTos},
};

// Applies the option `token` (the `index`th field of the FLOWSPEC); the error comes without
// the "invalid FLOWSPEC" prefix.
Result<void> applyOption(std::string_view token, std::size_t index, FlowSpec& spec) {
  if (token.empty()) return Failure{"empty field between two ':'"};
  const std::size_t eq = token.find('=');
  const std::string_view key = token.substr(0, eq);
  const std::string_view value = eq == std::string_view::npos ? std::string_view() : token.substr(eq + 1);
  auto bad = [&](const std::string& why) { return Failure{"option \"" + std::string(token) + "\": " + why}; };
  if (key == "v6only") {  // the one option that may stand alone
    const auto b = eq == std::string_view::npos ? std::optional<bool>(true) : parseBool(value);
    if (!b) return bad("expected on or off");
    spec.v6only = *b;
    return {};
  }
  if (eq == std::string_view::npos) {
    return Failure{index < 4 ? "\"" + std::string(token) + "\" is neither a traffic entry nor an option"
                             : "unknown option \"" + std::string(token) + "\""};
  }
  for (const auto& option : kFlowOptions) {
    if (option.key != key) continue;
    if (auto set = option.handler(key, value, spec); !set) return bad(set.error());
    return {};
  }
  return Failure{"unknown option \"" + std::string(token) + "\""};
}

// Reads "default" or up to four traffic entries from the front of `tokens`; `index` is left
// at the first option.
Result<void> parseTraffic(const std::vector<std::string_view>& tokens, FlowSpec& spec, std::size_t& index) {
  if (tokens[0] == "default") {
    spec.outbound = defaultTraffic(spec.protocol);
    index = 1;
    return {};
  }
  RandomSpec* entries[4] = {&spec.outbound.rate, &spec.outbound.size, &spec.inbound.rate, &spec.inbound.size};
  static const char* const names[4] = {"outbound frame rate", "outbound frame size", "inbound frame rate",
                                       "inbound frame size"};
  for (; index < tokens.size() && index < 4 && !looksLikeOption(tokens[index]); ++index) {
    if (tokens[index].empty()) return Failure{"empty field between two ':'"};
    const auto r = parseDistribution(tokens[index], index % 2 == 0 ? Quantity::FrameRate : Quantity::FrameSize);
    if (!r) return Failure{std::string(names[index]) + " \"" + std::string(tokens[index]) + "\": " + r.error()};
    *entries[index] = *r;
  }
  if (index == 0) return Failure{"it must start with the outbound frame rate or \"default\""};
  // A rate without its size: the flow would not send what its FLOWSPEC seems to say.
  if (index == 1) return Failure{"the outbound frame rate needs the outbound frame size after it (RATE:SIZE)"};
  if (index == 3) {
    return Failure{
        "the inbound frame rate needs the inbound frame size after it: two traffic entries "
        "(out rate:out size) or four (out rate:out size:in rate:in size)"};
  }
  return {};
}

// The rules between options and the protocol (`protocol`: the one the FLOWSPEC was given to;
// TCP with cmt=mptcp becomes MPTCP here).
Result<void> checkProtocolRules(FlowSpec& spec, Protocol protocol) {
  if (spec.cmt != 0) {
    if (protocol == Protocol::TCP && spec.cmt == kCmtLikeMptcp) {
      spec.protocol = Protocol::MPTCP;  // as the reference: TCP with cmt=mptcp is an MPTCP flow
    } else if (protocol == Protocol::MPTCP && spec.cmt == kCmtLikeMptcp) {
      // fine
    } else if (protocol != Protocol::SCTP) {
      return Failure{std::string("cmt=") + cmtName(spec.cmt) + " applies only to SCTP flows" +
                     (protocol == Protocol::TCP || protocol == Protocol::MPTCP ? " (and cmt=mptcp to TCP)" : "")};
    }
  }
  const bool sctpTuning = spec.sctpCc != 0 || spec.bufferSplitting != 0 || spec.nrSack || spec.rtoMinMs != 0 ||
                          spec.dac || spec.smartFr || spec.reschedule || spec.pktDrop;
  if (sctpTuning && spec.protocol != Protocol::SCTP) {
    return Failure{
        "sctpcc=, bufsplit=, bufsplit-on=, nrsack=, pktdrop=, rtomin=, dac=, smartfr= and reschedule= apply "
        "only to SCTP flows"};
  }
  if (spec.smartFr && spec.cmt == 0) {
    return Failure{"smartfr=on changes CMT's split fast retransmit, which a flow without CMT does not use: add cmt="};
  }
  if (spec.cmt == kCmtWprSctp && spec.sctpCc != 0) {
    return Failure{
        "cmt=wprsctp sets ssthresh from its Westwood+ estimate in the rfc2581 module: leave sctpcc= at "
        "rfc2581"};
  }
  if (spec.reschedule && spec.cmt == 0) {
    return Failure{
        "reschedule=on moves a blocking chunk to another path, which a flow without CMT does not use: add cmt="};
  }
  if ((spec.bufferSplitting & kBufferSplitOnBuffered) && (spec.bufferSplitting & 3) == 0) {
    return Failure{"bufsplit-on=buffered says how to split, bufsplit= whether: add bufsplit=sender, receiver or both"};
  }
  if (spec.protocol == Protocol::SCTP && spec.nrSack && spec.partiallyReliable() && spec.maxMsgSize > 1200) {
    // usrsctp 0.9.5 aborts the association when PR-SCTP, NR-SACK and fragmented messages meet.
    return Failure{
        "PR-SCTP (unreliable=/rtx_*) with nrsack=on needs messages that fit into one packet: "
        "add maxmsgsize=1200 (or leave NR-SACK off); otherwise the userland stack aborts the association"};
  }
  // Options of some transports only, refused elsewhere as cmt= is (the reference ignored them).
  const bool stream = spec.protocol == Protocol::TCP || spec.protocol == Protocol::MPTCP;
  const bool sctp = spec.protocol == Protocol::SCTP;
  const char* name = npmp::protocolName(spec.protocol);
  if (!sctp && spec.protocol != Protocol::QUIC && (spec.ordered < 1.0 || spec.partiallyReliable())) {
    return Failure{std::string("unordered=/ordered=, unreliable=/reliable=, rtx_timeout= and rtx_trials= apply only to "
                               "SCTP flows (PR-SCTP, unordered delivery), not to ") +
                   name};
  }
  if (spec.ccid != 0 && spec.protocol != Protocol::DCCP)
    return Failure{std::string("ccid= applies only to DCCP flows, not to ") + name};
  if (spec.noDelay && !stream && !sctp && spec.protocol != Protocol::QUIC) {
    return Failure{std::string("nodelay= applies to TCP, MPTCP and SCTP flows, not to ") + name};
  }
  if (!spec.congestionControl.empty() && !stream && spec.protocol != Protocol::QUIC) {
    return Failure{std::string("cc= applies to TCP, MPTCP and QUIC flows, not to ") + name +
                   (sctp                              ? " (SCTP's congestion control is sctpcc=)"
                    : spec.protocol == Protocol::DCCP ? " (DCCP's is ccid=)"
                                                      : "")};
  }
  if (spec.protocol == Protocol::QUIC) {
    // A QUIC flow is a pair of streams of a connection the flows share (quic/README.md).
    if (!spec.congestionControl.empty() && spec.congestionControl != "reno" && spec.congestionControl != "cubic") {
      return Failure{"cc=" + spec.congestionControl +
                     ": a QUIC flow's congestion control is reno, cubic or default "
                     "(Reno)"};
    }
    if (spec.ordered < 1.0 || spec.partiallyReliable()) {
      return Failure{
          "unordered=, unreliable=, rtx_timeout= and rtx_trials= do not apply to QUIC flows: a QUIC stream "
          "is ordered and reliable"};
    }
    if (spec.ccid != 0) return Failure{"ccid= applies only to DCCP flows"};
    if (spec.rcvBufferSize != 0 || spec.sndBufferSize != 0) {
      return Failure{
          "rcvbuf= and sndbuf= do not apply to QUIC flows (the streams of a QUIC connection share its UDP "
          "socket; QUIC's flow control windows bound what is buffered)"};
    }
    if (spec.noDelay) return Failure{"nodelay= applies to TCP, MPTCP and SCTP flows, not to QUIC"};
  }
  if (!spec.outbound.enabled() && !spec.inbound.enabled()) {
    return Failure{"both directions have frame size 0, so the flow would send nothing"};
  }
  if (spec.transferBytes != 0 && spec.transferFrames != 0) {
    return Failure{"transfer= and frames= both end the flow's sending: give one of them"};
  }
  if (spec.fixedSize() && !spec.outbound.enabled()) {
    return Failure{
        "transfer= and frames= limit the active's outbound direction, which sends nothing here (frame size "
        "0); ADD_FLOW has no field to limit the passive's sending"};
  }
  if (spec.tos && (sctp || spec.protocol == Protocol::QUIC)) {
    return Failure{std::string("tos= and dscp= apply to TCP, MPTCP, UDP and DCCP flows, not to ") + name +
                   (sctp ? " (the userland SCTP stack sends every association through one UDP socket of the process "
                           "and does not put a DSCP into its IP header)"
                         : " (the flows of a QUIC connection share its UDP socket)")};
  }
  return {};
}

}  // namespace

Result<FlowSpec> parse(std::string_view text, Protocol protocol) {
  FlowSpec spec;
  spec.protocol = protocol;
  spec.text = std::string(text);
  auto fail = [&](const std::string& why) {
    return Failure{printable("invalid FLOWSPEC \"" + std::string(text) + "\": " + why)};  // one line, whatever came in
  };
  if (text.empty()) return fail("it is empty");

  const auto tokens = split(text, ':');
  std::size_t index = 0;
  if (auto traffic = parseTraffic(tokens, spec, index); !traffic) return fail(traffic.error());
  for (; index < tokens.size(); ++index) {
    if (auto option = applyOption(tokens[index], index, spec); !option) return fail(option.error());
  }
  if (spec.outBitRate) {
    if (auto r = applyBitRate(*spec.outBitRate, spec.outbound, "rate"); !r) return fail(r.error());
  }
  if (spec.inBitRate) {
    if (auto r = applyBitRate(*spec.inBitRate, spec.inbound, "in_rate"); !r) return fail(r.error());
  }
  if (auto rules = checkProtocolRules(spec, protocol); !rules) return fail(rules.error());
  return spec;
}

Result<void> assignFlowIds(std::vector<FlowSpec>& flows) {
  std::set<std::uint32_t> used;
  std::uint64_t next = 0;
  for (auto& f : flows) {
    if (!f.flowId) {
      if (next > 0xFFFFFFFFULL) return Failure{"no flow ID left after 4294967295"};
      f.flowId = static_cast<std::uint32_t>(next);
    }
    if (!used.insert(*f.flowId).second) {
      return Failure{"flow ID " + std::to_string(*f.flowId) + " is used twice (in \"" + f.text + "\")"};
    }
    next = std::uint64_t{*f.flowId} + 1;
    if (f.description.empty()) f.description = "Flow " + std::to_string(*f.flowId);
  }
  return {};
}

}  // namespace npm::flowspec
