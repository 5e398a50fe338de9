// Logging as in the reference: "DD-Mon-YYYY HH:MM:SS.ffff: " timestamps, levels 0 (trace)
// to 5 (fatal), optional ANSI colours, to stderr or a file (truncated or appended).
#pragma once

#include <cstdio>
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

}  // namespace npm::log
