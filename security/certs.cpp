#include "security/certs.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "security/openssl_errors.hpp"

namespace ember::security {

namespace {

template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;

Result<Key> new_key() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return internal_error("generating an EC P-256 key: " + openssl_errors());
  return key;
}

/// Opens `path` for writing a new file of mode `mode`; refuses an existing one unless `force`.
Result<FILE*> create(const std::string& path, mode_t mode, bool force) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL), mode);
  if (fd < 0) {
    if (errno == EEXIST) return invalid_argument(path + " exists already (--force to overwrite it)");
    return io_error(path + ": cannot create: " + std::strerror(errno));
  }
  ::fchmod(fd, mode);  // an existing file overwritten with --force keeps no wider mode
  FILE* f = ::fdopen(fd, "w");
  if (!f) {
    ::close(fd);
    return io_error(path + ": fdopen: " + std::strerror(errno));
  }
  return f;
}

Status write_key(const std::string& path, EVP_PKEY* key, bool force) {
  EMBER_ASSIGN_OR_RETURN(FILE * f, create(path, 0600, force));
  const bool ok = PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  if (std::fclose(f) != 0 || !ok) return io_error(path + ": cannot write the key: " + openssl_errors());
  return Status::OK();
}

Status write_cert(const std::string& path, X509* cert, bool force) {
  EMBER_ASSIGN_OR_RETURN(FILE * f, create(path, 0644, force));
  const bool ok = PEM_write_X509(f, cert) == 1;
  if (std::fclose(f) != 0 || !ok) return io_error(path + ": cannot write the certificate: " + openssl_errors());
  return Status::OK();
}

Status add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext)
    return invalid_argument("the extension " + std::string(OBJ_nid2sn(nid)) + " = " + value + ": " + openssl_errors());
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  if (!ok) return internal_error("adding " + std::string(OBJ_nid2sn(nid)) + ": " + openssl_errors());
  return Status::OK();
}

/// A certificate of `key` for `subject`, valid `days`, with a random serial; not signed yet.
Result<Cert> new_cert(EVP_PKEY* key, const std::vector<std::pair<std::string, std::string>>& subject, uint32_t days) {
  Cert cert(X509_new());
  if (!cert) return internal_error("X509_new: " + openssl_errors());
  X509_set_version(cert.get(), 2);
  std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>> serial(BN_new());
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      !BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get()))) {
    return internal_error("a serial number: " + openssl_errors());
  }
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300);  // five minutes of clock skew
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(days) * 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  for (const auto& [field, value] : subject) {
    if (X509_NAME_add_entry_by_txt(name, field.c_str(), MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1, 0) != 1) {
      return invalid_argument("the subject's " + field + " '" + value + "': " + openssl_errors());
    }
  }
  return cert;
}

Result<Key> read_key(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return io_error(path + ": cannot read: " + std::strerror(errno) + " (run `ember certs init` first)");
  Key key(PEM_read_PrivateKey(f, nullptr, nullptr, nullptr));
  std::fclose(f);
  if (!key) return invalid_argument(path + ": not a PEM private key: " + openssl_errors());
  return key;
}

Result<Cert> read_cert(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return io_error(path + ": cannot read: " + std::strerror(errno) + " (run `ember certs init` first)");
  Cert cert(PEM_read_X509(f, nullptr, nullptr, nullptr));
  std::fclose(f);
  if (!cert) return invalid_argument(path + ": not a PEM certificate: " + openssl_errors());
  return cert;
}

Status check_days(uint32_t days) {
  if (days < 1 || days > 36500) return invalid_argument("--days: " + std::to_string(days) + " is outside 1..36500");
  return Status::OK();
}

Status make_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error(dir + ": cannot create: " + ec.message());
  return Status::OK();
}

}  // namespace

