#include "tools/toolcommon.h"

#include "common/text.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "common/options.h"

namespace npm::tools {

// ------------------------------------------------------------ command line

namespace {

// An abbreviation that fits several options still selects one of them if its name begins
// every other's: "-comp" stays --compress although --compression exists. Two names of one
// id ("split", "splitall") are one option.
const OptionSpec* findLong(const std::vector<OptionSpec>& specs, std::string_view name) {
  if (name.empty()) return nullptr;  // "--=x" names no option
  return options::findLongOption(
             std::span<const OptionSpec>(specs), name, options::Abbreviations::PreferBeginning,
             [](const OptionSpec& s) { return s.longName; },
             [](const OptionSpec& a, const OptionSpec& b) { return a.id == b.id; })
      .option;
}

const OptionSpec* findShort(const std::vector<OptionSpec>& specs, char c) {
  for (const auto& s : specs) {
    if (s.shortName == c) return &s;
  }
  return nullptr;
}

// The long option `spec` as given in argv[i] (`body`: without its dashes); a value that is
// the next argument moves `i` on.
ParsedOption takeLong(const OptionSpec& spec, const std::string& arg, const std::string& body, int argc, char** argv,
                      int& i) {
  const auto eq = body.find('=');
  ParsedOption o{spec.id, {}, "--" + std::string(spec.longName)};
  if (spec.hasArgument) {
    if (eq != std::string::npos) {
      o.value = body.substr(eq + 1);
    } else if (i + 1 < argc) {
      o.value = argv[++i];
    } else {
      throw UsageError("option " + arg + " needs a value");
    }
  } else if (eq != std::string::npos) {
    throw UsageError("option " + arg + " takes no value");
  }
  return o;
}

// A cluster of short options such as -bq, -c9, -c=9 or -c 9 (argv[i]; `body`: without the dash).
void takeShorts(const std::vector<OptionSpec>& specs, const std::string& arg, const std::string& body, int argc,
                char** argv, int& i, std::vector<ParsedOption>& options) {
  for (std::size_t k = 0; k < body.size(); ++k) {
    const OptionSpec* s = findShort(specs, body[k]);
    if (s == nullptr) throw UsageError("unknown option " + arg);
    ParsedOption o{s->id, {}, std::string("-") + body[k]};
    if (s->hasArgument) {
      if (k + 1 < body.size()) {
        o.value = body.substr(k + 1);
        if (!o.value.empty() && o.value[0] == '=') o.value.erase(0, 1);
      } else if (i + 1 < argc) {
        o.value = argv[++i];
      } else {
        throw UsageError("option -" + std::string(1, body[k]) + " needs a value");
      }
      options.push_back(std::move(o));
      return;
    }
    options.push_back(std::move(o));
  }
}

}  // namespace

void parseCommandLine(int argc, char** argv, const std::vector<OptionSpec>& specs, std::vector<ParsedOption>& options,
                      std::vector<std::string>& positional) {
  bool optionsEnded = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (optionsEnded || arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      optionsEnded = true;
      continue;
    }
    const bool doubleDash = arg[1] == '-';
    const std::string body = arg.substr(doubleDash ? 2 : 1);
    const OptionSpec* spec = nullptr;
    if (doubleDash || body.size() > 1) {
      // -x alone is always the short option; longer words are long options first.
      spec = findLong(specs, body.substr(0, body.find('=')));
      if (spec == nullptr && doubleDash) throw UsageError("unknown or ambiguous option " + arg);
    }
    if (spec != nullptr) {
      options.push_back(takeLong(*spec, arg, body, argc, argv, i));
    } else {
      takeShorts(specs, arg, body, argc, argv, i, options);
    }
  }
}

long parseInteger(const std::string& text, long min, long max, const std::string& what) {
  long value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < min || value > max) {
    throw UsageError("invalid " + what + " \"" + text + "\" (expected " + std::to_string(min) + "…" +
                     std::to_string(max) + ")");
  }
  return value;
}

bool applyOutputOption(const ParsedOption& o, OutputOptions& options, int minLevel) {
  switch (o.id) {
    case kOptCompress:
      options.level = static_cast<int>(parseInteger(o.value, minLevel, 9, "compression level"));
      return true;
    case kOptSeparator:
      if (o.value.empty()) throw UsageError("the separator must not be empty");
      options.separator = o.value;
      options.separatorGiven = true;
      return true;
    case kOptLineNumbers: options.lineNumbers = true; return true;
    case kOptNoLineNumbers: options.lineNumbers = false; return true;
    case kOptQuiet: options.quiet = true; return true;
    case kOptJobs: options.jobs = static_cast<unsigned>(parseInteger(o.value, 1, 1024, "number of jobs")); return true;
    case kOptCompression: options.compression = parseCompression(o.value); return true;
    default: return false;
  }
}

