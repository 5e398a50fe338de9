// Whole-text and piecewise compression with bzip2 and gzip, as the result files use them:
// a bzip2 file may be several independent streams one after the other (bzip2, R, Python and
// InputFile read them as one); a gzip file is one member whose deflate data may be made of
// pieces compressed independently and joined (as pigz does: every gzip reader reads it, also
// those that stop after the first member). OutputFile compresses with these.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace npm {

enum class Compression { kNone, kBzip2, kGzip };

// The compression an output name asks for: ".bz2"/".BZ2" bzip2 (as the reference),
// ".gz"/".GZ" gzip, anything else none.
Compression compressionForName(std::string_view name);

// One complete bzip2 stream of `text` (level 1-9, clamped). Throws FileError.
std::string bz2Compress(std::string_view text, int level);

// One piece of a gzip member: raw deflate data ending on a byte boundary (sync flush), or
// with the final block if `final`; pieces compressed independently (in parallel) and
// concatenated in order form one deflate stream. `crc` is the CRC-32 of `text`.
struct DeflatePiece {
  std::string data;
  unsigned long crc = 0;
  std::uint64_t length = 0;
};
DeflatePiece deflatePiece(std::string_view text, int level, bool final);
// The 10-byte gzip header and the 8-byte trailer around the pieces.
std::string gzipHeader(int level);
std::string gzipTrailer(unsigned long crc, std::uint64_t length);
// The CRC-32 of pieces `a` then `b`, from theirs (zlib's crc32_combine).
unsigned long combineCrc(unsigned long a, unsigned long b, std::uint64_t lengthOfB);
unsigned long emptyCrc();

// One complete gzip member (RFC 1952) of `text`.
std::string gzCompress(std::string_view text, int level);

// Compresses a whole text as `c` asks (kNone: a copy).
std::string compressText(std::string_view text, Compression c, int level);

}  // namespace npm
