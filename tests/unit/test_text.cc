// Text helpers: the units people read in the status line and the closing table; blanks collapsed.
#include <catch2/catch.hpp>

#include "common/text.h"

using npm::collapseBlanks;
using npm::scaledBitRate;
using npm::scaledBytes;

TEST_CASE("rates scale with SI prefixes and keep four significant digits") {
  CHECK(scaledBitRate(0.0) == "0.000 bit/s");
  CHECK(scaledBitRate(-5.0) == "0.000 bit/s");
  CHECK(scaledBitRate(812.0) == "812.0 bit/s");
  CHECK(scaledBitRate(812400.0) == "812.4 kbit/s");
  CHECK(scaledBitRate(94130000.0) == "94.13 Mbit/s");
  CHECK(scaledBitRate(1204000000.0) == "1.204 Gbit/s");
  CHECK(scaledBitRate(40e9) == "40.00 Gbit/s");
  // no "1000.0 kbit/s": what rounds to 1000 takes the next prefix
  CHECK(scaledBitRate(999960.0) == "1.000 Mbit/s");
  CHECK(scaledBitRate(9999.6) == "10.00 kbit/s");
}

TEST_CASE("byte counts scale with binary prefixes") {
  CHECK(scaledBytes(0) == "0.000 B");
  CHECK(scaledBytes(512) == "512.0 B");
  CHECK(scaledBytes(1536) == "1.500 KiB");
  CHECK(scaledBytes(1000) == "0.977 KiB");
  CHECK(scaledBytes(std::uint64_t{3} << 30) == "3.000 GiB");
  CHECK(scaledBytes(std::uint64_t{5} << 40) == "5.000 TiB");
}

TEST_CASE("collapseBlanks: no blanks at the ends, one space for each run inside") {
  CHECK(collapseBlanks("") == "");
  CHECK(collapseBlanks(" \t ") == "");
  CHECK(collapseBlanks("  a\t\tb   c \t") == "a b c");
  CHECK(collapseBlanks("x") == "x");
}
