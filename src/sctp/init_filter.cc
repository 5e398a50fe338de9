// The INIT rate limit: an eBPF socket filter assembled here by hand (no clang, no libbpf),
// its state in a one-entry array map; see init_filter.h.
#include "sctp/init_filter.h"

#include <dirent.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>

#include "common/numbers.h"

namespace npm::sctp {

namespace {

// Where the filter looks. A socket filter of a UDP socket sees the datagram from its UDP
// header on (offset 0) and skb->len counts that header too.
constexpr std::int32_t kUdpHeader = 8;
constexpr std::int32_t kSctpCommonHeader = 12;
constexpr std::int32_t kFirstChunkType = kUdpHeader + kSctpCommonHeader;  // 20
constexpr std::int32_t kChunkInit = 1;
constexpr std::uint64_t kNsPerSecond = 1000000000ULL;
// Compare-and-exchange attempts on the bucket before an INIT is dropped (INITs racing on other
// CPUs each take a slot first).
constexpr std::int32_t kMaxRetries = 4;

long bpf(int command, bpf_attr& attr) { return ::syscall(SYS_bpf, command, &attr, sizeof(attr)); }

// A tiny assembler: instructions with symbolic jump targets, resolved at the end.
class Assembler {
public:
  enum Label { Pass, Drop, Retry, MaxTaken, Passed, LabelCount };

