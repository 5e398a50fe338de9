// FLOWSPEC grammar (reference §2) and every error path.
#include <catch2/catch.hpp>

#include "flowspec/flowspec.h"

using namespace npm::flowspec;
using npm::npmp::Protocol;

namespace {
FlowSpec ok(const char* text, Protocol p = Protocol::TCP) {
  auto r = parse(text, p);
  INFO(text << ": " << r.error());
  REQUIRE(r);
  return *r;
}
std::string error(const char* text, Protocol p = Protocol::TCP) {
  auto r = parse(text, p);
  INFO(text);
  REQUIRE_FALSE(r);
  return r.error();
}
}  // namespace

TEST_CASE("four traffic entries with every distribution") {
  auto f = ok("const10:uniform100,200:exp5:pareto1.5,2");
  CHECK(f.outbound.rate.rng == 0);
  CHECK(f.outbound.rate.values[0] == 10);
  CHECK(f.outbound.size.rng == 1);
  CHECK(f.outbound.size.values[1] == 200);
  CHECK(f.inbound.rate.rng == 2);
  CHECK(f.inbound.size.rng == 3);
  CHECK(f.inbound.size.values[0] == 1.5);
  auto n = ok("normal100,10:truncnormal1000,50");
  CHECK(n.outbound.rate.rng == 4);
  CHECK(n.outbound.size.rng == 5);
  CHECK(n.inbound.size.values[0] == 0);  // missing entries are const 0
  auto bare = ok("50:1000");
  CHECK(bare.outbound.rate.values[0] == 50);
  CHECK(bare.outbound.size.values[0] == 1000);
}

TEST_CASE("saturated and disabled directions") {
  auto f = ok("const0:const1400");
  CHECK(f.outbound.saturated());
  CHECK(f.outbound.enabled());
  CHECK_FALSE(f.inbound.enabled());
  CHECK_THAT(error("const0:const0:const0:const0"), Catch::Contains("send nothing"));
}

TEST_CASE("default FLOWSPEC per protocol") {
  CHECK(ok("default").outbound.size.values[0] == 1440);
  CHECK(ok("default", Protocol::MPTCP).outbound.size.values[0] == 1440);
  auto udp = ok("default", Protocol::UDP);
  CHECK(udp.outbound.size.values[0] == 1452);
  CHECK(udp.outbound.rate.values[0] == 25);
  CHECK(ok("default", Protocol::DCCP).outbound.size.values[0] == 1420);
  CHECK(ok("default:id=4").flowId == 4u);
}

TEST_CASE("all flow options") {
  // The options of every transport, and those of the transports that have them.
  auto f =
      ok("const1:const100:const0:const0:id=7:description=Video stream:maxmsgsize=1300:"
         "defragtimeout=2000:rcvbuf=100000:sndbuf=200000:error_on_abort=off:debug=on:v6only",
         Protocol::UDP);
  CHECK(f.flowId == 7u);
  CHECK(f.description == "Video stream");
  CHECK(f.maxMsgSize == 1300);
  CHECK(f.defragTimeoutMs == 2000);
  CHECK(f.rcvBufferSize == 100000);
  CHECK(f.sndBufferSize == 200000);
  CHECK_FALSE(f.errorOnAbort);
  CHECK(f.debug);  // the reference cannot parse debug=on
  CHECK(f.v6only);
  const auto sctp = ok("const1:const100:unordered=0.25:unreliable=0.5:nodelay=on", Protocol::SCTP);
  CHECK(sctp.ordered == 0.75);
  CHECK(sctp.reliable == 0.5);
  CHECK(sctp.noDelay);
  CHECK(ok("const1:const100:ccid=3", Protocol::DCCP).ccid == 3);
  const auto tcp = ok("const1:const100:nodelay=on:cc=reno");
  CHECK(tcp.noDelay);
  CHECK(tcp.congestionControl == "reno");
  CHECK(ok("const1:const1:ordered=0.3:reliable=0.9", Protocol::SCTP).ordered == 0.3);
  CHECK(ok("const1:const1:rtx_timeout=250", Protocol::SCTP).retransmissionTrials == (0x80000000u | 250));
  CHECK(ok("const1:const1:rtx_trials=3", Protocol::SCTP).retransmissionTrials == 3);
  CHECK(ok("const1:const1:cc=default").congestionControl.empty());
  CHECK(ok("const1:const1:cmt=cmtrpv2", Protocol::SCTP).cmt == 3);
  CHECK(ok("const1:const1:cmt=rp", Protocol::SCTP).cmt == 2);
  CHECK(ok("const1:const1:cmt=200", Protocol::SCTP).cmt == 200);
}

