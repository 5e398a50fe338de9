// The SCTP INIT rate limit (sctp/init_filter): option text, the socket search, the BPF
// socket filter (init_filter.bpf.c through its libbpf skeleton) on real loopback UDP sockets,
// and the verifier's verdict in the error of a program it refuses (loading needs root).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "sctp/init_filter.h"

#if NPM_INIT_FILTER_BPF
#include "npm_rejected_filter.skel.h"
#include "sctp/bpf_load.h"
#endif

using namespace npm;
using sctp::InitRateLimit;

namespace {

// A socket that closes itself.
struct Fd {
  explicit Fd(int fd) : fd(fd) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int fd;
};

// A UDP socket bound to the loopback address of `family` (port 0: any).
int boundUdp(int family, std::uint16_t port = 0) {
  const int fd = ::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  if (family == AF_INET) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
  } else {
    const int on = 1;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons(port);
    sa.sin6_addr = in6addr_loopback;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
  }
  return fd;
}

std::uint16_t portOf(int fd) {
  sockaddr_storage sa{};
  socklen_t len = sizeof(sa);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0);
  return ntohs(sa.ss_family == AF_INET ? reinterpret_cast<sockaddr_in&>(sa).sin_port
                                       : reinterpret_cast<sockaddr_in6&>(sa).sin6_port);
}

// An SCTP packet as the UDP payload: common header, then one chunk of `chunkType` whose
// value carries `tag` (to tell the datagrams apart on arrival). `size` < 13 cuts it short.
std::vector<std::uint8_t> packet(std::uint8_t chunkType, std::uint8_t tag, std::size_t size = 32) {
  std::vector<std::uint8_t> p(size, 0);
  if (size > 0) p[0] = 0x13;  // source port 5000
  if (size > 12) p[12] = chunkType;
  if (size > 31) p[31] = tag;
  return p;
}

void sendTo(int from, int to, const std::vector<std::uint8_t>& data) {
  sockaddr_storage sa{};
  socklen_t len = sizeof(sa);
  REQUIRE(::getsockname(to, reinterpret_cast<sockaddr*>(&sa), &len) == 0);
  REQUIRE(::sendto(from, data.data(), data.size(), 0, reinterpret_cast<sockaddr*>(&sa), len) ==
          static_cast<long>(data.size()));
}

using Datagrams = std::vector<std::vector<std::uint8_t>>;

// What arrives on `fds`, one list each: until `expected` datagrams in all have come (or 5 s
// have passed), and then whatever else is waiting, so that more than expected shows.
std::vector<Datagrams> drain(std::initializer_list<int> fds, std::size_t expected) {
  std::vector<Datagrams> got(fds.size());
  std::uint8_t buffer[2048];
  std::size_t total = 0;
  auto take = [&] {
    std::size_t i = 0;
    for (const int fd : fds) {
      for (long n; (n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT)) >= 0; ++total) {
        got[i].emplace_back(buffer, buffer + n);
      }
      ++i;
    }
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  take();
  while (total < expected && std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> p;
    for (const int fd : fds) p.push_back(pollfd{fd, POLLIN, 0});
    ::poll(p.data(), p.size(), 100);
    take();
  }
  return got;
}
Datagrams drain(int fd, std::size_t expected) { return drain({fd}, expected)[0]; }

std::size_t countInits(const std::vector<std::vector<std::uint8_t>>& got) {
  return static_cast<std::size_t>(
      std::count_if(got.begin(), got.end(), [](const auto& d) { return d.size() > 12 && d[12] == 1; }));
}

// The filter for `limit`, or nullptr when this build has none or this process may not load
// BPF (not root): skipped.
std::unique_ptr<sctp::InitRateFilter> loadOrSkip(const InitRateLimit& limit) {
  if (!sctp::InitRateFilter::built()) {
    WARN("BPF INIT filter not built (no clang, bpftool or libbpf-dev at configure time)");
    return nullptr;
  }
  auto filter = sctp::InitRateFilter::load(limit);
  if (!filter && ::geteuid() != 0) {
    WARN("BPF socket filter not loaded (not root): " << filter.error());
    return nullptr;
  }
  INFO(filter.error());
  REQUIRE(filter);
  return std::move(*filter);
}

}  // namespace

