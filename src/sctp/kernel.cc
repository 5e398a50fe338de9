// The kernel SCTP backend (lksctp-tools / <netinet/sctp.h>): one-to-one style sockets whose
// readiness Asio watches on the file descriptor.
#include <boost/asio/posix/stream_descriptor.hpp>
#include <netinet/in.h>
#include <netinet/sctp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/handle.h"
#include "sctp/socket.h"
#include "sctp/sockaddr.h"
#include "transport/sockets.h"

namespace npm::sctp {

namespace {

using transport::TransportError;

template <class T>
void setOption(int fd, int level, int name, const T& value, const char* what) {
  if (::setsockopt(fd, level, name, &value, sizeof(value)) != 0) {
    throw TransportError(std::string("cannot set ") + what + ": " + std::strerror(errno));
  }
}

class KernelSocket : public Socket {
public:
  KernelSocket(asio::io_context& io, int fd, int family) : descriptor_(io, fd), family_(family) {
    const int on = 1;
    ::setsockopt(fd, IPPROTO_SCTP, SCTP_RECVRCVINFO, &on, sizeof(on));
    for (std::uint16_t type : {SCTP_ASSOC_CHANGE, SCTP_SHUTDOWN_EVENT}) {
      sctp_event e{};
      e.se_assoc_id = SCTP_FUTURE_ASSOC;
      e.se_type = type;
      e.se_on = 1;
      ::setsockopt(fd, IPPROTO_SCTP, SCTP_EVENT, &e, sizeof(e));
    }
  }
  ~KernelSocket() override { close(); }

  Stack stack() const override { return Stack::Kernel; }
  int fd() { return descriptor_.native_handle(); }

  void configure(const SocketOptions& o) override {
    sctp_initmsg init{};
    init.sinit_num_ostreams = o.streams;
    init.sinit_max_instreams = o.streams;
    setOption(fd(), IPPROTO_SCTP, SCTP_INITMSG, init, "SCTP_INITMSG");
    const int nodelay = o.noDelay ? 1 : 0;
    setOption(fd(), IPPROTO_SCTP, SCTP_NODELAY, nodelay, "SCTP_NODELAY");
    if (o.nrSack.value_or(false)) {
      throw TransportError("NR-SACK is not available in the Linux kernel SCTP stack; use the userland stack");
    }
    if (o.pktDrop.value_or(false)) {
      throw TransportError(
          "packet-drop reporting is not available in the Linux kernel SCTP stack; use the userland stack");
    }
    setBufferSizes(o.rcvBufferSize, o.sndBufferSize);
    if (family_ == AF_INET6 && o.v6only) setOption(fd(), IPPROTO_IPV6, IPV6_V6ONLY, *o.v6only ? 1 : 0, "IPV6_V6ONLY");
    const int reuse = 1;
    setOption(fd(), SOL_SOCKET, SO_REUSEADDR, reuse, "SO_REUSEADDR");
    if (o.heartbeatMs != 0) {
      sctp_paddrparams hb{};
      hb.spp_assoc_id = SCTP_FUTURE_ASSOC;
      hb.spp_hbinterval = o.heartbeatMs;
      hb.spp_pathmaxrxt = o.maxRetransmissions;
      hb.spp_flags = SPP_HB_ENABLE;
      setOption(fd(), IPPROTO_SCTP, SCTP_PEER_ADDR_PARAMS, hb, "SCTP_PEER_ADDR_PARAMS (heartbeat)");
      sctp_rtoinfo rto{};
      rto.srto_assoc_id = SCTP_FUTURE_ASSOC;
      rto.srto_max = o.livenessRtoMaxMs();
      rto.srto_initial = rto.srto_max;  // within min..max (0 fields stay as they are)
      setOption(fd(), IPPROTO_SCTP, SCTP_RTOINFO, rto, "SCTP_RTOINFO (RTO.max)");
    }
    if (o.maxRetransmissions != 0) {
      sctp_assocparams assoc{};
      assoc.sasoc_assoc_id = SCTP_FUTURE_ASSOC;
      assoc.sasoc_asocmaxrxt = o.maxRetransmissions;
      setOption(fd(), IPPROTO_SCTP, SCTP_ASSOCINFO, assoc, "SCTP_ASSOCINFO (association max. retransmissions)");
    }
  }

  void setBufferSizes(std::uint32_t rcv, std::uint32_t snd) override {
    if (rcv > 0) setOption(fd(), SOL_SOCKET, SO_RCVBUF, static_cast<int>(rcv), "SO_RCVBUF");
    if (snd > 0) setOption(fd(), SOL_SOCKET, SO_SNDBUF, static_cast<int>(snd), "SO_SNDBUF");
  }

