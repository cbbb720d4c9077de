#include "security/private_key.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "security/openssl_errors.hpp"

namespace ember::security {

namespace {

int passphrase_callback(char* buf, int size, int, void* user) {
  const auto* pass = static_cast<const std::string*>(user);
  if (pass->size() > static_cast<size_t>(size)) return 0;
  std::copy(pass->begin(), pass->end(), buf);
  return static_cast<int>(pass->size());
}

}  // namespace

Result<std::string> read_file(const std::string& path, const std::string& setting) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(setting + " (" + path + "): cannot read: " + std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Result<std::shared_ptr<EVP_PKEY>> load_private_key(const std::string& path, const std::string& passphrase,
                                                   const std::string& setting, const std::string& passphrase_file) {
  EMBER_ASSIGN_OR_RETURN(const std::string text, read_file(path, setting));
  ERR_clear_error();
  BIO* bio = BIO_new_mem_buf(text.data(), static_cast<int>(text.size()));
  std::string pass = passphrase;  // the callback's user data is not const
  EVP_PKEY* key = bio ? PEM_read_bio_PrivateKey(bio, nullptr, passphrase_callback, &pass) : nullptr;
  if (bio) BIO_free(bio);
  if (!key) {
    return invalid_argument(setting + " (" + path + "): cannot load the private key" +
                            (passphrase_file.empty() ? " (encrypted? set tls_key_passphrase_file)"
                                                     : " with the passphrase of " + passphrase_file) +
                            ": " + openssl_errors());
  }
  return std::shared_ptr<EVP_PKEY>(key, EVP_PKEY_free);
}

Status use_private_key(SSL_CTX* ctx, EVP_PKEY* key, const std::string& key_setting, const std::string& key_path,
                       const std::string& cert_setting, const std::string& cert_path) {
  ERR_clear_error();
  if (SSL_CTX_use_PrivateKey(ctx, key) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    return invalid_argument(key_setting + " (" + key_path + ") is not the key of " + cert_setting + " (" + cert_path +
                            "): " + openssl_errors());
  }
  return Status::OK();
}

}  // namespace ember::security
