#include "quic/connection.h"

#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <span>

#include "common/hmac.h"
#include "quic/connection_detail.h"
#include "quic/stream_channel.h"
#include "quic/tls.h"

// The QUIC connection in four parts: this file (its set-up, ngtcp2's callbacks and its end),
// connection_input.cc (datagrams in, messages to the flows), connection_output.cc (packets
// out, the timer) and connection_streams.cc (the flows' streams and the channels' side).

namespace npm::quic {

using transport::ChannelEnd;
using namespace detail;

std::uint64_t timestamp() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

namespace detail {

void randomBytes(std::uint8_t* data, std::size_t size) {
  // GNUTLS_RND_RANDOM: connection IDs and tokens must not be guessable. Where GnuTLS has no
  // random bytes, the kernel's; never a predictable sequence such as rand()'s, which a forged
  // stateless reset or a guessed connection ID would exploit. With neither the process ends:
  // this runs inside ngtcp2's callbacks, through which no exception may pass.
  if (gnutls_rnd(GNUTLS_RND_RANDOM, data, size) == 0) return;
  try {
    npm::randomBytes(std::span<std::uint8_t>(data, size));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "netperfmeter: QUIC: no random bytes (GnuTLS nor the kernel): %s\n", e.what());
    std::abort();
  }
}

namespace {

ngtcp2_addr addressOf(const asio::ip::udp::endpoint& endpoint) {
  return ngtcp2_addr{const_cast<ngtcp2_sockaddr*>(reinterpret_cast<const ngtcp2_sockaddr*>(endpoint.data())),
                     static_cast<ngtcp2_socklen>(endpoint.size())};
}

}  // namespace

ngtcp2_path pathOf(const asio::ip::udp::endpoint& local, const asio::ip::udp::endpoint& remote) {
  return ngtcp2_path{addressOf(local), addressOf(remote), nullptr};
}

std::uint64_t nanoseconds(std::chrono::milliseconds ms) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(ms).count());
}

std::string seconds(std::chrono::milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(ms.count()) / 1000.0);
  return text;
}

}  // namespace detail

namespace {

constexpr std::uint8_t kAlertNoApplicationProtocol = 120;

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
