#include <catch2/catch.hpp>

#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/fileio.h"
#include "tools/scalarfile.h"
#include "tools/toolcommon.h"

using namespace npm::tools;
using npm::compressionForName;
using npm::compressText;
using npm::gzCompress;
namespace fs = std::filesystem;

TEST_CASE("transformName follows the reference's rules") {
  auto s = transformName("netPerfMeter.active.flow[3]", "Received Bit Rate", false);
  CHECK(s.table == "active.flow-ReceivedBitRate");
  CHECK(s.aggNames == "active.flow");
  CHECK(s.aggValues == "3");
  CHECK(s.split.empty());

  s = transformName("netPerfMeter.active.total", "First Statistics Event", false);
  CHECK(s.table == "active.total-FirstStatisticsEvent");
  CHECK(s.aggNames.empty());
  CHECK(s.aggValues.empty());

  // Nested indices, '#' suffix, '/' -> ':' and leading zeros as atol() did.
  s = transformName("scenario.tsb[0].nameServerArray[007].poolElement", "Value/s#12", false);
  CHECK(s.table == "tsb.nameServerArray.poolElement-Value:s");
  CHECK(s.aggNames == "tsb tsb.nameServerArray Value:s");
  CHECK(s.aggValues == "0 7 12");

  // '#' followed by a non-number is part of the name.
  s = transformName("a.b", "x#y", false);
  CHECK(s.table == "b-x#y");
  CHECK(s.aggNames.empty());

  // Split: trailing " <digits>" only, and only when asked for.
  s = transformName("net.q", "queue length 12", true);
  CHECK(s.table == "q-queuelength");
  CHECK(s.split == "12");
  s = transformName("net.q", "packets sent", true);
  CHECK(s.table == "q-packetssent");
  CHECK(s.split.empty());
  s = transformName("net.q", "queue length 12", false);
  CHECK(s.table == "q-queuelength12");

  // No dot: nothing to drop; a '/' in an object never becomes a path separator.
  s = transformName("../../etc/x", "y", false);
  CHECK(s.table.find('/') == std::string::npos);
}

TEST_CASE("ScalarFileParser handles keywords, runs and errors") {
  ScalarFileParser p("f.sca", {});
  std::vector<Scalar> out;
  p.parseLine("version 2", 1, out);
  p.parseLine("run x", 2, out);
  p.parseLine("  # comment", 3, out);
  p.parseLine("scalar \"net.a[1]\" \"with \\\"quote\\\"\" 1e3", 4, out);
  p.parseLine("itervar n 10", 5, out);
  p.parseLine("statistic net.a \"s\"", 6, out);
  p.parseLine("field sqrsum 2", 7, out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].table == "a-with\"quote\"");
  CHECK(out[0].value == 1000.0);
  CHECK(out[0].run == 1);
  CHECK(out[0].line == 4);
  CHECK(out[1].table == "a-SqrSums");
  CHECK_THROWS_WITH(p.parseLine("scalar a b c", 9, out), "f.sca:9: numeric value expected, got \"c\"");
  CHECK_THROWS_WITH(p.parseLine("bogus", 10, out), Catch::Contains("f.sca:10: not a scalar"));
  ScalarFileParser q("g.sca", {});
  CHECK_THROWS_WITH(q.parseLine("field count 1", 3, out), "g.sca:3: \"field\" without a preceding \"statistic\"");
}

TEST_CASE("skip list drops tables by prefix") {
  ScalarFileOptions o;
  o.skip = std::make_shared<std::vector<std::string>>(std::vector<std::string>{"active.CPU-"});
  ScalarFileParser p("f", o);
  std::vector<Scalar> out;
  p.parseLine("scalar \"n.active.CPU[1]\" \"Idle\" 1", 1, out);
  p.parseLine("scalar \"n.active.totalCPU\" \"Idle\" 1", 2, out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].table == "active.totalCPU-Idle");
  CHECK(p.skipped() == 1);
}

TEST_CASE("splitFields and stripOuterQuotes") {
  CHECK(splitFields("a  b\tc").value() == std::vector<std::string>{"a", "b", "c"});
  CHECK(splitFields("bz2 \"mixed 2\"").value() == std::vector<std::string>{"bz2", "mixed 2"});
  CHECK(splitFields("a\\ b c").value() == std::vector<std::string>{"a b", "c"});
  CHECK(splitFields("").value().empty());
  CHECK_FALSE(splitFields("a \"b").has_value());
  CHECK_FALSE(splitFields("a\\").has_value());
  CHECK(stripOuterQuotes("\"a b\"") == "a b");
  CHECK(stripOuterQuotes("\"a\" \"b\"") == "\"a\" \"b\"");
  CHECK(stripOuterQuotes("a b") == "a b");
}

