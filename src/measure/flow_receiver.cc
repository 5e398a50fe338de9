#include "measure/flow_receiver.h"

#include <string>

#include "measure/flow.h"

namespace npm::measure {

FlowReceiver::FlowReceiver(const FlowParameters& params) : params_(params), rx_(params.defragTimeoutMs) {}

Result<Reception> FlowReceiver::accept(std::span<const std::uint8_t> message, std::uint64_t now) {
  const auto header = npmp::decodeData(message);
  if (!header) return Failure{header.error()};
  const npmp::DataHeader& h = *header;
  if (h.flowId != params_.flowId || h.measurementId != params_.measurementId || h.streamId != params_.streamId) {
    return Failure{"DATA for flow " + std::to_string(h.flowId) + " on the data channel of flow " +
                   std::to_string(params_.flowId)};
  }
  return rx_.onMessage(h, message.size(), now);
}

void FlowReceiver::finish() {
  rx_.finalize();
  finished_ = true;
}

}  // namespace npm::measure
