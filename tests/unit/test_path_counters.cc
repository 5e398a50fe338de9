// The table of per-path figures (measure/path_counters.h) against what it drives: its own
// consistency, the per-path vector's header and rows, the scalar rows, and the JSON Schema of
// the result document (src/app/schema), whose path and connection objects must name exactly the
// table's keys for each.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/fileio.h"
#include "measure/json_report.h"
#include "measure/path_counters.h"
#include "measure/results.h"
#include "measure/scalar_rows.h"

using namespace npm;
using namespace npm::measure;

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The JSON text right after `from` up to the end of the value that starts there (an object or
// array: to its closing bracket), strings skipped whole.
std::size_t valueEnd(const std::string& text, std::size_t from) {
  int depth = 0;
  for (std::size_t i = from; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  FAIL("unbalanced JSON");
  return text.size();
}

// The members of the object text[begin, end) at its own level: key -> the value's text.
std::map<std::string, std::string> members(const std::string& text, std::size_t begin, std::size_t end) {
  std::map<std::string, std::string> out;
  std::size_t i = text.find('{', begin) + 1;
  while (i < end) {
    const std::size_t quote = text.find('"', i);
    if (quote == std::string::npos || quote >= end) break;
    const std::size_t close = text.find('"', quote + 1);
    const std::string key = text.substr(quote + 1, close - quote - 1);
    std::size_t v = text.find(':', close) + 1;
    while (text[v] == ' ' || text[v] == '\n') ++v;
    std::size_t ve;
    if (text[v] == '{' || text[v] == '[') {
      ve = valueEnd(text, v);
    } else if (text[v] == '"') {
      ve = text.find('"', v + 1) + 1;
    } else {
      ve = text.find_first_of(",}", v);
    }
    out[key] = text.substr(v, ve - v);
    i = text.find_first_of(",}", ve);
    if (i == std::string::npos || text[i] == '}') break;
    ++i;
  }
  return out;
}

std::map<std::string, std::string> object(const std::string& text) { return members(text, 0, text.size()); }

}  // namespace

TEST_CASE("path counters: one line each, names unique, vector-only figures named nowhere else") {
  std::set<std::string_view> columns(kPathIdentityColumns.begin(), kPathIdentityColumns.end()), scalars, keys;
  std::vector<double transport::PathSample::*> fields;
  for (const PathCounter& c : kPathCounters) {
    INFO(c.column);
    CHECK(columns.insert(c.column).second);
    CHECK(std::find(fields.begin(), fields.end(), c.field) == fields.end());
    fields.push_back(c.field);
    const bool vectorOnly = c.kind == PathSummaryKind::kVectorOnly;
    CHECK(c.scalar.empty() == vectorOnly);
    CHECK(c.json.empty() == vectorOnly);
    CHECK((c.scope == 0) == vectorOnly);
    CHECK_FALSE(c.unit.empty());
    if (!vectorOnly) {
      CHECK(scalars.insert(c.scalar).second);
      CHECK(keys.insert(c.json).second);
      if (c.kind == PathSummaryKind::kMean) CHECK((c.scalar.substr(0, 5) == "Mean " && c.json.substr(0, 5) == "mean_"));
    }
  }
}

TEST_CASE("path counters: the per-path vector's header and a row follow the table") {
  const auto path = std::filesystem::temp_directory_path() / "npm-path-counters.vec";
  transport::PathSample s;
  s.id = 3;
  double v = 1.0;
  for (const PathCounter& c : kPathCounters) s.*c.field = v++;
  s.lost = transport::PathSample::kNone;  // NA
  {
    PathVectorWriter w(openResultFile(path.string()));
    w.rows(2'000'000, 1'000'000, {s});
    w.flush();
    w.file().commit();
  }
  std::istringstream text(readFile(path.string()));
  std::filesystem::remove(path);
  std::string header, row;
  std::getline(text, header);
  std::getline(text, row);
  std::vector<std::string> names, cells;
  for (std::istringstream h(header); std::getline(h, names.emplace_back(), '\t');) {}
  names.pop_back();
  for (std::istringstream r(row); std::getline(r, cells.emplace_back(), '\t');) {}
  cells.pop_back();
  REQUIRE(names.size() == kPathIdentityColumns.size() + kPathCounterCount);
  REQUIRE(cells.size() == names.size() + 1);  // the row number has no name
  for (std::size_t i = 0; i < kPathCounterCount; ++i) {
    const PathCounter& c = kPathCounters[i];
    INFO(c.column);
    CHECK(names[kPathIdentityColumns.size() + i] == c.column);
    const std::string& cell = cells[1 + kPathIdentityColumns.size() + i];
    if (c.field == &transport::PathSample::lost) {
      CHECK(cell == "NA");
    } else {
      CHECK(std::stod(cell) == Approx(static_cast<double>(i + 1)));
      CHECK((cell.find('.') == std::string::npos) == (c.decimals == 0));
    }
  }
}

TEST_CASE("path counters: every summarised figure is a scalar row, means before counters, in table order") {
  PathSummary summary;
  summary.id = 1;
  transport::PathSample a, b;
  double v = 10.0;
  for (const PathCounter& c : kPathCounters) a.*c.field = v, b.*c.field = 2 * v, v += 10.0;
  summary.add(a);
  summary.restart();  // the warm-up ends after a: means from b alone, counters less a's
  summary.add(b);
  MeasurementResult r;
  FlowResult f;
  f.paths = {summary};
  r.flows.push_back(f);
  std::vector<std::string> expected = {"Samples"};
  for (const PathSummaryKind kind : {PathSummaryKind::kMean, PathSummaryKind::kCounter}) {
    forEachPathCounter(kind, [&](std::size_t, const PathCounter& c) { expected.emplace_back(c.scalar); });
  }
  std::vector<std::string> names;
  for (const ScalarRow& row : scalarRows("active", r)) {
    if (row.object != "netPerfMeter.active.flow[0].path[1]") continue;
    names.push_back(row.name);
    for (const PathCounter& c : kPathCounters) {
      if (row.name != c.scalar) continue;
      INFO(c.scalar);
      const double value = std::stod(row.value);
      CHECK(value == Approx(c.kind == PathSummaryKind::kMean ? b.*c.field : b.*c.field - a.*c.field));
    }
  }
  CHECK(names == expected);
}

TEST_CASE("path counters: the result schema's path and connection objects name the table's keys") {
  const std::string schema = readFile(std::string(NPM_SCHEMA_DIR) + "/netperfmeter-result.schema.json");
  const auto defs = object(object(schema).at("$defs"));
  std::set<std::string> path = {"path_id", "samples"}, connection = {"samples"};
  std::map<std::string, PathSummaryKind> kinds;
  for (const PathCounter& c : kPathCounters) {
    if (c.scope & kInPath) path.emplace(c.json);
    if (c.scope & kInConnection) connection.emplace(c.json);
    if (!c.json.empty()) kinds[std::string(c.json)] = c.kind;
  }
  for (const auto& [name, keys] : {std::pair{"path", path}, std::pair{"connection", connection}}) {
    INFO(name);
    const auto properties = object(object(defs.at(name)).at("properties"));
    std::set<std::string> named;
    for (const auto& [key, value] : properties) {
      named.insert(key);
      // Counters are counts, means numbers.
      if (kinds.count(key) != 0) {
        INFO(key);
        CHECK((value.find("#/$defs/count") != std::string::npos) == (kinds[key] == PathSummaryKind::kCounter));
      }
    }
    CHECK(named == keys);
  }
}
