// createsummary: reads many scalar files (named by --input= commands on stdin) and writes
// one table per scalar name, for R. Reference-compatible command line, command language,
// name transformation, output names and table layout; see createsummary(1).
//
// Inputs are decompressed and parsed on a thread pool while the commands are still being
// read; the parsed rows (the output, nothing more) are merged in input order, and the
// tables are sorted, formatted and compressed in parallel, each written atomically. With
// --long, the merge also formats every scalar as a row of one long-form CSV.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <unordered_map>

#include "tools/scalarfile.h"
#include "tools/toolcommon.h"

namespace fs = std::filesystem;
using namespace npm;
using namespace npm::tools;

namespace {

const char* const kProgram = "createsummary";
constexpr std::size_t kWriteChunk = 1 << 20;
// The long form's file in the results directory (no table is named so: theirs have a '-').
const char* const kLongName = "scalars.csv";
const char* const kLongColumns[] = {"file", "RunNo", "side", "flow", "path", "object", "name", "value"};

enum OptionId { kInteractive, kBatch, kSplit, kNoSplit, kIgnoreErrors, kCsv, kLong, kHelp, kVersion };

const std::vector<OptionSpec> kOptions = {
    {"interactive", 'i', false, kInteractive},
    {"batch", 'b', false, kBatch},
    {"compress", 'c', true, kOptCompress},
    {"compression", 0, true, kOptCompression},
    {"separator", 's', true, kOptSeparator},
    {"line-numbers", 'l', false, kOptLineNumbers},
    {"no-line-numbers", 'n', false, kOptNoLineNumbers},
    {"split", 'p', false, kSplit},
    {"splitall", 0, false, kSplit},
    {"no-split", 'a', false, kNoSplit},
    {"ignore-scalar-file-errors", 'r', false, kIgnoreErrors},
    {"quiet", 'q', false, kOptQuiet},
    {"csv", 0, false, kCsv},
    {"long", 0, false, kLong},
    {"jobs", 'j', true, kOptJobs},
    {"help", 'h', false, kHelp},
    {"version", 'v', false, kVersion},
};

void usage(std::FILE* to) {
  std::fprintf(to,
               "Usage: %s [variable_names] [options] <commands\n"
               "Reads scalar files named by commands on standard input and writes one table per\n"
               "scalar into the results directory (<name>.data.bz2).\n"
               "\n"
               "Options:\n"
               "  -i, --interactive        prompt for commands, report bad commands and go on (default)\n"
               "  -b, --batch              no prompts; any bad command is an error (exit 1)\n"
               "  -c, --compress N         compression level 1-9, 0 = plain .data files (default 9)\n"
               "      --compression=F      bzip2 (<name>.data.bz2, default), gzip (<name>.data.gz)\n"
               "                           or none (<name>.data)\n"
               "  -s, --separator S        column separator (default TAB; \",\" with --csv)\n"
               "  -l, --line-numbers       prefix rows with a line number (R row names)\n"
               "  -n, --no-line-numbers    no line numbers (default)\n"
               "  -p, --split, --splitall  split a trailing \" <digits>\" off scalar names into Split\n"
               "  -a, --no-split           do not split (default)\n"
               "  -r, --ignore-scalar-file-errors\n"
               "                           warn about and skip unreadable or bad input files\n"
               "      --csv                strict CSV (<name>.csv.bz2; .csv.gz, .csv with\n"
               "                           --compression): RFC 4180 quoting, one column per variable\n"
               "                           and aggregate, a header field for every column\n"
               "      --long               also every scalar in one CSV, a row each (scalars.csv.bz2;\n"
               "                           .csv.gz, .csv with --compression): variables, file, RunNo,\n"
               "                           side, flow, path, object, name, value\n"
               "  -j, --jobs N             worker threads (default: number of CPUs)\n"
               "  -q, --quiet              no banner, no progress: errors and the closing line only\n"
               "  -h, --help               this help\n"
               "  -v, --version            version\n"
               "\n"
               "Commands (one per line on standard input):\n"
               "  --varnames=NAMES         variable column names, space-separated\n"
               "  --values=VALUES          values for the next --input (required before each)\n"
               "  --input=FILE             scalar file (.sca, .sca.bz2; OMNeT++ .sca too)\n"
               "  --skip=PREFIX            drop tables whose name starts with PREFIX (later inputs)\n"
               "  --simulationsdirectory=D directory of the inputs (default .)\n"
               "  --resultsdirectory=D     directory of the tables (default .)\n"
               "  --logfile=F, --statusfile=F\n"
               "                           for the next input: on error name F / delete F\n"
               "  --splitall, --ignore-scalar-file-errors, --level=N (ignored)\n",
               kProgram);
}

struct Input {
  std::string path;
  std::string values;                    // verbatim (reference layout)
  std::vector<std::string> valueFields;  // split (CSV layout)
  std::uint64_t commandLine = 0;
  bool ignoreErrors = false;
  std::string logFile, statusFile;
};

struct JobResult {
  std::vector<Scalar> scalars;
  std::string error;  // empty = fine
  bool cancelled = false;
};

struct Row {
  std::uint32_t input;
  std::uint32_t line;
  std::uint32_t run;
  std::uint32_t valueNo = 0;
  double value;
  std::string split;
  std::string agg;
};

struct Table {
  std::string aggNames;
  std::uint32_t firstInput = 0, firstLine = 0;
  std::vector<Row> rows;
};

struct Settings : OutputOptions {
  bool interactive = true;
  bool split = false;
  bool ignoreErrors = false;
  bool csv = false;
  bool longForm = false;
  // CSV separator: -s, or ","
  std::string csvSeparator() const { return separatorGiven ? separator : ","; }
};

struct TableStats {
  std::uint64_t lines = 0, bytesIn = 0, bytesOut = 0;
  std::string error;                    // empty = fine
  bool cancelled = false;               // not written: another table failed first, or an interrupt
  std::string path, content;            // between formatting and storing
  std::vector<std::string> otherPaths;  // the same table, otherwise compressed
};

TableStats failedTable(std::string error) {
  TableStats t;
  t.error = std::move(error);
  return t;
}

TableStats cancelledTable() {
  TableStats t;
  t.cancelled = true;
  return t;
}

// Ranks distinct strings in number-aware order: equal strings share a rank.
template <typename GetKey>
std::vector<std::uint32_t> rankStrings(std::size_t n, GetKey key) {
  std::vector<std::uint32_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::uint32_t>(i);
  std::map<std::string_view, std::uint32_t, bool (*)(std::string_view, std::string_view)> distinct(numericAwareLess);
  for (std::size_t i = 0; i < n; ++i) distinct.emplace(key(i), 0);
  std::uint32_t r = 0;
  for (auto& [k, v] : distinct) v = r++;
  std::vector<std::uint32_t> ranks(n);
  for (std::size_t i = 0; i < n; ++i) ranks[i] = distinct.find(key(i))->second;
  return ranks;
}

// An output's text compressed as the settings say (into memory), named `base` plus the
// compression's suffix; its other variants are removed when it is stored.
TableStats packed(std::string text, std::uint64_t lines, const std::string& base, const Settings& settings) {
  TableStats stats;
  stats.lines = lines;
  stats.bytesIn = text.size();
  stats.path = base + compressionSuffix(settings.compression);
  for (const Compression c : {Compression::kBzip2, Compression::kGzip, Compression::kNone}) {
    if (c != settings.compression) stats.otherPaths.push_back(base + compressionSuffix(c));
  }
  if (interrupted()) throw FileError("interrupted");
  if (settings.compression != Compression::kNone) {
    stats.content = compressText(text, settings.compression, settings.level);
  } else {
    stats.content = std::move(text);
  }
  return stats;
}

// The CPU half of writing a table: sort, number, format, compress (into memory).
TableStats prepareTable(const std::string& name, Table& table, const std::vector<Input>& inputs,
                        const std::vector<std::uint32_t>& varRank, const std::string& varNames,
                        const std::vector<std::string>& varNameFields, const std::string& directory,
                        const Settings& settings) {
  auto& rows = table.rows;
  const auto splitRank = rankStrings(rows.size(), [&](std::size_t i) -> std::string_view { return rows[i].split; });
  const auto aggRank = rankStrings(rows.size(), [&](std::size_t i) -> std::string_view { return rows[i].agg; });
  std::vector<std::uint32_t> order(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
  auto key = [&](std::uint32_t i) {
    const Row& r = rows[i];
    return std::make_tuple(splitRank[i], aggRank[i], varRank[r.input], r.run, r.input, r.line);
  };
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return key(a) < key(b); });
  // ValueNo counts equal (split, aggregates, values, run) in input order.
  for (std::size_t k = 0; k < order.size(); ++k) {
    Row& r = rows[order[k]];
    r.valueNo = 1;
    if (k > 0) {
      const auto a = key(order[k - 1]), b = key(order[k]);
      if (std::get<0>(a) == std::get<0>(b) && std::get<1>(a) == std::get<1>(b) && std::get<2>(a) == std::get<2>(b) &&
          std::get<3>(a) == std::get<3>(b)) {
        r.valueNo = rows[order[k - 1]].valueNo + 1;
      }
    }
  }

