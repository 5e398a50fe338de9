// Per-path samples of real kernel sockets on loopback.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "transport/path_sample.h"

using npm::transport::PathSample;
using npm::transport::sampleSocketPaths;
using npm::transport::sockaddrName;

namespace {
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// A connected loopback pair of `protocol` (IPPROTO_TCP or IPPROTO_MPTCP); -1s if unsupported.
void connectedPair(int protocol, Fd& client, Fd& server) {
  Fd listener{::socket(AF_INET, SOCK_STREAM, protocol)};
  if (listener.fd < 0) return;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  REQUIRE(::bind(listener.fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  REQUIRE(::listen(listener.fd, 1) == 0);
  REQUIRE(::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  client.fd = ::socket(AF_INET, SOCK_STREAM, protocol);
  REQUIRE(::connect(client.fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  server.fd = ::accept(listener.fd, nullptr, nullptr);
  REQUIRE(server.fd >= 0);
}

void exchange(int from, int to, std::size_t bytes) {
  std::vector<char> b(bytes, 'x');
  std::size_t sent = 0, got = 0;
  while (sent < bytes) sent += static_cast<std::size_t>(::send(from, b.data() + sent, bytes - sent, 0));
  while (got < bytes) got += static_cast<std::size_t>(::recv(to, b.data(), bytes - got, 0));
}
}  // namespace

TEST_CASE("a TCP connection is one path with the kernel's own state") {
  Fd client{-1}, server{-1};
  connectedPair(IPPROTO_TCP, client, server);
  exchange(client.fd, server.fd, 200000);
  std::vector<PathSample> paths;
  REQUIRE(sampleSocketPaths(client.fd, paths));
  REQUIRE(paths.size() == 1);
  const auto& p = paths[0];
  CHECK(p.id == 0);
  CHECK(p.state == "ESTABLISHED");
  CHECK(p.local.rfind("127.0.0.1:", 0) == 0);
  CHECK(p.remote.rfind("127.0.0.1:", 0) == 0);
  CHECK(p.cwnd > 0);
  CHECK(p.srttMs > 0);
  CHECK(p.srttMs < 1000);
  CHECK(p.rtoMs >= 200);
  CHECK(p.bytesSent >= 200000);
  CHECK(p.bytesAcked >= 200000);
  std::vector<PathSample> other;
  REQUIRE(sampleSocketPaths(server.fd, other));
  CHECK(other[0].bytesReceived >= 200000);
  CHECK(other[0].remote == p.local);
}

TEST_CASE("an MPTCP connection is sampled per subflow") {
  Fd client{-1}, server{-1};
  connectedPair(262, client, server);
  if (client.fd < 0) {
    WARN("this kernel has no MPTCP: not tested");
    return;
  }
  exchange(client.fd, server.fd, 100000);
  std::vector<PathSample> paths;
  REQUIRE(sampleSocketPaths(client.fd, paths));
  // loopback, no second address: the initial subflow, and the connection as a whole
  REQUIRE(paths.size() == 2);
  CHECK(paths[0].state == "ESTABLISHED");
  CHECK(paths[0].bytesSent >= 100000);
  CHECK(paths[0].remote.rfind("127.0.0.1:", 0) == 0);
  const PathSample& connection = paths[1];
  CHECK(connection.connection());
  CHECK(connection.state == "multipath");
  // Data-level bytes (mptcp_info, Linux 6.7+): what the application wrote.
  if (!std::isnan(connection.bytesSent)) {
    CHECK(connection.bytesSent >= 100000);
    CHECK(connection.bytesSent < 110000);
    CHECK(connection.bytesAcked <= connection.bytesSent);
  }
  std::vector<PathSample> other;
  REQUIRE(sampleSocketPaths(server.fd, other));
  REQUIRE(other.size() == 2);
  if (!std::isnan(other[1].bytesReceived)) CHECK(other[1].bytesReceived == 100000);
}

TEST_CASE("a socket that is not TCP tells nothing") {
  Fd udp{::socket(AF_INET, SOCK_DGRAM, 0)};
  std::vector<PathSample> paths;
  CHECK_FALSE(sampleSocketPaths(udp.fd, paths));
  CHECK(paths.empty());
}

TEST_CASE("addresses are written as address:port, IPv4-mapped IPv6 as IPv4") {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(9000);
  REQUIRE(::inet_pton(AF_INET6, "::ffff:10.1.2.3", &a.sin6_addr) == 1);
  CHECK(sockaddrName(&a) == "10.1.2.3:9000");
  REQUIRE(::inet_pton(AF_INET6, "fe80::1", &a.sin6_addr) == 1);
  CHECK(sockaddrName(&a) == "[fe80::1]:9000");
}

TEST_CASE("a socket's path sampler keeps its addresses and samples the live state each time") {
  Fd client{-1}, server{-1};
  connectedPair(IPPROTO_TCP, client, server);
  npm::transport::SocketPathSampler sampler;
  std::vector<PathSample> first, second, once;
  REQUIRE(sampler.sample(client.fd, first));
  exchange(client.fd, server.fd, 100000);
  REQUIRE(sampler.sample(client.fd, second));
  REQUIRE(sampleSocketPaths(client.fd, once));
  REQUIRE(first.size() == 1);
  REQUIRE(second.size() == 1);
  for (const auto* p : {&first[0], &second[0]}) {
    CHECK(p->local == once[0].local);
    CHECK(p->remote == once[0].remote);
    CHECK(p->state == "ESTABLISHED");
  }
  CHECK(second[0].bytesSent >= first[0].bytesSent + 100000);  // not a cached sample
}

// The flows of --threads sample on threads of their own; a kernel that tells nothing about an
// MPTCP connection is said once per process, by whichever thread finds out first (the flag it
// keeps is shared by all of them: TSan checks it, label tsan). A sampler that has seen an MPTCP
// socket and samples a socket that is gone gets neither MPTCP_FULL_INFO nor TCP_INFO.
TEST_CASE("a kernel without MPTCP statistics is said once, from any number of flow threads", "[tsan]") {
  Fd probe{::socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)};
  if (probe.fd < 0) {
    WARN("this kernel has no MPTCP: not tested");
    return;
  }
  char path[] = "/tmp/npm-path-sample-XXXXXX";
  const int logFd = ::mkstemp(path);
  REQUIRE(logFd >= 0);
  ::close(logFd);
  REQUIRE(npm::log::setFile(path, false));
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::atomic<int> nothing{0};
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&nothing] {
      npm::transport::SocketPathSampler sampler;
      std::vector<PathSample> paths;
      Fd mptcp{::socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)};
      if (!sampler.sample(mptcp.fd, paths)) return;  // learns that the socket is MPTCP
      if (!sampler.sample(-1, paths)) ++nothing;     // a socket that is gone
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(npm::log::setFile("/dev/stderr", true));
  std::ifstream in(path);
  std::string line;
  int said = 0;
  while (std::getline(in, line)) said += line.find("MPTCP flows have no per-path statistics") != std::string::npos;
  ::unlink(path);
  CHECK(nothing == kThreads);
  CHECK(said == 1);
}
