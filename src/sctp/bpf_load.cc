// libbpf loads with the verifier's verdict in the error (bpf_load.h).
#include "sctp/bpf_load.h"

#include <bpf/libbpf.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>

#include "common/text.h"

namespace npm::sctp {

namespace {

// libbpf's message callback is one for the whole process: loads take turns, and the
// callback appends to the messages of the load that runs.
std::mutex gLoadMutex;
std::string* gMessages = nullptr;

// Warnings only: the verifier's log comes as one, and libbpf's information is noise here.
int captureMessage(libbpf_print_level level, const char* format, va_list arguments) {
  if (level != LIBBPF_WARN || gMessages == nullptr) return 0;
  va_list measure;
  va_copy(measure, arguments);
  const int length = std::vsnprintf(nullptr, 0, format, measure);
  va_end(measure);
  if (length <= 0) return 0;
  const std::size_t at = gMessages->size();
  gMessages->resize(at + static_cast<std::size_t>(length) + 1);
  std::vsnprintf(gMessages->data() + at, static_cast<std::size_t>(length) + 1, format, arguments);
  gMessages->pop_back();  // vsnprintf's terminating NUL
  return length;
}

}  // namespace

std::string verifierLogTail(const std::string& messages, std::size_t lines) {
  constexpr std::string_view kBegin = "-- BEGIN PROG LOAD LOG --";
  constexpr std::string_view kEnd = "-- END PROG LOAD LOG --";
  const auto begin = messages.rfind(kBegin);
  if (begin == std::string::npos || lines == 0) return {};
  auto from = messages.find('\n', begin);
  if (from == std::string::npos) return {};
  ++from;
  auto end = messages.find(kEnd, from);
  if (end == std::string::npos) end = messages.size();
  std::deque<std::string> kept;
  while (from < end) {
    auto eol = messages.find('\n', from);
    if (eol == std::string::npos || eol > end) eol = end;
    if (auto line = collapseBlanks(std::string_view(messages).substr(from, eol - from)); !line.empty()) {
      kept.push_back(std::move(line));
      if (kept.size() > lines) kept.pop_front();
    }
    from = eol + 1;
  }
  std::string tail;
  for (const auto& line : kept) tail += (tail.empty() ? "" : " | ") + line;
  return tail;
}

Result<void> loadBpf(const std::string& what, const std::function<int()>& load) {
  std::string messages;
  int result = 0;
  {
    std::lock_guard lock(gLoadMutex);
    gMessages = &messages;
    const libbpf_print_fn_t previous = libbpf_set_print(captureMessage);
    result = load();
    libbpf_set_print(previous);
    gMessages = nullptr;
  }
  if (result == 0) return {};
  std::string error = "cannot load " + what + ": " + std::strerror(result < 0 ? -result : result);
  if (const auto tail = verifierLogTail(messages, kVerifierLogLines); !tail.empty())
    error += " (verifier: " + tail + ")";
  return Failure{std::move(error)};
}

}  // namespace npm::sctp
