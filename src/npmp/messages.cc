#include "npmp/messages.h"

#include <bit>
#include <cmath>
#include <algorithm>
#include <cstring>

namespace npm::npmp {

namespace {

// ---- primitive writers (big-endian unless stated)
void put8(Bytes& b, std::uint8_t v) { b.push_back(v); }
void put16(Bytes& b, std::uint16_t v) {
  b.push_back(static_cast<std::uint8_t>(v >> 8));
  b.push_back(static_cast<std::uint8_t>(v));
}
void put16le(Bytes& b, std::uint16_t v) {
  b.push_back(static_cast<std::uint8_t>(v));
  b.push_back(static_cast<std::uint8_t>(v >> 8));
}
void put32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
}
void put64(Bytes& b, std::uint64_t v) {
  for (int s = 56; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
}
void putDouble(Bytes& b, double v) { put64(b, std::bit_cast<std::uint64_t>(v)); }
void putString(Bytes& b, std::string_view s, std::size_t size) {
  const std::size_t n = std::min(s.size(), size);
  b.insert(b.end(), s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n));
  b.insert(b.end(), size - n, 0);
}
void putHeader(Bytes& b, Type type, std::uint8_t flags, std::size_t length) {
  put8(b, static_cast<std::uint8_t>(type));
  put8(b, flags);
  put16(b, static_cast<std::uint16_t>(length));
}
void putRandom(Bytes& b, const RandomSpec& r) {
  for (double v : r.values) putDouble(b, v);
}

void store16(std::uint8_t* p, std::uint16_t v) {
  p[0] = v >> 8;
  p[1] = v & 0xFF;
}
void store32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}
void store64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (56 - 8 * i));
}

// ---- primitive readers; callers have checked the size
std::uint16_t get16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }
std::uint16_t get16le(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[1] << 8 | p[0]); }
std::uint32_t get32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}
std::uint64_t get64(const std::uint8_t* p) { return std::uint64_t{get32(p)} << 32 | get32(p + 4); }
double getDouble(const std::uint8_t* p) { return std::bit_cast<double>(get64(p)); }
std::string getString(const std::uint8_t* p, std::size_t size) {
  std::size_t n = 0;
  while (n < size && p[n] != 0) ++n;
  return std::string(reinterpret_cast<const char*>(p), n);
}

constexpr std::uint8_t kMaxRng = 5;

DecodeResult fail(std::string reason) { return Failure{std::move(reason)}; }

std::string sizeError(const char* what, std::size_t got, std::size_t expected) {
  return std::string(what) + " message has length " + std::to_string(got) + ", expected " + std::to_string(expected);
}

Result<RandomSpec> readRandom(const std::uint8_t* p, std::uint8_t rng, const char* what) {
  if (rng > kMaxRng) {
    return Failure{std::string("ADD_FLOW ") + what + " has unknown distribution id " + std::to_string(rng)};
  }
  RandomSpec spec;
  spec.rng = rng;
  for (std::size_t i = 0; i < 4; ++i) {
    spec.values[i] = getDouble(p + 8 * i);
    if (!std::isfinite(spec.values[i])) return Failure{std::string("ADD_FLOW ") + what + " has a non-finite parameter"};
  }
  return spec;
}

}  // namespace

const char* typeName(std::uint8_t type) {
  switch (static_cast<Type>(type)) {
    case Type::Acknowledge: return "ACKNOWLEDGE";
    case Type::AddFlow: return "ADD_FLOW";
    case Type::RemoveFlow: return "REMOVE_FLOW";
    case Type::IdentifyFlow: return "IDENTIFY_FLOW";
    case Type::Data: return "DATA";
    case Type::Start: return "START";
    case Type::Stop: return "STOP";
    case Type::Results: return "RESULTS";
    case Type::AuthHello: return "AUTH_HELLO";
    case Type::AuthChallenge: return "AUTH_CHALLENGE";
    case Type::AuthResponse: return "AUTH_RESPONSE";
  }
  return "UNKNOWN";
}

const char* protocolName(Protocol protocol) {
  switch (protocol) {
    case Protocol::TCP: return "TCP";
    case Protocol::UDP: return "UDP";
    case Protocol::DCCP: return "DCCP";
    case Protocol::SCTP: return "SCTP";
    case Protocol::QUIC: return "QUIC";
    case Protocol::MPTCP: return "MPTCP";
  }
  return "unknown";
}

void encode(const Acknowledge& m, Bytes& out) {
  putHeader(out, Type::Acknowledge, 0, kAcknowledgeSize);
  put32(out, m.flowId);
  put64(out, m.measurementId);
  put16(out, m.streamId);
  put16(out, 0);
  put32(out, m.status);
}

