// The one reading of a scalar file's lines in C++, for every program that reads them (the
// active reading its passive's upload, createsummary and the other tools): the fields of a
// `scalar "object" "name" value` line, and where an object belongs (its side, flow and path).
// netperfmeter-lab (npmlab/scalars.py) and the R package read them by the same rules.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace npm {

struct ScalarLine {
  std::string object, name;
  std::string value;  // the value as written (blanks and a trailing CR removed), not yet a number
};

// A line starting with the keyword `scalar` but lacking its object, name or value; what() says
// which, without file or line (the caller knows those).
class ScalarLineError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// True if `line` (blanks before the keyword allowed) begins with the word `keyword` followed by
// a blank.
bool startsWithKeyword(std::string_view line, std::string_view keyword);

// The fields of a `scalar` line; std::nullopt for any other line (blank, a comment, another
// keyword of an OMNeT++ file). Throws ScalarLineError on a `scalar` line without its parts.
std::optional<ScalarLine> scalarLine(std::string_view line);

// Where a scalar belongs, from its object: "netPerfMeter.active.flow[3].path[1]" -> side
// "active", flow 3, path 1; "netPerfMeter.passive.flow[3].connection" -> flow 3, connection;
// "netPerfMeter.passive.total" -> side "passive", no flow or path; an object whose second part is
// neither side (OMNeT++) has none.
struct ScalarOrigin {
  std::string side;                   // "active", "passive" or "" (none)
  std::optional<std::uint64_t> flow;  // "flow[N]" right after the side (N: 1 to 18 digits)
  std::optional<std::uint64_t> path;  // "path[N]" right after the flow
  bool connection = false;            // "connection" right after the flow
};
ScalarOrigin scalarOrigin(std::string_view object);

}  // namespace npm