TEST_CASE("numericAwareLess sorts numbers as numbers") {
  CHECK(numericAwareLess("2", "10"));
  CHECK_FALSE(numericAwareLess("10", "2"));
  CHECK(numericAwareLess("tcp 9", "tcp 10"));
  CHECK(numericAwareLess("0 2", "0 10"));
  CHECK(numericAwareLess("1.5", "1e1"));
  CHECK(numericAwareLess("-1", "0"));
  CHECK(numericAwareLess("a", "b"));
  CHECK(numericAwareLess("5", "a"));                                    // numbers before words
  CHECK(numericAwareLess("a", "a b"));                                  // fewer fields first
  CHECK(numericAwareLess("1", "1.0") != numericAwareLess("1.0", "1"));  // total order
  CHECK_FALSE(numericAwareLess("x 1", "x 1"));
}

TEST_CASE("csvField and appendFixed6") {
  CHECK(csvField("12.5", ",") == "12.5");
  CHECK(csvField("tcp", ",") == "\"tcp\"");
  CHECK(csvField("say \"hi\"", ",") == "\"say \"\"hi\"\"\"");
  CHECK(csvField("3", ",", true) == "\"3\"");
  std::string s;
  appendFixed6(s, 354154226.237036);
  s += ' ';
  appendFixed6(s, 1795272048342367.0);
  s += ' ';
  appendFixed6(s, -1.25);
  CHECK(s == "354154226.237036 1795272048342367.000000 -1.250000");
}

namespace {
struct Argv {
  std::vector<std::string> storage;
  std::vector<char*> argv;
  explicit Argv(std::initializer_list<const char*> args) {
    for (auto a : args) storage.emplace_back(a);
    for (auto& s : storage) argv.push_back(s.data());
  }
};
const std::vector<OptionSpec> kSpecs = {{"batch", 'b', false, 1},  {"compress", 'c', true, 2},
                                        {"quiet", 'q', false, 3},  {"split", 'p', false, 4},
                                        {"splitall", 0, false, 4}, {"separator", 's', true, 5}};
}  // namespace

TEST_CASE("parseCommandLine accepts the reference's spellings") {
  std::vector<ParsedOption> o;
  std::vector<std::string> pos;
  Argv a{"prog", "names", "-batch", "--compress=3", "-c", "4", "-c5", "-bq", "-splitall", "--sep", ";", "--", "-x"};
  parseCommandLine(static_cast<int>(a.argv.size()), a.argv.data(), kSpecs, o, pos);
  REQUIRE(o.size() == 8);
  CHECK(o[0].id == 1);
  CHECK((o[1].id == 2 && o[1].value == "3"));
  CHECK(o[2].value == "4");
  CHECK(o[3].value == "5");
  CHECK((o[4].id == 1 && o[5].id == 3));
  CHECK(o[6].id == 4);
  CHECK((o[7].id == 5 && o[7].value == ";"));
  CHECK(pos == std::vector<std::string>{"names", "-x"});

  Argv bad{"prog", "-t"};
  o.clear();
  CHECK_THROWS_AS(parseCommandLine(2, bad.argv.data(), kSpecs, o, pos), UsageError);
  Argv ambiguous{"prog", "--s"};  // separator, split, splitall
  CHECK_THROWS_AS(parseCommandLine(2, ambiguous.argv.data(), kSpecs, o, pos), UsageError);
  Argv missing{"prog", "-c"};
  CHECK_THROWS_AS(parseCommandLine(2, missing.argv.data(), kSpecs, o, pos), UsageError);
}

TEST_CASE("an abbreviation that begins one option's name and all others' selects that one") {
  const std::vector<OptionSpec> specs = {{"compress", 'c', true, 1}, {"compression", 0, true, 2}, {"csv", 0, false, 3}};
  std::vector<ParsedOption> o;
  std::vector<std::string> pos;
  Argv a{"prog", "-comp", "9", "--compr=8", "--compressi", "gzip", "--compression=none"};
  parseCommandLine(static_cast<int>(a.argv.size()), a.argv.data(), specs, o, pos);
  REQUIRE(o.size() == 4);
  CHECK((o[0].id == 1 && o[0].value == "9"));
  CHECK((o[1].id == 1 && o[1].value == "8"));
  CHECK((o[2].id == 2 && o[2].value == "gzip"));
  CHECK((o[3].id == 2 && o[3].value == "none"));
  Argv ambiguous{"prog", "--c"};  // compress, compression, csv
  CHECK_THROWS_AS(parseCommandLine(2, ambiguous.argv.data(), specs, o, pos), UsageError);
}

