// `ember certs`: a cluster's certificate authority and the certificates of its processes, made with
// OpenSSL's library (no shell-out). Keys are EC P-256; certificates are X.509 v3, SHA-256 signed.
//
//   init   DIR/ca.key (mode 0600) and DIR/ca.crt: a self-signed CA (CA:TRUE, keyCertSign, cRLSign).
//   issue  DIR/NAME.key (0600) and DIR/NAME.crt, signed by DIR/ca.*: subject CN=NAME, OU=ROLE,
//          O=ember; subjectAltName from the names given (an IP address as IP, anything else as DNS);
//          CA:FALSE, digitalSignature and keyEncipherment, serverAuth and clientAuth (a process is
//          both a server and a client on the control plane). The role (manager, gateway, node,
//          console, client) is written into the subject so that a later check can tell roles
//          apart; CAF's TLS cannot show it the peer's certificate (see the README, Security).
//
// Existing files are never overwritten unless `force`: re-issuing (rotation) is an explicit act.
// Serial numbers are 127 random bits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"

typedef struct x509_st X509;

namespace ember::security {

/// The roles a certificate may be issued for.
inline const std::vector<std::string>& certificate_roles() {
  static const std::vector<std::string> roles{"manager", "gateway", "node", "console", "client"};
  return roles;
}

/// Creates DIR (if needed), DIR/ca.key and DIR/ca.crt, valid `days` from now, subject CN=`name`.
Status init_ca(const std::string& dir, const std::string& name, uint32_t days, bool force);

struct CertificateRequest {
  std::string name;                            // CN, and the files' base name: [A-Za-z0-9._-], 1..64 characters
  std::string role;                            // one of certificate_roles()
  std::vector<std::string> subject_alt_names;  // "127.0.0.1", "gw-0.ember-gateway", ...
  uint32_t days = 365;
  bool force = false;
};

/// Issues DIR/NAME.key and DIR/NAME.crt signed by DIR/ca.key and DIR/ca.crt.
Status issue_certificate(const std::string& dir, const CertificateRequest& request);

/// What rotate_ca wrote.
struct Rotation {
  std::string next_dir;               // DIR/next
  std::vector<std::string> reissued;  // the names re-issued there
};

/// A new CA for the cluster, without touching what runs: DIR/next/ca.key and ca.crt (a new CA,
/// `ca_days`), DIR/next/ca-bundle.crt (the new CA, then DIR/ca.crt: a trust list that accepts both),
/// and for every DIR/NAME.crt that DIR/ca.crt signed, DIR/next/NAME.key and NAME.crt from the new CA
/// with the same name, role and alternative names (`days`). Refuses when DIR/next exists, unless
/// `force`. The rollout without downtime (README, Security): every process's tls_ca to the bundle,
/// restarted one at a time; then its certificate and key to DIR/next's, one at a time; then tls_ca
/// to DIR/next/ca.crt alone.
Result<Rotation> rotate_ca(const std::string& dir, uint32_t days, uint32_t ca_days, bool force);

/// The common name (CN=, `ember certs issue --name`) of the PEM certificate at `path`: the name a
/// member's certificate gives it. io_error for an unreadable file, invalid_argument for one without.
Result<std::string> certificate_name(const std::string& path);
/// The common name of `cert` ("" when it has none): the same, of a certificate in hand (a TLS
/// peer's).
std::string common_name(X509* cert);

}  // namespace ember::security