TEST_CASE("options that do not apply to the protocol are refused, as cmt= on TCP is") {
  CHECK_THAT(error("const1:const100:unordered=0.5", Protocol::UDP), Catch::Contains("apply only to SCTP flows"));
  CHECK_THAT(error("const1:const100:unreliable=0.5"), Catch::Contains("not to TCP"));
  CHECK_THAT(error("const1:const100:rtx_trials=3", Protocol::DCCP), Catch::Contains("apply only to SCTP flows"));
  CHECK_THAT(error("const1:const100:rtx_timeout=30", Protocol::MPTCP), Catch::Contains("apply only to SCTP flows"));
  CHECK_THAT(error("const1:const100:ccid=3"), Catch::Contains("ccid= applies only to DCCP flows, not to TCP"));
  CHECK_THAT(error("const1:const100:ccid=2", Protocol::SCTP), Catch::Contains("only to DCCP"));
  CHECK_THAT(error("const1:const100:nodelay=on", Protocol::UDP),
             Catch::Contains("nodelay= applies to TCP, MPTCP and SCTP"));
  CHECK_THAT(error("const1:const100:nodelay=on", Protocol::DCCP), Catch::Contains("not to DCCP"));
  CHECK_THAT(error("const1:const100:cc=bbr", Protocol::UDP), Catch::Contains("cc= applies to TCP, MPTCP and QUIC"));
  CHECK_THAT(error("const1:const100:cc=bbr", Protocol::SCTP), Catch::Contains("sctpcc="));
  CHECK_THAT(error("const1:const100:cc=bbr", Protocol::DCCP), Catch::Contains("ccid="));
  // what every transport has stays allowed
  CHECK(ok("const1:const100:ordered=1:reliable=1", Protocol::UDP).ordered == 1.0);
}

TEST_CASE("numbers: decimal only, whole bytes, ranges, units with their base") {
  CHECK_THAT(error("const10:const0x10"), Catch::Contains("\"0x10\" is not a number"));
  CHECK_THAT(error("0x10:const100"), Catch::Contains("not a number"));
  CHECK_THAT(error("const10:const16.5"), Catch::Contains("whole number of bytes"));
  CHECK_THAT(error("const10:uniform10.5,20"), Catch::Contains("whole number of bytes"));
  CHECK(ok("const10:exp100.5").outbound.size.values[0] == 100.5);  // a drawn size's mean may be fractional
  CHECK_THAT(error("const10:const4294967296"), Catch::Contains("at most 4294967295 bytes"));
  CHECK(ok("const10:const4294967295").outbound.size.values[0] == 4294967295.0);
  CHECK_THAT(error("const10:const4G"), Catch::Contains("at most 4294967295 bytes"));
  CHECK_THAT(error("const10:uniform1,5G"), Catch::Contains("at most"));
  CHECK_THAT(error("const2e9:const100"), Catch::Contains("a frame rate is at most 1G"));
  CHECK_THAT(error("constinf:const100"), Catch::Contains("not a number"));
  CHECK_THAT(error("const10:constnan"), Catch::Contains("not a number"));
  // sizes: k, M, G binary, as iperf3's -l; rates: decimal
  CHECK(ok("const10:const1k").outbound.size.values[0] == 1024);
  CHECK(ok("const10:const64K").outbound.size.values[0] == 65536);
  CHECK(ok("const10:const1M").outbound.size.values[0] == 1048576);
  CHECK(ok("const10:const1G").outbound.size.values[0] == 1073741824);
  CHECK(ok("const10k:const100").outbound.rate.values[0] == 10000);
  CHECK(ok("const2.5M:const100").outbound.rate.values[0] == 2500000);
  CHECK(ok("exp1k:uniform1k,2k").outbound.size.values[1] == 2048);
  CHECK(ok("const1:pareto1k,1.5").outbound.size.values[1] == 1.5);  // a shape has no unit
  CHECK_THAT(error("const1:pareto1k,1k"), Catch::Contains("not a number"));
  CHECK_THAT(error("const10:const1T"), Catch::Contains("not a number"));
  CHECK_THAT(error("const10:const1kk"), Catch::Contains("not a number"));
}