  const std::string& sep = settings.separator;
  std::string text;
  text.reserve(64 * rows.size() + 256);
  std::vector<std::string> aggNameFields;
  if (settings.csv) {
    aggNameFields = splitFields(table.aggNames).value_or(std::vector<std::string>{});
    // Every row has as many fields as the header: the line numbers get a column too.
    if (settings.lineNumbers) text += "\"LineNo\"" + sep;
    text += "\"RunNo\"" + sep + "\"ValueNo\"" + sep + "\"Split\"";
    for (const auto& f : aggNameFields) text += sep + csvField(f, sep, true);
    for (const auto& f : varNameFields) text += sep + csvField(f, sep, true);
    text += sep + csvField(name, sep, true) + "\n";
  } else {
    text += "RunNo" + sep + "ValueNo" + sep + "Split" + sep + table.aggNames + sep + varNames + sep + name + "\n";
  }
  std::uint64_t lineNo = 1;
  char number[32];
  for (const std::uint32_t i : order) {
    const Row& r = rows[i];
    if (settings.lineNumbers) {
      std::snprintf(number, sizeof(number), "%07llu", static_cast<unsigned long long>(lineNo));
      text += number;
      text += sep;
    }
    text += std::to_string(r.run);
    text += sep;
    text += std::to_string(r.valueNo);
    text += sep;
    if (settings.csv) {
      text += csvField(r.split, sep, true);
      std::string_view rest = r.agg;
      while (!rest.empty()) {
        const auto space = rest.find(' ');
        text += sep;
        text += csvField(rest.substr(0, space), sep);
        rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
      }
      for (const auto& f : inputs[r.input].valueFields) {
        text += sep;
        text += csvField(f, sep);
      }
    } else {
      text += '"';
      text += r.split;
      text += '"';
      text += sep;
      text += r.agg;
      text += sep;
      text += inputs[r.input].values;
    }
    text += sep;
    appendFixed6(text, r.value);
    text += '\n';
    ++lineNo;
  }
  const std::uint64_t lines = rows.size();
  rows.clear();
  rows.shrink_to_fit();
  const std::string ext = settings.csv ? ".csv" : ".data";
  return packed(std::move(text), lines, joinPath(directory, name + ext), settings);
}

