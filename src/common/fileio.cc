#include "common/fileio.h"

#include <bzlib.h>
#include <fcntl.h>
#include <zlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "common/compression.h"
#include "common/result.h"
#include "common/thread_pool.h"

namespace npm {

namespace {

std::string errnoText(int error) { return std::strerror(error); }

const char* bzErrorText(int code) {
  switch (code) {
    case BZ_IO_ERROR: return "I/O error";
    case BZ_MEM_ERROR: return "out of memory";
    case BZ_DATA_ERROR: return "corrupt bzip2 data";
    case BZ_DATA_ERROR_MAGIC: return "not bzip2 data";
    case BZ_UNEXPECTED_EOF: return "truncated bzip2 data";
    case BZ_PARAM_ERROR: return "bad bzip2 parameter";
    default: return "bzip2 error";
  }
}

constexpr std::size_t kBufferSize = 256 * 1024;

}  // namespace

bool hasBz2Suffix(std::string_view name) { return name.size() >= 4 && name.substr(name.size() - 4) == ".bz2"; }

// ---------------------------------------------------------------- OutputFile

OutputFile::OutputFile(const std::string& path, int level)
    : OutputFile(path, hasBz2Suffix(path) ? Compression::kBzip2 : Compression::kNone, level) {}

OutputFile::OutputFile(const std::string& path, bool compress, int level)
    : OutputFile(path, compress ? Compression::kBzip2 : Compression::kNone, level) {}

OutputFile::OutputFile(const std::string& path, Compression compression, int level) : path_(path) {
  // An unnamed file in the target's directory (O_TMPFILE): a process killed before commit()
  // leaves nothing behind. Where the file system cannot do that, a named temporary.
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int unnamed = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);  // umask applies
  if (unnamed >= 0) {
    unnamed_ = true;
    file_ = ::fdopen(unnamed, "wb");
    if (file_ == nullptr) {
      const int error = errno;
      ::close(unnamed);
      throw FileError("cannot create " + path + ": " + errnoText(error));
    }
    openFile(compression, level);
    return;
  }
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
    throw FileError("cannot create " + path + ": " + errnoText(errno));
  }
  // Temporary beside the target, so that the final rename stays on one file system.
  tmpPath_ = path + ".tmp-XXXXXX";
  const int fd = ::mkstemp(tmpPath_.data());
  if (fd < 0) {
    const int error = errno;
    tmpPath_.clear();
    throw FileError("cannot create " + path + ": " + errnoText(error));
  }
  // mkstemp() creates 0600; give the result the usual permissions of a new file.
  // (umask is read once: reading it means setting it, which must not race.)
  static const mode_t mask = [] {
    const mode_t m = ::umask(0);
    ::umask(m);
    return m;
  }();
  ::fchmod(fd, 0666 & ~mask);
  file_ = ::fdopen(fd, "wb");
  if (file_ == nullptr) {
    const int error = errno;
    ::close(fd);
    ::unlink(tmpPath_.c_str());
    throw FileError("cannot create " + path + ": " + errnoText(error));
  }
  openFile(compression, level);
}

OutputFile OutputFile::anonymous(bool compress, int level) {
  return anonymous(compress ? Compression::kBzip2 : Compression::kNone, level);
}

OutputFile OutputFile::anonymous(Compression compression, int level) {
  OutputFile out;
  out.path_ = "(temporary file)";
  out.anonymous_ = true;
  out.file_ = std::tmpfile();
  if (out.file_ == nullptr) {
    throw FileError("cannot create a temporary file: " + errnoText(errno));
  }
  out.openFile(compression, level);
  return out;
}

void OutputFile::openFile(Compression compression, int level) {
  std::setvbuf(file_, nullptr, _IOFBF, kBufferSize);
  compression_ = compression;
  level_ = level < 1 ? 1 : (level > 9 ? 9 : level);
  if (compression_ == Compression::kGzip) {
    crc_ = emptyCrc();
    writeRaw(gzipHeader(level_));
  }
}

