#include "quic/connection.h"

#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "common/clock.h"
#include "quic/stream_channel.h"
#include "quic/tls.h"

namespace npm::quic {

using transport::ChannelEnd;

std::uint64_t timestamp() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

namespace {

constexpr std::size_t kMaxDatagram = 65536;
// Packets written per round; then the thread's other handlers get a turn before the next.
constexpr int kPacketsPerRound = 64;
// Datagrams read per wake-up (the server's socket alike), so that one busy peer cannot starve
// the other handlers of the thread.
constexpr int kDatagramsPerRead = 64;
constexpr std::size_t kVectors = 16;
// The application error code of abort() (RESET_STREAM, STOP_SENDING); close() sends 0.
constexpr std::uint64_t kAbortCode = 1;
constexpr std::uint8_t kAlertNoApplicationProtocol = 120;

void randomBytes(std::uint8_t* data, std::size_t size) {
  // GNUTLS_RND_RANDOM: connection IDs and tokens must not be guessable.
  if (gnutls_rnd(GNUTLS_RND_RANDOM, data, size) != 0) {
    for (std::size_t i = 0; i < size; ++i) data[i] = static_cast<std::uint8_t>(std::rand());
  }
}

ngtcp2_addr addressOf(const asio::ip::udp::endpoint& endpoint) {
  return ngtcp2_addr{const_cast<ngtcp2_sockaddr*>(reinterpret_cast<const ngtcp2_sockaddr*>(endpoint.data())),
                     static_cast<ngtcp2_socklen>(endpoint.size())};
}

ngtcp2_path pathOf(const asio::ip::udp::endpoint& local, const asio::ip::udp::endpoint& remote) {
  return ngtcp2_path{addressOf(local), addressOf(remote), nullptr};
}

std::uint64_t nanoseconds(std::chrono::milliseconds ms) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(ms).count());
}

void configure(ngtcp2_settings& settings, ngtcp2_transport_params& params, const Limits& limits) {
  ngtcp2_settings_default(&settings);
  settings.initial_ts = timestamp();
  settings.max_window = limits.maxConnectionWindow;
  settings.max_stream_window = limits.maxStreamWindow;
  settings.handshake_timeout = nanoseconds(limits.handshakeTimeout);
  settings.cc_algo =
      limits.congestionControl == Limits::CongestionControl::Cubic ? NGTCP2_CC_ALGO_CUBIC : NGTCP2_CC_ALGO_RENO;
  ngtcp2_transport_params_default(&params);
  params.initial_max_stream_data_uni = limits.streamWindow;
  params.initial_max_data = limits.connectionWindow;
  params.initial_max_streams_uni = limits.maxStreams;
  // Flows use unidirectional streams only: the peer may open no bidirectional one.
  params.initial_max_streams_bidi = 0;
  params.initial_max_stream_data_bidi_local = 0;
  params.initial_max_stream_data_bidi_remote = 0;
  params.max_idle_timeout = nanoseconds(limits.idleTimeout);
}

std::string seconds(std::chrono::milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(ms.count()) / 1000.0);
  return text;
}

// The peer's CONNECTION_CLOSE in words.
std::string closeReason(const ngtcp2_connection_close_error& e) {
  std::string reason;
  if (e.reasonlen > 0 && e.reason != nullptr) {
    reason.assign(reinterpret_cast<const char*>(e.reason), e.reasonlen);
    reason.erase(std::remove_if(reason.begin(), reason.end(), [](char c) { return c < 0x20 || c > 0x7e; }),
                 reason.end());
  }
  std::string text;
  if (e.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION) {
    text = "application error " + std::to_string(e.error_code);
  } else if ((e.error_code & ~0xffull) == NGTCP2_CRYPTO_ERROR) {
    text = "TLS alert " + alertName(static_cast<std::uint8_t>(e.error_code & 0xff));
  } else {
    text = "transport error " + std::to_string(e.error_code);
  }
  return reason.empty() ? text : text + ": " + reason;
}

}  // namespace

// ngtcp2's callbacks: they record what happened; the reactions that call ngtcp2 or the users'
// handlers wait until ngtcp2_conn_read_pkt() has returned (afterInput()), which ngtcp2 demands.
struct Callbacks {
  static Connection& of(void* user) { return *static_cast<Connection*>(user); }

  static void rand(std::uint8_t* dest, std::size_t size, const ngtcp2_rand_ctx*) { randomBytes(dest, size); }

  static int newConnectionId(ngtcp2_conn*, ngtcp2_cid* cid, std::uint8_t* token, std::size_t size, void*) {
    randomBytes(cid->data, size);
    cid->datalen = size;
    randomBytes(token, NGTCP2_STATELESS_RESET_TOKENLEN);
    return 0;
  }

