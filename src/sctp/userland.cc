// The userland SCTP backend: usrsctp with UDP encapsulation, threaded stack, non-blocking
// sockets; the upcall only posts to the io_context, every socket call runs on the Asio thread.
#include <boost/asio/post.hpp>
#include <linux/capability.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <usrsctp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <span>
#include <unordered_map>

#include "common/handle.h"
#include "common/log.h"
#include "flowspec/flowspec.h"
#include "sctp/socket.h"
#include "sctp/sockaddr.h"
#include "transport/sockets.h"

namespace npm::sctp {

namespace {

using transport::TransportError;

// Options usrsctp 0.9.5 implements but its public header does not declare (the bundled stack's
// header does, src/sctp/usrsctp-patches/0001).
constexpr int kSctpCmtOnOff = 0x1200;
constexpr int kSctpPluggableCc = 0x1202;

#ifndef NPM_USRSCTP_DESCRIPTION
#define NPM_USRSCTP_DESCRIPTION "libusrsctp"
#endif

// usrsctp's threads keep running until the process ends and may call the upcall while
// static objects are destroyed: what the upcall touches is never destroyed.
std::mutex& gMutex = *new std::mutex;
bool gStarted = false;
std::uint16_t gPort = 0;
// The process-wide settings and how many CMT associations rely on them (guarded by gMutex).
ProcessWide gProcessWide;
std::size_t gProcessWideUsers = 0;

std::string processWideConflict(const ProcessWide& wanted) {
  return "usrsctp has buffer splitting and DAC only process-wide, and a CMT association of this process runs with " +
         describe(gProcessWide) + "; this one needs " + describe(wanted) +
         " (run CMT flows that differ in them in separate netperfmeter processes)";
}

struct Waiters;
auto& gRegistry = *new std::unordered_map<std::uintptr_t, std::weak_ptr<Waiters>>;  // guarded by gMutex
std::uintptr_t gNextId = 1;

// Readiness of one usrsctp socket, shared between the upcall (usrsctp thread) and Asio.
struct Waiters {
  Waiters(asio::io_context& io, struct socket* so) : io(io), so(so) {}
  asio::io_context& io;
  struct socket* so;
  std::uintptr_t id = 0;
  std::atomic<bool> pending{false};
  std::function<void()> onRead, onWrite;  // Asio thread only

