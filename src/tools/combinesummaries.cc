// combinesummaries: concatenates tables (e.g. vector files or createsummary tables),
// prefixing every row with the values of the variables of its input. Reference-compatible
// command line and command language; see combinesummaries(1).
//
// Inputs are decompressed on a thread pool a few files ahead of the writer; the output is
// compressed in parallel (concatenated bzip2 streams, or one gzip member made of deflate
// pieces) and renamed into place at the end.
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

#include "common/result.h"
#include "common/text.h"
#include "tools/tablefile.h"
#include "tools/toolcommon.h"

using namespace npm;
using namespace npm::tools;

namespace {

const char* const kProgram = "combinesummaries";

enum OptionId { kHelp, kVersion };

const std::vector<OptionSpec> kOptions = {
    {"compress", 'c', true, kOptCompress},
    {"separator", 's', true, kOptSeparator},
    {"line-numbers", 'l', false, kOptLineNumbers},
    {"no-line-numbers", 'n', false, kOptNoLineNumbers},
    {"quiet", 'q', false, kOptQuiet},
    {"jobs", 'j', true, kOptJobs},
    {"help", 'h', false, kHelp},
    {"version", 'v', false, kVersion},
};

void usage(std::FILE* to) {
  std::fprintf(to,
               "Usage: %s output_file [variable_names] [options] <commands\n"
               "Concatenates the tables named by commands on standard input into output_file\n"
               "(bzip2-compressed if the name ends in .bz2, gzip-compressed if it ends in .gz),\n"
               "prefixing each row with the values of its input.\n"
               "\n"
               "Options:\n"
               "  -c, --compress N         bzip2/gzip level 1-9 (default 9)\n"
               "  -s, --separator S        separator between the values and the row (default TAB)\n"
               "  -l, --line-numbers       inputs carry line numbers (R row names): keep them as\n"
               "                           SubLineNo and number the output rows\n"
               "  -n, --no-line-numbers    (default)\n"
               "  -j, --jobs N             worker threads (default: number of CPUs)\n"
               "  -q, --quiet              no banner, no summary, no progress\n"
               "  -h, --help               this help\n"
               "  -v, --version            version\n"
               "\n"
               "Commands (one per line on standard input):\n"
               "  --varnames=NAMES         variable column names, space-separated\n"
               "  --values=VALUES          values for the next --input (required before each)\n"
               "  --input=FILE             table to append (plain, bzip2 or gzip); its first line is the header\n"
               "  --simulationsdirectory=D directory of the inputs (default .)\n",
               kProgram);
}

using Input = TableInput;

struct Interrupted {};

constexpr std::size_t kBlock = 1 << 20;

// Blocks of one input, from its reader thread to the writer; at most two at a time.
class BlockQueue {
public:
  bool push(std::string block) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return blocks_.size() < 2 || cancelled_; });
    if (cancelled_) return false;
    blocks_.push_back(std::move(block));
    cv_.notify_all();
    return true;
  }
  // The reader is done: it read the whole input, or failed.
  void finish(Result<void> read) {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    read_ = std::move(read);
    cv_.notify_all();
  }
  void cancel() {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_ = true;
    cv_.notify_all();
  }
  // Next block; false at the end; throws FileError if the reader failed.
  bool pop(std::string& block) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !blocks_.empty() || done_; });
    if (!blocks_.empty()) {
      block = std::move(blocks_.front());
      blocks_.pop_front();
      cv_.notify_all();
      return true;
    }
    if (!read_) throw FileError(read_.error());
    return false;
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::string> blocks_;
  bool done_ = false, cancelled_ = false;
  Result<void> read_;  // once done_: how the reader ended
};

struct Arguments {
  OutputOptions opt;
  std::string outputName, varNames;
};

// The command line; nullopt when --help or --version has answered. Throws UsageError.
std::optional<Arguments> parseArguments(int argc, char** argv) {
  Arguments a;
  std::vector<ParsedOption> options;
  std::vector<std::string> positional;
  parseCommandLine(argc, argv, kOptions, options, positional);
  for (const auto& o : options) {
    if (applyOutputOption(o, a.opt, 1)) continue;
    if (o.id == kHelp) {
      usage(stdout);
    } else {
      std::printf("CombineSummaries %s\n", NPM_VERSION);
    }
    return std::nullopt;
  }
  if (positional.empty()) throw UsageError("no output file given");
  if (positional.size() > 2) throw UsageError("unexpected argument \"" + positional[2] + "\"");
  a.outputName = positional[0];
  if (positional.size() > 1) {
    a.varNames = stripOuterQuotes(positional[1]);
    if (!splitFields(a.varNames)) throw UsageError("unbalanced quotes in the variable names");
  }
  return a;
}

// A command on standard input that cannot be carried out: its line and why.
struct CommandError {
  std::uint64_t line;
  std::string message;
};