  std::optional<bool> nrSackNegotiated() override { return std::nullopt; }
  std::optional<Tuning> tuningInForce() override { return std::nullopt; }  // no CMT here
  void releaseProcessWide() override {}

  void tune(const Tuning& t) override {
    if (t.needsUserland()) {
      throw TransportError(
          "CMT-SCTP and its tuning (cmt=, sctpcc=, bufsplit=, nrsack=, dac=) are not available in "
          "the Linux kernel SCTP stack; use the userland stack (--sctp-stack=userland)");
    }
    if (t.rtoMinMs != 0) {
      sctp_rtoinfo rto{};
      rto.srto_assoc_id = SCTP_FUTURE_ASSOC;
      rto.srto_min = t.rtoMinMs;
      rto.srto_initial = std::max<std::uint32_t>(t.rtoMinMs, 1000);
      setOption(fd(), IPPROTO_SCTP, SCTP_RTOINFO, rto, "SCTP_RTOINFO (RTO.min)");
    }
  }

  void bind(const std::vector<asio::ip::address>& addresses, std::uint16_t port) override {
    std::vector<asio::ip::address> list = addresses;
    if (list.empty()) {
      list.push_back(family_ == AF_INET6 ? asio::ip::address(asio::ip::address_v6::any())
                                         : asio::ip::address(asio::ip::address_v4::any()));
    }
    auto packed = packAddresses(list, port);
    if (::sctp_bindx(fd(), reinterpret_cast<sockaddr*>(packed.data()), static_cast<int>(list.size()),
                     SCTP_BINDX_ADD_ADDR) != 0) {
      throw TransportError("cannot bind SCTP to " + addressList(list) + " port " + std::to_string(port) + ": " +
                           std::strerror(errno));
    }
  }

  void listen() override {
    if (::listen(fd(), 128) != 0) throw TransportError(std::string("cannot listen on SCTP: ") + std::strerror(errno));
  }

