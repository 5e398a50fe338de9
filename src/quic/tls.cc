#include "quic/tls.h"

#include <fcntl.h>
#include <gnutls/x509.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <boost/asio/ip/address.hpp>

#include "common/handle.h"

namespace npm::quic {

namespace {

// TLS 1.3 only, with the AEADs and groups ngtcp2's GnuTLS back end supports; no middlebox
// compatibility mode (QUIC forbids it).
constexpr const char* kPriorities =
    "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3:"
    "-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:+AES-128-CCM:"
    "-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:+GROUP-SECP521R1";

std::string gnutlsError(int code) { return gnutls_strerror(code); }

// The file must be readable: its own line before GnuTLS's more general one.
Result<void> readable(const std::string& what, const std::string& path) {
  if (path.empty()) return Failure{what + ": no file given"};
  std::ifstream in(path);
  if (!in) return Failure{"cannot read " + what + " " + path + ": " + std::strerror(errno)};
  return {};
}

std::string hex(const unsigned char* data, std::size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (std::size_t i = 0; i < size; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 0xf];
  }
  return out;
}

// One line of the NSS key log format per secret, appended with one write() (several processes
// or connections may share the file).
int writeKeyLog(gnutls_session_t session, const char* label, const gnutls_datum_t* secret) {
  const char* path = std::getenv("SSLKEYLOGFILE");
  if (path == nullptr || *path == '\0') return 0;
  gnutls_datum_t clientRandom{}, serverRandom{};
  gnutls_session_get_random(session, &clientRandom, &serverRandom);
  const std::string line = std::string(label) + " " + hex(clientRandom.data, clientRandom.size) + " " +
                           hex(secret->data, secret->size) + "\n";
  UniqueFd fd(::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!fd) return 0;  // a key log is a debugging aid: the connection goes on without it
  [[maybe_unused]] const ssize_t written = ::write(fd.get(), line.data(), line.size());
  return 0;
}

bool isAddress(const std::string& host) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

std::string alertName(std::uint8_t alert) {
  const char* name = gnutls_alert_get_name(static_cast<gnutls_alert_description_t>(alert));
  return (name != nullptr ? std::string(name) : std::string("unknown alert")) + " (" + std::to_string(alert) + ")";
}

Credentials::~Credentials() {
  if (credentials_ != nullptr) gnutls_certificate_free_credentials(credentials_);
}

Result<std::shared_ptr<Credentials>> Credentials::server(const std::string& keyFile, const std::string& certFile) {
  if (auto r = readable("the TLS key file", keyFile); !r) return Failure{r.error()};
  if (auto r = readable("the TLS certificate file", certFile); !r) return Failure{r.error()};
  auto credentials = std::make_shared<Credentials>();
  if (int rv = gnutls_certificate_allocate_credentials(&credentials->credentials_); rv != 0) {
    return Failure{"TLS credentials: " + gnutlsError(rv)};
  }
  if (int rv = gnutls_certificate_set_x509_key_file(credentials->credentials_, certFile.c_str(), keyFile.c_str(),
                                                    GNUTLS_X509_FMT_PEM);
      rv < 0) {
    return Failure{"cannot use the TLS certificate " + certFile + " with the key " + keyFile + ": " + gnutlsError(rv)};
  }
  return credentials;
}

Result<std::shared_ptr<Credentials>> Credentials::client(const std::string& caFile) {
  auto credentials = std::make_shared<Credentials>();
  if (int rv = gnutls_certificate_allocate_credentials(&credentials->credentials_); rv != 0) {
    return Failure{"TLS credentials: " + gnutlsError(rv)};
  }
  if (caFile.empty()) {
    if (int rv = gnutls_certificate_set_x509_system_trust(credentials->credentials_); rv < 0) {
      return Failure{"cannot load the system's trusted CA certificates: " + gnutlsError(rv)};
    }
    return credentials;
  }
  if (auto r = readable("the TLS CA file", caFile); !r) return Failure{r.error()};
  const int count =
      gnutls_certificate_set_x509_trust_file(credentials->credentials_, caFile.c_str(), GNUTLS_X509_FMT_PEM);
  if (count < 0) return Failure{"cannot use the TLS CA file " + caFile + ": " + gnutlsError(count)};
  if (count == 0) return Failure{"the TLS CA file " + caFile + " holds no certificate"};
  return credentials;
}

TlsSession::~TlsSession() {
  if (session_ != nullptr) gnutls_deinit(session_);
}

// Both roles: a GnuTLS session of `flags` for QUIC (ngtcp2's configuration of that role),
// TLS 1.3 with the credentials, ALPN kAlpn mandatory, and the key log where SSLKEYLOGFILE is set.
Result<void> TlsSession::init(unsigned flags, std::shared_ptr<const Credentials> credentials,
                              ngtcp2_crypto_conn_ref* ref) {
  credentials_ = std::move(credentials);
  client_ = (flags & GNUTLS_CLIENT) != 0;
  if (int rv = gnutls_init(&session_, flags); rv != 0) return Failure{"TLS session: " + gnutlsError(rv)};
  if (int rv = gnutls_priority_set_direct(session_, kPriorities, nullptr); rv != 0) {
    return Failure{"TLS priorities: " + gnutlsError(rv)};
  }
  if ((client_ ? ngtcp2_crypto_gnutls_configure_client_session(session_)
               : ngtcp2_crypto_gnutls_configure_server_session(session_)) != 0) {
    return Failure{"ngtcp2 cannot configure the TLS session for QUIC"};
  }
  gnutls_session_set_ptr(session_, ref);
  if (int rv = gnutls_credentials_set(session_, GNUTLS_CRD_CERTIFICATE, credentials_->native()); rv != 0) {
    return Failure{"TLS credentials: " + gnutlsError(rv)};
  }
  gnutls_datum_t alpn{reinterpret_cast<unsigned char*>(const_cast<char*>(kAlpn.data())),
                      static_cast<unsigned>(kAlpn.size())};
  if (int rv = gnutls_alpn_set_protocols(session_, &alpn, 1, GNUTLS_ALPN_MANDATORY); rv != 0) {
    return Failure{"TLS ALPN: " + gnutlsError(rv)};
  }
  if (const char* keylog = std::getenv("SSLKEYLOGFILE"); keylog != nullptr && *keylog != '\0') {
    gnutls_session_set_keylog_function(session_, writeKeyLog);
  }
  return {};
}

Result<std::unique_ptr<TlsSession>> TlsSession::client(std::shared_ptr<const Credentials> credentials,
                                                       const std::string& hostName, ngtcp2_crypto_conn_ref* ref) {
  std::unique_ptr<TlsSession> tls(new TlsSession);
  if (auto made = tls->init(GNUTLS_CLIENT | GNUTLS_NO_END_OF_EARLY_DATA, std::move(credentials), ref); !made) {
    return Failure{made.error()};
  }
  tls->hostName_ = hostName;
  auto* session = tls->session_;
  if (!hostName.empty() && !isAddress(hostName)) {
    if (int rv = gnutls_server_name_set(session, GNUTLS_NAME_DNS, hostName.data(), hostName.size()); rv != 0) {
      return Failure{"TLS server name " + hostName + ": " + gnutlsError(rv)};
    }
  }
  // The chain against the credentials' CAs, and the name (DNS name or IP address) where given:
  // GnuTLS fails the handshake otherwise (GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR).
  gnutls_session_set_verify_cert(session, hostName.empty() ? nullptr : tls->hostName_.c_str(), 0);
  return tls;
}

Result<std::unique_ptr<TlsSession>> TlsSession::server(std::shared_ptr<const Credentials> credentials,
                                                       ngtcp2_crypto_conn_ref* ref) {
  std::unique_ptr<TlsSession> tls(new TlsSession);
  if (auto made = tls->init(GNUTLS_SERVER | GNUTLS_NO_AUTO_SEND_TICKET | GNUTLS_NO_END_OF_EARLY_DATA,
                            std::move(credentials), ref);
      !made) {
    return Failure{made.error()};
  }
  return tls;
}

Result<void> TlsSession::checkAlpn() const {
  const std::string peer = client_ ? "the server" : "the client";
  const std::string wanted(kAlpn);
  gnutls_datum_t selected{};
  if (gnutls_alpn_get_selected_protocol(session_, &selected) != 0) {
    return Failure{peer + " did not agree on the application protocol " + wanted + " (no ALPN)"};
  }
  const std::string got(reinterpret_cast<const char*>(selected.data), selected.size);
  if (got != wanted) return Failure{peer + " chose the application protocol " + got + ", not " + wanted};
  return {};
}

std::string TlsSession::failure(std::uint8_t alertSent) const {
  if (client_) {
    if (const unsigned status = gnutls_session_get_verify_cert_status(session_); status != 0) {
      gnutls_datum_t text{};
      std::string reason = "the certificate check failed";
      if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &text, 0) == 0) {
        reason.assign(reinterpret_cast<const char*>(text.data), text.size);
        gnutls_free(text.data);
        while (!reason.empty() && (reason.back() == ' ' || reason.back() == '.')) reason.pop_back();
      }
      std::string who = hostName_.empty() ? std::string("the server's certificate") : "the certificate of " + hostName_;
      return "TLS handshake failed: " + who + ": " + reason;
    }
  }
  if (alertSent != 0) return "TLS handshake failed: sent the TLS alert " + alertName(alertSent);
  return "TLS handshake failed";
}

}  // namespace npm::quic