  static int handshakeCompleted(ngtcp2_conn*, void* user) {
    auto& c = of(user);
    if (auto alpn = c.tls_->checkAlpn(); !alpn) {
      c.callbackFailure_ = "TLS handshake failed: " + alpn.error();
      c.callbackAlert_ = kAlertNoApplicationProtocol;
      return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    c.handshakeCompleted_ = true;
    return 0;
  }

  static int receiveStreamData(ngtcp2_conn*, std::uint32_t flags, std::int64_t id, std::uint64_t,
                               const std::uint8_t* data, std::size_t size, void* user, void*) {
    auto& c = of(user);
    if ((id >> 2) > 0xffff) {
      c.callbackFailure_ = "the peer opened QUIC stream " + std::to_string(id) + ", beyond 16-bit stream numbers";
      return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    auto& f = c.flow(static_cast<std::uint16_t>(id >> 2));
    f.received += size;
    if (f.released) {
      f.uncredited += size;  // read and dropped: the credit goes back at once
    } else {
      f.in.append(std::span<const std::uint8_t>(data, size));
    }
    if (flags & NGTCP2_STREAM_DATA_FLAG_FIN) f.finReceived = true;
    c.toDeliver_.push_back(f.number);
    return 0;
  }

  static int ackedStreamData(ngtcp2_conn*, std::int64_t id, std::uint64_t offset, std::uint64_t size, void* user,
                             void*) {
    auto& c = of(user);
    auto* f = c.flowOfStream(id);
    if (f == nullptr || id != c.localStream(f->number)) return 0;
    f->acked = std::max(f->acked, offset + size);
    while (!f->chunks.empty() && f->chunkBase + f->chunks.front().size() <= f->acked) {
      f->chunkBase += f->chunks.front().size();
      f->chunks.pop_front();
    }
    return 0;
  }

  static int streamClose(ngtcp2_conn*, std::uint32_t, std::int64_t id, std::uint64_t, void* user, void*) {
    auto& c = of(user);
    auto* f = c.flowOfStream(id);
    if (f == nullptr) return 0;
    if (id == c.localStream(f->number)) {
      f->sendClosed = true;
      f->sendShut = true;
      // ngtcp2 refers to none of the bytes any more (all acknowledged, or the stream reset).
      f->chunks.clear();
      f->chunkBase = f->queued;
    } else {
      f->receiveClosed = true;
    }
    return 0;
  }

  // The peer's RESET_STREAM on its stream of a flow.
  static int streamReset(ngtcp2_conn*, std::int64_t id, std::uint64_t, std::uint64_t code, void* user, void*) {
    auto& c = of(user);
    auto* f = c.flowOfStream(id);
    if (f == nullptr || id != c.remoteStream(f->number)) return 0;
    if (!f->end) {
      f->end = ChannelEnd::failed("the peer reset QUIC stream " + std::to_string(id) + " (application error " +
                                  std::to_string(code) + ")");
    }
    c.toDeliver_.push_back(f->number);
    return 0;
  }

  // The peer's STOP_SENDING on this side's stream of a flow: it reads no more (ngtcp2 resets
  // the stream). Without an error the peer closed its channel, and its FIN ends this side's
  // channel once what came before it is delivered; with one it aborted: the channel ends now.
  static int stopSending(ngtcp2_conn*, std::int64_t id, std::uint64_t code, void* user, void*) {
    auto& c = of(user);
    auto* f = c.flowOfStream(id);
    if (f == nullptr || id != c.localStream(f->number)) return 0;
    f->sendShut = true;
    f->stoppedByPeer = code == 0;
    if (f->sendHandler) {
      c.completeSend(*f, code == 0 ? boost::system::error_code(asio::error::eof)
                                   : boost::system::error_code(asio::error::connection_reset));
    }
    if (code != 0 && !f->end) {
      f->end = ChannelEnd::failed("the peer stopped reading QUIC stream " + std::to_string(id) +
                                  " (application error " + std::to_string(code) + ")");
      c.toDeliver_.push_back(f->number);
    }
    return 0;
  }

  // More streams may be opened, or more credit arrived: the next round tries again.
  static int extendMaxStreams(ngtcp2_conn*, std::uint64_t, void* user) {
    of(user).scheduleFlush();
    return 0;
  }
  static int extendMaxStreamData(ngtcp2_conn*, std::int64_t, std::uint64_t, void* user, void*) {
    of(user).scheduleFlush();
    return 0;
  }

  static ngtcp2_conn* connectionOf(ngtcp2_crypto_conn_ref* ref) {
    return static_cast<Connection*>(ref->user_data)->conn_;
  }

  static void common(ngtcp2_callbacks& cb) {
    cb.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
    cb.handshake_completed = handshakeCompleted;
    cb.encrypt = ngtcp2_crypto_encrypt_cb;
    cb.decrypt = ngtcp2_crypto_decrypt_cb;
    cb.hp_mask = ngtcp2_crypto_hp_mask_cb;
    cb.recv_stream_data = receiveStreamData;
    cb.acked_stream_data_offset = ackedStreamData;
    cb.stream_close = streamClose;
    cb.extend_max_local_streams_uni = extendMaxStreams;
    cb.rand = rand;
    cb.get_new_connection_id = newConnectionId;
    cb.update_key = ngtcp2_crypto_update_key_cb;
    cb.stream_reset = streamReset;
    cb.extend_max_stream_data = extendMaxStreamData;
    cb.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
    cb.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
    cb.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
    cb.stream_stop_sending = stopSending;
    cb.version_negotiation = ngtcp2_crypto_version_negotiation_cb;
  }
};

// ------------------------------------------------------------------------- set-up

Connection::Connection(asio::io_context& io, Role role, std::shared_ptr<asio::ip::udp::socket> socket,
                       const asio::ip::udp::endpoint& local, const asio::ip::udp::endpoint& remote,
                       const Limits& limits)
    : io_(io),
      role_(role),
      socket_(std::move(socket)),
      local_(local),
      remote_(remote),
      peer_(transport::endpointName(remote.address(), remote.port())),
      limits_(limits),
      ref_(std::make_unique<ngtcp2_crypto_conn_ref>()),
      timer_(io) {
  ref_->get_conn = Callbacks::connectionOf;
  ref_->user_data = this;
  packet_.resize(kMaxDatagram);
  nextLocalStream_ = role == Role::Client ? 2 : 3;
}

Connection::~Connection() {
  // Dropped by everyone while up: the peer is told (CONNECTION_CLOSE, no error) rather than
  // left to its idle timeout.
  if (conn_ != nullptr && state_ != State::Ended) {
    ngtcp2_connection_close_error ccerr;
    ngtcp2_connection_close_error_default(&ccerr);
    writeClose(&ccerr);
  }
  // The TLS session refers to ref_ and ngtcp2 to the session: the connection goes first.
  if (conn_ != nullptr) ngtcp2_conn_del(conn_);
  tls_.reset();
  if (role_ == Role::Client && socket_) {
    boost::system::error_code ec;
    socket_->close(ec);
  }
}

Result<std::shared_ptr<Connection>> Connection::connect(asio::io_context& io, const asio::ip::udp::endpoint& server,
                                                        const ClientOptions& options) {
  auto credentials = Credentials::client(options.caFile);
  if (!credentials) return Failure{"QUIC: " + credentials.error()};
  const std::string name = transport::endpointName(server.address(), server.port());
  auto socket = std::make_shared<asio::ip::udp::socket>(io);
  boost::system::error_code ec;
  socket->open(server.protocol(), ec);
  if (!ec && server.address().is_v6()) socket->set_option(asio::ip::v6_only(options.v6only), ec);
  if (!ec && options.local) socket->bind(asio::ip::udp::endpoint(*options.local, 0), ec);
  if (!ec) socket->connect(server, ec);
  if (!ec) socket->non_blocking(true, ec);
  asio::ip::udp::endpoint local;
  if (!ec) local = socket->local_endpoint(ec);
  if (ec) return Failure{"QUIC: cannot open a UDP socket to " + name + ": " + ec.message()};

  std::shared_ptr<Connection> c(new Connection(io, Role::Client, socket, local, server, options.limits));
  ngtcp2_cid dcid{}, scid{};
  dcid.datalen = 18;
  randomBytes(dcid.data, dcid.datalen);
  scid.datalen = 17;
  randomBytes(scid.data, scid.datalen);
  ngtcp2_settings settings;
  ngtcp2_transport_params params;
  configure(settings, params, options.limits);
  ngtcp2_callbacks cb{};
  Callbacks::common(cb);
  cb.client_initial = ngtcp2_crypto_client_initial_cb;
  cb.recv_retry = ngtcp2_crypto_recv_retry_cb;
  const ngtcp2_path path = pathOf(c->local_, c->remote_);
  if (int rv = ngtcp2_conn_client_new(&c->conn_, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &cb, &settings, &params,
                                      nullptr, c.get());
      rv != 0) {
    return Failure{std::string("QUIC: ") + ngtcp2_strerror(rv)};
  }
  auto tls = TlsSession::client(*credentials, options.hostName, c->ref_.get());
  if (!tls) return Failure{tls.error()};
  c->tls_ = std::move(*tls);
  ngtcp2_conn_set_tls_native_handle(c->conn_, c->tls_->native());
  c->reading_ = true;
  c->readMore();
  c->scheduleFlush();  // the first Initial
  return c;
}

Result<std::shared_ptr<Connection>> Connection::accept(asio::io_context& io,
                                                       std::shared_ptr<asio::ip::udp::socket> socket,
                                                       const asio::ip::udp::endpoint& local,
                                                       const asio::ip::udp::endpoint& remote, bool sourceAddressed,
                                                       std::shared_ptr<const Credentials> credentials,
                                                       const Limits& limits, const ClientInitial& initial) {
  std::shared_ptr<Connection> c(new Connection(io, Role::Server, std::move(socket), local, remote, limits));
  c->sourceAddressed_ = sourceAddressed;
  ngtcp2_cid clientDcid{}, clientScid{}, ownScid{};
  ngtcp2_cid_init(&clientDcid, initial.dcid.data(), initial.dcid.size());
  ngtcp2_cid_init(&clientScid, initial.scid.data(), initial.scid.size());
  ownScid.datalen = 18;
  randomBytes(ownScid.data, ownScid.datalen);
  ngtcp2_settings settings;
  ngtcp2_transport_params params;
  configure(settings, params, limits);
  if (initial.token.empty()) {
    params.original_dcid = clientDcid;
  } else {
    // After a Retry: the client's first Destination Connection ID (carried in the token), and
    // the Retry's Source Connection ID, which the client now sends to (RFC 9000, 7.3).
    ngtcp2_cid_init(&params.original_dcid, initial.originalDcid.data(), initial.originalDcid.size());
    params.retry_scid = clientDcid;
    params.retry_scid_present = 1;
    settings.token = ngtcp2_vec{const_cast<std::uint8_t*>(initial.token.data()), initial.token.size()};
  }
  params.stateless_reset_token_present = 1;
  randomBytes(params.stateless_reset_token, sizeof params.stateless_reset_token);
  ngtcp2_callbacks cb{};
  Callbacks::common(cb);
  cb.recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
  const ngtcp2_path path = pathOf(c->local_, c->remote_);
  if (int rv = ngtcp2_conn_server_new(&c->conn_, &clientScid, &ownScid, &path, initial.version, &cb, &settings, &params,
                                      nullptr, c.get());
      rv != 0) {
    return Failure{std::string("QUIC: ") + ngtcp2_strerror(rv)};
  }
  auto tls = TlsSession::server(std::move(credentials), c->ref_.get());
  if (!tls) return Failure{tls.error()};
  c->tls_ = std::move(*tls);
  ngtcp2_conn_set_tls_native_handle(c->conn_, c->tls_->native());
  return c;
}

void Connection::onHandshake(std::function<void(Result<void>)> handler) {
  if (state_ == State::Established) {
    asio::post(io_, [handler = std::move(handler)] { handler(Result<void>{}); });
  } else if (state_ == State::Ended) {
    asio::post(io_, [handler = std::move(handler), why = connectionEnd_ ? connectionEnd_->text() : "QUIC: closed"] {
      handler(Failure{why});
    });
  } else {
    onHandshake_ = std::move(handler);
  }
}

void Connection::onChannel(std::function<void(std::uint16_t, std::shared_ptr<transport::DataChannel>)> handler) {
  onChannel_ = std::move(handler);
  // Streams that arrived before the handler.
  for (auto& [number, f] : flows_) {
    if (!f.announced && f.received > 0) toDeliver_.push_back(number);
  }
  if (!toDeliver_.empty()) {
    asio::post(io_, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->deliverAll();
    });
  }
}

std::shared_ptr<transport::DataChannel> Connection::channel(std::uint16_t stream) {
  auto& f = flow(stream);
  f.announced = true;
  if (auto existing = f.channel.lock()) return existing;
  auto created = std::make_shared<FlowChannel>(shared_from_this(), stream);
  f.channel = created;
  return created;
}

void Connection::close() {
  if (state_ == State::Ended || conn_ == nullptr) return;
  auto self = shared_from_this();
  for (auto& [number, f] : flows_) {
    f.released = true;
    f.onMessage = nullptr;
    f.onError = nullptr;
  }
  ngtcp2_connection_close_error ccerr;
  ngtcp2_connection_close_error_default(&ccerr);
  writeClose(&ccerr);
  end(ChannelEnd::failed("QUIC connection closed by this side"), "QUIC connection closed before the handshake");
}

Connection::Flow& Connection::flow(std::uint16_t stream) {
  auto [it, created] = flows_.try_emplace(stream);
  if (created) {
    it->second.number = stream;
    if (state_ == State::Ended && connectionEnd_) it->second.end = connectionEnd_;
  }
  return it->second;
}

Connection::Flow* Connection::flowOfStream(std::int64_t id) {
  if (id < 0 || (id >> 2) > 0xffff) return nullptr;
  auto it = flows_.find(static_cast<std::uint16_t>(id >> 2));
  return it == flows_.end() ? nullptr : &it->second;
}

std::int64_t streamId(Connection::Role sender, std::uint16_t stream) {
  return static_cast<std::int64_t>(stream) << 2 | (sender == Connection::Role::Client ? 2 : 3);
}

std::int64_t Connection::localStream(std::uint16_t number) const { return streamId(role_, number); }

std::int64_t Connection::remoteStream(std::uint16_t number) const {
  return streamId(role_ == Role::Client ? Role::Server : Role::Client, number);
}

// ngtcp2 hands out a side's stream ids in order: stream n of a flow is opened together with
// the ones below it that no flow has used yet (they stay unused; the peer never sees them).
bool Connection::openLocalStreams(std::int64_t upTo) {
  while (nextLocalStream_ <= upTo) {
    std::int64_t id = -1;
    const int rv = ngtcp2_conn_open_uni_stream(conn_, &id, nullptr);
    if (rv == NGTCP2_ERR_STREAM_ID_BLOCKED) return false;  // until the peer allows more
    if (rv != 0) {
      failWith(rv, std::string("QUIC: cannot open a stream: ") + ngtcp2_strerror(rv));
      return false;
    }
    nextLocalStream_ = id + 4;
  }
  return true;
}

// ------------------------------------------------------------------------- input

void Connection::readMore() {
  socket_->async_wait(asio::ip::udp::socket::wait_read, [weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self || ec || self->state_ == State::Ended) return;
    self->drainSocket();
  });
}