Compression parseCompression(const std::string& text) {
  if (text == "bzip2") return Compression::kBzip2;
  if (text == "gzip") return Compression::kGzip;
  if (text == "none") return Compression::kNone;
  throw UsageError("invalid compression \"" + text + "\" (expected bzip2, gzip or none)");
}

const char* compressionName(Compression c) {
  switch (c) {
    case Compression::kBzip2: return "bzip2";
    case Compression::kGzip: return "gzip";
    case Compression::kNone: break;
  }
  return "none";
}

const char* compressionSuffix(Compression c) {
  switch (c) {
    case Compression::kBzip2: return ".bz2";
    case Compression::kGzip: return ".gz";
    case Compression::kNone: break;
  }
  return "";
}

unsigned OutputOptions::threads() const { return jobs > 0 ? jobs : defaultThreads(); }

void printWrote(std::uint64_t lines, std::uint64_t bytesIn, std::uint64_t bytesOut) {
  std::printf("Wrote %llu lines", static_cast<unsigned long long>(lines));
  if (bytesIn > 0) {
    std::printf(" (%llu -> %llu - %.2f%%)", static_cast<unsigned long long>(bytesIn),
                static_cast<unsigned long long>(bytesOut),
                100.0 * static_cast<double>(bytesOut) / static_cast<double>(bytesIn));
  }
  std::printf("\n");
}

// ------------------------------------------------------------ values, quoting

bool parseNumber(std::string_view s, double& value, bool allowNan) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = b + s.size();
  if (*b == '+') ++b;
  const auto [ptr, ec] = std::from_chars(b, e, value);
  if (ec == std::errc::result_out_of_range && ptr == e) {
    // Denormals and huge values: strtod saturates like sscanf("%lf") did.
    value = std::strtod(std::string(s).c_str(), nullptr);
    return true;
  }
  return ec == std::errc() && ptr == e && (allowNan || !std::isnan(value));
}

std::optional<std::vector<std::string>> splitFields(std::string_view text) {
  std::vector<std::string> fields;
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    while (i < n && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i >= n) break;
    std::string field;
    bool quoted = false;
    while (i < n) {
      const char c = text[i];
      if (c == '\\') {
        if (i + 1 >= n) return std::nullopt;
        field += text[i + 1];
        i += 2;
        continue;
      }
      if (c == '"') {
        quoted = !quoted;
        ++i;
        continue;
      }
      if (!quoted && (c == ' ' || c == '\t')) break;
      field += c;
      ++i;
    }
    if (quoted) return std::nullopt;
    fields.push_back(std::move(field));
  }
  return fields;
}

std::string stripOuterQuotes(std::string_view text) {
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') {
    // Only if the first quote closes at the very end.
    for (std::size_t i = 1; i < text.size(); ++i) {
      if (text[i] == '\\') {
        ++i;
      } else if (text[i] == '"') {
        if (i == text.size() - 1) return std::string(text.substr(1, text.size() - 2));
        break;
      }
    }
  }
  return std::string(text);
}

namespace {

// Next whitespace-separated word (quotes group, kept in the text).
std::string_view nextWord(std::string_view& s) {
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  std::size_t j = i;
  bool quoted = false;
  while (j < s.size()) {
    if (s[j] == '\\' && j + 1 < s.size()) {
      j += 2;
      continue;
    }
    if (s[j] == '"') quoted = !quoted;
    if (!quoted && (s[j] == ' ' || s[j] == '\t')) break;
    ++j;
  }
  const std::string_view word = s.substr(i, j - i);
  s.remove_prefix(j);
  return word;
}

std::string_view unquote(std::string_view w) {
  if (w.size() >= 2 && w.front() == '"' && w.back() == '"') return w.substr(1, w.size() - 2);
  return w;
}

}  // namespace

bool numericAwareLess(std::string_view a, std::string_view b) {
  std::string_view ra = a, rb = b;
  for (;;) {
    const std::string_view rawA = nextWord(ra), rawB = nextWord(rb);
    if (rawA.empty() || rawB.empty()) {  // end of fields (a quoted "" is not empty here)
      if (rawA.empty() != rawB.empty()) return rawA.empty();
      break;
    }
    const std::string_view wa = unquote(rawA), wb = unquote(rawB);
    double na, nb;
    const bool numA = parseNumber(wa, na), numB = parseNumber(wb, nb);
    if (numA && numB) {
      if (na != nb) return na < nb;
    } else if (numA != numB) {
      return numA;  // numbers before words
    }
    if (wa != wb) {
      if (!(numA && numB)) return wa < wb;
    }
  }
  return a < b;  // same fields: fall back to the text so distinct strings never tie
}

