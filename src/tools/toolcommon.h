// Pieces shared by the result tools (createsummary, combinesummaries, extractvectors,
// getabstime, runtimeestimator): command-line parsing in the reference's style, the
// quoting rules of the stdin command languages, number-aware ordering, the number of
// worker threads and progress reporting.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/compression.h"
#include "common/fileio.h"
#include "common/thread_pool.h"

namespace npm::tools {

// ------------------------------------------------------------ command line

// One option of a program. `shortName` 0 = long only. Long names are matched with one or
// two dashes, exactly or by an unambiguous prefix (as getopt_long_only); short options
// may be clustered (-bq) and take their value attached (-c9) or as the next argument.
struct OptionSpec {
  const char* longName;
  char shortName;
  bool hasArgument;
  int id;
};

struct ParsedOption {
  int id;
  std::string value;
  std::string spelling;  // as given, for messages
};

class UsageError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Parses argv; options and positional arguments may be mixed ("--" ends options).
// Throws UsageError with a one-line message.
void parseCommandLine(int argc, char** argv, const std::vector<OptionSpec>& specs, std::vector<ParsedOption>& options,
                      std::vector<std::string>& positional);

// Runs a tool's own command-line parser `parse`, which yields nullopt once it has answered
// --help or --version. A UsageError becomes one line "PROGRAM: message" on standard error (the
// options are in --help; scripts log what went wrong). Returns the exit status to end with (0
// or 1), or nullopt with the arguments in `arguments`.
template <class Arguments, class Parse>
std::optional<int> parseOrExit(const char* program, std::optional<Arguments>& arguments, Parse parse) {
  try {
    arguments = parse();
    return arguments ? std::nullopt : std::optional<int>(0);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

// Parses an integer in [min, max]; throws UsageError naming `what` otherwise.
long parseInteger(const std::string& text, long min, long max, const std::string& what);

// Compression of an output file (common/compression.h: also compressionForName(), the
// compression an output name asks for).
using npm::Compression;
// "bzip2", "gzip" or "none" (as given to --compression=); throws UsageError otherwise.
Compression parseCompression(const std::string& text);
const char* compressionName(Compression c);    // "bzip2", "gzip", "none"
const char* compressionSuffix(Compression c);  // ".bz2", ".gz", ""

// Options of every program that writes a table (ids shared, so one handler serves all).
enum OutputOptionId {
  kOptCompress = 1000,
  kOptSeparator,
  kOptLineNumbers,
  kOptNoLineNumbers,
  kOptQuiet,
  kOptJobs,
  kOptCompression
};
struct OutputOptions {
  int level = 9;
  Compression compression = Compression::kBzip2;  // --compression= (level 0 = none)
  std::string separator = "\t";
  bool separatorGiven = false;
  bool lineNumbers = false;
  bool quiet = false;
  unsigned jobs = 0;  // 0 = number of CPUs
  unsigned threads() const;
};
// Applies `o` if it is one of the OutputOptionId options (compression levels from
// `minLevel` to 9); returns false otherwise. Throws UsageError for bad values.
bool applyOutputOption(const ParsedOption& o, OutputOptions& options, int minLevel);

// "Wrote N lines (in -> out - x%)" as the reference prints it.
void printWrote(std::uint64_t lines, std::uint64_t bytesIn, std::uint64_t bytesOut);

// ------------------------------------------------------------ values, quoting

// Offset of the first byte of `text` that is not part of well-formed UTF-8 (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF), npos if all of it is. Result tables
// are read as UTF-8 (R, Python), so a reader refuses other bytes with the file and line.
std::size_t invalidUtf8At(std::string_view text);
// `text` for a one-line message: control characters and bytes that are not UTF-8 as \xNN.
std::string printableText(std::string_view text);
// What is wrong with a line that is not UTF-8 ("not UTF-8 text at column 9 (...)", for
// "FILE:LINE: ..."); nullopt if it is UTF-8.
std::optional<std::string> notUtf8(std::string_view line);

// Splits a values/names string into whitespace-separated fields; "..." groups a field
// (quotes removed, \ escapes the next character). Returns nullopt if quotes do not balance
// or the string ends in a lone backslash.
std::optional<std::vector<std::string>> splitFields(std::string_view text);

// The reference's rule for --varnames=/--values=: if the whole argument is one quoted
// string ("a b c"), the outer quotes are removed.
std::string stripOuterQuotes(std::string_view text);

// A whole string as a number (decimal or exponent form, "inf"; "nan" only if allowNan, as
// OMNeT++ writes it for empty statistics); a leading '+' and surrounding blanks are allowed.
bool parseNumber(std::string_view text, double& value, bool allowNan = false);

// Total order that compares whitespace-separated fields numerically when both are
// numbers, and as strings otherwise ("2" < "10", "a" < "b"); equal-valued but differently
// written numbers ("1.0", "1") fall back to the text, so distinct strings never tie.
bool numericAwareLess(std::string_view a, std::string_view b);

// Quotes a field for strict CSV (RFC 4180 with the given separator): numbers stay bare,
// everything else is put in double quotes with inner quotes doubled.
std::string csvField(std::string_view text, std::string_view separator, bool forceQuotes = false);

// "%lf" (fixed, 6 decimals) without printf.
void appendFixed6(std::string& out, double value);

// ------------------------------------------------------------ threads

using npm::ThreadPool;  // common/thread_pool.h

// Number of worker threads: -j/--jobs if given, else the number of online CPUs.
unsigned defaultThreads();

// ------------------------------------------------------------ output

// Output files are OutputFile (common/fileio.h): plain, bzip2 or gzip, compressed on the
// tool's pool with compressInParallel(pool); whole texts with compressText()
// (common/compression.h).

// ------------------------------------------------------------ progress

// "createsummary: 120/600 files, 54.2 files/s" on stderr: rewritten in place on a terminal,
// otherwise one line every 10 s. Silent if disabled.
class Progress {
public:
  Progress(std::string program, bool enabled);
  void update(std::uint64_t done, std::uint64_t total, const char* unit, bool force = false);
  // Final line, only if progress was shown at all (short runs stay quiet).
  void finish(std::uint64_t done, std::uint64_t total, const char* unit);

private:
  std::string program_;
  bool enabled_;
  bool tty_;
  bool shown_ = false;
  std::string unit_;
  std::chrono::steady_clock::time_point start_, last_;
};

std::string joinPath(const std::string& directory, const std::string& file);

// SIGINT/SIGTERM/SIGHUP set a flag instead of killing the program, so that it can stop at
// the next check and discard unfinished outputs (their temporary files). Blocking reads
// of stdin return (no SA_RESTART). Programs exit with 130 then.
void installInterruptHandler();
bool interrupted();

}  // namespace npm::tools
