// Logging as in the reference: "DD-Mon-YYYY HH:MM:SS.ffff: " timestamps, levels 0 (trace)
// to 5 (fatal), optional ANSI colours, to stderr or a file (truncated or appended).
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <mutex>
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

// A repeated event that a peer can cause at will (refused connections, sessions and flows,
// garbage, failed handshakes): the first one of an interval is said in full, the others of the
// interval are only counted and said in one summary line once it is over ("WHAT: N more in the
// last 10 s, M in all"), at the next event or at flushAll() (the passive calls it every
// second), so that a flood of any kind costs the log at most two lines per interval. Every
// refusal of the passive goes through one. Thread-safe.
class Repeated {
public:
  static constexpr std::chrono::seconds kInterval{10};
  // `what` names the event in the summary line, said at `level` (that of the full lines).
  explicit Repeated(std::string what, int level = Warning, std::chrono::steady_clock::duration interval = kInterval);
  ~Repeated();  // says what is left unsaid
  Repeated(const Repeated&) = delete;
  Repeated& operator=(const Repeated&) = delete;

  // Counts one more; true when this one is worth a line (the first of an interval).
  bool next();
  std::uint64_t count() const;
  // Counts one more and writes `line` at the level given when it is worth a line.
  void say(const std::string& line) {
    if (next()) write(level_, line);
  }
  // Says the summary of an interval that is over.
  void flush();
  // flush() of every Repeated in the process.
  static void flushAll();

private:
  void summarise();  // with m_ held

  mutable std::mutex m_;
  const std::string what_;
  const int level_;
  const std::chrono::steady_clock::duration interval_;
  std::chrono::steady_clock::time_point said_{};  // when the interval's line was said
  bool open_ = false;                             // an interval is running
  std::uint64_t count_ = 0, unsaid_ = 0;
};

}  // namespace npm::log
