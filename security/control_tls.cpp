#include "security/control_tls.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "base/token_file.hpp"
#include "security/openssl_errors.hpp"
#include "security/private_key.hpp"

namespace ember {

using security::openssl_errors;

namespace {

/// The file must exist and be readable: OpenSSL's own message for a missing file is "system lib".
Status readable(const std::string& setting, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return io_error(setting + " (" + path + "): cannot read: " + std::strerror(errno));
  std::fclose(f);
  return Status::OK();
}

}  // namespace

Result<ControlTls> check_control_tls(const ControlTlsFiles& files, const std::string& what) {
  const std::string cert_key = what + ".tls_certificate", key_key = what + ".tls_key", ca_key = what + ".tls_ca";
  if (files.certificate.empty() || files.key.empty() || files.ca.empty()) {
    return invalid_argument(what + ": the control plane's TLS needs tls_certificate, tls_key and tls_ca together");
  }
  ControlTls out{files.certificate, files.key, "", files.ca};
  if (!files.passphrase_file.empty()) {
    EMBER_ASSIGN_OR_RETURN(out.passphrase, read_token_file(files.passphrase_file, what + ".tls_key_passphrase_file"));
  }
  EMBER_RETURN_IF_ERROR(readable(cert_key, files.certificate));
  EMBER_RETURN_IF_ERROR(readable(key_key, files.key));
  EMBER_RETURN_IF_ERROR(readable(ca_key, files.ca));

  ERR_clear_error();
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(SSL_CTX_new(TLS_method()), SSL_CTX_free);
  if (!ctx) return internal_error("SSL_CTX_new: " + openssl_errors());
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), files.certificate.c_str()) != 1) {
    return invalid_argument(cert_key + " (" + files.certificate +
                            "): not a PEM certificate chain: " + openssl_errors());
  }
  // CAF reads the same file with the same passphrase (SSL_CTX_use_PrivateKey_file and a callback).
  EMBER_ASSIGN_OR_RETURN(auto key,
                         security::load_private_key(files.key, out.passphrase, key_key, files.passphrase_file));
  EMBER_RETURN_IF_ERROR(
      security::use_private_key(ctx.get(), key.get(), key_key, files.key, cert_key, files.certificate));
  if (SSL_CTX_load_verify_locations(ctx.get(), files.ca.c_str(), nullptr) != 1) {
    return invalid_argument(ca_key + " (" + files.ca + "): not a PEM CA certificate: " + openssl_errors());
  }
  // The CA must have signed this process's own certificate: otherwise every peer refuses it, and
  // the process would only find out when it tries to connect.
  X509* leaf = SSL_CTX_get0_certificate(ctx.get());
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get0_chain_certs(ctx.get(), &chain);
  std::unique_ptr<X509_STORE_CTX, void (*)(X509_STORE_CTX*)> verify(X509_STORE_CTX_new(), X509_STORE_CTX_free);
  if (!verify || X509_STORE_CTX_init(verify.get(), SSL_CTX_get_cert_store(ctx.get()), leaf, chain) != 1) {
    return internal_error("X509_STORE_CTX_init: " + openssl_errors());
  }
  if (X509_verify_cert(verify.get()) != 1) {
    return invalid_argument(cert_key + " (" + files.certificate + ") does not verify against " + ca_key + " (" +
                            files.ca + "): " + X509_verify_cert_error_string(X509_STORE_CTX_get_error(verify.get())));
  }
  ERR_clear_error();
  return out;
}

}  // namespace ember