void Connection::drainSocket() {
  auto self = shared_from_this();
  receiveBuffer_.resize(kMaxDatagram);
  for (int i = 0; i < kDatagramsPerRead && state_ != State::Ended; ++i) {
    const ssize_t n = ::recv(socket_->native_handle(), receiveBuffer_.data(), receiveBuffer_.size(), MSG_DONTWAIT);
    if (n < 0) {
      // ECONNREFUSED: an ICMP error of an earlier datagram (nobody listens yet, or any more):
      // QUIC's own timers decide when to give up.
      if (errno == EINTR || errno == ECONNREFUSED) continue;
      break;
    }
    onDatagram(std::span<const std::uint8_t>(receiveBuffer_.data(), static_cast<std::size_t>(n)), timestamp());
  }
  afterInput();
  if (state_ != State::Ended) readMore();
}

bool Connection::onDatagram(std::span<const std::uint8_t> datagram, std::uint64_t now) {
  if (conn_ == nullptr || state_ == State::Ended) return true;
  ++counters_.datagramsReceived;
  const ngtcp2_path path = pathOf(local_, remote_);
  ngtcp2_pkt_info info{};
  const int rv = ngtcp2_conn_read_pkt(conn_, &path, &info, datagram.data(), datagram.size(), now);
  if (rv == 0) return true;
  auto self = shared_from_this();
  switch (rv) {
    case NGTCP2_ERR_DRAINING: {
      // The peer's CONNECTION_CLOSE.
      ngtcp2_connection_close_error e;
      ngtcp2_conn_get_connection_close_error(conn_, &e);
      const bool noError = e.error_code == 0 && e.type != NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT_IDLE_CLOSE;
      const std::string who = role_ == Role::Client ? "the server" : "the client";
      endedByPeer_ = noError;
      const std::string why = "QUIC connection closed by " + who + " (" + closeReason(e) + ")";
      const bool crypto = (e.error_code & ~0xffull) == NGTCP2_CRYPTO_ERROR &&
                          e.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT;
      end(noError ? ChannelEnd(ChannelEnd::Reason::kClosedByPeer) : ChannelEnd::failed(why),
          crypto ? "TLS handshake failed: " + who + " sent the TLS alert " +
                       alertName(static_cast<std::uint8_t>(e.error_code & 0xff))
                 : why);
      return true;
    }
    case NGTCP2_ERR_DROP_CONN:
    case NGTCP2_ERR_RETRY:
      // Garbage that looked like a first Initial (a server's new connection): forgotten without
      // a word. Later in a connection's life ngtcp2 asks for a silent drop only of a connection
      // that cannot go on.
      if (role_ == Role::Server && state_ == State::Handshake && counters_.datagramsReceived == 1) {
        state_ = State::Ended;
        return false;
      }
      end(ChannelEnd::failed("QUIC connection dropped: " + std::string(ngtcp2_strerror(rv))),
          "QUIC handshake dropped: " + std::string(ngtcp2_strerror(rv)));
      return true;
    case NGTCP2_ERR_CRYPTO: {
      const auto alert = ngtcp2_conn_get_tls_alert(conn_);
      closeWithAlert(alert, tls_->failure(alert));
      return true;
    }
    case NGTCP2_ERR_CALLBACK_FAILURE:
      if (!callbackFailure_.empty()) {
        if (callbackAlert_ != 0) {
          closeWithAlert(callbackAlert_, callbackFailure_);
        } else {
          failWith(NGTCP2_ERR_PROTO, callbackFailure_);
        }
        return true;
      }
      [[fallthrough]];
    default: failWith(rv, std::string("QUIC: ") + ngtcp2_strerror(rv)); return true;
  }
}

