#include "app/transports.h"

#include "common/log.h"
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
  quic::TransportOptions quic;
  quic.caFile = o.tlsCaFile;
  quic.hostName = o.tlsHostName;
  registry.add(quic::dataTransport(quic));
#else
  registry.absent(npmp::Protocol::QUIC, "QUIC support is not compiled in");
#endif
  return registry;
}

// In the order of the passive's startup line ("data channel = SCTP/TCP/UDP/DCCP on port BASE,
// and MPTCP/QUIC on port BASE-1", as the reference's).
transport::Registry passiveTransports(const control::PassiveOptions& o) {
  transport::Registry registry;
  if (o.controlOverSctp) {
    registry.add(sctp::dataTransport({o.sctpStack, control::sctpSettings(o)}));
  } else {
    registry.absent(npmp::Protocol::SCTP, "no SCTP data listener: this passive was started with -Y");
  }
  registry.add(transport::tcpTransport());
  registry.add(transport::udpTransport());
  registry.add(transport::dccpTransport());
  registry.add(transport::mptcpTransport());
#ifdef NPM_QUIC_BUILT
  quic::TransportOptions quic;
  quic.keyFile = o.tlsKeyFile;
  quic.certFile = o.tlsCertFile;
  quic.maxConnections = o.limits.quicConnections;
  quic.retryAbove = o.limits.quicRetryAbove;
  quic.maxPerPrefix = o.limits.quicPerPrefix;
  registry.add(quic::dataTransport(quic));
#else
  if (!o.tlsKeyFile.empty() && !o.tlsCertFile.empty()) {
    log::warning("-tls-key and -tls-cert: this build has no QUIC; no QUIC data listener");
  }
  registry.absent(npmp::Protocol::QUIC, "this passive was built without QUIC");
#endif
  return registry;
}

}  // namespace npm::app