  void dispatch() {
    if (so == nullptr) return;
    const int events = usrsctp_get_events(so);
    const bool error = (events & SCTP_EVENT_ERROR) != 0;
    if (onRead && (error || (events & SCTP_EVENT_READ))) {
      auto h = std::move(onRead);
      onRead = nullptr;
      h();
    }
    if (onWrite && so != nullptr && (error || (usrsctp_get_events(so) & SCTP_EVENT_WRITE))) {
      auto h = std::move(onWrite);
      onWrite = nullptr;
      h();
    }
  }
};

void upcall(struct socket*, void* arg, int) {
  std::shared_ptr<Waiters> w;
  {
    std::lock_guard lock(gMutex);
    auto it = gRegistry.find(reinterpret_cast<std::uintptr_t>(arg));
    if (it != gRegistry.end()) w = it->second.lock();
  }
  if (w && !w->pending.exchange(true)) {
    asio::post(w->io, [w] {
      w->pending = false;
      w->dispatch();
    });
  }
}

std::uint16_t freeUdpPort() {
  const UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  socklen_t len = sizeof(sa);
  std::uint16_t port = 0;
  if (fd && ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 &&
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
    port = ntohs(sa.sin_port);
  }
  return port;
}

bool udpPortFree(std::uint16_t port) {
  const UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  return fd && ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
}

// usrsctp_init opens, besides its UDP sockets, raw SCTP sockets (IP protocol 132) when it may:
// as root. Those would see every SCTP packet of the host, the kernel stack's included, and the
// receive threads would parse them all. This takes CAP_NET_RAW out of the calling thread's
// effective set while usrsctp_init runs (capabilities are per thread; the permitted set keeps
// it, so it is restored afterwards): the raw sockets fail quietly and only UDP is used.
class WithoutRawSockets {
public:
  WithoutRawSockets() {
    if (::syscall(SYS_capget, &header_, data_) != 0) return;
    if ((data_[0].effective & kNetRaw) == 0) return;
    data_[0].effective &= ~kNetRaw;
    lowered_ = ::syscall(SYS_capset, &header_, data_) == 0;
  }
  ~WithoutRawSockets() {
    if (!lowered_) return;
    data_[0].effective |= kNetRaw;
    ::syscall(SYS_capset, &header_, data_);
  }
  WithoutRawSockets(const WithoutRawSockets&) = delete;
  WithoutRawSockets& operator=(const WithoutRawSockets&) = delete;

private:
  static constexpr std::uint32_t kNetRaw = 1U << CAP_NET_RAW;  // CAP_NET_RAW (13) is in the first word
  __user_cap_header_struct header_{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data_[_LINUX_CAPABILITY_U32S_3]{};
  bool lowered_ = false;
};

// Keeps the stack's UDP port from being a traffic amplifier (init_filter.h): attaches the INIT
// rate limit to the sockets usrsctp_init opened on `port` (checked free before it: only usrsctp
// binds it in this process), or says why it could not and how else to protect the port. The
// stack works either way. (It once left out the descriptors open before usrsctp_init; another
// thread's file closed in between gave usrsctp's socket a number from that set, and the port
// went unprotected: seen under ASan with --threads=2.)
void limitInits(std::uint16_t port, const InitRateLimit& limit) {
  const std::string where = "SCTP/UDP port " + std::to_string(port);
  if (!limit.enabled()) {
    log::warning(where +
                 ": INITs are not rate-limited (--sctp-init-rate=0); each spoofed INIT is answered "
                 "with a 12 to 15 times larger INIT-ACK");
    return;
  }
  if (!InitRateFilter::built()) {
    log::warning(where +
                 ": INITs are not rate-limited: this netperfmeter was built without the BPF INIT filter "
                 "(clang, bpftool, libbpf-dev); limit them in the firewall, e.g.: " +
                 nftablesHint(port, limit));
    return;
  }
  const auto sockets = udpSocketsOnPort(port);
  std::string why;
  std::unique_ptr<InitRateFilter> filter;
  if (sockets.empty()) {
    why = "usrsctp's UDP socket was not found";
  } else if (auto loaded = InitRateFilter::load(limit)) {
    filter = std::move(*loaded);
  } else {
    why = loaded.error();
  }
  std::size_t attached = 0;
  if (filter) {
    for (const int fd : sockets) {
      if (auto attach = filter->attach(fd)) {
        ++attached;
      } else {
        why = attach.error();
      }
    }
  }
  if (filter && attached == sockets.size()) {
    log::info(where + ": INITs limited to " + describe(limit) + " (BPF socket filter on " + std::to_string(attached) +
              (attached == 1 ? " socket)" : " sockets)"));
    // The program stays attached to the sockets; the descriptors are not needed any more.
    return;
  }
  log::warning(where + " is not rate-limited for INITs (" + why +
               "), so spoofed INITs can use it as a traffic amplifier. Run as root (CAP_BPF and CAP_PERFMON), or limit "
               "INITs in the firewall, e.g.: " +
               nftablesHint(port, limit));
}

void start(const StackSettings& settings) {
  std::lock_guard lock(gMutex);
  if (gStarted) return;
  std::uint16_t port = settings.udpEncapsulationPort != 0 ? settings.udpEncapsulationPort : freeUdpPort();
  // usrsctp does not report a failed bind of its UDP socket; another process on the same
  // port would receive (and abort) our associations. Check first.
  if (!udpPortFree(port)) {
    throw TransportError("the SCTP/UDP encapsulation port " + std::to_string(port) +
                         " is in use (another userland SCTP process?); choose one with --sctp-udp-port");
  }
  {
    WithoutRawSockets udpOnly;
    usrsctp_init(port, nullptr, nullptr);
  }
  if (settings.initRateLimit) limitInits(port, *settings.initRateLimit);
  // Never answer SCTP packets that belong to someone else (should raw SCTP reach the stack
  // after all, e.g. where the capabilities cannot be lowered).
  usrsctp_sysctl_set_sctp_blackhole(2);
  // CMT can only be set per socket once the stack allows it; new sockets are set to 0.
  usrsctp_sysctl_set_sctp_cmt_on_off(1);
  gPort = port;
  gStarted = true;
}

template <class T>
void setOption(struct socket* so, int level, int name, const T& value, const char* what) {
  if (usrsctp_setsockopt(so, level, name, &value, sizeof(value)) != 0) {
    throw TransportError(std::string("cannot set ") + what + ": " + std::strerror(errno));
  }
}

class UserlandSocket : public Socket {
public:
  UserlandSocket(asio::io_context& io, struct socket* so, int family, std::uint16_t remotePort)
      : io_(io), so_(so), family_(family), remotePort_(remotePort) {
    usrsctp_set_non_blocking(so_, 1);
    waiters_ = std::make_shared<Waiters>(io, so_);
    {
      std::lock_guard lock(gMutex);
      waiters_->id = gNextId++;
      gRegistry[waiters_->id] = waiters_;
    }
    usrsctp_set_upcall(so_, upcall, reinterpret_cast<void*>(waiters_->id));
    const int on = 1;
    usrsctp_setsockopt(so_, IPPROTO_SCTP, SCTP_RECVRCVINFO, &on, sizeof(on));
    for (std::uint16_t type : {SCTP_ASSOC_CHANGE, SCTP_SHUTDOWN_EVENT}) {
      sctp_event e{};
      e.se_assoc_id = SCTP_FUTURE_ASSOC;
      e.se_type = type;
      e.se_on = 1;
      usrsctp_setsockopt(so_, IPPROTO_SCTP, SCTP_EVENT, &e, sizeof(e));
    }
  }
  ~UserlandSocket() override { close(); }

