// The one mapping between flow parameters and ADD_FLOW (control/flow_mapping): every option
// of a FLOWSPEC survives FlowSpec → ADD_FLOW → bytes → ADD_FLOW → what the passive runs.
#include <catch2/catch.hpp>

#include <set>

#include "control/flow_mapping.h"
#include "flowspec/flowspec.h"
#include "flowspec/random.h"
#include "sctp/flow_settings.h"

using namespace npm;
using npmp::Protocol;

namespace {

flowspec::FlowSpec spec(const std::string& text, Protocol protocol) {
  auto r = flowspec::parse(text, protocol);
  INFO(text << ": " << r.error());
  REQUIRE(r);
  std::vector<flowspec::FlowSpec> one{*r};
  REQUIRE(flowspec::assignFlowIds(one));
  return one[0];
}

// What the passive makes of the spec, through the encoded bytes.
control::FlowRequest overTheWire(const flowspec::FlowSpec& s, std::uint64_t measurementId) {
  npmp::Bytes bytes;
  npmp::encode(control::toAddFlow(s, measurementId), bytes);
  const auto decoded = npmp::decode(bytes);
  INFO(decoded.error());
  REQUIRE(decoded);
  return control::fromAddFlow(std::get<npmp::AddFlow>(*decoded));
}

}  // namespace

TEST_CASE("flow mapping: every option of a stream flow reaches the passive") {
  const auto s = spec(
      "const10:uniform100,200:exp5:pareto1000,1.5:id=7:description=Video call:maxmsgsize=1200:"
      "rcvbuf=300000:sndbuf=400000:nodelay=on:debug=on:cc=cubic:onoff=+1,+exp2,+3,+4,repeat",
      Protocol::TCP);
  const auto r = overTheWire(s, 0x1122334455667788ull);
  const measure::FlowParameters& p = r.parameters;
  CHECK(p.measurementId == 0x1122334455667788ull);
  CHECK(p.flowId == 7);
  CHECK(p.streamId == 0);
  CHECK(p.protocol == Protocol::TCP);
  CHECK(p.description == "Video call");
  // The passive sends what the active receives.
  CHECK(p.outbound.rate == s.inbound.rate);
  CHECK(p.outbound.size == s.inbound.size);
  CHECK(p.onOff == s.onOff);
  CHECK(p.repeatOnOff);
  CHECK(p.maxMsgSize == 1200);
  CHECK(p.debug);
  CHECK_FALSE(p.errorOnAbort);  // the passive ignores send errors
  CHECK(r.socketOptions.rcvBufferSize == 300000);
  CHECK(r.socketOptions.sndBufferSize == 400000);
  CHECK(r.socketOptions.noDelay == true);
  CHECK(r.socketOptions.congestionControl == "cubic");
  CHECK(r.sctpTuning.isDefault());

  // The active runs the outbound direction itself, with the same identity.
  const auto a = control::activeFlowParameters(s, 0x1122334455667788ull);
  CHECK(a.outbound.rate == s.outbound.rate);
  CHECK(a.outbound.size == s.outbound.size);
  CHECK(a.flowId == 7);
  CHECK(a.description == p.description);
  CHECK(a.onOff == p.onOff);
  CHECK(a.repeatOnOff == p.repeatOnOff);
  CHECK(a.maxMsgSize == p.maxMsgSize);
  CHECK(a.errorOnAbort);
}

TEST_CASE("flow mapping: the runtime reaches the passive") {
  const auto s = spec("const0:const1400:const25:const1000", Protocol::UDP);
  npmp::Bytes b;
  npmp::encode(control::toAddFlow(s, 1, 3000), b);
  const auto decoded = npmp::decode(b);
  REQUIRE(decoded);
  CHECK(control::fromAddFlow(std::get<npmp::AddFlow>(*decoded)).runtimeMs == 3000);
  CHECK(control::toAddFlow(s, 1).runtimeMs == 0);  // none: the passive sends until STOP
}

TEST_CASE("flow mapping: defaults stay defaults") {
  const auto r = overTheWire(spec("const0:const1400", Protocol::UDP), 1);
  CHECK(r.parameters.protocol == Protocol::UDP);
  CHECK(r.parameters.description == "Flow 0");
  CHECK_FALSE(r.parameters.outbound.enabled());
  CHECK(r.parameters.onOff.empty());
  CHECK_FALSE(r.parameters.repeatOnOff);
  CHECK_FALSE(r.parameters.debug);
  CHECK(r.socketOptions.noDelay == false);
  CHECK(r.socketOptions.congestionControl.empty());
  CHECK(r.socketOptions.ccid == 0);
  CHECK(r.sctpTuning.isDefault());
  CHECK(r.streamPolicy.ordered == 1.0);
  CHECK(r.streamPolicy.reliable == 1.0);
}

TEST_CASE("flow mapping: SCTP delivery policy and CMT tuning") {
  const auto s = spec(
      "const0:const1000:const0:const1000:unordered=0.25:unreliable=0.5:rtx_timeout=150:"
      "cmt=cmtrpv2:sctpcc=htcp:bufsplit=both:nrsack=on:rtomin=200:dac=on:maxmsgsize=1200",
      Protocol::SCTP);
  const auto r = overTheWire(s, 2);
  CHECK(r.sctpTuning == control::sctpTuning(s));
  CHECK(r.sctpTuning.cmt == 3);
  CHECK(r.sctpTuning.ccModule == 2);
  CHECK(r.sctpTuning.bufferSplitting == 3);
  CHECK(r.sctpTuning.nrSack);
  CHECK(r.sctpTuning.rtoMinMs == 200);
  CHECK(r.sctpTuning.dac);
  const auto expected = sctp::streamPolicy(s.ordered, s.reliable, s.retransmissionTrials);
  CHECK(r.streamPolicy.ordered == Approx(expected.ordered));
  CHECK(r.streamPolicy.reliable == Approx(expected.reliable));
  CHECK(r.streamPolicy.prPolicy == expected.prPolicy);
  CHECK(r.streamPolicy.prValue == expected.prValue);
}

