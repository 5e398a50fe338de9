// The framing of NPMP messages in a byte stream (transport/stream_framing.h): the rule the
// stream channels read by, and the reassembler of bytes handed over in pieces (QUIC streams).
#include <catch2/catch.hpp>

#include <cstdint>
#include <span>
#include <vector>

#include "npmp/messages.h"
#include "transport/stream_framing.h"

using namespace npm;
using transport::MessageReassembler;

namespace {

npmp::Bytes dataMessage(std::uint32_t seq, std::size_t payload) {
  npmp::DataHeader h;
  h.length = static_cast<std::uint16_t>(npmp::kDataHeaderSize + payload);
  h.seqNumber = seq;
  npmp::Bytes out(h.length);
  npmp::encodeDataHeader(h, out.data());
  npmp::fillPayload(out.data() + npmp::kDataHeaderSize, payload, true);
  return out;
}

// Every whole message the reassembler has, as copies.
std::vector<npmp::Bytes> drain(MessageReassembler& r) {
  std::vector<npmp::Bytes> out;
  for (;;) {
    auto next = r.next();
    REQUIRE(next.ok());
    if (!*next) return out;
    out.emplace_back((*next)->begin(), (*next)->end());
  }
}

}  // namespace

TEST_CASE("frameLength: the declared length, a short one refused with the stream channel's line", "[framing]") {
  const std::uint8_t ok[] = {5, 0, 0, 48};
  CHECK(*transport::frameLength(ok, std::nullopt) == 48);
  const std::uint8_t tooShort[] = {5, 0, 0, 2};
  auto r = transport::frameLength(tooShort, std::nullopt);
  REQUIRE_FALSE(r);
  CHECK(r.error() == "not NPMP: message length 2 is below the header size");
  // What the channel may carry: a DATA header where only IDENTIFY may come first.
  CHECK_FALSE(transport::frameLength(ok, npmp::MessageSet::DataFirst));
  CHECK(transport::frameLength(ok, npmp::MessageSet::Data));
}

TEST_CASE("MessageReassembler: messages cut anywhere come out whole and in order", "[framing]") {
  npmp::Bytes stream;
  std::vector<npmp::Bytes> sent;
  for (std::uint32_t i = 0; i < 50; ++i) {
    sent.push_back(dataMessage(i, (i * 397) % 1500));
    stream.insert(stream.end(), sent.back().begin(), sent.back().end());
  }
  for (std::size_t piece : {1u, 3u, 47u, 48u, 1000u, 65536u}) {
    MessageReassembler r;
    r.expect(npmp::MessageSet::Data);
    std::vector<npmp::Bytes> got;
    for (std::size_t at = 0; at < stream.size(); at += piece) {
      const std::size_t n = std::min(piece, stream.size() - at);
      r.append(std::span<const std::uint8_t>(stream.data() + at, n));
      for (auto& m : drain(r)) got.push_back(std::move(m));
    }
    CHECK(got == sent);
    CHECK(r.buffered() == 0);
  }
}

TEST_CASE("MessageReassembler: a partial message stays buffered; garbage fails for good", "[framing]") {
  MessageReassembler r;
  const auto m = dataMessage(7, 100);
  r.append(std::span<const std::uint8_t>(m.data(), 60));
  CHECK(drain(r).empty());
  CHECK(r.buffered() == 60);

  MessageReassembler g;
  g.expect(npmp::MessageSet::DataFirst);
  const std::uint8_t garbage[] = {0x47, 0x45, 0x54, 0x20};  // "GET "
  g.append(garbage);
  auto first = g.next();
  REQUIRE_FALSE(first);
  CHECK(first.error().find("not NPMP") == 0);
  g.append(std::span<const std::uint8_t>(m.data(), m.size()));
  CHECK_FALSE(g.next());
}