OutputFile::OutputFile(OutputFile&& other) noexcept { *this = std::move(other); }

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    discard();
    file_ = std::exchange(other.file_, nullptr);
    path_ = std::move(other.path_);
    tmpPath_ = std::exchange(other.tmpPath_, std::string());
    unnamed_ = other.unnamed_;
    anonymous_ = other.anonymous_;
    compression_ = other.compression_;
    level_ = other.level_;
    chunk_ = std::move(other.chunk_);
    chunkBytes_ = other.chunkBytes_;
    ownPool_ = std::move(other.ownPool_);
    pool_ = std::exchange(other.pool_, nullptr);
    pending_ = std::move(other.pending_);
    pieces_ = other.pieces_;
    crc_ = other.crc_;
    finished_ = other.finished_;
    written_ = other.written_;
    stored_ = other.stored_;
  }
  return *this;
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::fail(const std::string& what) {
  const std::string message = "cannot write " + path_ + ": " + what;
  discard();
  throw FileError(message);
}

void OutputFile::compressInParallel(unsigned threads, std::size_t chunkBytes) {
  if (file_ == nullptr || threads < 2 || pool_ != nullptr || compression_ == Compression::kNone) return;
  ownPool_ = std::make_unique<ThreadPool>(threads);
  compressInParallel(*ownPool_, chunkBytes);
}

void OutputFile::compressInParallel(ThreadPool& pool, std::size_t chunkBytes) {
  if (file_ == nullptr || pool_ != nullptr || compression_ == Compression::kNone) return;
  flushChunk(false);  // the piece begun so far (a header, say) ends here; an empty one is dropped
  pool_ = &pool;
  chunkBytes_ = chunkBytes < 64 * 1024 ? 64 * 1024 : chunkBytes;
}

void OutputFile::writeRaw(std::string_view data) {
  if (std::fwrite(data.data(), 1, data.size(), file_) != data.size()) fail(errnoText(errno));
  stored_ += data.size();
}

// Compresses the text gathered so far as one piece: on the pool, where finished pieces are
// written in order while too many are still busy, or here and now. bzip2: an empty file still
// gets one (empty) stream; gzip: the last piece carries the final deflate block, even if empty.
void OutputFile::flushChunk(bool final) {
  const bool gzip = compression_ == Compression::kGzip;
  if (chunk_.empty() && !(final && (gzip || pieces_ == 0))) return;
  auto compress = [text = std::move(chunk_), level = level_, gzip, final] {
    if (gzip) return deflatePiece(text, level, final);
    DeflatePiece piece;
    piece.data = bz2Compress(text, level);
    return piece;
  };
  chunk_ = std::string();
  ++pieces_;
  if (pool_ != nullptr) {
    pending_.push_back(pool_->submit(std::move(compress)));
    drain(final ? 0 : 2 * pool_->size());
    return;
  }
  DeflatePiece piece;
  try {
    piece = compress();
  } catch (const FileError& e) {
    fail(e.what());
  }
  put(piece);
}

void OutputFile::drain(std::size_t keep) {
  while (pending_.size() > keep) {
    DeflatePiece piece;
    try {
      piece = pending_.front().get();
    } catch (const FileError& e) {
      pending_.pop_front();
      fail(e.what());
    }
    pending_.pop_front();
    put(piece);
  }
}

void OutputFile::put(const DeflatePiece& piece) {
  writeRaw(piece.data);
  if (compression_ == Compression::kGzip) crc_ = combineCrc(crc_, piece.crc, piece.length);
}

void OutputFile::write(std::string_view data) {
  if (file_ == nullptr) {
    throw FileError("cannot write " + path_ + ": file is not open");
  }
  if (data.empty()) return;
  if (compression_ == Compression::kNone) {
    writeRaw(data);
    written_ += data.size();
    return;
  }
  while (!data.empty()) {
    const std::size_t n = std::min(data.size(), chunkBytes_ - std::min(chunkBytes_, chunk_.size()));
    chunk_.append(data.substr(0, n));
    data.remove_prefix(n);
    written_ += n;
    if (chunk_.size() >= chunkBytes_) flushChunk(false);
  }
}

void OutputFile::printf(const char* format, ...) {
  char small[512];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(small, sizeof(small), format, args);
  va_end(args);
  if (n < 0) fail("formatting error");
  if (static_cast<std::size_t>(n) < sizeof(small)) {
    write(std::string_view(small, static_cast<std::size_t>(n)));
    return;
  }
  std::string big(static_cast<std::size_t>(n) + 1, '\0');
  va_start(args, format);
  std::vsnprintf(big.data(), big.size(), format, args);
  va_end(args);
  big.resize(static_cast<std::size_t>(n));
  write(big);
}