TEST_CASE("OutputFile on the tools' pool writes concatenated bzip2 streams that read back whole") {
  char templ[] = "/tmp/npm-tools-unit-XXXXXX";
  const fs::path dir = ::mkdtemp(templ);
  std::string expected;
  {
    ThreadPool pool(2);
    npm::OutputFile out((dir / "big.data.bz2").string(), Compression::kBzip2, 9);
    out.compressInParallel(pool);
    for (int i = 0; i < 200000; ++i) {
      const std::string line = std::to_string(i) + "\tsome text to make it longer\n";
      expected += line;
      out.write(line);
    }
    out.commit();
    CHECK(out.bytesWritten() == expected.size());
  }
  CHECK(npm::readWholeFile((dir / "big.data.bz2").string()) == expected);
  {
    npm::OutputFile out((dir / "empty.bz2").string(), Compression::kBzip2, 9);
    out.commit();
  }
  CHECK(npm::readWholeFile((dir / "empty.bz2").string()).empty());
  fs::remove_all(dir);
}

namespace {
// Decompresses a gzip file with zlib; `members` = number of gzip members in it.
std::string gunzip(const std::string& data, int& members) {
  std::string out;
  members = 0;
  std::size_t at = 0;
  while (at < data.size()) {
    z_stream z{};
    REQUIRE(inflateInit2(&z, 16 + 15) == Z_OK);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + at));
    z.avail_in = static_cast<uInt>(data.size() - at);
    int rc = Z_OK;
    char buffer[65536];
    while (rc == Z_OK) {
      z.next_out = reinterpret_cast<Bytef*>(buffer);
      z.avail_out = sizeof(buffer);
      rc = inflate(&z, Z_NO_FLUSH);
      out.append(buffer, sizeof(buffer) - z.avail_out);
    }
    REQUIRE(rc == Z_STREAM_END);
    at = data.size() - z.avail_in;
    inflateEnd(&z);
    ++members;
  }
  return out;
}
}  // namespace

TEST_CASE("gzip output is one member that zlib reads back whole") {
  char templ[] = "/tmp/npm-tools-unit-XXXXXX";
  const fs::path dir = ::mkdtemp(templ);
  std::string expected;
  for (int i = 0; i < 200000; ++i) {
    expected += std::to_string(i) + "\tsome text to make it longer\n";
  }
  int members = 0;
  ThreadPool threads(3);
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &threads}) {
    const std::string path = (dir / "big.data.gz").string();
    {
      npm::OutputFile out(path, Compression::kGzip, 6);
      if (pool != nullptr) out.compressInParallel(*pool);
      for (std::size_t at = 0; at < expected.size(); at += 100000) {
        out.write(std::string_view(expected).substr(at, 100000));
      }
      out.commit();
      CHECK(out.bytesWritten() == expected.size());
      CHECK(out.bytesStored() == fs::file_size(path));
    }
    std::ifstream in(path, std::ios::binary);
    const std::string data{std::istreambuf_iterator<char>(in), {}};
    CHECK(gunzip(data, members) == expected);
    CHECK(members == 1);
    CHECK(data.substr(0, 3) == std::string("\x1f\x8b\x08", 3));
    CHECK(npm::readWholeFile(path) == expected);  // and InputFile reads it back
  }
  std::string empty;
  {
    npm::OutputFile out((dir / "empty.gz").string(), Compression::kGzip, 9);
    out.commit();
    std::ifstream in(dir / "empty.gz", std::ios::binary);
    empty.assign(std::istreambuf_iterator<char>(in), {});
  }
  CHECK(gunzip(empty, members).empty());
  CHECK(members == 1);
  CHECK(gunzip(gzCompress("a,b\n1,2\n", 9), members) == "a,b\n1,2\n");
  CHECK(gunzip(compressText(expected, Compression::kGzip, 1), members) == expected);
  CHECK(compressText("x", Compression::kNone, 9) == "x");
  CHECK(empty.size() > 18);
  fs::remove_all(dir);
}

