#include "tools/tablefile.h"

#include "common/fileio.h"

namespace npm::tools {

void TableLines::piece(std::string_view rest) {
  for (;;) {
    const auto nl = rest.find('\n');
    if (nl == std::string_view::npos) {
      carry_.append(rest);
      if (carry_.size() > InputFile::kMaxLineLength) {
        throw FileError(input_.path + ":" + std::to_string(number_ + 1) + ": a line longer than " +
                        std::to_string(InputFile::kMaxLineLength >> 20) + " MiB, not a table");
      }
      return;
    }
    if (!carry_.empty()) {
      carry_.append(rest.substr(0, nl));
      table_.line(input_, carry_, ++number_);
      carry_.clear();
    } else {
      table_.line(input_, rest.substr(0, nl), ++number_);
    }
    rest.remove_prefix(nl + 1);
  }
}

void TableLines::end() {
  if (number_ == 0 && carry_.empty()) throw FileError(input_.path + ": empty file (no header line)");
  // Every writer ends its last line; one cut off is a file cut off (a run killed while writing
  // it, a full disk), whose last row would go into the table as if it were whole.
  if (!carry_.empty()) {
    throw FileError(input_.path + ":" + std::to_string(number_ + 1) +
                    ": the last line has no newline: a truncated file? (\"" +
                    printableText(std::string_view(carry_).substr(0, 40)) + "\")");
  }
}

}  // namespace npm::tools
