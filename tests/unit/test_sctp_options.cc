// SCTP and DCCP option mapping: FLOWSPEC tuning options, their ADD_FLOW encoding, the
// per-message PR-SCTP policy, stack selection, and the socket options per protocol.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstring>
#include <string>

#include "control/flow_mapping.h"
#include "flowspec/flowspec.h"
#include "npmp/messages.h"
#include "sctp/association.h"
#include "sctp/flow_settings.h"
#include "sctp/sockaddr.h"
#include "sctp/socket.h"
#include "transport/sockets.h"

using namespace npm;
using npmp::Protocol;

namespace {
flowspec::FlowSpec sctpSpec(const char* text) {
  auto r = flowspec::parse(text, Protocol::SCTP);
  INFO(r.error());
  REQUIRE(r);
  return *r;
}
}  // namespace

TEST_CASE("CMT-SCTP tuning options") {
  auto f = sctpSpec("const0:const1400:cmt=cmtrpv2:sctpcc=htcp:bufsplit=both:nrsack=on:rtomin=200:dac=on");
  CHECK(f.cmt == 3);
  CHECK(f.sctpCc == 2);
  CHECK(f.bufferSplitting == 3);
  CHECK(f.nrSack);
  CHECK(f.rtoMinMs == 200);
  CHECK(f.dac);
  CHECK(sctp::tuningFlags(control::sctpTuning(f)) == (0x08 | 3 << 4 | 2 << 6));
  CHECK(sctp::rtoMinAndDac(control::sctpTuning(f)) == (0x8000 | 200));
  CHECK(sctpSpec("const0:const1400:bufsplit=sender").bufferSplitting == 1);
  CHECK(sctpSpec("const0:const1400:bufsplit=receiver").bufferSplitting == 2);
  CHECK(sctpSpec("const0:const1400:sctpcc=rtcc").sctpCc == 3);
  CHECK(sctp::tuningFlags(control::sctpTuning(sctpSpec("const0:const1400"))) == 0);
  // bufsplit-on= in either order with bufsplit=
  CHECK(sctpSpec("const0:const1400:bufsplit=both:bufsplit-on=buffered").bufferSplitting ==
        (3 | flowspec::kBufferSplitOnBuffered));
  CHECK(sctpSpec("const0:const1400:bufsplit-on=buffered:bufsplit=sender").bufferSplitting ==
        (1 | flowspec::kBufferSplitOnBuffered));
  CHECK(sctpSpec("const0:const1400:bufsplit=receiver:bufsplit-on=outstanding").bufferSplitting == 2);
  CHECK(sctp::describe(control::sctpTuning(sctpSpec("const0:const1400:cmt=cmt:bufsplit=both:bufsplit-on=buffered")))
            .find("bufsplit=both bufsplit-on=buffered dac=off") != std::string::npos);
  const auto smart = sctpSpec("const0:const1400:cmt=cmtrpv2:smartfr=on");
  CHECK(smart.smartFr);
  CHECK(control::sctpTuning(smart).smartFr);
  CHECK(sctp::mechanisms(control::sctpTuning(smart)) == npmp::kSctpMechanismSmartFastRetransmit);
  CHECK(sctp::describe(control::sctpTuning(smart)).find("dac=off smartfr=on nrsack=off") != std::string::npos);
  CHECK(sctp::describe(control::sctpTuning(sctpSpec("const0:const1400:cmt=cmt"))).find("smartfr") == std::string::npos);
  const auto rescheduling = sctpSpec("const0:const1400:cmt=cmt:reschedule=on:smartfr=on");
  CHECK(rescheduling.reschedule);
  CHECK(sctp::mechanisms(control::sctpTuning(rescheduling)) ==
        (npmp::kSctpMechanismChunkRescheduling | npmp::kSctpMechanismSmartFastRetransmit));
  CHECK(sctp::describe(control::sctpTuning(rescheduling)).find("smartfr=on reschedule=on nrsack=off") !=
        std::string::npos);
  CHECK_FALSE(sctpSpec("const0:const1400:cmt=cmt:reschedule=off").reschedule);
  // W-PR-SCTP: a CMT mode of its own, value 5 in ADD_FLOW's CMT byte
  CHECK(sctpSpec("const0:const1400:cmt=wprsctp").cmt == flowspec::kCmtWprSctp);
  CHECK(sctpSpec("const0:const1400:cmt=w-pr-sctp").cmt == 5);
  CHECK(std::string(flowspec::cmtName(5)) == "wprsctp");
  CHECK(sctp::describe(control::sctpTuning(sctpSpec("const0:const1400:cmt=wprsctp"))).find("cmt=wprsctp ") == 0);
}