void Connection::afterInput() {
  auto self = shared_from_this();
  if (handshakeCompleted_ && state_ == State::Handshake) handshakeDone();
  deliverAll();
  if (state_ != State::Ended) flush();
}

void Connection::handshakeDone() {
  state_ = State::Established;
  if (onHandshake_) {
    auto handler = std::move(onHandshake_);
    onHandshake_ = nullptr;
    handler(Result<void>{});
  }
}

void Connection::deliverAll() {
  auto self = shared_from_this();
  std::vector<std::uint16_t> numbers;
  numbers.swap(toDeliver_);
  std::sort(numbers.begin(), numbers.end());
  numbers.erase(std::unique(numbers.begin(), numbers.end()), numbers.end());
  for (const auto number : numbers) {
    auto& f = flow(number);
    if (!f.announced && onChannel_ && !f.released && state_ != State::Ended) {
      f.announced = true;
      auto handler = onChannel_;
      handler(number, channel(number));
    }
    deliver(f);
  }
}

// Whole messages to the flow's handler; their bytes go back to the peer as credit (stream and
// connection), so that a flow whose reader does not read holds back its sender, not the others.
void Connection::deliver(Flow& f) {
  if (f.released) {
    f.onMessage = nullptr;
  } else if (f.onMessage && !f.endTold) {
    const std::uint64_t now = nowMicros();
    bool protocolViolation = false;
    while (!f.released && !f.endTold) {
      auto next = f.in.next();
      if (!next) {
        f.end = ChannelEnd::protocolViolation(next.error());
        protocolViolation = true;
        break;
      }
      if (!*next) break;
      const auto message = **next;
      f.uncredited += message.size();
      f.delivered += message.size();
      auto handler = f.onMessage;  // the handler may release the flow (and with it f.onMessage)
      handler(message, now);
      if (state_ == State::Ended && !f.end) break;
    }
    if (protocolViolation && conn_ != nullptr && state_ != State::Ended) {
      // Nothing more of this stream is of use: the peer may stop sending it.
      ngtcp2_conn_shutdown_stream_read(conn_, remoteStream(f.number), kAbortCode);
      scheduleFlush();
    }
    if (!f.end && f.finReceived && !protocolViolation) {
      auto next = f.in.next();
      if (next && !*next) f.end = ChannelEnd::ofRead(asio::error::eof, f.in.buffered() > 0);
    }
  }
  if (f.uncredited > 0 && conn_ != nullptr && state_ != State::Ended) {
    ngtcp2_conn_extend_max_stream_offset(conn_, remoteStream(f.number), f.uncredited);
    ngtcp2_conn_extend_max_offset(conn_, f.uncredited);
    f.uncredited = 0;
    scheduleFlush();
  }
  if (f.end && !f.endTold && f.onError && !f.released) {
    f.endTold = true;
    if (f.sendHandler) {
      completeSend(f, f.end->byPeer() ? boost::system::error_code(asio::error::eof)
                                      : boost::system::error_code(asio::error::connection_aborted));
    }
    auto handler = f.onError;
    handler(*f.end);
  }
}