  Stack stack() const override { return Stack::Userland; }

  void configure(const SocketOptions& o) override {
    sctp_initmsg init{};
    init.sinit_num_ostreams = o.streams;
    init.sinit_max_instreams = o.streams;
    setOption(so_, IPPROTO_SCTP, SCTP_INITMSG, init, "SCTP_INITMSG");
    const int nodelay = o.noDelay ? 1 : 0;
    setOption(so_, IPPROTO_SCTP, SCTP_NODELAY, nodelay, "SCTP_NODELAY");
    setBufferSizes(o.rcvBufferSize, o.sndBufferSize);
    if (o.nrSack) {
      // Read by the endpoint when the socket is created, copied into each association and
      // offered in INIT/INIT-ACK; the sysctl sctp_nrsack_enable is only the default for new sockets.
      sctp_assoc_value v{};
      v.assoc_id = SCTP_FUTURE_ASSOC;
      v.assoc_value = *o.nrSack ? 1 : 0;
      setOption(so_, IPPROTO_SCTP, SCTP_NRSACK_SUPPORTED, v, "SCTP_NRSACK_SUPPORTED");
    }
    if (o.pktDrop) {
      // As NR-SACK: the endpoint's, copied into each association and offered in INIT/INIT-ACK.
      sctp_assoc_value v{};
      v.assoc_id = SCTP_FUTURE_ASSOC;
      v.assoc_value = *o.pktDrop ? 1 : 0;
      setOption(so_, IPPROTO_SCTP, SCTP_PKTDROP_SUPPORTED, v, "SCTP_PKTDROP_SUPPORTED");
    }
    if (o.heartbeatMs != 0) {
      sctp_paddrparams hb{};
      hb.spp_assoc_id = SCTP_FUTURE_ASSOC;
      hb.spp_hbinterval = o.heartbeatMs;
      hb.spp_pathmaxrxt = o.maxRetransmissions;
      hb.spp_flags = SPP_HB_ENABLE;
      setOption(so_, IPPROTO_SCTP, SCTP_PEER_ADDR_PARAMS, hb, "SCTP_PEER_ADDR_PARAMS (heartbeat)");
      sctp_rtoinfo rto{};
      rto.srto_assoc_id = SCTP_FUTURE_ASSOC;
      rto.srto_max = o.livenessRtoMaxMs();
      rto.srto_initial = rto.srto_max;  // within min..max (0 fields stay as they are)
      setOption(so_, IPPROTO_SCTP, SCTP_RTOINFO, rto, "SCTP_RTOINFO (RTO.max)");
    }
    if (o.maxRetransmissions != 0) {
      sctp_assocparams assoc{};
      assoc.sasoc_assoc_id = SCTP_FUTURE_ASSOC;
      assoc.sasoc_asocmaxrxt = o.maxRetransmissions;
      setOption(so_, IPPROTO_SCTP, SCTP_ASSOCINFO, assoc, "SCTP_ASSOCINFO (association max. retransmissions)");
    }
    if (family_ == AF_INET6 && o.v6only && *o.v6only) {
      // usrsctp's IPv6 sockets take IPv4 too; it has no IPV6_V6ONLY to turn that off.
      if (usrsctp_setsockopt(so_, IPPROTO_IPV6, IPV6_V6ONLY, &on_, sizeof(on_)) != 0) {
        log::debug("userland SCTP: IPV6_V6ONLY is not supported, the socket accepts IPv4 too");
      }
    }
  }

  void setBufferSizes(std::uint32_t rcv, std::uint32_t snd) override {
    if (rcv > 0) setOption(so_, SOL_SOCKET, SO_RCVBUF, static_cast<int>(rcv), "SO_RCVBUF");
    if (snd > 0) setOption(so_, SOL_SOCKET, SO_SNDBUF, static_cast<int>(snd), "SO_SNDBUF");
  }

