// Loading BPF programs through libbpf with an error line that says why they were refused:
// libbpf's messages are captured while it loads, and where the verifier refused a program,
// the end of its log (the verdict and the instructions before it) goes into the error.
// Built with the INIT filter only (where libbpf is present: src/sctp/CMakeLists.txt).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "common/result.h"

namespace npm::sctp {

// Lines of the verifier's log that loadBpf's error keeps.
constexpr std::size_t kVerifierLogLines = 4;

// Runs `load` (a libbpf skeleton's __load(), which returns 0 or a negative errno) with
// libbpf's messages captured. Its error: "cannot load WHAT: <strerror>", followed by
// " (verifier: <the last kVerifierLogLines lines of the verifier's log>)" when there is one.
// Loads take turns (libbpf has one message callback for the process).
Result<void> loadBpf(const std::string& what, const std::function<int()>& load);

// The last `lines` non-empty lines of the last verifier log in libbpf's messages (between its
// "-- BEGIN PROG LOAD LOG --" and "-- END PROG LOAD LOG --"), blanks collapsed, joined by
// " | "; empty when the messages hold no such log.
std::string verifierLogTail(const std::string& messages, std::size_t lines);

}  // namespace npm::sctp
