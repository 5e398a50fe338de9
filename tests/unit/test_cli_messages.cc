// netperfmeter's command-line errors and warnings are one line of plain text, whatever the
// arguments hold (found by the fuzz target cli: an unknown option with a newline in it).
#include <catch2/catch.hpp>

#include <string>
#include <variant>

#include "app/cli.h"

using namespace npm;

TEST_CASE("Command line: control characters of an argument are quoted in the error") {
  const auto command = app::parseCommandLine({"127.0.0.1:9000", "--interv\nal\x1b[31m=1"});
  const auto* error = std::get_if<app::CliError>(&command);
  REQUIRE(error != nullptr);
  CHECK(error->message.find('\n') == std::string::npos);
  CHECK(error->message.find('\x1b') == std::string::npos);
  CHECK(error->message.find("--interv\\x0aal\\x1b[31m") != std::string::npos);
}

TEST_CASE("Command line: a FLOWSPEC with a newline is refused in one line") {
  const auto command = app::parseCommandLine({"127.0.0.1:9000", "-tcp", "const0:\nconst1400"});
  const auto* error = std::get_if<app::CliError>(&command);
  REQUIRE(error != nullptr);
  CHECK(error->message.find('\n') == std::string::npos);
}
