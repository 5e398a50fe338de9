// File input/output shared by every program of the tool-chain.
//
// OutputFile writes plain, bzip2- or gzip-compressed text (bzip2 by the ".bz2" suffix, or
// chosen explicitly) to an unnamed file in the target's directory (O_TMPFILE; a named
// temporary where the file system lacks it) that gets its name only on commit(), so an
// aborted run never leaves a half-written file that looks whole, and a killed one leaves
// nothing. Every I/O failure (full disk, read-only directory, ...) throws FileError with a
// one-line message naming the file.
//
// A compressed OutputFile cuts the text into pieces that it compresses one by one
// (common/compression.h): bzip2 pieces are independent streams, gzip pieces the deflate data
// of one member. From compressInParallel() on, the pieces are compressed on a thread pool
// and written in order: the file reads the same whichever way it was written.
//
// InputFile reads plain, bzip2 or gzip input (recognised by its magic, so a misnamed
// file still works), including files of several bzip2 streams or gzip members, and reports
// truncated or corrupt compressed data as FileError instead of returning short data.
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/compression.h"
#include "common/handle.h"
#include "common/thread_pool.h"

namespace npm {

namespace detail {
class Decompressor;  // one compressed format's decoder (fileio.cc)
}

class FileError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// True if the file name ends in ".bz2" (case-sensitive, as the reference).
bool hasBz2Suffix(std::string_view name);

class OutputFile {
public:
  // Text gathered before it is compressed as one piece: below one 900k bzip2 block.
  static constexpr std::size_t kPieceBytes = 850 * 1000;

  OutputFile() = default;
  // Opens `path` for writing; bzip2-compressed if the name ends in ".bz2".
  explicit OutputFile(const std::string& path, int level = 9);
  OutputFile(const std::string& path, bool compressBzip2, int level);
  OutputFile(const std::string& path, Compression compression, int level);
  // An anonymous temporary file (deleted when closed); see takeForReading().
  static OutputFile anonymous(bool compressBzip2, int level = 9);
  static OutputFile anonymous(Compression compression, int level);

  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();  // discards the file unless committed

  bool isOpen() const { return file_ != nullptr; }
  const std::string& path() const { return path_; }
  bool anonymous() const { return anonymous_; }
  bool compressed() const { return compression_ != Compression::kNone; }
  std::uint64_t bytesWritten() const { return written_; }  // uncompressed
  std::uint64_t bytesStored() const { return stored_; }    // in the file so far (compressed)

  // From here on (if the file is compressed), pieces of `pieceBytes` are compressed on the
  // pool's threads — an own pool of `threads` (nothing changes for fewer than 2), or a shared
  // one that must outlive the file — and written in order. Memory stays within about
  // 2 × threads pieces.
  void compressInParallel(unsigned threads, std::size_t pieceBytes = kPieceBytes);
  void compressInParallel(ThreadPool& pool, std::size_t pieceBytes = kPieceBytes);

  void write(std::string_view data);
  void write(const void* data, std::size_t length) { write(std::string_view(static_cast<const char*>(data), length)); }
  // printf-style formatted write.
  void printf(const char* format, ...) __attribute__((format(printf, 2, 3)));

  // Finishes the stream, flushes, syncs, and renames the temporary into place.
  void commit();
  // For anonymous files: finishes the stream and returns the FILE rewound to the
  // start, for reading back (owned by the caller: closed, and so deleted, with it).
  UniqueFile takeForReading();
  // Removes the temporary (no effect after commit()).
  void discard() noexcept;

private:
  void openFile(Compression compression, int level);
  void finishStream();
  void giveName();
  void writeRaw(std::string_view data);
  void flushChunk(bool final);
  void drain(std::size_t keep);
  void put(const DeflatePiece& piece);
  [[noreturn]] void fail(const std::string& what);

  std::FILE* file_ = nullptr;
  std::string path_;
  std::string tmpPath_;
  bool unnamed_ = false;  // O_TMPFILE: no name until commit()
  bool anonymous_ = false;
  Compression compression_ = Compression::kNone;
  int level_ = 9;
  std::string chunk_;  // text of the next piece
  std::size_t chunkBytes_ = kPieceBytes;
  std::unique_ptr<ThreadPool> ownPool_;
  ThreadPool* pool_ = nullptr;                     // null: pieces are compressed by write()
  std::deque<std::future<DeflatePiece>> pending_;  // pieces on the pool, in file order
  std::uint64_t pieces_ = 0;
  unsigned long crc_ = 0;  // gzip: of the pieces written so far
  bool finished_ = false;
  std::uint64_t written_ = 0;
  std::uint64_t stored_ = 0;
};

// Bytes kept on disk while a program runs: an unnamed file (O_TMPFILE; unlinked at once where
// the file system lacks it) that disappears when closed or when the process dies. Placed in
// the directory of `nearPath` (for a result file's spool), or in $TMPDIR (/tmp) if it is empty.
class ScratchFile {
public:
  ScratchFile() = default;
  explicit ScratchFile(const std::string& nearPath);
  ScratchFile(ScratchFile&& other) noexcept;
  ScratchFile& operator=(ScratchFile&& other) noexcept;
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  ~ScratchFile();

  bool isOpen() const { return fd_ >= 0; }
  std::uint64_t size() const { return size_; }
  void append(const void* data, std::size_t length);
  // Up to `length` bytes from `offset`; throws FileError on a read error.
  std::size_t read(std::uint64_t offset, void* buffer, std::size_t length) const;
  // Empties the file (and gives its blocks back where the file system can).
  void clear();

private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::string where_;
};

class InputFile {
public:
  // getline() refuses longer lines (FileError): no result file has them, and reading one
  // whole would take memory without bound.
  static constexpr std::size_t kMaxLineLength = std::size_t{1} << 20;

  // Opens `path` ("-" = standard input). Throws FileError if it cannot be opened.
  explicit InputFile(const std::string& path);
  // Reads from an already open FILE (not closed by InputFile).
  InputFile(std::FILE* file, std::string name);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& name() const { return name_; }
  bool compressed() const { return decoder_ != nullptr; }
  // Next line without its '\n' (and without a trailing '\r'); false at the end.
  bool getline(std::string& line);
  // Up to `length` bytes; 0 at the end.
  std::size_t read(char* buffer, std::size_t length);
  // Number of the line last returned by getline() (1-based).
  std::uint64_t lineNumber() const { return lineNumber_; }

private:
  void probe();
  bool fill();
  bool fillCompressed();
  std::size_t readRaw(char* buffer, std::size_t length);

  std::FILE* file_ = nullptr;
  bool ownsFile_ = false;
  std::string name_;
  std::unique_ptr<detail::Decompressor> decoder_;  // null: plain text
  bool rawEof_ = false;
  bool streamEnded_ = true;  // of the current bzip2 stream or gzip member
  std::vector<char> in_;
  std::size_t inPos_ = 0, inLen_ = 0;
  std::vector<char> out_;
  std::size_t outPos_ = 0, outLen_ = 0;
  std::uint64_t lineNumber_ = 0;
};

// Reads a whole (plain or bzip2) file into a string.
std::string readWholeFile(const std::string& path);

}  // namespace npm