void OutputFile::finishStream() {
  if (compression_ != Compression::kNone && !finished_) {
    flushChunk(true);
    drain(0);
    if (compression_ == Compression::kGzip) writeRaw(gzipTrailer(crc_, written_));
    finished_ = true;
  }
  if (std::fflush(file_) != 0) fail(errnoText(errno));
}

void OutputFile::commit() {
  if (file_ == nullptr) return;
  finishStream();
  if (::fsync(::fileno(file_)) != 0 && errno != EINVAL) fail(errnoText(errno));
  if (unnamed_) giveName();
  if (std::fclose(file_) != 0) {
    file_ = nullptr;
    fail(errnoText(errno));
  }
  file_ = nullptr;
  if (!tmpPath_.empty()) {
    if (std::rename(tmpPath_.c_str(), path_.c_str()) != 0) {
      const int error = errno;
      ::unlink(tmpPath_.c_str());
      tmpPath_.clear();
      throw FileError("cannot write " + path_ + ": " + errnoText(error));
    }
    tmpPath_.clear();
  }
}

// Links the unnamed file under a fresh temporary name beside the target (linkat cannot
// replace), then renames that over the target, as a named temporary would be.
void OutputFile::giveName() {
  const std::string self = "/proc/self/fd/" + std::to_string(::fileno(file_));
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = path_ + ".tmp-XXXXXX";
    const int fd = ::mkstemp(name.data());  // a free name ...
    if (fd < 0) fail(errnoText(errno));
    ::close(fd);
    ::unlink(name.c_str());  // ... that the link takes (another process may race for it)
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
      tmpPath_ = std::move(name);
      unnamed_ = false;
      return;
    }
    if (errno != EEXIST) fail(errnoText(errno));
  }
  fail("no free temporary name");
}

UniqueFile OutputFile::takeForReading() {
  if (file_ == nullptr) throw FileError("cannot read back " + path_ + ": file is not open");
  finishStream();
  UniqueFile f(file_);
  file_ = nullptr;
  std::rewind(f.get());
  return f;
}

void OutputFile::discard() noexcept {
  // Pieces still being compressed own their text; their results are dropped (a shared pool
  // runs them to the end, an own one is joined here).
  pending_.clear();
  pool_ = nullptr;
  ownPool_.reset();
  chunk_.clear();
  if (file_ != nullptr) {
    std::fclose(file_);
    file_ = nullptr;
  }
  if (!tmpPath_.empty()) {
    ::unlink(tmpPath_.c_str());
    tmpPath_.clear();
  }
}

// --------------------------------------------------------------- ScratchFile

ScratchFile::ScratchFile(const std::string& nearPath) {
  std::string dir;
  if (nearPath.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  } else {
    const auto slash = nearPath.rfind('/');
    dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : nearPath.substr(0, slash));
  }
  where_ = "a temporary file in " + dir;
  fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd_ < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    std::string name = dir + "/.npm-scratch-XXXXXX";
    fd_ = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd_ >= 0) ::unlink(name.c_str());
  }
  if (fd_ < 0) throw FileError("cannot create " + where_ + ": " + errnoText(errno));
}

ScratchFile::ScratchFile(ScratchFile&& other) noexcept { *this = std::move(other); }

ScratchFile& ScratchFile::operator=(ScratchFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = std::exchange(other.size_, 0);
    where_ = std::move(other.where_);
  }
  return *this;
}

ScratchFile::~ScratchFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ScratchFile::append(const void* data, std::size_t length) {
  if (fd_ < 0) throw FileError("cannot write a scratch file: not open");
  const char* p = static_cast<const char*>(data);
  while (length > 0) {
    const ssize_t n = ::pwrite(fd_, p, length, static_cast<off_t>(size_));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw FileError("cannot write " + where_ + ": " + errnoText(errno));
    }
    p += n;
    length -= static_cast<std::size_t>(n);
    size_ += static_cast<std::uint64_t>(n);
  }
}

