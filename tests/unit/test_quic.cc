// The QUIC transport (src/quic): real UDP sockets on 127.0.0.1 with ports from the system,
// certificates made by openssl for the test, one io_context driven by the test. Waits are for
// what a test needs, with a deadline; no sleeps.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "npmp/messages.h"
#include "quic/connection.h"
#include "quic/server.h"
#include "quic/stream_channel.h"
#include "transport/channel_end.h"
#include "transport/path_sample.h"

using namespace npm;
namespace asio = boost::asio;
namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

namespace {

// A CA, a server certificate for "localhost" and 127.0.0.1 signed by it, and a second CA that
// signed nothing of the server's; made once per test process.
struct Certificates {
  fs::path dir;
  std::string ca, serverCert, serverKey, otherCa, otherKey;

  Certificates() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/npm-quic-test-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
    std::ofstream(dir / "openssl.cnf") << "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n"
                                          "[ca_ext]\nbasicConstraints = critical,CA:TRUE\n"
                                          "keyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash\n"
                                          "[server_ext]\nbasicConstraints = CA:FALSE\n"
                                          "keyUsage = critical,digitalSignature\nextendedKeyUsage = serverAuth\n"
                                          "subjectAltName = DNS:localhost,IP:127.0.0.1\n"
                                          "subjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid\n";
    const std::string d = dir.string();
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string cnf = " -config " + d + "/openssl.cnf";
    const std::string commands[] = {
        "openssl req" + cnf + " -x509" + ec + " -keyout " + d + "/ca.key -out " + d +
            "/ca.pem -days 2 -subj /CN=npm-test-ca -extensions ca_ext",
        "openssl req" + cnf + " -new" + ec + " -keyout " + d + "/server.key -out " + d +
            "/server.csr -subj /CN=localhost",
        "openssl x509 -req -in " + d + "/server.csr -CA " + d + "/ca.pem -CAkey " + d +
            "/ca.key -CAcreateserial -out " + d + "/server.pem -days 2 -extfile " + d +
            "/openssl.cnf -extensions server_ext",
        "openssl req" + cnf + " -x509" + ec + " -keyout " + d + "/other.key -out " + d +
            "/other-ca.pem -days 2 -subj /CN=npm-other-ca -extensions ca_ext",
    };
    for (const auto& command : commands) {
      INFO(command);
      REQUIRE(std::system((command + " >>" + d + "/openssl.log 2>&1").c_str()) == 0);
    }
    ca = d + "/ca.pem";
    serverCert = d + "/server.pem";
    serverKey = d + "/server.key";
    otherCa = d + "/other-ca.pem";
    otherKey = d + "/other.key";
  }
  Certificates(const Certificates&) = delete;
  Certificates& operator=(const Certificates&) = delete;
  // The directory goes with the test process.
  ~Certificates() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

const Certificates& certificates() {
  static const Certificates made;
  return made;
}

const asio::ip::udp::endpoint kAnyLocal(asio::ip::make_address("127.0.0.1"), 0);

// Runs `io` until `done` or the deadline.
bool runUntil(asio::io_context& io, const std::function<bool()>& done,
              std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (io.stopped()) io.restart();
    io.run_one_for(std::chrono::milliseconds(50));
  }
  return true;
}

quic::ServerOptions serverOptions() {
  quic::ServerOptions o;
  o.keyFile = certificates().serverKey;
  o.certFile = certificates().serverCert;
  return o;
}

quic::ClientOptions clientOptions(const std::string& host = "localhost") {
  quic::ClientOptions o;
  o.caFile = certificates().ca;
  o.hostName = host;
  return o;
}

// An IDENTIFY_FLOW message and DATA messages as netperfmeter sends them: (header, payload) pairs.
Bytes identify(std::uint16_t stream) {
  npmp::IdentifyFlow m;
  m.flowId = 100 + stream;
  m.measurementId = 0x1234;
  m.streamId = stream;
  Bytes out;
  npmp::encode(m, out);
  return out;
}

struct DataBatch {
  std::vector<Bytes> headers, payloads;
  std::vector<asio::const_buffer> buffers;
  std::vector<Bytes> messages;  // the same, whole, to compare with
};