  void releaseProcessWide() override { claimProcessWide(std::nullopt); }

  std::optional<bool> nrSackNegotiated() override {
    sctp_assoc_value v{};
    v.assoc_id = SCTP_FUTURE_ASSOC;  // one-to-one style: the socket's association, once it exists
    socklen_t len = sizeof(v);
    if (usrsctp_getsockopt(so_, IPPROTO_SCTP, SCTP_NRSACK_SUPPORTED, &v, &len) != 0) return std::nullopt;
    return v.assoc_value != 0;
  }

  void tune(const Tuning& t) override {
    claimProcessWide(processWideOf(t));  // first: a refused tuning leaves the socket as it was
    sctp_assoc_value v{};
    v.assoc_id = SCTP_FUTURE_ASSOC;
    v.assoc_value = t.cmt;
    setOption(so_, IPPROTO_SCTP, kSctpCmtOnOff, v, "SCTP_CMT_ON_OFF");
    v.assoc_value = t.ccModule;
    setOption(so_, IPPROTO_SCTP, kSctpPluggableCc, v, "the SCTP congestion control module");
#ifdef USRSCTP_NPM_PATCHLEVEL
    // The bundled stack keeps them per association (the endpoint's before it exists).
    v.assoc_value = t.bufferSplitting;
    setOption(so_, IPPROTO_SCTP, SCTP_BUFFER_SPLITTING, v, "SCTP_BUFFER_SPLITTING");
    v.assoc_value = t.dac ? 1 : 0;
    setOption(so_, IPPROTO_SCTP, SCTP_CMT_USE_DAC, v, "SCTP_CMT_USE_DAC");
#endif
#if defined(USRSCTP_NPM_PATCHLEVEL) && USRSCTP_NPM_PATCHLEVEL >= 5
    v.assoc_value = t.smartFr ? 1 : 0;
    setOption(so_, IPPROTO_SCTP, SCTP_SMART_FAST_RETRANSMIT, v, "SCTP_SMART_FAST_RETRANSMIT");
#endif
#if defined(USRSCTP_NPM_PATCHLEVEL) && USRSCTP_NPM_PATCHLEVEL >= 6
    v.assoc_value = t.reschedule ? 1 : 0;
    setOption(so_, IPPROTO_SCTP, SCTP_CHUNK_RESCHEDULING, v, "SCTP_CHUNK_RESCHEDULING");
#endif
    if (t.rtoMinMs != 0) {
      sctp_rtoinfo rto{};
      rto.srto_assoc_id = SCTP_FUTURE_ASSOC;
      rto.srto_min = t.rtoMinMs;
      rto.srto_initial = std::max<std::uint32_t>(t.rtoMinMs, 1000);
      setOption(so_, IPPROTO_SCTP, SCTP_RTOINFO, rto, "SCTP_RTOINFO (RTO.min)");
    }
    // What the stack holds now, never only what was asked for.
    const auto held = tuningInForce();
    if (!held || held->cmt != t.cmt || held->ccModule != t.ccModule ||
        (t.cmt != 0 && (held->bufferSplitting != t.bufferSplitting || held->dac != t.dac ||
                        held->smartFr != t.smartFr || held->reschedule != t.reschedule)) ||
        (t.rtoMinMs != 0 && held->rtoMinMs != t.rtoMinMs)) {
      throw TransportError("usrsctp holds " + (held ? describe(*held) : std::string("nothing readable")) +
                           " after being told " + describe(t));
    }
  }

