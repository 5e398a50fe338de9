#include "transport/data_transport.h"

#include <algorithm>

namespace npm::transport {

Result<npmp::IdentifyFlow> identifyOf(std::span<const std::uint8_t> message) {
  const auto decoded = npmp::decode(message);
  if (!decoded) return Failure{decoded.error()};
  if (const auto* id = std::get_if<npmp::IdentifyFlow>(&*decoded)) return *id;
  return Failure{npmp::typeName(message[0])};
}

std::string DataTransport::whyUnsupported() const {
  const std::string name = npmp::protocolName(protocol());
  return "its kernel lacks " + name + ", or its listener could not be opened (see its log)";
}

std::vector<std::shared_ptr<DataTransport>>::const_iterator Registry::position(npmp::Protocol protocol) const {
  return std::find_if(transports_.begin(), transports_.end(),
                      [protocol](const auto& t) { return t->protocol() == protocol; });
}

void Registry::add(std::shared_ptr<DataTransport> transport) {
  const npmp::Protocol protocol = transport->protocol();
  absent_.erase(protocol);
  if (auto it = position(protocol); it != transports_.end()) transports_.erase(it);
  transports_.push_back(std::move(transport));
}

void Registry::absent(npmp::Protocol protocol, std::string why) {
  if (auto it = position(protocol); it != transports_.end()) transports_.erase(it);
  absent_[protocol] = std::move(why);
}

DataTransport* Registry::find(npmp::Protocol protocol) const {
  auto it = position(protocol);
  return it == transports_.end() ? nullptr : it->get();
}

std::string Registry::whyAbsent(npmp::Protocol protocol) const {
  if (auto it = absent_.find(protocol); it != absent_.end()) return it->second;
  return std::string(npmp::protocolName(protocol)) + " data flows are not supported by this build";
}

std::vector<DataTransport*> Registry::all() const {
  std::vector<DataTransport*> all;
  for (const auto& transport : transports_) all.push_back(transport.get());
  return all;
}

}  // namespace npm::transport
