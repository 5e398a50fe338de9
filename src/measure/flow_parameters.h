// What one side needs to run a flow (measure::Flow): plain data, without Asio, for the code
// that maps a FLOWSPEC or an ADD_FLOW to it (control/flow_mapping.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flowspec/flowspec.h"
#include "npmp/messages.h"

namespace npm::measure {

// What one side needs to run a flow.
struct FlowParameters {
  std::uint64_t measurementId = 0;
  std::uint32_t flowId = 0;
  std::uint16_t streamId = 0;
  npmp::Protocol protocol = npmp::Protocol::TCP;
  std::string description;
  flowspec::Traffic outbound;  // what this side sends
  std::vector<npmp::OnOffEvent> onOff;
  bool repeatOnOff = false;
  std::uint16_t maxMsgSize = 16000;
  std::uint32_t defragTimeoutMs = 5000;
  bool errorOnAbort = true;
  bool debug = false;
  // The seed of this side's frame rates, frame sizes and on/off times (flowspec::deriveSeed);
  // 0 = from the system's entropy.
  std::uint64_t trafficSeed = 0;
  // A fixed-size transfer (transfer=, frames=; the active's only): the sender stops after this
  // many bytes (as counted) or frames; 0 = no limit.
  std::uint64_t transferBytes = 0, transferFrames = 0;
};

}  // namespace npm::measure
