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

// A value with the prefix that keeps it below 1000 (SI by 1000, binary by 1024) and four
// significant digits: 812.4, 94.13, 1.204. The unit's text follows the prefix.
inline std::string scaled(double value, double base, const char* const prefixes[5], const char* unit) {
  int i = 0;
  while (i < 4 && value >= 999.95) {
    value /= base;
    ++i;
  }
  const int decimals = value < 9.9995 ? 3 : value < 99.995 ? 2 : 1;
  char b[64];
  std::snprintf(b, sizeof(b), "%.*f %s%s", decimals, value, prefixes[i], unit);
  return b;
}

// A rate in bit/s as people read it: "0.000 bit/s", "812.4 kbit/s", "94.13 Mbit/s", "1.204 Gbit/s".
inline std::string scaledBitRate(double bitsPerSecond) {
  static const char* const prefixes[5] = {"", "k", "M", "G", "T"};
  return scaled(bitsPerSecond > 0.0 ? bitsPerSecond : 0.0, 1000.0, prefixes, "bit/s");
}

// A byte count with binary prefixes: "512.0 B", "1.500 KiB", "94.13 MiB", "1.204 GiB".
inline std::string scaledBytes(std::uint64_t bytes) {
  static const char* const prefixes[5] = {"", "Ki", "Mi", "Gi", "Ti"};
  return scaled(static_cast<double>(bytes), 1024.0, prefixes, "B");
}

// `line` without leading and trailing blanks (spaces, TABs), each run of blanks inside it one
// space: for comparing lines whatever their spacing, and for printing them on one line.
inline std::string collapseBlanks(std::string_view line) {
  std::string out;
  bool blank = false;
  for (const char c : line) {
    if (c == ' ' || c == '\t') {
      blank = !out.empty();
      continue;
    }
    if (blank) out += ' ';
    blank = false;
    out += c;
  }
  return out;
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
