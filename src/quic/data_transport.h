// QUIC behind transport::DataTransport (transport/data_transport.h): the flows of one -quic
// option share a connection to the passive's UDP BASE-1, a pair of streams each, on the control
// thread (README.md); the passive's server there takes them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "transport/data_transport.h"

namespace npm::quic {

// What the command line chose for QUIC: the active's -tls-ca and -tls-hostname; the passive's
// -tls-key and -tls-cert (without both it serves no QUIC) and its limits (quic::ServerOptions).
struct TransportOptions {
  std::string caFile;    // empty: the system's trust store
  std::string hostName;  // empty: not checked
  std::string keyFile, certFile;
  std::size_t maxConnections = 1024, retryAbove = 64, maxPerPrefix = 256;
};

std::shared_ptr<transport::DataTransport> dataTransport(const TransportOptions& options);

}  // namespace npm::quic
