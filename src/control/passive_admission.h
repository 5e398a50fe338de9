// The passive's admission of a control connection: the answer to a host that the --allow list
// does not name, and the HMAC challenge-response when the passive requires a shared key
// (auth.h). A refused active learns why from an ACKNOWLEDGE status instead of a timeout.
#pragma once

#include <cstdint>

#include "control/auth.h"
#include "control/control_channel.h"
#include "npmp/messages.h"
#include "transport/async.h"  // asio::awaitable, Clock

namespace npm::control {

// Sends ACKNOWLEDGE (flow, measurement, stream, status) on the control connection.
void sendAcknowledge(ControlChannel& control, std::uint32_t flowId, std::uint64_t measurementId, std::uint16_t streamId,
                     std::uint32_t status);

// Answers the connection's first message (waited for at most `timeout`) with ACKNOWLEDGE
// `status` for its flow, measurement and stream; returns once that is sent.
asio::awaitable<void> refuseControl(ControlChannel& control, Clock::duration timeout, std::uint32_t status);
asio::awaitable<void> refuseControl(ControlChannel& control, std::uint32_t status, const npmp::Bytes& firstMessage);

// The active proves `key` (and learns that the passive has it too), each step within
// `timeout`. False, after telling the active why and logging a rate-limited line, if it does not.
asio::awaitable<bool> authenticateControl(ControlChannel& control, const AuthKey& key, Clock::duration timeout);

}  // namespace npm::control