  void op(std::uint8_t code, int dst, int src, std::int16_t off, std::int32_t imm) {
    bpf_insn i{};
    i.code = code;
    i.dst_reg = static_cast<std::uint8_t>(dst);
    i.src_reg = static_cast<std::uint8_t>(src);
    i.off = off;
    i.imm = imm;
    code_.push_back(i);
  }
  void jump(std::uint8_t code, int dst, int src, std::int32_t imm, Label to) {
    fixups_.emplace(code_.size(), to);
    op(code, dst, src, 0, imm);
  }
  void label(Label l) { labels_[l] = static_cast<int>(code_.size()); }
  std::vector<bpf_insn> finish() {
    for (const auto& [at, to] : fixups_) code_[at].off = static_cast<std::int16_t>(labels_[to] - static_cast<int>(at) - 1);
    return code_;
  }

private:
  std::vector<bpf_insn> code_;
  std::map<std::size_t, Label> fixups_;
  int labels_[LabelCount]{};
};

// r1 = __sk_buff on entry. Returns 0 (drop) or 0xffffffff (keep the whole datagram).
std::vector<bpf_insn> program(int mapFd) {
  using A = Assembler;
  constexpr int r0 = 0, r1 = 1, r2 = 2, r3 = 3, r4 = 4, r5 = 5, r6 = 6, r7 = 7, r8 = 8, r9 = 9, r10 = 10;
  A a;
  a.op(BPF_ALU64 | BPF_MOV | BPF_X, r6, r1, 0, 0);  // r6 = ctx (BPF_LD_ABS reads through r6)
  a.op(BPF_LDX | BPF_MEM | BPF_W, r2, r6, offsetof(__sk_buff, len), 0);
  a.jump(BPF_JMP | BPF_JLT | BPF_K, r2, 0, kFirstChunkType + 1, A::Pass);  // too short for a chunk
  a.op(BPF_LD | BPF_ABS | BPF_B, 0, 0, 0, kFirstChunkType);               // r0 = first chunk's type
  a.jump(BPF_JMP | BPF_JNE | BPF_K, r0, 0, kChunkInit, A::Pass);
  // r0 = &state (map entry 0)
  a.op(BPF_LD | BPF_DW | BPF_IMM, r1, BPF_PSEUDO_MAP_FD, 0, mapFd);
  a.op(0, 0, 0, 0, 0);
  a.op(BPF_ST | BPF_MEM | BPF_W, r10, 0, -4, 0);
  a.op(BPF_ALU64 | BPF_MOV | BPF_X, r2, r10, 0, 0);
  a.op(BPF_ALU64 | BPF_ADD | BPF_K, r2, 0, 0, -4);
  a.op(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem);
  a.jump(BPF_JMP | BPF_JEQ | BPF_K, r0, 0, 0, A::Pass);
  a.op(BPF_ALU64 | BPF_MOV | BPF_X, r7, r0, 0, 0);
  a.op(BPF_LDX | BPF_MEM | BPF_DW, r8, r7, offsetof(InitRateFilter::State, intervalNs), 0);
  a.jump(BPF_JMP | BPF_JEQ | BPF_K, r8, 0, 0, A::Pass);  // no limit configured
  a.op(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_ktime_get_ns);
  a.op(BPF_ALU64 | BPF_MOV | BPF_X, r9, r0, 0, 0);  // r9 = now
  // GCRA: tat' = max(tat, now) + interval; the INIT conforms if tat' - now <= tolerance. The
  // new tat is stored with compare-and-exchange, so that INITs on several CPUs at once cannot
  // both take the same slot; one that keeps losing the race (kMaxRetries) is dropped.
  a.op(BPF_ALU64 | BPF_MOV | BPF_K, r6, 0, 0, kMaxRetries);  // r6 = tries left (ctx no longer needed)
  a.label(A::Retry);
  a.op(BPF_LDX | BPF_MEM | BPF_DW, r3, r7, offsetof(InitRateFilter::State, tat), 0);  // r3 = tat
  a.op(BPF_ALU64 | BPF_MOV | BPF_X, r5, r3, 0, 0);
  a.jump(BPF_JMP | BPF_JGE | BPF_X, r5, r9, 0, A::MaxTaken);
  a.op(BPF_ALU64 | BPF_MOV | BPF_X, r5, r9, 0, 0);
  a.label(A::MaxTaken);
  a.op(BPF_ALU64 | BPF_ADD | BPF_X, r5, r8, 0, 0);  // r5 = tat'
  a.op(BPF_ALU64 | BPF_MOV | BPF_X, r4, r5, 0, 0);
  a.op(BPF_ALU64 | BPF_SUB | BPF_X, r4, r9, 0, 0);
  a.op(BPF_LDX | BPF_MEM | BPF_DW, r2, r7, offsetof(InitRateFilter::State, toleranceNs), 0);
  a.jump(BPF_JMP | BPF_JGT | BPF_X, r4, r2, 0, A::Drop);
  a.op(BPF_ALU64 | BPF_MOV | BPF_X, r0, r3, 0, 0);  // expected: the tat read above
  a.op(BPF_STX | BPF_ATOMIC | BPF_DW, r7, r5, offsetof(InitRateFilter::State, tat), BPF_CMPXCHG);
  a.jump(BPF_JMP | BPF_JEQ | BPF_X, r0, r3, 0, A::Passed);  // r0 = the tat that was there
  a.op(BPF_ALU64 | BPF_SUB | BPF_K, r6, 0, 0, 1);
  a.jump(BPF_JMP | BPF_JNE | BPF_K, r6, 0, 0, A::Retry);
  a.jump(BPF_JMP | BPF_JA, 0, 0, 0, A::Drop);
  a.label(A::Passed);
  a.op(BPF_ALU64 | BPF_MOV | BPF_K, r1, 0, 0, 1);
  a.op(BPF_STX | BPF_ATOMIC | BPF_DW, r7, r1, offsetof(InitRateFilter::State, passed), BPF_ADD);
  a.label(A::Pass);
  a.op(BPF_ALU | BPF_MOV | BPF_K, r0, 0, 0, -1);
  a.op(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
  a.label(A::Drop);
  a.op(BPF_ALU64 | BPF_MOV | BPF_K, r1, 0, 0, 1);
  a.op(BPF_STX | BPF_ATOMIC | BPF_DW, r7, r1, offsetof(InitRateFilter::State, dropped), BPF_ADD);
  a.op(BPF_ALU64 | BPF_MOV | BPF_K, r0, 0, 0, 0);
  a.op(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
  return a.finish();
}

std::string errnoText(const char* what, int error) { return std::string(what) + ": " + std::strerror(error); }

// The last line of the verifier's log (its verdict).
std::string lastLine(const std::vector<char>& log) {
  std::string text(log.data(), strnlen(log.data(), log.size()));
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const auto at = text.rfind('\n');
  return at == std::string::npos ? text : text.substr(at + 1);
}

}  // namespace

std::optional<InitRateLimit> parseInitRateLimit(const std::string& text) {
  const auto slash = text.find('/');
  const auto rate = npm::parseUnsigned(text.substr(0, slash), kMaxInitRate, 8);
  if (!rate) return std::nullopt;
  if (*rate == 0) {
    if (slash != std::string::npos) return std::nullopt;  // "0/5" means nothing
    return InitRateLimit{};
  }
  std::uint64_t burst = *rate;
  if (slash != std::string::npos) {
    const auto b = npm::parseUnsigned(text.substr(slash + 1), kMaxInitRate, 8);
    if (!b || *b == 0) return std::nullopt;
    burst = *b;
  }
  return InitRateLimit{static_cast<std::uint32_t>(*rate), static_cast<std::uint32_t>(burst)};
}

std::string describe(const InitRateLimit& limit) {
  if (!limit.enabled()) return "unlimited";
  return std::to_string(limit.perSecond) + "/s, burst " + std::to_string(limit.burst);
}

std::string nftablesHint(std::uint16_t port, const InitRateLimit& limit) {
  const InitRateLimit l = limit.enabled() ? limit : kDefaultInitRateLimit;
  // @th,160,8: the byte after the UDP header (64 bits) and the SCTP common header (96 bits).
  return "nft add rule inet filter input udp dport " + std::to_string(port) + " @th,160,8 1 limit rate over " +
         std::to_string(l.perSecond) + "/second burst " + std::to_string(l.burst) + " packets drop";
}

std::set<int> openDescriptors() {
  std::set<int> fds;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  const int own = ::dirfd(dir);
  while (const dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && fd != own) fds.insert(static_cast<int>(fd));
  }
  ::closedir(dir);
  return fds;
}

std::vector<int> udpSocketsOnPort(std::uint16_t port, const std::set<int>& exclude) {
  std::vector<int> found;
  for (const int fd : openDescriptors()) {
    if (exclude.count(fd) != 0) continue;
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int type = 0, protocol = 0;
    socklen_t len = sizeof(int);
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_DGRAM) continue;
    len = sizeof(int);
    if (::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &len) != 0 || protocol != IPPROTO_UDP) continue;
    sockaddr_storage sa{};
    len = sizeof(sa);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) continue;
    std::uint16_t bound = 0;
    if (sa.ss_family == AF_INET) bound = ntohs(reinterpret_cast<const sockaddr_in&>(sa).sin_port);
    else if (sa.ss_family == AF_INET6) bound = ntohs(reinterpret_cast<const sockaddr_in6&>(sa).sin6_port);
    else continue;
    if (bound == port) found.push_back(fd);
  }
  return found;
}

