// Rate limit for SCTP INIT chunks that reach the userland stack's UDP encapsulation port.
//
// An INIT of 32 bytes makes the stack send an INIT-ACK of 400 to 470 bytes (state cookie,
// parameters) to whatever source address the datagram claims: unlimited, the port would be a
// 12-15x traffic amplifier for spoofed packets. usrsctp owns its UDP sockets and offers no hook
// for INITs, so the limit sits in the kernel: an eBPF socket filter (init_filter.bpf.c, compiled
// by clang and loaded through its libbpf skeleton) attached to those sockets. It lets through at
// most `perSecond` datagrams whose first SCTP chunk is an INIT, with bursts of up to `burst`
// (GCRA, the virtual-scheduling form of a token bucket, on bpf_ktime_get_ns, updated with
// compare-and-exchange so that INITs on several CPUs share it exactly: Linux 5.12 or later;
// an older kernel refuses the program and the passive says so, with the verifier's verdict);
// every other datagram passes untouched. An INIT that is dropped is retransmitted by its sender
// after the RTO, so a legitimate peer is only slowed down.
//
// Loading needs CAP_BPF with CAP_PERFMON (CAP_BPF alone: EFAULT from BPF_PROG_LOAD on Linux 6.18),
// or CAP_SYS_ADMIN, where unprivileged BPF is disabled (Debian's default); without them the caller
// logs how to protect the port otherwise (nftables). A build without clang, bpftool or libbpf has
// no filter (built() is false) and the caller says so.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"

struct npm_init_filter_bpf;  // the libbpf skeleton of init_filter.bpf.c

namespace npm::sctp {

struct InitRateLimit {
  std::uint32_t perSecond = 0;  // 0 = unlimited (no filter)
  std::uint32_t burst = 0;      // INITs accepted at once; at least 1 when limited
  bool enabled() const { return perSecond != 0; }
  bool operator==(const InitRateLimit&) const = default;
};
// The passive's default: far above what a run sets up (one INIT per SCTP association: the
// control association and one per -sctp option), far below what makes a useful reflector
// (500 INIT-ACKs of ~460 bytes per second are 1.9 Mbit/s).
constexpr InitRateLimit kDefaultInitRateLimit{500, 1000};
constexpr std::uint32_t kMaxInitRate = 1000000;  // per second, and the largest burst

// "N" (burst N) or "N/BURST"; "0" turns the limit off. nullopt for anything else
// (N up to kMaxInitRate, BURST from 1 to kMaxInitRate).
std::optional<InitRateLimit> parseInitRateLimit(const std::string& text);
std::string describe(const InitRateLimit& limit);  // "500/s, burst 1000" or "unlimited"

// The nftables rule that limits INITs to `port` the same way (for hosts where the filter
// cannot be loaded).
std::string nftablesHint(std::uint16_t port, const InitRateLimit& limit);

// Open file descriptors of this process (/proc/self/fd).
std::set<int> openDescriptors();
// This process's UDP sockets (IPv4 and IPv6) bound to local `port`, leaving out `exclude`.
std::vector<int> udpSocketsOnPort(std::uint16_t port, const std::set<int>& exclude = {});

class InitRateFilter {
public:
  // The program's configuration and its bucket.
  struct State {
    std::uint64_t intervalNs;   // 1e9 / perSecond
    std::uint64_t toleranceNs;  // burst * intervalNs
    std::uint64_t tat;          // theoretical arrival time of the next INIT (ktime ns)
    std::uint64_t passed;       // INITs let through
    std::uint64_t dropped;      // INITs dropped
  };

  // Whether this build has the filter (clang, bpftool and libbpf were there); load() fails
  // without it.
  static bool built();
  // Loads the program, or says why the kernel refused it (no CAP_BPF, the verifier's verdict).
  static Result<std::unique_ptr<InitRateFilter>> load(const InitRateLimit& limit);
  InitRateFilter(const InitRateFilter&) = delete;
  InitRateFilter& operator=(const InitRateFilter&) = delete;

  // Attaches the program to a socket (SO_ATTACH_BPF). All sockets it is attached to share
  // one bucket.
  Result<void> attach(int socket);
  std::optional<State> state() const;
  const InitRateLimit& limit() const { return limit_; }

private:
  struct DestroySkeleton {
    void operator()(npm_init_filter_bpf* skeleton) const;
  };
  using Skeleton = std::unique_ptr<npm_init_filter_bpf, DestroySkeleton>;
  InitRateFilter(const InitRateLimit& limit, Skeleton skeleton);
  InitRateLimit limit_;
  // Destroyed with the filter; sockets the program is attached to keep it (and its maps) alive.
  Skeleton skeleton_;
};

}  // namespace npm::sctp