  std::optional<Tuning> tuningInForce() override {
    auto get = [this](int name) -> std::optional<std::uint32_t> {
      sctp_assoc_value v{};
      v.assoc_id = SCTP_FUTURE_ASSOC;  // one-to-one style: the association once it exists
      socklen_t len = sizeof(v);
      if (usrsctp_getsockopt(so_, IPPROTO_SCTP, name, &v, &len) != 0) return std::nullopt;
      return v.assoc_value;
    };
    const auto cmt = get(kSctpCmtOnOff), cc = get(kSctpPluggableCc), nrSack = get(SCTP_NRSACK_SUPPORTED);
    if (!cmt || !cc || !nrSack) return std::nullopt;
    Tuning t;
    t.cmt = static_cast<std::uint8_t>(*cmt);
    t.ccModule = static_cast<std::uint8_t>(*cc);
    t.nrSack = *nrSack != 0;
    // Negotiated: on where both ends offered it (the socket's own offer before the association).
    t.pktDrop = get(SCTP_PKTDROP_SUPPORTED).value_or(0) != 0;
#ifdef USRSCTP_NPM_PATCHLEVEL
    const auto splitting = get(SCTP_BUFFER_SPLITTING), dac = get(SCTP_CMT_USE_DAC);
    if (!splitting || !dac) return std::nullopt;
    t.bufferSplitting = static_cast<std::uint8_t>(*splitting);
    t.dac = *dac != 0;
#if USRSCTP_NPM_PATCHLEVEL >= 5
    const auto smartFr = get(SCTP_SMART_FAST_RETRANSMIT);
    if (!smartFr) return std::nullopt;
    t.smartFr = *smartFr != 0;
#endif
#if USRSCTP_NPM_PATCHLEVEL >= 6
    const auto reschedule = get(SCTP_CHUNK_RESCHEDULING);
    if (!reschedule) return std::nullopt;
    t.reschedule = *reschedule != 0;
#endif
#else
    // The system's usrsctp reads them from its process-wide sysctls whenever they are used.
    t.bufferSplitting = static_cast<std::uint8_t>(usrsctp_sysctl_get_sctp_buffer_splitting());
    t.dac = usrsctp_sysctl_get_sctp_cmt_use_dac() != 0;
#endif
    sctp_rtoinfo rto{};
    rto.srto_assoc_id = SCTP_FUTURE_ASSOC;
    socklen_t len = sizeof(rto);
    if (usrsctp_getsockopt(so_, IPPROTO_SCTP, SCTP_RTOINFO, &rto, &len) != 0) return std::nullopt;
    t.rtoMinMs = rto.srto_min;
    return t;
  }

  // Holds (or drops) this socket's share of the process-wide settings; throws when another CMT
  // association holds different ones. A no-op with the bundled stack (processWideOf is empty).
  void claimProcessWide(const std::optional<ProcessWide>& wanted) {
    std::lock_guard lock(gMutex);
    if (wanted == claimed_) return;
    const bool alone = claimed_ && gProcessWideUsers == 1;
    if (wanted && gProcessWideUsers > 0 && !alone && !(*wanted == gProcessWide)) {
      throw TransportError(processWideConflict(*wanted));
    }
    if (claimed_) --gProcessWideUsers;
    claimed_ = wanted;
    if (!wanted) return;
    if (gProcessWideUsers++ == 0) {
      gProcessWide = *wanted;
      usrsctp_sysctl_set_sctp_buffer_splitting(wanted->bufferSplitting);
      usrsctp_sysctl_set_sctp_cmt_use_dac(wanted->dac ? 1 : 0);
    }
  }

  void setRemoteEncapsulationPort(std::uint16_t port) {
    sctp_udpencaps encaps{};
    encaps.sue_address.ss_family = static_cast<sa_family_t>(family_);
    encaps.sue_assoc_id = SCTP_FUTURE_ASSOC;
    encaps.sue_port = htons(port);
    setOption(so_, IPPROTO_SCTP, SCTP_REMOTE_UDP_ENCAPS_PORT, encaps, "SCTP_REMOTE_UDP_ENCAPS_PORT");
  }

  void bind(const std::vector<asio::ip::address>& addresses, std::uint16_t port) override {
    if (addresses.empty()) {
      auto any = packAddresses({family_ == AF_INET6 ? asio::ip::address(asio::ip::address_v6::any())
                                                    : asio::ip::address(asio::ip::address_v4::any())},
                               port);
      if (usrsctp_bind(so_, reinterpret_cast<sockaddr*>(any.data()), static_cast<socklen_t>(any.size())) != 0) {
        throw TransportError("cannot bind SCTP to port " + std::to_string(port) + ": " + std::strerror(errno));
      }
      return;
    }
    auto packed = packAddresses(addresses, port);
    if (usrsctp_bindx(so_, reinterpret_cast<sockaddr*>(packed.data()), static_cast<int>(addresses.size()),
                      SCTP_BINDX_ADD_ADDR) != 0) {
      throw TransportError("cannot bind SCTP to " + addressList(addresses) + " port " + std::to_string(port) + ": " +
                           std::strerror(errno));
    }
  }

  void listen() override {
    if (usrsctp_listen(so_, 128) != 0)
      throw TransportError(std::string("cannot listen on SCTP: ") + std::strerror(errno));
  }

  std::unique_ptr<Socket> accept() override {
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    struct socket* so = usrsctp_accept(so_, reinterpret_cast<sockaddr*>(&peer), &len);
    if (so == nullptr) return nullptr;
    return std::make_unique<UserlandSocket>(io_, so, family_, remotePort_);
  }