TEST_CASE("rate= and in_rate= set a direction's frame rate from a bit rate") {
  const auto f = ok("const0:const1250:const0:uniform100,300:rate=10M:in_rate=1.6k", Protocol::UDP);
  CHECK(f.outbound.rate.values[0] == 1000.0);  // 10^7 bit/s in frames of 10^4 bits
  CHECK(f.inbound.rate.values[0] == 1.0);      // 1600 bit/s in frames of 200 bytes on average
  CHECK(f.outBitRate == 1e7);
  CHECK(ok("0:exp1000:rate=8k").outbound.rate.values[0] == 1.0);
  CHECK_THAT(error("const10:const1250:rate=10M"), Catch::Contains("give the rate entry as const0"));
  CHECK_THAT(error("const0:pareto100,2:rate=10M"), Catch::Contains("whose mean is known"));
  CHECK_THAT(error("const0:const1250:in_rate=1M"), Catch::Contains("at least one byte in its direction"));
  CHECK_THAT(error("const0:const1250:rate=0"), Catch::Contains("above 0"));
  CHECK_THAT(error("const0:const1:rate=10G"), Catch::Contains("more than 10^9 frames/s"));
  CHECK_THAT(error("const0:const1250:rate=10Mbit"), Catch::Contains("expected a bit rate"));
}

TEST_CASE("traffic entries come in pairs") {
  CHECK_THAT(error("const10:const100:const5"), Catch::Contains("the inbound frame rate needs the inbound frame size"));
  CHECK_THAT(error("const10:const100:const5:id=1"), Catch::Contains("the inbound frame rate needs"));
  CHECK_THAT(error("const10"), Catch::Contains("the outbound frame rate needs the outbound frame size"));
  CHECK_THAT(error("const10:id=3"), Catch::Contains("the outbound frame rate needs"));
  CHECK(ok("const10:const100").inbound.size.values[0] == 0);
  CHECK(ok("default").outbound.size.values[0] == 1440);
}

TEST_CASE("on/off times run forwards and fit the 32-bit milliseconds of ADD_FLOW") {
  CHECK_THAT(error("const1:const100:onoff=5,3"), Catch::Contains("on/off times must increase: 3 s comes after 5 s"));
  CHECK_THAT(error("const1:const100:onoff=1,1"), Catch::Contains("must increase"));
  CHECK_THAT(error("const1:const100:onoff=2,+1,2.5"), Catch::Contains("2.5 s comes after 3 s"));
  CHECK_THAT(error("const1:const100:onoff=1,+0"), Catch::Contains("a relative time must be > 0"));
  CHECK_THAT(error("const1:const100:onoff=5000000"), Catch::Contains("at most 4294967 s"));
  CHECK_THAT(error("const1:const100:onoff=4294967,+1"), Catch::Contains("beyond 4294967 s"));
  CHECK(ok("const1:const100:onoff=1,+exp2,3").onOff.size() == 3);  // after a drawn time nothing is known
  CHECK(ok("const1:const100:onoff=0,2,+1,4").onOff.size() == 4);
  CHECK(ok("const1:const100:onoff=+1,+1,repeat").repeatOnOff);
}

TEST_CASE("cmt=mptcp turns a TCP flow into MPTCP; other CMT modes need SCTP") {
  CHECK(ok("const1:const1:cmt=mptcp").protocol == Protocol::MPTCP);
  CHECK(ok("const1:const1:cmt=like-mptcp", Protocol::MPTCP).protocol == Protocol::MPTCP);
  CHECK_THAT(error("const1:const1:cmt=cmt", Protocol::MPTCP), Catch::Contains("only to SCTP"));
  CHECK_THAT(error("const1:const1:cmt=cmtrpv1", Protocol::UDP), Catch::Contains("only to SCTP"));
}