DataBatch dataBatch(std::uint16_t stream, std::uint64_t firstSeq, std::size_t count, std::size_t payload,
                    bool fromActive, std::mt19937& random) {
  DataBatch b;
  b.headers.resize(count);
  b.payloads.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    npmp::DataHeader h;
    const std::size_t size = payload == 0 ? std::uniform_int_distribution<std::size_t>(0, 3000)(random) : payload;
    h.length = static_cast<std::uint16_t>(npmp::kDataHeaderSize + size);
    h.flowId = 100 + stream;
    h.streamId = stream;
    h.seqNumber = firstSeq + i;
    b.headers[i].resize(npmp::kDataHeaderSize);
    npmp::encodeDataHeader(h, b.headers[i].data());
    b.payloads[i].resize(size);
    // Random bytes rather than the pattern: a byte out of place shows.
    for (auto& byte : b.payloads[i]) byte = static_cast<std::uint8_t>(random());
    (void)fromActive;
  }
  for (std::size_t i = 0; i < count; ++i) {
    b.buffers.push_back(asio::buffer(b.headers[i]));
    b.buffers.push_back(asio::buffer(b.payloads[i]));
    Bytes whole = b.headers[i];
    whole.insert(whole.end(), b.payloads[i].begin(), b.payloads[i].end());
    b.messages.push_back(std::move(whole));
  }
  return b;
}

// One side's view of a flow: what arrived, how it ended.
struct Received {
  std::vector<Bytes> messages;
  std::optional<transport::ChannelEnd> end;
  std::uint64_t bytes = 0;
};

void receiveInto(const std::shared_ptr<transport::DataChannel>& channel, Received& into) {
  channel->receive(
      [&into](std::span<const std::uint8_t> m, std::uint64_t) {
        into.messages.emplace_back(m.begin(), m.end());
        into.bytes += m.size();
      },
      [&into](const transport::ChannelEnd& end) { into.end = end; });
}

// A server on 127.0.0.1 and what it accepted: its connections and their flows' channels.
struct TestServer {
  asio::io_context& io;
  std::shared_ptr<quic::Server> server;
  std::vector<std::shared_ptr<quic::Connection>> accepted;
  std::map<std::uint16_t, std::shared_ptr<transport::DataChannel>> channels;
  std::map<std::uint16_t, Received> received;
  bool readAtOnce = true;

  TestServer(asio::io_context& context, quic::ServerOptions options = serverOptions(),
             const asio::ip::udp::endpoint& local = kAnyLocal)
      : io(context) {
    auto listening = quic::Server::listen(io, local, options);
    REQUIRE(listening.ok());
    server = *listening;
    server->onConnection([this](std::shared_ptr<quic::Connection> c) {
      accepted.push_back(c);
      c->onChannel([this](std::uint16_t stream, std::shared_ptr<transport::DataChannel> channel) {
        channels[stream] = channel;
        if (readAtOnce) receiveInto(channel, received[stream]);
      });
    });
  }
  asio::ip::udp::endpoint endpoint() const { return server->localEndpoint(); }
};

std::shared_ptr<quic::Connection> connectClient(asio::io_context& io, const asio::ip::udp::endpoint& to,
                                                const quic::ClientOptions& options,
                                                std::optional<Result<void>>& outcome) {
  auto connected = quic::Connection::connect(io, to, options);
  REQUIRE(connected.ok());
  (*connected)->onHandshake([&outcome](Result<void> r) { outcome = std::move(r); });
  return *connected;
}

}  // namespace

TEST_CASE("QUIC stream ids are the reference's: client (n<<2)|2, server (n<<2)|3", "[quic]") {
  CHECK(quic::streamId(quic::Connection::Role::Client, 0) == 2);
  CHECK(quic::streamId(quic::Connection::Role::Server, 0) == 3);
  CHECK(quic::streamId(quic::Connection::Role::Client, 5) == 22);
  CHECK(quic::streamId(quic::Connection::Role::Server, 5) == 23);
  CHECK(quic::streamId(quic::Connection::Role::Server, 65535) == (65535ll << 2 | 3));
}