TEST_CASE("option --sctp-init-rate, its values") {
  CHECK(sctp::parseInitRateLimit("500") == InitRateLimit{500, 500});
  CHECK(sctp::parseInitRateLimit("20/5") == InitRateLimit{20, 5});
  CHECK(sctp::parseInitRateLimit("1/1000000") == InitRateLimit{1, 1000000});
  CHECK(sctp::parseInitRateLimit("0") == InitRateLimit{});
  CHECK_FALSE(sctp::parseInitRateLimit("0").value().enabled());
  CHECK(sctp::parseInitRateLimit("1000000") == InitRateLimit{1000000, 1000000});
  for (const char* bad : {"", "/", "0/5", "5/0", "5/", "/5", "-1", "1000001", "5/1000001", "1.5", "5/2/1", "x", " 5"}) {
    INFO(bad);
    CHECK_FALSE(sctp::parseInitRateLimit(bad));
  }
  CHECK(sctp::describe(InitRateLimit{500, 1000}) == "500/s, burst 1000");
  CHECK(sctp::describe(InitRateLimit{}) == "unlimited");
  CHECK(sctp::kDefaultInitRateLimit.enabled());
  CHECK(sctp::kDefaultInitRateLimit.burst >= sctp::kDefaultInitRateLimit.perSecond);
  CHECK(sctp::nftablesHint(27001, InitRateLimit{20, 5}) ==
        "nft add rule inet filter input udp dport 27001 @th,160,8 1 limit rate over 20/second burst 5 packets drop");
}