Status init_ca(const std::string& dir, const std::string& name, uint32_t days, bool force) {
  EMBER_RETURN_IF_ERROR(check_days(days));
  EMBER_RETURN_IF_ERROR(make_dir(dir));
  ERR_clear_error();
  EMBER_ASSIGN_OR_RETURN(Key key, new_key());
  EMBER_ASSIGN_OR_RETURN(Cert cert, new_cert(key.get(), {{"O", "ember"}, {"CN", name}}, days));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  EMBER_RETURN_IF_ERROR(add_extension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE"));
  EMBER_RETURN_IF_ERROR(add_extension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  EMBER_RETURN_IF_ERROR(add_extension(cert.get(), cert.get(), NID_subject_key_identifier, "hash"));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return internal_error("signing the CA: " + openssl_errors());
  EMBER_RETURN_IF_ERROR(write_key(dir + "/ca.key", key.get(), force));
  return write_cert(dir + "/ca.crt", cert.get(), force);
}

Status issue_certificate(const std::string& dir, const CertificateRequest& r) {
  EMBER_RETURN_IF_ERROR(check_days(r.days));
  if (r.name.empty() || r.name.size() > 64 ||
      r.name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
          std::string::npos ||
      r.name[0] == '.') {
    return invalid_argument("--name: '" + r.name + "' is not 1..64 of A-Z a-z 0-9 . _ - (not starting with '.')");
  }
  const auto& roles = certificate_roles();
  if (std::find(roles.begin(), roles.end(), r.role) == roles.end()) {
    return invalid_argument("--role: '" + r.role + "' is none of manager, gateway, node, console, client");
  }
  std::string sans;
  for (const auto& san : r.subject_alt_names) {
    if (san.empty() || san.find_first_of(", \t") != std::string::npos) {
      return invalid_argument("--san: '" + san + "' is not one address or DNS name");
    }
    unsigned char buf[16];
    const bool ip = ::inet_pton(AF_INET, san.c_str(), buf) == 1 || ::inet_pton(AF_INET6, san.c_str(), buf) == 1;
    if (!sans.empty()) sans += ',';
    sans += ip ? "IP:" : "DNS:";
    sans += san;
  }
  ERR_clear_error();
  EMBER_ASSIGN_OR_RETURN(Key ca_key, read_key(dir + "/ca.key"));
  EMBER_ASSIGN_OR_RETURN(Cert ca, read_cert(dir + "/ca.crt"));
  if (X509_check_private_key(ca.get(), ca_key.get()) != 1) {
    return invalid_argument(dir + "/ca.key is not the key of " + dir + "/ca.crt");
  }
  EMBER_ASSIGN_OR_RETURN(Key key, new_key());
  EMBER_ASSIGN_OR_RETURN(Cert cert, new_cert(key.get(), {{"O", "ember"}, {"OU", r.role}, {"CN", r.name}}, r.days));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca.get()));
  EMBER_RETURN_IF_ERROR(add_extension(cert.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE"));
  EMBER_RETURN_IF_ERROR(
      add_extension(cert.get(), ca.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment"));
  EMBER_RETURN_IF_ERROR(add_extension(cert.get(), ca.get(), NID_ext_key_usage, "serverAuth,clientAuth"));
  EMBER_RETURN_IF_ERROR(add_extension(cert.get(), ca.get(), NID_subject_key_identifier, "hash"));
  EMBER_RETURN_IF_ERROR(add_extension(cert.get(), ca.get(), NID_authority_key_identifier, "keyid:always"));
  if (!sans.empty()) EMBER_RETURN_IF_ERROR(add_extension(cert.get(), ca.get(), NID_subject_alt_name, sans));
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0) {
    return internal_error("signing " + r.name + ": " + openssl_errors());
  }
  EMBER_RETURN_IF_ERROR(write_key(dir + "/" + r.name + ".key", key.get(), r.force));
  return write_cert(dir + "/" + r.name + ".crt", cert.get(), r.force);
}

}  // namespace ember::security

namespace ember::security {

namespace {

/// The text of the subject's `nid` entry ("" when it has none).
std::string subject_entry(X509* cert, int nid) {
  char buf[256] = {0};
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), nid, buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

/// The certificate's DNS names and IP addresses, as `ember certs issue --san` takes them.
std::vector<std::string> alt_names(X509* cert) {
  std::vector<std::string> out;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (!names) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names, i);
    if (g->type == GEN_DNS) {
      const auto* s = g->d.dNSName;
      out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                       static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (g->type == GEN_IPADD) {
      const auto* s = g->d.iPAddress;
      char text[INET6_ADDRSTRLEN] = {0};
      const int family = ASN1_STRING_length(s) == 4 ? AF_INET : AF_INET6;
      if (::inet_ntop(family, ASN1_STRING_get0_data(s), text, sizeof(text))) out.emplace_back(text);
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

}  // namespace

Result<Rotation> rotate_ca(const std::string& dir, uint32_t days, uint32_t ca_days, bool force) {
  EMBER_RETURN_IF_ERROR(check_days(days));
  EMBER_RETURN_IF_ERROR(check_days(ca_days));
  ERR_clear_error();
  EMBER_ASSIGN_OR_RETURN(Cert old_ca, read_cert(dir + "/ca.crt"));
  Rotation out;
  out.next_dir = dir + "/next";
  std::error_code ec;
  if (std::filesystem::exists(out.next_dir, ec) && !force) {
    return invalid_argument(out.next_dir + " exists already: a rotation is under way (--force to start it again)");
  }
  const std::string old_name = subject_entry(old_ca.get(), NID_commonName);
  EMBER_RETURN_IF_ERROR(init_ca(out.next_dir, old_name.empty() ? "ember cluster CA" : old_name, ca_days, force));
  EMBER_ASSIGN_OR_RETURN(Cert new_ca, read_cert(out.next_dir + "/ca.crt"));
  {
    EMBER_ASSIGN_OR_RETURN(FILE * f, create(out.next_dir + "/ca-bundle.crt", 0644, force));
    const bool ok = PEM_write_X509(f, new_ca.get()) == 1 && PEM_write_X509(f, old_ca.get()) == 1;
    if (std::fclose(f) != 0 || !ok) return io_error(out.next_dir + "/ca-bundle.crt: cannot write: " + openssl_errors());
  }
  std::vector<std::filesystem::path> certs;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".crt" && e.path().filename() != "ca.crt")
      certs.push_back(e.path());
  }
  if (ec) return io_error(dir + ": cannot list: " + ec.message());
  std::sort(certs.begin(), certs.end());
  for (const auto& path : certs) {
    auto cert = read_cert(path.string());
    // Only what this CA signed (a certificate of another CA kept here is none of the rotation's business).
    if (!cert.ok() || X509_check_issued(old_ca.get(), cert->get()) != X509_V_OK) continue;
    CertificateRequest r;
    r.name = path.stem().string();
    r.role = subject_entry(cert->get(), NID_organizationalUnitName);
    r.subject_alt_names = alt_names(cert->get());
    r.days = days;
    r.force = force;
    if (Status s = issue_certificate(out.next_dir, r); !s.ok()) {
      return Error(s.error().code(), path.string() + ": cannot re-issue: " + s.error().message());
    }
    out.reissued.push_back(r.name);
  }
  return out;
}

Result<std::string> certificate_name(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(Cert cert, read_cert(path));
  std::string name = common_name(cert.get());
  if (name.empty()) return invalid_argument(path + ": the certificate has no common name (CN=)");
  return name;
}

std::string common_name(X509* cert) { return subject_entry(cert, NID_commonName); }

}  // namespace ember::security
