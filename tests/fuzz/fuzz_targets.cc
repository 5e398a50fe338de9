// Fuzz targets for everything that parses untrusted input: NPMP messages as they arrive from
// the network, FLOWSPEC strings from the command line, the receiver's accounting fed with
// decoded DATA headers, the result files' readers (scalar files as createsummary reads them,
// OMNeT++ vector files as extractvectors does; plain, bzip2 or gzip by content), the passive's
// uploaded scalar file as the active's JSON document takes it, the config file written from
// flows and node names (whose readers are the plotters and the lab), and NetPerfMeter's vector
// files and createsummary's tables as combinesummaries reads them, and the passive's QUIC
// admission (datagrams from several client addresses to a real server socket: Initials,
// Retry tokens, garbage, with the server's limits small enough to make it evict and refuse), and
// netperfmeter's command line (the option parser and every check it makes before connecting).
// Built with AddressSanitizer and UBSan; driven by fuzz_driver.cc (deterministic mutation, a
// ctest) or by libFuzzer (-DNPM_LIBFUZZER=ON). Targets: fuzz_targets.h.
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "app/cli.h"
#include "common/fileio.h"
#include "common/handle.h"
#include "flowspec/flowspec.h"
#include "measure/json_report.h"
#include "measure/results.h"
#include "measure/scalar_rows.h"
#include "measure/statistics.h"
#include "npmp/messages.h"
#include "tools/scalarfile.h"
#include "tools/tablefile.h"
#include "tools/toolcommon.h"
#include "tools/vectorfile.h"
#include "fuzz_targets.h"

#ifdef NPM_QUIC_BUILT
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>

#include <cstdlib>
#include <memory>

#include "common/log.h"
#include "quic/server.h"
#endif

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

// A message is one line; one about a file names it first.
void checkMessage(const std::string& message, std::string_view file) {
  if (message.empty() || message.find('\n') != std::string::npos) __builtin_trap();
  if (!file.empty() && message.compare(0, file.size(), file) != 0 &&
      message.find(std::string(file) + ":") == std::string::npos &&
      message.find(" " + std::string(file)) == std::string::npos) {
    __builtin_trap();
  }
}

// Whether the first byte of the input has `bit` set (the targets' options).
bool flag(std::span<const std::uint8_t> data, unsigned bit) { return !data.empty() && (data[0] & bit) != 0; }

// The input as a file to read (fmemopen: no disk), plain or compressed as its content says.
npm::UniqueFile memoryFile(std::span<const std::uint8_t> data, std::string& copy) {
  copy.assign(reinterpret_cast<const char*>(data.data()), data.size());
  if (copy.empty()) copy.push_back('\n');  // fmemopen needs a buffer; "\n" reads as one empty line
  return npm::UniqueFile(::fmemopen(copy.data(), copy.size(), "r"));
}

void fuzzScalarFile(std::span<const std::uint8_t> data) {
  std::string copy;
  const auto file = memoryFile(data, copy);
  if (!file) return;
  npm::tools::ScalarFileOptions options;
  options.split = flag(data, 1);
  options.keepNames = flag(data, 2);
  options.skip = std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"active.flow-Rec"});
  try {
    npm::InputFile in(file.get(), "fuzz.sca");
    for (const auto& scalar : npm::tools::readScalarFile(in, options)) (void)npm::scalarOrigin(scalar.object);
  } catch (const std::exception& e) {  // FileError, ParseError
    checkMessage(e.what(), "fuzz.sca");
  }
}

void fuzzVectorFile(std::span<const std::uint8_t> data) {
  std::string copy;
  const auto file = memoryFile(data, copy);
  if (!file) return;
  npm::tools::VectorTableSettings settings;
  settings.opt.quiet = true;
  settings.opt.lineNumbers = flag(data, 1);
  settings.splitAll = flag(data, 2);
  settings.inputName = "fuzz.vec";
  settings.prefixes = {{"thr", false}, {"queue", true}};
  if (flag(data, 4)) settings.prefixes.clear();
  try {
    npm::InputFile in(file.get(), "fuzz.vec");
    std::string text;
    npm::tools::VectorExtractor extractor(settings, in, [&text](std::string_view piece) { text += piece; });
    extractor.run();
    // What it wrote is a table its readers take: UTF-8 text without NUL bytes.
    if (npm::tools::invalidUtf8At(text) != std::string_view::npos || text.find('\0') != std::string::npos) {
      __builtin_trap();
    }
  } catch (const npm::tools::Interrupted&) {
    __builtin_trap();
  } catch (const std::exception& e) {
    checkMessage(e.what(), "fuzz.vec");
  }
}