// A row of the long form: the input's variables, its file, the run (OMNeT++ run lines before,
// 0 for NetPerfMeter files), the scalar's side, flow and path (scalarOrigin; empty if none), its
// object and name as written and its value (shortest exact form; empty for nan, SQL's NULL).
void appendLongRow(std::string& text, const Input& input, const Scalar& sc, const std::string& sep) {
  for (const auto& f : input.valueFields) {
    text += csvField(f, sep);
    text += sep;
  }
  text += csvField(input.path, sep, true);
  text += sep;
  text += std::to_string(sc.run);
  text += sep;
  const ScalarOrigin origin = scalarOrigin(sc.object);
  if (!origin.side.empty()) text += csvField(origin.side, sep, true);
  text += sep;
  if (origin.flow) text += std::to_string(*origin.flow);
  text += sep;
  if (origin.path) text += std::to_string(*origin.path);
  text += sep;
  text += csvField(sc.object, sep, true);
  text += sep;
  text += csvField(sc.name, sep, true);
  text += sep;
  if (!std::isnan(sc.value)) {
    char number[64];
    const auto end = std::to_chars(number, number + sizeof(number), sc.value).ptr;
    text.append(number, end);
  }
  text += '\n';
}

// The long form's file: a header, then the rows formatted while merging.
TableStats prepareLong(std::string rows, std::uint64_t lines, const std::vector<std::string>& varNameFields,
                       const std::string& directory, const Settings& settings) {
  const std::string sep = settings.csvSeparator();
  std::string header;
  for (const auto& f : varNameFields) header += csvField(f, sep, true) + sep;
  for (const char* column : kLongColumns) header += csvField(column, sep, true) + sep;
  header.replace(header.size() - sep.size(), sep.size(), "\n");
  rows.insert(0, header);
  return packed(std::move(rows), lines, joinPath(directory, kLongName), settings);
}