TEST_CASE("QUIC: handshake, flows both ways carry IDENTIFY and DATA byte for byte, orderly close", "[quic]") {
  asio::io_context io;
  TestServer server(io);
  std::optional<Result<void>> outcome;
  auto client = connectClient(io, server.endpoint(), clientOptions(), outcome);
  REQUIRE(runUntil(io, [&] { return outcome.has_value(); }));
  REQUIRE(outcome->ok());
  CHECK(client->established());

  std::mt19937 random(42);
  const std::vector<std::uint16_t> streams = {0, 3, 1, 7};  // out of order, with gaps
  std::map<std::uint16_t, std::shared_ptr<transport::DataChannel>> channels;
  std::map<std::uint16_t, Bytes> identifies;
  std::map<std::uint16_t, DataBatch> sent, sentBack;
  std::map<std::uint16_t, Received> back;
  int sendsDone = 0, sendErrors = 0;
  auto counted = [&](const boost::system::error_code& ec, std::size_t, std::size_t) {
    ++sendsDone;
    if (ec) ++sendErrors;
  };
  for (auto n : streams) {
    channels[n] = client->channel(n);
    receiveInto(channels[n], back[n]);
    identifies[n] = identify(n);
    sent[n] = dataBatch(n, 0, 40, 0, true, random);
  }
  // IDENTIFY first, then the DATA batch; one send outstanding per channel.
  for (auto n : streams) {
    std::vector<asio::const_buffer> one{asio::buffer(identifies[n])};
    channels[n]->send(one, 1, [&, n](const boost::system::error_code& ec, std::size_t sentCount, std::size_t dropped) {
      CHECK(sentCount == 1);
      CHECK(dropped == 0);
      counted(ec, sentCount, dropped);
      channels[n]->send(sent[n].buffers, sent[n].messages.size(), counted);
    });
  }
  REQUIRE(runUntil(io, [&] {
    if (sendsDone < 2 * static_cast<int>(streams.size())) return false;
    for (auto n : streams) {
      if (server.received[n].messages.size() < 41) return false;
    }
    return true;
  }));
  CHECK(sendErrors == 0);
  REQUIRE(server.accepted.size() == 1);
  CHECK(server.channels.size() == streams.size());
  for (auto n : streams) {
    INFO("stream " << n);
    const auto& got = server.received[n].messages;
    REQUIRE(got.size() == 41);
    CHECK(got[0] == identifies[n]);
    CHECK(std::vector<Bytes>(got.begin() + 1, got.end()) == sent[n].messages);
  }

  // Back, passive to active, on the server's streams of the same flows.
  for (auto n : streams) {
    sentBack[n] = dataBatch(n, 0, 25, 0, false, random);
    server.channels[n]->send(sentBack[n].buffers, sentBack[n].messages.size(), counted);
  }
  REQUIRE(runUntil(io, [&] {
    for (auto n : streams) {
      if (back[n].messages.size() < 25) return false;
    }
    return true;
  }));
  for (auto n : streams) {
    INFO("stream " << n);
    CHECK(back[n].messages == sentBack[n].messages);
  }

  // The active closes flow 3: the passive's channel ends as closed by the peer, after the data.
  auto more = dataBatch(3, 40, 5, 1000, true, random);
  channels[3]->send(more.buffers, more.messages.size(), counted);
  channels[3]->close();
  REQUIRE(runUntil(io, [&] { return server.received[3].end.has_value(); }));
  CHECK(server.received[3].end->byPeer());
  CHECK(server.received[3].messages.size() == 46);
  CHECK(std::vector<Bytes>(server.received[3].messages.end() - 5, server.received[3].messages.end()) == more.messages);
  // ... and the active's side of flow 3 is told nothing (its owner closed it); the others go on.
  CHECK_FALSE(back[3].end);
  CHECK_FALSE(server.received[0].end);

  // The active closes the connection: the passive's flows end as closed by the peer, and the
  // server forgets the connection.
  client->close();
  REQUIRE(runUntil(io, [&] { return server.received[0].end.has_value() && server.server->connections() == 0; }));
  CHECK(server.received[0].end->byPeer());
  CHECK(server.received[7].end->byPeer());
  CHECK(server.accepted[0]->ended());
}

