#include "common/scalar_line.h"

#include <vector>

#include "common/text.h"

namespace npm {

namespace {

bool blank(char c) { return c == ' ' || c == '\t'; }

std::string_view withoutBlanks(std::string_view s) {
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && (blank(s.back()) || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// "flow[N]" (`kind` "flow") -> N, for 1 to 18 digits.
std::optional<std::uint64_t> indexOf(std::string_view part, std::string_view kind) {
  if (part.size() < kind.size() + 3 || part.substr(0, kind.size()) != kind || part[kind.size()] != '[' ||
      part.back() != ']') {
    return std::nullopt;
  }
  const std::string_view digits = part.substr(kind.size() + 1, part.size() - kind.size() - 2);
  if (digits.size() > 18) return std::nullopt;
  std::uint64_t n = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    n = 10 * n + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

}  // namespace

bool startsWithKeyword(std::string_view line, std::string_view keyword) {
  while (!line.empty() && blank(line.front())) line.remove_prefix(1);
  return line.size() > keyword.size() && line.substr(0, keyword.size()) == keyword && blank(line[keyword.size()]);
}

std::optional<ScalarLine> scalarLine(std::string_view line) {
  if (!startsWithKeyword(line, "scalar")) return std::nullopt;
  std::string_view rest = line.substr(line.find("scalar") + 6);
  ScalarLine out;
  if (!nextQuotedWord(rest, out.object)) throw ScalarLineError("object name expected after \"scalar\"");
  if (!nextQuotedWord(rest, out.name)) throw ScalarLineError("statistic name expected after the object");
  rest = withoutBlanks(rest);
  if (rest.empty()) throw ScalarLineError("value expected after the statistic name");
  out.value = std::string(rest);
  return out;
}

ScalarOrigin scalarOrigin(std::string_view object) {
  std::vector<std::string_view> parts;
  for (;;) {
    const auto dot = object.find('.');
    parts.push_back(object.substr(0, dot));
    if (dot == std::string_view::npos) break;
    object.remove_prefix(dot + 1);
  }
  ScalarOrigin origin;
  if (parts.size() < 2 || (parts[1] != "active" && parts[1] != "passive")) return origin;
  origin.side = std::string(parts[1]);
  if (parts.size() > 2) origin.flow = indexOf(parts[2], "flow");
  if (origin.flow && parts.size() > 3) {
    origin.path = indexOf(parts[3], "path");
    origin.connection = parts[3] == "connection";
  }
  return origin;
}

}  // namespace npm