// ------------------------------------------------------------------------- output

void Connection::scheduleFlush() {
  if (flushScheduled_ || state_ == State::Ended) return;
  flushScheduled_ = true;
  asio::post(io_, [weak = weak_from_this()] {
    if (auto self = weak.lock()) {
      self->flushScheduled_ = false;
      self->flush();
    }
  });
}

void Connection::flush() {
  if (conn_ == nullptr || state_ == State::Ended || writeWaiting_) return;
  auto self = shared_from_this();
  if (!pending_.empty()) {
    if (!sendDatagram(pending_.data(), pending_.size())) return waitWritable();
    pending_.clear();
  }
  if (state_ == State::Established) {
    for (auto& [number, f] : flows_) {
      const bool wantsStream = f.queued > f.accepted || (f.finQueued && !f.finSent);
      if (wantsStream && !f.sendShut && localStream(number) >= nextLocalStream_ &&
          !openLocalStreams(localStream(number))) {
        break;
      }
      if (state_ == State::Ended) return;
    }
  }
  for (auto& [number, f] : flows_) f.blocked = false;

  // A flow may send when its stream is open and it has bytes (or its FIN) that ngtcp2 has not
  // taken; the flows take turns packet by packet.
  auto sendable = [this](const Flow& f) {
    return !f.blocked && !f.sendShut && localStream(f.number) < nextLocalStream_ &&
           (f.accepted < f.queued || (f.finQueued && !f.finSent));
  };
  auto nextFlow = [&]() -> Flow* {
    if (state_ != State::Established || flows_.empty()) return nullptr;
    auto start = flows_.lower_bound(nextFlowToSend_);
    for (auto it = start; it != flows_.end(); ++it) {
      if (sendable(it->second)) return &it->second;
    }
    for (auto it = flows_.begin(); it != start; ++it) {
      if (sendable(it->second)) return &it->second;
    }
    return nullptr;
  };

  const std::uint64_t now = timestamp();
  const std::size_t size = std::min(ngtcp2_conn_get_path_max_tx_udp_payload_size(conn_), packet_.size());
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info info{};
  int packets = 0;
  while (packets < kPacketsPerRound) {
    Flow* f = nextFlow();
    ngtcp2_vec vectors[kVectors];
    std::size_t count = 0, offered = 0;
    std::int64_t id = -1;
    std::uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_NONE;
    if (f != nullptr) {
      id = localStream(f->number);
      flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
      std::uint64_t offset = f->chunkBase;
      for (const auto& chunk : f->chunks) {
        const std::uint64_t chunkEnd = offset + chunk.size();
        if (chunkEnd > f->accepted && count < kVectors) {
          const std::size_t skip = static_cast<std::size_t>(std::max(f->accepted, offset) - offset);
          vectors[count].base = const_cast<std::uint8_t*>(chunk.data()) + skip;
          vectors[count].len = chunk.size() - skip;
          offered += vectors[count].len;
          ++count;
        }
        offset = chunkEnd;
      }
      if (f->finQueued && f->accepted + offered == f->queued) flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
    }
    ngtcp2_ssize taken = -1;
    const ngtcp2_ssize n =
        ngtcp2_conn_writev_stream(conn_, &ps.path, &info, packet_.data(), size, &taken, flags, id, vectors, count, now);
    if (f != nullptr && taken >= 0) {
      onAccepted(*f, static_cast<std::uint64_t>(taken));
      if ((flags & NGTCP2_WRITE_STREAM_FLAG_FIN) && static_cast<std::size_t>(taken) == offered) f->finSent = true;
    }
    if (n < 0) {
      switch (n) {
        case NGTCP2_ERR_WRITE_MORE:
          // Room left in the packet: the next flow's bytes (or the same flow's next ones).
          if (taken == 0 && !f->finSent) f->blocked = true;
          continue;
        case NGTCP2_ERR_STREAM_DATA_BLOCKED:
          f->blocked = true;
          ++counters_.streamBlocked;
          continue;
        case NGTCP2_ERR_STREAM_SHUT_WR:
        case NGTCP2_ERR_STREAM_NOT_FOUND:
          f->sendShut = true;
          if (f->sendHandler) completeSend(*f, asio::error::connection_aborted);
          continue;
        default: return failWith(static_cast<int>(n), std::string("QUIC: ") + ngtcp2_strerror(static_cast<int>(n)));
      }
    }
    if (n == 0) break;  // nothing to send, or the congestion window or pacing says wait
    ++packets;
    if (f != nullptr) nextFlowToSend_ = static_cast<std::uint16_t>(f->number + 1);
    if (!sendDatagram(packet_.data(), static_cast<std::size_t>(n))) {
      pending_.assign(packet_.data(), packet_.data() + n);
      ngtcp2_conn_update_pkt_tx_time(conn_, now);
      return waitWritable();
    }
  }
  ngtcp2_conn_update_pkt_tx_time(conn_, now);
  if (packets == kPacketsPerRound) scheduleFlush();  // more after the thread's other handlers
  armTimer();
}

