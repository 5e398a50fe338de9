#include "transport/data_transport.h"

namespace npm::transport {

void Registry::add(std::shared_ptr<DataTransport> transport) {
  const npmp::Protocol protocol = transport->protocol();
  absent_.erase(protocol);
  transports_[protocol] = std::move(transport);
}

void Registry::absent(npmp::Protocol protocol, std::string why) {
  transports_.erase(protocol);
  absent_[protocol] = std::move(why);
}

DataTransport* Registry::find(npmp::Protocol protocol) const {
  auto it = transports_.find(protocol);
  return it == transports_.end() ? nullptr : it->second.get();
}

std::string Registry::whyAbsent(npmp::Protocol protocol) const {
  if (auto it = absent_.find(protocol); it != absent_.end()) return it->second;
  return std::string(npmp::protocolName(protocol)) + " data flows are not supported by this build";
}

std::vector<DataTransport*> Registry::all() const {
  std::vector<DataTransport*> all;
  for (const auto& [protocol, transport] : transports_) all.push_back(transport.get());
  return all;
}

}  // namespace npm::transport