std::size_t ScratchFile::read(std::uint64_t offset, void* buffer, std::size_t length) const {
  if (fd_ < 0 || offset >= size_) return 0;
  length = static_cast<std::size_t>(std::min<std::uint64_t>(length, size_ - offset));
  std::size_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd_, static_cast<char*>(buffer) + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw FileError("cannot read " + where_ + ": " + (n < 0 ? errnoText(errno) : "unexpected end"));
    done += static_cast<std::size_t>(n);
  }
  return done;
}

void ScratchFile::clear() {
  // Gives the blocks back where the file system can; some cannot truncate a file that has no
  // name any more (9p fails with ENOENT), and then the next bytes simply overwrite the old.
  if (fd_ >= 0) (void)::ftruncate(fd_, 0);
  size_ = 0;
}

// ----------------------------------------------------------------- InputFile

namespace detail {

// One compressed format's decoder. A file may hold several streams (members) one after the
// other, as the parallel compressors write them: begin() starts one wherever the previous
// ended and input is left; step() decodes what it can of `in` into `out`.
class Decompressor {
public:
  struct Step {
    std::size_t consumed = 0, produced = 0;
    bool ended = false;  // the stream (member) is complete
  };
  virtual ~Decompressor() = default;
  virtual const char* format() const = 0;
  virtual Result<void> begin() = 0;
  virtual Result<Step> step(char* in, std::size_t inLength, char* out, std::size_t outLength) = 0;
};

}  // namespace detail

namespace {

class Bzip2Decompressor final : public detail::Decompressor {
public:
  ~Bzip2Decompressor() override {
    if (started_) BZ2_bzDecompressEnd(&stream_);
  }
  const char* format() const override { return "bzip2"; }
  Result<void> begin() override {
    if (started_) BZ2_bzDecompressEnd(&stream_);
    stream_ = bz_stream{};
    started_ = BZ2_bzDecompressInit(&stream_, 0, 0) == BZ_OK;
    if (!started_) return Failure{"out of memory"};
    return {};
  }
  Result<Step> step(char* in, std::size_t inLength, char* out, std::size_t outLength) override {
    stream_.next_in = in;
    stream_.avail_in = static_cast<unsigned>(inLength);
    stream_.next_out = out;
    stream_.avail_out = static_cast<unsigned>(outLength);
    const int rc = BZ2_bzDecompress(&stream_);
    if (rc != BZ_OK && rc != BZ_STREAM_END) return Failure{bzErrorText(rc)};
    return Step{inLength - stream_.avail_in, outLength - stream_.avail_out, rc == BZ_STREAM_END};
  }

private:
  bz_stream stream_{};
  bool started_ = false;
};

class GzipDecompressor final : public detail::Decompressor {
public:
  ~GzipDecompressor() override {
    if (started_) inflateEnd(&stream_);
  }
  const char* format() const override { return "gzip"; }
  Result<void> begin() override {
    if (started_) return inflateReset(&stream_) == Z_OK ? Result<void>() : Failure{"corrupt gzip data"};
    started_ = inflateInit2(&stream_, 16 + MAX_WBITS) == Z_OK;
    if (!started_) return Failure{"out of memory"};
    return {};
  }
  Result<Step> step(char* in, std::size_t inLength, char* out, std::size_t outLength) override {
    stream_.next_in = reinterpret_cast<Bytef*>(in);
    stream_.avail_in = static_cast<uInt>(inLength);
    stream_.next_out = reinterpret_cast<Bytef*>(out);
    stream_.avail_out = static_cast<uInt>(outLength);
    const int rc = inflate(&stream_, Z_NO_FLUSH);
    // Z_BUF_ERROR with all input taken only asks for more input.
    if (rc != Z_OK && rc != Z_STREAM_END && !(rc == Z_BUF_ERROR && stream_.avail_in == 0)) {
      return Failure{std::string("corrupt gzip data") +
                     (stream_.msg != nullptr ? std::string(" (") + stream_.msg + ")" : std::string())};
    }
    return Step{inLength - stream_.avail_in, outLength - stream_.avail_out, rc == Z_STREAM_END};
  }

private:
  z_stream stream_{};
  bool started_ = false;
};

}  // namespace

InputFile::InputFile(const std::string& path) : name_(path) {
  if (path == "-") {
    file_ = stdin;
  } else {
    file_ = std::fopen(path.c_str(), "rb");
    if (file_ == nullptr) throw FileError("cannot open " + path + ": " + errnoText(errno));
    ownsFile_ = true;
  }
  probe();
}