// A JSON text, strictly (RFC 8259): true if `s` from `i` on is one value and nothing else.
class JsonCheck {
public:
  explicit JsonCheck(std::string_view s) : s_(s) {}
  bool document() { return value(0) && (blank(), i_ == s_.size()); }

private:
  void blank() {
    while (i_ < s_.size() && std::strchr(" \t\r\n", s_[i_]) && s_[i_]) ++i_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }
  bool string() {
    if (!literal("\"")) return false;
    while (i_ < s_.size() && s_[i_] != '"') {
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c < 0x20) return false;
      if (c == '\\') {
        if (++i_ >= s_.size() || !std::strchr("\"\\/bfnrtu", s_[i_]) || !s_[i_]) return false;
        if (s_[i_] == 'u' && (i_ + 4 >= s_.size() || s_.substr(i_ + 1, 4).find_first_not_of("0123456789abcdefABCDEF") !=
                                                         std::string_view::npos)) {
          return false;
        }
      }
      ++i_;
    }
    return literal("\"");
  }
  bool number() {
    const std::size_t start = i_;
    literal("-");
    if (!literal("0")) {
      if (i_ >= s_.size() || s_[i_] < '1' || s_[i_] > '9') return false;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    }
    if (literal(".")) {
      const std::size_t digits = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == digits) return false;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      const std::size_t digits = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == digits) return false;
    }
    return i_ > start;
  }
  bool value(int depth) {
    if (depth > 64) return false;
    blank();
    if (i_ >= s_.size()) return false;
    switch (s_[i_]) {
      case '{': return members(depth, '}', true);
      case '[': return members(depth, ']', false);
      case '"': return string();
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default: return number();
    }
  }
  bool members(int depth, char close, bool named) {
    ++i_;
    blank();
    if (literal(std::string_view(&close, 1))) return true;
    for (;;) {
      blank();
      if (named && (!string() || (blank(), !literal(":")))) return false;
      if (!value(depth + 1)) return false;
      blank();
      if (literal(std::string_view(&close, 1))) return true;
      if (!literal(",")) return false;
    }
  }
  std::string_view s_;
  std::size_t i_ = 0;
};

// The passive's uploaded scalar file (bytes from the network), as the active's --json takes it.
void fuzzJsonReport(std::span<const std::uint8_t> data) {
  std::vector<npm::measure::ScalarRow> rows;
  try {
    rows = npm::measure::parseScalarRows(
        npm::measure::bzip2Text(std::string(reinterpret_cast<const char*>(data.data()), data.size())));
  } catch (const std::exception& e) {
    checkMessage(e.what(), "");
    return;
  }
  npm::measure::JsonRunInfo info;
  info.remote = "localhost:9000";
  for (bool indent : {false, true}) {
    const std::string document = npm::measure::resultDocument(info, nullptr, &rows, std::nullopt, indent);
    if (!JsonCheck(document).document() || npm::tools::invalidUtf8At(document) != std::string_view::npos) {
      __builtin_trap();
    }
  }
}