void encode(const AddFlow& m, Bytes& out) {
  const std::size_t length = kAddFlowBaseSize + kOnOffEventSize * m.onOffEvents.size();
  putHeader(out, Type::AddFlow, m.flags, length);
  put32(out, m.flowId);
  put64(out, m.measurementId);
  put16(out, m.streamId);
  put16le(out, static_cast<std::uint16_t>(m.protocol));
  putString(out, m.description, kDescriptionSize);
  put32(out, m.orderedMode);
  put32(out, m.reliableMode);
  put32(out, m.retransmissionTrials);
  putRandom(out, m.frameRate);
  putRandom(out, m.frameSize);
  put8(out, m.frameRate.rng);
  put8(out, m.frameSize.rng);
  put32(out, m.rcvBufferSize);
  put32(out, m.sndBufferSize);
  put16(out, m.maxMsgSize);
  put8(out, m.cmt);
  put8(out, m.ccid);
  put16(out, m.sctpRtoMinAndDac);  // NDiffPorts (obsolete): SCTP tuning
  putString(out, "", 16);          // PathMgr (obsolete)
  putString(out, m.congestionControl.empty() ? "default" : m.congestionControl, kCongestionControlSize);
  put32(out, m.runtimeMs);       // Scheduler (obsolete): the runtime,
  put32(out, m.sctpMechanisms);  // the CMT-SCTP mechanisms
  put64(out, m.seed);            // and the run's seed
  put16(out, static_cast<std::uint16_t>(m.onOffEvents.size()));
  for (const OnOffEvent& e : m.onOffEvents) {
    put8(out, e.spec.rng);
    put8(out, e.relative ? kOnOffRelativeTime : 0);
    put16(out, 0);
    putRandom(out, e.spec);
  }
}

void encode(const RemoveFlow& m, Bytes& out) {
  putHeader(out, Type::RemoveFlow, 0, kRemoveFlowSize);
  put32(out, m.flowId);
  put64(out, m.measurementId);
  put16(out, m.streamId);
}

void encode(const IdentifyFlow& m, Bytes& out) {
  putHeader(out, Type::IdentifyFlow, m.flags, kIdentifyFlowSize);
  put32(out, m.flowId);
  put64(out, kIdentifyMagic);
  put64(out, m.measurementId);
  put16(out, m.streamId);
}

void encode(const Start& m, Bytes& out) {
  putHeader(out, Type::Start, m.flags, kStartStopSize);
  put32(out, m.warmupMs);
  put64(out, m.measurementId);
}

void encode(const Stop& m, Bytes& out) {
  putHeader(out, Type::Stop, 0, kStartStopSize);
  put32(out, 0);
  put64(out, m.measurementId);
}

void encode(const Results& m, Bytes& out) {
  putHeader(out, Type::Results, m.flags, kHeaderSize + m.data.size());
  out.insert(out.end(), m.data.begin(), m.data.end());
}

void encode(const AuthHello& m, Bytes& out) {
  putHeader(out, Type::AuthHello, 0, kAuthHelloSize);
  out.insert(out.end(), m.nonce.begin(), m.nonce.end());
}

void encode(const AuthChallenge& m, Bytes& out) {
  putHeader(out, Type::AuthChallenge, 0, kAuthChallengeSize);
  out.insert(out.end(), m.nonce.begin(), m.nonce.end());
  out.insert(out.end(), m.mac.begin(), m.mac.end());
}

void encode(const AuthResponse& m, Bytes& out) {
  putHeader(out, Type::AuthResponse, 0, kAuthResponseSize);
  out.insert(out.end(), m.mac.begin(), m.mac.end());
}

void encodeDataHeader(const DataHeader& h, std::uint8_t* p) {
  p[0] = static_cast<std::uint8_t>(Type::Data);
  p[1] = h.flags;
  store16(p + 2, h.length);
  store32(p + 4, h.flowId);
  store64(p + 8, h.measurementId);
  store16(p + 16, h.streamId);
  store16(p + 18, 0);
  store32(p + 20, h.frameId);
  store64(p + 24, h.seqNumber);
  store64(p + 32, h.byteSeqNumber);
  store64(p + 40, h.timeStamp);
}

void fillPayload(std::uint8_t* out, std::size_t length, bool fromActive) {
  // 98 values (30…127) repeat; build one period and copy it.
  std::uint8_t period[98];
  for (int i = 0; i < 98; ++i) period[i] = static_cast<std::uint8_t>(fromActive ? 30 + i : 127 - i);
  std::size_t done = 0;
  while (done < length) {
    const std::size_t n = std::min<std::size_t>(98, length - done);
    std::memcpy(out + done, period, n);
    done += n;
  }
}