TEST_CASE("compression names and suffixes") {
  CHECK(parseCompression("gzip") == Compression::kGzip);
  CHECK(parseCompression("bzip2") == Compression::kBzip2);
  CHECK(parseCompression("none") == Compression::kNone);
  CHECK_THROWS_AS(parseCompression("zstd"), UsageError);
  CHECK_THROWS_AS(parseCompression("GZIP"), UsageError);
  CHECK(compressionForName("t.csv.gz") == Compression::kGzip);
  CHECK(compressionForName("t.csv.GZ") == Compression::kGzip);
  CHECK(compressionForName("t.data.bz2") == Compression::kBzip2);
  CHECK(compressionForName("t.csv") == Compression::kNone);
  CHECK(compressionForName("gz") == Compression::kNone);
  CHECK(std::string(compressionSuffix(Compression::kGzip)) == ".gz");
  CHECK(std::string(compressionName(Compression::kNone)) == "none");
}

TEST_CASE("numericAwareLess is a strict total order on a mixed sample") {
  const std::vector<std::string> sample = {"",
                                           "1",
                                           "1.0",
                                           "01",
                                           "2",
                                           "10",
                                           "-3",
                                           "a",
                                           "b",
                                           "a 1",
                                           "a 10",
                                           "a 2",
                                           "\"\" x",
                                           "\"\"",
                                           "inf",
                                           "1e3",
                                           "x \"big frame\"",
                                           "x big",
                                           "tcp 9",
                                           "tcp 10",
                                           "udp 1"};
  for (const auto& a : sample) {
    CHECK_FALSE(numericAwareLess(a, a));
    for (const auto& b : sample) {
      if (a != b) CHECK(numericAwareLess(a, b) != numericAwareLess(b, a));
      for (const auto& c : sample) {
        if (numericAwareLess(a, b) && numericAwareLess(b, c)) CHECK(numericAwareLess(a, c));
      }
    }
  }
}

TEST_CASE("numbers: nan only where OMNeT++ writes it") {
  double v = 0;
  CHECK(parseNumber(" +1.5e3 ", v));
  CHECK(v == 1500.0);
  CHECK_FALSE(parseNumber("12abc", v));
  CHECK_FALSE(parseNumber("nan", v));  // never a number when ordering fields
  CHECK(parseNumber("nan", v, true));
  ScalarFileParser p("r.sca", {});
  std::vector<Scalar> out;
  p.parseLine("statistic net.a \"empty\"", 1, out);
  p.parseLine("field stddev nan", 2, out);  // OMNeT++ for a statistic without samples
  REQUIRE(out.size() == 1);
  CHECK(std::isnan(out[0].value));
  std::string s;
  appendFixed6(s, out[0].value);
  CHECK(s.find("nan") != std::string::npos);
}

TEST_CASE("shared output options") {
  OutputOptions o;
  CHECK(applyOutputOption(ParsedOption{kOptCompress, "0", "-c"}, o, 0));
  CHECK(o.level == 0);
  CHECK_THROWS_AS(applyOutputOption(ParsedOption{kOptCompress, "0", "-c"}, o, 1), UsageError);
  CHECK(applyOutputOption(ParsedOption{kOptSeparator, ";", "-s"}, o, 1));
  CHECK((o.separator == ";" && o.separatorGiven));
  CHECK_FALSE(applyOutputOption(ParsedOption{1, "", "-x"}, o, 1));
  CHECK(compressionForName("a.data.BZ2") == Compression::kBzip2);
  CHECK(compressionForName("a.bz2.data") == Compression::kNone);
}

TEST_CASE("invalidUtf8At finds the first byte that is not well-formed UTF-8") {
  using npm::tools::invalidUtf8At;
  constexpr auto none = std::string_view::npos;
  CHECK(invalidUtf8At("") == none);
  CHECK(invalidUtf8At("plain ASCII 1.0") == none);
  CHECK(invalidUtf8At("\xc3\xa4 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf") == none);  // ä € 😀 U+10FFFF
  CHECK(invalidUtf8At("ab\xff") == 2);
  CHECK(invalidUtf8At("a\xc0\x80") == 1);         // overlong NUL
  CHECK(invalidUtf8At("\xe0\x80\xaf") == 0);      // overlong '/'
  CHECK(invalidUtf8At("x\xed\xa0\x80") == 1);     // surrogate U+D800
  CHECK(invalidUtf8At("\xf4\x90\x80\x80") == 0);  // above U+10FFFF
  CHECK(invalidUtf8At("ok \xe2\x82") == 3);       // cut off at the end
  CHECK(invalidUtf8At("\xe2\x28\xa1") == 0);      // bad continuation
  CHECK(npm::tools::printableText("a\xff\tb") == "a\\xff\\x09b");
  CHECK(npm::tools::notUtf8("fine") == std::nullopt);
  CHECK(npm::tools::notUtf8("1 2 \xff").value() == "not UTF-8 text at column 5 (\"1 2 \\xff\")");
}
