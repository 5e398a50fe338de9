#include <catch2/catch.hpp>

#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/fileio.h"

namespace fs = std::filesystem;

namespace {
struct TempDir {
  fs::path path;
  TempDir() {
    char templ[] = "/tmp/npm-test-XXXXXX";
    path = ::mkdtemp(templ);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string slurpRaw(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// One gzip member holding `text`, written by zlib itself (not by the code under test).
std::string gzipMember(const std::string& text) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, text.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}
}  // namespace

TEST_CASE("OutputFile writes plain text only on commit") {
  TempDir dir;
  const auto target = dir.path / "a.sca";
  {
    npm::OutputFile out(target.string());
    out.printf("scalar \"%s\" \"%s\" %d\n", "x", "y", 42);
    CHECK_FALSE(fs::exists(target));  // still under its temporary name
    out.commit();
  }
  CHECK(slurpRaw(target) == "scalar \"x\" \"y\" 42\n");
  CHECK(std::distance(fs::directory_iterator(dir.path), {}) == 1);
}

TEST_CASE("OutputFile destroyed without commit leaves nothing") {
  TempDir dir;
  {
    npm::OutputFile out((dir.path / "b.vec").string());
    out.write("partial");
  }
  CHECK(fs::is_empty(dir.path));
}

TEST_CASE("bzip2 round trip through OutputFile and InputFile") {
  TempDir dir;
  const auto target = dir.path / "c.vec.bz2";
  std::string expected;
  {
    npm::OutputFile out(target.string());
    CHECK(out.compressed());
    for (int i = 0; i < 20000; ++i) {
      out.printf("%06d\tline %d\n", i + 1, i);
      expected += std::to_string(i) + ",";
    }
    out.commit();
  }
  CHECK(slurpRaw(target).substr(0, 3) == "BZh");
  npm::InputFile in(target.string());
  CHECK(in.compressed());
  std::string line, seen;
  while (in.getline(line)) seen += line.substr(line.rfind(' ') + 1) + ",";
  CHECK(seen == expected);
  CHECK(in.lineNumber() == 20000);
}

TEST_CASE("InputFile reads concatenated bzip2 streams") {
  TempDir dir;
  const auto one = dir.path / "1.bz2", two = dir.path / "2.bz2";
  {
    npm::OutputFile o(one.string());
    o.write("first\n");
    o.commit();
  }
  {
    npm::OutputFile o(two.string());
    o.write("second\n");
    o.commit();
  }
  const auto both = dir.path / "both.bz2";
  std::ofstream(both, std::ios::binary) << slurpRaw(one) << slurpRaw(two);
  CHECK(npm::readWholeFile(both.string()) == "first\nsecond\n");
}

TEST_CASE("InputFile reports truncated and corrupt bzip2 data") {
  TempDir dir;
  const auto good = dir.path / "g.sca.bz2";
  {
    npm::OutputFile o(good.string());
    for (int i = 0; i < 5000; ++i) o.printf("scalar \"o\" \"n%d\" %d\n", i, i * 7);
    o.commit();
  }
  const std::string raw = slurpRaw(good);
  const auto truncated = dir.path / "t.sca.bz2";
  std::ofstream(truncated, std::ios::binary) << raw.substr(0, raw.size() / 2);
  CHECK_THROWS_WITH(npm::readWholeFile(truncated.string()),
                    Catch::Contains("t.sca.bz2") && Catch::Contains("truncated"));
  std::string broken = raw;
  broken[raw.size() / 2] ^= 0x55;
  broken[raw.size() / 2 + 1] ^= 0x55;
  const auto corrupt = dir.path / "x.sca.bz2";
  std::ofstream(corrupt, std::ios::binary) << broken;
  CHECK_THROWS_AS(npm::readWholeFile(corrupt.string()), npm::FileError);
}

TEST_CASE("InputFile reads gzip, also of several members, and reports truncated or corrupt data") {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "scalar \"o\" \"n" + std::to_string(i) + "\" " + std::to_string(i * 7) + "\n";
  const std::string member = gzipMember(text);
  const auto one = dir.path / "s.sca.gz";
  std::ofstream(one, std::ios::binary) << member;
  {
    npm::InputFile in(one.string());
    CHECK(in.compressed());
    std::string line;
    REQUIRE(in.getline(line));
    CHECK(line == "scalar \"o\" \"n0\" 0");
  }
  CHECK(npm::readWholeFile(one.string()) == text);
  // As combinesummaries writes it in parallel: members one after the other, read as one text.
  const auto two = dir.path / "two.data";  // misnamed: the magic decides
  std::ofstream(two, std::ios::binary) << gzipMember("first\n") << gzipMember("second\n");
  CHECK(npm::readWholeFile(two.string()) == "first\nsecond\n");

  const auto truncated = dir.path / "t.sca.gz";
  std::ofstream(truncated, std::ios::binary) << member.substr(0, member.size() / 2);
  CHECK_THROWS_WITH(npm::readWholeFile(truncated.string()),
                    Catch::Contains("t.sca.gz") && Catch::Contains("truncated gzip data"));
  const auto noTrailer = dir.path / "n.sca.gz";  // the CRC and length missing
  std::ofstream(noTrailer, std::ios::binary) << member.substr(0, member.size() - 8);
  CHECK_THROWS_WITH(npm::readWholeFile(noTrailer.string()), Catch::Contains("truncated gzip data"));
  std::string broken = member;
  broken[broken.size() - 6] ^= 0x55;  // the CRC
  const auto corrupt = dir.path / "x.sca.gz";
  std::ofstream(corrupt, std::ios::binary) << broken;
  CHECK_THROWS_WITH(npm::readWholeFile(corrupt.string()),
                    Catch::Contains("x.sca.gz") && Catch::Contains("corrupt gzip data"));
}

TEST_CASE("OutputFile names the file when it cannot be created") {
  CHECK_THROWS_WITH(npm::OutputFile("/proc/npm-no-such-dir/x.sca"),
                    Catch::Contains("cannot create /proc/npm-no-such-dir/x.sca"));
}

TEST_CASE("anonymous OutputFile can be read back") {
  auto out = npm::OutputFile::anonymous(true);
  out.write("hello\nworld\n");
  const npm::UniqueFile f = out.takeForReading();
  char buffer[3];
  CHECK(std::fread(buffer, 1, 3, f.get()) == 3);
  CHECK(std::string(buffer, 3) == "BZh");
  std::rewind(f.get());
  npm::InputFile in(f.get(), "anon");
  std::string line;
  REQUIRE(in.getline(line));
  CHECK(line == "hello");
}

namespace {
// Independent bzip2 streams in a file: each starts with "BZh" + level digit + a block or
// end-of-stream magic.
std::size_t countStreams(const std::string& raw) {
  std::size_t n = 0;
  for (std::size_t i = raw.find("BZh9"); i != std::string::npos; i = raw.find("BZh9", i + 1)) {
    const std::string next = raw.substr(i + 4, 6);
    if (next == "\x31\x41\x59\x26\x53\x59" || next == "\x17\x72\x45\x38\x50\x90") ++n;
  }
  return n;
}
}  // namespace

TEST_CASE("OutputFile compresses in parallel into streams that read as one file") {
  TempDir dir;
  const auto target = dir.path / "big.vec.bz2";
  std::string expected = "header\n";
  {
    npm::OutputFile out(target.string());
    out.write("header\n");
    out.compressInParallel(3, 256 * 1024);
    for (int i = 0; i < 200000; ++i) {
      const std::string line = std::to_string(i) + "\t" + std::to_string(i * 7919 % 10007) + "\n";
      out.write(line);
      expected += line;
    }
    CHECK(out.bytesWritten() == expected.size());
    out.commit();
  }
  const std::string raw = slurpRaw(target);
  // The header's own stream, then one per 256 KiB chunk.
  CHECK(countStreams(raw) == 1 + (expected.size() - 7 + 256 * 1024 - 1) / (256 * 1024));
  CHECK(npm::readWholeFile(target.string()) == expected);
  // bzip2 itself reads it as one file.
  if (std::system("command -v bzip2 >/dev/null") == 0) {
    const auto plain = dir.path / "big.vec";
    REQUIRE(std::system(("bzip2 -dc " + target.string() + " > " + plain.string()).c_str()) == 0);
    CHECK(slurpRaw(plain) == expected);
  }
}

TEST_CASE("OutputFile in parallel mode with nothing written is still a bzip2 file") {
  TempDir dir;
  const auto target = dir.path / "empty.bz2";
  {
    npm::OutputFile out(target.string());
    out.compressInParallel(2);
    out.commit();
  }
  CHECK(slurpRaw(target).substr(0, 3) == "BZh");
  CHECK(npm::readWholeFile(target.string()).empty());
}

TEST_CASE("ScratchFile keeps bytes without a name, and gives them back") {
  TempDir dir;
  npm::ScratchFile scratch((dir.path / "result.vec").string());
  std::string data(3 << 20, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31);
  scratch.append(data.data(), data.size());
  scratch.append("tail", 4);
  CHECK(scratch.size() == data.size() + 4);
  CHECK(fs::is_empty(dir.path));  // nothing a killed process would leave behind
  std::string back(data.size() + 10, '\0');
  CHECK(scratch.read(0, back.data(), back.size()) == data.size() + 4);
  CHECK(back.substr(0, data.size() + 4) == data + "tail");
  char four[4];
  CHECK(scratch.read(data.size(), four, 4) == 4);
  CHECK(std::string(four, 4) == "tail");
  CHECK(scratch.read(data.size() + 4, four, 4) == 0);
  scratch.clear();
  CHECK(scratch.size() == 0);
  CHECK(scratch.read(0, four, 4) == 0);
  CHECK_THROWS_WITH(npm::ScratchFile("/proc/npm-no-such-dir/x.vec"), Catch::Contains("/proc/npm-no-such-dir"));
}
