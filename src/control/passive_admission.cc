#include "control/passive_admission.h"

#include <string>
#include <variant>

#include "common/log.h"

namespace npm::control {

void sendAcknowledge(ControlChannel& control, std::uint32_t flowId, std::uint64_t measurementId, std::uint16_t streamId,
                     std::uint32_t status) {
  npmp::Bytes b;
  npmp::encode(npmp::Acknowledge{flowId, measurementId, streamId, status}, b);
  control.send(std::move(b));
}

asio::awaitable<void> refuseControl(ControlChannel& control, Clock::duration timeout, std::uint32_t status) {
  const auto message = co_await control.next(timeout);
  if (!message) co_return;
  co_await refuseControl(control, status, *message);
}

asio::awaitable<void> refuseControl(ControlChannel& control, std::uint32_t status, const npmp::Bytes& firstMessage) {
  const auto decoded = npmp::decode(firstMessage);
  if (!decoded) co_return;
  std::uint32_t flowId = 0;
  std::uint64_t measurementId = 0;
  std::uint16_t streamId = 0;
  std::visit(
      [&](const auto& m) {
        if constexpr (requires { m.measurementId; }) measurementId = m.measurementId;
        if constexpr (requires { m.flowId; }) flowId = m.flowId;
        if constexpr (requires { m.streamId; }) streamId = m.streamId;
      },
      *decoded);
  sendAcknowledge(control, flowId, measurementId, streamId, status);
  co_await control.drained(0);
}

asio::awaitable<bool> authenticateControl(ControlChannel& control, const AuthKey& key, Clock::duration timeout) {
  static log::Repeated failures{"Failed authentications"};  // of all connections
  const auto hello = co_await control.next(timeout);
  if (!hello) co_return false;
  const auto decoded = npmp::decode(*hello);
  const auto* h = decoded ? std::get_if<npmp::AuthHello>(&*decoded) : nullptr;
  if (h == nullptr) {
    failures.say("Refused control connection from " + control.peerName() +
                 ": it does not authenticate (this passive requires --auth-key-file)");
    co_await refuseControl(control, npmp::kStatusAuthenticationRequired, *hello);
    co_return false;
  }
  npmp::AuthChallenge challenge;
  challenge.nonce = newNonce();
  challenge.mac = passiveProof(key, h->nonce, challenge.nonce);
  npmp::Bytes out;
  npmp::encode(challenge, out);
  control.send(std::move(out));
  const auto response = co_await control.next(timeout);
  const auto answer = response ? npmp::decode(*response) : npmp::DecodeResult(Failure{"no answer"});
  const auto* r = answer ? std::get_if<npmp::AuthResponse>(&*answer) : nullptr;
  if (r == nullptr || !sameProof(r->mac, activeProof(key, challenge.nonce, h->nonce))) {
    failures.say("Refused control connection from " + control.peerName() + ": authentication failed (" +
                 std::to_string(failures.count() + 1) + " failures so far)");
    sendAcknowledge(control, 0, 0, 0, npmp::kStatusNotAllowed);
    co_await control.drained(0);
    co_return false;
  }
  sendAcknowledge(control, 0, 0, 0, npmp::kStatusOk);
  log::debug("Control connection from " + control.peerName() + " authenticated");
  co_return true;
}

}  // namespace npm::control
