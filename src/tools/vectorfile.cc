#include "tools/vectorfile.h"

#include <cstdio>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "common/numbers.h"
#include "tools/scalarfile.h"

namespace npm::tools {

namespace {

struct Vector {
  std::string object, name, split;
  std::string columns;  // e.g. "ETV"
};

// A decimal vector id or event number (any number of leading zeros, as the reference).
bool parseUnsigned(std::string_view s, std::uint64_t& v) {
  const auto parsed = npm::parseUnsigned(s, UINT64_MAX, SIZE_MAX);
  if (parsed) v = *parsed;
  return parsed.has_value();
}

bool nextToken(std::string_view& rest, std::string_view& token) {
  std::size_t i = 0;
  while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\t')) ++i;
  std::size_t j = i;
  while (j < rest.size() && rest[j] != ' ' && rest[j] != '\t') ++j;
  token = rest.substr(i, j - i);
  rest.remove_prefix(j);
  return !token.empty();
}

}  // namespace

class VectorExtractor::Impl {
  using Sink = VectorExtractor::Sink;

public:
  Impl(VectorTableSettings& a, InputFile& in, Sink write) : a_(a), in_(in), write_(std::move(write)) {
    const std::string& sep = a_.opt.separator;
    text_ = "Time" + sep + "Event" + sep + "Object" + sep + "Vector" + sep + "Split" + sep + "Value\n";
  }

  void run() {
    std::string line;
    if (!in_.getline(line)) fail("empty file, expected \"version 2\" (a run that lost its results?)");
    text(line);
    version(line);
    while (in_.getline(line)) {
      text(line);
      std::string_view rest(line), first;
      if (!nextToken(rest, first) || first[0] == '#') continue;
      if (first[0] >= '0' && first[0] <= '9') {
        data(first, rest);
      } else if (first == "vector") {
        declaration(rest);
      } else if (first != "run" && first != "attr" && first != "param" && first != "itervar" && first != "config" &&
                 first != "file" && first != "version") {
        fail("not a vector file line: \"" + printableText(line.substr(0, 80)) + "\"");
      }
    }
    if (interrupted()) throw Interrupted();
    if (declared_.empty()) {
      throw FileError(a_.inputName + ": no vector declared in its " + std::to_string(in_.lineNumber()) +
                      " line(s) (a run that lost its results?)");
    }
    write_(text_);
  }
  std::uint64_t rows() const { return rows_; }

private:
  [[noreturn]] void fail(const std::string& what) {
    const std::uint64_t n = in_.lineNumber();
    throw FileError(a_.inputName + (n > 0 ? ":" + std::to_string(n) : "") + ": " + what);
  }

  // A line is text: no NUL, UTF-8 (what the table's readers expect), or the file is garbled.
  void text(const std::string& line) {
    if (line.find('\0') != std::string::npos) fail("binary data (a NUL byte), not a vector file");
    if (auto problem = notUtf8(line)) fail(*problem + ": a garbled file?");
  }

  void version(const std::string& line) {
    std::string_view rest(line), keyword, number;
    std::uint64_t version = 0;
    if (!nextToken(rest, keyword) || keyword != "version" || !nextToken(rest, number) ||
        !parseUnsigned(number, version)) {
      fail("missing \"version\" line: not an OMNeT++ vector file");
    }
    if (version != 2) fail("vector file version " + std::to_string(version) + " is not supported (expected 2)");
  }

  // <id> <columns...>
  void data(std::string_view first, std::string_view rest) {
    std::uint64_t id;
    if (!parseUnsigned(first, id)) fail("bad vector id \"" + printableText(first) + "\"");
    const auto found = vectors_.find(id);
    if (found == vectors_.end()) {
      if (declared_.count(id) == 0) fail("data for vector " + std::to_string(id) + ", which was not declared");
      return;  // not selected
    }
    const Vector& v = found->second;
    std::uint64_t event = 0;
    double time = 0.0, value = 0.0;
    bool haveValue = false;
    for (const char column : v.columns) {
      std::string_view token;
      if (!nextToken(rest, token)) fail("too few columns for \"" + v.columns + "\"");
      bool ok = true;
      switch (column) {
        case 'E': ok = parseUnsigned(token, event); break;
        case 'T': ok = parseNumber(token, time, true); break;
        case 'V':
          ok = parseNumber(token, value, true);
          haveValue = true;
          break;
        default: break;  // other columns are skipped
      }
      if (!ok) fail("bad number \"" + printableText(token) + "\" in column " + column);
    }
    std::string_view extra;
    if (nextToken(rest, extra)) fail("unexpected extra column \"" + printableText(extra) + "\"");
    if (!haveValue) fail("vector has no value column");
    const std::string& sep = a_.opt.separator;
    ++rows_;
    if (a_.opt.lineNumbers) {
      text_ += std::to_string(rows_);
      text_ += sep;
    }
    appendFixed6(text_, time);
    text_ += sep;
    text_ += std::to_string(event);
    text_ += sep;
    text_ += '"' + v.object + '"' + sep + '"' + v.name + '"' + sep + '"' + v.split + '"' + sep;
    appendFixed6(text_, value);
    text_ += '\n';
    if (text_.size() > (1U << 20)) {
      if (interrupted()) throw Interrupted();
      write_(text_);
      text_.clear();
    }
  }

  // vector <id> <object> <name> [<columns>]
  void declaration(std::string_view rest) {
    std::string idText, object, name, columns;
    std::uint64_t id;
    if (!nextScalarWord(rest, idText) || !parseUnsigned(idText, id) || !nextScalarWord(rest, object) ||
        !nextScalarWord(rest, name)) {
      fail("malformed vector declaration");
    }
    if (!nextScalarWord(rest, columns)) columns = "TV";
    if (columns.find_first_not_of("ETV") != std::string::npos)
      fail("unknown vector columns \"" + printableText(columns) + "\"");
    if (!declared_.insert(id).second) fail("vector " + idText + " declared twice");
    bool include = a_.prefixes.empty();
    bool split = a_.splitAll;
    for (auto& p : a_.prefixes) {
      if (name.compare(0, p.text.size(), p.text) == 0) {
        include = true;
        p.found = true;
        split = split || p.split;
      }
    }
    if (!include) return;
    Vector v{object, name, "", columns};
    if (split) {
      const auto space = v.name.rfind(' ');
      if (space != std::string::npos) {
        v.split = v.name.substr(space + 1);
        v.name.resize(space);
      }
    }
    if (!a_.opt.quiet) {
      if (split) {
        std::printf("Adding vector \"%s\", split \"%s\" of object %s ...\n", v.name.c_str(), v.split.c_str(),
                    v.object.c_str());
      } else {
        std::printf("Adding vector \"%s\" of object %s ...\n", v.name.c_str(), v.object.c_str());
      }
    }
    vectors_.emplace(id, std::move(v));
  }

  VectorTableSettings& a_;
  InputFile& in_;
  Sink write_;
  std::unordered_map<std::uint64_t, Vector> vectors_;  // selected ones only
  std::unordered_set<std::uint64_t> declared_;
  std::string text_;
  std::uint64_t rows_ = 0;
};

VectorExtractor::VectorExtractor(VectorTableSettings& settings, InputFile& in, Sink write)
    : impl_(std::make_unique<Impl>(settings, in, std::move(write))) {}
VectorExtractor::~VectorExtractor() = default;
void VectorExtractor::run() { impl_->run(); }
std::uint64_t VectorExtractor::rows() const { return impl_->rows(); }

}  // namespace npm::tools
