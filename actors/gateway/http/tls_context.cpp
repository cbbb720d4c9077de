#include "actors/gateway/http/tls_context.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "base/token_file.hpp"
#include "security/openssl_errors.hpp"
#include "security/private_key.hpp"

namespace ember {

using security::openssl_errors;

Result<std::shared_ptr<const TlsContext>> make_tls_context(const TlsFiles& files, const std::string& what) {
  const std::string cert_key = what + ".tls_certificate", key_key = what + ".tls_key";
  if (files.certificate.empty() || files.key.empty()) {
    return invalid_argument(what + ": TLS needs both tls_certificate and tls_key");
  }
  std::string passphrase;
  if (!files.passphrase_file.empty()) {
    EMBER_ASSIGN_OR_RETURN(passphrase, read_token_file(files.passphrase_file, what + ".tls_key_passphrase_file"));
  }
  auto out = std::make_shared<TlsContext>();
  ERR_clear_error();
  SSL_CTX* raw = SSL_CTX_new(TLS_server_method());
  if (!raw) return internal_error("SSL_CTX_new: " + openssl_errors());
  out->ctx.reset(raw, SSL_CTX_free);
  SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
  EMBER_ASSIGN_OR_RETURN(out->certificate_pem, security::read_file(files.certificate, cert_key));
  if (SSL_CTX_use_certificate_chain_file(raw, files.certificate.c_str()) != 1) {
    return invalid_argument(cert_key + " (" + files.certificate +
                            "): not a PEM certificate chain: " + openssl_errors());
  }
  EMBER_ASSIGN_OR_RETURN(auto pkey, security::load_private_key(files.key, passphrase, key_key, files.passphrase_file));
  EMBER_RETURN_IF_ERROR(security::use_private_key(raw, pkey.get(), key_key, files.key, cert_key, files.certificate));
  // gRPC takes the key as PEM text without a passphrase: the key as loaded, written out plain.
  BIO* bio = BIO_new(BIO_s_mem());
  if (!bio || PEM_write_bio_PrivateKey(bio, pkey.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    if (bio) BIO_free(bio);
    return internal_error("writing the TLS key for gRPC: " + openssl_errors());
  }
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  out->key_pem.assign(data, static_cast<size_t>(len));
  BIO_free(bio);
  if (!files.client_ca.empty()) {
    const std::string ca_key = what + ".tls_client_ca";
    if (SSL_CTX_load_verify_locations(raw, files.client_ca.c_str(), nullptr) != 1) {
      return invalid_argument(ca_key + " (" + files.client_ca + "): not a PEM CA certificate: " + openssl_errors());
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca.c_str());
    if (names) SSL_CTX_set_client_CA_list(raw, names);
    SSL_CTX_set_verify(raw, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    EMBER_ASSIGN_OR_RETURN(out->client_ca_pem, security::read_file(files.client_ca, ca_key));
    out->mutual = true;
  }
  return std::shared_ptr<const TlsContext>(std::move(out));
}

}  // namespace ember
