// The one C++ reading of a scalar file's lines (common/scalar_line.h): the fields of a `scalar`
// line and where its object belongs, as the active (its passive's upload) and the tools read them.
#include <catch2/catch.hpp>

#include "common/scalar_line.h"

using namespace npm;

TEST_CASE("scalar line: object, name and the value as written") {
  const auto s = scalarLine("scalar \"netPerfMeter.active.flow[3]\" \"Transmitted Bytes\"      1000000\r");
  REQUIRE(s);
  CHECK(s->object == "netPerfMeter.active.flow[3]");
  CHECK(s->name == "Transmitted Bytes");
  CHECK(s->value == "1000000");
  // Unquoted words and blanks before the keyword (the reference's older files, OMNeT++).
  const auto t = scalarLine("\t scalar net.host rtt  0.5e-3 ");
  REQUIRE(t);
  CHECK(t->object == "net.host");
  CHECK(t->name == "rtt");
  CHECK(t->value == "0.5e-3");
  // Quotes escape with a backslash.
  const auto q = scalarLine(R"(scalar "a \"b\"" "c d" nan)");
  REQUIRE(q);
  CHECK(q->object == "a \"b\"");
  CHECK(q->name == "c d");
  CHECK(q->value == "nan");
}

TEST_CASE("scalar line: other lines are none of its business, a broken one is said") {
  for (const char* other :
       {"", "# scalar \"a\" \"b\" 1", "run 1", "statistic a b", "scalars a b 1", "scalar", "attr scalar x"}) {
    CHECK_FALSE(scalarLine(other));
  }
  CHECK_THROWS_WITH(scalarLine("scalar "), "object name expected after \"scalar\"");
  CHECK_THROWS_WITH(scalarLine("scalar \"unterminated"), "object name expected after \"scalar\"");
  CHECK_THROWS_WITH(scalarLine("scalar \"a\" \"b"), "statistic name expected after the object");
  CHECK_THROWS_WITH(scalarLine("scalar \"a\" \"b\"   \r"), "value expected after the statistic name");
  CHECK(startsWithKeyword("  run 4", "run"));
  CHECK_FALSE(startsWithKeyword("runs 4", "run"));
  CHECK_FALSE(startsWithKeyword("run", "run"));
}

TEST_CASE("scalar origin: side, flow, path and connection from the object") {
  auto o = scalarOrigin("netPerfMeter.active.flow[3].path[1]");
  CHECK(o.side == "active");
  CHECK(o.flow == 3u);
  CHECK(o.path == 1u);
  CHECK_FALSE(o.connection);
  o = scalarOrigin("netPerfMeter.passive.flow[12].connection");
  CHECK(o.side == "passive");
  CHECK(o.flow == 12u);
  CHECK_FALSE(o.path);
  CHECK(o.connection);
  o = scalarOrigin("netPerfMeter.passive.total");
  CHECK(o.side == "passive");
  CHECK_FALSE(o.flow);
  o = scalarOrigin("scenario.host.flow[1]");
  CHECK(o.side.empty());
  CHECK_FALSE(o.flow);
  // An index that is not 1 to 18 digits is no index: the object is not a flow's or a path's.
  CHECK_FALSE(scalarOrigin("netPerfMeter.active.flow[]").flow);
  CHECK_FALSE(scalarOrigin("netPerfMeter.active.flow[1x]").flow);
  CHECK_FALSE(scalarOrigin("netPerfMeter.active.flow[1234567890123456789]").flow);
  CHECK(scalarOrigin("netPerfMeter.active.flow[123456789012345678]").flow == 123456789012345678u);
  CHECK_FALSE(scalarOrigin("netPerfMeter.active.flow[1].path[-1]").path);
  // A path is a flow's: without the flow there is none.
  CHECK_FALSE(scalarOrigin("netPerfMeter.active.path[1]").path);
}