TEST_CASE("QUIC: a large transfer waits for flow-control credit and arrives whole", "[quic]") {
  asio::io_context io;
  auto options = serverOptions();
  // Small windows on the receiving side, which does not read at first.
  options.limits.streamWindow = 64 * 1024;
  options.limits.connectionWindow = 128 * 1024;
  options.limits.maxStreamWindow = 256 * 1024;
  options.limits.maxConnectionWindow = 512 * 1024;
  TestServer server(io, options);
  server.readAtOnce = false;
  std::optional<Result<void>> outcome;
  auto client = connectClient(io, server.endpoint(), clientOptions(), outcome);
  REQUIRE(runUntil(io, [&] { return outcome.has_value(); }));
  REQUIRE(outcome->ok());

  std::mt19937 random(7);
  constexpr std::size_t kBatches = 16, kPerBatch = 64, kPayload = 16000;  // 16 batches of 1 MiB
  auto channel = client->channel(2);
  std::vector<DataBatch> batches;
  for (std::size_t b = 0; b < kBatches; ++b)
    batches.push_back(dataBatch(2, b * kPerBatch, kPerBatch, kPayload, true, random));
  std::size_t done = 0;
  bool failed = false;
  std::function<void(const boost::system::error_code&, std::size_t, std::size_t)> next;
  next = [&](const boost::system::error_code& ec, std::size_t sentCount, std::size_t) {
    if (ec || sentCount != kPerBatch) failed = true;
    if (++done < kBatches && !failed) channel->send(batches[done].buffers, kPerBatch, next);
  };
  channel->send(batches[0].buffers, kPerBatch, next);

  // The sender runs out of credit while nobody reads: its first 1 MiB is not taken.
  REQUIRE(runUntil(io, [&] { return client->counters().streamBlocked > 0 && server.channels.count(2) > 0; }));
  CHECK(done == 0);
  CHECK(server.channels[2]->unread() <= 64 * 1024);
  CHECK(channel->unsent() > 0);

  receiveInto(server.channels[2], server.received[2]);
  REQUIRE(runUntil(
      io, [&] { return server.received[2].messages.size() == kBatches * kPerBatch || failed; },
      std::chrono::seconds(60)));
  CHECK_FALSE(failed);
  const auto& got = server.received[2].messages;
  REQUIRE(got.size() == kBatches * kPerBatch);
  bool same = true;
  for (std::size_t i = 0; i < got.size() && same; ++i) same = got[i] == batches[i / kPerBatch].messages[i % kPerBatch];
  CHECK(same);
  REQUIRE(runUntil(io, [&] { return done == kBatches; }));

  // The path as the flow's channel samples it.
  std::vector<transport::PathSample> samples;
  channel->samplePaths(samples);
  REQUIRE(samples.size() == 1);
  const auto& s = samples[0];
  CHECK(s.id == 0);
  CHECK(s.state == "ESTABLISHED");
  CHECK(s.remote == transport::endpointName(server.endpoint().address(), server.endpoint().port()));
  CHECK(s.cwnd > 0);
  CHECK(s.srttMs >= 0);
  CHECK(s.rttVarMs >= 0);
  CHECK(s.rtoMs > 0);
  CHECK(s.bytesSent == static_cast<double>(kBatches * kPerBatch * (npmp::kDataHeaderSize + kPayload)));
  CHECK(s.bytesAcked <= s.bytesSent);
  CHECK(s.unacked >= 0);
  CHECK(s.lost >= 0);
}

TEST_CASE("QUIC: the client refuses a certificate for another name, with the reason", "[quic]") {
  asio::io_context io;
  TestServer server(io);
  std::optional<Result<void>> outcome;
  auto client = connectClient(io, server.endpoint(), clientOptions("not-the-server.example"), outcome);
  REQUIRE(runUntil(io, [&] { return outcome.has_value(); }));
  REQUIRE_FALSE(outcome->ok());
  INFO(outcome->error());
  CHECK(outcome->error().find("TLS handshake failed") == 0);
  CHECK(outcome->error().find("not-the-server.example") != std::string::npos);
  CHECK(outcome->error().find("does not match") != std::string::npos);
  CHECK(outcome->error().find('\n') == std::string::npos);
  CHECK(client->ended());
  // The server saw the client's alert, and accepted nothing.
  REQUIRE(runUntil(io, [&] { return server.server->failedHandshakes() == 1; }));
  CHECK(server.accepted.empty());
}