TEST_CASE("CMT-SCTP tuning errors") {
  CHECK_THAT(flowspec::parse("const0:const1400:sctpcc=reno", Protocol::SCTP).error(), Catch::Contains("rfc2581"));
  CHECK_THAT(flowspec::parse("const0:const1400:bufsplit=half", Protocol::SCTP).error(), Catch::Contains("receiver"));
  CHECK_THAT(flowspec::parse("const0:const1400:rtomin=0", Protocol::SCTP).error(), Catch::Contains("32767"));
  CHECK_THAT(flowspec::parse("const0:const1400:nrsack=on", Protocol::TCP).error(), Catch::Contains("only to SCTP"));
  CHECK_THAT(flowspec::parse("const0:const1400:dac=on", Protocol::UDP).error(), Catch::Contains("only to SCTP"));
  CHECK_THAT(flowspec::parse("const0:const1400:bufsplit-on=queued", Protocol::SCTP).error(),
             Catch::Contains("outstanding or buffered"));
  CHECK_THAT(flowspec::parse("const0:const1400:bufsplit-on=buffered", Protocol::SCTP).error(),
             Catch::Contains("add bufsplit=sender, receiver or both"));
  CHECK_THAT(flowspec::parse("const0:const1400:bufsplit=both:bufsplit-on=buffered", Protocol::TCP).error(),
             Catch::Contains("only to SCTP"));
  CHECK_THAT(flowspec::parse("const0:const1400:smartfr=on", Protocol::SCTP).error(), Catch::Contains("add cmt="));
  CHECK_THAT(flowspec::parse("const0:const1400:cmt=cmt:smartfr=maybe", Protocol::SCTP).error(),
             Catch::Contains("on or off"));
  CHECK_THAT(flowspec::parse("const0:const1400:reschedule=on", Protocol::SCTP).error(), Catch::Contains("add cmt="));
  CHECK_THAT(flowspec::parse("const0:const1400:reschedule=on", Protocol::MPTCP).error(),
             Catch::Contains("only to SCTP"));
  CHECK_THAT(flowspec::parse("const0:const1400:cmt=wprsctp:sctpcc=htcp", Protocol::SCTP).error(),
             Catch::Contains("leave sctpcc= at rfc2581"));
  CHECK_THAT(flowspec::parse("const0:const1400:cmt=westwood", Protocol::SCTP).error(), Catch::Contains("wprsctp"));
}

TEST_CASE("the usrsctp abort (PR-SCTP + NR-SACK + fragmented messages) is refused") {
  const auto bad = flowspec::parse("const0:const5000:unreliable=0.5:nrsack=on", Protocol::SCTP);
  CHECK_THAT(bad.error(), Catch::Contains("maxmsgsize=1200"));
  CHECK_FALSE(flowspec::parse("const0:const5000:rtx_trials=0:nrsack=on", Protocol::SCTP));
  CHECK(flowspec::parse("const0:const5000:unreliable=0.5:nrsack=on:maxmsgsize=1200", Protocol::SCTP));
  CHECK(flowspec::parse("const0:const5000:unreliable=0.5", Protocol::SCTP));
  CHECK(flowspec::parse("const0:const5000:nrsack=on", Protocol::SCTP));
}

