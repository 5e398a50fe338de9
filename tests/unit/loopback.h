// A loopback TCP connection for the unit tests: `local` for the code under test (a channel, a
// flow), `peer` the other end, both on `io`.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace npm::test {

struct LoopbackConnection {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket peer{io};
  boost::asio::ip::tcp::socket local{io};

  LoopbackConnection() {
    boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    peer.connect(acceptor.local_endpoint());
    acceptor.accept(local);
  }
};

}  // namespace npm::test