TEST_CASE("QUIC flows: cc= is reno, cubic or default; what a QUIC stream cannot do is refused") {
  CHECK(ok("const1:const100", Protocol::QUIC).congestionControl.empty());
  CHECK(ok("const1:const100:cc=default", Protocol::QUIC).congestionControl.empty());
  CHECK(ok("const1:const100:cc=reno", Protocol::QUIC).congestionControl == "reno");
  CHECK(ok("const1:const100:cc=cubic", Protocol::QUIC).congestionControl == "cubic");
  CHECK(ok("default", Protocol::QUIC).outbound.size.values[0] == 1400);
  CHECK_THAT(error("const1:const100:cc=bbr", Protocol::QUIC), Catch::Contains("reno, cubic or default"));
  CHECK_THAT(error("const1:const100:unordered=0.5", Protocol::QUIC), Catch::Contains("ordered and reliable"));
  CHECK_THAT(error("const1:const100:rtx_trials=2", Protocol::QUIC), Catch::Contains("ordered and reliable"));
  CHECK_THAT(error("const1:const100:rcvbuf=100000", Protocol::QUIC), Catch::Contains("rcvbuf= and sndbuf="));
  CHECK_THAT(error("const1:const100:nodelay=on", Protocol::QUIC), Catch::Contains("nodelay="));
  CHECK_THAT(error("const1:const100:ccid=2", Protocol::QUIC), Catch::Contains("ccid="));
  CHECK_THAT(error("const1:const100:cmt=cmt", Protocol::QUIC), Catch::Contains("only to SCTP"));
  CHECK_THAT(error("const1:const100:nrsack=on", Protocol::QUIC), Catch::Contains("only to SCTP"));
}

TEST_CASE("on/off schedules: absolute, +relative, two-parameter distributions, repeat") {
  auto f = ok("const10:const100:onoff=1,+uniform1,2,+exp0.5,10");
  REQUIRE(f.onOff.size() == 4);
  CHECK_FALSE(f.onOff[0].relative);
  CHECK(f.onOff[0].spec.values[0] == 1);
  CHECK(f.onOff[1].relative);
  CHECK(f.onOff[1].spec.rng == 1);
  CHECK(f.onOff[1].spec.values[1] == 2);
  CHECK(f.onOff[2].spec.rng == 2);
  CHECK(f.onOff[3].spec.values[0] == 10);
  CHECK_FALSE(f.repeatOnOff);
  auto r = ok("const10:const100:onoff=+1,+2,repeat");
  CHECK(r.repeatOnOff);
  CHECK_THAT(error("const10:const100:onoff=+1,+2,+3,repeat"), Catch::Contains("even number"));
  CHECK_THAT(error("const10:const100:onoff=1,+2,repeat"), Catch::Contains("relative"));
  CHECK_THAT(error("const10:const100:onoff=1,repeat,2"), Catch::Contains("last"));
  CHECK_THAT(error("const10:const100:onoff=1,foo"), Catch::Contains("\"foo\""));
  CHECK_THAT(error("const10:const100:onoff="), Catch::Contains("onoff"));
}

TEST_CASE("assignFlowIds: running counter, explicit IDs, duplicates, default descriptions") {
  std::vector<FlowSpec> flows = {ok("const1:const1"), ok("const1:const1:id=10"), ok("const1:const1"),
                                 ok("const1:const1:description=x")};
  CHECK(assignFlowIds(flows));
  CHECK(*flows[0].flowId == 0);
  CHECK(*flows[1].flowId == 10);
  CHECK(*flows[2].flowId == 11);
  CHECK(*flows[3].flowId == 12);
  CHECK(flows[2].description == "Flow 11");
  CHECK(flows[3].description == "x");
  std::vector<FlowSpec> twice = {ok("const1:const1:id=3"), ok("const1:const1:id=3")};
  CHECK_THAT(assignFlowIds(twice).error(), Catch::Contains("flow ID 3 is used twice"));
}