TEST_CASE("ADD_FLOW carries the SCTP tuning in bits the reference leaves 0") {
  npmp::AddFlow m;
  m.protocol = Protocol::SCTP;
  m.streamId = 2;
  m.cmt = 4;
  m.flags = npmp::kAddFlowNrSack | 2 << npmp::kAddFlowBufferSplitShift | 3 << npmp::kAddFlowSctpCcShift;
  m.sctpRtoMinAndDac = npmp::kSctpDacBit | 250;
  npmp::Bytes b;
  npmp::encode(m, b);
  CHECK(b[1] == 0xE8);
  CHECK(b[140] == 4);
  CHECK(b[142] == 0x80);
  CHECK(b[143] == 250);
  CHECK(b[16] == 0);
  CHECK(b[17] == 2);
  CHECK(b[18] == 132);  // SCTP, little-endian
  CHECK(b[19] == 0);
  auto r = npmp::decode(b);
  REQUIRE(r);
  CHECK(std::get<npmp::AddFlow>(*r) == m);
}

TEST_CASE("usrsctp's process-wide settings: what a tuning needs of them") {
  // Only CMT associations read buffer splitting and DAC: a flow without CMT needs nothing.
  CHECK_FALSE(sctp::processWideOf(control::sctpTuning(sctpSpec("const0:const1400:bufsplit=both:dac=on"))));
  const auto cmt =
      sctp::processWideOf(control::sctpTuning(sctpSpec("const0:const1400:cmt=cmt:bufsplit=receiver:dac=on")));
  if (sctp::userlandPerAssociation()) {
    // The bundled stack keeps them per association: nothing is process-wide.
    INFO(sctp::userlandStackDescription());
    CHECK_FALSE(cmt);
    CHECK(std::string(sctp::userlandStackDescription()).starts_with("bundled libusrsctp"));
  } else {
    REQUIRE(cmt);
    CHECK(cmt->bufferSplitting == 2);
    CHECK(cmt->dac);
    CHECK(sctp::describe(*cmt) == "bufsplit=receiver dac=on");
    // NR-SACK, RTO.min and the CC module are per socket: they do not make settings differ.
    CHECK(*sctp::processWideOf(control::sctpTuning(sctpSpec("const0:const1400:cmt=cmtrpv2:nrsack=on:rtomin=200"))) ==
          *sctp::processWideOf(control::sctpTuning(sctpSpec("const0:const1400:cmt=cmt"))));
    CHECK(std::string(sctp::userlandStackDescription()).starts_with("system libusrsctp"));
  }
  // Nothing of this process holds them: anything goes.
  CHECK(sctp::processWideCompatible(control::sctpTuning(sctpSpec("const0:const1400:cmt=cmt:bufsplit=both"))));
}

TEST_CASE("a tuning in words, as the logs show what the stack holds") {
  const auto t =
      control::sctpTuning(sctpSpec("const0:const1400:cmt=cmtrpv2:bufsplit=both:dac=on:nrsack=on:rtomin=200"));
  CHECK(sctp::describe(t) == "cmt=cmtrpv2 cc=rfc2581 bufsplit=both dac=on nrsack=on rtomin=200");
}

TEST_CASE("per-message PR-SCTP policy from the flow options") {
  auto always = sctp::streamPolicy(1.0, 1.0, npmp::kRetransmitUnlimited);
  CHECK(always.reliable == 1.0);
  auto unreliable = sctp::streamPolicy(0.5, 0.25, npmp::kRetransmitUnlimited);
  CHECK(unreliable.ordered == 0.5);
  CHECK(unreliable.reliable == 0.25);
  CHECK(unreliable.prPolicy == sctp::PrPolicy::Rtx);
  CHECK(unreliable.prValue == 0);
  auto ttl = sctp::streamPolicy(1.0, 1.0, npmp::kRetransmitTimeFlag | 150);
  CHECK(ttl.prPolicy == sctp::PrPolicy::Ttl);
  CHECK(ttl.prValue == 150);
  CHECK(ttl.reliable == 0.0);  // rtx_timeout= alone applies to every message
  auto rtx = sctp::streamPolicy(1.0, 0.5, 3);
  CHECK(rtx.prPolicy == sctp::PrPolicy::Rtx);
  CHECK(rtx.prValue == 3);
  CHECK(rtx.reliable == 0.5);
}

