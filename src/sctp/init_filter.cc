// The INIT rate limit: the socket filter of init_filter.bpf.c through its libbpf skeleton,
// and the option text and socket search around it; see init_filter.h.
#include "sctp/init_filter.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/numbers.h"

#if NPM_INIT_FILTER_BPF
#include <bpf/libbpf.h>

#include "npm_init_filter.skel.h"
#include "sctp/bpf_load.h"
#endif

namespace npm::sctp {

namespace {

[[maybe_unused]] constexpr std::uint64_t kNsPerSecond = 1000000000ULL;

[[maybe_unused]] std::string errnoText(const char* what, int error) {
  return std::string(what) + ": " + std::strerror(error);
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
    struct stat st {};
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
    if (sa.ss_family == AF_INET)
      bound = ntohs(reinterpret_cast<const sockaddr_in&>(sa).sin_port);
    else if (sa.ss_family == AF_INET6)
      bound = ntohs(reinterpret_cast<const sockaddr_in6&>(sa).sin6_port);
    else
      continue;
    if (bound == port) found.push_back(fd);
  }
  return found;
}

#if NPM_INIT_FILTER_BPF

bool InitRateFilter::built() { return true; }

void InitRateFilter::DestroySkeleton::operator()(npm_init_filter_bpf* skeleton) const {
  npm_init_filter_bpf__destroy(skeleton);
}

InitRateFilter::InitRateFilter(const InitRateLimit& limit, Skeleton skeleton)
    : limit_(limit), skeleton_(std::move(skeleton)) {}

Result<std::unique_ptr<InitRateFilter>> InitRateFilter::load(const InitRateLimit& limit) {
  if (!limit.enabled()) return Failure{"no limit configured"};
  Skeleton skeleton(npm_init_filter_bpf__open());
  if (!skeleton) return Failure{errnoText("cannot open the BPF socket filter", errno)};
  const std::uint64_t interval = kNsPerSecond / limit.perSecond;
  const std::uint32_t burst = limit.burst == 0 ? 1 : limit.burst;
  skeleton->rodata->interval_ns = interval;
  skeleton->rodata->tolerance_ns = interval * burst;
  if (auto loaded = loadBpf("the BPF socket filter", [&] { return npm_init_filter_bpf__load(skeleton.get()); });
      !loaded) {
    return Failure{loaded.error()};
  }
  return std::unique_ptr<InitRateFilter>(
      new InitRateFilter(InitRateLimit{limit.perSecond, burst}, std::move(skeleton)));
}

Result<void> InitRateFilter::attach(int socket) {
  const int program = bpf_program__fd(skeleton_->progs.npm_init_rate);
  if (::setsockopt(socket, SOL_SOCKET, SO_ATTACH_BPF, &program, sizeof(program)) == 0) return {};
  return Failure{errnoText("SO_ATTACH_BPF", errno)};
}

std::optional<InitRateFilter::State> InitRateFilter::state() const {
  // The bucket is the .bss map, mapped into this process; the program updates it meanwhile.
  const auto read = [](const auto& value) -> std::uint64_t { return __atomic_load_n(&value, __ATOMIC_RELAXED); };
  if (skeleton_->bss == nullptr || skeleton_->rodata == nullptr) return std::nullopt;
  const auto& bucket = skeleton_->bss->bucket;
  return State{skeleton_->rodata->interval_ns, skeleton_->rodata->tolerance_ns, read(bucket.tat), read(bucket.passed),
               read(bucket.dropped)};
}

#else  // built without clang, bpftool or libbpf

bool InitRateFilter::built() { return false; }

void InitRateFilter::DestroySkeleton::operator()(npm_init_filter_bpf*) const {}

Result<std::unique_ptr<InitRateFilter>> InitRateFilter::load(const InitRateLimit& limit) {
  if (!limit.enabled()) return Failure{"no limit configured"};
  return Failure{"this netperfmeter was built without the BPF INIT filter (no clang, bpftool or libbpf-dev)"};
}

Result<void> InitRateFilter::attach(int) { return Failure{"no BPF INIT filter in this build"}; }

std::optional<InitRateFilter::State> InitRateFilter::state() const { return std::nullopt; }

#endif

}  // namespace npm::sctp
