// The JSON writer (escaping, numbers, structure) and the JSON report built from scalar rows.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "common/json.h"
#include "measure/json_report.h"
#include "measure/results.h"
#include "measure/scalar_rows.h"

using namespace npm;

TEST_CASE("json: strings are escaped, invalid UTF-8 becomes U+FFFD") {
  CHECK(json::quote("plain") == "\"plain\"");
  CHECK(json::quote("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(json::quote("\b\f\n\r\t") == "\"\\b\\f\\n\\r\\t\"");
  CHECK(json::quote(std::string("\x01\x1f\x00", 3)) == "\"\\u0001\\u001f\\u0000\"");
  CHECK(json::quote("\x7f/") == "\"\x7f/\"");
  CHECK(json::quote("Gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80") ==
        "\"Gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80\"");
  CHECK(json::quote("a\xff"
                    "b") ==
        "\"a\xef\xbf\xbd"
        "b\"");
  CHECK(json::quote("\xc3") == "\"\xef\xbf\xbd\"");                                  // truncated sequence
  CHECK(json::quote("\xc0\xaf") == "\"\xef\xbf\xbd\xef\xbf\xbd\"");                  // overlong '/'
  CHECK(json::quote("\xed\xa0\x80") == "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");  // a surrogate
  CHECK(json::quote("\xf4\x90\x80\x80").find("\xef\xbf\xbd") != std::string::npos);  // above U+10FFFF
}

TEST_CASE("json: numbers read back exactly; NaN and infinities are null") {
  CHECK(json::number(0.0) == "0");
  CHECK(json::number(1.5) == "1.5");
  CHECK(json::number(-2.0) == "-2");
  CHECK(json::number(0.1) == "0.1");
  CHECK(json::number(1e300) == "1e+300");
  CHECK(std::stod(json::number(1.0 / 3.0)) == 1.0 / 3.0);
  CHECK(json::number(std::nan("")) == "null");
  CHECK(json::number(std::numeric_limits<double>::infinity()) == "null");
  for (const char* ok : {"0", "-0", "12", "1.5", "-0.000000", "123.456000", "1e3", "1E+3", "2.5e-7"}) {
    CHECK(json::isNumber(ok));
  }
  for (const char* bad : {"", "-", "nan", "-nan", "inf", "+1", "01", "1.", ".5", "1e", "0x10", "1 ", "1,5"}) {
    CHECK_FALSE(json::isNumber(bad));
  }
}

TEST_CASE("json: compact and indented documents") {
  json::Writer w;
  w.beginObject().key("a").value(1).key("b").beginArray().value("x").null().value(true).endArray();
  w.key("c").beginObject().endObject().key("d").printedNumber("2.500000").key("e").printedNumber("-nan").endObject();
  CHECK(w.complete());
  CHECK(w.text() == R"({"a":1,"b":["x",null,true],"c":{},"d":2.500000,"e":null})");

  json::Writer p(true);
  p.beginObject()
      .key("a")
      .beginArray()
      .value(std::uint64_t{18446744073709551615u})
      .endArray()
      .key("b")
      .beginArray()
      .endArray()
      .endObject();
  CHECK(p.text() == "{\n  \"a\": [\n    18446744073709551615\n  ],\n  \"b\": []\n}");

  json::Writer bad;
  bad.beginObject();
  CHECK_THROWS_AS(bad.value(1), std::logic_error);  // a member needs a key
  CHECK_THROWS_AS(bad.endArray(), std::logic_error);
  CHECK_FALSE(bad.complete());
}

TEST_CASE("scalar rows: printed as the .sca lines, read back from text") {
  measure::MeasurementResult r;
  r.firstStatisticsEvent = 1000000;
  r.lastStatisticsEvent = 3000000;
  measure::FlowResult f;
  f.flowId = 3;
  f.transmitted.first = 1000000;
  f.transmitted.last = 2000000;
  f.transmitted.total = {1000, 10, 5};
  f.meanDelayMs = std::nan("");
  r.flows.push_back(f);
  r.cpu.percent = {{10, 0, 10, 80, 0, 0, 0, 0}, {20, 0, 0, 80, 0, 0, 0, 0}};
  const auto rows = measure::scalarRows("active", r);
  std::string text;
  for (const auto& row : rows) text += measure::formatScalarRow(row);
  CHECK(measure::formatScalarRow(rows.at(0)) ==
        "scalar \"netPerfMeter.active.flow[3]\" \"First Transmission\"      1000000\n");
  CHECK(measure::formatScalarRow(rows.back()) == "scalar \"netPerfMeter.active.totalCPU\" \"Hypervisor\" 0.000\n");
  const auto back = measure::parseScalarRows("# comment\n\n" + text);
  REQUIRE(back.size() == rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(back[i].object == rows[i].object);
    CHECK(back[i].name == rows[i].name);
    CHECK(back[i].value == rows[i].value);
  }
  CHECK_THROWS(measure::parseScalarRows("scalar \"x\" \"unterminated\n"));
}

TEST_CASE("result document: each direction from the sender's and the receiver's rows") {
  measure::MeasurementResult a, p;
  a.firstStatisticsEvent = p.firstStatisticsEvent = 1700000000000000;
  a.lastStatisticsEvent = p.lastStatisticsEvent = 1700000002000000;
  measure::FlowResult fa, fp;
  fa.flowId = fp.flowId = 7;
  fa.transmitted.total = {1000, 10, 5};  // active -> passive
  fa.transmitted.first = 1700000000000000;
  fa.transmitted.last = 1700000001000000;
  fp.received = {900, 9, 4};
  fp.lost = {100, 1, 1};
  fp.jitterMs = 0.25;
  fp.meanDelayMs = 1.5;
  fa.meanDelayMs = std::nan("");  // nothing came back
  a.flows.push_back(fa);
  p.flows.push_back(fp);
  const auto activeRows = measure::scalarRows("active", a), passiveRows = measure::scalarRows("passive", p);
  measure::JsonRunInfo info;
  info.version = "9.9";
  info.measurementId = 0xabc;
  info.commandLine = {"netperfmeter", "host:9000", "-tcp", "const0:const1400:description=\"Bulk\""};
  info.host = {"h1", "Linux 6.1.0", "x86_64"};
  info.flows = {{7, 0, "TCP", "Bulk \"1\"", "const0:const1400:description=\"Bulk\"", ""}};
  info.seed = 9007199254740991ULL;  // the largest run seed: exact as a JSON number
  const std::string doc = measure::resultDocument(info, &activeRows, &passiveRows, std::nullopt, false);
  CHECK_THAT(doc, Catch::StartsWith(
                      R"({"type":"result","schema_version":1,"program":"netperfmeter","version":"9.9",)"
                      R"("host":{"name":"h1","kernel":"Linux 6.1.0","machine":"x86_64"},)"
                      R"("measurement_id":"0000000000000abc","start_time":"2023-11-14T22:13:20.000000Z",)"
                      R"("start_time_us":1700000000000000,"runtime_s":null,"warmup_s":0,"seed":9007199254740991,)"
                      R"("start_at_us":null,"duration_s":2,)"));
  CHECK_THAT(doc, Catch::Contains(
                      R"("description":"Bulk \"1\"","flowspec":"const0:const1400:description=\"Bulk\"",)"
                      R"("congestion_control":null,"active_to_passive":{"transmitted":{"first_us":1700000000000000,)"
                      R"("last_us":1700000001000000,"bytes":1000,"packets":10,"frames":5,"bit_rate":8000.000000,)"));
  CHECK_THAT(doc,
             Catch::Contains(
                 R"("received":{"first_us":0,"last_us":0,"bytes":900,"packets":9,"frames":4,"bit_rate":0.000000,)"));
  CHECK_THAT(doc, Catch::Contains(
                      R"("lost":{"bytes":100,"packets":1,"frames":1},"jitter_ms":0.250000,"mean_delay_ms":1.500000})"));
  CHECK_THAT(doc, Catch::Contains(R"("mean_delay_ms":null})"));  // the passive-to-active direction
  CHECK_THAT(doc, Catch::EndsWith(R"("error":null})"
                                  "\n"));

  // A run that failed before any result: the metadata, nulls, and the error.
  const std::string failed = measure::resultDocument(info, nullptr, nullptr, "cannot connect", true);
  CHECK_THAT(failed, Catch::Contains("\"start_time\": null"));
  CHECK_THAT(failed, Catch::Contains("\"transmitted\": null"));
  CHECK_THAT(failed, Catch::Contains("\"active\": null"));
  CHECK_THAT(failed, Catch::EndsWith("\"error\": \"cannot connect\"\n}\n"));
}