TEST_CASE("The UDP sockets on a port are found, IPv4 and IPv6, and nothing else") {
  Fd v4(boundUdp(AF_INET));
  const std::uint16_t port = portOf(v4.fd);
  Fd v6(boundUdp(AF_INET6, port));
  Fd other(boundUdp(AF_INET));
  Fd tcp(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(tcp.fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);

  auto found = sctp::udpSocketsOnPort(port);
  std::sort(found.begin(), found.end());
  CHECK(found == std::vector<int>{std::min(v4.fd, v6.fd), std::max(v4.fd, v6.fd)});
  CHECK(sctp::udpSocketsOnPort(port, {v4.fd}) == std::vector<int>{v6.fd});
  const auto open = sctp::openDescriptors();
  CHECK(open.count(v4.fd) == 1);
  CHECK(open.count(tcp.fd) == 1);
  CHECK(sctp::udpSocketsOnPort(port, open).empty());
}

TEST_CASE("The INIT filter loads with its configuration") {
  auto filter = loadOrSkip(InitRateLimit{20, 7});
  if (!filter) return;
  const auto s = filter->state();
  REQUIRE(s);
  CHECK(s->intervalNs == 50000000);
  CHECK(s->toleranceNs == 7 * 50000000ULL);
  CHECK(s->tat == 0);
  CHECK(s->passed == 0);
  CHECK(s->dropped == 0);
  CHECK(filter->limit() == InitRateLimit{20, 7});
  CHECK(sctp::InitRateFilter::load(InitRateLimit{}).error() == "no limit configured");
}

TEST_CASE("The INIT filter lets a burst of INITs through, then the rate; everything else passes") {
  constexpr std::uint32_t kRate = 10, kBurst = 5;  // one INIT per 100 ms
  auto filter = loadOrSkip(InitRateLimit{kRate, kBurst});
  if (!filter) return;
  Fd receiver(boundUdp(AF_INET));
  Fd sender(boundUdp(AF_INET));
  REQUIRE(filter->attach(receiver.fd));

  const auto start = std::chrono::steady_clock::now();
  constexpr int kInits = 40;
  for (int i = 0; i < kInits; ++i) {
    sendTo(sender.fd, receiver.fd, packet(1, static_cast<std::uint8_t>(i)));
    sendTo(sender.fd, receiver.fd, packet(0, static_cast<std::uint8_t>(i)));  // DATA
  }
  sendTo(sender.fd, receiver.fd, packet(1, 0, 12));   // a bare common header: no chunk
  sendTo(sender.fd, receiver.fd, packet(1, 0, 3));    // shorter than an SCTP header
  sendTo(sender.fd, receiver.fd, packet(0, 0, 0));    // empty datagram
  sendTo(sender.fd, receiver.fd, packet(6, 0, 13));   // ABORT
  sendTo(sender.fd, receiver.fd, packet(2, 0, 400));  // INIT-ACK
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto s = filter->state();
  REQUIRE(s);
  // Every datagram that is not an INIT, and the INITs the filter let through.
  auto got = drain(receiver.fd, kInits + 5 + s->passed);

  const std::size_t inits = countInits(got);
  CHECK(got.size() - inits == kInits + 5);  // every other datagram, the short and empty ones too
  CHECK(inits >= kBurst);
  CHECK(inits <= kBurst + static_cast<std::size_t>(std::ceil(elapsed * kRate)) + 1);
  CHECK(s->passed == inits);
  CHECK(s->dropped == kInits - inits);

  // After 300 ms, three more INITs are due (and not many more).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int i = 0; i < 10; ++i) sendTo(sender.fd, receiver.fd, packet(1, static_cast<std::uint8_t>(i)));
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto passedBefore = s->passed;
  s = filter->state();
  REQUIRE(s);
  const std::size_t later = countInits(drain(receiver.fd, s->passed - passedBefore));
  CHECK(later >= 2);
  CHECK(inits + later <= kBurst + static_cast<std::size_t>(std::ceil(total * kRate)) + 1);
  CHECK(s->passed + s->dropped == kInits + 10);
}

TEST_CASE("IPv4 and IPv6 sockets with the INIT filter share one bucket") {
  auto filter = loadOrSkip(InitRateLimit{1, 6});
  if (!filter) return;
  Fd v4(boundUdp(AF_INET));
  Fd v6(boundUdp(AF_INET6, portOf(v4.fd)));
  Fd sender4(boundUdp(AF_INET));
  Fd sender6(boundUdp(AF_INET6));
  REQUIRE(filter->attach(v4.fd));
  REQUIRE(filter->attach(v6.fd));
  for (int i = 0; i < 5; ++i) {
    sendTo(sender4.fd, v4.fd, packet(1, static_cast<std::uint8_t>(i)));
    sendTo(sender6.fd, v6.fd, packet(1, static_cast<std::uint8_t>(i)));
    sendTo(sender6.fd, v6.fd, packet(3, static_cast<std::uint8_t>(i)));  // SACK
  }
  const auto s = filter->state();
  REQUIRE(s);
  const auto got = drain({v4.fd, v6.fd}, s->passed + 5);  // the INITs let through, the SACKs
  const auto& got4 = got[0];
  const auto& got6 = got[1];
  // Six INITs at once, a seventh after a second at the earliest (the sends take far less).
  CHECK(countInits(got4) + countInits(got6) >= 6);
  CHECK(countInits(got4) + countInits(got6) <= 7);
  CHECK(countInits(got4) >= 3);  // the first six alternate: three on each socket
  CHECK(countInits(got6) >= 3);
  CHECK(got6.size() - countInits(got6) == 5);
}

TEST_CASE("INITs from several CPUs at once take no more than the bucket holds") {
  // Each sender thread's datagrams run the filter on its own CPU (loopback delivers in the
  // sender's context); the bucket is updated with compare-and-exchange, so racing INITs
  // cannot take the same slot twice.
  constexpr std::uint32_t kBurst = 50;
  auto filter = loadOrSkip(InitRateLimit{1, kBurst});
  if (!filter) return;
  Fd receiver(boundUdp(AF_INET));
  REQUIRE(filter->attach(receiver.fd));
  const int senders = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  constexpr int kEach = 20000;
  sockaddr_storage to{};
  socklen_t toLength = sizeof(to);
  REQUIRE(::getsockname(receiver.fd, reinterpret_cast<sockaddr*>(&to), &toLength) == 0);
  const auto init = packet(1, 7);
  std::vector<int> sent(static_cast<std::size_t>(senders), 0);
  const auto start = std::chrono::steady_clock::now();
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < senders; ++t) {
      threads.emplace_back([&, t] {
        Fd sender(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        for (int i = 0; i < kEach; ++i) {
          if (::sendto(sender.fd, init.data(), init.size(), 0, reinterpret_cast<const sockaddr*>(&to), toLength) ==
              static_cast<long>(init.size())) {
            ++sent[static_cast<std::size_t>(t)];
          }
        }
      });
    }
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto s = filter->state();
  REQUIRE(s);
  const std::size_t inits = countInits(drain(receiver.fd, s->passed));
  int total = 0;
  for (const int n : sent) total += n;
  CHECK(total == senders * kEach);
  CHECK(s->passed + s->dropped == static_cast<std::uint64_t>(total));
  CHECK(s->passed == inits);
  CHECK(inits >= kBurst);
  CHECK(inits <= kBurst + static_cast<std::size_t>(std::ceil(elapsed)) + 1);
}

#if NPM_INIT_FILTER_BPF

TEST_CASE("The end of the verifier's log is found in libbpf's messages") {
  // libbpf 1.1's warnings when the verifier refuses a program (one message per call).
  const std::string messages =
      "libbpf: prog 'npm_rejected': BPF program load failed: Permission denied\n"
      "libbpf: prog 'npm_rejected': -- BEGIN PROG LOAD LOG --\n"
      "0: R1=ctx(off=0,imm=0) R10=fp0\n"
      "; __u64 *count = bpf_map_lookup_elem(&datagrams, &key);\n"
      "6: (85) call bpf_map_lookup_elem#1     ; R0_w=map_value_or_null(id=1,off=0,ks=4,vs=8,imm=0)\n"
      "; *count += skb->len;\n"
      "7: (79) r2 = *(u64 *)(r0 +0)\n"
      "R0 invalid mem access 'map_value_or_null'\n"
      "processed 8 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0\n"
      "-- END PROG LOAD LOG --\n"
      "libbpf: prog 'npm_rejected': failed to load: -13\n"
      "libbpf: failed to load object 'npm_rejected_filter_bpf'\n";
  CHECK(sctp::verifierLogTail(messages, 3) ==
        "7: (79) r2 = *(u64 *)(r0 +0) | R0 invalid mem access 'map_value_or_null' | processed 8 insns (limit "
        "1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0");
  CHECK(sctp::verifierLogTail(messages, 1).rfind("processed 8 insns", 0) == 0);
  CHECK(sctp::verifierLogTail(messages, 100).rfind("0: R1=ctx(off=0,imm=0) R10=fp0 | ; __u64", 0) == 0);
  CHECK(sctp::verifierLogTail(messages, 0).empty());
  // No log: permissions, or a failure before the verifier (a map).
  CHECK(sctp::verifierLogTail("libbpf: Error in bpf_object__probe_loading():Operation not permitted(1).\n", 4).empty());
  CHECK(sctp::verifierLogTail("", 4).empty());
}

TEST_CASE("A program the verifier refuses: the load error carries the verifier's verdict") {
  using Skeleton = std::unique_ptr<npm_rejected_filter_bpf, decltype(&npm_rejected_filter_bpf__destroy)>;
  Skeleton skeleton(npm_rejected_filter_bpf__open(), &npm_rejected_filter_bpf__destroy);
  REQUIRE(skeleton);
  const auto loaded =
      sctp::loadBpf("the rejected test filter", [&] { return npm_rejected_filter_bpf__load(skeleton.get()); });
  REQUIRE_FALSE(loaded);
  INFO(loaded.error());
  if (::geteuid() != 0 && loaded.error().find("(verifier: ") == std::string::npos) {
    WARN("not root, the kernel refused before its verifier ran: " << loaded.error());
    return;
  }
  // EACCES: what the kernel answers when its verifier refuses a program.
  CHECK(loaded.error().rfind("cannot load the rejected test filter: Permission denied (verifier: ", 0) == 0);
  CHECK(loaded.error().find("R0 invalid mem access 'map_value_or_null'") != std::string::npos);
  CHECK(loaded.error().back() == ')');
  CHECK(loaded.error().find('\n') == std::string::npos);
  // The INIT filter itself, loaded the same way, passes the verifier.
  if (auto filter = sctp::InitRateFilter::load(InitRateLimit{5, 5}); !filter) FAIL(filter.error());
}

#endif
