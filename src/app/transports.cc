#include "app/transports.h"

#include "sctp/data_transport.h"
#include "transport/stream_transports.h"
#ifdef NPM_QUIC_BUILT
#include "quic/data_transport.h"
#endif

namespace npm::app {

namespace {

void addKernelTransports(transport::Registry& registry) {
  registry.add(transport::tcpTransport());
  registry.add(transport::mptcpTransport());
  registry.add(transport::udpTransport());
  registry.add(transport::dccpTransport());
}

}  // namespace

transport::Registry activeTransports(const control::ActiveOptions& o) {
  transport::Registry registry;
  addKernelTransports(registry);
  registry.add(sctp::dataTransport({o.sctpStack, control::sctpSettings(o)}));
#ifdef NPM_QUIC_BUILT
  registry.add(quic::dataTransport({o.tlsCaFile, o.tlsHostName}));
#else
  registry.absent(npmp::Protocol::QUIC, "QUIC support is not compiled in");
#endif
  return registry;
}

transport::Registry passiveTransports() {
  transport::Registry registry;
  addKernelTransports(registry);
  // What the passive asks of its SCTP stack is its listeners' (control/passive_listeners): the
  // transport admits flows and connects none.
  registry.add(sctp::dataTransport({}));
#ifdef NPM_QUIC_BUILT
  registry.add(quic::dataTransport({}));
#else
  registry.absent(npmp::Protocol::QUIC, "this passive was built without QUIC");
#endif
  return registry;
}

}  // namespace npm::app