TEST_CASE("flow mapping: DCCP CCID and MPTCP") {
  CHECK(overTheWire(spec("const10:const500:ccid=3", Protocol::DCCP), 3).socketOptions.ccid == 3);
  const auto m = overTheWire(spec("const0:const1400:cc=cubic", Protocol::MPTCP), 4);
  CHECK(m.parameters.protocol == Protocol::MPTCP);
  CHECK(m.socketOptions.congestionControl == "cubic");
}

TEST_CASE("flow mapping: the SCTP tuning's place on the wire") {
  sctp::Tuning t;
  t.cmt = 4;
  t.nrSack = true;
  t.bufferSplitting = 2;
  t.ccModule = 3;
  t.rtoMinMs = 250;
  t.dac = true;
  CHECK(sctp::tuningFlags(t) ==
        (npmp::kAddFlowNrSack | 2 << npmp::kAddFlowBufferSplitShift | 3 << npmp::kAddFlowSctpCcShift));
  CHECK(sctp::rtoMinAndDac(t) == (npmp::kSctpDacBit | 250));
  CHECK(sctp::mechanisms(t) == 0);
  CHECK(sctp::tuningFromWire(4, sctp::tuningFlags(t), sctp::rtoMinAndDac(t), sctp::mechanisms(t)) == t);
  // bufsplit-on=buffered (bit 2 of the tuning's buffer splitting), smartfr=on and reschedule=on
  // in the SctpMechanisms field
  t.bufferSplitting = 3 | flowspec::kBufferSplitOnBuffered;
  t.smartFr = true;
  t.reschedule = true;
  CHECK(sctp::tuningFlags(t) ==
        (npmp::kAddFlowNrSack | 3 << npmp::kAddFlowBufferSplitShift | 3 << npmp::kAddFlowSctpCcShift));
  CHECK(sctp::mechanisms(t) == (npmp::kSctpMechanismBufferSplitOnBuffered | npmp::kSctpMechanismSmartFastRetransmit |
                                npmp::kSctpMechanismChunkRescheduling));
  CHECK(sctp::tuningFromWire(4, sctp::tuningFlags(t), sctp::rtoMinAndDac(t), sctp::mechanisms(t)) == t);
  // The reference's own flag bits are not SCTP tuning.
  CHECK(sctp::tuningFromWire(0, npmp::kAddFlowDebug | npmp::kAddFlowNoDelay | npmp::kAddFlowRepeatOnOff, 0, 0)
            .isDefault());
}

TEST_CASE("flow mapping: fractions on the wire") {
  CHECK(sctp::fractionToWire(1.0) == 0xFFFFFFFFu);
  CHECK(sctp::fractionToWire(0.0) == 0u);
  CHECK(sctp::wireToFraction(sctp::fractionToWire(0.25)) == Approx(0.25));
}

TEST_CASE("flow mapping: the run's seed reaches the passive, and each side seeds each use apart") {
  const auto s = spec("exp20:uniform100,900:exp10:uniform200,300:id=3:onoff=+exp1,+exp1,repeat", Protocol::SCTP);
  constexpr std::uint64_t kSeed = 0x1234567890ABCull;
  npmp::Bytes b;
  npmp::encode(control::toAddFlow(s, 1, 0, kSeed), b);
  const auto decoded = npmp::decode(b);
  REQUIRE(decoded);
  CHECK(std::get<npmp::AddFlow>(*decoded).seed == kSeed);
  const auto passive = control::fromAddFlow(std::get<npmp::AddFlow>(*decoded));
  const auto active = control::activeFlowParameters(s, 1, kSeed);
  using flowspec::SeedUse;
  using flowspec::Side;
  const auto activePolicy = sctp::policyOf(control::toAddFlow(s, 1, 0, kSeed), Side::Active);
  CHECK(passive.parameters.trafficSeed == flowspec::deriveSeed(kSeed, Side::Passive, 3, 0, SeedUse::Traffic));
  CHECK(passive.streamPolicy.seed == flowspec::deriveSeed(kSeed, Side::Passive, 3, 0, SeedUse::Messages));
  CHECK(active.trafficSeed == flowspec::deriveSeed(kSeed, Side::Active, 3, 0, SeedUse::Traffic));
  CHECK(activePolicy.seed == flowspec::deriveSeed(kSeed, Side::Active, 3, 0, SeedUse::Messages));
  // Four uses, four different seeds, none 0 (which would mean entropy).
  const std::set<std::uint64_t> seeds{passive.parameters.trafficSeed, passive.streamPolicy.seed, active.trafficSeed,
                                      activePolicy.seed};
  CHECK(seeds.size() == 4);
  CHECK(seeds.count(0) == 0);

  // Without a seed (a reference active sends zeros there): both sides draw from entropy.
  const auto unseeded = overTheWire(s, 1);
  CHECK(unseeded.parameters.trafficSeed == 0);
  CHECK(unseeded.streamPolicy.seed == 0);
  CHECK(control::activeFlowParameters(s, 1).trafficSeed == 0);
  CHECK(sctp::policyOf(control::toAddFlow(s, 1), flowspec::Side::Active).seed == 0);
}
