// Tables as combinesummaries reads them: NetPerfMeter vector files and createsummary's tables
// (a header line, then rows), each input's rows prefixed with its values into one table. Every
// error is one line that names the file and line (FileError).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "common/fileio.h"
#include "common/text.h"
#include "tools/toolcommon.h"

namespace npm::tools {

struct TableInput {
  std::string path;    // for messages
  std::string values;  // put in front of each of its rows
};

// The rows of the output table: the first input's header (with the variable names in front),
// then every input's rows with its values in front; later headers must match the first.
class Table {
public:
  Table(const OutputOptions& opt, const std::string& varNames) : opt_(opt), varNames_(varNames) {}

  // Line `number` (from 1) of `input`.
  void line(const TableInput& input, std::string_view l, std::uint64_t number) {
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.find('\0') != std::string_view::npos) {
      throw FileError(input.path + ":" + std::to_string(number) + ": binary data (a NUL byte), not a table");
    }
    // (the tables' readers, R and Python, take UTF-8 only)
    if (auto problem = notUtf8(l)) {
      throw FileError(input.path + ":" + std::to_string(number) + ": " + *problem + ": a garbled file?");
    }
    if (number == 1) {
      header(input, l);
      return;
    }
    if (opt_.lineNumbers) {
      char digits[32];
      std::snprintf(digits, sizeof(digits), "%06llu", static_cast<unsigned long long>(rows_ + 1));
      text_ += digits;
      text_ += opt_.separator;
    }
    text_ += input.values;
    text_ += opt_.separator;
    text_ += l;
    text_ += '\n';
    ++rows_;
    ++lines_;
  }
  std::string& text() { return text_; }  // what is not written yet
  std::uint64_t lines() const { return lines_; }

private:
  void header(const TableInput& input, std::string_view l) {
    if (!firstHeaderFile_.empty()) {
      if (collapseBlanks(l) != firstHeader_) {
        throw FileError(input.path + ":1: header \"" + std::string(l) + "\" differs from the header of " +
                        firstHeaderFile_);
      }
      return;
    }
    firstHeader_ = collapseBlanks(l);
    firstHeaderFile_ = input.path;
    text_ += varNames_;
    text_ += opt_.separator;
    if (opt_.lineNumbers) {
      text_ += "SubLineNo";
      text_ += opt_.separator;
    }
    text_ += l;
    text_ += '\n';
    ++lines_;
  }

  const OutputOptions& opt_;
  const std::string& varNames_;
  std::string firstHeader_, firstHeaderFile_, text_;
  std::uint64_t rows_ = 0, lines_ = 0;
};

// The lines of one input into `table`, from its bytes as they come (a line may span pieces).
class TableLines {
public:
  TableLines(const TableInput& input, Table& table) : input_(input), table_(table) {}
  void piece(std::string_view bytes);  // throws FileError
  // The input's end: an empty input, or one whose last line has no newline, is an error.
  void end();

private:
  const TableInput& input_;
  Table& table_;
  std::string carry_;
  std::uint64_t number_ = 0;
};

}  // namespace npm::tools
