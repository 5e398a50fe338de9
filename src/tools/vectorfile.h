// OMNeT++ version-2 vector files (extractvectors): the vectors whose names start with one of the
// prefixes (all without prefixes) into one table, Time Event Object Vector Split Value. Every
// error is one line that names the file and line (FileError).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/fileio.h"
#include "tools/toolcommon.h"

namespace npm::tools {

struct VectorPrefix {
  std::string text;
  bool split;          // written !prefix: split the names at their last space into Split
  bool found = false;  // set when a vector matched
};

struct VectorTableSettings {
  OutputOptions opt;  // separator, line numbers, quiet (no "Adding vector" lines on stdout)
  bool splitAll = false;
  std::string inputName;  // for messages
  std::vector<VectorPrefix> prefixes;
};

// Thrown by run() when interrupted() became true (installInterruptHandler()).
struct Interrupted {};

class VectorExtractor {
public:
  // The table's text goes to `write` in pieces (an OutputFile's write()).
  using Sink = std::function<void(std::string_view)>;
  VectorExtractor(VectorTableSettings& settings, InputFile& in, Sink write);
  ~VectorExtractor();
  // Reads all of `in` and writes the table. Throws FileError.
  void run();
  std::uint64_t rows() const;

private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace npm::tools