// The config file from untrusted text: node names, the -scalar/-vector patterns and FLOWSPECs
// (NUL-separated: fields 1-4, then a FLOWSPEC each, so newlines are data too). Its readers (the
// plotters, the lab) read it as the shell would source it: every line must be empty or
// KEY=VALUE, the value a bare word or one double-quoted string (which may span lines) that
// escapes ", $, ` and \, with nothing after it.
void fuzzConfig(std::span<const std::uint8_t> data) {
  std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
  std::vector<std::string> fields;
  while (!text.empty() && fields.size() < 12) {
    const std::size_t end = text.find('\0');
    fields.emplace_back(text.substr(0, end));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  fields.resize(std::max<std::size_t>(fields.size(), 4));
  npm::measure::ConfigInfo info;
  info.activeNodeName = fields[0];
  info.passiveNodeName = fields[1];
  info.scalarPattern = fields[2];
  info.vectorPattern = fields[3];
  info.pathVectors = flag(data, 1);
  for (std::size_t k = 4; k < fields.size(); ++k) {
    if (auto flow = npm::flowspec::parse(fields[k], npm::npmp::Protocol::TCP)) info.flows.push_back(*flow);
  }
  if (!npm::flowspec::assignFlowIds(info.flows)) return;
  npm::OutputFile out = npm::OutputFile::anonymous(npm::Compression::kNone, 0);
  npm::measure::writeConfig(out, info);
  const auto back = out.takeForReading();
  char buffer[4096];
  std::string config;
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof(buffer), back.get())) > 0;) config.append(buffer, n);
  std::size_t i = 0;
  while (i < config.size()) {
    if (config[i] == '\n') {  // (between the global part and each flow's)
      ++i;
      continue;
    }
    const std::size_t eq = config.find('=', i);
    if (eq == std::string::npos || eq == i ||
        config.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", i) != eq) {
      __builtin_trap();
    }
    i = eq + 1;
    if (i < config.size() && config[i] == '"') {
      for (++i; i < config.size() && config[i] != '"'; ++i) {
        if (config[i] == '\\')
          ++i;
        else if (config[i] == '$' || config[i] == '`')
          __builtin_trap();
      }
      if (i >= config.size()) __builtin_trap();  // unterminated
      ++i;
    } else {
      const std::size_t end = config.find('\n', i);
      const std::string_view word(config.data() + i, (end == std::string::npos ? config.size() : end) - i);
      if (word.empty() || word.find_first_of("\"$`\\ ;&|<>()'") != std::string_view::npos) __builtin_trap();
      i += word.size();
    }
    if (i >= config.size() || config[i] != '\n') __builtin_trap();  // the value ends its line
    ++i;
  }
}

// A NetPerfMeter vector file or a table, twice in a row (the second one's header must match),
// as combinesummaries reads it: decompressed by content, in pieces of a size from the first byte.
void fuzzTable(std::span<const std::uint8_t> data) {
  std::string copy;
  const auto file = memoryFile(data, copy);
  if (!file) return;
  npm::tools::OutputOptions options;
  options.lineNumbers = flag(data, 1);
  const std::size_t pieceSize = 1 + (data.empty() ? 0 : data[0] % 64);
  const std::string varNames = "NodeName IsActive";
  npm::tools::Table table(options, varNames);
  try {
    npm::InputFile in(file.get(), "fuzz.vec");
    std::string bytes;
    std::vector<char> buffer(pieceSize);
    for (std::size_t n; (n = in.read(buffer.data(), buffer.size())) > 0;) bytes.append(buffer.data(), n);
    for (const char* values : {"Client 1", "Server 0"}) {
      const npm::tools::TableInput input{"fuzz.vec", values};
      npm::tools::TableLines lines(input, table);
      for (std::size_t at = 0; at < bytes.size(); at += pieceSize) {
        lines.piece(std::string_view(bytes).substr(at, pieceSize));
      }
      lines.end();
    }
  } catch (const std::exception& e) {
    checkMessage(e.what(), "fuzz.vec");
    return;
  }
  if (npm::tools::invalidUtf8At(table.text()) != std::string_view::npos) __builtin_trap();
}

#ifdef NPM_QUIC_BUILT
// A QUIC server on 127.0.0.1 (a certificate made once by openssl), kept for the whole process as
// a passive's is, with 8 slots, Retry from 4 handshakes on and 6 slots per network; clients on
// 127.0.0.1 and 127.0.0.2 (two networks: 127.0.0.0/24 per address with 32-bit prefixes).
struct QuicBed {
  boost::asio::io_context io;
  std::shared_ptr<npm::quic::Server> server;
  std::vector<std::unique_ptr<boost::asio::ip::udp::socket>> clients;
  boost::asio::ip::udp::endpoint target;
  QuicBed() {
    npm::log::setLevel(npm::log::Error);  // failed handshakes are what the target makes, by the thousand
    char dir[] = "/tmp/npm-fuzz-quic-XXXXXX";
    if (::mkdtemp(dir) == nullptr) std::abort();
    const std::string d = dir;
    const std::string make =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
        "-subj /CN=localhost -keyout " +
        d + "/key.pem -out " + d + "/cert.pem >/dev/null 2>&1";
    if (std::system(make.c_str()) != 0) {
      std::fprintf(stderr, "fuzz target quic: openssl could not make a certificate in %s\n", dir);
      std::abort();
    }
    npm::quic::ServerOptions o;
    o.keyFile = d + "/key.pem";
    o.certFile = d + "/cert.pem";
    o.maxConnections = 8;
    o.retryAbove = 4;
    o.maxPerPrefix = 6;
    o.prefixV4 = 32;
    const auto loopback = boost::asio::ip::make_address("127.0.0.1");
    auto listening = npm::quic::Server::listen(io, boost::asio::ip::udp::endpoint(loopback, 0), o);
    if (!listening) {
      std::fprintf(stderr, "fuzz target quic: %s\n", listening.error().c_str());
      std::abort();
    }
    server = *listening;
    target = server->localEndpoint();
    for (const char* address : {"127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2"}) {
      auto s = std::make_unique<boost::asio::ip::udp::socket>(io);
      s->open(boost::asio::ip::udp::v4());
      s->bind(boost::asio::ip::udp::endpoint(boost::asio::ip::make_address(address), 0));
      s->non_blocking(true);
      clients.push_back(std::move(s));
    }
    std::filesystem::remove_all(d);  // the server has read them
  }
};

