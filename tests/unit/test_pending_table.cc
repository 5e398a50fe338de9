// The passive's table of data connections not identified yet: a newcomer is never refused for
// the others; the entry that waited longest of the group that is full makes room.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

#include <memory>
#include <string>
#include <vector>

#include "transport/pending_table.h"

using namespace npm;
namespace asio = boost::asio;

namespace {

struct Waiting {
  explicit Waiting(std::string name) : name(std::move(name)) {}
  std::string peerName() const { return name; }
  void close() { closed = true; }
  std::string name;
  bool closed = false;
};

struct Table {
  asio::io_context io;
  transport::PendingTable<Waiting> table;
  std::vector<std::shared_ptr<Waiting>> all;
  explicit Table(transport::PendingLimits limits) : table(io, "test connection", limits) {}
  std::shared_ptr<Waiting> add(const std::string& address) {
    auto w = std::make_shared<Waiting>(address + "#" + std::to_string(all.size()));
    all.push_back(w);
    table.add(w, asio::ip::make_address(address));
    return w;
  }
};

}  // namespace

TEST_CASE("Pending table: a host's share full, its own longest-waiting entry makes room") {
  Table t(transport::PendingLimits{.limit = 100, .perHost = 2, .perPrefix = 50});
  auto a = t.add("10.0.0.1"), b = t.add("10.0.0.1");
  auto other = t.add("10.0.0.2");
  auto c = t.add("10.0.0.1");
  CHECK(a->closed);
  CHECK_FALSE(b->closed);
  CHECK_FALSE(c->closed);
  CHECK_FALSE(other->closed);
  CHECK(t.table.size() == 3);
  // Taken out (identified), an entry no longer counts: b's host has room for one more.
  CHECK(t.table.take(b.get()) == b);
  auto d = t.add("10.0.0.1");
  CHECK_FALSE(c->closed);
  CHECK_FALSE(d->closed);
}

TEST_CASE("Pending table: a network's share full, its own longest-waiting entry makes room") {
  Table t(transport::PendingLimits{.limit = 100, .perHost = 10, .perPrefix = 3, .prefixV4 = 24});
  auto a = t.add("10.0.0.1"), b = t.add("10.0.0.2"), c = t.add("10.0.0.3");
  auto elsewhere = t.add("10.0.1.1");  // another /24
  auto d = t.add("10.0.0.4");
  CHECK(a->closed);
  CHECK_FALSE(b->closed);
  CHECK_FALSE(elsewhere->closed);
  CHECK_FALSE(d->closed);
  CHECK(t.table.size() == 4);
}

TEST_CASE("Pending table: the whole table full, the fullest network makes room for anyone") {
  Table t(transport::PendingLimits{.limit = 4, .perHost = 10, .perPrefix = 10, .prefixV4 = 24});
  auto small = t.add("192.0.2.1");
  std::vector<std::shared_ptr<Waiting>> flood;
  for (int i = 0; i < 40; ++i) flood.push_back(t.add("10.0.0." + std::to_string(1 + i % 8)));
  // The flood churned its own entries only: the other network's one is still waiting.
  CHECK_FALSE(small->closed);
  CHECK(t.table.size() == 4);
  for (int i = 0; i < 37; ++i) CHECK(flood[static_cast<std::size_t>(i)]->closed);
  for (int i = 37; i < 40; ++i) CHECK_FALSE(flood[static_cast<std::size_t>(i)]->closed);
  // A newcomer of a third network is admitted too, at the flood's cost.
  auto third = t.add("198.51.100.7");
  CHECK_FALSE(third->closed);
  CHECK(flood[37]->closed);
  CHECK_FALSE(small->closed);
}

TEST_CASE("Pending table: IPv4-mapped IPv6 peers count with their IPv4 host and network") {
  Table t(transport::PendingLimits{.limit = 100, .perHost = 1, .perPrefix = 10});
  auto a = t.add("10.0.0.1");
  auto b = t.add("::ffff:10.0.0.1");
  CHECK(a->closed);
  CHECK_FALSE(b->closed);
}

TEST_CASE("Pending table: with a limit of 0 nothing waits") {
  Table t(transport::PendingLimits{.limit = 0});
  auto a = t.add("10.0.0.1");
  CHECK(a->closed);
  CHECK(t.table.size() == 0);
}