TEST_CASE("stream lines: cumulative counts and rates over the interval") {
  measure::JsonStream stream(0x1234, 1000000);
  measure::JsonFlowSample s;
  s.info = {1, 0, "UDP", "Voice", "", ""};
  s.transmitted = {1000, 10, 10};
  measure::CpuUsage cpu;
  const std::string first = stream.line(1500000, {s}, cpu);
  CHECK_THAT(first, Catch::StartsWith(R"({"type":"interval","schema_version":1,"measurement_id":"0000000000001234",)"
                                      R"("time_us":1500000,"elapsed_s":0.5,"interval_s":0.5,"flows":[{"flow_id":1,)"));
  CHECK_THAT(
      first,
      Catch::Contains(
          R"("transmitted":{"bytes":1000,"packets":10,"frames":10,"bit_rate":16000,"packet_rate":20,"frame_rate":20})"));
  CHECK_THAT(first, Catch::EndsWith(R"("cpu":null})"
                                    "\n"));
  s.transmitted = {3000, 30, 30};
  cpu.percent = {{0, 0, 50, 50, 0, 0, 0, 0}, {0, 0, 0, 100, 0, 0, 0, 0}};
  const std::string second = stream.line(2500000, {s}, cpu);
  CHECK_THAT(second, Catch::Contains(R"("bytes":3000,"packets":30,"frames":30,"bit_rate":16000,"packet_rate":20,)"));
  CHECK_THAT(second, Catch::EndsWith(R"("cpu":{"utilisation":50,"cores":[0]}})"
                                     "\n"));
  CHECK(std::count(second.begin(), second.end(), '\n') == 1);
}