Result<std::unique_ptr<InitRateFilter>> InitRateFilter::load(const InitRateLimit& limit) {
  auto fail = [](std::string text) { return Failure{std::move(text)}; };
  if (!limit.enabled()) return fail("no limit configured");

  bpf_attr attr{};
  attr.map_type = BPF_MAP_TYPE_ARRAY;
  attr.key_size = sizeof(std::uint32_t);
  attr.value_size = sizeof(State);
  attr.max_entries = 1;
  std::strncpy(attr.map_name, "npm_init_rate", sizeof(attr.map_name) - 1);
  UniqueFd mapFd(static_cast<int>(bpf(BPF_MAP_CREATE, attr)));
  if (!mapFd) return fail(errnoText("cannot create the BPF map", errno));

  const std::uint64_t interval = kNsPerSecond / limit.perSecond;
  const std::uint32_t burst = limit.burst == 0 ? 1 : limit.burst;
  State initial{interval, interval * burst, 0, 0, 0};
  const std::uint32_t key = 0;
  attr = bpf_attr{};
  attr.map_fd = static_cast<std::uint32_t>(mapFd.get());
  attr.key = reinterpret_cast<std::uintptr_t>(&key);
  attr.value = reinterpret_cast<std::uintptr_t>(&initial);
  attr.flags = BPF_ANY;
  if (bpf(BPF_MAP_UPDATE_ELEM, attr) != 0) return fail(errnoText("cannot set the BPF map", errno));

  const auto code = program(mapFd.get());
  static const char license[] = "GPL";
  std::vector<char> log(16384, '\0');
  UniqueFd programFd;
  for (const bool withLog : {false, true}) {
    attr = bpf_attr{};
    attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
    attr.insns = reinterpret_cast<std::uintptr_t>(code.data());
    attr.insn_cnt = static_cast<std::uint32_t>(code.size());
    attr.license = reinterpret_cast<std::uintptr_t>(license);
    std::strncpy(attr.prog_name, "npm_init_rate", sizeof(attr.prog_name) - 1);
    if (withLog) {
      attr.log_buf = reinterpret_cast<std::uintptr_t>(log.data());
      attr.log_size = static_cast<std::uint32_t>(log.size());
      attr.log_level = 1;
    }
    programFd.reset(static_cast<int>(bpf(BPF_PROG_LOAD, attr)));
    if (programFd) break;
    // Only the verifier's refusal is worth a second attempt with its log.
    if (errno != EINVAL && errno != EACCES) break;
  }
  if (!programFd) {
    std::string text = errnoText("cannot load the BPF socket filter", errno);
    if (const auto verdict = lastLine(log); !verdict.empty()) text += " (verifier: " + verdict + ")";
    return fail(text);
  }
  return std::unique_ptr<InitRateFilter>(
      new InitRateFilter(InitRateLimit{limit.perSecond, burst}, std::move(mapFd), std::move(programFd)));
}

Result<void> InitRateFilter::attach(int socket) {
  const int program = programFd_.get();
  if (::setsockopt(socket, SOL_SOCKET, SO_ATTACH_BPF, &program, sizeof(program)) == 0) return {};
  return Failure{errnoText("SO_ATTACH_BPF", errno)};
}

std::optional<InitRateFilter::State> InitRateFilter::state() const {
  State s{};
  const std::uint32_t key = 0;
  bpf_attr attr{};
  attr.map_fd = static_cast<std::uint32_t>(mapFd_.get());
  attr.key = reinterpret_cast<std::uintptr_t>(&key);
  attr.value = reinterpret_cast<std::uintptr_t>(&s);
  if (bpf(BPF_MAP_LOOKUP_ELEM, attr) != 0) return std::nullopt;
  return s;
}

}  // namespace npm::sctp
