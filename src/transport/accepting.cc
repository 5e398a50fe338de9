#include "transport/accepting.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>

#include "common/handle.h"
#include "common/log.h"

namespace npm::transport {

namespace {

constexpr auto kAcceptPause = std::chrono::milliseconds(100);

log::Repeated& acceptFailures() {
  static log::Repeated failures{"Failed accepts"};
  return failures;
}

}  // namespace

int listeningFamily(const std::vector<asio::ip::address>& addresses) {
  if (!addresses.empty()) return addresses.front().is_v6() ? AF_INET6 : AF_INET;
  return UniqueFd(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0)) ? AF_INET6 : AF_INET;
}

asio::ip::address anyAddress(int family) {
  return family == AF_INET6 ? asio::ip::address(asio::ip::address_v6::any())
                            : asio::ip::address(asio::ip::address_v4::any());
}

asio::ip::address listeningAddress(const std::vector<asio::ip::address>& addresses, int family) {
  return addresses.empty() ? anyAddress(family) : addresses.front();
}

void acceptFailed(const char* what, const boost::system::error_code& ec) {
  auto& failures = acceptFailures();
  if (failures.next()) {
    log::warning(std::string("Accepting ") + what + " failed: " + ec.message() + " (" +
                 std::to_string(failures.count()) + " times so far)");
  }
}

void acceptAgain(asio::io_context& io, bool failed, std::function<void()> next) {
  if (!failed) return next();
  auto timer = std::make_shared<asio::steady_timer>(io, kAcceptPause);
  timer->async_wait([timer, next = std::move(next)](const boost::system::error_code& ec) {
    if (!ec) next();
  });
}

asio::ip::address peerAddressOf(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  asio::ip::tcp::endpoint peer;
  if (len > peer.capacity()) return {};
  std::memcpy(peer.data(), &ss, len);
  peer.resize(len);
  return peer.address();
}

int localFamilyOf(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (fd < 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return AF_INET;
  return ss.ss_family;
}

}  // namespace npm::transport
