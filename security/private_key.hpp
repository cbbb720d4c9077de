// Reading a TLS private key from a PEM file, decrypted with its passphrase when it is encrypted: the
// API's TLS (actors/gateway/http/tls_context.hpp) and the control plane's (control_tls.hpp) both
// load keys this way, so that a wrong path, a missing or wrong passphrase and a key of another
// certificate each get an error naming the setting and the file.
#pragma once

#include <memory>
#include <string>

#include "base/status.hpp"

typedef struct evp_pkey_st EVP_PKEY;
typedef struct ssl_ctx_st SSL_CTX;

namespace ember::security {

/// The key in `path`; `passphrase` decrypts it (empty: the key must not be encrypted). `setting`
/// names the key's setting in errors ("gateway.tls_key"); `passphrase_file` where the passphrase came
/// from (empty: none was given, and the error suggests one).
Result<std::shared_ptr<EVP_PKEY>> load_private_key(const std::string& path, const std::string& passphrase,
                                                   const std::string& setting, const std::string& passphrase_file);

/// Installs `key` in `ctx`, whose certificate is set already, and checks that it is that
/// certificate's key: invalid_argument "KEY_SETTING (path) is not the key of CERT_SETTING (path)".
Status use_private_key(SSL_CTX* ctx, EVP_PKEY* key, const std::string& key_setting, const std::string& key_path,
                       const std::string& cert_setting, const std::string& cert_path);

/// The whole file, or io_error "SETTING (path): cannot read: why".
Result<std::string> read_file(const std::string& path, const std::string& setting);

}  // namespace ember::security
