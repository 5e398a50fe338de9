// Text that goes into one-line messages and line-based result files.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace npm {

// Control characters (and DEL) as \xNN, so that user or peer input quoted in a message or
// written into a TAB-separated file cannot break it into lines or columns.
inline std::string printable(std::string_view text) {
  static const char* const hex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// A measurement ID as the log shows it (lower-case hex, no leading zeros).
inline std::string hex64(std::uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof(b), "%" PRIx64, v);
  return b;
}

// Next word of an OMNeT++-style line (scalar files): "quoted with \" escapes" or up to a
// space or TAB; `rest` moves past it. False if there is no word or a quote is not closed.
inline bool nextQuotedWord(std::string_view& rest, std::string& word) {
  word.clear();
  std::size_t i = 0;
  while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\t')) ++i;
  if (i >= rest.size()) return false;
  if (rest[i] == '"') {
    ++i;
    for (;;) {
      if (i >= rest.size()) return false;  // unterminated quote
      const char c = rest[i];
      if (c == '\\' && i + 1 < rest.size()) {
        word += rest[i + 1];
        i += 2;
        continue;
      }
      if (c == '"') {
        ++i;
        break;
      }
      word += c;
      ++i;
    }
  } else {
    while (i < rest.size() && rest[i] != ' ' && rest[i] != '\t') word += rest[i++];
  }
  rest.remove_prefix(i);
  return true;
}

}  // namespace npm