std::string csvField(std::string_view text, std::string_view separator, bool forceQuotes) {
  double dummy;
  if (!forceQuotes && parseNumber(text, dummy) && text.find(separator) == std::string_view::npos) {
    return std::string(text);
  }
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

void appendFixed6(std::string& out, double value) {
  char buffer[512];
  const auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::fixed, 6);
  if (ec == std::errc()) {
    out.append(buffer, ptr);
  } else {
    const int n = std::snprintf(buffer, sizeof(buffer), "%lf", value);
    out.append(buffer, static_cast<std::size_t>(n > 0 ? n : 0));
  }
}

// ------------------------------------------------------------ threads

unsigned defaultThreads() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned>(n) : 1U;
}

// ------------------------------------------------------------ progress

Progress::Progress(std::string program, bool enabled)
    : program_(std::move(program)), enabled_(enabled), tty_(::isatty(STDERR_FILENO) == 1) {
  start_ = last_ = std::chrono::steady_clock::now();
}

void Progress::update(std::uint64_t done, std::uint64_t total, const char* unit, bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (unit_ != unit) {  // a new phase: its own rate
    unit_ = unit;
    start_ = now;
  }
  const auto interval = tty_ ? std::chrono::milliseconds(250) : std::chrono::milliseconds(10000);
  if (!force && now - last_ < interval) return;
  last_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
  std::fprintf(stderr, "%s%s: %llu/%llu %s, %.1f %s/s%s", tty_ ? "\r" : "", program_.c_str(),
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total), unit, rate, unit,
               tty_ ? "\x1b[0K" : "\n");
  std::fflush(stderr);
  shown_ = true;
}

void Progress::finish(std::uint64_t done, std::uint64_t total, const char* unit) {
  if (enabled_ && shown_) {
    update(done, total, unit, true);
    if (tty_) std::fputc('\n', stderr);
    std::fflush(stderr);
  }
  shown_ = false;
}

namespace {
volatile std::sig_atomic_t gInterrupted = 0;
extern "C" void onInterrupt(int) { gInterrupted = 1; }
}  // namespace

void installInterruptHandler() {
  struct sigaction sa {};
  sa.sa_handler = onInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

bool interrupted() { return gInterrupted != 0; }

std::string joinPath(const std::string& directory, const std::string& file) {
  if (file.empty() || file[0] == '/' || directory.empty() || directory == ".") return file;
  if (directory.back() == '/') return directory + file;
  return directory + "/" + file;
}

std::size_t invalidUtf8At(std::string_view text) {
  // The second byte's range for each lead byte (RFC 3629, section 4); later bytes are 80..BF.
  struct Lead {
    unsigned char low, high;
    std::size_t length;
  };
  auto lead = [](unsigned char c) -> Lead {
    if (c >= 0xC2 && c <= 0xDF) return {0x80, 0xBF, 2};
    if (c == 0xE0) return {0xA0, 0xBF, 3};
    if (c == 0xED) return {0x80, 0x9F, 3};
    if (c >= 0xE1 && c <= 0xEF) return {0x80, 0xBF, 3};
    if (c == 0xF0) return {0x90, 0xBF, 4};
    if (c >= 0xF1 && c <= 0xF3) return {0x80, 0xBF, 4};
    if (c == 0xF4) return {0x80, 0x8F, 4};
    return {0, 0, 0};
  };
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    const Lead l = lead(c);
    if (l.length == 0 || i + l.length > text.size()) return i;
    const auto second = static_cast<unsigned char>(text[i + 1]);
    if (second < l.low || second > l.high) return i;
    for (std::size_t k = 2; k < l.length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return i;
    }
    i += l.length;
  }
  return std::string_view::npos;
}

std::optional<std::string> notUtf8(std::string_view line) {
  const std::size_t bad = invalidUtf8At(line);
  if (bad == std::string_view::npos) return std::nullopt;
  return "not UTF-8 text at column " + std::to_string(bad + 1) + " (\"" +
         printableText(line.substr(bad > 20 ? bad - 20 : 0, 40)) + "\")";
}

std::string printableText(std::string_view text) {
  std::string out;
  while (!text.empty()) {
    const std::size_t bad = invalidUtf8At(text);
    out += npm::printable(text.substr(0, bad));
    if (bad == std::string_view::npos) break;
    char escaped[8];
    std::snprintf(escaped, sizeof(escaped), "\\x%02x", static_cast<unsigned char>(text[bad]));
    out += escaped;
    text.remove_prefix(bad + 1);
  }
  return out;
}

}  // namespace npm::tools