  void connect(const std::vector<asio::ip::address>& addresses, std::uint16_t port) override {
    // The peer's UDP encapsulation port; a passive learns it from the packets instead.
    setRemoteEncapsulationPort(remotePort_);
    auto packed = packAddresses(addresses, port);
    sctp_assoc_t id = 0;
    if (usrsctp_connectx(so_, reinterpret_cast<sockaddr*>(packed.data()), static_cast<int>(addresses.size()), &id) !=
            0 &&
        errno != EINPROGRESS) {
      throw TransportError("cannot connect SCTP to " + addressList(addresses) + " port " + std::to_string(port) + ": " +
                           std::strerror(errno));
    }
  }

  int connectError() override {
    int error = 0;
    socklen_t len = sizeof(error);
    usrsctp_getsockopt(so_, SOL_SOCKET, SO_ERROR, &error, &len);
    if (error == 0 && !(usrsctp_get_events(so_) & SCTP_EVENT_WRITE)) error = ENOTCONN;
    return error;
  }

  long send(const std::uint8_t* data, std::size_t length, const SendInfo& info) override {
    sctp_sendv_spa spa{};
    spa.sendv_flags = SCTP_SEND_SNDINFO_VALID;
    spa.sendv_sndinfo.snd_sid = info.stream;
    spa.sendv_sndinfo.snd_ppid = htonl(info.ppid);
    spa.sendv_sndinfo.snd_flags = info.unordered ? SCTP_UNORDERED : 0;
    if (info.prPolicy != PrPolicy::None) {
      spa.sendv_flags |= SCTP_SEND_PRINFO_VALID;
      spa.sendv_prinfo.pr_policy = static_cast<std::uint16_t>(info.prPolicy);
      spa.sendv_prinfo.pr_value = info.prValue;
    }
    return usrsctp_sendv(so_, data, length, nullptr, 0, &spa, sizeof(spa), SCTP_SENDV_SPA, 0);
  }

  long receive(std::uint8_t* buffer, std::size_t length, ReceiveInfo& info) override {
    sctp_rcvinfo rcv{};
    socklen_t infoLength = sizeof(rcv);
    unsigned int infoType = 0;
    int flags = 0;
    sockaddr_storage from{};
    socklen_t fromLength = sizeof(from);
    const ssize_t n = usrsctp_recvv(so_, buffer, length, reinterpret_cast<sockaddr*>(&from), &fromLength, &rcv,
                                    &infoLength, &infoType, &flags);
    if (n < 0) return -1;
    info.notification = (flags & MSG_NOTIFICATION) != 0;
    info.endOfRecord = (flags & MSG_EOR) != 0;
    info.stream = infoType == SCTP_RECVV_RCVINFO ? rcv.rcv_sid : 0;
    info.ppid = infoType == SCTP_RECVV_RCVINFO ? ntohl(rcv.rcv_ppid) : 0;
    return n;
  }

  AssociationEvent notification(const std::uint8_t* data, std::size_t length) override {
    if (length < sizeof(sctp_notification::sn_header)) return AssociationEvent::Other;
    const auto* n = reinterpret_cast<const sctp_notification*>(data);
    if (n->sn_header.sn_type == SCTP_SHUTDOWN_EVENT) return AssociationEvent::Shutdown;
    if (n->sn_header.sn_type != SCTP_ASSOC_CHANGE || length < sizeof(sctp_assoc_change)) return AssociationEvent::Other;
    switch (n->sn_assoc_change.sac_state) {
      case SCTP_COMM_UP: return AssociationEvent::CommUp;
      case SCTP_COMM_LOST: return AssociationEvent::CommLost;
      case SCTP_RESTART: return AssociationEvent::Restart;
      case SCTP_SHUTDOWN_COMP: return AssociationEvent::ShutdownComplete;
      case SCTP_CANT_STR_ASSOC: return AssociationEvent::CantStart;
      default: return AssociationEvent::Other;
    }
  }

  void asyncWait(bool writable, std::function<void()> handler) override {
    (writable ? waiters_->onWrite : waiters_->onRead) = std::move(handler);
    asio::post(io_, [w = waiters_] { w->dispatch(); });  // the event may be there already
  }

  long unsentChunks() override {
    sctp_status status{};
    socklen_t len = sizeof(status);
    if (usrsctp_getsockopt(so_, IPPROTO_SCTP, SCTP_STATUS, &status, &len) != 0) return -1;
    return long{status.sstat_unackdata} + status.sstat_penddata;
  }

