// NPMP encode/decode against byte vectors written by hand from the reference's offsets (§3.3).
#include <catch2/catch.hpp>

#include <bit>
#include <cstring>

#include "npmp/messages.h"

using namespace npm::npmp;

namespace {
Bytes hex(const char* text) {
  Bytes b;
  auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (const char* p = text; *p != '\0';) {
    if (*p == ' ') {
      ++p;
      continue;
    }
    b.push_back(static_cast<std::uint8_t>(nibble(p[0]) << 4 | nibble(p[1])));
    p += 2;
  }
  return b;
}
template <class T>
T decodeAs(const Bytes& b) {
  auto r = decode(b);
  INFO(r.error());
  REQUIRE(r);
  REQUIRE(std::holds_alternative<T>(*r));
  return std::get<T>(*r);
}
}  // namespace

TEST_CASE("ACKNOWLEDGE is 24 bytes: FlowID, MeasurementID, StreamID, padding, Status") {
  Bytes b;
  encode(Acknowledge{0x01020304, 0x1122334455667788ULL, 0xA1B2, 1}, b);
  CHECK(b == hex("01 00 0018 01020304 1122334455667788 a1b2 0000 00000001"));
  CHECK(decodeAs<Acknowledge>(b) == Acknowledge{0x01020304, 0x1122334455667788ULL, 0xA1B2, 1});
}

TEST_CASE("REMOVE_FLOW is 18 bytes") {
  Bytes b;
  encode(RemoveFlow{7, 0xC46958B94BC2B3DBULL, 3}, b);
  CHECK(b == hex("03 00 0012 00000007 c46958b94bc2b3db 0003"));
  CHECK(decodeAs<RemoveFlow>(b) == RemoveFlow{7, 0xC46958B94BC2B3DBULL, 3});
}

TEST_CASE("IDENTIFY_FLOW is 26 bytes with the magic number at offset 8") {
  Bytes b;
  encode(IdentifyFlow{kIdentifyCompressVectors, 9, 0x0102030405060708ULL, 2}, b);
  CHECK(b == hex("04 01 001a 00000009 4bcdf3aa303c6774 0102030405060708 0002"));
  CHECK(decodeAs<IdentifyFlow>(b) == IdentifyFlow{kIdentifyCompressVectors, 9, 0x0102030405060708ULL, 2});
  Bytes wrongMagic = b;
  wrongMagic[8] ^= 1;
  CHECK_FALSE(decode(wrongMagic));
  CHECK_THAT(decode(wrongMagic).error(), Catch::Contains("magic"));
}

TEST_CASE("START and STOP are 16 bytes, START carries the file flags") {
  Bytes b;
  encode(Start{kStartCompressVectors | kStartNoScalars, 0xDEADBEEFCAFEF00DULL}, b);
  CHECK(b == hex("06 09 0010 00000000 deadbeefcafef00d"));
  CHECK(decodeAs<Start>(b) == Start{9, 0xDEADBEEFCAFEF00DULL});
  Bytes s;
  encode(Stop{0x42}, s);
  CHECK(s == hex("07 00 0010 00000000 0000000000000042"));
  CHECK(decodeAs<Stop>(s) == Stop{0x42});
}

TEST_CASE("START carries the warm-up in the reference's padding, which the reference sends as 0") {
  Bytes b;
  encode(Start{0, 7, 2500}, b);
  CHECK(b == hex("06 00 0010 000009c4 0000000000000007"));
  CHECK(decodeAs<Start>(b) == Start{0, 7, 2500});
  CHECK(decodeAs<Start>(hex("06 00 0010 00000000 0000000000000007")).warmupMs == 0);
}

TEST_CASE("RESULTS carries up to 1400 data bytes and the EOF flag") {
  const std::uint8_t data[3] = {0xAA, 0xBB, 0xCC};
  Bytes b;
  encode(Results{kResultsEof, std::span<const std::uint8_t>(data, 3)}, b);
  CHECK(b == hex("08 01 0007 aabbcc"));
  auto r = decodeAs<Results>(b);
  CHECK(r.eof());
  CHECK(r.data.size() == 3);
  Bytes empty;
  encode(Results{kResultsEof, {}}, empty);
  CHECK(empty == hex("08 01 0004"));
  Bytes tooLong(1405, 0);
  tooLong[0] = 8;
  tooLong[2] = 1405 >> 8;
  tooLong[3] = 1405 & 0xFF;
  CHECK_FALSE(decode(tooLong));
}

