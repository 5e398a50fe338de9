// Connections (or SCTP associations) accepted but not identified yet. Each one that has not
// sent its IDENTIFY within the timeout is closed; at most `limit` wait at once, and at most
// `perHost` of one peer address, so that one host cannot keep the others' flows out.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

#include <map>
#include <memory>
#include <string>

#include "common/log.h"
#include "control/async.h"

namespace npm::control {

template <class T>
class PendingTable {
public:
  PendingTable(asio::io_context& io, std::string what, Clock::duration timeout, std::size_t limit,
               std::size_t perHost)
      : io_(io), what_(std::move(what)), timeout_(timeout), limit_(limit), perHost_(perHost) {}

  // False (and the object closed) when too many are waiting already.
  bool add(const std::shared_ptr<T>& object, const asio::ip::address& host) {
    const bool hostFull = hosts_[host] >= perHost_;
    if (entries_.size() >= limit_ || hostFull) {
      if (hosts_[host] == 0) hosts_.erase(host);
      refused_.say("Closing " + what_ + " from " + object->peerName() + ": too many unidentified ones" +
                   (hostFull ? " from this host" : "") + " (" + std::to_string(refused_.count()) + " refused so far)");
      object->close();
      return false;
    }
    ++hosts_[host];
    T* raw = object.get();
    // The deadline belongs to the entry: erasing the entry disarms it.
    auto deadline = std::make_unique<Deadline>(io_.get_executor(), timeout_, [this, raw] {
      auto it = entries_.find(raw);
      if (it == entries_.end()) return;
      expired_.say("Closing " + what_ + " from " + raw->peerName() + ": no IDENTIFY within " +
                   std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()) + " s");
      auto entry = std::move(it->second);
      erase(it);
      entry.object->close();
    });
    entries_[raw] = Entry{object, std::move(deadline), host};
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
    for (auto& [raw, e] : entries) e.object->close();
  }

  std::size_t size() const { return entries_.size(); }

private:
  struct Entry {
    std::shared_ptr<T> object;
    std::unique_ptr<Deadline> deadline;
    asio::ip::address host;
  };
  void erase(typename std::map<T*, Entry>::iterator it) {
    if (auto h = hosts_.find(it->second.host); h != hosts_.end() && --h->second == 0) hosts_.erase(h);
    entries_.erase(it);
  }
  asio::io_context& io_;
  std::string what_;
  Clock::duration timeout_;
  std::size_t limit_, perHost_;
  std::map<T*, Entry> entries_;
  std::map<asio::ip::address, std::size_t> hosts_;
  log::Repeated refused_{"Closed " + what_ + "s: too many unidentified ones"};
  log::Repeated expired_{"Closed " + what_ + "s: no IDENTIFY in time"};
};

}  // namespace npm::control