Result<std::size_t> declaredLength(std::span<const std::uint8_t> buffer) {
  const std::size_t length = get16(buffer.data() + 2);
  if (length < kHeaderSize) return Failure{"message length " + std::to_string(length) + " is below the header size 4"};
  return length;
}

Result<void> checkHeader(const std::uint8_t* h, MessageSet allowed) {
  const std::uint8_t type = h[0];
  const std::size_t length = get16(h + 2);
  auto bad = [&](const char* expected) {
    return Failure{std::string("not NPMP: got type ") + std::to_string(type) + " (" + typeName(type) + ") of length " +
                   std::to_string(length) + ", expected " + expected};
  };
  switch (allowed) {
    case MessageSet::ControlToPassive:
      switch (static_cast<Type>(type)) {
        case Type::AddFlow:
          if (length >= kAddFlowBaseSize && (length - kAddFlowBaseSize) % kOnOffEventSize == 0) return {};
          break;
        case Type::RemoveFlow:
          if (length == kRemoveFlowSize) return {};
          break;
        case Type::Start:
        case Type::Stop:
          if (length == kStartStopSize) return {};
          break;
        case Type::AuthHello:
          if (length == kAuthHelloSize) return {};
          break;
        case Type::AuthResponse:
          if (length == kAuthResponseSize) return {};
          break;
        default: break;
      }
      return bad("a control message (ADD_FLOW, REMOVE_FLOW, START, STOP)");
    case MessageSet::ControlToActive:
      if (type == static_cast<std::uint8_t>(Type::Acknowledge) && length == kAcknowledgeSize) return {};
      if (type == static_cast<std::uint8_t>(Type::Results) && length >= kHeaderSize &&
          length <= kHeaderSize + kResultsMaxData) {
        return {};
      }
      if (type == static_cast<std::uint8_t>(Type::AuthChallenge) && length == kAuthChallengeSize) return {};
      return bad("ACKNOWLEDGE or RESULTS");
    case MessageSet::DataFirst:
      if (type == static_cast<std::uint8_t>(Type::IdentifyFlow) && length == kIdentifyFlowSize) return {};
      return bad("IDENTIFY_FLOW");
    case MessageSet::Data:
      if (type == static_cast<std::uint8_t>(Type::Data) && length >= kDataHeaderSize) return {};
      return bad("DATA");
  }
  return bad("?");
}

namespace {
// The fields of a DATA message of at least kDataHeaderSize bytes.
DataHeader readDataHeader(const std::uint8_t* p) {
  DataHeader h;
  h.flags = p[1];
  h.length = get16(p + 2);
  h.flowId = get32(p + 4);
  h.measurementId = get64(p + 8);
  h.streamId = get16(p + 16);
  h.frameId = get32(p + 20);
  h.seqNumber = get64(p + 24);
  h.byteSeqNumber = get64(p + 32);
  h.timeStamp = get64(p + 40);
  return h;
}
}  // namespace

Result<DataHeader> decodeData(std::span<const std::uint8_t> msg) {
  if (msg.size() < kDataHeaderSize || msg[0] != static_cast<std::uint8_t>(Type::Data)) {
    return Failure{"unexpected " + std::string(msg.empty() ? "empty" : typeName(msg[0])) + " message of " +
                   std::to_string(msg.size()) + " bytes on the data channel"};
  }
  if (get16(msg.data() + 2) != msg.size()) return Failure{decode(msg).error()};  // the length it declares
  return readDataHeader(msg.data());
}

