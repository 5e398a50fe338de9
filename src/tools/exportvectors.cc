// exportvectors: NetPerfMeter vector files (.vec, .vec.bz2, .vec.gz: the measurement vectors,
// the per-flow and the per-path vectors) as one plain CSV table for Python, DuckDB, pandas and
// spreadsheets. A .vec file keeps R's row-name convention (its header names every column but
// the first, the row's line number); the table names that column LineNo, so that every row has
// as many fields as the header. See exportvectors(1) for the dialect.
#include <cstdio>
#include <optional>
#include <string_view>

#include "common/numbers.h"
#include "tools/toolcommon.h"

using namespace npm;
using namespace npm::tools;

namespace {

const char* const kProgram = "exportvectors";

enum OptionId { kOutput = 1, kNa, kFileColumn, kHelp, kVersion };

const std::vector<OptionSpec> kOptions = {
    {"output", 'o', true, kOutput},
    {"separator", 's', true, kOptSeparator},
    {"na", 0, true, kNa},
    {"file-column", 'f', false, kFileColumn},
    {"compress", 'c', true, kOptCompress},
    {"jobs", 'j', true, kOptJobs},
    {"quiet", 'q', false, kOptQuiet},
    {"help", 'h', false, kHelp},
    {"version", 'v', false, kVersion},
};

void usage(std::FILE* to) {
  std::fprintf(to,
               "Usage: %s input.vec[.bz2|.gz] ... [options]\n"
               "Writes NetPerfMeter vector files (measurement, per-flow or per-path vectors; plain, bzip2\n"
               "or gzip) as one CSV table: a header that names every column, LineNo first (the .vec\n"
               "header leaves the line numbers' column unnamed, as R's row names), then the file's\n"
               "columns. Comma-separated, LF line ends, '.' as the decimal point, numbers as in the file,\n"
               "text in double quotes (inner quotes doubled), NA as an empty field.\n"
               "\n"
               "Options:\n"
               "  -o, --output FILE        the table (bzip2 if it ends in .bz2, gzip if in .gz; written\n"
               "                           only when complete); default or -: standard output\n"
               "  -f, --file-column        a first column File naming each row's input (the default\n"
               "                           with more than one input)\n"
               "  -s, --separator S        column separator: , (default) or TAB (\"tab\" or a TAB)\n"
               "      --na TEXT            a missing value (NA in the file) as TEXT (default: empty)\n"
               "  -c, --compress N         bzip2/gzip level 1-9 (default 9)\n"
               "  -j, --jobs N             compression threads (default: number of CPUs)\n"
               "  -q, --quiet              no banner and no \"Wrote\" line (never with standard output)\n"
               "  -h, --help               this help\n"
               "  -v, --version            version\n",
               kProgram);
}

struct Arguments {
  OutputOptions opt;
  std::vector<std::string> inputs;
  std::string output = "-";
  std::string na;
  bool fileColumn = false;
};

std::optional<Arguments> parseArguments(int argc, char** argv) {
  Arguments a;
  a.opt.separator = ",";
  std::vector<ParsedOption> options;
  parseCommandLine(argc, argv, kOptions, options, a.inputs);
  for (const auto& o : options) {
    if (applyOutputOption(o, a.opt, 1)) continue;
    switch (o.id) {
      case kOutput:
        if (o.value.empty()) throw UsageError("the output file name must not be empty (- for standard output)");
        a.output = o.value;
        break;
      case kNa: a.na = o.value; break;
      case kFileColumn: a.fileColumn = true; break;
      case kHelp: usage(stdout); return std::nullopt;
      case kVersion: std::printf("ExportVectors %s\n", NPM_VERSION); return std::nullopt;
    }
  }
  if (a.opt.separator == "tab" || a.opt.separator == "\\t") a.opt.separator = "\t";
  if (a.opt.separator != "," && a.opt.separator != "\t") {
    throw UsageError("invalid separator \"" + printableText(a.opt.separator) + "\" (expected , or tab)");
  }
  if (a.na.find_first_of("\"\r\n,\t") != std::string::npos) {
    throw UsageError("--na=\"" + printableText(a.na) +
                     "\": a missing value's text must not hold a quote, a comma, "
                     "a TAB or a line break");
  }
  if (a.inputs.empty()) throw UsageError("no input file given");
  if (a.inputs.size() > 1) a.fileColumn = true;
  if (a.output == "-") a.opt.quiet = true;  // standard output holds the table only
  return a;
}

// One whitespace-separated field of a .vec line: "..." groups (with \ escaping \, ", $ and `,
// as in a shell's double quotes: the writer's shellQuote()), and marks the field as text.
struct Field {
  std::string text;
  bool quoted = false;
};

// Splits a line into fields; false if a quote is not closed.
bool splitLine(std::string_view line, std::vector<Field>& fields) {
  fields.clear();
  std::size_t i = 0;
  const std::size_t n = line.size();
  while (true) {
    while (i < n && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= n) return true;
    Field f;
    bool inQuotes = false;
    while (i < n && (inQuotes || (line[i] != ' ' && line[i] != '\t'))) {
      const char c = line[i++];
      if (c == '"') {
        inQuotes = !inQuotes;
        f.quoted = true;
      } else if (c == '\\' && inQuotes && i < n && std::string_view("\\\"$`").find(line[i]) != std::string_view::npos) {
        f.text += line[i++];  // as a shell's double quotes: \ escapes only \ " $ and `
      } else {
        f.text += c;
      }
    }
    if (inQuotes) return false;
    fields.push_back(std::move(f));
  }
}

// The table, written as it is read: to standard output or to an OutputFile.
class Table {
public:
  Table(const Arguments& a, ThreadPool& pool) : a_(a) {
    if (a.output != "-") {
      file_.emplace(a.output, compressionForName(a.output), a.opt.level);
      file_->compressInParallel(pool);
    }
  }