// The I/O half: writes the prepared content under a temporary name, syncs, renames.
TableStats storeTable(TableStats stats) {
  OutputFile out(stats.path, false, 0);
  for (std::size_t at = 0; at < stats.content.size(); at += kWriteChunk) {
    if (interrupted()) throw FileError("interrupted");
    out.write(std::string_view(stats.content).substr(at, kWriteChunk));
  }
  if (interrupted()) throw FileError("interrupted");
  out.commit();
  for (const auto& other : stats.otherPaths) {
    ::unlink(other.c_str());  // the other variants (.data, .data.bz2, .data.gz)
  }
  stats.bytesOut = stats.content.size();
  stats.content = std::string();
  return stats;
}

class CreateSummary {
public:
  explicit CreateSummary(Settings settings)
      : s_(std::move(settings)), pool_(s_.threads()), progress_(kProgram, !s_.quiet) {}

  void setVarNames(std::string names) { varNames_ = std::move(names); }
  int run();

private:
  bool command(const std::string& line);
  void submit(Input input, ScalarFileOptions options);
  void mergeReady(bool wait);
  bool commandError(const std::string& message);
  int writeTables();

  Settings s_;
  ThreadPool pool_;
  Progress progress_;
  std::string varNames_ = "_NoVarNamesGiven_";
  std::optional<std::string> values_;
  std::string logFile_, statusFile_;
  std::string simulationsDirectory_ = ".", resultsDirectory_ = ".";
  std::shared_ptr<const std::vector<std::string>> skip_;
  std::uint64_t commandLine_ = 0;

  std::vector<Input> inputs_;
  std::deque<std::future<JobResult>> futures_;
  std::size_t merged_ = 0;
  std::atomic<bool> failed_{false};
  std::atomic<std::uint64_t> done_{0};
  bool error_ = false;
  std::uint64_t skippedInputs_ = 0;
  std::unordered_map<std::string, Table> tables_;
  std::string longRows_;  // --long: the rows so far, in input order
  std::uint64_t longLines_ = 0;
};

bool CreateSummary::commandError(const std::string& message) {
  std::fprintf(stderr, "%s: error: <stdin>:%llu: %s\n", kProgram, static_cast<unsigned long long>(commandLine_),
               message.c_str());
  if (s_.interactive) return true;  // go on
  error_ = true;
  return false;
}

void CreateSummary::submit(Input input, ScalarFileOptions options) {
  const std::string path = input.path;
  inputs_.push_back(std::move(input));
  futures_.push_back(pool_.submit([this, path, options = std::move(options)] {
    JobResult result;
    if (failed_.load(std::memory_order_relaxed) || interrupted()) {
      result.cancelled = true;
      return result;
    }
    try {
      result.scalars = readScalarFile(path, options);
    } catch (const std::exception& e) {
      result.error = e.what();
    }
    done_.fetch_add(1, std::memory_order_relaxed);
    return result;
  }));
}