TEST_CASE("QUIC: the client refuses a certificate from a CA it does not trust", "[quic]") {
  asio::io_context io;
  TestServer server(io);
  std::optional<Result<void>> outcome;
  auto options = clientOptions();
  options.caFile = certificates().otherCa;
  auto client = connectClient(io, server.endpoint(), options, outcome);
  REQUIRE(runUntil(io, [&] { return outcome.has_value(); }));
  REQUIRE_FALSE(outcome->ok());
  INFO(outcome->error());
  CHECK(outcome->error().find("TLS handshake failed") == 0);
  CHECK(outcome->error().find("NOT trusted") != std::string::npos);
  CHECK(server.accepted.empty());
}

TEST_CASE("QUIC: a server without a usable key or certificate refuses with one line", "[quic]") {
  asio::io_context io;
  auto options = serverOptions();
  options.keyFile = (certificates().dir / "missing.key").string();
  auto missing = quic::Server::listen(io, kAnyLocal, options);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error() == "QUIC: cannot read the TLS key file " + options.keyFile + ": No such file or directory");

  options = serverOptions();
  options.certFile = "";
  auto none = quic::Server::listen(io, kAnyLocal, options);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error() == "QUIC: the TLS certificate file: no file given");

  options = serverOptions();
  options.keyFile = certificates().otherKey;  // not the certificate's key
  auto mismatch = quic::Server::listen(io, kAnyLocal, options);
  REQUIRE_FALSE(mismatch.ok());
  INFO(mismatch.error());
  CHECK(mismatch.error().find("QUIC: cannot use the TLS certificate " + certificates().serverCert) == 0);
  CHECK(mismatch.error().find('\n') == std::string::npos);

  auto client = quic::Connection::connect(io, kAnyLocal, [] {
    auto o = clientOptions();
    o.caFile = "/nonexistent/ca.pem";
    return o;
  }());
  REQUIRE_FALSE(client.ok());
  CHECK(client.error() == "QUIC: cannot read the TLS CA file /nonexistent/ca.pem: No such file or directory");
}

TEST_CASE("QUIC: garbage datagrams are dropped, and a real client connects afterwards", "[quic]") {
  asio::io_context io;
  TestServer server(io);
  asio::ip::udp::socket attacker(io, kAnyLocal);
  std::mt19937 random(3);
  std::vector<Bytes> garbage;
  garbage.push_back({});               // empty
  garbage.push_back({0x00});           // one byte
  garbage.push_back(Bytes(40, 0x40));  // a short header packet of no connection
  Bytes noise(1200);
  for (auto& b : noise) b = static_cast<std::uint8_t>(random());
  garbage.push_back(noise);  // 1200 random bytes
  // What looks like a client's first Initial (long header, version 1, 8-byte connection ids,
  // 1200 bytes) but whose protection does not open.
  Bytes initial(1200);
  for (auto& b : initial) b = static_cast<std::uint8_t>(random());
  const std::uint8_t header[] = {0xc3, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 0, 0x44, 0x80};
  std::copy(std::begin(header), std::end(header), initial.begin());
  garbage.push_back(initial);
  garbage.push_back(Bytes(1200, 0xff));
  for (const auto& g : garbage) attacker.send_to(asio::buffer(g), server.endpoint());
  REQUIRE(runUntil(io, [&] { return server.server->dropped() == garbage.size(); }));
  CHECK(server.server->connections() == 0);

  std::optional<Result<void>> outcome;
  auto client = connectClient(io, server.endpoint(), clientOptions(), outcome);
  REQUIRE(runUntil(io, [&] { return outcome.has_value(); }));
  REQUIRE(outcome->ok());
  // More garbage, now that a connection is up: the connection goes on.
  for (const auto& g : garbage) attacker.send_to(asio::buffer(g), server.endpoint());
  auto channel = client->channel(0);
  auto message = identify(0);
  std::vector<asio::const_buffer> one{asio::buffer(message)};
  channel->send(one, 1, [](const boost::system::error_code&, std::size_t, std::size_t) {});
  REQUIRE(runUntil(
      io, [&] { return server.received[0].messages.size() == 1 && server.server->dropped() == 2 * garbage.size(); }));
  CHECK(server.received[0].messages[0] == message);
  CHECK(server.server->connections() == 1);
}