TEST_CASE("SCTP stack selection") {
  sctp::Tuning plain;
  CHECK_FALSE(plain.needsUserland());
  sctp::Tuning rto;
  rto.rtoMinMs = 200;
  CHECK_FALSE(rto.needsUserland());  // the kernel stack has RTO.min
  sctp::Tuning cmt;
  cmt.cmt = 1;
  CHECK(cmt.needsUserland());
  CHECK(sctp::resolve(sctp::StackChoice::Userland, true) == sctp::Stack::Userland);
  CHECK(sctp::resolve(sctp::StackChoice::Auto, true) == sctp::Stack::Userland);
  if (sctp::kernelAvailable()) {
    CHECK(sctp::resolve(sctp::StackChoice::Auto, false) == sctp::Stack::Kernel);
    CHECK_THROWS_WITH(sctp::resolve(sctp::StackChoice::Kernel, true), Catch::Contains("userland"));
  } else {
    CHECK(sctp::resolve(sctp::StackChoice::Auto, false) == sctp::Stack::Userland);
    CHECK_THROWS_WITH(sctp::resolve(sctp::StackChoice::Kernel, false), Catch::Contains("no SCTP"));
  }
}

TEST_CASE("socket options per protocol") {
  transport::SocketOptions o;
  o.reuseAddress = true;
  o.rcvBufferSize = 100000;
  o.noDelay = true;
  o.congestionControl = "reno";
  o.v6only = true;
  auto tcp = transport::socketOptionsFor(Protocol::TCP, AF_INET6, o);
  REQUIRE(tcp.size() == 5);
  CHECK(tcp[0].name == SO_REUSEADDR);
  CHECK(tcp[1].name == IPV6_V6ONLY);
  CHECK(tcp[2].name == SO_RCVBUF);
  CHECK(tcp[3].name == TCP_NODELAY);
  CHECK(tcp[4].name == TCP_CONGESTION);
  CHECK(std::string(tcp[4].value.begin(), tcp[4].value.end()) == "reno");
  CHECK(transport::socketOptionsFor(Protocol::TCP, AF_INET, o).size() == 4);  // no IPV6_V6ONLY on IPv4
  auto udp = transport::socketOptionsFor(Protocol::UDP, AF_INET, o);
  CHECK(udp.size() == 2);  // TCP options do not apply
}

TEST_CASE("tos= becomes IP_TOS, and on IPv6 sockets IPV6_TCLASS too") {
  transport::SocketOptions o;
  o.tos = 0xb8;
  auto v4 = transport::socketOptionsFor(Protocol::UDP, AF_INET, o);
  REQUIRE(v4.size() == 1);
  CHECK(v4[0].level == IPPROTO_IP);
  CHECK(v4[0].name == IP_TOS);
  CHECK(v4[0].what == "IP_TOS 0xb8");
  int value = 0;
  std::memcpy(&value, v4[0].value.data(), sizeof(value));
  CHECK(value == 0xb8);
  auto v6 = transport::socketOptionsFor(Protocol::TCP, AF_INET6, o);
  REQUIRE(v6.size() == 2);
  CHECK(v6[1].level == IPPROTO_IPV6);
  CHECK(v6[1].name == IPV6_TCLASS);
  CHECK(transport::socketOptionsFor(Protocol::TCP, AF_INET, transport::SocketOptions{}).empty());
}