TEST_CASE("every error path names the bad part") {
  CHECK_THAT(error(""), Catch::Contains("empty"));
  CHECK_THAT(error("foo:const1"), Catch::Contains("outbound frame rate \"foo\""));
  CHECK_THAT(error("const1:bar"), Catch::Contains("outbound frame size \"bar\""));
  CHECK_THAT(error("const1:const1:baz"), Catch::Contains("inbound frame rate \"baz\""));
  CHECK_THAT(error("const1:const1:const1:qux"), Catch::Contains("inbound frame size \"qux\""));
  CHECK_THAT(error("const1:const1:const1:const1:qux"), Catch::Contains("unknown option \"qux\""));
  CHECK_THAT(error("const1:const1:colour=red"), Catch::Contains("unknown option \"colour=red\""));
  CHECK_THAT(error("const1::const1"), Catch::Contains("empty field"));
  CHECK_THAT(error("uniform1:const1"), Catch::Contains("uniform takes 2"));
  CHECK_THAT(error("const1,2:const1"), Catch::Contains("const takes 1"));
  CHECK_THAT(error("constx:const1"), Catch::Contains("\"x\" is not a number"));
  CHECK_THAT(error("const-1:const1"), Catch::Contains("must not be negative"));
  CHECK_THAT(error("uniform5,1:const1"), Catch::Contains("lower <= upper"));
  CHECK_THAT(error("exp0:const1"), Catch::Contains("mean > 0"));
  CHECK_THAT(error("pareto0,1:const1"), Catch::Contains("location > 0"));
  CHECK_THAT(error("normal1,-1:const1"), Catch::Contains("standard deviation"));
  CHECK_THAT(error("const1:const1:id=x"), Catch::Contains("option \"id=x\""));
  CHECK_THAT(error("const1:const1:id=4294967296"), Catch::Contains("flow ID"));
  CHECK_THAT(error("const1:const1:maxmsgsize=100"), Catch::Contains("128 to 65535"));
  CHECK_THAT(error("const1:const1:maxmsgsize=65535", Protocol::UDP), Catch::Contains("65507"));
  CHECK_THAT(error("const1:const1:defragtimeout=-5"), Catch::Contains("milliseconds"));
  CHECK_THAT(error("const1:const1:ordered=1.5"), Catch::Contains("fraction"));
  CHECK_THAT(error("const1:const1:unreliable=x"), Catch::Contains("fraction"));
  CHECK_THAT(error("const1:const1:rtx_timeout=x"), Catch::Contains("milliseconds"));
  CHECK_THAT(error("const1:const1:rtx_trials=-1"), Catch::Contains("retransmissions"));
  CHECK_THAT(error("const1:const1:rcvbuf=big"), Catch::Contains("buffer size"));
  CHECK_THAT(error("const1:const1:cmt=turbo", Protocol::SCTP), Catch::Contains("cmtrpv1"));
  CHECK_THAT(error("const1:const1:ccid=256", Protocol::DCCP), Catch::Contains("CCID"));
  CHECK_THAT(error("const1:const1:nodelay=maybe"), Catch::Contains("on or off"));
  CHECK_THAT(error("const1:const1:error_on_abort=2"), Catch::Contains("on or off"));
  CHECK_THAT(error("const1:const1:debug=x"), Catch::Contains("on or off"));
  CHECK_THAT(error("const1:const1:v6only=x"), Catch::Contains("on or off"));
  CHECK_THAT(error("const1:const1:cc=averyveryverylongname"), Catch::Contains("1 to 15"));
  CHECK_THAT(error("const1:const1:cc=re$no"), Catch::Contains("letters"));
  CHECK_THAT(error("const1:const1:description=a\tb"), Catch::Contains("control characters"));
  CHECK_THAT(error(std::string("const1:const1:description=" + std::string(300, 'x')).c_str()), Catch::Contains("255"));
}