// Merges finished jobs in input order (all of them if `wait`).
void CreateSummary::mergeReady(bool wait) {
  const std::string longSeparator = s_.csvSeparator();
  while (!futures_.empty()) {
    auto& f = futures_.front();
    if (!wait && f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    while (f.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
      progress_.update(done_.load(), inputs_.size(), "files");
    }
    JobResult result = f.get();
    futures_.pop_front();
    progress_.update(done_.load(), inputs_.size(), "files");
    const std::uint32_t index = static_cast<std::uint32_t>(merged_++);
    const Input& input = inputs_[index];
    if (result.cancelled) continue;
    if (!result.error.empty()) {
      if (!input.logFile.empty()) {
        std::fprintf(stderr, "%s: see log file %s\n", kProgram, input.logFile.c_str());
      }
      if (!input.statusFile.empty()) ::unlink(input.statusFile.c_str());
      if (input.ignoreErrors) {
        std::fprintf(stderr, "%s: warning: %s - skipping this input\n", kProgram, result.error.c_str());
        ++skippedInputs_;
        continue;
      }
      std::fprintf(stderr, "%s: error: %s\n", kProgram, result.error.c_str());
      error_ = true;
      failed_ = true;
      continue;
    }
    if (error_) continue;
    for (auto& sc : result.scalars) {
      if (s_.longForm) {
        appendLongRow(longRows_, input, sc, longSeparator);
        ++longLines_;
      }
      auto [it, inserted] = tables_.try_emplace(sc.table);
      Table& t = it->second;
      if (inserted) {
        t.aggNames = sc.aggNames;
        t.firstInput = index;
        t.firstLine = sc.line;
      } else if (t.aggNames != sc.aggNames) {
        std::fprintf(stderr,
                     "%s: error: %s:%u: scalar of table %s has aggregate columns \"%s\", but "
                     "%s:%u gave \"%s\"\n",
                     kProgram, input.path.c_str(), sc.line, sc.table.c_str(), sc.aggNames.c_str(),
                     inputs_[t.firstInput].path.c_str(), t.firstLine, t.aggNames.c_str());
        error_ = true;
        failed_ = true;
        break;
      }
      t.rows.push_back(Row{index, sc.line, sc.run, 0, sc.value, std::move(sc.split), std::move(sc.aggValues)});
    }
  }
}

bool CreateSummary::command(const std::string& line) {
  // (variable names and values go into every table, which its readers take as UTF-8)
  if (auto problem = notUtf8(line)) return commandError(*problem + ": the tables are UTF-8");
  auto arg = [&](std::string_view key) -> std::optional<std::string> {
    if (line.compare(0, key.size(), key) == 0) return line.substr(key.size());
    return std::nullopt;
  };
  if (auto v = arg("--varnames=")) {
    std::string names = stripOuterQuotes(*v);
    const auto fields = splitFields(names);
    if (!fields) return commandError("unbalanced quotes in --varnames");
    for (const auto& input : inputs_) {
      if (input.valueFields.size() != fields->size()) {
        return commandError("--varnames gives " + std::to_string(fields->size()) + " names, but the values of " +
                            input.path + " (line " + std::to_string(input.commandLine) + ") have " +
                            std::to_string(input.valueFields.size()) + " fields");
      }
    }
    varNames_ = std::move(names);
  } else if (auto v = arg("--values=")) {
    std::string values = stripOuterQuotes(*v);
    const auto fields = splitFields(values);
    if (!fields) return commandError("unbalanced quotes in --values");
    const auto names = splitFields(varNames_).value_or(std::vector<std::string>{});
    if (fields->size() != names.size()) {
      return commandError("--values=" + values + " has " + std::to_string(fields->size()) + " fields, but there are " +
                          std::to_string(names.size()) + " variable names (" + varNames_ + ")");
    }
    values_ = std::move(values);
  } else if (auto v = arg("--input=")) {
    if (!values_) return commandError("--input=" + *v + " without a preceding --values=");
    auto fields = splitFields(*values_).value();
    const auto names = splitFields(varNames_).value_or(std::vector<std::string>{});
    if (fields.size() != names.size()) {
      const std::string message = "--values=" + *values_ + " has " + std::to_string(fields.size()) +
                                  " fields, but there are " + std::to_string(names.size()) + " variable names (" +
                                  varNames_ + ")";
      values_.reset();
      return commandError(message);
    }
    Input input;
    input.path = joinPath(simulationsDirectory_, *v);
    input.values = std::move(*values_);
    input.valueFields = std::move(fields);
    input.commandLine = commandLine_;
    input.ignoreErrors = s_.ignoreErrors;
    input.logFile = std::move(logFile_);
    input.statusFile = std::move(statusFile_);
    values_.reset();
    logFile_.clear();
    statusFile_.clear();
    submit(std::move(input), ScalarFileOptions{s_.split, skip_, s_.longForm});
  } else if (auto v = arg("--skip=")) {
    auto list =
        skip_ ? std::make_shared<std::vector<std::string>>(*skip_) : std::make_shared<std::vector<std::string>>();
    list->push_back(*v);
    skip_ = std::move(list);
  } else if (auto v = arg("--simulationsdirectory=")) {
    simulationsDirectory_ = v->empty() ? "." : *v;
  } else if (auto v = arg("--resultsdirectory=")) {
    resultsDirectory_ = v->empty() ? "." : *v;
  } else if (auto v = arg("--logfile=")) {
    logFile_ = *v;
  } else if (auto v = arg("--statusfile=")) {
    statusFile_ = *v;
  } else if (line == "--splitall") {
    s_.split = true;
  } else if (line == "--ignore-scalar-file-errors") {
    s_.ignoreErrors = true;
  } else if (arg("--level=")) {
    // deprecated, ignored
  } else {
    return commandError("invalid command \"" + line + "\"");
  }
  return true;
}

int CreateSummary::writeTables() {
  // Variable values: one rank per input, number-aware.
  const auto varRank =
      rankStrings(inputs_.size(), [&](std::size_t i) -> std::string_view { return inputs_[i].values; });
  const auto varNameFields = splitFields(varNames_).value_or(std::vector<std::string>{});
  if (s_.csv && !s_.separatorGiven) s_.separator = ",";

  std::error_code ec;
  fs::create_directories(resultsDirectory_, ec);
  if (ec) {
    std::fprintf(stderr, "%s: error: cannot create results directory %s: %s\n", kProgram, resultsDirectory_.c_str(),
                 ec.message().c_str());
    return 1;
  }

  std::vector<std::string> names;
  names.reserve(tables_.size());
  for (const auto& [name, table] : tables_) names.push_back(name);
  std::sort(names.begin(), names.end());

  // Tables are formatted and compressed on the CPU pool; writing one ends in fsync() and
  // rename(), which wait for the disk, so that half runs on more threads than CPUs.
  ThreadPool writers(std::min(4 * pool_.size(), 32U));
  std::vector<std::future<std::future<TableStats>>> results;
  auto schedule = [&](std::function<TableStats()> prepare) {
    return pool_.submit([&, prepare = std::move(prepare)]() -> std::future<TableStats> {
      std::promise<TableStats> done;
      if (failed_.load() || interrupted()) {
        done.set_value(cancelledTable());
        return done.get_future();
      }
      try {
        TableStats prepared = prepare();
        return writers.submit([this, p = std::move(prepared)]() mutable -> TableStats {
          if (failed_.load() || interrupted()) return cancelledTable();
          try {
            return storeTable(std::move(p));
          } catch (const std::exception& e) {
            failed_ = true;
            return failedTable(e.what());
          }
        });
      } catch (const std::exception& e) {
        failed_ = true;
        done.set_value(failedTable(e.what()));
        return done.get_future();
      }
    });
  };
  for (const auto& name : names) {
    Table* table = &tables_.find(name)->second;
    results.push_back(schedule([&, name, table] {
      return prepareTable(name, *table, inputs_, varRank, varNames_, varNameFields, resultsDirectory_, s_);
    }));
  }
  if (s_.longForm) {
    names.push_back(std::string(kLongName) + " (long form)");
    results.push_back(
        schedule([&] { return prepareLong(std::move(longRows_), longLines_, varNameFields, resultsDirectory_, s_); }));
  }
  std::uint64_t lines = 0, in = 0, out = 0, files = 0;
  std::string firstError;
  // (writers is destroyed after the loop below has collected every result)
  for (std::size_t i = 0; i < results.size(); ++i) {
    while (results[i].wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
      progress_.update(i, results.size(), "tables");
    }
    std::future<TableStats> stored = results[i].get();
    while (stored.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
      progress_.update(i, results.size(), "tables");
    }
    TableStats st = stored.get();
    progress_.update(i + 1, results.size(), "tables");
    if (st.cancelled) continue;
    if (!st.error.empty()) {
      if (firstError.empty()) firstError = st.error;
      continue;
    }
    lines += st.lines;
    in += st.bytesIn;
    out += st.bytesOut;
    ++files;
    if (s_.interactive && !s_.quiet) {
      std::printf("Statistics \"%s\" (%llu lines)\n", names[i].c_str(), static_cast<unsigned long long>(st.lines));
    }
  }
  progress_.finish(results.size(), results.size(), "tables");
  if (interrupted()) {
    std::fprintf(stderr, "%s: interrupted; unfinished tables were discarded\n", kProgram);
    return 130;
  }
  if (!firstError.empty()) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, firstError.c_str());
    return 1;
  }
  std::printf("Wrote %llu lines into %llu files", static_cast<unsigned long long>(lines),
              static_cast<unsigned long long>(files));
  if (in > 0) {
    std::printf(", %llu -> %llu - %.2f%%", static_cast<unsigned long long>(in), static_cast<unsigned long long>(out),
                100.0 * static_cast<double>(out) / static_cast<double>(in));
  }
  std::printf("\n");
  std::fflush(stdout);
  return 0;
}

