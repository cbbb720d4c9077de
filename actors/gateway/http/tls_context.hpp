// TLS for the API (HTTP and gRPC): the server's certificate chain and key, optionally its key's
// passphrase and a CA whose certificates clients must present (mutual TLS). Every file is loaded
// and checked at start with OpenSSL's own calls (certificate chain, private key with the
// passphrase, that the key matches the certificate, the client CA), so that a wrong path, a wrong
// passphrase or a key of another certificate stops the process at once with an error naming the
// file, instead of failing the first handshake.
//
// Thread-safety: a TlsContext is immutable after make_tls_context; SSL objects made from it may be
// used on any thread, one connection each.
#pragma once

#include <memory>
#include <string>

#include "base/status.hpp"

typedef struct ssl_ctx_st SSL_CTX;

namespace ember {

/// The files, as gateway.tls_* name them.
struct TlsFiles {
  std::string certificate;      // PEM: the server's certificate, then its chain
  std::string key;              // PEM: its private key (may be encrypted)
  std::string passphrase_file;  // the key's passphrase (first line); empty: the key is not encrypted
  std::string client_ca;        // PEM: clients must present a certificate it signed; empty: none asked
};

struct TlsContext {
  std::shared_ptr<SSL_CTX> ctx;  // TLS 1.2 or later; peer verification when client_ca is set
  std::string certificate_pem;   // the files' contents, for gRPC's SslServerCredentials
  std::string key_pem;           // decrypted (gRPC takes no passphrase)
  std::string client_ca_pem;
  bool mutual = false;
};

/// Loads and checks `files` for a server; `what` names the config section in errors ("gateway").
Result<std::shared_ptr<const TlsContext>> make_tls_context(const TlsFiles& files, const std::string& what);

}  // namespace ember
