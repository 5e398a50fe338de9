#include "tools/scalarfile.h"

#include "common/fileio.h"
#include "common/scalar_line.h"
#include "common/text.h"
#include "tools/toolcommon.h"

namespace npm::tools {

namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }

bool allDigits(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (!isDigit(c)) return false;
  }
  return true;
}

// Decimal digits without leading zeros ("007" -> "7", "000" -> "0"), as %lu of atol().
std::string_view stripZeros(std::string_view digits) {
  std::size_t i = 0;
  while (i + 1 < digits.size() && digits[i] == '0') ++i;
  return digits.substr(i);
}

std::string trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

bool nextScalarWord(std::string_view& rest, std::string& word) { return nextQuotedWord(rest, word); }

Scalar transformName(std::string_view objectIn, std::string_view statisticIn, bool split, bool removeScenario) {
  Scalar s;
  // 1. Drop the scenario name (everything up to the first '.').
  if (removeScenario) {
    const auto dot = objectIn.find('.');
    if (dot != std::string_view::npos) objectIn.remove_prefix(dot + 1);
  }
  // Split a trailing " <digits>" off the statistic name.
  if (split) {
    const auto space = statisticIn.rfind(' ');
    if (space != std::string_view::npos && allDigits(statisticIn.substr(space + 1))) {
      s.split = std::string(statisticIn.substr(space + 1));
      statisticIn = statisticIn.substr(0, space);
    }
  }
  // 2. Statistic: no spaces, '/' -> ':'. Object: no brackets.
  std::string statistic;
  statistic.reserve(statisticIn.size());
  for (const char c : statisticIn) {
    if (c == ' ') continue;
    statistic += (c == '/') ? ':' : c;
  }
  std::string object;
  object.reserve(objectIn.size());
  for (const char c : objectIn) {
    if (c == '[' || c == ']') continue;
    object += (c == '/') ? ':' : c;  // never a path separator in a table name
  }
  // 3. Segments ending in digits become aggregates named by the dotted prefix.
  std::string prefix;
  std::size_t begin = 0;
  for (;;) {
    const auto dot = object.find('.', begin);
    const std::string_view segment =
        std::string_view(object).substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    std::size_t cut = segment.size();
    while (cut > 0 && isDigit(segment[cut - 1])) --cut;
    const std::string_view base = segment.substr(0, cut);
    if (cut < segment.size()) {
      if (!s.aggNames.empty()) s.aggNames += ' ';
      if (!prefix.empty()) {
        s.aggNames += prefix;
        s.aggNames += '.';
      }
      s.aggNames += base;
      if (!s.aggValues.empty()) s.aggValues += ' ';
      s.aggValues += stripZeros(segment.substr(cut));
    }
    if (!prefix.empty()) prefix += '.';
    prefix += base;
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  // 4. A "#<digits>" suffix of the statistic is one more aggregate.
  const auto hash = statistic.find('#');
  if (hash != std::string::npos && allDigits(std::string_view(statistic).substr(hash + 1))) {
    const std::string number = statistic.substr(hash + 1);
    statistic.resize(hash);
    if (!s.aggNames.empty()) s.aggNames += ' ';
    s.aggNames += statistic;
    if (!s.aggValues.empty()) s.aggValues += ' ';
    s.aggValues += number;
  }
  s.table = prefix + "-" + statistic;
  return s;
}

ScalarFileParser::ScalarFileParser(std::string fileName, ScalarFileOptions options)
    : fileName_(std::move(fileName)), options_(std::move(options)) {}

void ScalarFileParser::fail(std::uint32_t lineNumber, const std::string& what) const {
  throw ParseError(fileName_ + ":" + std::to_string(lineNumber) + ": " + what);
}

void ScalarFileParser::add(std::string_view object, std::string_view statistic, double value, std::uint32_t lineNumber,
                           std::vector<Scalar>& out) {
  Scalar s = transformName(object, statistic, options_.split);
  if (options_.skip) {
    for (const auto& prefix : *options_.skip) {
      if (s.table.compare(0, prefix.size(), prefix) == 0) {
        ++skipped_;
        return;
      }
    }
  }
  s.run = run_;
  s.line = lineNumber;
  s.value = value;
  if (options_.keepNames) {
    s.object = std::string(object);
    s.name = std::string(statistic);
  }
  out.push_back(std::move(s));
}

void ScalarFileParser::parseLine(std::string_view line, std::uint32_t lineNumber, std::vector<Scalar>& out) {
  // Leading whitespace is not part of any keyword.
  std::size_t first = 0;
  while (first < line.size() && (line[first] == ' ' || line[first] == '\t')) ++first;
  line.remove_prefix(first);
  if (line.empty() || line[0] == '#') return;

  std::optional<ScalarLine> scalar;
  try {
    scalar = scalarLine(line);
  } catch (const ScalarLineError& e) {
    fail(lineNumber, e.what());
  }
  if (scalar) {
    double value;
    if (!parseNumber(scalar->value, value, true)) {
      fail(lineNumber, "numeric value expected, got \"" + scalar->value + "\"");
    }
    add(scalar->object, scalar->name, value, lineNumber, out);
    return;
  }
  std::string name;
  if (startsWithKeyword(line, "statistic")) {
    std::string_view rest = line.substr(9);
    if (!nextScalarWord(rest, statisticObject_)) {
      fail(lineNumber, "object name expected after \"statistic\"");
    }
    if (!nextScalarWord(rest, statisticName_)) {
      fail(lineNumber, "statistic name expected after the object");
    }
    haveStatistic_ = true;
    return;
  }
  if (startsWithKeyword(line, "field")) {
    if (!haveStatistic_) fail(lineNumber, "\"field\" without a preceding \"statistic\"");
    std::string_view rest = line.substr(5);
    if (!nextScalarWord(rest, name)) fail(lineNumber, "field name expected");
    double value;
    if (!parseNumber(rest, value, true)) {
      fail(lineNumber, "numeric value expected, got \"" + trimmed(rest) + "\"");
    }
    if (name == "stddev") {
      name = "StdDev";
    } else if (name == "sqrsum") {
      name = "SqrSum";
    } else if (!name.empty() && name[0] >= 'a' && name[0] <= 'z') {
      name[0] = static_cast<char>(name[0] - 'a' + 'A');
    }
    add(statisticObject_, name + statisticName_, value, lineNumber, out);
    return;
  }
  if (line == "run" || startsWithKeyword(line, "run")) {
    ++run_;
    haveStatistic_ = false;
    return;
  }
  static constexpr std::string_view kIgnored[] = {"version", "attr",   "bin",     "par",
                                                  "param",   "config", "itervar", "file"};
  for (const auto keyword : kIgnored) {
    if (line == keyword || startsWithKeyword(line, keyword)) return;
  }
  std::string shown(line.substr(0, 80));
  for (auto& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  fail(lineNumber, "not a scalar file line: \"" + shown + (line.size() > 80 ? "...\"" : "\""));
}

std::vector<Scalar> readScalarFile(const std::string& path, const ScalarFileOptions& options) {
  InputFile in(path);
  return readScalarFile(in, options);
}

std::vector<Scalar> readScalarFile(InputFile& in, const ScalarFileOptions& options) {
  const std::string& path = in.name();
  ScalarFileParser parser(path, options);
  std::vector<Scalar> out;
  std::string line;
  try {
    while (in.getline(line)) {
      if (auto problem = notUtf8(line)) {
        throw ParseError(path + ":" + std::to_string(in.lineNumber()) + ": " + *problem + ": a garbled file?");
      }
      parser.parseLine(line, static_cast<std::uint32_t>(in.lineNumber()), out);
    }
  } catch (const FileError& e) {
    // Say how far the file was readable.
    if (in.lineNumber() == 0) throw;
    throw FileError(std::string(e.what()) + " (after line " + std::to_string(in.lineNumber()) + ")");
  }
  // A NetPerfMeter run always writes scalars: a file without any lost its run's results (a
  // full disk, a killed run), and a table without that run would look complete.
  const char* const what = " (rerun it, leave it out, or skip such files with -r)";
  if (in.lineNumber() == 0) {
    throw ParseError(path + ": empty file, no scalars" + what);
  }
  if (out.empty() && parser.skipped() == 0) {
    const std::uint64_t lines = in.lineNumber();
    throw ParseError(path + ": no scalars in its " + std::to_string(lines) + (lines == 1 ? " line" : " lines") + what);
  }
  return out;
}

}  // namespace npm::tools
