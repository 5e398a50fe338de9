// Logging as in the reference: "DD-Mon-YYYY HH:MM:SS.ffff: " timestamps, levels 0 (trace)
// to 5 (fatal), optional ANSI colours, to stderr or a file (truncated or appended).
#pragma once

#include <cstdio>
#include <cstdint>
#include <string>

namespace npm::log {

enum Level : int { Trace = 0, Debug = 1, Info = 2, Warning = 3, Error = 4, Fatal = 5 };

void setLevel(int level);
int level();
void setColour(bool on);
// Redirects the log to a file; false (with errno set) if it cannot be opened.
bool setFile(const std::string& path, bool append);

bool enabled(int level);
void write(int level, const std::string& text);
void printf(int level, const char* format, ...) __attribute__((format(printf, 2, 3)));

inline void trace(const std::string& t) { write(Trace, t); }
inline void debug(const std::string& t) { write(Debug, t); }
inline void info(const std::string& t) { write(Info, t); }
inline void warning(const std::string& t) { write(Warning, t); }
inline void error(const std::string& t) { write(Error, t); }
inline void fatal(const std::string& t) { write(Fatal, t); }

// A repeated event that a peer can cause at will (refused connections, garbage, failed
// handshakes): counted, and said for the first `first` occurrences and then for the 16th,
// 32nd, 64th, ... one, so that a flood does not flood the log. Not thread-safe: one per thread.
class Repeated {
public:
  explicit Repeated(std::uint64_t first = 10) : first_(first) {}
  // Counts one more; true when this one is worth a line.
  bool next() {
    ++count_;
    return count_ <= first_ || (count_ & (count_ - 1)) == 0;
  }
  std::uint64_t count() const { return count_; }

private:
  std::uint64_t first_;
  std::uint64_t count_ = 0;
};

}  // namespace npm::log