  void samplePaths(std::vector<transport::PathSample>& out) override {
    sockaddr* addrs = nullptr;
    const int n = usrsctp_getpaddrs(so_, 0, &addrs);
    if (n <= 0) return;
    const std::size_t first = out.size();
    samplePeerAddresses<sctp_paddrinfo>(
        addrs, n,
        [this](sctp_paddrinfo& info) {
          socklen_t len = sizeof(info);
          return usrsctp_getsockopt(so_, IPPROTO_SCTP, SCTP_GET_PEER_ADDR_INFO, &info, &len) == 0;
        },
        [](int state) -> std::string {  // usrsctp's are flag bits
          if (state & SCTP_UNCONFIRMED) return "unconfirmed";
          if (state & SCTP_ACTIVE) return "active";
          if (state & SCTP_INACTIVE) return "inactive";
          return "-";
        },
        out);
    // usrsctp keeps a path's RTO at 0 until its first RTT measurement, and its timers then use
    // the association's RTO.initial: report that, the RTO in force (the kernel's stack starts a
    // path's RTO at RTO.initial itself). A 0 in the vector read as an RTO below any RTO.min.
    const auto added = std::span(out).subspan(first);
    sctp_rtoinfo rto{};
    socklen_t len = sizeof(rto);
    if (std::any_of(added.begin(), added.end(), [](const auto& s) { return s.rtoMs == 0; }) &&
        usrsctp_getsockopt(so_, IPPROTO_SCTP, SCTP_RTOINFO, &rto, &len) == 0) {
      for (auto& s : added) {
        if (s.rtoMs == 0) s.rtoMs = rto.srto_initial;
      }
    }
#ifdef SCTP_PATH_COUNTERS
    // The bundled stack's per-path counters (patch 0002), for the samples just added (one per
    // address, in the same order): bytes sent (retransmissions included, as TCP counts them),
    // acknowledged, and DATA chunks retransmitted (in all, fast, after a timeout and, patch 0006,
    // rescheduled); patch 0007: chunks a packet-drop report marked, acknowledgements smart fast
    // retransmission ignored.
    std::size_t index = first;
    forEachPacked(addrs, n, [&](const sockaddr* sa, std::size_t length) {
      if (index >= out.size()) return;
      sctp_path_counters c{};
      std::memcpy(&c.spc_address, sa, length);
      socklen_t len = sizeof(c);
      if (usrsctp_getsockopt(so_, IPPROTO_SCTP, SCTP_PATH_COUNTERS, &c, &len) == 0) {
        auto& s = out[index];
        s.bytesSent =
            static_cast<double>(c.spc_bytes_sent + c.spc_bytes_retransmitted_fast + c.spc_bytes_retransmitted_timer);
        s.bytesAcked = static_cast<double>(c.spc_bytes_acked);
        s.retransmissions = static_cast<double>(c.spc_chunks_retransmitted_fast) + c.spc_chunks_retransmitted_timer;
        s.fastRetransmissions = static_cast<double>(c.spc_chunks_retransmitted_fast);
        s.timerRetransmissions = static_cast<double>(c.spc_chunks_retransmitted_timer);
#if USRSCTP_NPM_PATCHLEVEL >= 6
        s.bytesSent += static_cast<double>(c.spc_bytes_rescheduled);
        s.retransmissions += c.spc_chunks_rescheduled;
        s.rescheduled = static_cast<double>(c.spc_chunks_rescheduled);
#endif
#if USRSCTP_NPM_PATCHLEVEL >= 7
        s.dropReported = static_cast<double>(c.spc_chunks_drop_reported);
        s.smartFrIgnored = static_cast<double>(c.spc_acks_smart_fr_ignored);
#endif
      }
      ++index;
    });
#endif
    usrsctp_freepaddrs(addrs);
    sampleAssociation<sctp_status>(
        [this](sctp_status& status) {
          socklen_t len = sizeof(status);
          return usrsctp_getsockopt(so_, IPPROTO_SCTP, SCTP_STATUS, &status, &len) == 0;
        },
        [](int state) -> std::string {  // usrsctp's values differ from the kernel's
          switch (state) {
            NPM_SCTP_ASSOCIATION_STATE_CASES
            default: return "-";
          }
        },
        out);
  }

  std::vector<asio::ip::address> peerAddresses() override {
    sockaddr* addrs = nullptr;
    const int n = usrsctp_getpaddrs(so_, 0, &addrs);
    auto result = unpackAddresses(addrs, n);
    if (n > 0) usrsctp_freepaddrs(addrs);
    return result;
  }

