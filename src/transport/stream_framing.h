// NPMP messages in a byte stream (TCP, MPTCP, a QUIC stream): each message is the Length bytes
// its 4-byte TLV header declares, header first. The rule that cuts a byte stream into messages
// lives here once, for every byte-stream channel: the stream channel's reads (data_channel.cc)
// and the QUIC streams (quic/), whose bytes the stack hands over in pieces (MessageReassembler).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/result.h"
#include "npmp/messages.h"

namespace npm::transport {

// The length of the message whose 4-byte header is at `header`; or, as the line of a protocol
// violation, why these bytes cannot begin a message: a length below the header's, and where
// the channel expects a kind of message (`expect`), a type or length it may not carry
// (npmp::checkHeader), so that garbage is refused as soon as its 4 bytes arrive.
Result<std::size_t> frameLength(const std::uint8_t* header, const std::optional<npmp::MessageSet>& expect);

// Cuts bytes that arrive in pieces into whole messages: append() what arrived, then take
// next() until it has no whole message. Pure: no sockets, no clocks.
class MessageReassembler {
public:
  // From now on, every header is checked against `kind` (see frameLength).
  void expect(npmp::MessageSet kind) { expect_ = kind; }
  void append(std::span<const std::uint8_t> bytes);
  // The next whole message (valid until the next append()), nothing while the next message
  // is incomplete, or why the bytes are not NPMP (from then on, every call says so).
  Result<std::optional<std::span<const std::uint8_t>>> next();
  // Bytes appended and not yet taken as a message: a stream that ends here ends mid-message.
  std::size_t buffered() const { return end_ - begin_; }

private:
  std::vector<std::uint8_t> buffer_;
  std::size_t begin_ = 0, end_ = 0;
  std::optional<npmp::MessageSet> expect_;
  std::optional<std::string> failed_;
};

}  // namespace npm::transport
