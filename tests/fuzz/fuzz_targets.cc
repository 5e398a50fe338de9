// Fuzz targets for everything that parses untrusted input without I/O: NPMP messages as they
// arrive from the network, FLOWSPEC strings from the command line, and the receiver's
// accounting fed with decoded DATA headers. Built with AddressSanitizer and UBSan; driven by
// fuzz_driver.cc (deterministic mutation, a ctest) or by libFuzzer (-DNPM_LIBFUZZER=ON).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "flowspec/flowspec.h"
#include "measure/statistics.h"
#include "npmp/messages.h"

namespace {

void fuzzNpmp(std::span<const std::uint8_t> data) {
  using namespace npm::npmp;
  if (data.size() >= 4) {
    for (MessageSet c :
         {MessageSet::ControlToPassive, MessageSet::ControlToActive, MessageSet::DataFirst, MessageSet::Data}) {
      (void)checkHeader(data.data(), c);
    }
    (void)declaredLength(data);
  }
  const auto r = decode(data);
  if (!r) return;
  // Whatever decodes must encode again to the same bytes (Results and DATA carry raw bytes).
  Bytes again;
  if (const auto* m = std::get_if<AddFlow>(&*r)) {
    encode(*m, again);
  } else if (const auto* a = std::get_if<Acknowledge>(&*r)) {
    encode(*a, again);
  } else if (const auto* h = std::get_if<DataHeader>(&*r)) {
    npm::measure::ReceiveStatistics rx(10);
    (void)rx.onMessage(*h, data.size(), h->timeStamp + 1000);
    rx.expire(h->timeStamp + 100000);
    rx.finalize();
    (void)rx.lost();
    return;
  } else {
    return;
  }
  // Description/CC strings end at the first NUL on decoding, so compare only when the input
  // was canonical; either way encoding must produce a message that decodes.
  if (!decode(again)) __builtin_trap();
}

void fuzzFlowSpec(std::span<const std::uint8_t> data) {
  const std::string text(reinterpret_cast<const char*>(data.data()), data.size());
  for (auto p : {npm::npmp::Protocol::TCP, npm::npmp::Protocol::UDP, npm::npmp::Protocol::SCTP}) {
    const auto r = npm::flowspec::parse(text, p);
    if (r) {
      std::vector<npm::flowspec::FlowSpec> one{*r};
      (void)npm::flowspec::assignFlowIds(one);
    } else if (r.error().empty() || r.error().find('\n') != std::string::npos) {
      __builtin_trap();  // every rejection is one line
    }
  }
}

}  // namespace

// One entry point for both drivers: the first byte picks the target. Built with
// NPM_FUZZ_ONLY_NPMP or NPM_FUZZ_ONLY_FLOWSPEC, the whole input goes to that one target (the
// libFuzzer binaries npm_fuzz_npmp and npm_fuzz_flowspec, so that each is counted on its own).
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
#if defined(NPM_FUZZ_ONLY_NPMP)
  fuzzNpmp(std::span<const std::uint8_t>(data, size));
#elif defined(NPM_FUZZ_ONLY_FLOWSPEC)
  fuzzFlowSpec(std::span<const std::uint8_t>(data, size));
#else
  if (size == 0) return 0;
  const std::span<const std::uint8_t> rest(data + 1, size - 1);
  if (data[0] & 1) {
    fuzzFlowSpec(rest);
  } else {
    fuzzNpmp(rest);
  }
#endif
  return 0;
}