TEST_CASE("error messages stay on one line whatever the input holds") {
  const auto r = parse("const1\n:const\x01x", Protocol::TCP);
  REQUIRE_FALSE(r);
  CHECK(r.error().find('\n') == std::string::npos);
  CHECK_THAT(r.error(), Catch::Contains("\\x0a"));
}

TEST_CASE("transfer= and frames=: a fixed-size transfer of the outbound direction, in its units and range") {
  CHECK(ok("const0:const1400:transfer=10M").transferBytes == 10485760);
  CHECK(ok("const0:const1400:transfer=1.5k").transferBytes == 1536);
  CHECK(ok("const0:const1400:transfer=48").transferBytes == 48);
  CHECK(ok("const0:const1400:transfer=1G").transferBytes == 1073741824);
  CHECK(ok("const10:const1000:frames=2k", Protocol::UDP).transferFrames == 2000);
  CHECK(ok("const0:const1000:frames=1", Protocol::SCTP).fixedSize());
  CHECK_FALSE(ok("const0:const1400").fixedSize());
  CHECK_THAT(error("const0:const1400:transfer=47"), Catch::Contains("from 48 (one DATA message header) to 2^53 - 1"));
  CHECK_THAT(error("const0:const1400:transfer=0"), Catch::Contains("from 48"));
  CHECK_THAT(error("const0:const1400:transfer=1.3"), Catch::Contains("whole number of bytes"));
  CHECK_THAT(error("const0:const1400:transfer=9P"), Catch::Contains("whole number of bytes"));
  CHECK_THAT(error("const0:const1400:transfer=0x100"), Catch::Contains("whole number of bytes"));
  CHECK_THAT(error("const0:const1400:transfer=1e16"), Catch::Contains("2^53 - 1"));
  CHECK_THAT(error("const0:const1400:frames=0"), Catch::Contains("whole number of frames from 1 to 2^53 - 1"));
  CHECK_THAT(error("const0:const1400:frames=-5"), Catch::Contains("whole number of frames"));
  CHECK_THAT(error("const0:const1400:transfer=1M:frames=10"), Catch::Contains("give one of them"));
  CHECK_THAT(error("const0:const0:const0:const1400:transfer=1M"),
             Catch::Contains("ADD_FLOW has no field to limit the passive's sending"));
}

TEST_CASE("tos= and dscp=: the TOS byte of the active's data socket, refused where it cannot act") {
  CHECK(*ok("const0:const1400:tos=0xb8").tos == 0xb8);
  CHECK(*ok("const0:const1400:tos=0XB8").tos == 0xb8);
  CHECK(*ok("const0:const1400:tos=32", Protocol::UDP).tos == 32);
  CHECK(*ok("const0:const1400:dscp=46", Protocol::MPTCP).tos == 0xb8);
  CHECK(*ok("const0:const1400:dscp=0").tos == 0);
  CHECK(*ok("const0:const1400:dscp=63").tos == 0xfc);
  CHECK_FALSE(ok("const0:const1400").tos);
  CHECK_THAT(error("const0:const1400:tos=256"), Catch::Contains("from 0 to 255"));
  CHECK_THAT(error("const0:const1400:tos=0x100"), Catch::Contains("from 0 to 255"));
  CHECK_THAT(error("const0:const1400:tos=-1"), Catch::Contains("from 0 to 255"));
  CHECK_THAT(error("const0:const1400:tos=0xzz"), Catch::Contains("from 0 to 255"));
  CHECK_THAT(error("const0:const1400:tos=0xb9"), Catch::Contains("ECN"));
  CHECK_THAT(error("const0:const1400:dscp=64"), Catch::Contains("DSCP from 0 to 63"));
  CHECK_THAT(error("const0:const1400:dscp=0x2e"), Catch::Contains("DSCP from 0 to 63"));
  CHECK_THAT(error("const0:const1400:dscp=46:tos=0xb8"), Catch::Contains("give one of them once"));
  CHECK_THAT(error("const0:const1400:dscp=46", Protocol::SCTP),
             Catch::Contains("not to SCTP (the userland SCTP stack sends every association through one UDP socket"));
  CHECK_THAT(error("const0:const1400:tos=0xb8", Protocol::QUIC), Catch::Contains("not to QUIC"));
}