TEST_CASE("DATA header is 48 bytes with all fields big-endian") {
  DataHeader h;
  h.flags = kDataFrameBegin | kDataFrameEnd;
  h.length = 52;
  h.flowId = 1;
  h.measurementId = 2;
  h.streamId = 3;
  h.frameId = 4;
  h.seqNumber = 5;
  h.byteSeqNumber = 6;
  h.timeStamp = 0x0006123456789ABCULL;
  Bytes b(52, 0);
  encodeDataHeader(h, b.data());
  fillPayload(b.data() + 48, 4, true);
  CHECK(b == hex("05 03 0034 00000001 0000000000000002 0003 0000 00000004 0000000000000005 "
                 "0000000000000006 0006123456789abc 1e1f2021"));
  CHECK(decodeAs<DataHeader>(b) == h);
  // The receive path's decoder agrees, and says what is wrong as decode() does.
  CHECK(*decodeData(b) == h);
  CHECK(decodeData(b).error().empty());
  CHECK_FALSE(decodeData(std::span<const std::uint8_t>(b.data(), 51)));
  CHECK_THAT(decodeData(std::span<const std::uint8_t>(b.data(), 51)).error(), Catch::Contains("declares length 52"));
  Bytes stop(16, 0);
  stop[0] = static_cast<std::uint8_t>(Type::Stop);
  stop[3] = 16;
  CHECK(decodeData(stop).error() == "unexpected STOP message of 16 bytes on the data channel");
  CHECK(decodeData(Bytes{}).error() == "unexpected empty message of 0 bytes on the data channel");
}

TEST_CASE("payload patterns of both directions") {
  std::uint8_t a[200], p[200];
  fillPayload(a, 200, true);
  fillPayload(p, 200, false);
  CHECK(a[0] == 30);
  CHECK(a[97] == 127);
  CHECK(a[98] == 30);
  CHECK(p[0] == 127);
  CHECK(p[97] == 30);
  CHECK(p[98] == 127);
}

TEST_CASE("ADD_FLOW layout: little-endian protocol, doubles, strings, on/off events") {
  AddFlow m;
  m.flags = kAddFlowNoDelay;
  m.flowId = 0;
  m.measurementId = 0xC46958B94BC2B3DBULL;
  m.protocol = Protocol::MPTCP;
  m.description = "T1";
  m.orderedMode = 0xFFFFFFFF;
  m.reliableMode = 0x7FFFFFFF;
  m.retransmissionTrials = kRetransmitTimeFlag | 250;
  m.frameRate = RandomSpec{2, {10.0, 0, 0, 0}};
  m.frameSize = RandomSpec{1, {100.0, 200.0, 0, 0}};
  m.rcvBufferSize = 0x10000;
  m.sndBufferSize = 0x20000;
  m.maxMsgSize = 1400;
  m.cmt = 4;
  m.ccid = 2;
  m.congestionControl = "npm_lia";
  m.runtimeMs = 30250;
  m.sctpMechanisms = kSctpMechanismBufferSplitOnBuffered;
  m.onOffEvents = {OnOffEvent{RandomSpec{0, {1.5, 0, 0, 0}}, false}, OnOffEvent{RandomSpec{2, {2.0, 0, 0, 0}}, true}};
  Bytes b;
  encode(m, b);
  REQUIRE(b.size() == 194 + 2 * 36);
  auto be16 = [&](std::size_t o) { return b[o] << 8 | b[o + 1]; };
  auto be32 = [&](std::size_t o) { return std::uint32_t(be16(o)) << 16 | std::uint32_t(be16(o + 2)); };
  auto be64 = [&](std::size_t o) { return std::uint64_t(be32(o)) << 32 | be32(o + 4); };
  CHECK(b[0] == 2);
  CHECK(b[1] == kAddFlowNoDelay);
  CHECK(be16(2) == 266);
  CHECK(be64(8) == 0xC46958B94BC2B3DBULL);
  CHECK(b[18] == 0x06);  // 262 = 0x0106, little-endian
  CHECK(b[19] == 0x01);
  CHECK(std::memcmp(&b[20], "T1\0\0", 4) == 0);
  CHECK(be32(52) == 0xFFFFFFFF);
  CHECK(be32(56) == 0x7FFFFFFF);
  CHECK(be32(60) == 0x800000FA);
  CHECK(be64(64) == std::bit_cast<std::uint64_t>(10.0));
  CHECK(be64(96) == std::bit_cast<std::uint64_t>(100.0));
  CHECK(be64(104) == std::bit_cast<std::uint64_t>(200.0));
  CHECK(b[128] == 2);
  CHECK(b[129] == 1);
  CHECK(be32(130) == 0x10000);
  CHECK(be32(134) == 0x20000);
  CHECK(be16(138) == 1400);
  CHECK(b[140] == 4);
  CHECK(b[141] == 2);
  CHECK(be16(142) == 0);
  CHECK(std::memcmp(&b[160], "npm_lia\0", 8) == 0);
  CHECK(be32(176) == 30250);  // the runtime, where the reference has its obsolete Scheduler
  CHECK(be32(180) == kSctpMechanismBufferSplitOnBuffered);  // the CMT-SCTP mechanisms, also in Scheduler
  for (std::size_t o = 184; o < 192; ++o) CHECK(b[o] == 0);
  CHECK(be16(192) == 2);
  CHECK(b[194] == 0);  // event 0: RNG const
  CHECK(b[195] == 0);  // absolute
  CHECK(be64(198) == std::bit_cast<std::uint64_t>(1.5));
  CHECK(b[230] == 2);  // event 1: RNG exp
  CHECK(b[231] == kOnOffRelativeTime);
  CHECK(be64(234) == std::bit_cast<std::uint64_t>(2.0));
  CHECK(decodeAs<AddFlow>(b) == m);
}