long sendDatagramFrom(int fd, const std::uint8_t* data, std::size_t size, const asio::ip::udp::endpoint& to,
                      const std::optional<asio::ip::address>& source) {
  iovec vector{const_cast<std::uint8_t*>(data), size};
  msghdr message{};
  message.msg_name = const_cast<sockaddr*>(to.data());
  message.msg_namelen = static_cast<socklen_t>(to.size());
  message.msg_iov = &vector;
  message.msg_iovlen = 1;
  alignas(cmsghdr) std::uint8_t control[CMSG_SPACE(sizeof(in6_pktinfo))] = {};
  if (source) {
    // The socket's family decides the option: an IPv6 socket (dual-stack ones too, whose IPv4
    // peers and addresses are v4-mapped) takes IPV6_PKTINFO, an IPv4 socket IP_PKTINFO. No
    // interface: the route to the peer decides it, only the source address is fixed.
    message.msg_control = control;
    auto put = [&message, &control](int level, int type, const auto& info) {
      cmsghdr* c = reinterpret_cast<cmsghdr*>(control);
      c->cmsg_level = level;
      c->cmsg_type = type;
      c->cmsg_len = CMSG_LEN(sizeof info);
      std::memcpy(CMSG_DATA(c), &info, sizeof info);
      message.msg_controllen = CMSG_SPACE(sizeof info);
    };
    if (to.address().is_v6()) {
      in6_pktinfo info{};
      const asio::ip::address_v6 address =
          source->is_v6() ? source->to_v6() : asio::ip::make_address_v6(asio::ip::v4_mapped, source->to_v4());
      const auto bytes = address.to_bytes();
      std::memcpy(&info.ipi6_addr, bytes.data(), bytes.size());
      put(IPPROTO_IPV6, IPV6_PKTINFO, info);
    } else {
      in_pktinfo info{};
      const auto bytes = source->to_v4().to_bytes();
      std::memcpy(&info.ipi_spec_dst, bytes.data(), bytes.size());
      put(IPPROTO_IP, IP_PKTINFO, info);
    }
  }
  return static_cast<long>(::sendmsg(fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL));
}

bool Connection::sendDatagram(const std::uint8_t* data, std::size_t size) {
  const std::optional<asio::ip::address> source =
      sourceAddressed_ ? std::optional<asio::ip::address>(local_.address()) : std::nullopt;
  for (;;) {
    const long rc = sendDatagramFrom(socket_->native_handle(), data, size, remote_, source);
    if (rc >= 0) {
      ++counters_.datagramsSent;
      return true;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
      ++counters_.socketBlocked;
      return false;
    }
    // Anything else (an ICMP error of an earlier datagram, an unreachable network): this
    // datagram is lost, and QUIC's loss recovery and timers take it from here.
    return true;
  }
}

