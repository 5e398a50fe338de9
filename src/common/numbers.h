// Parsing of plain decimal numbers, shared by the command line (app/cli) and FLOWSPEC
// (flowspec/): digits only, no sign, no spaces, no base prefixes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace npm {

// `text` as an unsigned decimal number from 0 to `max`; nullopt if it is empty, longer than
// `maxDigits` characters (leading zeros count), contains anything but digits or exceeds `max`.
inline std::optional<std::uint64_t> parseUnsigned(std::string_view text, std::uint64_t max,
                                                  std::size_t maxDigits = 20) {
  if (text.empty() || text.size() > maxDigits) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (max < digit || v > (max - digit) / 10) return std::nullopt;  // v * 10 + digit > max
    v = v * 10 + digit;
  }
  return v;
}

}  // namespace npm
