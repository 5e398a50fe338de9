// Command line of netperfmeter: GNU getopt_long_only semantics (long options with one or
// two dashes, unambiguous prefixes, "=value" or a separate value, bundled short options),
// parsed and validated completely before anything connects.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "control/active_options.h"
#include "control/passive_options.h"

namespace npm::app {

struct LogSettings {
  int level = 2;
  bool colour = true;
  std::string file;
  bool append = false;
};

struct PassiveCommand {
  control::PassiveOptions options;
  std::vector<unsigned> cpus;  // --cpus: the CPUs the process runs on; empty: those it was started with
  std::optional<double> runtime;
  bool display = true;
  LogSettings log;
  std::vector<std::string> warnings;  // about options that are valid but probably not meant, one line each
};

struct ActiveCommand {
  control::ActiveOptions options;
  std::vector<unsigned> cpus;  // --cpus
  LogSettings log;
  std::vector<std::string> warnings;
};

struct InfoCommand {
  std::string text;  // printed to stdout, exit 0 (--help, --version)
};

struct CliError {
  std::string message;  // one line
};

using Command = std::variant<PassiveCommand, ActiveCommand, InfoCommand, CliError>;

Command parseCommandLine(const std::vector<std::string>& args);
std::string usage();

}  // namespace npm::app
