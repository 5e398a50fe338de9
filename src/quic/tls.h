// TLS 1.3 of the QUIC connections: GnuTLS sessions wired to ngtcp2 by its GnuTLS crypto back
// end (ngtcp2_crypto_gnutls). Internal to quic/: connection.h and server.h keep GnuTLS out of
// their users' includes.
#pragma once

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"

namespace npm::quic {

// The one application protocol of netperfmeter's QUIC data connections (the reference's
// "netperfmeter/control" is defined there but never used).
inline constexpr std::string_view kAlpn = "netperfmeter/data";

// A certificate credentials object of GnuTLS, freed with its owner.
class Credentials {
public:
  // The server's certificate chain and private key, from PEM files. An unreadable file or a
  // key that does not match the certificate is one line naming the file and the reason.
  static Result<std::shared_ptr<Credentials>> server(const std::string& keyFile, const std::string& certFile);
  // What a client trusts: the CA certificates of a PEM file, or the system's trust store where
  // `caFile` is empty.
  static Result<std::shared_ptr<Credentials>> client(const std::string& caFile);

  Credentials() = default;
  Credentials(const Credentials&) = delete;
  Credentials& operator=(const Credentials&) = delete;
  ~Credentials();
  gnutls_certificate_credentials_t native() const { return credentials_; }

private:
  gnutls_certificate_credentials_t credentials_ = nullptr;
};

// One connection's GnuTLS session, configured for QUIC: TLS 1.3 only, ALPN kAlpn (mandatory),
// the credentials, and on a client the server's name for SNI and the certificate check.
// `ref` (owned by the connection) leads ngtcp2's crypto back end from the session to the
// ngtcp2_conn. Where the environment names SSLKEYLOGFILE, the session appends its secrets to
// that file in the NSS key log format (Wireshark decrypts QUIC with it).
class TlsSession {
public:
  // hostName empty: the certificate chain is checked against the credentials, its name is not.
  static Result<std::unique_ptr<TlsSession>> client(std::shared_ptr<const Credentials> credentials,
                                                    const std::string& hostName, ngtcp2_crypto_conn_ref* ref);
  static Result<std::unique_ptr<TlsSession>> server(std::shared_ptr<const Credentials> credentials,
                                                    ngtcp2_crypto_conn_ref* ref);
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;
  ~TlsSession();

  gnutls_session_t native() const { return session_; }
  // After the handshake: whether the peer agreed on kAlpn (a peer that offers no ALPN at all is
  // not refused by GnuTLS itself).
  Result<void> checkAlpn() const;
  // Why the handshake failed on this side: the certificate check's verdict where it failed
  // ("the certificate is NOT trusted ...", "the name in the certificate does not match ..."),
  // else the TLS alert this side sent.
  std::string failure(std::uint8_t alertSent) const;

private:
  TlsSession() = default;
  Result<void> init(unsigned flags, std::shared_ptr<const Credentials> credentials, ngtcp2_crypto_conn_ref* ref);
  std::shared_ptr<const Credentials> credentials_;
  gnutls_session_t session_ = nullptr;
  std::string hostName_;
  bool client_ = false;
};

// "Certificate is bad (42)": a TLS alert in words, with its number.
std::string alertName(std::uint8_t alert);

}  // namespace npm::quic
