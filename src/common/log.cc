#include "common/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <cstdarg>
#include <algorithm>
#include <ctime>
#include <vector>

#include "common/handle.h"

namespace npm::log {

namespace {
int gLevel = Info;
bool gColour = true;
// Never destroyed: threads may still log while static objects go (libc flushes it at exit).
UniqueFile& gFile = *new UniqueFile;  // none: stderr

std::FILE* out() { return gFile ? gFile.get() : stderr; }

const char* colourOf(int level) {
  switch (level) {
    case Trace: return "\x1b[37m";
    case Debug: return "\x1b[36m";
    case Info: return "\x1b[32m";
    case Warning: return "\x1b[33m";
    default: return "\x1b[31m";
  }
}
const char* prefixOf(int level) {
  switch (level) {
    case Warning: return "WARNING: ";
    case Error: return "ERROR: ";
    case Fatal: return "FATAL: ";
    default: return "";
  }
}
}  // namespace

void setLevel(int level) { gLevel = level < Trace ? Trace : (level > Fatal ? Fatal : level); }
int level() { return gLevel; }
void setColour(bool on) { gColour = on; }

bool setFile(const std::string& path, bool append) {
  UniqueFile f(std::fopen(path.c_str(), append ? "a" : "w"));
  if (!f) return false;
  std::setvbuf(f.get(), nullptr, _IOLBF, 0);
  gFile = std::move(f);
  return true;
}

bool enabled(int level) { return level >= gLevel; }

void write(int level, const std::string& text) {
  if (!enabled(level)) return;
  timeval tv;
  ::gettimeofday(&tv, nullptr);
  tm local;
  ::localtime_r(&tv.tv_sec, &local);
  char stamp[64];
  const std::size_t n = std::strftime(stamp, sizeof(stamp), "%d-%b-%Y %H:%M:%S", &local);
  std::snprintf(stamp + n, sizeof(stamp) - n, ".%04ld", static_cast<long>(tv.tv_usec / 100));
  const bool colour = gColour && !gFile && ::isatty(STDERR_FILENO);
  std::fprintf(out(), "%s%s: %s%s%s\n", colour ? colourOf(level) : "", stamp, prefixOf(level), text.c_str(),
               colour ? "\x1b[0m" : "");
  std::fflush(out());
}

void printf(int level, const char* format, ...) {
  if (!enabled(level)) return;
  char buffer[2048];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  write(level, buffer);
}

namespace {
std::mutex& registryMutex() {
  static std::mutex& m = *new std::mutex;  // never destroyed: Repeated members of statics go late
  return m;
}
std::vector<Repeated*>& registry() {
  static std::vector<Repeated*>& r = *new std::vector<Repeated*>;
  return r;
}
}  // namespace

Repeated::Repeated(std::string what, int level, std::chrono::steady_clock::duration interval)
    : what_(std::move(what)), level_(level), interval_(interval) {
  std::lock_guard lock(registryMutex());
  registry().push_back(this);
}

Repeated::~Repeated() {
  {
    std::lock_guard lock(registryMutex());
    auto& r = registry();
    r.erase(std::remove(r.begin(), r.end(), this), r.end());
  }
  std::lock_guard lock(m_);
  summarise();
}

void Repeated::summarise() {
  if (unsaid_ > 0) {
    const auto seconds = std::chrono::duration_cast<std::chrono::duration<double>>(interval_).count();
    char text[64];
    std::snprintf(text, sizeof(text), "%g", seconds);
    write(level_, what_ + ": " + std::to_string(unsaid_) + " more in the last " + text + " s (" +
                      std::to_string(count_) + " in all)");
  }
  unsaid_ = 0;
  open_ = false;
}

bool Repeated::next() {
  std::lock_guard lock(m_);
  ++count_;
  const auto now = std::chrono::steady_clock::now();
  if (open_ && now - said_ < interval_) {
    ++unsaid_;
    return false;
  }
  summarise();
  said_ = now;
  open_ = true;
  return true;
}

std::uint64_t Repeated::count() const {
  std::lock_guard lock(m_);
  return count_;
}

void Repeated::flush() {
  std::lock_guard lock(m_);
  if (open_ && std::chrono::steady_clock::now() - said_ >= interval_) summarise();
}

void Repeated::flushAll() {
  std::lock_guard lock(registryMutex());
  for (Repeated* r : registry()) r->flush();
}

}  // namespace npm::log
