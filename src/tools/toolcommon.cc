#include "tools/toolcommon.h"

#include <bzlib.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace npm::tools {

// ------------------------------------------------------------ command line

void parseCommandLine(int argc, char** argv, const std::vector<OptionSpec>& specs,
                      std::vector<ParsedOption>& options, std::vector<std::string>& positional) {
  auto findLong = [&](std::string_view name) -> const OptionSpec* {
    const OptionSpec* prefixMatch = nullptr;
    int prefixMatches = 0;
    for (const auto& s : specs) {
      if (s.longName == nullptr) continue;
      std::string_view ln(s.longName);
      if (ln == name) return &s;
      if (!name.empty() && ln.substr(0, name.size()) == name) {
        if (prefixMatch == nullptr || prefixMatch->id != s.id) ++prefixMatches;
        prefixMatch = &s;
      }
    }
    return prefixMatches == 1 ? prefixMatch : nullptr;
  };
  auto findShort = [&](char c) -> const OptionSpec* {
    for (const auto& s : specs) {
      if (s.shortName == c) return &s;
    }
    return nullptr;
  };

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
    const auto eq = body.find('=');
    const std::string name = body.substr(0, eq);
    const OptionSpec* spec = nullptr;
    if (doubleDash || body.size() > 1) {
      // -x alone is always the short option; longer words are long options first.
      spec = findLong(name);
      if (spec == nullptr && doubleDash) {
        throw UsageError("unknown or ambiguous option " + arg);
      }
    }
    if (spec != nullptr) {
      ParsedOption o{spec->id, {}, "--" + std::string(spec->longName)};
      if (spec->hasArgument) {
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
      options.push_back(std::move(o));
      continue;
    }
    // Cluster of short options.
    for (std::size_t k = 0; k < body.size(); ++k) {
      const OptionSpec* s = findShort(body[k]);
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
        break;
      }
      options.push_back(std::move(o));
    }
  }
}

long parseInteger(const std::string& text, long min, long max, const std::string& what) {
  long value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < min || value > max) {
    throw UsageError("invalid " + what + " \"" + text + "\" (expected " + std::to_string(min) +
                     "…" + std::to_string(max) + ")");
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
    case kOptJobs:
      options.jobs = static_cast<unsigned>(parseInteger(o.value, 1, 1024, "number of jobs"));
      return true;
    default: return false;
  }
}

unsigned OutputOptions::threads() const { return jobs > 0 ? jobs : defaultThreads(); }

bool wantsBz2(std::string_view name) {
  return name.size() >= 4 &&
         (name.substr(name.size() - 4) == ".bz2" || name.substr(name.size() - 4) == ".BZ2");
}

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
  const auto [ptr, ec] =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::fixed, 6);
  if (ec == std::errc()) {
    out.append(buffer, ptr);
  } else {
    const int n = std::snprintf(buffer, sizeof(buffer), "%lf", value);
    out.append(buffer, static_cast<std::size_t>(n > 0 ? n : 0));
  }
}

// ------------------------------------------------------------ threads

ThreadPool::ThreadPool(unsigned threads) {
  if (threads < 1) threads = 1;
  for (unsigned i = 0; i < threads; ++i) {
    workers_.emplace_back([this] {
      for (;;) {
        std::function<void()> job;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
          if (queue_.empty()) return;
          job = std::move(queue_.front());
          queue_.pop_front();
        }
        job();
      }
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

unsigned defaultThreads() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned>(n) : 1U;
}

// ------------------------------------------------------------ output

std::string bz2Compress(std::string_view text, int level) {
  if (level < 1) level = 1;
  if (level > 9) level = 9;
  std::string out;
  out.resize(text.size() + text.size() / 100 + 700);
  unsigned int length = static_cast<unsigned>(out.size());
  const int rc = BZ2_bzBuffToBuffCompress(out.data(), &length, const_cast<char*>(text.data()),
                                          static_cast<unsigned>(text.size()), level, 0, 30);
  if (rc != BZ_OK) throw FileError("bzip2 compression failed (code " + std::to_string(rc) + ")");
  out.resize(length);
  return out;
}

namespace {
constexpr std::size_t kChunk = 850 * 1000;  // below one 900k bzip2 block
}

ParallelOutput::ParallelOutput(const std::string& path, bool compress, int level, ThreadPool* pool)
    : file_(path, false, 0), compress_(compress), level_(level), pool_(pool) {
  chunk_.reserve(compress ? kChunk + 65536 : 0);
}

void ParallelOutput::write(std::string_view text) {
  bytesIn_ += text.size();
  if (!compress_) {
    file_.write(text);
    bytesOut_ += text.size();
    return;
  }
  chunk_.append(text);
  if (chunk_.size() >= kChunk) flushChunk(false);
}

void ParallelOutput::flushChunk(bool final) {
  if (chunk_.empty() && !(final && bytesIn_ == 0 && pending_.empty())) return;
  if (pool_ != nullptr) {
    auto future = pool_->submit([text = std::move(chunk_), level = level_] {
      return bz2Compress(text, level);
    });
    pending_.push_back(std::move(future));
    chunk_ = std::string();
    chunk_.reserve(final ? 0 : kChunk + 65536);
    drain(final ? 0 : pool_->size() * 2);
  } else {
    const std::string packed = bz2Compress(chunk_, level_);
    file_.write(packed);
    bytesOut_ += packed.size();
    chunk_.clear();
  }
}

void ParallelOutput::drain(std::size_t keep) {
  while (pending_.size() > keep) {
    const std::string packed = pending_.front().get();
    pending_.pop_front();
    file_.write(packed);
    bytesOut_ += packed.size();
  }
}

void ParallelOutput::commit() {
  if (compress_) {
    flushChunk(true);
    drain(0);
  }
  file_.commit();
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
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total), unit,
               rate, unit, tty_ ? "\x1b[0K" : "\n");
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

}  // namespace npm::tools