  std::unique_ptr<Socket> accept() override {
    const int client = ::accept4(fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (client < 0) return nullptr;
    return std::make_unique<KernelSocket>(static_cast<asio::io_context&>(descriptor_.get_executor().context()), client,
                                          family_);
  }

  void connect(const std::vector<asio::ip::address>& addresses, std::uint16_t port) override {
    auto packed = packAddresses(addresses, port);
    sctp_assoc_t id = 0;
    if (::sctp_connectx(fd(), reinterpret_cast<sockaddr*>(packed.data()), static_cast<int>(addresses.size()), &id) !=
            0 &&
        errno != EINPROGRESS) {
      throw TransportError("cannot connect SCTP to " + addressList(addresses) + " port " + std::to_string(port) + ": " +
                           std::strerror(errno));
    }
  }

  int connectError() override {
    int error = 0;
    socklen_t len = sizeof(error);
    ::getsockopt(fd(), SOL_SOCKET, SO_ERROR, &error, &len);
    return error;
  }

  long send(const std::uint8_t* data, std::size_t length, const SendInfo& info) override {
    // sctp_sendv() is not in every libsctp; sendmsg() with SCTP_SNDINFO/SCTP_PRINFO cmsgs is.
    iovec iov{const_cast<std::uint8_t*>(data), length};
    char control[CMSG_SPACE(sizeof(sctp_sndinfo)) + CMSG_SPACE(sizeof(sctp_prinfo))] = {};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = CMSG_SPACE(sizeof(sctp_sndinfo));
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = IPPROTO_SCTP;
    c->cmsg_type = SCTP_SNDINFO;
    c->cmsg_len = CMSG_LEN(sizeof(sctp_sndinfo));
    auto* snd = reinterpret_cast<sctp_sndinfo*>(CMSG_DATA(c));
    snd->snd_sid = info.stream;
    snd->snd_ppid = htonl(info.ppid);
    snd->snd_flags = info.unordered ? SCTP_UNORDERED : 0;
    if (info.prPolicy != PrPolicy::None) {
      mh.msg_controllen = sizeof(control);
      cmsghdr* p = CMSG_NXTHDR(&mh, c);
      p->cmsg_level = IPPROTO_SCTP;
      p->cmsg_type = SCTP_PRINFO;
      p->cmsg_len = CMSG_LEN(sizeof(sctp_prinfo));
      auto* pr = reinterpret_cast<sctp_prinfo*>(CMSG_DATA(p));
      // Linux numbers the policies 0x10 (TTL) and 0x20 (RTX); PrPolicy has the RFC 6458 values.
      pr->pr_policy = info.prPolicy == PrPolicy::Ttl ? SCTP_PR_SCTP_TTL : SCTP_PR_SCTP_RTX;
      pr->pr_value = info.prValue;
    }
    return ::sendmsg(fd(), &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
  }

  long receive(std::uint8_t* buffer, std::size_t length, ReceiveInfo& info) override {
    iovec iov{buffer, length};
    char control[CMSG_SPACE(sizeof(sctp_rcvinfo))] = {};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(fd(), &mh, MSG_DONTWAIT);
    if (n < 0) return -1;
    info.notification = (mh.msg_flags & MSG_NOTIFICATION) != 0;
    info.endOfRecord = (mh.msg_flags & MSG_EOR) != 0;
    info.stream = 0;
    info.ppid = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
      if (c->cmsg_level == IPPROTO_SCTP && c->cmsg_type == SCTP_RCVINFO) {
        const auto* rcv = reinterpret_cast<const sctp_rcvinfo*>(CMSG_DATA(c));
        info.stream = rcv->rcv_sid;
        info.ppid = ntohl(rcv->rcv_ppid);
      }
    }
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
    descriptor_.async_wait(
        writable ? asio::posix::stream_descriptor::wait_write : asio::posix::stream_descriptor::wait_read,
        [handler = std::move(handler)](const boost::system::error_code& ec) {
          if (ec != asio::error::operation_aborted) handler();
        });
  }

  long unsentChunks() override {
    sctp_status status{};
    socklen_t len = sizeof(status);
    if (::getsockopt(fd(), IPPROTO_SCTP, SCTP_STATUS, &status, &len) != 0) return -1;
    return long{status.sstat_unackdata} + status.sstat_penddata;
  }

  void samplePaths(std::vector<transport::PathSample>& out) override {
    sockaddr* addrs = nullptr;
    const int n = ::sctp_getpaddrs(fd(), 0, &addrs);
    if (n <= 0) return;
    samplePeerAddresses<sctp_paddrinfo>(
        addrs, n,
        [this](sctp_paddrinfo& info) {
          socklen_t len = sizeof(info);
          return ::getsockopt(fd(), IPPROTO_SCTP, SCTP_GET_PEER_ADDR_INFO, &info, &len) == 0;
        },
        [](int state) -> std::string {
          switch (state) {
            case SCTP_ACTIVE: return "active";
            case SCTP_INACTIVE: return "inactive";
            case SCTP_PF: return "potentially-failed";
            case SCTP_UNCONFIRMED: return "unconfirmed";
            default: return "-";
          }
        },
        out);
    ::sctp_freepaddrs(addrs);
    sampleAssociation<sctp_status>(
        [this](sctp_status& status) {
          socklen_t len = sizeof(status);
          return ::getsockopt(fd(), IPPROTO_SCTP, SCTP_STATUS, &status, &len) == 0;
        },
        [](int state) -> std::string {
          switch (state) {
            NPM_SCTP_ASSOCIATION_STATE_CASES
            default: return "-";
          }
        },
        out);
  }

  std::vector<asio::ip::address> peerAddresses() override {
    sockaddr* addrs = nullptr;
    const int n = ::sctp_getpaddrs(fd(), 0, &addrs);
    auto result = unpackAddresses(addrs, n);
    if (n > 0) ::sctp_freepaddrs(addrs);
    return result;
  }

  std::vector<asio::ip::address> localAddresses() override {
    sockaddr* addrs = nullptr;
    const int n = ::sctp_getladdrs(fd(), 0, &addrs);
    auto result = unpackAddresses(addrs, n);
    if (n > 0) ::sctp_freeladdrs(addrs);
    return result;
  }

  std::uint16_t localPort() override {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    ::getsockname(fd(), reinterpret_cast<sockaddr*>(&ss), &len);
    return portOf(reinterpret_cast<sockaddr*>(&ss));
  }

  void shutdownWrite() override {
    if (descriptor_.is_open()) ::shutdown(descriptor_.native_handle(), SHUT_WR);
  }

  void close() override {
    boost::system::error_code ec;
    descriptor_.close(ec);
  }

private:
  asio::posix::stream_descriptor descriptor_;
  int family_;
};

}  // namespace

Result<void> kernelAvailable() {
  if (UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_SCTP))) return {};
  return Failure{std::string("this kernel has no SCTP (") + std::strerror(errno) + ")"};
}

std::unique_ptr<Socket> openKernel(asio::io_context& io, int family) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_SCTP);
  if (fd < 0) throw TransportError(std::string("cannot create a kernel SCTP socket: ") + std::strerror(errno));
  return std::make_unique<KernelSocket>(io, fd, family);
}

}  // namespace npm::sctp
