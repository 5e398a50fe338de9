#include "transport/stream_framing.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace npm::transport {

Result<std::size_t> frameLength(const std::uint8_t* header, const std::optional<npmp::MessageSet>& expect) {
  const std::size_t length = static_cast<std::size_t>(header[2]) << 8 | header[3];
  if (length < 4) {
    return Failure{"not NPMP: message length " + std::to_string(length) + " is below the header size"};
  }
  if (expect) {
    if (auto checked = npmp::checkHeader(header, *expect); !checked) return Failure{checked.error()};
  }
  return length;
}

void MessageReassembler::append(std::span<const std::uint8_t> bytes) {
  if (bytes.empty()) return;
  if (begin_ == end_) begin_ = end_ = 0;
  if (buffer_.size() - end_ < bytes.size() && begin_ > 0) {
    // Messages taken before this call are no longer referenced: their room is reused.
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() - end_ < bytes.size()) buffer_.resize(std::max(end_ + bytes.size(), 2 * buffer_.size()));
  std::memcpy(buffer_.data() + end_, bytes.data(), bytes.size());
  end_ += bytes.size();
}

Result<std::optional<std::span<const std::uint8_t>>> MessageReassembler::next() {
  if (failed_) return Failure{*failed_};
  if (end_ - begin_ < 4) return std::optional<std::span<const std::uint8_t>>{};
  const std::uint8_t* p = buffer_.data() + begin_;
  const auto length = frameLength(p, expect_);
  if (!length) {
    failed_ = length.error();
    return Failure{*failed_};
  }
  if (end_ - begin_ < *length) return std::optional<std::span<const std::uint8_t>>{};
  begin_ += *length;
  return std::optional<std::span<const std::uint8_t>>{std::span<const std::uint8_t>(p, *length)};
}

}  // namespace npm::transport