  void add(const std::string& inputName) {
    InputFile in(inputName);
    std::string line;
    std::vector<Field> fields;
    auto fail = [&](const std::string& what) -> void {
      throw FileError(inputName + ":" + std::to_string(in.lineNumber()) + ": " + what);
    };
    auto text = [&] {
      if (line.find('\0') != std::string::npos) fail("binary data (a NUL byte), not a vector file");
      if (auto problem = notUtf8(line)) fail(*problem + ": a garbled file?");
      if (!splitLine(line, fields)) fail("a quote that is not closed");
    };
    if (!in.getline(line)) throw FileError(inputName + ": empty file, expected a vector file's header line");
    text();
    if (!fields.empty() && fields[0].text == "version" && !fields[0].quoted) {
      fail("an OMNeT++ vector file (\"version\" line), not a NetPerfMeter one: extractvectors(1) reads it");
    }
    std::vector<std::string> header;
    for (const Field& f : fields) {
      double number;
      if (f.quoted || f.text.empty() || parseNumber(f.text, number)) {
        fail("not a vector file's header line (column names): \"" + printableText(line.substr(0, 80)) + "\"");
      }
      header.push_back(f.text);
    }
    if (header.empty()) fail("an empty header line");
    if (header_.empty()) {
      header_ = header;
      firstInput_ = inputName;
      writeHeader();
    } else if (header != header_) {
      fail("its columns differ from those of " + firstInput_ + " (one table holds one kind of vector file: the " +
           "measurement, per-flow or per-path vectors)");
    }
    const std::string& sep = a_.opt.separator;
    const std::string fileField = a_.fileColumn ? csvField(inputName, sep, true) + sep : std::string();
    while (in.getline(line)) {
      text();
      if (fields.empty()) continue;
      if (fields.size() != header.size() + 1) {
        fail(std::to_string(fields.size()) + " fields, expected " + std::to_string(header.size() + 1) +
             " (the line number and the header's " + std::to_string(header.size()) + ")");
      }
      const auto number = npm::parseUnsigned(fields[0].text, UINT64_MAX, SIZE_MAX);
      if (fields[0].quoted || !number) fail("bad line number \"" + printableText(fields[0].text) + "\"");
      out_ += fileField;
      out_ += std::to_string(*number);
      for (std::size_t i = 1; i < fields.size(); ++i) {
        out_ += sep;
        const Field& f = fields[i];
        double value;
        if (f.quoted) {
          out_ += csvField(f.text, sep, true);
        } else if (f.text == "NA") {
          out_ += a_.na;
        } else if (parseNumber(f.text, value, true)) {
          out_ += f.text;
        } else {
          out_ += csvField(f.text, sep, true);
        }
      }
      out_ += '\n';
      ++rows_;
      if (out_.size() > (1U << 20)) {
        if (interrupted()) throw Interrupted();
        flush();
      }
    }
    if (interrupted()) throw Interrupted();
  }

  void finish() {
    flush();
    if (file_) {
      file_->commit();
    } else if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      throw FileError("writing to standard output failed");
    }
  }

  std::uint64_t lines() const { return rows_ + 1; }
  std::uint64_t bytesIn() const { return file_ ? file_->bytesWritten() : 0; }
  std::uint64_t bytesOut() const { return file_ ? file_->bytesStored() : 0; }

  struct Interrupted {};

private:
  void writeHeader() {
    const std::string& sep = a_.opt.separator;
    if (a_.fileColumn) out_ += csvField("File", sep, true) + sep;
    out_ += csvField("LineNo", sep, true);
    for (const std::string& h : header_) out_ += sep + csvField(h, sep, true);
    out_ += '\n';
  }

  void flush() {
    if (out_.empty()) return;
    if (file_) {
      file_->write(out_);
    } else if (std::fwrite(out_.data(), 1, out_.size(), stdout) != out_.size()) {
      throw FileError("writing to standard output failed");
    }
    out_.clear();
  }

  const Arguments& a_;
  std::optional<OutputFile> file_;
  std::vector<std::string> header_;
  std::string firstInput_;
  std::string out_;
  std::uint64_t rows_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::optional<Arguments> a;
  if (const auto status = parseOrExit(kProgram, a, [&] { return parseArguments(argc, argv); })) return *status;
  if (!a->opt.quiet) std::printf("ExportVectors %s\n\n", NPM_VERSION);
  installInterruptHandler();
  ThreadPool pool(a->opt.threads());
  try {
    Table table(*a, pool);
    for (const std::string& input : a->inputs) table.add(input);
    table.finish();
    if (!a->opt.quiet) printWrote(table.lines(), table.bytesIn(), table.bytesOut());
  } catch (const Table::Interrupted&) {
    std::fprintf(stderr, "%s: interrupted; %s was not written\n", kProgram,
                 a->output == "-" ? "the table" : a->output.c_str());
    return 130;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, e.what());
    return 1;
  }
  return 0;
}