void Connection::waitWritable() {
  writeWaiting_ = true;
  armTimer();
  socket_->async_wait(asio::ip::udp::socket::wait_write,
                      [weak = weak_from_this()](const boost::system::error_code& ec) {
                        auto self = weak.lock();
                        if (!self) return;
                        self->writeWaiting_ = false;
                        if (!ec) self->flush();
                      });
}

void Connection::armTimer() {
  if (conn_ == nullptr || state_ == State::Ended) return;
  const std::uint64_t expiry = ngtcp2_conn_get_expiry(conn_);
  if (expiry == armedExpiry_) return;
  armedExpiry_ = expiry;
  if (expiry == std::numeric_limits<std::uint64_t>::max()) {
    timer_.cancel();
    return;
  }
  timer_.expires_at(std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::nanoseconds(expiry))));
  timer_.async_wait([weak = weak_from_this(), expiry](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self || ec || self->armedExpiry_ != expiry) return;
    self->armedExpiry_ = 0;
    self->onTimer();
  });
}

void Connection::onTimer() {
  if (conn_ == nullptr || state_ == State::Ended) return;
  auto self = shared_from_this();
  const int rv = ngtcp2_conn_handle_expiry(conn_, timestamp());
  if (rv == NGTCP2_ERR_IDLE_CLOSE) {
    // Nothing from the peer for the idle timeout: gone without a word (no CONNECTION_CLOSE).
    const std::string why = "QUIC connection idle for " + seconds(limits_.idleTimeout) + ": " + peer_ + " is gone";
    end(ChannelEnd::failed(why), "QUIC handshake: no answer from " + peer_ + " within " + seconds(limits_.idleTimeout));
    return;
  }
  if (rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT) {
    const std::string why = "QUIC handshake with " + peer_ + " timed out after " + seconds(limits_.handshakeTimeout);
    end(ChannelEnd::failed(why), why);
    return;
  }
  if (rv != 0) return failWith(rv, std::string("QUIC: ") + ngtcp2_strerror(rv));
  flush();
}

void Connection::onAccepted(Flow& f, std::uint64_t bytes) {
  f.accepted += bytes;
  if (f.sendHandler && f.accepted >= f.sendTarget) completeSend(f, {});
}

// Always asynchronously, as Asio's operations complete: the handler starts the next batch.
void Connection::completeSend(Flow& f, const boost::system::error_code& ec) {
  auto handler = std::move(f.sendHandler);
  f.sendHandler = nullptr;
  if (!handler) return;
  asio::post(io_, [handler = std::move(handler), ec, messages = f.sendMessages] { handler(ec, ec ? 0 : messages, 0); });
}

// ------------------------------------------------------------------------- the channels' side

void Connection::queue(std::uint16_t stream, const std::vector<asio::const_buffer>& buffers, std::size_t messages,
                       transport::SendHandler handler) {
  auto& f = flow(stream);
  f.sendHandler = std::move(handler);
  f.sendMessages = messages;
  if (state_ == State::Ended || f.sendShut || f.released || f.finQueued) {
    const bool byPeer = (state_ == State::Ended && endedByPeer_) || (f.end && f.end->byPeer()) || f.stoppedByPeer;
    return completeSend(f, byPeer ? boost::system::error_code(asio::error::eof)
                                  : boost::system::error_code(asio::error::connection_aborted));
  }
  std::size_t total = 0;
  for (const auto& b : buffers) total += b.size();
  if (total > 0) {
    std::vector<std::uint8_t> chunk(total);
    std::size_t at = 0;
    for (const auto& b : buffers) {
      std::memcpy(chunk.data() + at, b.data(), b.size());
      at += b.size();
    }
    if (f.chunks.empty()) f.chunkBase = f.queued;
    f.chunks.push_back(std::move(chunk));
    f.queued += total;
  }
  f.sendTarget = f.queued;
  if (f.accepted >= f.sendTarget) return completeSend(f, {});
  scheduleFlush();
}

void Connection::claim(std::uint16_t stream, transport::MessageHandler onMessage, transport::ErrorHandler onError) {
  auto& f = flow(stream);
  f.announced = true;
  f.onMessage = std::move(onMessage);
  f.onError = std::move(onError);
  f.receiving = true;
  asio::post(io_, [weak = weak_from_this(), stream] {
    if (auto self = weak.lock()) self->deliver(self->flow(stream));
  });
}

void Connection::expect(std::uint16_t stream, npmp::MessageSet kind) { flow(stream).in.expect(kind); }

void Connection::release(std::uint16_t stream, bool abort) {
  auto it = flows_.find(stream);
  if (it == flows_.end()) return;
  auto& f = it->second;
  if (f.released) return;
  f.released = true;
  f.onMessage = nullptr;
  f.onError = nullptr;
  if (f.sendHandler) completeSend(f, asio::error::operation_aborted);
  if (state_ == State::Ended || conn_ == nullptr) return;
  const bool opened = localStream(stream) < nextLocalStream_;
  if (abort) {
    if (opened && !f.sendShut) ngtcp2_conn_shutdown_stream_write(conn_, localStream(stream), kAbortCode);
    f.sendShut = true;
  } else if (!f.sendShut) {
    // FIN after what is queued, on a stream opened for it if need be: the peer's side of the
    // channel ends by it (a zero-length STREAM frame with FIN where nothing was ever sent).
    f.finQueued = true;
  }
  if (f.received > 0 && !f.finReceived && !f.receiveClosed) {
    // The peer may stop sending: nobody reads this stream any more.
    ngtcp2_conn_shutdown_stream_read(conn_, remoteStream(stream), abort ? kAbortCode : 0);
  }
  // What arrived and was not read goes back as credit.
  f.uncredited += f.in.buffered();
  f.in = transport::MessageReassembler();
  if (f.uncredited > 0) {
    ngtcp2_conn_extend_max_stream_offset(conn_, remoteStream(stream), f.uncredited);
    ngtcp2_conn_extend_max_offset(conn_, f.uncredited);
    f.uncredited = 0;
  }
  scheduleFlush();
}