int CreateSummary::run() {
  if (!s_.quiet) {
    std::printf(
        "CreateSummary %s\n* Compression Level: %d\n* Compression:       %s\n"
        "* Interactive Mode:  %s\n"
        "* Line Numbers:      %s\n* Split:             %s\n* Format:            %s\n\n",
        NPM_VERSION, s_.level, compressionName(s_.compression), s_.interactive ? "on" : "off",
        s_.lineNumbers ? "on" : "off", s_.split ? "on" : "off",
        s_.csv ? "strict CSV" : "reference (whitespace-separated)");
  }
  std::string line;
  for (;;) {
    if (s_.interactive) {
      std::printf("Ready> ");
      std::fflush(stdout);
    }
    if (interrupted() || !std::getline(std::cin, line)) break;
    ++commandLine_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (!command(line)) break;
    mergeReady(false);
    progress_.update(done_.load(), inputs_.size(), "files");
    if (failed_ || interrupted()) break;
  }
  if (s_.interactive) std::printf("\n");
  mergeReady(true);
  progress_.finish(done_.load(), inputs_.size(), "files");
  if (interrupted()) {
    std::fprintf(stderr, "%s: interrupted; no tables written\n", kProgram);
    return 130;
  }
  if (error_) return 1;
  // No table at all is an error too: a script whose inputs went missing learns it here.
  if (inputs_.empty()) {
    std::fprintf(stderr, "%s: error: standard input named no scalar file (--input=FILE): no tables\n", kProgram);
    return 1;
  }
  if (skippedInputs_ == inputs_.size()) {
    std::fprintf(stderr, "%s: error: all %zu input files were skipped: no tables\n", kProgram, inputs_.size());
    return 1;
  }
  if (skippedInputs_ > 0) {
    std::fprintf(stderr, "%s: warning: skipped %llu of %zu input files\n", kProgram,
                 static_cast<unsigned long long>(skippedInputs_), inputs_.size());
  }
  return writeTables();
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  std::string varNames;
  bool haveVarNames = false;
  try {
    std::vector<ParsedOption> options;
    std::vector<std::string> positional;
    parseCommandLine(argc, argv, kOptions, options, positional);
    for (const auto& o : options) {
      if (applyOutputOption(o, settings, 0)) continue;
      switch (o.id) {
        case kInteractive: settings.interactive = true; break;
        case kBatch: settings.interactive = false; break;
        case kSplit: settings.split = true; break;
        case kNoSplit: settings.split = false; break;
        case kIgnoreErrors: settings.ignoreErrors = true; break;
        case kCsv: settings.csv = true; break;
        case kLong: settings.longForm = true; break;
        case kHelp: usage(stdout); return 0;
        case kVersion: std::printf("CreateSummary %s\n", NPM_VERSION); return 0;
      }
    }
    if (settings.level == 0) settings.compression = Compression::kNone;  // -c 0: plain
    if ((settings.csv || settings.longForm) && settings.separator.find_first_of("\"\r\n") != std::string::npos) {
      throw UsageError(std::string("with ") + (settings.csv ? "--csv" : "--long") +
                       ", the separator must not contain a quote or a line break");
    }
    if (positional.size() > 1) {
      throw UsageError("unexpected argument \"" + positional[1] + "\" (give the variable names as one argument)");
    }
    if (!positional.empty()) {
      varNames = stripOuterQuotes(positional[0]);
      if (!splitFields(varNames)) throw UsageError("unbalanced quotes in the variable names");
      haveVarNames = true;
    }
  } catch (const UsageError& e) {
    // One line (the options are in --help), so that scripts log what went wrong.
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return 1;
  }
  installInterruptHandler();
  CreateSummary tool(settings);
  if (haveVarNames) tool.setVarNames(varNames);
  return tool.run();
}
