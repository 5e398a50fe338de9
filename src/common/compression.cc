#include "common/compression.h"

#include <bzlib.h>
#include <zlib.h>

#include <algorithm>

#include "common/fileio.h"

namespace npm {

namespace {
int clampLevel(int level) { return level < 1 ? 1 : (level > 9 ? 9 : level); }

bool endsWith(std::string_view name, std::string_view suffix) {
  return name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
}
}  // namespace

Compression compressionForName(std::string_view name) {
  if (endsWith(name, ".bz2") || endsWith(name, ".BZ2")) return Compression::kBzip2;
  if (endsWith(name, ".gz") || endsWith(name, ".GZ")) return Compression::kGzip;
  return Compression::kNone;
}

std::string bz2Compress(std::string_view text, int level) {
  // The bound of bzip2's documentation: 1 % + 600 bytes more than the input.
  std::string out(text.size() + text.size() / 100 + 700, '\0');
  auto length = static_cast<unsigned int>(out.size());
  const int rc = BZ2_bzBuffToBuffCompress(out.data(), &length, const_cast<char*>(text.data()),
                                          static_cast<unsigned int>(text.size()), clampLevel(level), 0, 30);
  if (rc != BZ_OK) throw FileError("bzip2 compression failed (code " + std::to_string(rc) + ")");
  out.resize(length);
  return out;
}

DeflatePiece deflatePiece(std::string_view text, int level, bool final) {
  z_stream z{};
  // Raw deflate (no zlib/gzip wrapper): the caller writes the gzip header and trailer.
  if (deflateInit2(&z, clampLevel(level), Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw FileError("gzip compression failed (out of memory)");
  }
  DeflatePiece piece;
  piece.length = text.size();
  piece.crc = crc32(0L, Z_NULL, 0);
  std::string& out = piece.data;
  out.resize(deflateBound(&z, static_cast<uLong>(text.size())) + 64);
  std::size_t fed = 0, produced = 0;
  int rc = Z_OK;
  for (;;) {
    // zlib counts in uInt: feed at most 1 GiB at a time.
    const std::size_t feed = std::min<std::size_t>(text.size() - fed, std::size_t{1} << 30);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data() + fed));
    z.avail_in = static_cast<uInt>(feed);
    const bool last = fed + feed == text.size();
    const int flush = !last ? Z_NO_FLUSH : final ? Z_FINISH : Z_SYNC_FLUSH;
    do {
      if (out.size() - produced < 4096) out.resize(out.size() * 2 + 4096);
      const std::size_t room = std::min<std::size_t>(out.size() - produced, std::size_t{1} << 30);
      z.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
      z.avail_out = static_cast<uInt>(room);
      rc = deflate(&z, flush);
      produced += room - z.avail_out;
      if (rc == Z_STREAM_ERROR) break;
    } while (z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    piece.crc = crc32_z(piece.crc, reinterpret_cast<const Bytef*>(text.data() + fed), feed);
    fed += feed;
    if (rc == Z_STREAM_ERROR || last) break;
  }
  deflateEnd(&z);
  if (rc == Z_STREAM_ERROR || (final && rc != Z_STREAM_END)) {
    throw FileError("gzip compression failed (code " + std::to_string(rc) + ")");
  }
  out.resize(produced);
  return piece;
}

std::string gzipHeader(int level) {
  // ID1 ID2 CM=deflate FLG=0 MTIME=0 (reproducible) XFL OS=3 (Unix)
  const char xfl = level >= 9 ? 2 : level <= 1 ? 4 : 0;
  return std::string{'\x1f', '\x8b', '\x08', '\0', '\0', '\0', '\0', '\0', xfl, '\x03'};
}

std::string gzipTrailer(unsigned long crc, std::uint64_t length) {
  std::string t(8, '\0');
  for (int i = 0; i < 4; ++i) {
    t[static_cast<std::size_t>(i)] = static_cast<char>((crc >> (8 * i)) & 0xff);
    t[static_cast<std::size_t>(4 + i)] = static_cast<char>((length >> (8 * i)) & 0xff);
  }
  return t;
}

unsigned long combineCrc(unsigned long a, unsigned long b, std::uint64_t lengthOfB) {
  return crc32_combine(a, b, static_cast<z_off_t>(lengthOfB));
}

unsigned long emptyCrc() { return crc32(0L, Z_NULL, 0); }

std::string gzCompress(std::string_view text, int level) {
  DeflatePiece piece = deflatePiece(text, level, true);
  std::string out = gzipHeader(level);
  out += piece.data;
  out += gzipTrailer(piece.crc, piece.length);
  return out;
}

std::string compressText(std::string_view text, Compression c, int level) {
  switch (c) {
    case Compression::kBzip2: return bz2Compress(text, level);
    case Compression::kGzip: return gzCompress(text, level);
    case Compression::kNone: break;
  }
  return std::string(text);
}

}  // namespace npm