DecodeResult decode(std::span<const std::uint8_t> msg) {
  if (msg.size() < kHeaderSize) {
    return fail("message of " + std::to_string(msg.size()) + " bytes is shorter than its header");
  }
  const std::uint8_t* p = msg.data();
  const std::uint8_t type = p[0];
  const std::uint8_t flags = p[1];
  const std::size_t length = get16(p + 2);
  if (length != msg.size()) {
    return fail(std::string(typeName(type)) + " message declares length " + std::to_string(length) + " but has " +
                std::to_string(msg.size()) + " bytes");
  }
  Message r;
  switch (static_cast<Type>(type)) {
    case Type::Acknowledge: {
      if (length != kAcknowledgeSize) return fail(sizeError("ACKNOWLEDGE", length, kAcknowledgeSize));
      r = Acknowledge{get32(p + 4), get64(p + 8), get16(p + 16), get32(p + 20)};
      return r;
    }
    case Type::AddFlow: {
      if (length < kAddFlowBaseSize) return fail(sizeError("ADD_FLOW", length, kAddFlowBaseSize));
      const std::size_t events = get16(p + 192);
      if (length != kAddFlowBaseSize + kOnOffEventSize * events) {
        return fail("ADD_FLOW message with " + std::to_string(events) + " on/off events has length " +
                    std::to_string(length) + ", expected " +
                    std::to_string(kAddFlowBaseSize + kOnOffEventSize * events));
      }
      AddFlow m;
      m.flags = flags;
      m.flowId = get32(p + 4);
      m.measurementId = get64(p + 8);
      m.streamId = get16(p + 16);
      m.protocol = static_cast<Protocol>(get16le(p + 18));
      m.description = getString(p + 20, kDescriptionSize);
      m.orderedMode = get32(p + 52);
      m.reliableMode = get32(p + 56);
      m.retransmissionTrials = get32(p + 60);
      const auto frameRate = readRandom(p + 64, p[128], "frame rate");
      if (!frameRate) return fail(frameRate.error());
      m.frameRate = *frameRate;
      const auto frameSize = readRandom(p + 96, p[129], "frame size");
      if (!frameSize) return fail(frameSize.error());
      m.frameSize = *frameSize;
      m.rcvBufferSize = get32(p + 130);
      m.sndBufferSize = get32(p + 134);
      m.maxMsgSize = get16(p + 138);
      m.cmt = p[140];
      m.ccid = p[141];
      m.sctpRtoMinAndDac = get16(p + 142);
      m.congestionControl = getString(p + 160, kCongestionControlSize);
      if (m.congestionControl == "default") m.congestionControl.clear();
      m.runtimeMs = get32(p + 176);
      m.sctpMechanisms = get32(p + 180);
      m.seed = get64(p + 184);
      m.onOffEvents.resize(events);
      for (std::size_t i = 0; i < events; ++i) {
        const std::uint8_t* e = p + kAddFlowBaseSize + kOnOffEventSize * i;
        const auto spec = readRandom(e + 4, e[0], "on/off event");
        if (!spec) return fail(spec.error());
        m.onOffEvents[i].spec = *spec;
        m.onOffEvents[i].relative = (e[1] & kOnOffRelativeTime) != 0;
      }
      r = std::move(m);
      return r;
    }
    case Type::RemoveFlow: {
      if (length != kRemoveFlowSize) return fail(sizeError("REMOVE_FLOW", length, kRemoveFlowSize));
      r = RemoveFlow{get32(p + 4), get64(p + 8), get16(p + 16)};
      return r;
    }
    case Type::IdentifyFlow: {
      if (length != kIdentifyFlowSize) {
        return fail(sizeError("IDENTIFY_FLOW", length, kIdentifyFlowSize));
      }
      if (get64(p + 8) != kIdentifyMagic) return fail("IDENTIFY_FLOW message has a wrong magic number");
      r = IdentifyFlow{flags, get32(p + 4), get64(p + 16), get16(p + 24)};
      return r;
    }
    case Type::Data: {
      if (length < kDataHeaderSize) return fail(sizeError("DATA", length, kDataHeaderSize));
      r = readDataHeader(p);
      return r;
    }
    case Type::Start:
    case Type::Stop: {
      if (length != kStartStopSize) {
        return fail(sizeError(typeName(type), length, kStartStopSize));
      }
      if (static_cast<Type>(type) == Type::Start) {
        r = Start{flags, get64(p + 8), get32(p + 4)};
      } else {
        r = Stop{get64(p + 8)};
      }
      return r;
    }
    case Type::Results: {
      if (length > kHeaderSize + kResultsMaxData) {
        return fail("RESULTS message of " + std::to_string(length) + " bytes exceeds the limit of " +
                    std::to_string(kHeaderSize + kResultsMaxData));
      }
      r = Results{flags, msg.subspan(kHeaderSize)};
      return r;
    }
    case Type::AuthHello:
    case Type::AuthResponse: {
      const char* name = typeName(type);
      if (length != kAuthHelloSize) return fail(sizeError(name, length, kAuthHelloSize));
      AuthBlock block;
      std::copy(p + kHeaderSize, p + kHeaderSize + block.size(), block.begin());
      if (static_cast<Type>(type) == Type::AuthHello) {
        r = AuthHello{block};
      } else {
        r = AuthResponse{block};
      }
      return r;
    }
    case Type::AuthChallenge: {
      if (length != kAuthChallengeSize) return fail(sizeError("AUTH_CHALLENGE", length, kAuthChallengeSize));
      AuthChallenge m;
      std::copy(p + kHeaderSize, p + kHeaderSize + kAuthNonceSize, m.nonce.begin());
      std::copy(p + kHeaderSize + kAuthNonceSize, p + kAuthChallengeSize, m.mac.begin());
      r = m;
      return r;
    }
  }
  return fail("unknown message type " + std::to_string(type));
}

}  // namespace npm::npmp