TEST_CASE("ADD_FLOW with the default congestion control sends \"default\"") {
  AddFlow m;
  Bytes b;
  encode(m, b);
  CHECK(std::memcmp(&b[160], "default\0", 8) == 0);
  CHECK(decodeAs<AddFlow>(b).congestionControl.empty());
}

TEST_CASE("every malformed length is rejected") {
  Bytes ackBytes;
  encode(Acknowledge{}, ackBytes);
  SECTION("shorter than a header") { CHECK_FALSE(decode(Bytes{1, 0, 0})); }
  SECTION("declared length below 4") {
    CHECK_FALSE(decode(Bytes{1, 0, 0, 3}));
    const auto length = declaredLength(Bytes{1, 0, 0, 2});
    CHECK_FALSE(length);
    CHECK_THAT(length.error(), Catch::Contains("below the header size"));
  }
  SECTION("declared length does not match the bytes") {
    Bytes b = ackBytes;
    b.pop_back();
    CHECK_FALSE(decode(b));
    b = ackBytes;
    b.push_back(0);
    CHECK_FALSE(decode(b));
  }
  SECTION("wrong fixed sizes") {
    for (std::uint8_t type : {1, 3, 4, 6, 7}) {
      Bytes b(30, 0);
      b[0] = type;
      b[3] = 30;
      CHECK_FALSE(decode(b));
    }
    Bytes data(47, 0);
    data[0] = 5;
    data[3] = 47;
    CHECK_FALSE(decode(data));
  }
  SECTION("ADD_FLOW shorter than 194 or than its events") {
    AddFlow m;
    m.onOffEvents.resize(2);
    Bytes b;
    encode(m, b);
    Bytes cut(b.begin(), b.begin() + 193);
    cut[2] = 0;
    cut[3] = 193;
    CHECK_FALSE(decode(cut));
    Bytes lying(b.begin(), b.begin() + 194 + 36);  // claims 2 events, carries 1
    lying[2] = 0;
    lying[3] = 194 + 36;
    CHECK_THAT(decode(lying).error(), Catch::Contains("2 on/off events"));
  }
  SECTION("unknown type") {
    CHECK_THAT(decode(Bytes{99, 0, 0, 4}).error(), Catch::Contains("unknown message type 99"));
  }
  SECTION("unknown distribution and non-finite parameters") {
    AddFlow m;
    Bytes b;
    encode(m, b);
    b[128] = 9;
    CHECK_FALSE(decode(b));
    encode(m, b = {});
    const std::uint64_t nan = std::bit_cast<std::uint64_t>(std::numeric_limits<double>::quiet_NaN());
    for (int i = 0; i < 8; ++i) b[64 + i] = static_cast<std::uint8_t>(nan >> (56 - 8 * i));
    CHECK_FALSE(decode(b));
  }
}

TEST_CASE("headers are checked per channel as soon as they arrive") {
  const std::uint8_t identify[4] = {4, 0, 0, 26}, data[4] = {5, 0, 0, 48}, addFlow[4] = {2, 0, 0, 194};
  const std::uint8_t addFlowOdd[4] = {2, 0, 0xEA, 0x60}, results[4] = {8, 1, 0x05, 0x7C}, ack[4] = {1, 0, 0, 24};
  CHECK(checkHeader(identify, MessageSet::DataFirst));
  CHECK_THAT(checkHeader(data, MessageSet::DataFirst).error(), Catch::Contains("expected IDENTIFY_FLOW"));
  CHECK(checkHeader(data, MessageSet::Data));
  CHECK_FALSE(checkHeader(identify, MessageSet::Data));
  CHECK(checkHeader(addFlow, MessageSet::ControlToPassive));
  CHECK_FALSE(checkHeader(addFlowOdd, MessageSet::ControlToPassive));  // 60000 is no 194 + 36n
  CHECK_FALSE(checkHeader(ack, MessageSet::ControlToPassive));
  CHECK(checkHeader(ack, MessageSet::ControlToActive));
  CHECK(checkHeader(results, MessageSet::ControlToActive));  // 1404 = 4 + 1400
}
