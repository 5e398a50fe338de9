// Connections (or SCTP associations, QUIC connections) accepted but not identified yet. Each
// one that has not sent its IDENTIFY within the timeout is closed; at most `limit` wait at once,
// at most `perPrefix` of one network and `perHost` of one peer address. A newcomer is never
// refused for the others: when a limit is reached, the entry waiting longest of the group that
// is full (the newcomer's host, then its network) or, when the whole table is, of the network
// holding the most entries, is closed to make room. A real flow's connection identifies itself
// within a round trip, so what is closed is one that has waited longest without doing so; and
// peers that keep connecting without identifying churn their own network's share only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/log.h"
#include "transport/async.h"
#include "transport/sockets.h"

namespace npm::transport {

struct PendingLimits {
  std::size_t limit = 1024, perHost = 128, perPrefix = 256;
  unsigned prefixV4 = 24, prefixV6 = 64;
  Clock::duration timeout = std::chrono::seconds(30);
};

template <class T>
class PendingTable {
public:
  PendingTable(asio::io_context& io, std::string what, PendingLimits limits)
      : io_(io), what_(std::move(what)), limits_(limits) {}

  // Adds it, closing the entry that waited longest of the group that is full, if one is. False
  // (and the object closed) only when the table admits nothing at all (a limit of 0).
  bool add(const std::shared_ptr<T>& object, const asio::ip::address& peer) {
    const asio::ip::address host = unmapped(peer);
    const asio::ip::address network = prefixOf(host, limits_.prefixV4, limits_.prefixV6).network;
    if (limits_.limit == 0 || limits_.perHost == 0 || limits_.perPrefix == 0) {
      refused_.say("Closing " + what_ + " from " + object->peerName() + ": the passive admits no unidentified ones");
      object->close();
      return false;
    }
    for (;;) {
      const Group* full = nullptr;
      std::string why;
      if (auto h = hosts_.find(host); h != hosts_.end() && h->second.size() >= limits_.perHost) {
        full = &h->second, why = "of its host";
      } else if (auto n = networks_.find(network); n != networks_.end() && n->second.size() >= limits_.perPrefix) {
        full = &n->second, why = "of its network";
      } else if (entries_.size() >= limits_.limit) {
        for (const auto& [_, group] : networks_) {
          if (full == nullptr || group.size() > full->size()) full = &group;
        }
        why = "of the network waiting with the most";
      }
      if (full == nullptr) break;
      auto oldest = entries_.find(full->begin()->second);
      evicted_.say("Closing " + what_ + " from " + oldest->first->peerName() + ": the one " + why +
                   " that waited longest without its IDENTIFY, to make room for " + object->peerName());
      auto entry = std::move(oldest->second);
      erase(oldest);
      entry.object->close();
    }
    T* raw = object.get();
    const std::uint64_t order = next_++;
    // The deadline belongs to the entry: erasing the entry disarms it.
    auto deadline = std::make_unique<Deadline>(io_.get_executor(), limits_.timeout, [this, raw] {
      auto it = entries_.find(raw);
      if (it == entries_.end()) return;
      expired_.say("Closing " + what_ + " from " + raw->peerName() + ": no IDENTIFY within " +
                   std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limits_.timeout).count()) + " s");
      auto entry = std::move(it->second);
      erase(it);
      entry.object->close();
    });
    hosts_[host].emplace(order, raw);
    networks_[network].emplace(order, raw);
    entries_[raw] = Entry{object, std::move(deadline), host, network, order};
    return true;
  }

  // Takes it out of the table (it stays open); nullptr if it was not waiting.
  std::shared_ptr<T> take(T* raw) {
    auto it = entries_.find(raw);
    if (it == entries_.end()) return nullptr;
    auto object = std::move(it->second.object);
    erase(it);
    return object;
  }

  void closeAll() {
    auto entries = std::move(entries_);
    entries_.clear();
    hosts_.clear();
    networks_.clear();
    for (auto& [raw, e] : entries) e.object->close();
  }

  std::size_t size() const { return entries_.size(); }

private:
  using Group = std::map<std::uint64_t, T*>;  // by the order they came in
  struct Entry {
    std::shared_ptr<T> object;
    std::unique_ptr<Deadline> deadline;
    asio::ip::address host, network;
    std::uint64_t order = 0;
  };
  void erase(typename std::map<T*, Entry>::iterator it) {
    auto leave = [&](std::map<asio::ip::address, Group>& groups, const asio::ip::address& key) {
      auto g = groups.find(key);
      g->second.erase(it->second.order);
      if (g->second.empty()) groups.erase(g);
    };
    leave(hosts_, it->second.host);
    leave(networks_, it->second.network);
    entries_.erase(it);
  }
  asio::io_context& io_;
  std::string what_;
  PendingLimits limits_;
  std::map<T*, Entry> entries_;
  std::map<asio::ip::address, Group> hosts_, networks_;
  std::uint64_t next_ = 0;
  log::Repeated refused_{"Closed " + what_ + "s: the passive admits no unidentified ones"};
  log::Repeated evicted_{"Closed " + what_ + "s waiting longest without IDENTIFY, to make room"};
  log::Repeated expired_{"Closed " + what_ + "s: no IDENTIFY in time"};
};

}  // namespace npm::transport