long Connection::unsent(std::uint16_t stream) {
  auto it = flows_.find(stream);
  if (it == flows_.end() || it->second.sendShut) return 0;
  return static_cast<long>(it->second.queued - it->second.acked);
}

long Connection::unread(std::uint16_t stream) {
  auto it = flows_.find(stream);
  if (it == flows_.end() || it->second.released) return 0;
  return static_cast<long>(it->second.in.buffered());
}

std::uint64_t Connection::bytesRead(std::uint16_t stream) {
  auto it = flows_.find(stream);
  return it == flows_.end() ? 0 : it->second.delivered;
}

void Connection::samplePaths(std::uint16_t stream, std::vector<transport::PathSample>& out) {
  if (conn_ == nullptr) return;
  ngtcp2_conn_stat stat;
  ngtcp2_conn_get_conn_stat(conn_, &stat);
  transport::PathSample s;
  s.id = 0;
  s.local = transport::endpointName(local_.address(), local_.port());
  s.remote = peer_;
  s.state = stateName();
  s.cwnd = static_cast<double>(stat.cwnd);
  if (stat.ssthresh != std::numeric_limits<std::uint64_t>::max()) s.ssthresh = static_cast<double>(stat.ssthresh);
  // Before the first RTT sample, ngtcp2 reports its initial RTT (333 ms): not a measurement.
  if (stat.first_rtt_sample_ts != std::numeric_limits<std::uint64_t>::max()) {
    s.srttMs = static_cast<double>(stat.smoothed_rtt) / 1e6;
    s.rttVarMs = static_cast<double>(stat.rttvar) / 1e6;
  }
  s.rtoMs = static_cast<double>(ngtcp2_conn_get_pto(conn_)) / 1e6;
  s.mtu = static_cast<double>(stat.max_tx_udp_payload_size);
  s.unacked = static_cast<double>(stat.bytes_in_flight);
  if (stat.delivery_rate_sec > 0) s.deliveryRate = 8.0 * static_cast<double>(stat.delivery_rate_sec);
  if (stat.pacing_rate > 0) s.pacingRate = 8e9 * stat.pacing_rate;  // bytes per nanosecond
  if (auto it = flows_.find(stream); it != flows_.end()) {
    const auto& f = it->second;
    s.bytesSent = static_cast<double>(f.accepted);
    s.bytesAcked = static_cast<double>(f.acked);
    s.bytesReceived = static_cast<double>(f.received);
    if (localStream(stream) < nextLocalStream_) {
      s.lost = static_cast<double>(ngtcp2_conn_get_stream_loss_count(conn_, localStream(stream)));
    }
  }
  out.push_back(std::move(s));
}

std::string Connection::stateName() const {
  switch (state_) {
    case State::Handshake: return "HANDSHAKE";
    case State::Established: return "ESTABLISHED";
    case State::Ended: return "CLOSED";
  }
  return "-";
}

// ------------------------------------------------------------------------- the end

void Connection::writeClose(const void* error) {
  if (conn_ == nullptr || ngtcp2_conn_is_in_closing_period(conn_) || ngtcp2_conn_is_in_draining_period(conn_)) return;
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info info{};
  const auto n =
      ngtcp2_conn_write_connection_close(conn_, &ps.path, &info, packet_.data(), packet_.size(),
                                         static_cast<const ngtcp2_connection_close_error*>(error), timestamp());
  if (n > 0) sendDatagram(packet_.data(), static_cast<std::size_t>(n));
}

void Connection::failWith(int liberr, const std::string& why) {
  ngtcp2_connection_close_error ccerr;
  ngtcp2_connection_close_error_set_transport_error_liberr(&ccerr, liberr, nullptr, 0);
  writeClose(&ccerr);
  end(ChannelEnd::failed(why), why);
}

void Connection::closeWithAlert(std::uint8_t alert, const std::string& why) {
  ngtcp2_connection_close_error ccerr;
  ngtcp2_connection_close_error_set_transport_error_tls_alert(&ccerr, alert, nullptr, 0);
  writeClose(&ccerr);
  end(ChannelEnd::failed(why), why);
}

void Connection::end(const ChannelEnd& how, const std::string& handshakeError) {
  if (state_ == State::Ended) return;
  auto self = shared_from_this();
  const bool handshaking = state_ == State::Handshake;
  state_ = State::Ended;
  connectionEnd_ = how;
  timer_.cancel();
  if (role_ == Role::Client) {
    boost::system::error_code ec;
    socket_->close(ec);
  }
  if (handshaking && onHandshake_) {
    auto handler = std::move(onHandshake_);
    onHandshake_ = nullptr;
    handler(Failure{handshakeError});
  }
  onChannel_ = nullptr;
  // The flows: what arrived whole is delivered, then the end.
  for (auto& [number, f] : flows_) {
    if (!f.end) f.end = how;
    deliver(f);
    if (f.sendHandler) {
      completeSend(f, how.byPeer() ? boost::system::error_code(asio::error::eof)
                                   : boost::system::error_code(asio::error::connection_aborted));
    }
  }
  if (onEnded_) {
    auto handler = std::move(onEnded_);
    onEnded_ = nullptr;
    handler();
  }
}

}  // namespace npm::quic
