// The rows of a scalar file (object, name, value), computed once from a measurement's result:
// the .sca writer prints them and the JSON report takes the same printed values, so the two
// cannot disagree. Also the reverse: the rows of a scalar file's text (the passive's upload).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace npm::measure {

struct MeasurementResult;

struct ScalarRow {
  std::string object;   // "netPerfMeter.active.flow[0]"
  std::string name;     // "Transmitted Bytes"
  std::string value;    // as printed: "%llu" counts, "%1.6f" rates and means, "%1.3f" CPU percentages
  bool aligned = true;  // the name padded to a column (the CPU rows are not, as in the reference)
};

// The rows of one side's scalar file ("active" or "passive"), in file order.
std::vector<ScalarRow> scalarRows(std::string_view role, const MeasurementResult& result);

// One line of the scalar file, with its '\n'.
std::string formatScalarRow(const ScalarRow& row);

// The rows of a scalar file's text (lines `scalar "object" "name" value`); other lines
// (comments, blank, OMNeT++ headers) are skipped. Throws std::runtime_error on a broken line.
std::vector<ScalarRow> parseScalarRows(std::string_view text);

}  // namespace npm::measure