// The input: datagrams, each [client: 1 byte][length: 2 bytes, big-endian][bytes], sent to the
// server from that client's socket; the server handles each before the next is sent, and
// whatever it answers is read and dropped.
void fuzzQuicAdmission(std::span<const std::uint8_t> data) {
  static QuicBed bed;
  std::array<std::uint8_t, 65536> reply;
  while (data.size() >= 3) {
    auto& client = *bed.clients[data[0] % bed.clients.size()];
    const std::size_t length = std::min<std::size_t>(data.size() - 3, (std::size_t{data[1]} << 8) | data[2]);
    boost::system::error_code ec;
    client.send_to(boost::asio::buffer(data.data() + 3, length), bed.target, 0, ec);
    data = data.subspan(3 + length);
    bed.io.poll();
    bed.io.restart();
    for (auto& c : bed.clients) {
      while (c->available(ec) > 0 && !ec) c->receive(boost::asio::buffer(reply), 0, ec);
    }
  }
}
#else
void fuzzQuicAdmission(std::span<const std::uint8_t>) {}  // a build without QUIC
#endif

// The input: the command line's words, separated by NUL bytes. Whatever it is, the parser gives
// a command or one line of error, and its warnings are one line each.
void fuzzCommandLine(std::span<const std::uint8_t> data) {
  std::vector<std::string> args;
  std::string word;
  for (const std::uint8_t c : data) {
    if (c == 0) {
      args.push_back(std::move(word));
      word.clear();
    } else {
      word.push_back(static_cast<char>(c));
    }
  }
  if (!word.empty() || args.empty()) args.push_back(std::move(word));
  const auto command = npm::app::parseCommandLine(args);
  auto oneLine = [](const std::string& text) {
    if (text.empty() || text.find('\n') != std::string::npos) {
      std::fprintf(stderr, "fuzz target cli: a message of other than one line: [%s]\n", text.c_str());
      __builtin_trap();
    }
  };
  if (const auto* error = std::get_if<npm::app::CliError>(&command)) oneLine(error->message);
  if (const auto* active = std::get_if<npm::app::ActiveCommand>(&command)) {
    for (const auto& w : active->warnings) oneLine(w);
  }
  if (const auto* passive = std::get_if<npm::app::PassiveCommand>(&command)) {
    for (const auto& w : passive->warnings) oneLine(w);
  }
}

using Target = void (*)(std::span<const std::uint8_t>);
constexpr Target kTargets[] = {fuzzNpmp,   fuzzFlowSpec, fuzzScalarFile,    fuzzVectorFile, fuzzJsonReport,
                               fuzzConfig, fuzzTable,    fuzzQuicAdmission, fuzzCommandLine};
static_assert(sizeof(kTargets) / sizeof(kTargets[0]) == npm::fuzz::kTargetCount);

}  // namespace

// One entry point for both drivers: the first byte picks the target. Built with
// NPM_FUZZ_ONLY=index, the whole input goes to that one target (the libFuzzer binaries
// npm_fuzz_<name>, so that each is counted on its own).
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
#if defined(NPM_FUZZ_ONLY)
  kTargets[NPM_FUZZ_ONLY](std::span<const std::uint8_t>(data, size));
#else
  if (size == 0) return 0;
  kTargets[data[0] % npm::fuzz::kTargetCount](std::span<const std::uint8_t>(data + 1, size - 1));
#endif
  return 0;
}
