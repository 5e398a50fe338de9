#include "sctp/socket.h"

#include "flowspec/flowspec.h"
#include "transport/sockets.h"

namespace npm::sctp {

std::unique_ptr<Socket> openKernel(asio::io_context& io, int family);
std::unique_ptr<Socket> openUserland(asio::io_context& io, int family, const StackSettings& settings);

const char* stackName(Stack stack) { return stack == Stack::Kernel ? "kernel" : "userland"; }

const char* ccModuleName(std::uint8_t module) {
  switch (module) {
    case 0: return "rfc2581";
    case 1: return "hstcp";
    case 2: return "htcp";
    case 3: return "rtcc";
    default: return "unknown";
  }
}

Stack resolve(StackChoice choice, bool needsCmt) {
  switch (choice) {
    case StackChoice::Kernel:
      if (auto kernel = kernelAvailable(); !kernel) {
        throw transport::TransportError("the kernel SCTP stack was requested, but " + kernel.error());
      }
      if (needsCmt) {
        throw transport::TransportError(
            "CMT-SCTP is not available in the Linux kernel SCTP stack; "
            "use --sctp-stack=userland (or auto)");
      }
      return Stack::Kernel;
    case StackChoice::Userland: return Stack::Userland;
    case StackChoice::Auto: break;
  }
  if (!needsCmt && kernelAvailable()) return Stack::Kernel;
  return Stack::Userland;
}

std::optional<ProcessWide> processWideOf(const Tuning& tuning) {
  if (tuning.cmt == 0 || userlandPerAssociation()) return std::nullopt;
  return ProcessWide{tuning.bufferSplitting, tuning.dac};
}

std::string describe(const ProcessWide& settings) {
  return std::string("bufsplit=") + flowspec::bufferSplittingName(settings.bufferSplitting) +
         " dac=" + (settings.dac ? "on" : "off");
}

std::string describe(const Tuning& t) {
  return std::string("cmt=") + flowspec::cmtName(t.cmt) + " cc=" + ccModuleName(t.ccModule) +
         " bufsplit=" + flowspec::bufferSplittingName(t.bufferSplitting) +
         ((t.bufferSplitting & flowspec::kBufferSplitOnBuffered) ? " bufsplit-on=buffered" : "") +
         " dac=" + (t.dac ? "on" : "off") + (t.smartFr ? " smartfr=on" : "") + (t.reschedule ? " reschedule=on" : "") +
         " nrsack=" + (t.nrSack ? "on" : "off") + (t.pktDrop ? " pktdrop=on" : "") +
         " rtomin=" + std::to_string(t.rtoMinMs);
}

std::unique_ptr<Socket> open(Stack stack, asio::io_context& io, int family, const StackSettings& settings) {
  return stack == Stack::Kernel ? openKernel(io, family) : openUserland(io, family, settings);
}

}  // namespace npm::sctp
