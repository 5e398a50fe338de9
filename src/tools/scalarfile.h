// Reading scalar files for createsummary: NetPerfMeter .sca (ours and the reference's,
// including old whitespace-separated variants) and OMNeT++ scalar files (scalar,
// statistic/field, run, attr, ...), and the reference's name transformation that turns
// (object, statistic) into a table name plus aggregate columns.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/scalar_line.h"

namespace npm {
class InputFile;
}

namespace npm::tools {

// One scalar after name transformation.
struct Scalar {
  std::string table;       // e.g. "active.flow-ReceivedBitRate"
  std::string aggNames;    // e.g. "active.flow" (space-separated if several)
  std::string aggValues;   // e.g. "3"
  std::string split;       // split-off trailing " <digits>" of the statistic name, or ""
  std::uint32_t run = 0;   // number of "run" lines seen before (0 for NetPerfMeter files)
  std::uint32_t line = 0;  // line in the input file
  double value = 0.0;
  std::string object;  // as written, with ScalarFileOptions::keepNames (the long form)
  std::string name;    // statistic name as written (OMNeT++ fields: field + statistic)
};

// A scalar's side, flow and path: npm::scalarOrigin (common/scalar_line.h), the rule
// netperfmeter-lab's results.sqlite (npmlab/scalars.py) shares.
using npm::ScalarOrigin;
using npm::scalarOrigin;

// Table name and aggregates of `object` (scenario prefix already removed or not, see
// `removeScenario`) and `statistic`, as the reference computes them.
//   transformName("netPerfMeter.active.flow[3]", "Received Bit Rate", false)
//     -> table "active.flow-ReceivedBitRate", aggNames "active.flow", aggValues "3".
Scalar transformName(std::string_view object, std::string_view statistic, bool split, bool removeScenario = true);

// Error in a scalar file: message already names file and line.
class ParseError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct ScalarFileOptions {
  bool split = false;
  std::shared_ptr<const std::vector<std::string>> skip;  // table-name prefixes to drop
  bool keepNames = false;                                // fill Scalar::object and Scalar::name
};

// Parses one line (without '\n') of a scalar file, appending to `out`. Keeps the state of
// statistic blocks and run numbers between lines. Throws ParseError on a bad line.
class ScalarFileParser {
public:
  ScalarFileParser(std::string fileName, ScalarFileOptions options);
  void parseLine(std::string_view line, std::uint32_t lineNumber, std::vector<Scalar>& out);
  std::uint64_t skipped() const { return skipped_; }

private:
  void add(std::string_view object, std::string_view statistic, double value, std::uint32_t lineNumber,
           std::vector<Scalar>& out);
  [[noreturn]] void fail(std::uint32_t lineNumber, const std::string& what) const;

  std::string fileName_;
  ScalarFileOptions options_;
  std::uint32_t run_ = 0;
  bool haveStatistic_ = false;
  std::string statisticObject_, statisticName_;
  std::uint64_t skipped_ = 0;
};

// Reads a whole (plain or bzip2) scalar file. Throws FileError / ParseError, also for a file
// without any scalar (empty, or only run/attr lines; not one whose scalars --skip= dropped).
std::vector<Scalar> readScalarFile(const std::string& path, const ScalarFileOptions& options);
// The same from an open file (its name() in the messages).
std::vector<Scalar> readScalarFile(InputFile& in, const ScalarFileOptions& options);

// Next word of an OMNeT++-style line: "quoted with \" escapes" or up to whitespace.
// Returns false if there is no word or a quote is not closed.
bool nextScalarWord(std::string_view& rest, std::string& word);

}  // namespace npm::tools