// The commands on standard input (small: all of them are read and checked before any file is
// touched); --varnames updates `varNames`. Throws CommandError.
std::vector<Input> readCommands(std::string& varNames) {
  std::vector<Input> inputs;
  std::optional<std::string> values;
  std::string directory = ".";
  std::string line;
  std::uint64_t lineNo = 0;
  auto fail = [&](const std::string& message) { return CommandError{lineNo, message}; };
  while (!interrupted() && std::getline(std::cin, line)) {
    ++lineNo;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (auto problem = notUtf8(line)) throw fail(*problem + ": the table is UTF-8");
    if (line.rfind("--varnames=", 0) == 0) {
      std::string names = stripOuterQuotes(line.substr(11));
      if (!splitFields(names)) throw fail("unbalanced quotes in --varnames");
      if (!inputs.empty() && splitFields(names)->size() != splitFields(varNames)->size()) {
        throw fail("--varnames changes the number of variables after inputs were given");
      }
      varNames = std::move(names);
    } else if (line.rfind("--values=", 0) == 0) {
      std::string v = stripOuterQuotes(line.substr(9));
      const auto fields = splitFields(v);
      if (!fields) throw fail("unbalanced quotes in --values");
      const std::size_t names = splitFields(varNames)->size();
      if (fields->size() != names) {
        throw fail("--values=" + v + " has " + std::to_string(fields->size()) + " fields, but there are " +
                   std::to_string(names) + " variable names (" + varNames + ")");
      }
      values = std::move(v);
    } else if (line.rfind("--input=", 0) == 0) {
      if (!values) throw fail(line + " without a preceding --values=");
      inputs.push_back(Input{joinPath(directory, line.substr(8)), std::move(*values)});
      values.reset();
    } else if (line.rfind("--simulationsdirectory=", 0) == 0) {
      directory = line.size() > 23 ? line.substr(23) : ".";
    } else {
      throw fail("invalid command \"" + line + "\"");
    }
  }
  return inputs;
}

// Every line of one input, from its reader's blocks into `table`; the text is written to
// `out` as it grows.
void appendInput(const Input& input, BlockQueue& queue, Table& table, OutputFile& out) {
  TableLines lines(input, table);
  std::string block;
  while (queue.pop(block)) {  // throws FileError naming the file
    lines.piece(block);
    if (table.text().size() > (1U << 20)) {
      if (interrupted()) throw Interrupted();
      out.write(table.text());
      table.text().clear();
    }
  }
  lines.end();
  out.write(table.text());
  table.text().clear();
}

// Reads the inputs ahead on reader threads and writes them in order. Each input is
// decompressed by a reader thread into a small bounded queue of blocks, a few inputs ahead of
// the writer: memory stays bounded however large the inputs are. The readers have their own
// threads, so a reader waiting for room never holds up the compressors.
void combine(const Arguments& a, const std::vector<Input>& inputs) {
  const unsigned threads = a.opt.threads();
  // Destroyed in reverse order: readers are cancelled, then joined, then their queues go.
  std::vector<std::unique_ptr<BlockQueue>> queues;
  ThreadPool pool(threads);
  ThreadPool readers(threads);
  struct CancelAll {  // lets blocked readers go before the reader pool is joined
    std::vector<std::unique_ptr<BlockQueue>>& queues;
    ~CancelAll() {
      for (auto& q : queues) {
        if (q) q->cancel();
      }
    }
  } cancelAll{queues};
  for (std::size_t i = 0; i < inputs.size(); ++i) queues.push_back(std::make_unique<BlockQueue>());
  auto startReader = [&](std::size_t i) {
    readers.submit([q = queues[i].get(), path = inputs[i].path] {
      try {
        InputFile in(path);
        for (;;) {
          std::string block(kBlock, '\0');
          const std::size_t n = in.read(block.data(), block.size());
          if (n == 0) break;
          block.resize(n);
          if (!q->push(std::move(block))) return;  // cancelled
        }
        q->finish({});
      } catch (const std::exception& e) {
        q->finish(Failure{e.what()});
      }
    });
  };
  Progress progress(kProgram, !a.opt.quiet);
  try {
    OutputFile out(a.outputName, compressionForName(a.outputName), a.opt.level);
    out.compressInParallel(pool);
    Table table(a.opt, a.varNames);
    const std::size_t window = threads + 1;
    std::size_t next = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (interrupted()) throw Interrupted();
      while (next < inputs.size() && next < i + window) startReader(next++);
      appendInput(inputs[i], *queues[i], table, out);
      progress.update(i + 1, inputs.size(), "files");
    }
    if (interrupted()) throw Interrupted();
    out.commit();
    progress.finish(inputs.size(), inputs.size(), "files");
    if (!a.opt.quiet) printWrote(table.lines(), out.bytesWritten(), out.bytesStored());
  } catch (const Interrupted&) {
    throw;
  } catch (...) {
    progress.finish(0, 0, "files");
    throw;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<Arguments> a;
  if (const auto status = parseOrExit(kProgram, a, [&] { return parseArguments(argc, argv); })) return *status;
  installInterruptHandler();
  std::vector<Input> inputs;
  try {
    inputs = readCommands(a->varNames);
  } catch (const CommandError& e) {
    std::fprintf(stderr, "%s: error: <stdin>:%llu: %s\n", kProgram, static_cast<unsigned long long>(e.line),
                 e.message.c_str());
    return 1;
  }
  try {
    if (interrupted()) throw Interrupted();
    if (!a->opt.quiet) {
      std::printf("CombineSummaries %s\n* Line Numbers:      %s\n* Compression Level: %d\n\n", NPM_VERSION,
                  a->opt.lineNumbers ? "yes" : "no", a->opt.level);
    }
    combine(*a, inputs);
  } catch (const Interrupted&) {
    std::fprintf(stderr, "%s: interrupted; %s was not written\n", kProgram, a->outputName.c_str());
    return 130;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, e.what());
    return 1;
  }
  return 0;
}