// A client's first datagram (its Initial with the ClientHello), taken off the wire: the client
// sends it to a socket that never answers.
Bytes firstInitial(asio::io_context& io) {
  asio::ip::udp::socket trap(io, kAnyLocal);
  std::optional<Result<void>> outcome;
  auto client = connectClient(io, trap.local_endpoint(), clientOptions(), outcome);
  Bytes datagram(65536);
  std::size_t n = 0;
  trap.async_receive(asio::buffer(datagram), [&n](const boost::system::error_code&, std::size_t got) { n = got; });
  REQUIRE(runUntil(io, [&] { return n > 0; }));
  client->close();
  datagram.resize(n);
  return datagram;
}

TEST_CASE("QUIC: half-open handshakes end at the timeout; past retryAbove a client comes through a Retry", "[quic]") {
  asio::io_context io;
  auto options = serverOptions();
  options.limits.handshakeTimeout = std::chrono::milliseconds(400);
  options.retryAbove = 1;
  TestServer server(io, options);
  const Bytes initial = firstInitial(io);
  // A client that sends its Initial and goes silent: a handshake under way, then none.
  asio::ip::udp::socket silent(io, kAnyLocal), second(io, kAnyLocal);
  silent.send_to(asio::buffer(initial), server.endpoint());
  REQUIRE(runUntil(io, [&] { return server.server->handshaking() == 1; }));
  CHECK(server.server->connections() == 1);
  // One more while it lasts: a Retry packet (long header, type 3), and no state.
  second.send_to(asio::buffer(initial), server.endpoint());
  REQUIRE(runUntil(io, [&] { return server.server->retries() == 1; }));
  Bytes reply(2048);
  const std::size_t n = second.receive(asio::buffer(reply));
  REQUIRE(n > 0);
  CHECK((reply[0] & 0xf0) == 0xf0);
  CHECK(n < initial.size());
  CHECK(server.server->connections() == 1);
  // A real client meanwhile: through the Retry, and served.
  std::optional<Result<void>> outcome;
  auto client = connectClient(io, server.endpoint(), clientOptions(), outcome);
  REQUIRE(runUntil(io, [&] { return outcome.has_value(); }));
  REQUIRE(outcome->ok());
  CHECK(server.server->retries() == 2);
  // The silent one's handshake times out and is forgotten.
  REQUIRE(runUntil(io, [&] { return server.server->handshaking() == 0 && server.server->connections() == 1; }));
  // An Initial with a Retry token that is not this server's: refused (INVALID_TOKEN in an
  // Initial of the server's), no connection. The token goes into the long header (RFC 9000,
  // 17.2.2), the packet's Length shrinks by as much and the datagram keeps its size.
  Bytes forged(initial.begin(), initial.begin() + 5);
  std::size_t at = 5;
  for (int cid = 0; cid < 2; ++cid) {  // Destination and Source Connection ID, each with its length
    forged.insert(forged.end(), initial.begin() + at, initial.begin() + at + 1 + initial[at]);
    at += 1 + initial[at];
  }
  REQUIRE(initial[at] == 0);  // the client's Initial has no token
  ++at;
  Bytes token(60);
  token[0] = 0xb6;  // NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY
  for (std::size_t i = 1; i < token.size(); ++i) token[i] = static_cast<std::uint8_t>(i * 37);
  forged.push_back(static_cast<std::uint8_t>(token.size()));
  forged.insert(forged.end(), token.begin(), token.end());
  // The Length (a variable-length integer; ngtcp2 writes four bytes), written again as long.
  const std::size_t width = std::size_t{1} << (initial[at] >> 6);
  std::uint64_t length = initial[at] & 0x3fu;
  for (std::size_t i = 1; i < width; ++i) length = length << 8 | initial[at + i];
  length -= token.size();
  for (std::size_t i = 0; i < width; ++i) {
    auto byte = static_cast<std::uint8_t>(length >> (8 * (width - 1 - i)));
    if (i == 0) byte = static_cast<std::uint8_t>((initial[at] & 0xc0) | (byte & 0x3f));
    forged.push_back(byte);
  }
  at += width;
  forged.insert(forged.end(), initial.begin() + at, initial.end() - static_cast<long>(token.size()));
  REQUIRE(forged.size() == initial.size());
  asio::ip::udp::socket third(io, kAnyLocal);
  third.send_to(asio::buffer(forged), server.endpoint());
  REQUIRE(runUntil(io, [&] { return server.server->invalidTokens() == 1; }));
  const std::size_t closing = third.receive(asio::buffer(reply));
  CHECK((reply[0] & 0xf0) == 0xc0);  // an Initial (with CONNECTION_CLOSE)
  CHECK(closing <= 3 * forged.size());
  CHECK(server.server->connections() == 1);
  client->close();
  REQUIRE(runUntil(io, [&] { return server.server->connections() == 0; }));
}