InputFile::InputFile(std::FILE* file, std::string name) : file_(file), name_(std::move(name)) { probe(); }

// The format by its magic: bzip2 "BZh", gzip 1f 8b; anything else is plain text.
void InputFile::probe() {
  in_.resize(kBufferSize);
  out_.resize(kBufferSize);
  inLen_ = readRaw(in_.data(), in_.size());
  if (inLen_ >= 3 && std::memcmp(in_.data(), "BZh", 3) == 0) {
    decoder_ = std::make_unique<Bzip2Decompressor>();
  } else if (inLen_ >= 2 && static_cast<unsigned char>(in_[0]) == 0x1f && static_cast<unsigned char>(in_[1]) == 0x8b) {
    decoder_ = std::make_unique<GzipDecompressor>();
  }
}

InputFile::~InputFile() {
  if (ownsFile_ && file_ != nullptr) std::fclose(file_);
}

std::size_t InputFile::readRaw(char* buffer, std::size_t length) {
  if (rawEof_) return 0;
  const std::size_t n = std::fread(buffer, 1, length, file_);
  if (n < length) {
    if (std::ferror(file_)) throw FileError("cannot read " + name_ + ": " + errnoText(errno));
    rawEof_ = true;
  }
  return n;
}

// Refills out_ with the next decoded bytes; false at the end of the input.
bool InputFile::fill() {
  outPos_ = outLen_ = 0;
  if (decoder_ != nullptr) return fillCompressed();
  if (inPos_ < inLen_) {  // bytes read while probing for the magic
    std::memcpy(out_.data(), in_.data() + inPos_, inLen_ - inPos_);
    outLen_ = inLen_ - inPos_;
    inPos_ = inLen_;
    return true;
  }
  outLen_ = readRaw(out_.data(), out_.size());
  return outLen_ > 0;
}

bool InputFile::fillCompressed() {
  while (outLen_ == 0) {
    if (inPos_ == inLen_) {
      inPos_ = 0;
      inLen_ = readRaw(in_.data(), in_.size());
    }
    if (streamEnded_) {
      if (inLen_ == 0) return false;  // clean end after a complete stream
      if (auto started = decoder_->begin(); !started) throw FileError("cannot read " + name_ + ": " + started.error());
      streamEnded_ = false;
    }
    if (inLen_ == 0) {
      throw FileError("cannot read " + name_ + ": truncated " + decoder_->format() + " data");
    }
    const auto step = decoder_->step(in_.data() + inPos_, inLen_ - inPos_, out_.data(), out_.size());
    if (!step) throw FileError("cannot read " + name_ + ": " + step.error());
    inPos_ += step->consumed;
    outLen_ = step->produced;
    streamEnded_ = step->ended;
  }
  return true;
}

bool InputFile::getline(std::string& line) {
  line.clear();
  for (;;) {
    if (outPos_ == outLen_ && !fill()) {
      if (line.empty()) return false;
      break;  // last line without '\n'
    }
    const char* begin = out_.data() + outPos_;
    const char* nl = static_cast<const char*>(std::memchr(begin, '\n', outLen_ - outPos_));
    if (nl != nullptr) {
      line.append(begin, nl);
      outPos_ += static_cast<std::size_t>(nl - begin) + 1;
      break;
    }
    line.append(begin, outLen_ - outPos_);
    outPos_ = outLen_;
    if (line.size() > kMaxLineLength) {
      throw FileError(name_ + ":" + std::to_string(lineNumber_ + 1) + ": a line longer than " +
                      std::to_string(kMaxLineLength >> 20) + " MiB (not a result file?)");
    }
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  ++lineNumber_;
  return true;
}

std::size_t InputFile::read(char* buffer, std::size_t length) {
  std::size_t done = 0;
  while (done < length) {
    if (outPos_ == outLen_ && !fill()) break;
    const std::size_t n = std::min(length - done, outLen_ - outPos_);
    std::memcpy(buffer + done, out_.data() + outPos_, n);
    outPos_ += n;
    done += n;
  }
  return done;
}

std::string readWholeFile(const std::string& path) {
  InputFile in(path);
  std::string all;
  char buffer[65536];
  std::size_t n;
  while ((n = in.read(buffer, sizeof(buffer))) > 0) all.append(buffer, n);
  return all;
}

}  // namespace npm