TEST_CASE("DCCP sockets get the service code \"npmp\" and the CCID") {
  transport::SocketOptions o;
  o.ccid = 3;
  auto dccp = transport::socketOptionsFor(Protocol::DCCP, AF_INET, o);
  REQUIRE(dccp.size() == 2);
  CHECK(dccp[0].level == transport::kSolDccp);
  CHECK(dccp[0].name == transport::kDccpSockoptService);
  CHECK(dccp[0].value == std::vector<std::uint8_t>{'n', 'p', 'm', 'p'});
  CHECK(dccp[1].name == transport::kDccpSockoptCcid);
  CHECK(dccp[1].value == std::vector<std::uint8_t>{3});
  o.ccid = 0;
  CHECK(transport::socketOptionsFor(Protocol::DCCP, AF_INET, o).size() == 1);  // default CCID: not set
  if (const auto available = transport::protocolAvailable(Protocol::DCCP); !available) {
    CHECK_THAT(available.error(), Catch::Contains("DCCP is not supported by this kernel"));
    CHECK_THROWS_WITH(transport::openSocket(Protocol::DCCP, AF_INET), Catch::Contains("not supported by this kernel"));
  }
}

TEST_CASE(
    "bufsplit-on=buffered, smartfr=on, reschedule=on and cmt=wprsctp need the bundled stack's patches, and a "
    "system build says so") {
  const std::string stack = sctp::userlandStackDescription();
  const struct {
    const char* spec;
    const char* patch;
    const char* knob;
  } cases[] = {{"const0:const1400:cmt=cmt:bufsplit=both:bufsplit-on=buffered", " 0004", "bufsplit-on=buffered"},
               {"const0:const1400:cmt=cmt:smartfr=on", " 0005", "smartfr=on"},
               {"const0:const1400:cmt=cmt:reschedule=on", " 0006", "reschedule=on"},
               {"const0:const1400:cmt=wprsctp", " 0008", "cmt=wprsctp"}};
  for (const auto& c : cases) {
    const auto supported = sctp::userlandSupports(control::sctpTuning(sctpSpec(c.spec)));
    if (stack.find(c.patch) != std::string::npos) {
      CHECK(supported);
    } else {
      CHECK_THAT(supported.error(), Catch::Contains(std::string(c.knob) + " needs the bundled SCTP stack"));
    }
  }
  CHECK(sctp::userlandSupports(control::sctpTuning(sctpSpec("const0:const1400:cmt=cmt:bufsplit=both"))));
}

TEST_CASE("an SCTP path's ID is its peer address's rank, not the stack's order of addresses") {
  // usrsctp's getpaddrs order with three paths: the primary, then the others in reverse order of
  // their addition (measured: 10.250.1.2, 10.250.3.2, 10.250.2.2); an IPv6 address after them
  using boost::asio::ip::make_address;
  auto packed = sctp::packAddresses(
      {make_address("10.250.1.2"), make_address("10.250.3.2"), make_address("10.250.2.2"), make_address("fd00::2")},
      9000);
  const auto* addrs = reinterpret_cast<const sockaddr*>(packed.data());
  CHECK(sctp::pathIds(addrs, 4) == std::vector<std::uint32_t>{0, 2, 1, 3});
  // the same addresses in another order keep their IDs
  auto again = sctp::packAddresses(
      {make_address("fd00::2"), make_address("10.250.2.2"), make_address("10.250.3.2"), make_address("10.250.1.2")},
      9000);
  CHECK(sctp::pathIds(reinterpret_cast<const sockaddr*>(again.data()), 4) == std::vector<std::uint32_t>{3, 1, 2, 0});
  // what a sample carries: the ID of its address, the samples in getpaddrs' order
  std::vector<transport::PathSample> out;
  struct Info {
    sockaddr_storage spinfo_address;
    int spinfo_state = 0, spinfo_cwnd = 0, spinfo_srtt = 0, spinfo_rto = 0, spinfo_mtu = 0;
  };
  sctp::samplePeerAddresses<Info>(
      addrs, 3, [](Info&) { return false; }, [](int) { return std::string("-"); }, out);
  REQUIRE(out.size() == 3);
  CHECK(out[0].id == 0);
  CHECK(out[0].remote == "10.250.1.2:9000");
  CHECK(out[1].id == 2);
  CHECK(out[1].remote == "10.250.3.2:9000");
  CHECK(out[2].id == 1);
  CHECK(sctp::pathIds(addrs, 0).empty());
}