TEST_CASE("QUIC: a server bound to the wildcard answers from the address its client sent to", "[quic]") {
  asio::io_context io;
  // Dual-stack (::) and IPv4 (0.0.0.0): clients over 127.0.0.1 and ::1, connected sockets that
  // take replies from the address they sent to only.
  for (const char* any : {"::", "0.0.0.0"}) {
    TestServer server(io, serverOptions(), asio::ip::udp::endpoint(asio::ip::make_address(any), 0));
    std::vector<const char*> targets{"127.0.0.1", "127.0.0.2"};
    if (std::string(any) == "::") targets.push_back("::1");
    for (const char* target : targets) {
      INFO(any << " <- " << target);
      std::optional<Result<void>> outcome;
      auto client = connectClient(io, asio::ip::udp::endpoint(asio::ip::make_address(target), server.endpoint().port()),
                                  clientOptions(), outcome);
      REQUIRE(runUntil(io, [&] { return outcome.has_value(); }));
      REQUIRE(outcome->ok());
      client->close();
    }
  }
}

TEST_CASE("QUIC: a handshake nobody answers times out with a line that says so", "[quic]") {
  asio::io_context io;
  asio::ip::udp::socket silent(io, kAnyLocal);  // bound, never read
  auto options = clientOptions();
  options.limits.handshakeTimeout = std::chrono::milliseconds(300);
  std::optional<Result<void>> outcome;
  auto client = connectClient(io, silent.local_endpoint(), options, outcome);
  REQUIRE(runUntil(io, [&] { return outcome.has_value(); }));
  REQUIRE_FALSE(outcome->ok());
  CHECK(outcome->error() ==
        "QUIC handshake with " +
            transport::endpointName(silent.local_endpoint().address(), silent.local_endpoint().port()) +
            " timed out after 0.3 s");
}

TEST_CASE("QUIC: SSLKEYLOGFILE gets the TLS secrets of both sides", "[quic]") {
  const auto path = certificates().dir / "keylog.txt";
  fs::remove(path);
  REQUIRE(::setenv("SSLKEYLOGFILE", path.c_str(), 1) == 0);
  asio::io_context io;
  TestServer server(io);
  std::optional<Result<void>> outcome;
  auto client = connectClient(io, server.endpoint(), clientOptions(), outcome);
  const bool done = runUntil(io, [&] { return outcome.has_value() && server.accepted.size() == 1; });
  ::unsetenv("SSLKEYLOGFILE");
  REQUIRE(done);
  REQUIRE(outcome->ok());
  std::ifstream in(path);
  REQUIRE(in);
  // NSS key log lines: LABEL, the client random (32 bytes), the secret (32 or 48 bytes), in hex.
  auto isHex = [](const std::string& t) { return t.find_first_not_of("0123456789abcdef") == std::string::npos; };
  std::map<std::string, int> labels;
  std::string line;
  while (std::getline(in, line)) {
    INFO(line);
    std::istringstream fields(line);
    std::string label, random, secret, rest;
    REQUIRE(static_cast<bool>(fields >> label >> random >> secret));
    CHECK_FALSE(static_cast<bool>(fields >> rest));
    CHECK(label.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789") == std::string::npos);
    CHECK((random.size() == 64 && isHex(random)));
    CHECK(((secret.size() == 64 || secret.size() == 96) && isHex(secret)));
    ++labels[label];
  }
  // Client and server each write every secret of the handshake and the first 1-RTT keys.
  for (const char* label : {"CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
                            "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"}) {
    INFO(label);
    CHECK(labels[label] == 2);
  }
}