  std::vector<asio::ip::address> localAddresses() override {
    sockaddr* addrs = nullptr;
    const int n = usrsctp_getladdrs(so_, 0, &addrs);
    auto result = unpackAddresses(addrs, n);
    if (n > 0) usrsctp_freeladdrs(addrs);
    return result;
  }

  std::uint16_t localPort() override {
    sockaddr* addrs = nullptr;
    const int n = usrsctp_getladdrs(so_, 0, &addrs);
    std::uint16_t port = n > 0 ? portOf(addrs) : 0;
    if (n > 0) usrsctp_freeladdrs(addrs);
    return port;
  }

  void shutdownWrite() override {
    if (so_ != nullptr) usrsctp_shutdown(so_, SHUT_WR);
  }

  void close() override {
    if (so_ == nullptr) return;
    claimProcessWide(std::nullopt);
    usrsctp_set_upcall(so_, nullptr, nullptr);
    {
      std::lock_guard lock(gMutex);
      gRegistry.erase(waiters_->id);
    }
    usrsctp_close(so_);
    so_ = nullptr;
    waiters_->so = nullptr;
    waiters_->onRead = waiters_->onWrite = nullptr;
  }

private:
  asio::io_context& io_;
  struct socket* so_;
  int family_;
  std::uint16_t remotePort_;
  static constexpr int on_ = 1;
  std::shared_ptr<Waiters> waiters_;
  std::optional<ProcessWide> claimed_;  // what this socket's CMT association relies on
};

}  // namespace

bool userlandPerAssociation() {
#ifdef USRSCTP_NPM_PATCHLEVEL
  return true;
#else
  return false;
#endif
}

const char* userlandStackDescription() { return NPM_USRSCTP_DESCRIPTION; }

Result<void> userlandSupports(const Tuning& tuning) {
#ifdef USRSCTP_NPM_PATCHLEVEL
  constexpr int level = USRSCTP_NPM_PATCHLEVEL;
#else
  constexpr int level = 0;  // the system's libusrsctp: none of the series
#endif
#if defined(USRSCTP_NPM_PATCHLEVEL) && USRSCTP_NPM_PATCHLEVEL >= 4
  // The tuning's bits are the option's (bit 2: patch 0004).
  static_assert(SCTP_BUFFER_SPLITTING_ON_BUFFERED == flowspec::kBufferSplitOnBuffered);
#endif
  auto needs = [](const char* knob, int patch) {
    char number[16];
    std::snprintf(number, sizeof(number), "%04d", patch);
    return Failure{std::string(knob) + " needs the bundled SCTP stack (its patch " + number +
                   "); this netperfmeter links the " + NPM_USRSCTP_DESCRIPTION};
  };
  if ((tuning.bufferSplitting & flowspec::kBufferSplitOnBuffered) && level < 4) return needs("bufsplit-on=buffered", 4);
  if (tuning.smartFr && level < 5) return needs("smartfr=on", 5);
  if (tuning.reschedule && level < 6) return needs("reschedule=on", 6);
  if (tuning.cmt == flowspec::kCmtWprSctp && level < 8) return needs("cmt=wprsctp", 8);
#if defined(USRSCTP_NPM_PATCHLEVEL) && USRSCTP_NPM_PATCHLEVEL >= 8
  static_assert(SCTP_CMT_WPRSCTP == flowspec::kCmtWprSctp);
#endif
  return {};
}

std::uint16_t userlandEncapsulationPort() {
  std::lock_guard lock(gMutex);
  return gStarted ? gPort : 0;
}

Result<void> processWideCompatible(const Tuning& tuning) {
  const auto wanted = processWideOf(tuning);
  std::lock_guard lock(gMutex);
  if (!wanted || gProcessWideUsers == 0 || *wanted == gProcessWide) return {};
  return Failure{processWideConflict(*wanted)};
}

std::unique_ptr<Socket> openUserland(asio::io_context& io, int family, const StackSettings& settings) {
  start(settings);
  struct socket* so = usrsctp_socket(family, SOCK_STREAM, IPPROTO_SCTP, nullptr, nullptr, 0, nullptr);
  if (so == nullptr) throw TransportError(std::string("cannot create a userland SCTP socket: ") + std::strerror(errno));
  auto socket = std::make_unique<UserlandSocket>(io, so, family, settings.remoteUdpEncapsulationPort);
  sctp_assoc_value v{};
  v.assoc_id = SCTP_FUTURE_ASSOC;
  v.assoc_value = 0;  // CMT off unless tune() says otherwise (the stack-wide default is on)
  setOption(so, IPPROTO_SCTP, kSctpCmtOnOff, v, "SCTP_CMT_ON_OFF");
  return socket;
}

}  // namespace npm::sctp
